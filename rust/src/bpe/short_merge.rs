//! Merging short pieces (up to `SHORT_PIECE` bytes), the work of a first
//! pass over text: every piece that is neither a token nor seen before.
//!
//! tiktoken's rule: merge the leftmost lowest-ranked pair until no pair
//! below the limit is left. For a short piece the state fits in a few
//! fixed arrays indexed by byte position, the parts linked by `next` /
//! `prev`. Since ids are ranks, a pair's rank is the id it merges into.
//!
//! Each pair's key is `rank << POSITION_BITS | position`, so the lowest key
//! is the lowest rank and, of equal ranks, the leftmost: the next merge is
//! one minimum over 8 or 16 lanes (`lowest_key`), compiled to vector
//! instructions, where a scan with an `if` mispredicted on most merges.
//! Keys are signed, since SSE2 compares signed lanes (an unsigned minimum
//! takes twice the instructions), and a piece of up to 9 bytes (most of
//! those merged) takes the minimum of its first 8 lanes only.
//!
//! Measured on the 84,337 distinct pieces of 10 MB of English that are not
//! tokens, merged one after the other on one thread by a loop over
//! `merge_short` (not kept; `profile_encode ... merges` encodes the same
//! pieces, cache lookups included), counted by cachegrind: 1,200
//! instructions and 14.9 mispredicted branches a piece with the scan of
//! tiktoken's arrays, 830 and 9.3 now. Timed, a piece takes about 300 ns;
//! the same 64 pieces merged over and over take 180, their branches learnt:
//! of what remains, about half of the mispredictions were in the pair
//! lookups (`pair_rank`: then a `HashMap` probe; since, `pair_table.rs`).
//! Two things that did not pay, for the record:
//! - four pieces merged in turn, each merge's grid lines fetched while the
//!   others' merges were made: no faster, and more instructions (the
//!   lookups mostly hit L2 or L3);
//! - a table of pairs as buckets of five keys compared without a branch
//!   (one 64-byte line per lookup) instead of the `HashMap`: as many
//!   mispredictions, more last-level misses (it held every split of every
//!   token, not only the merges, and no filter: the misses read it too),
//!   slower. `pair_table.rs` has the three together and pays.

use super::encoder::SHORT_PIECE;
use super::BpeModel;

/// The pair keys: a rank above the position of the pair's left part
/// (below `SHORT_PIECE`), as a non-negative `i32`. Ranks are below
/// `MAX_RANKS` (checked when a model is built).
const POSITION_BITS: u32 = SHORT_PIECE.trailing_zeros();
const POSITION_MASK: i32 = (1 << POSITION_BITS) - 1;
const NO_KEY: i32 = i32::MAX;
pub(super) const MAX_RANKS: usize = 1 << (31 - POSITION_BITS);

/// The lanes of `lowest_key` for pieces of up to `NARROW + 1` bytes.
const NARROW: usize = 8;

/// The lowest of the first `LANES` keys (8 or 16), without a branch: four
/// lanes at a time, which the compiler turns into vector minimums.
#[inline(always)]
fn lowest_key<const LANES: usize>(keys: &[i32; SHORT_PIECE]) -> i32 {
    const { assert!(LANES.is_multiple_of(4) && LANES <= SHORT_PIECE) };
    let mut lowest = [NO_KEY; 4];
    for chunk in keys[..LANES].chunks_exact(4) {
        for lane in 0..4 {
            lowest[lane] = lowest[lane].min(chunk[lane]);
        }
    }
    lowest[0].min(lowest[1]).min(lowest[2].min(lowest[3]))
}

impl BpeModel {
    /// The parts BPE makes of `piece` (1 to `SHORT_PIECE` bytes) using only
    /// the tokens with ids below `limit` (all: `NO_RANK`), appended to
    /// `out`.
    pub(super) fn merge_short(&self, piece: &[u8], limit: u32, out: &mut Vec<u32>) {
        if piece.len() <= NARROW + 1 {
            self.merge_short_in::<NARROW>(piece, limit, out);
        } else {
            self.merge_short_in::<SHORT_PIECE>(piece, limit, out);
        }
    }

    /// `merge_short` for pieces of at most `LANES + 1` bytes (pairs start
    /// at the first `LANES` positions).
    #[inline(always)]
    fn merge_short_in<const LANES: usize>(&self, piece: &[u8], limit: u32, out: &mut Vec<u32>) {
        let n = piece.len();
        debug_assert!((1..=SHORT_PIECE.min(LANES + 1)).contains(&n));
        let key = |rank: u32, at: usize| {
            if rank < limit {
                (rank << POSITION_BITS | at as u32) as i32
            } else {
                NO_KEY
            }
        };
        let mut ids = [0u32; SHORT_PIECE];
        let mut keys = [NO_KEY; SHORT_PIECE];
        // `prev` of the first part and `next` of the last are `n` or more
        // (255, n): none.
        let mut next = [0u8; SHORT_PIECE];
        let mut prev = [0u8; SHORT_PIECE];
        for (at, &b) in piece.iter().enumerate() {
            ids[at] = self.byte_id(b);
            next[at] = at as u8 + 1;
            prev[at] = (at as u8).wrapping_sub(1);
        }
        for at in 0..n - 1 {
            keys[at] = key(self.byte_pair_rank(piece[at], piece[at + 1]), at);
        }
        let mut best = lowest_key::<LANES>(&keys);
        while best != NO_KEY {
            let at = (best & POSITION_MASK) as usize;
            ids[at] = (best >> POSITION_BITS) as u32;
            let gone = next[at] as usize;
            let right = next[gone] as usize;
            let left = prev[at] as usize;
            next[at] = right as u8;
            keys[at] = NO_KEY;
            keys[gone] = NO_KEY;
            // The keys this merge changes are cleared and their pairs
            // looked up before the minimum of the others is taken: the
            // lookups (often a cache miss) and the minimum overlap.
            let right_key = if right < n {
                prev[right] = at as u8;
                key(self.pair_rank(ids[at], ids[right]), at)
            } else {
                NO_KEY
            };
            let left_key = if left < n {
                keys[left] = NO_KEY;
                key(self.pair_rank(ids[left], ids[at]), left)
            } else {
                NO_KEY
            };
            let others = lowest_key::<LANES>(&keys);
            keys[at] = right_key;
            if left < n {
                keys[left] = left_key;
            }
            best = others.min(right_key).min(left_key);
        }
        out.reserve(n);
        let mut at = 0;
        while at < n {
            out.push(ids[at]);
            at = next[at] as usize;
        }
    }
}
