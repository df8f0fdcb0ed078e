//! The table pieces are counted in: the hot path of counting, and so of
//! training.
//!
//! Counting into a `HashMap<Vec<u8>, u64>` spent four fifths of its time in
//! the map (100 MB of the multilingual benchmark mix, one thread: 1.15 s, of
//! which cutting the text into pieces 0.22 s). A corpus has a long tail:
//! a tenth of its pieces lie outside the 50,000 most frequent, so about one
//! lookup in ten misses every cache, and each waited for its miss before the
//! next piece was cut. With this table, counting 1 GB of that mix on two
//! threads takes 2.6 s rather than 6.0 s (`bench/counting.py`), and its
//! cost per byte no longer grows as the table outgrows the caches:
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
//! - **Keys live in arenas.** A new piece costs no allocation of its own;
//!   the map allocated a `Vec` per distinct piece, per thread.
//! - **Shards.** The table is `SHARDS` tables, a piece's shard the top bits
//!   of its hash. Two tables hold the same pieces in the same shards, so
//!   adding one into another (the counts of each thread, or of each worker)
//!   runs shard by shard on all cores.
//!
//! - **Tables of one job share a key.** Tables hashed with the same key
//!   hold each piece in the same shard, at the same place relative to the
//!   shard's size, so a table sent from another process (`transfer.rs`)
//!   is added shard by shard, each shard's pieces in the order of their
//!   slots: a sweep through memory rather than a miss per piece.
//!
//! The pieces are the user's text, so they are hashed with a random key
//! (foldhash): text crafted to collide under a known hash would pile its
//! pieces into one probe sequence. Every table of a process has the same
//! key (`process_key`) unless it is made with another (the tables of the
//! workers of one Ray job take the driver's); tables with different keys
//! still add, piece by piece. Counts never depend on the key, nor on the
//! order pieces are kept in.

use std::hash::BuildHasher;
use std::sync::LazyLock;

use foldhash::fast::FixedState;

use rayon::prelude::*;
use rustc_hash::FxHashMap;

use crate::huge_pages::{HugeTable, Zeroable};
use crate::vocab::prefix;

/// How many pieces a lookup runs behind the scanner: enough for the
/// prefetches of the ones in between to cover a miss to memory (8, 16 and
/// 32 measured within noise of each other; 16 keeps the ring small).
const LOOKAHEAD: usize = 16;

const SHARD_BITS: u32 = 6;
pub(super) const SHARDS: usize = 1 << SHARD_BITS;

/// Tables with fewer pieces than this are added on the calling thread.
const SERIAL_PIECES: usize = 1 << 14;

/// Slots of a new shard (a power of two).
const FIRST_SLOTS: usize = 16;

/// Pieces longer than this are counted in a map beside the shards (a
/// slot's length field holds 24 bits, its arena offset 40).
pub(super) const MAX_LEN: usize = (1 << 24) - 1;
const MAX_START: usize = 1 << 40;

/// The key of this process's tables: random, from the operating system.
static PROCESS_KEY: LazyLock<u64> =
    LazyLock::new(|| std::collections::hash_map::RandomState::new().hash_one(0u64));

/// The key tables of this process hash with, unless made with another.
pub fn process_key() -> u64 {
    *PROCESS_KEY
}

/// A piece's first 16 bytes, zero-padded: with its length, the whole of a
/// short piece.
#[inline(always)]
fn head(piece: &[u8]) -> [u64; 2] {
    [prefix(piece), prefix(piece.get(8..).unwrap_or_default())]
}

/// A piece's hash under a table's key, from its head when that is the
/// whole piece. (Making the hasher from the key is one XOR.)
#[inline(always)]
fn hash(key: u64, piece: &[u8], head: [u64; 2]) -> u64 {
    let hasher = FixedState::with_seed(key);
    if piece.len() <= 16 {
        hasher.hash_one((head[0], head[1], piece.len() as u8))
    } else {
        hasher.hash_one(piece)
    }
}

