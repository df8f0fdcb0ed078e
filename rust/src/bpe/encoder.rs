//! Encoding a piece (the pipeline pre-tokenizes): merge its bytes.
//!
//! Most pieces are whole tokens and cost one hash lookup. The others are
//! remembered once merged, by each thread, for one model at a time (see
//! `EncodeState`): text repeats its words, and merging costs far more than a
//! lookup. Long pieces are first cut where no token crosses (`cuts.rs`), so
//! that a CJK phrase becomes words that are tokens or cached. Merging
//! follows the lowest-rank-first rule in one of three ways, with the same
//! result:
//! - short pieces (the common case): `merge_short` (`short_merge.rs`), a
//!   vector minimum over fixed arrays at each merge, O(n²) in the piece but
//!   with tiny constants;
//! - longer pieces: `merge_below`, a heap over the candidate pairs,
//!   O(n log n) with a small working set;
//! - huge pieces (kilobytes without a space): the backtracking encoder of
//!   `backtrack.rs`, O(n) and reading memory in text order, so that
//!   megabytes of one letter encode in linear time; it needs merges in rank
//!   order (`reach.rs`), and the heap merge takes over where they are not.

use std::cell::RefCell;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::backtrack::PairMemo;
use super::piece_cache::{PieceCache, CACHED_PIECE};
use super::short_pieces::PieceMemo;
use super::BpeModel;
use crate::vocab::hash_bytes;

/// Pieces up to this many bytes use the quadratic scan.
pub(super) const SHORT_PIECE: usize = 16;
/// Pieces from this many bytes use the backtracking encoder, shorter ones
/// (down to `SHORT_PIECE`) the heap merge: for pieces of up to a few KB its
/// working set stays in cache and it is faster (measured on the
/// multilingual mix); beyond, its memory traffic grows faster than the text.
const BACKTRACK_PIECE: usize = 4096;
pub(super) const NO_RANK: u32 = u32::MAX;

/// What a thread keeps between pieces and between calls: the cache of
/// merged pieces and the merge buffers, for one model at a time. Keeping it
/// across calls spares the page faults of fresh buffers on every call and
/// lets the cache serve many short texts.
#[derive(Default)]
pub(crate) struct EncodeState {
    /// `BpeModel::instance` of the model the cache belongs to.
    model: u64,
    pub(super) cache: PieceCache,
    /// Short merged pieces, looked up before `cache` (`short_pieces.rs`).
    pub(super) memo: PieceMemo,
    /// The buffer of `PieceBatch`.
    pub(super) pending: Vec<super::short_pieces::Pending>,
    buffers: MergeBuffers,
}

thread_local! {
    static STATE: RefCell<EncodeState> = RefCell::new(EncodeState::default());
}

/// Scratch space of `merge_below` and of the backtracking encoder, reused so
/// that they allocate nothing per piece.
#[derive(Default)]
pub(crate) struct MergeBuffers {
    parts: Vec<u32>,
    /// The start of the next / previous part of each part (`u32::MAX`: none).
    next: Vec<u32>,
    prev: Vec<u32>,
    /// `(rank << 32) | position`.
    heap: BinaryHeap<Reverse<u64>>,
    /// Dead-end positions of the backtracking encoder.
    dead: Vec<bool>,
    /// Its memo of pair verdicts.
    memo: PairMemo,
}

impl MergeBuffers {
    /// Frees buffers grown for a huge piece, so that a thread does not keep
    /// megabytes after the call that needed them.
    fn release_if_large(&mut self) {
        const LARGE: usize = 1 << 20;
        if self.dead.capacity() > LARGE {
            self.dead = Vec::new();
        }
        if self.parts.capacity() > LARGE {
            self.parts = Vec::new();
            self.next = Vec::new();
            self.prev = Vec::new();
            self.heap = BinaryHeap::new();
        }
    }
}

