//! Encoding: pre-tokenize, then merge each piece's bytes.
//!
//! Most pieces are whole tokens and cost one hash lookup. Others are merged
//! by the lowest-rank-first rule in one of two ways, with the same result:
//! - short pieces (the common case): tiktoken's scan over a small array of
//!   parts, O(n²) in the piece but with tiny constants;
//! - long pieces: a binary heap of candidate pairs over a linked list of
//!   parts, O(n log n), so that megabytes without a space (one huge piece)
//!   still encode in a fraction of a second.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use rayon::prelude::*;

use super::{pair_key, AllowedSpecial, BpeModel};
use crate::error::Result;

/// Pieces up to this many bytes use the quadratic scan.
const SHORT_PIECE: usize = 64;

const NO_RANK: u32 = u32::MAX;

impl BpeModel {
    /// Encodes `text`, treating special-token text as ordinary text.
    pub fn encode_ordinary(&self, text: &str) -> Result<Vec<u32>> {
        let mut out = Vec::with_capacity(text.len() / 3 + 1);
        self.encode_ordinary_into(text, &mut out)?;
        Ok(out)
    }

    fn encode_ordinary_into(&self, text: &str, out: &mut Vec<u32>) -> Result<()> {
        self.pretokenizer
            .for_each_piece(text, |piece| self.encode_piece(piece.as_bytes(), out))
    }

    /// Encodes `text`, recognizing the allowed special tokens.
    pub fn encode(&self, text: &str, allowed: &AllowedSpecial) -> Result<Vec<u32>> {
        let Some(matcher) = self.allowed_matcher(allowed)? else {
            return self.encode_ordinary(text);
        };
        let mut out = Vec::with_capacity(text.len() / 3 + 1);
        let mut start = 0;
        for found in matcher.find_iter(text) {
            self.encode_ordinary_into(&text[start..found.start()], &mut out)?;
            let special = &text[found.start()..found.end()];
            out.push(
                self.special
                    .id(special)
                    .expect("matcher holds special tokens only"),
            );
            start = found.end();
        }
        self.encode_ordinary_into(&text[start..], &mut out)?;
        Ok(out)
    }

    /// Encodes many texts on all cores.
    pub fn encode_batch(&self, texts: &[&str], allowed: &AllowedSpecial) -> Result<Vec<Vec<u32>>> {
        texts
            .par_iter()
            .map(|text| self.encode(text, allowed))
            .collect()
    }

    /// The ids of one piece, appended to `out`.
    #[inline]
    pub(crate) fn encode_piece(&self, piece: &[u8], out: &mut Vec<u32>) {
        if let Some(id) = self.vocab.id(piece) {
            out.push(id);
        } else if piece.len() <= SHORT_PIECE {
            self.merge_short(piece, out);
        } else {
            self.merge_long(piece, out);
        }
    }

    #[inline(always)]
    fn pair_rank(&self, left: u32, right: u32) -> u32 {
        self.pairs
            .get(&pair_key(left, right))
            .copied()
            .unwrap_or(NO_RANK)
    }

    /// tiktoken's algorithm: keep the parts and the rank of each adjacent
    /// pair in two small arrays; merge the leftmost lowest pair until none is
    /// left. Since ids are ranks, a pair's rank is the id it merges into.
    pub(super) fn merge_short(&self, piece: &[u8], out: &mut Vec<u32>) {
        let mut parts = [0u32; SHORT_PIECE];
        let mut ranks = [NO_RANK; SHORT_PIECE];
        let mut n = piece.len();
        for (part, &b) in parts.iter_mut().zip(piece) {
            *part = self.byte_ids[b as usize];
        }
        for i in 0..n - 1 {
            ranks[i] = self.pair_rank(parts[i], parts[i + 1]);
        }
        loop {
            let mut best = NO_RANK;
            let mut at = 0;
            for (i, &rank) in ranks[..n - 1].iter().enumerate() {
                if rank < best {
                    best = rank;
                    at = i;
                }
            }
            if best == NO_RANK {
                break;
            }
            parts[at] = best;
            parts.copy_within(at + 2..n, at + 1);
            ranks.copy_within(at + 1..n - 1, at);
            n -= 1;
            if at > 0 {
                ranks[at - 1] = self.pair_rank(parts[at - 1], parts[at]);
            }
            if at + 1 < n {
                ranks[at] = self.pair_rank(parts[at], parts[at + 1]);
            } else {
                ranks[at] = NO_RANK;
            }
        }
        out.extend_from_slice(&parts[..n]);
    }

    /// The same merges for a long piece: parts form a linked list over byte
    /// positions; a min-heap holds `(rank, position)` of candidate pairs,
    /// so ties go to the leftmost pair as in the scan. Entries made stale by
    /// a merge are recognized when popped (the pair there no longer has that
    /// rank) and dropped.
    pub(super) fn merge_long(&self, piece: &[u8], out: &mut Vec<u32>) {
        let n = piece.len();
        let mut parts: Vec<u32> = piece.iter().map(|&b| self.byte_ids[b as usize]).collect();
        // Linked list over part start positions; `usize::MAX` ends it.
        let mut next: Vec<usize> = (1..=n).collect();
        next[n - 1] = usize::MAX;
        let mut prev: Vec<usize> = (0..n).map(|i| i.wrapping_sub(1)).collect();
        let mut alive = vec![true; n];

        let mut heap = BinaryHeap::with_capacity(n);
        for i in 0..n - 1 {
            let rank = self.pair_rank(parts[i], parts[i + 1]);
            if rank != NO_RANK {
                heap.push(Reverse((rank, i)));
            }
        }
        while let Some(Reverse((rank, at))) = heap.pop() {
            let right = next[at];
            if !alive[at] || right == usize::MAX || self.pair_rank(parts[at], parts[right]) != rank
            {
                continue;
            }
            parts[at] = rank;
            alive[right] = false;
            let after = next[right];
            next[at] = after;
            if after != usize::MAX {
                prev[after] = at;
                let r = self.pair_rank(parts[at], parts[after]);
                if r != NO_RANK {
                    heap.push(Reverse((r, at)));
                }
            }
            let before = prev[at];
            if before != usize::MAX {
                let r = self.pair_rank(parts[before], parts[at]);
                if r != NO_RANK {
                    heap.push(Reverse((r, before)));
                }
            }
        }
        let mut at = 0;
        while at != usize::MAX {
            out.push(parts[at]);
            at = next[at];
        }
    }
}