#[inline(always)]
fn shard_of(hash: u64) -> usize {
    (hash >> (64 - SHARD_BITS)) as usize
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

// SAFETY: a `Slot` holds only integers; all zero is a free slot.
unsafe impl Zeroable for Slot {}

/// Where a `Tally` puts pieces: a table, or one shard of one.
pub trait Sink {
    /// A piece's hash under the sink's key.
    fn hash(&self, piece: &[u8], head: [u64; 2]) -> u64;
    fn prefetch(&self, hash: u64);
    fn add_hashed(&mut self, piece: &[u8], head: [u64; 2], hash: u64, count: u64);
}

/// One open-addressing table of the pieces of one shard.
#[derive(Clone)]
pub struct Shard {
    /// A power of two, never more than 70% full.
    /// Zeroed (free) when made: fresh pages come zeroed from the kernel,
    /// and writing the slots one by one would touch all of them a second
    /// time (tables reach tens of megabytes); from 2 MB on, on huge pages
    /// (`huge_pages.rs`), since lookups land anywhere in them.
    slots: HugeTable<Slot>,
    /// Slots in use.
    used: usize,
    /// Every key, one after another.
    keys: Vec<u8>,
    /// The key of the table's hash.
    table_key: u64,
}

/// Slots for `pieces` pieces at most 70% full.
fn slots_for(pieces: usize) -> usize {
    (pieces * 10 / 7 + 1).next_power_of_two().max(FIRST_SLOTS)
}

impl Shard {
    /// A shard with room for `pieces` pieces before it grows.
    fn with_capacity(table_key: u64, pieces: usize) -> Self {
        Shard {
            slots: HugeTable::zeroed(slots_for(pieces)),
            used: 0,
            keys: Vec::new(),
            table_key,
        }
    }

    fn key(&self, slot: &Slot) -> &[u8] {
        &self.keys[slot.start()..slot.start() + slot.len()]
    }

    /// The pieces and their counts in the order of their slots: for a
    /// table of the same key, nearly the order of their places.
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], u64)> {
        self.slots
            .iter()
            .filter(|slot| slot.count != 0)
            .map(|slot| (self.key(slot), slot.count))
    }

    /// The slot a hash points at: the bits below the shard's, so that
    /// growing the table spreads each run of slots over twice as many.
    #[inline(always)]
    fn home(&self, hash: u64) -> usize {
        ((hash << SHARD_BITS) >> (64 - self.slots.len().trailing_zeros())) as usize
    }

    /// The slot that holds `piece`, or the free one where it would go.
    #[inline(always)]
    fn find(&self, piece: &[u8], head: [u64; 2], hash: u64) -> usize {
        let mask = self.slots.len() - 1;
        let mut at = self.home(hash);
        loop {
            let slot = &self.slots[at];
            if slot.count == 0
                || slot.head == head
                    && slot.len() == piece.len()
                    && (piece.len() <= 16
                        || self.keys[slot.start() + 16..slot.start() + slot.len()] == piece[16..])
            {
                return at;
            }
            at = (at + 1) & mask;
        }
    }

    /// Room for `pieces` pieces in all before the shard grows.
    fn reserve(&mut self, pieces: usize) {
        if slots_for(pieces) > self.slots.len() {
            self.resize(slots_for(pieces));
        }
        self.keys.reserve(pieces.saturating_sub(self.used) * 4);
    }

    /// Doubles the slots.
    fn grow(&mut self) {
        self.resize(2 * self.slots.len());
    }

    /// Moves the pieces to `n` slots (a power of two). Each key is hashed
    /// again (slots do not keep their hash: the room is worth more to
    /// lookups than to growing).
    fn resize(&mut self, n: usize) {
        let old = std::mem::replace(&mut self.slots, HugeTable::zeroed(n));
        let mask = self.slots.len() - 1;
        for &slot in old.iter().filter(|slot| slot.count != 0) {
            let mut at = self.home(hash(self.table_key, self.key(&slot), slot.head));
            while self.slots[at].count != 0 {
                at = (at + 1) & mask;
            }
            self.slots[at] = slot;
        }
    }

    /// Adds every piece of `other` (the same shard of another table).
    fn add_shard(&mut self, other: &Shard, scale: impl Fn(u64) -> u64) {
        let mut tally = Tally::new(self);
        for (piece, count) in other.iter() {
            tally.add_count(piece, scale(count));
        }
    }
}