impl BpeModel {
    /// Runs `f` with this thread's encoding state, reset if it belonged to
    /// another model.
    pub(crate) fn with_state<R>(&self, f: impl FnOnce(&mut EncodeState) -> R) -> R {
        let instance = self.instance.load(std::sync::atomic::Ordering::Relaxed);
        STATE.with(|cell| {
            let mut state = cell.borrow_mut();
            if state.model != instance {
                state.model = instance;
                state.cache.clear();
                state.memo.clear();
                state.buffers.memo.clear();
            }
            let result = f(&mut state);
            state.buffers.release_if_large();
            result
        })
    }

    /// Appends the ids of the pieces `pieces` of `text` (pre-tokenized by
    /// the caller) and, with `ends`, each token's end byte in `text`.
    pub fn encode_pieces(
        &self,
        text: &str,
        pieces: &[std::ops::Range<usize>],
        out: &mut Vec<u32>,
        mut ends: Option<&mut Vec<u32>>,
    ) {
        self.with_state(|state| {
            for range in pieces {
                let first = out.len();
                self.encode_piece(text[range.clone()].as_bytes(), out, state);
                if let Some(ends) = ends.as_deref_mut() {
                    let mut at = range.start as u32;
                    for &id in &out[first..] {
                        at += self.vocab.token_len(id) as u32;
                        ends.push(at);
                    }
                }
            }
        })
    }

    /// The ids of one piece, appended to `out`.
    #[inline]
    pub(crate) fn encode_piece(&self, piece: &[u8], out: &mut Vec<u32>, state: &mut EncodeState) {
        self.encode_part(piece, true, out, state);
    }

    /// The ids of a piece, or of a part of one between two cuts (`cut`
    /// false: there is no cut inside). Long pieces are cut where they can
    /// be (`cuts.rs`): their parts are often tokens or cached.
    #[inline(always)]
    pub(super) fn encode_part(
        &self,
        piece: &[u8],
        cut: bool,
        out: &mut Vec<u32>,
        state: &mut EncodeState,
    ) {
        let hash = hash_bytes(piece);
        if let Some(id) = self.vocab.id_with_hash(piece, hash) {
            // A whole piece that is a token is that token (tiktoken's
            // lookup); a part between cuts only if merging can make it.
            if cut || self.reach.is_reachable(id) {
                out.push(id);
                return;
            }
        }
        // Very long pieces are rare and would crowd the cache.
        let cache_hash = (piece.len() <= CACHED_PIECE).then(|| state.cache.hash(piece));
        self.encode_merged(piece, cache_hash, cut, |_| false, out, state);
    }

    /// The ids of a piece not taken as a token: from the cache (by its hash
    /// there, `cache_hash`; `None`: not cached), or merged (cut first where
    /// it can be, when `cut`) and cached, unless its ids are
    /// `kept_elsewhere` (`short_pieces` keeps those that fit in its memo).
    pub(super) fn encode_merged(
        &self,
        piece: &[u8],
        cache_hash: Option<u64>,
        cut: bool,
        kept_elsewhere: fn(&[u32]) -> bool,
        out: &mut Vec<u32>,
        state: &mut EncodeState,
    ) {
        if let Some(hash) = cache_hash {
            if let Some(ids) = state.cache.get(piece, hash) {
                out.extend_from_slice(ids);
                return;
            }
        }
        let start = out.len();
        let first_cut = if cut && piece.len() > SHORT_PIECE {
            self.cuts.next_cut(piece, 0)
        } else {
            None
        };
        if let Some(first_cut) = first_cut {
            // The whole piece is cached too, once its parts are encoded: a
            // text seen again then skips finding the cuts (CJK phrases).
            let (mut part_start, mut part_end) = (0, first_cut);
            loop {
                self.encode_part(&piece[part_start..part_end], false, out, state);
                if part_end == piece.len() {
                    break;
                }
                part_start = part_end;
                part_end = self
                    .cuts
                    .next_cut(piece, part_end + 1)
                    .unwrap_or(piece.len());
            }
        } else if piece.len() <= SHORT_PIECE {
            self.merge_short(piece, NO_RANK, out);
        } else if !self.encode_huge(piece, out, &mut state.buffers) {
            self.merge_below(piece, NO_RANK, out, &mut state.buffers);
        }
        if let Some(hash) = cache_hash {
            if !kept_elsewhere(&out[start..]) {
                state.cache.insert(piece, hash, &out[start..]);
            }
        }
    }

