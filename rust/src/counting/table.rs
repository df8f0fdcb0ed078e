//! The table pieces are counted into while text is scanned: the hot path of
//! counting, and so of training.
//!
//! Counting into a `HashMap<Vec<u8>, u64>` spent four fifths of its time in
//! the map (100 MB of the multilingual benchmark mix, one thread: 1.15 s, of
//! which cutting the text into pieces 0.22 s). A corpus has a long tail:
//! a tenth of its pieces lie outside the 50,000 most frequent, so about one
//! lookup in ten misses every cache, and each waited for its miss before the
//! next piece was cut. Three things make this table about twice as fast
//! (0.61 s on the same text; 300 MB: 3.6 s against 1.5 s), and its speed per
//! byte no longer falls as the table outgrows the caches:
//!
//! - **Lookups run behind the scanner.** When a piece is cut, the slot its
//!   hash points at is prefetched; the piece is looked up `LOOKAHEAD`
//!   pieces later, when the slot has arrived. The misses of many pieces
//!   overlap rather than follow one another (`Tally`).
//! - **A slot holds what a lookup compares.** Open addressing with linear
//!   probing over 32-byte slots (two to a cache line): a piece's first 16
//!   bytes and its length sit in the slot, so a piece of up to 16 bytes
//!   (99% of occurrences) is found or ruled out by the slot alone. Only the
//!   rest of a longer one is compared in the arena.
//! - **Keys live in one arena.** A new piece costs no allocation of its
//!   own; the map allocated a `Vec` per distinct piece and per thread.
//!
//! The pieces are the user's text, so they are hashed with a random key
//! (foldhash): text crafted to collide under a known hash would pile its
//! pieces into one probe sequence. The key is the same for every table of
//! the process (`PieceTable::sum` shares pieces out by hash, and that must
//! agree between tables); counts never depend on it.

use std::hash::BuildHasher;
use std::sync::LazyLock;

use rayon::prelude::*;
use rustc_hash::FxHashMap;

use super::PieceCounts;
use crate::vocab::prefix;

/// How many pieces a lookup runs behind the scanner: enough for the
/// prefetches of the ones in between to cover a miss to memory (8, 16 and
/// 32 measured within noise of each other; 16 keeps the ring small).
const LOOKAHEAD: usize = 16;

/// Slots of a new table (a power of two).
const FIRST_SLOTS: usize = 1 << 12;

/// The key of every table's hash.
static HASHER: LazyLock<foldhash::fast::RandomState> = LazyLock::new(Default::default);

/// Pieces longer than this (or past `MAX_START` bytes of keys) are counted
/// in a map beside the slots, whose length field holds 24 bits.
const MAX_LEN: usize = (1 << 24) - 1;
const MAX_START: usize = 1 << 40;

/// A piece's first 16 bytes, zero-padded: with its length, the whole of a
/// short piece.
#[inline(always)]
fn head(piece: &[u8]) -> [u64; 2] {
    [prefix(piece), prefix(piece.get(8..).unwrap_or_default())]
}

/// A piece's hash, from its head when that is the whole piece.
#[inline(always)]
fn hash(piece: &[u8], head: [u64; 2]) -> u64 {
    if piece.len() <= 16 {
        HASHER.hash_one((head[0], head[1], piece.len() as u8))
    } else {
        HASHER.hash_one(piece)
    }
}

fn hash_of(piece: &[u8]) -> u64 {
    hash(piece, head(piece))
}

/// One entry: 32 bytes, aligned so that none straddles a cache line.
#[derive(Clone, Copy)]
#[repr(C, align(32))]
struct Slot {
    head: [u64; 2],
    /// Zero: the slot is free (a piece in the table was seen at least once).
    count: u64,
    /// The key's offset in the arena (high 40 bits) and length (low 24).
    place: u64,
}

impl Slot {
    fn start(&self) -> usize {
        (self.place >> 24) as usize
    }

    fn len(&self) -> usize {
        (self.place & MAX_LEN as u64) as usize
    }
}

/// Pieces and their counts, as `Counter` counts them; turned into a
/// `PieceCounts` by `sum`.
pub struct PieceTable {
    /// A power of two, never more than 70% full.
    slots: Vec<Slot>,
    /// Slots in use.
    used: usize,
    /// Every key, one after another.
    keys: Vec<u8>,
    /// Pieces too long for a slot.
    outsized: FxHashMap<Vec<u8>, u64>,
    /// Bytes of text counted.
    pub text_bytes: u64,
}

