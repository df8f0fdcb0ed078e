//! The cache of merged pieces too long for the memo (`short_pieces.rs`):
//! pieces of up to `CACHED_PIECE` bytes, with any number of ids.
//!
//! On the multilingual mix a warm pass looks up about 420,000 such pieces
//! (Russian words of 16 bytes or more, Japanese and Korean words of more
//! than three tokens, CJK phrases), and a first pass misses on most of its
//! lookups. So:
//!
//! - **A table of small entries** (hashbrown's, 16 bytes an entry: the
//!   piece's hash, its length, its number of ids and where its record
//!   starts). A lookup first reads control bytes, one per entry, which stay
//!   in cache where the entries do not: a miss costs no wait on memory. (A
//!   table of one-line buckets of four whole entries, tried instead, missed
//!   the cache on every miss: first passes over the mix then waited on
//!   four times as many lines in lookups.)
//! - **One record per piece**: its ids, then its bytes, side by side in one
//!   arena of `u32`. A hit then reads the entry and the record's line or
//!   two, for both the comparison and the ids (keys and ids in two arenas
//!   cost one more line).
//!
//! The keys are the user's text: the hash is foldhash with a random seed, so
//! crafted text cannot steer pieces into long probes. Memory is bounded:
//! past `RECORD_WORDS` the cache starts afresh.

use std::hash::BuildHasher;

use hashbrown::HashTable;

/// Merged pieces up to this many bytes are cached.
pub(crate) const CACHED_PIECE: usize = 256;

/// The cache starts afresh past this many words of records (16 MB): the
/// whole multilingual mix (30 MB of ten languages) fits, with room.
const RECORD_WORDS: usize = 4 << 20;

#[derive(Clone, Copy)]
struct Entry {
    hash: u64,
    key_len: u16,
    n_ids: u16,
    /// Where the record starts in `PieceCache::records`.
    record: u32,
}

/// Pieces merged earlier, with their ids (see the module comment).
#[derive(Default)]
pub(crate) struct PieceCache {
    hasher: foldhash::fast::RandomState,
    table: HashTable<Entry>,
    /// Each piece's ids, then its bytes in whole words.
    records: Vec<u32>,
}

impl PieceCache {
    #[inline]
    pub(crate) fn hash(&self, piece: &[u8]) -> u64 {
        self.hasher.hash_one(piece)
    }

    /// The ids of `piece`, whose hash is `hash`, if it is cached.
    #[inline]
    pub(crate) fn get(&self, piece: &[u8], hash: u64) -> Option<&[u32]> {
        let entry = self.table.find(hash, |e| {
            e.hash == hash
                && e.key_len as usize == piece.len()
                && self.key(e.record as usize + e.n_ids as usize, piece.len()) == piece
        })?;
        let start = entry.record as usize;
        Some(&self.records[start..start + entry.n_ids as usize])
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
        self.table.clear();
        self.records.clear();
    }

    /// Remembers `ids` as the ids of `piece` (hash `hash`, not cached yet).
    /// Pieces longer than `CACHED_PIECE` or with more than 65,535 ids are
    /// not kept.
    pub(crate) fn insert(&mut self, piece: &[u8], hash: u64, ids: &[u32]) {
        if piece.is_empty() || piece.len() > CACHED_PIECE || ids.len() > u16::MAX as usize {
            return;
        }
        let key_words = piece.len().div_ceil(4);
        if self.records.len() + ids.len() + key_words > RECORD_WORDS {
            self.clear();
        }
        if self.records.capacity() == 0 {
            // All the room it may take, reserved once: growing by doubling
            // copied the records each time. Pages are only touched as the
            // records fill them.
            self.records.reserve_exact(RECORD_WORDS);
        }
        let entry = Entry {
            hash,
            key_len: piece.len() as u16,
            n_ids: ids.len() as u16,
            record: self.records.len() as u32,
        };
        self.records.extend_from_slice(ids);
        // The bytes in native order, so that `key` reads them back as bytes.
        self.records.extend(piece.chunks(4).map(|bytes| {
            let mut word = [0u8; 4];
            word[..bytes.len()].copy_from_slice(bytes);
            u32::from_ne_bytes(word)
        }));
        self.table.insert_unique(hash, entry, |e| e.hash);
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
            assert!(cache.records.len() <= RECORD_WORDS);
        }
        // Too long or empty: not kept.
        let long = [1u8; CACHED_PIECE + 1];
        cache.insert(&long, cache.hash(&long), &[1]);
        assert_eq!(cache.get(&long, cache.hash(&long)), None);
    }
}