impl Sink for Shard {
    #[inline(always)]
    fn hash(&self, piece: &[u8], head: [u64; 2]) -> u64 {
        hash(self.table_key, piece, head)
    }

    #[inline(always)]
    fn prefetch(&self, hash: u64) {
        crate::prefetch::line(&self.slots[self.home(hash)]);
    }

    /// Counts `count` more occurrences of a piece no longer than `MAX_LEN`
    /// (saturating: counts scaled up may reach the limit).
    #[inline(always)]
    fn add_hashed(&mut self, piece: &[u8], head: [u64; 2], hash: u64, count: u64) {
        let at = self.find(piece, head, hash);
        let slot = &mut self.slots[at];
        if slot.count != 0 {
            slot.count = slot.count.saturating_add(count);
            return;
        }
        assert!(self.keys.len() < MAX_START, "a terabyte of distinct pieces");
        *slot = Slot {
            head,
            count,
            place: (self.keys.len() as u64) << 24 | piece.len() as u64,
        };
        self.keys.extend_from_slice(piece);
        self.used += 1;
        if self.used * 10 > self.slots.len() * 7 {
            self.grow();
        }
    }
}

/// Pieces and how often each was seen: `SHARDS` open-addressing tables,
/// and a map of the rare piece too long for a slot.
#[derive(Clone)]
pub struct PieceTable {
    key: u64,
    shards: Vec<Shard>,
    outsized: FxHashMap<Vec<u8>, u64>,
}

impl Default for PieceTable {
    fn default() -> Self {
        PieceTable::with_capacity(0)
    }
}

impl std::fmt::Debug for PieceTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PieceTable({} pieces)", self.len())
    }
}

/// Equal tables hold the same pieces with the same counts.
impl PartialEq for PieceTable {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len()
            && self
                .iter()
                .all(|(piece, count)| other.get(piece) == Some(count))
    }
}

impl Sink for PieceTable {
    #[inline(always)]
    fn hash(&self, piece: &[u8], head: [u64; 2]) -> u64 {
        hash(self.key, piece, head)
    }

    #[inline(always)]
    fn prefetch(&self, hash: u64) {
        self.shards[shard_of(hash)].prefetch(hash);
    }

    #[inline(always)]
    fn add_hashed(&mut self, piece: &[u8], head: [u64; 2], hash: u64, count: u64) {
        if piece.len() > MAX_LEN {
            let total = self.outsized.entry(piece.to_vec()).or_insert(0);
            *total = total.saturating_add(count);
        } else {
            self.shards[shard_of(hash)].add_hashed(piece, head, hash, count);
        }
    }
}

impl PieceTable {
    /// A table with room for about `pieces` pieces before it grows (known
    /// when reading a count file, or pruning: growing rehashes every key).
    pub fn with_capacity(pieces: usize) -> Self {
        PieceTable::with_key(process_key(), pieces)
    }

    /// An empty table hashing with `key`, with room for about `pieces`
    /// pieces.
    pub fn with_key(key: u64, pieces: usize) -> Self {
        // A shard's share, with room for the shards' uneven shares.
        let share = pieces / SHARDS + pieces / SHARDS / 8;
        PieceTable {
            key,
            shards: (0..SHARDS)
                .map(|_| Shard::with_capacity(key, share))
                .collect(),
            outsized: FxHashMap::default(),
        }
    }

    /// The key the table hashes with.
    pub fn key(&self) -> u64 {
        self.key
    }

    /// The shards, whose pieces `fill_shards` takes back into a table of
    /// the same key.
    pub fn shards(&self) -> &[Shard] {
        &self.shards
    }

    /// The pieces too long for a slot (rare), with their counts.
    pub fn outsized(&self) -> impl Iterator<Item = (&[u8], u64)> {
        self.outsized
            .iter()
            .map(|(piece, &count)| (piece.as_slice(), count))
    }