/// `n` free slots. Zeroed memory straight from the allocator: fresh pages
/// come zeroed from the kernel, and writing the slots one by one would
/// touch all of them a second time (tables reach tens of megabytes).
fn free_slots(n: usize) -> Vec<Slot> {
    let layout = std::alloc::Layout::array::<Slot>(n).expect("a table fits in memory");
    // SAFETY: the layout is `n` slots, non-zero in size; all-zero bytes are
    // a valid (free) `Slot`, which holds only integers; the vector takes
    // over the allocation with that layout's size and alignment.
    unsafe {
        let memory = std::alloc::alloc_zeroed(layout).cast::<Slot>();
        if memory.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        Vec::from_raw_parts(memory, n, n)
    }
}

impl Default for PieceTable {
    fn default() -> Self {
        PieceTable {
            slots: free_slots(FIRST_SLOTS),
            used: 0,
            keys: Vec::new(),
            outsized: FxHashMap::default(),
            text_bytes: 0,
        }
    }
}

impl PieceTable {
    /// Distinct pieces.
    pub fn len(&self) -> usize {
        self.used + self.outsized.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Counts pieces through a `Tally`, which looks them up a few pieces
    /// behind (the pieces it holds must outlive it).
    pub fn tally<'t>(&mut self) -> Tally<'_, 't> {
        Tally {
            table: self,
            ring: [Pending::default(); LOOKAHEAD],
            next: 0,
            held: 0,
        }
    }

    /// Counts one occurrence of a piece now.
    pub fn add(&mut self, piece: &[u8]) {
        let head = head(piece);
        self.add_hashed(piece, head, hash(piece, head));
    }

