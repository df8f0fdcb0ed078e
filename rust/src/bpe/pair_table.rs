//! The pairs of tokens that merge, for the lookups past the dense grids
//! (`BpeModel::byte_pairs`, `BpeModel::low_pairs`).
//!
//! Each step of a merge looks up the one or two pairs it creates, and the
//! next step waits for the answer: a chain of dependent reads per piece. A
//! `HashMap` probe is two of them (its control bytes, then the entry), and
//! its entries (16 bytes each, 233,000 pairs for cl100k: 8 MB) miss the
//! caches. Most pairs looked up merge into nothing. So:
//!
//! - **A filter first.** 128 KB, two bits of one 64-bit word per pair (a
//!   blocked Bloom filter): it stays in L2 and answers most misses alone.
//! - **One line per hit.** An entry is one `u64` (left id, right id, merged
//!   id: 21 bits each), eight to a 64-byte line, about four a line; a lookup
//!   reads the line its hash picks and compares all eight without a branch.
//! - **Only the merges BPE makes.** BPE forms a token in any text as it
//!   forms it alone (`reach.rs`), so the only pair that ever makes a token
//!   is its last merge on its own bytes: 100,000 pairs for cl100k instead
//!   of every split of every token, 1.6 MB instead of 3.7 (any superset
//!   gives the same runs). A model whose merges are not in rank order keeps
//!   every pair.
//!
//! Measured on a first pass over the multilingual mix (29 MB, one thread,
//! side by side with the `HashMap` of every pair): 1.10x; on English 1.02x.
//!
//! Lines fill in order and nothing is removed, so a line with room ends a
//! probe. The hash is seeded at random (a crafted vocabulary cannot pile
//! its pairs into one line), and no lookup reads more lines than the
//! longest probe of the build.

use super::encoder::NO_RANK;

const ID_BITS: u32 = 21;
const ID_MASK: u64 = (1 << ID_BITS) - 1;
const KEY_MASK: u64 = ID_MASK << ID_BITS | ID_MASK << (2 * ID_BITS);
/// No entry: its ids are both `ID_MASK`, never a token's (`MAX_IDS`).
const EMPTY: u64 = u64::MAX;
const SLOTS: usize = 8;
/// The filter's size: 2^20 bits, 128 KB.
const FILTER_BITS: u32 = 20;

/// Token ids must be below this to be packed.
pub(super) const MAX_IDS: usize = ID_MASK as usize;

#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Line([u64; SLOTS]);

pub(super) struct PairTable {
    seed: [u64; 2],
    filter: Box<[u64]>,
    lines: Box<[Line]>,
}

#[inline(always)]
fn key(left: u32, right: u32) -> u64 {
    (left as u64) << (2 * ID_BITS) | (right as u64) << ID_BITS
}

impl PairTable {
    /// The table of `(left, right, merged)` pairs; each pair once.
    pub(super) fn new(pairs: &[(u32, u32, u32)]) -> PairTable {
        let mut table = PairTable {
            seed: super::short_pieces::random_seed(),
            filter: vec![0u64; 1 << (FILTER_BITS - 6)].into_boxed_slice(),
            lines: vec![Line([EMPTY; SLOTS]); pairs.len().div_ceil(4).max(1)].into_boxed_slice(),
        };
        for &(left, right, merged) in pairs {
            assert!(left.max(right).max(merged) < MAX_IDS as u32);
            let key = key(left, right);
            let hash = table.hash(key);
            let (word, bits) = filter_bits(hash);
            table.filter[word] |= bits;
            let mut at = table.home(hash);
            loop {
                let line = &mut table.lines[at].0;
                if let Some(slot) = line.iter().position(|&entry| entry == EMPTY) {
                    line[slot] = key | merged as u64;
                    break;
                }
                at = table.after(at);
            }
        }
        table
    }

    #[inline(always)]
    fn hash(&self, key: u64) -> u64 {
        super::short_pieces::seeded_hash(key, 0, self.seed)
    }

    /// The key's first line: the low half of the hash scaled to the lines.
    #[inline(always)]
    fn home(&self, hash: u64) -> usize {
        (((hash & 0xFFFF_FFFF) * self.lines.len() as u64) >> 32) as usize
    }

    #[inline(always)]
    fn after(&self, at: usize) -> usize {
        if at + 1 == self.lines.len() {
            0
        } else {
            at + 1
        }
    }

    /// The id `left` and `right` merge into, or `NO_RANK`.
    #[inline(always)]
    pub(super) fn get(&self, left: u32, right: u32) -> u32 {
        let key = key(left, right);
        let hash = self.hash(key);
        let (word, bits) = filter_bits(hash);
        if self.filter[word] & bits != bits {
            return NO_RANK;
        }
        let mut at = self.home(hash);
        loop {
            let line = &self.lines[at].0;
            let mut merged = NO_RANK;
            for &entry in line {
                if entry & KEY_MASK == key {
                    merged = (entry & ID_MASK) as u32;
                }
            }
            if merged != NO_RANK || line[SLOTS - 1] == EMPTY {
                return merged;
            }
            at = self.after(at);
        }
    }
}

/// The filter word of a hash (its top bits) and the key's two bits there
/// (from the bits between the home's and the word's).
#[inline(always)]
fn filter_bits(hash: u64) -> (usize, u64) {
    let word = (hash >> (64 - (FILTER_BITS - 6))) as usize;
    (word, 1 << (hash >> 32 & 63) | 1 << (hash >> 38 & 63))
}