    /// Encodes a piece of `BACKTRACK_PIECE` bytes or more with the
    /// backtracking encoder, if the vocabulary allows it; false (nothing
    /// appended) for shorter pieces or when it does not.
    fn encode_huge(&self, piece: &[u8], out: &mut Vec<u32>, buffers: &mut MergeBuffers) -> bool {
        if piece.len() < BACKTRACK_PIECE {
            return false;
        }
        let Some(backtracker) = self.backtracker() else {
            return false;
        };
        let MergeBuffers { dead, memo, .. } = buffers;
        backtracker.encode(self, piece, out, dead, memo)
    }

    #[inline(always)]
    pub(super) fn byte_pair_rank(&self, first: u8, second: u8) -> u32 {
        self.byte_pairs[first as usize * 256 + second as usize]
    }

    #[inline(always)]
    pub(super) fn byte_id(&self, byte: u8) -> u32 {
        self.byte_ids[byte as usize]
    }

    #[inline(always)]
    pub(super) fn pair_rank(&self, left: u32, right: u32) -> u32 {
        if (left | right) >> self.low_bits == 0 {
            return self.low_pairs[(left << self.low_bits | right) as usize];
        }
        self.pairs.get(left, right)
    }

    /// The parts BPE makes of `piece` using only the tokens with ids below
    /// `limit` (all tokens: `NO_RANK`), in O(n log n): parts form a
    /// linked list over byte positions; a min-heap holds candidate pairs as
    /// `(rank, position)`, so ties go to the leftmost pair as in the scan.
    /// An entry is still valid when a part starts at its position and that
    /// part and the next one span exactly the bytes of its token (the pair's
    /// rank is the rank of its concatenated bytes, whatever the split); stale
    /// entries are dropped when they surface.
    pub(super) fn merge_below(
        &self,
        piece: &[u8],
        limit: u32,
        out: &mut Vec<u32>,
        buffers: &mut MergeBuffers,
    ) {
        const END: u32 = u32::MAX;
        let n = piece.len();
        let MergeBuffers {
            parts,
            next,
            prev,
            heap,
            ..
        } = buffers;
        parts.clear();
        parts.extend(piece.iter().map(|&b| self.byte_ids[b as usize]));
        next.clear();
        next.extend(1..=n as u32);
        next[n - 1] = END;
        heap.clear();
        for i in 0..n - 1 {
            let rank = self.byte_pair_rank(piece[i], piece[i + 1]);
            if rank < limit {
                heap.push(Reverse(((rank as u64) << 32) | i as u64));
            }
        }
        prev.clear();
        prev.extend((0..n as u32).map(|i| i.wrapping_sub(1)));
        let end_of = |at: u32| if at == END { n } else { at as usize };
        while let Some(Reverse(entry)) = heap.pop() {
            let (rank, at) = ((entry >> 32) as u32, entry as u32 as usize);
            if parts[at] == NO_RANK {
                continue;
            }
            let right = next[at];
            if right == END {
                continue;
            }
            let span_end = end_of(next[right as usize]);
            if span_end - at != self.vocab.token_len(rank) {
                continue;
            }
            parts[at] = rank;
            parts[right as usize] = NO_RANK;
            let after = next[right as usize];
            next[at] = after;
            if after != END {
                prev[after as usize] = at as u32;
                let r = self.pair_rank(rank, parts[after as usize]);
                if r < limit {
                    heap.push(Reverse(((r as u64) << 32) | at as u64));
                }
            }
            let before = prev[at];
            if before != END {
                let r = self.pair_rank(parts[before as usize], rank);
                if r < limit {
                    heap.push(Reverse(((r as u64) << 32) | before as u64));
                }
            }
        }
        let mut at = 0u32;
        while at != END {
            out.push(parts[at as usize]);
            at = next[at as usize];
        }
    }
}