    /// The pieces and their counts, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], u64)> {
        self.slots
            .iter()
            .filter(|slot| slot.count != 0)
            .map(|slot| (self.key(slot), slot.count))
            .chain(
                self.outsized
                    .iter()
                    .map(|(piece, &count)| (piece.as_slice(), count)),
            )
    }

    fn key(&self, slot: &Slot) -> &[u8] {
        &self.keys[slot.start()..slot.start() + slot.len()]
    }

    /// The slot a hash points at: its top bits, so that growing the table
    /// spreads each run of slots over twice as many.
    #[inline(always)]
    fn home(&self, hash: u64) -> usize {
        (hash >> (64 - self.slots.len().trailing_zeros())) as usize
    }

    #[inline(always)]
    fn prefetch(&self, hash: u64) {
        let slot = &self.slots[self.home(hash)];
        #[cfg(target_arch = "x86_64")]
        // SAFETY: a prefetch is only a hint; it reads nothing and cannot
        // fault, and the pointer is to a live slot anyway.
        unsafe {
            use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
            _mm_prefetch::<_MM_HINT_T0>((slot as *const Slot).cast());
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = slot;
    }

    #[inline(always)]
    fn add_hashed(&mut self, piece: &[u8], head: [u64; 2], hash: u64) {
        let len = piece.len();
        if len > MAX_LEN {
            *self.outsized.entry(piece.to_vec()).or_insert(0) += 1;
            return;
        }
        let mask = self.slots.len() - 1;
        let mut at = self.home(hash);
        loop {
            let slot = &mut self.slots[at];
            if slot.count == 0 {
                break;
            }
            if slot.head == head
                && slot.len() == len
                && (len <= 16 || self.keys[slot.start() + 16..slot.start() + len] == piece[16..])
            {
                slot.count += 1;
                return;
            }
            at = (at + 1) & mask;
        }
        if self.keys.len() >= MAX_START {
            // No slot holds it (none is added from here on).
            *self.outsized.entry(piece.to_vec()).or_insert(0) += 1;
            return;
        }
        self.slots[at] = Slot {
            head,
            count: 1,
            place: (self.keys.len() as u64) << 24 | len as u64,
        };
        self.keys.extend_from_slice(piece);
        self.used += 1;
        if self.used * 10 > self.slots.len() * 7 {
            self.grow();
        }
    }

    /// Doubles the slots. Each key is hashed again (slots do not keep their
    /// hash: the room is worth more to lookups than to growing).
    fn grow(&mut self) {
        let slots = free_slots(2 * self.slots.len());
        let old = std::mem::replace(&mut self.slots, slots);
        let mask = self.slots.len() - 1;
        for slot in old.into_iter().filter(|slot| slot.count != 0) {
            let mut at = self.home(hash(self.key(&slot), slot.head));
            while self.slots[at].count != 0 {
                at = (at + 1) & mask;
            }
            self.slots[at] = slot;
        }
    }

    /// The sum of many tables, as one `PieceCounts`, on all cores: the
    /// pieces are shared out by hash, each share is summed on its own (its
    /// pieces are in no other share), and only joining the shares into one
    /// map is left to one thread.
    pub fn sum(tables: Vec<PieceTable>) -> PieceCounts {
        let text_bytes = tables.iter().map(|table| table.text_bytes).sum();
        // A power of two: the share is the hash's low bits, which `home`
        // does not use.
        let shares = (4 * rayon::current_num_threads()).next_power_of_two();
        // Each table's slots, a run at a time, split by share.
        let runs: Vec<(&PieceTable, &[Slot])> = tables
            .iter()
            .flat_map(|table| table.slots.chunks(1 << 16).map(move |run| (table, run)))
            .collect();
        let split: Vec<Vec<Pieces>> = runs
            .into_par_iter()
            .map(|(table, run)| {
                let mut by_share = vec![Vec::new(); shares];
                for slot in run.iter().filter(|slot| slot.count != 0) {
                    let key = table.key(slot);
                    by_share[hash(key, slot.head) as usize & (shares - 1)].push((key, slot.count));
                }
                by_share
            })
            .collect();
        let mut by_share: Vec<Vec<Pieces>> = (0..shares).map(|_| Vec::new()).collect();
        let mut outsized = vec![Vec::new(); shares];
        for (piece, &count) in tables.iter().flat_map(|table| &table.outsized) {
            outsized[hash_of(piece) as usize & (shares - 1)].push((piece.as_slice(), count));
        }
        for run in split.into_iter().chain([outsized]) {
            for (share, pieces) in by_share.iter_mut().zip(run) {
                share.push(pieces);
            }
        }
        let one_table = tables.len() == 1;
        let summed: Vec<Vec<(Vec<u8>, u64)>> = by_share
            .into_par_iter()
            .map(|lists| {
                if one_table {
                    // No piece is in two lists.
                    return lists
                        .into_iter()
                        .flatten()
                        .map(|(key, count)| (key.to_vec(), count))
                        .collect();
                }
                let mut counts: FxHashMap<&[u8], u64> = FxHashMap::default();
                counts.reserve(lists.iter().map(Vec::len).max().unwrap_or(0));
                for (key, count) in lists.into_iter().flatten() {
                    *counts.entry(key).or_insert(0) += count;
                }
                counts
                    .into_iter()
                    .map(|(key, count)| (key.to_vec(), count))
                    .collect()
            })
            .collect();
        let mut counts = FxHashMap::default();
        counts.reserve(summed.iter().map(Vec::len).sum());
        for share in summed {
            counts.extend(share);
        }
        PieceCounts {
            counts,
            text_bytes,
            dropped: Default::default(),
        }
    }
}

/// Pieces and their counts, one after another.
type Pieces<'a> = Vec<(&'a [u8], u64)>;

/// A piece waiting in a `Tally` for its slot to arrive.
#[derive(Clone, Copy, Default)]
struct Pending<'t> {
    piece: &'t [u8],
    head: [u64; 2],
    hash: u64,
}

/// Counts pieces into a table `LOOKAHEAD` pieces behind: each piece's slot
/// is prefetched when it comes, and the piece looked up when the ring comes
/// round to it again. The pieces still held are counted when it is dropped.
pub struct Tally<'a, 't> {
    table: &'a mut PieceTable,
    ring: [Pending<'t>; LOOKAHEAD],
    /// Where the next piece goes (and the oldest held is).
    next: usize,
    /// Pieces held, up to `LOOKAHEAD`.
    held: usize,
}

impl<'t> Tally<'_, 't> {
    #[inline(always)]
    pub fn add(&mut self, piece: &'t [u8]) {
        let head = head(piece);
        let pending = Pending {
            piece,
            head,
            hash: hash(piece, head),
        };
        self.table.prefetch(pending.hash);
        let oldest = std::mem::replace(&mut self.ring[self.next], pending);
        if self.held == LOOKAHEAD {
            self.table
                .add_hashed(oldest.piece, oldest.head, oldest.hash);
        } else {
            self.held += 1;
        }
        self.next = (self.next + 1) % LOOKAHEAD;
    }
}