    /// Distinct pieces.
    pub fn len(&self) -> usize {
        self.shards.iter().map(|shard| shard.used).sum::<usize>() + self.outsized.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Counts pieces through a `Tally`, which looks them up a few pieces
    /// behind (the pieces it holds must outlive it).
    pub fn tally<'t>(&mut self) -> Tally<'_, 't, PieceTable> {
        Tally::new(self)
    }

    /// Counts `count` more occurrences of a piece, now.
    pub fn add(&mut self, piece: &[u8], count: u64) {
        let head = head(piece);
        self.add_hashed(piece, head, self.hash(piece, head), count);
    }

    /// How often a piece was seen, if it was.
    pub fn get(&self, piece: &[u8]) -> Option<u64> {
        if piece.len() > MAX_LEN {
            return self.outsized.get(piece).copied();
        }
        let head = head(piece);
        let hash = self.hash(piece, head);
        let shard = &self.shards[shard_of(hash)];
        let slot = &shard.slots[shard.find(piece, head, hash)];
        (slot.count != 0).then_some(slot.count)
    }

    /// The pieces and their counts, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], u64)> {
        self.shards
            .iter()
            .flat_map(Shard::iter)
            .chain(self.outsized())
    }

    /// The pieces and their counts, shard by shard on all cores, in no
    /// particular order.
    pub fn par_iter(&self) -> impl ParallelIterator<Item = (&[u8], u64)> {
        self.shards.par_iter().flat_map_iter(Shard::iter).chain(
            self.outsized
                .par_iter()
                .map(|(piece, &count)| (piece.as_slice(), count)),
        )
    }

    /// Runs `work` on each shard (with its index), on all cores unless
    /// only `pieces` pieces are to be added: then handing 64 shards to the
    /// pool would cost more than the work (many small batches of texts are
    /// added one by one).
    fn for_each_shard(&mut self, pieces: usize, work: impl Fn(usize, &mut Shard) + Sync) {
        let work = |(i, shard): (usize, &mut Shard)| work(i, shard);
        if pieces < SERIAL_PIECES {
            self.shards.iter_mut().enumerate().for_each(work);
        } else {
            self.shards.par_iter_mut().enumerate().for_each(work);
        }
    }

    /// Adds another table's counts into this one, shard by shard on all
    /// cores.
    pub fn add_table(&mut self, other: &PieceTable) {
        self.add_tables(&[other], |count| count);
    }

    /// Adds other tables' counts, each mapped by `scale`, into this one,
    /// shard by shard on all cores (those hashing with another key, piece
    /// by piece).
    pub fn add_tables(&mut self, others: &[&PieceTable], scale: impl Fn(u64) -> u64 + Sync) {
        let (same, rekeyed): (Vec<&PieceTable>, Vec<&PieceTable>) =
            others.iter().partition(|other| other.key == self.key);
        let pieces = same.iter().map(|other| other.len()).sum();
        self.for_each_shard(pieces, |i, shard| {
            for other in &same {
                shard.add_shard(&other.shards[i], &scale);
            }
        });
        for other in &same {
            for (piece, count) in other.outsized() {
                self.add(piece, scale(count));
            }
        }
        let lists: Vec<Pieces> = rekeyed
            .iter()
            .map(|other| {
                other
                    .par_iter()
                    .map(|(piece, count)| (piece, scale(count)))
                    .collect()
            })
            .collect();
        self.add_lists(&lists.iter().map(Vec::as_slice).collect::<Vec<_>>());
    }

    /// Fills the shards, each on its own (on all cores): `fill(i, filler)`
    /// adds the pieces of shard `i` through `filler`, after room is made
    /// for `room(i, pieces there)` pieces in all. What each returned, or
    /// the first error (the table is then incomplete).
    pub fn fill_shards<T: Send, E: Send>(
        &mut self,
        room: impl Fn(usize, usize) -> usize + Sync,
        fill: impl Fn(usize, &mut ShardFiller<'_>) -> std::result::Result<T, E> + Sync,
    ) -> std::result::Result<Vec<T>, E> {
        self.shards
            .par_iter_mut()
            .enumerate()
            .map(|(i, shard)| {
                shard.reserve(room(i, shard.used));
                fill(i, &mut ShardFiller { shard, index: i })
            })
            .collect()
    }

    /// Adds lists of pieces and counts (a piece may be in several, or
    /// several times in one) on all cores: the pieces are sorted out by
    /// shard, a run of each list at a time, then each shard takes its own.
    pub fn add_lists(&mut self, lists: &[&[(&[u8], u64)]]) {
        let routed: Vec<Vec<Pieces>> = lists
            .par_iter()
            .flat_map(|list| list.par_chunks(1 << 16))
            .map(|run| {
                // One list per shard, and the outsized last.
                let mut by_shard = vec![Vec::new(); SHARDS + 1];
                for &(piece, count) in run {
                    let shard = if piece.len() > MAX_LEN {
                        SHARDS
                    } else {
                        shard_of(self.hash(piece, head(piece)))
                    };
                    by_shard[shard].push((piece, count));
                }
                by_shard
            })
            .collect();
        let pieces = lists.iter().map(|list| list.len()).sum();
        self.for_each_shard(pieces, |i, shard| {
            let mut tally = Tally::new(shard);
            for &(piece, count) in routed.iter().flat_map(|run| &run[i]) {
                tally.add_count(piece, count);
            }
        });
        for &(piece, count) in routed.iter().flat_map(|run| &run[SHARDS]) {
            self.add(piece, count);
        }
    }
}

