//! The cache of merged pieces too long for the memo (`short_pieces.rs`):
//! pieces of up to `CACHED_PIECE` bytes, with any number of ids.
//!
//! On the multilingual mix a warm pass looks up about 420,000 such pieces
//! (Russian words of 16 bytes or more, Japanese and Korean words of more
//! than three tokens, CJK phrases), and a first pass misses on most of its
//! lookups. So:
//!
//! - **A table of small slots**, 8 bytes each: 32 bits of the piece's hash
//!   and where its record starts; open addressing, probed in order from the
//!   slot the hash names, at most half full. A miss reads one line of eight
//!   slots, nearly always.
//! - **One record per piece**: a word with its length and number of ids,
//!   the ids, then its bytes, side by side in one arena of `u32`. A hit reads
//!   the slot's line and the record's line or two, for both the comparison
//!   and the ids (keys and ids in two arenas cost one more line).
//! - **Fetched ahead.** The slot a hash names and the record its probe finds
//!   are known before the piece is encoded: `PieceBatch` fetches both for a
//!   batch of pieces (`prefetch_slot`, then `prefetch_record`), so that the
//!   lookups of a batch wait on memory together instead of once each. (With
//!   hashbrown's table, whose probes cannot be fetched ahead, lookups of the
//!   mix waited on two lines in a row each: a fifth of a warm pass.)
//!
//! The keys are the user's text: the hash is foldhash with a random seed, so
//! crafted text cannot steer pieces into long probes. Memory is bounded:
//! past `RECORD_WORDS` the cache starts afresh.

use std::hash::BuildHasher;

use crate::huge_pages::HugeTable;

/// Merged pieces up to this many bytes are cached.
pub(crate) const CACHED_PIECE: usize = 256;

/// The cache starts afresh past this many words of records (16 MB): the
/// whole multilingual mix (30 MB of ten languages) fits, with room.
const RECORD_WORDS: usize = 4 << 20;

/// The slots of an empty cache's first table.
const MIN_SLOTS: usize = 1 << 12;

/// A slot: the high half of a piece's hash and the start of its record, or
/// `EMPTY`. (A record starts below `RECORD_WORDS`, never at `u32::MAX`.)
#[derive(Clone, Copy)]
struct Slot {
    tag: u32,
    record: u32,
}

const EMPTY: Slot = Slot {
    tag: 0,
    record: u32::MAX,
};

/// Pieces merged earlier, with their ids (see the module comment).
#[derive(Default)]
pub(crate) struct PieceCache {
    hasher: foldhash::fast::RandomState,
    /// A power of two of them (or none), at most half taken; from 2 MB on,
    /// on huge pages (`huge_pages.rs`).
    slots: HugeTable<Slot>,
    taken: usize,
    /// Per piece: its length << 16 | its number of ids, the ids, then its
    /// bytes in whole words. All the room it may take (`RECORD_WORDS`),
    /// mapped at the first insertion on huge pages, whose pages are touched
    /// only as the records fill them (growing by doubling copied the
    /// records each time).
    records: HugeTable<u32>,
    /// The words of `records` taken.
    records_len: usize,
}

impl PieceCache {
    #[inline]
    pub(crate) fn hash(&self, piece: &[u8]) -> u64 {
        self.hasher.hash_one(piece)
    }

    /// The slot `hash` starts its probe at (the low half: the high half is
    /// the tag), and the mask of slot indices.
    #[inline(always)]
    fn home(&self, hash: u64) -> (usize, usize) {
        let mask = self.slots.len().wrapping_sub(1);
        (hash as usize & mask, mask)
    }