impl Drop for Tally<'_, '_> {
    fn drop(&mut self) {
        for k in LOOKAHEAD - self.held..LOOKAHEAD {
            let pending = self.ring[(self.next + k) % LOOKAHEAD];
            self.table
                .add_hashed(pending.piece, pending.head, pending.hash);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pieces that stress the table: short and long, sharing their first
    /// eight bytes, with zero bytes (a short key is zero-padded), and enough
    /// distinct ones to make it grow many times.
    fn pieces() -> Vec<Vec<u8>> {
        let mut state = 7u64;
        (0..300_000)
            .map(|_| {
                state = state
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let n = (state >> 33) % 60_000;
                match state >> 62 {
                    0 => format!("{n}").into_bytes(),
                    1 => format!("internationalization{n}").into_bytes(),
                    2 => {
                        let mut piece = vec![b'a'; (n % 12) as usize];
                        piece.push(0);
                        piece
                    }
                    _ => vec![0; (n % 20) as usize + 1],
                }
            })
            .collect()
    }

    fn map_of(pieces: &[Vec<u8>]) -> FxHashMap<Vec<u8>, u64> {
        let mut map = FxHashMap::default();
        for piece in pieces {
            *map.entry(piece.clone()).or_insert(0) += 1;
        }
        map
    }

    #[test]
    fn counts_as_a_hash_map_does() {
        let pieces = pieces();
        let mut tallied = PieceTable::default();
        let mut added = PieceTable::default();
        {
            let mut tally = tallied.tally();
            for piece in &pieces {
                tally.add(piece);
            }
        }
        for piece in &pieces {
            added.add(piece);
        }
        let expected = map_of(&pieces);
        for table in [tallied, added] {
            assert_eq!(table.len(), expected.len());
            let counted: FxHashMap<Vec<u8>, u64> =
                table.iter().map(|(k, c)| (k.to_vec(), c)).collect();
            assert_eq!(counted, expected);
        }
    }

    #[test]
    fn a_tally_shorter_than_its_ring_counts_everything() {
        let mut table = PieceTable::default();
        {
            let mut tally = table.tally();
            for piece in [b"a".as_slice(), b"b", b"a"] {
                tally.add(piece);
            }
        }
        let counted: FxHashMap<&[u8], u64> = table.iter().collect();
        assert_eq!(counted.len(), 2);
        assert_eq!(counted[b"a".as_slice()], 2);
        drop(table.tally());
        assert_eq!(table.len(), 2);
    }

    #[test]
    fn pieces_too_long_for_a_slot_are_counted_beside() {
        let long = vec![b'x'; MAX_LEN + 1];
        let mut tables: Vec<PieceTable> = (0..2).map(|_| PieceTable::default()).collect();
        for table in &mut tables {
            let mut tally = table.tally();
            for piece in [long.as_slice(), b"a", long.as_slice()] {
                tally.add(piece);
            }
        }
        assert_eq!(tables[0].len(), 2);
        let sum = PieceTable::sum(tables);
        assert_eq!(sum.counts.len(), 2);
        assert_eq!(sum.counts[&long], 4);
        assert_eq!(sum.counts[b"a".as_slice()], 2);
    }

    #[test]
    fn sums_equal_one_map() {
        let pieces = pieces();
        for parts in [1, 3] {
            let tables: Vec<PieceTable> = pieces
                .chunks(pieces.len() / parts + 1)
                .map(|part| {
                    let mut table = PieceTable::default();
                    part.iter().for_each(|piece| table.add(piece));
                    table.text_bytes = part.len() as u64;
                    table
                })
                .collect();
            let sum = PieceTable::sum(tables);
            assert_eq!(sum.counts, map_of(&pieces));
            assert_eq!(sum.text_bytes, pieces.len() as u64);
        }
    }
}