/// Pieces and their counts, one after another.
type Pieces<'a> = Vec<(&'a [u8], u64)>;

/// Adds pieces to one shard of a table (`PieceTable::fill_shards`).
pub struct ShardFiller<'a> {
    shard: &'a mut Shard,
    index: usize,
}

impl ShardFiller<'_> {
    /// Counts `count` more occurrences of `piece`; false (and nothing
    /// counted) when the piece does not belong in this shard, or is too
    /// long for a slot.
    #[inline(always)]
    pub fn add(&mut self, piece: &[u8], count: u64) -> bool {
        let head = head(piece);
        let hash = self.shard.hash(piece, head);
        if piece.len() > MAX_LEN || shard_of(hash) != self.index {
            return false;
        }
        self.shard.add_hashed(piece, head, hash, count);
        true
    }
}

/// A piece waiting in a `Tally` for its slot to arrive.
#[derive(Clone, Copy, Default)]
struct Pending<'t> {
    piece: &'t [u8],
    head: [u64; 2],
    hash: u64,
    count: u64,
}

/// Counts pieces into a table `LOOKAHEAD` pieces behind: each piece's slot
/// is prefetched when it comes, and the piece looked up when the ring comes
/// round to it again. The pieces still held are counted when it is dropped.
pub struct Tally<'a, 't, S: Sink> {
    sink: &'a mut S,
    ring: [Pending<'t>; LOOKAHEAD],
    /// Where the next piece goes (and the oldest held is).
    next: usize,
    /// Pieces held, up to `LOOKAHEAD`.
    held: usize,
}

impl<'a, 't, S: Sink> Tally<'a, 't, S> {
    fn new(sink: &'a mut S) -> Self {
        Tally {
            sink,
            ring: [Pending::default(); LOOKAHEAD],
            next: 0,
            held: 0,
        }
    }

    /// Counts one occurrence of a piece.
    #[inline(always)]
    pub fn add(&mut self, piece: &'t [u8]) {
        self.add_count(piece, 1);
    }

