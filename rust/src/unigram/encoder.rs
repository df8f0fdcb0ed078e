//! Viterbi segmentation, as SentencePiece's optimized encoder does it.
//!
//! One pass over the character starts: from each, the trie gives every piece
//! that starts there; each extends the best path ending at the start, and
//! the best path ending at each position keeps its last piece. Where no
//! piece of one character starts, the unknown piece covers that character
//! with the lowest score minus 10. Scores add up in `f32` in SentencePiece's
//! order, and a later candidate replaces the best only if strictly better,
//! so ties resolve as there. Consecutive unknown characters are one unknown
//! piece; with byte fallback, each of its bytes is a byte piece instead.
//!
//! Cost: O(n · L) for a text of n bytes and pieces of at most L bytes, with
//! one best-path entry per byte and no allocation per lattice node.

use std::cell::RefCell;

use super::{PieceKind, UnigramModel};
use crate::trie::Trie;

/// SentencePiece's penalty of the unknown piece below the lowest score.
const UNK_PENALTY: f32 = 10.0;

/// A piece of the best path: id, start and end byte.
type Span = (u32, usize, usize);

thread_local! {
    /// The best paths and the spans of a text, reused between calls.
    static BUFFERS: RefCell<(Vec<BestPath>, Vec<Span>)> =
        const { RefCell::new((Vec::new(), Vec::new())) };
}

#[derive(Clone, Copy)]
struct BestPath {
    /// The last piece, `u32::MAX` if no path ends here.
    id: u32,
    score: f32,
    /// Where the last piece starts.
    starts_at: u32,
}

impl UnigramModel {
    /// Appends the ids of a prepared text (see `prepare`).
    pub(super) fn encode_prepared(&self, text: &str, out: &mut Vec<u32>) {
        let bytes = text.as_bytes();
        let n = bytes.len();
        if n == 0 {
            return;
        }
        BUFFERS.with(|buffers| {
            let (best, spans) = &mut *buffers.borrow_mut();
            self.viterbi(bytes, best);
            self.best_pieces(bytes, best, spans, out);
        });
    }

    /// Fills `best[end]` with the best path ending at each character end.
    fn viterbi(&self, bytes: &[u8], best: &mut Vec<BestPath>) {
        let n = bytes.len();
        best.clear();
        best.resize(
            n + 1,
            BestPath {
                id: u32::MAX,
                score: 0.0,
                starts_at: u32::MAX,
            },
        );
        self.for_each_piece_start(bytes, |start, matches| {
            let till_here = best[start].score;
            for &(end, id, score) in matches {
                let candidate = score + till_here;
                let target = &mut best[end];
                if target.starts_at == u32::MAX || candidate > target.score {
                    *target = BestPath {
                        id,
                        score: candidate,
                        starts_at: start as u32,
                    };
                }
            }
        });
    }

    /// The pieces of the best path, from the end back; runs of unknown
    /// pieces become one.
    fn best_pieces(
        &self,
        bytes: &[u8],
        best: &[BestPath],
        spans: &mut Vec<Span>,
        out: &mut Vec<u32>,
    ) {
        let first = out.len();
        spans.clear();
        let mut end = bytes.len();
        while end > 0 {
            let node = best[end];
            let begin = node.starts_at as usize;
            match spans.last_mut() {
                Some((id, span_begin, _)) if node.id == self.unk && *id == self.unk => {
                    *span_begin = begin
                }
                _ => spans.push((node.id, begin, end)),
            }
            end = begin;
        }
        for &(id, begin, end) in spans.iter().rev() {
            match &self.byte_pieces {
                Some(byte_ids) if id == self.unk => {
                    out.extend(bytes[begin..end].iter().map(|&b| byte_ids[b as usize]));
                }
                _ => out.push(id),
            }
        }
        debug_assert!(out.len() > first);
    }
}

impl UnigramModel {
    /// Calls `f(start, matches)` for each character start of `bytes`, in
    /// order, with the pieces that start there as `(end, id, score)`, shortest
    /// first (the order of SentencePiece's trie walk): every normal or
    /// user-defined piece (user pieces with SentencePiece's bonus, which
    /// always selects them), and the unknown piece over one character when
    /// no piece covers just that character.
    pub(super) fn for_each_piece_start(
        &self,
        bytes: &[u8],
        mut f: impl FnMut(usize, &[(usize, u32, f32)]),
    ) {
        let n = bytes.len();
        let unk_score = self.min_score - UNK_PENALTY;
        let mut matches: Vec<(usize, u32, f32)> = Vec::new();
        let mut start = 0;
        while start < n {
            let char_len = utf8_len(bytes[start]).min(n - start);
            let mut has_single = false;
            let mut node = Trie::ROOT;
            matches.clear();
            for end in start + 1..=n {
                let Some(next) = self.trie.child(node, bytes[end - 1]) else {
                    break;
                };
                node = next;
                let Some(id) = self.trie.value(node) else {
                    continue;
                };
                let kind = self.kinds[id as usize];
                if kind == PieceKind::Unused {
                    continue;
                }
                let length = end - start;
                let score = if kind == PieceKind::UserDefined {
                    length as f32 * self.max_score - 0.1
                } else {
                    self.scores[id as usize]
                };
                matches.push((end, id, score));
                has_single |= length == char_len;
            }
            if !has_single {
                matches.push((start + char_len, self.unk, unk_score));
            }
            f(start, &matches);
            start += char_len;
        }
    }
}

/// The length of the UTF-8 character that starts with `first`.
#[inline(always)]
pub(super) fn utf8_len(first: u8) -> usize {
    match first {
        0x00..=0x7F => 1,
        0xC0..=0xDF => 2,
        0xE0..=0xEF => 3,
        _ => 4,
    }
}