    /// The starts of the records of the pieces whose hash is `hash`, as the
    /// probe from its slot meets them.
    #[inline(always)]
    fn records_of(&self, hash: u64) -> impl Iterator<Item = usize> + '_ {
        let (mut at, mask) = self.home(hash);
        let tag = (hash >> 32) as u32;
        // Empty when `slots` is: the probe stops at once.
        std::iter::from_fn(move || loop {
            let slot = *self.slots.get(at)?;
            if slot.record == EMPTY.record {
                return None;
            }
            at = (at + 1) & mask;
            if slot.tag == tag {
                return Some(slot.record as usize);
            }
        })
    }

    /// Starts fetching the slot a lookup of `hash` reads first.
    #[inline(always)]
    pub(crate) fn prefetch_slot(&self, hash: u64) {
        if let Some(slot) = self.slots.get(self.home(hash).0) {
            crate::prefetch::line(slot);
        }
    }

    /// Starts fetching the record a lookup of `hash` would compare first (its
    /// slot fetched by `prefetch_slot` a while before), if there is one.
    #[inline(always)]
    pub(crate) fn prefetch_record(&self, hash: u64) {
        if let Some(record) = self.records_of(hash).next() {
            crate::prefetch::line(&self.records[record]);
        }
    }

    /// The ids of `piece`, whose hash is `hash`, if it is cached.
    #[inline]
    pub(crate) fn get(&self, piece: &[u8], hash: u64) -> Option<&[u32]> {
        self.records_of(hash).find_map(|start| {
            let head = self.records[start];
            let (key_len, n_ids) = ((head >> 16) as usize, (head & 0xFFFF) as usize);
            let ids = start + 1..start + 1 + n_ids;
            (key_len == piece.len() && self.key(ids.end, key_len) == piece)
                .then(|| &self.records[ids])
        })
    }

    /// The `len` bytes stored from word `start` of the records.
    #[inline(always)]
    fn key(&self, start: usize, len: usize) -> &[u8] {
        let words = &self.records[start..start + len.div_ceil(4)];
        // SAFETY: the bytes of `words`, which are initialized u32s: any byte
        // is a valid u8, u8 needs no alignment, and `len` is at most
        // `4 * words.len()`.
        unsafe { std::slice::from_raw_parts(words.as_ptr().cast::<u8>(), len) }
    }

    pub(crate) fn clear(&mut self) {
        // A fresh small table: clearing the slots of a large one would touch
        // all of it, and the next text may need few.
        self.slots = HugeTable::default();
        self.taken = 0;
        self.records_len = 0;
    }

    /// Remembers `ids` as the ids of `piece` (hash `hash`, from `hash`:
    /// growing the table computes it again; not cached yet). Pieces longer
    /// than `CACHED_PIECE` or with more than 65,535 ids are not kept.
    pub(crate) fn insert(&mut self, piece: &[u8], hash: u64, ids: &[u32]) {
        if piece.is_empty() || piece.len() > CACHED_PIECE || ids.len() > u16::MAX as usize {
            return;
        }
        let key_words = piece.len().div_ceil(4);
        let words = 1 + ids.len() + key_words;
        if self.records_len + words > RECORD_WORDS {
            self.clear();
        }
        if self.records.is_empty() {
            self.records = HugeTable::zeroed(RECORD_WORDS);
        }
        if 2 * (self.taken + 1) > self.slots.len() {
            self.grow();
        }
        let record = self.records_len;
        let (head, rest) = self.records[record..record + words]
            .split_first_mut()
            .expect("words > 0");
        *head = (piece.len() as u32) << 16 | ids.len() as u32;
        let (id_words, key) = rest.split_at_mut(ids.len());
        id_words.copy_from_slice(ids);
        // The bytes in native order, so that `key` reads them back as bytes.
        for (word, bytes) in key.iter_mut().zip(piece.chunks(4)) {
            let mut four = [0u8; 4];
            four[..bytes.len()].copy_from_slice(bytes);
            *word = u32::from_ne_bytes(four);
        }
        self.records_len += words;
        self.place(
            Slot {
                tag: (hash >> 32) as u32,
                record: record as u32,
            },
            hash,
        );
        self.taken += 1;
    }

    /// Puts `slot` in the first empty slot of the probe of `hash`.
    fn place(&mut self, slot: Slot, hash: u64) {
        let (mut at, mask) = self.home(hash);
        while self.slots[at].record != EMPTY.record {
            at = (at + 1) & mask;
        }
        self.slots[at] = slot;
    }

    /// Doubles the slots (the records stay), placing each piece again by its
    /// hash, recomputed from its bytes: a slot keeps only half of it.
    fn grow(&mut self) {
        let slots = (2 * self.slots.len()).max(MIN_SLOTS);
        let old = std::mem::replace(&mut self.slots, HugeTable::filled(slots, EMPTY));
        for &slot in old.iter().filter(|s| s.record != EMPTY.record) {
            let start = slot.record as usize;
            let head = self.records[start];
            let (key_len, n_ids) = ((head >> 16) as usize, (head & 0xFFFF) as usize);
            let hash = self.hash(self.key(start + 1 + n_ids, key_len));
            self.place(slot, hash);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_come_back_with_their_ids_through_growth_and_clearing() {
        let mut cache = PieceCache::default();
        let pieces: Vec<Vec<u8>> = (0..5000u32)
            .map(|i| format!("piece {i} {}", "x".repeat(i as usize % 40)).into_bytes())
            .collect();
        let ids_of = |i: usize| {
            (0..(i % 9) as u32)
                .map(|k| k * 7 + i as u32)
                .collect::<Vec<_>>()
        };
        for (i, piece) in pieces.iter().enumerate() {
            let hash = cache.hash(piece);
            assert_eq!(cache.get(piece, hash), None);
            cache.insert(piece, hash, &ids_of(i));
        }
        for (i, piece) in pieces.iter().enumerate() {
            assert_eq!(
                cache.get(piece, cache.hash(piece)),
                Some(&ids_of(i)[..]),
                "{i}"
            );
        }
        // Same hash, other bytes or length: not found.
        let hash = cache.hash(&pieces[3]);
        assert_eq!(cache.get(b"piece 3 xxxy", hash), None);
        assert_eq!(cache.get(b"piece 3 xx", hash), None);
        cache.clear();
        assert_eq!(cache.get(&pieces[3], hash), None);
        cache.insert(&pieces[3], hash, &[1, 2]);
        assert_eq!(cache.get(&pieces[3], hash), Some(&[1, 2][..]));
    }

    #[test]
    fn pieces_of_one_hash_are_told_apart() {
        let mut cache = PieceCache::default();
        for i in 0..20u32 {
            cache.insert(format!("p{i}").as_bytes(), 42, &[i]);
        }
        for i in 0..20u32 {
            assert_eq!(cache.get(format!("p{i}").as_bytes(), 42), Some(&[i][..]));
        }
        assert_eq!(cache.get(b"p20", 42), None);
    }

    #[test]
    fn the_records_are_bounded() {
        let mut cache = PieceCache::default();
        let piece = [7u8; CACHED_PIECE];
        for i in 0..(RECORD_WORDS / 64 + 10) as u32 {
            let mut key = piece;
            key[..4].copy_from_slice(&i.to_le_bytes());
            cache.insert(&key, cache.hash(&key), &[i]);
            assert!(cache.records_len <= RECORD_WORDS);
        }
        // Too long or empty: not kept.
        let long = [1u8; CACHED_PIECE + 1];
        cache.insert(&long, cache.hash(&long), &[1]);
        assert_eq!(cache.get(&long, cache.hash(&long)), None);
    }
}