    /// Counts `count` more occurrences of a piece.
    #[inline(always)]
    pub fn add_count(&mut self, piece: &'t [u8], count: u64) {
        let head = head(piece);
        let pending = Pending {
            piece,
            head,
            hash: self.sink.hash(piece, head),
            count,
        };
        self.sink.prefetch(pending.hash);
        let oldest = std::mem::replace(&mut self.ring[self.next], pending);
        if self.held == LOOKAHEAD {
            self.sink
                .add_hashed(oldest.piece, oldest.head, oldest.hash, oldest.count);
        } else {
            self.held += 1;
        }
        self.next = (self.next + 1) % LOOKAHEAD;
    }
}

impl<S: Sink> Drop for Tally<'_, '_, S> {
    fn drop(&mut self) {
        for k in LOOKAHEAD - self.held..LOOKAHEAD {
            let pending = self.ring[(self.next + k) % LOOKAHEAD];
            self.sink
                .add_hashed(pending.piece, pending.head, pending.hash, pending.count);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pieces that stress the table: short and long, sharing their first
    /// 16 bytes, with zero bytes (a short key is zero-padded), and enough
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
                        let mut piece = vec![b'a'; (n % 20) as usize];
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

    fn as_map(table: &PieceTable) -> FxHashMap<Vec<u8>, u64> {
        table.iter().map(|(k, c)| (k.to_vec(), c)).collect()
    }

    #[test]
    fn counts_as_a_hash_map_does() {
        let pieces = pieces();
        let expected = map_of(&pieces);
        let mut tallied = PieceTable::default();
        {
            let mut tally = tallied.tally();
            for piece in &pieces {
                tally.add(piece);
            }
        }
        let mut added = PieceTable::default();
        for piece in &pieces {
            added.add(piece, 1);
        }
        for table in [&tallied, &added] {
            assert_eq!(table.len(), expected.len());
            assert_eq!(as_map(table), expected);
            assert_eq!(table.par_iter().count(), expected.len());
        }
        assert!(tallied == added);
        for (piece, &count) in &expected {
            assert_eq!(tallied.get(piece), Some(count));
        }
        assert_eq!(tallied.get(b"not counted"), None);
        assert_eq!(tallied.get(&[0; 25]), None);
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
        assert_eq!(table.len(), 2);
        assert_eq!(table.get(b"a"), Some(2));
        drop(table.tally());
        assert_eq!(table.len(), 2);
    }

    #[test]
    fn pieces_too_long_for_a_slot_are_counted_beside() {
        let long = vec![b'x'; MAX_LEN + 1];
        let mut table = PieceTable::default();
        {
            let mut tally = table.tally();
            for piece in [long.as_slice(), b"a", long.as_slice()] {
                tally.add(piece);
            }
        }
        assert_eq!(table.len(), 2);
        assert_eq!(table.get(&long), Some(2));
        let copy = table.clone();
        table.add_table(&copy);
        assert_eq!(table.get(&long), Some(4));
        assert_eq!(table.get(b"a"), Some(2));
        assert_eq!(table.iter().count(), 2);
    }

    #[test]
    fn tables_add_as_maps_do() {
        let pieces = pieces();
        let parts: Vec<PieceTable> = pieces
            .chunks(pieces.len() / 3 + 1)
            .map(|part| {
                let mut table = PieceTable::default();
                part.iter().for_each(|piece| table.add(piece, 1));
                table
            })
            .collect();
        let mut sum = PieceTable::default();
        sum.add_tables(&parts.iter().collect::<Vec<_>>(), |count| count);
        assert_eq!(as_map(&sum), map_of(&pieces));
        let lists: Vec<Vec<(&[u8], u64)>> = pieces
            .chunks(pieces.len() / 3 + 1)
            .map(|part| part.iter().map(|piece| (piece.as_slice(), 1)).collect())
            .collect();
        let mut listed = PieceTable::default();
        listed.add_lists(&lists.iter().map(Vec::as_slice).collect::<Vec<_>>());
        assert!(listed == sum);
        let mut scaled = PieceTable::default();
        scaled.add_tables(&[&sum], |count| 3 * count);
        let tripled: FxHashMap<Vec<u8>, u64> = map_of(&pieces)
            .into_iter()
            .map(|(k, c)| (k, 3 * c))
            .collect();
        assert_eq!(as_map(&scaled), tripled);
        scaled.add(b"0", u64::MAX);
        assert_eq!(scaled.get(b"0"), Some(u64::MAX));
    }
}
