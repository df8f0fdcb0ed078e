//! Viterbi segmentation, exactly as SentencePiece's optimized encoder
//! (version 0.2.3) does it.
//!
//! One pass over the character starts: from each, a walk down the piece
//! trie meets every piece that starts there, shortest first; each extends
//! the best path ending at the start, and the best path ending at each
//! position keeps its last piece. Where no piece of one character starts,
//! the unknown piece covers that character with the lowest score minus 10.
//! Consecutive unknown characters are one unknown piece; with byte
//! fallback, each of its bytes is a byte piece instead.
//!
//! Arithmetic follows SentencePiece to the bit, since long texts have
//! near-ties that rounding decides: scores add up in `f32` in its order, a
//! later candidate replaces the best only if strictly better (ties keep the
//! earlier one), and when the path score at a start passes ±100,000 it is
//! subtracted from every best path from there on (SentencePiece's guard
//! against lost precision), which changes later roundings. A model read
//! from a `tokenizer.json` adds as Hugging Face's `tokenizers` does instead
//! (`f64`, the file's scores, never rebased; see
//! `UnigramModel::with_tokenizers_scores`): the same walk, generic over
//! the [`PathScore`].
//!
//! Cost: O(n · L) for a text of n bytes and pieces of at most L bytes: one
//! trie unit read per byte of each walk, with the score in it, and one
//! best-path entry per byte, with no allocation per lattice node.

use std::borrow::Cow;
use std::cell::RefCell;

use crate::error::{Error, Result};

use super::piece_trie::{Node, NO_PIECE};
use super::{PieceKind, UnigramModel, SPACE_SYMBOL, SPACE_SYMBOL_FINDER};
use crate::model::SAME_SPAN;

/// SentencePiece's penalty of the unknown piece below the lowest score.
pub(super) const UNK_PENALTY: f32 = 10.0;

/// Path scores beyond ±this are rebased to 0 (SentencePiece's
/// `kScoreResetThreshold`).
const SCORE_RESET: f32 = 100_000.0;

/// The last piece of a path that is the unknown piece (others are trie
/// units).
const UNKNOWN: u32 = u32::MAX;

/// A piece of the best path: its trie unit (or `UNKNOWN`), start and end byte.
type Span = (u32, usize, usize);

thread_local! {
    /// The best paths and the spans of a text, reused between calls.
    static BUFFERS: RefCell<(BestPaths, Vec<Span>)> = const {
        RefCell::new((
            BestPaths { scores: Vec::new(), precise: Vec::new(), lasts: Vec::new() },
            Vec::new(),
        ))
    };
    /// A piece with its `▁` written as spaces (see `encode_piece`).
    static WALK: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// The best path ending at each byte, as two arrays: the scores, which
/// every candidate reads, apart from the last pieces, written only when a
/// candidate wins (the scores then fill half as many cache lines).
struct BestPaths {
    /// -inf while no path ends here: any piece's first candidate wins, as
    /// SentencePiece's "no path yet" does (scores are finite).
    scores: Vec<f32>,
    /// The same in `f64`, for a model that adds as `tokenizers` does.
    precise: Vec<f64>,
    /// (where the last piece starts, its trie unit or `UNKNOWN`), written
    /// with the score: entries of earlier texts are never read, since the
    /// backtrack only visits ends with a path.
    lasts: Vec<(u32, u32)>,
}

/// How path scores add up: `f32` as SentencePiece (rebased past
/// ±`SCORE_RESET`), `f64` as Hugging Face's `tokenizers` (never rebased).
trait PathScore: Copy + PartialOrd + std::ops::Add<Output = Self> + std::ops::SubAssign {
    const NEG_INFINITY: Self;
    const ZERO: Self;
    /// Whether a path score this far from 0 is rebased.
    fn needs_reset(self) -> bool;
}

impl PathScore for f32 {
    const NEG_INFINITY: Self = f32::NEG_INFINITY;
    const ZERO: Self = 0.0;
    #[inline(always)]
    fn needs_reset(self) -> bool {
        !(-SCORE_RESET..=SCORE_RESET).contains(&self)
    }
}

impl PathScore for f64 {
    const NEG_INFINITY: Self = f64::NEG_INFINITY;
    const ZERO: Self = 0.0;
    #[inline(always)]
    fn needs_reset(self) -> bool {
        false
    }
}

impl UnigramModel {
    /// Appends the ids of a walk text and, with `ends`, the end of each
    /// token in the text the walk text stands for (`▁` three bytes where
    /// the walk has `' '`), counted from `ends.1`.
    pub(super) fn encode_walk(
        &self,
        bytes: &[u8],
        out: &mut Vec<u32>,
        ends: Option<(&mut Vec<u32>, u32)>,
    ) {
        if bytes.is_empty() {
            return;
        }
        BUFFERS.with(|buffers| {
            let (best, spans) = &mut *buffers.borrow_mut();
            match &self.tokenizers_scores {
                None => self.viterbi(
                    bytes,
                    &mut best.scores,
                    &mut best.lasts,
                    |node| node.score,
                    self.min_score - UNK_PENALTY,
                ),
                Some(s) => self.viterbi(
                    bytes,
                    &mut best.precise,
                    &mut best.lasts,
                    |node| s.by_unit[node.index as usize],
                    s.unknown,
                ),
            }
            self.best_pieces(bytes, best, spans, out);
            if let Some((ends, mut at)) = ends {
                // Token lengths in the original form: a piece's own text,
                // or an unknown span's bytes with each walk space as `▁`.
                let space_extra = if self.ascii_spaces {
                    SPACE_SYMBOL.len_utf8() - 1
                } else {
                    0
                };
                let mut ids = out[out.len()
                    - count_tokens(spans, self.byte_pieces.is_some(), bytes, space_extra)..]
                    .iter();
                for &(piece, begin, end) in spans.iter().rev() {
                    if piece != UNKNOWN {
                        let id = *ids.next().expect("one id per piece");
                        at += self.pieces[id as usize].text.len() as u32;
                        ends.push(at);
                    } else if self.byte_pieces.is_some() {
                        // Each byte of an unknown run covers the whole run
                        // (as in Hugging Face's tokenizers).
                        let len = original_len(&bytes[begin..end], space_extra) as u32;
                        at += len;
                        for i in 0..len {
                            ids.next();
                            ends.push(if i == 0 { at } else { at | SAME_SPAN });
                        }
                    } else {
                        ids.next();
                        at += original_len(&bytes[begin..end], space_extra) as u32;
                        ends.push(at);
                    }
                }
            }
        });
    }

    /// Appends the ids of `piece` (normalized text, `▁` for spaces) and,
    /// with `ends`, each token's end byte counted from `ends.1`. A space
    /// left as `' '` is no `▁`: where the trie holds `▁` as `' '`, such
    /// spaces are encoded apart, as unknown characters.
    pub fn encode_piece(
        &self,
        piece: &str,
        out: &mut Vec<u32>,
        mut ends: Option<(&mut Vec<u32>, u32)>,
    ) {
        if let Some(merges) = &self.merges {
            return self.encode_merges(merges, piece, out, ends);
        }
        if !self.ascii_spaces {
            return self.encode_walk(piece.as_bytes(), out, ends);
        }
        WALK.with(|walk| {
            let walk = &mut *walk.borrow_mut();
            let mut at = ends.as_ref().map_or(0, |e| e.1);
            for (i, part) in piece.split(' ').enumerate() {
                if i > 0 {
                    // A literal space: unknown.
                    match &self.byte_pieces {
                        Some(byte_ids) => out.push(byte_ids[b' ' as usize]),
                        None => out.push(self.unk),
                    }
                    at += 1;
                    if let Some((ends, _)) = ends.as_mut() {
                        ends.push(at);
                    }
                }
                walk.clear();
                push_walk(part, walk);
                self.encode_walk(walk, out, ends.as_mut().map(|(e, _)| (&mut **e, at)));
                at += part.len() as u32;
            }
        })
    }

    /// Appends the ids of `Metaspace`'s unwritten text (see
    /// [`crate::text::pre_tokenizers::Piece::Spaced`]) if this model reads
    /// `▁` as a space: its spaces are already what the trie walks (and a
    /// `▁` of the text, rare, is written as one). False, with nothing
    /// appended, for other models or another replacement.
    pub fn encode_spaced(
        &self,
        text: &str,
        replacement: char,
        prefix: bool,
        out: &mut Vec<u32>,
    ) -> bool {
        if !self.ascii_spaces || replacement != SPACE_SYMBOL || self.merges.is_some() {
            return false;
        }
        if !prefix && SPACE_SYMBOL_FINDER.find(text.as_bytes()).is_none() {
            self.encode_walk(text.as_bytes(), out, None);
            return true;
        }
        WALK.with(|walk| {
            let walk = &mut *walk.borrow_mut();
            walk.clear();
            if prefix {
                walk.push(b' ');
            }
            push_walk(text, walk);
            self.encode_walk(walk, out, None);
        });
        true
    }

    /// A piece (normalized text, `▁` for spaces) as the trie walks it: `▁`
    /// as `' '` where the trie holds it so. A literal space, which no
    /// `Metaspace` leaves and which such a trie cannot tell from `▁`, is an
    /// error (the lattice of `nbest` and `sample` has no way around it).
    pub(super) fn walk_of<'p>(&self, piece: &'p str) -> Result<Cow<'p, [u8]>> {
        if !self.ascii_spaces {
            return Ok(Cow::Borrowed(piece.as_bytes()));
        }
        if piece.contains(' ') {
            return Err(Error::invalid(format!(
                "the piece {piece:?} holds a space, which this model reads only as \u{2581}"
            )));
        }
        let mut walk = Vec::with_capacity(piece.len());
        push_walk(piece, &mut walk);
        Ok(Cow::Owned(walk))
    }

    /// Fills `scores` and `lasts` with the best path ending at each
    /// character end; `score` is a trie node's piece score (-inf for none),
    /// `unk_score` the unknown piece's.
    fn viterbi<S: PathScore>(
        &self,
        bytes: &[u8],
        scores: &mut Vec<S>,
        lasts: &mut Vec<(u32, u32)>,
        score: impl Fn(Node) -> S,
        unk_score: S,
    ) {
        let n = bytes.len();
        scores.clear();
        scores.resize(n + 1, S::NEG_INFINITY);
        if lasts.len() <= n {
            lasts.resize(n + 1, (0, UNKNOWN));
        }
        scores[0] = S::ZERO;
        let mut start = 0;
        while start < n {
            let char_end = start + utf8_len(bytes[start]).min(n - start);
            let mut till_here = scores[start];
            if till_here.needs_reset() {
                // Every path so far ends within the longest piece from
                // here; entries past them hold -inf, which stays -inf.
                let last = (start + self.longest_walk).min(n);
                for s in &mut scores[start..=last] {
                    *s -= till_here;
                }
                till_here = S::ZERO;
            }
            let mut relax = |end: usize, piece: u32, score: S| {
                // NO_PIECE never wins.
                let candidate = score + till_here;
                if candidate > scores[end] {
                    scores[end] = candidate;
                    lasts[end] = (start as u32, piece);
                }
            };
            // The walk through the character's own bytes, then beyond it:
            // only a piece ending at the character's end decides whether
            // the unknown piece is needed.
            let mut node = self.trie.root();
            let mut end = start;
            while end < char_end {
                let Some(next) = self.trie.child(node, bytes[end]) else {
                    break;
                };
                node = next;
                end += 1;
                relax(end, node.index, score(node));
            }
            let has_single = end == char_end && node.score != NO_PIECE;
            if end == char_end {
                while let Some(next) = bytes.get(end).and_then(|&b| self.trie.child(node, b)) {
                    node = next;
                    end += 1;
                    relax(end, node.index, score(node));
                }
            }
            if !has_single {
                let candidate = unk_score + till_here;
                // (SentencePiece also takes the unknown piece where no path
                // ends yet: a finite candidate beats -inf just the same.)
                if candidate > scores[char_end] {
                    scores[char_end] = candidate;
                    lasts[char_end] = (start as u32, UNKNOWN);
                }
            }
            start = char_end;
        }
    }

    /// The pieces of the best path, from the end back; runs of unknown
    /// pieces become one.
    fn best_pieces(
        &self,
        bytes: &[u8],
        best: &BestPaths,
        spans: &mut Vec<Span>,
        out: &mut Vec<u32>,
    ) {
        let first = out.len();
        spans.clear();
        let mut end = bytes.len();
        while end > 0 {
            let (begin, piece) = best.lasts[end];
            let begin = begin as usize;
            match spans.last_mut() {
                Some((UNKNOWN, span_begin, _)) if piece == UNKNOWN => *span_begin = begin,
                _ => spans.push((piece, begin, end)),
            }
            end = begin;
        }
        for &(piece, begin, end) in spans.iter().rev() {
            match &self.byte_pieces {
                _ if piece != UNKNOWN => out.push(self.trie.id(piece)),
                Some(byte_ids) => self.push_byte_pieces(byte_ids, &bytes[begin..end], out),
                None => out.push(self.unk),
            }
        }
        debug_assert!(out.len() > first);
    }
}

impl UnigramModel {
    /// Calls `f(start, matches)` for each character start of `bytes`, in
    /// order, with the pieces that start there as `(end, id, score)`, shortest
    /// first, as SentencePiece's lattice has them: every normal or
    /// user-defined piece (user pieces score 0.1 per character after the
    /// first), and the unknown piece over one character when no piece covers
    /// just that character.
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
            let char_end = start + utf8_len(bytes[start]).min(n - start);
            let mut node = self.trie.root();
            matches.clear();
            for (end, &byte) in (start + 1..).zip(&bytes[start..]) {
                let Some(next) = self.trie.child(node, byte) else {
                    break;
                };
                node = next;
                if node.score == NO_PIECE {
                    continue;
                }
                let id = self.trie.id(node.index);
                let score = if self.pieces[id as usize].kind == PieceKind::UserDefined {
                    let chars = bytes[start..end]
                        .iter()
                        .filter(|&&b| b & 0xC0 != 0x80)
                        .count();
                    (0.1 * (chars as f64 - 1.0)) as f32
                } else {
                    node.score
                };
                matches.push((end, id, score));
            }
            if !matches.iter().any(|&(end, _, _)| end == char_end) {
                matches.push((char_end, self.unk, unk_score));
            }
            f(start, &matches);
            start = char_end;
        }
    }
}

/// The number of ids `best_pieces` wrote for `spans`.
fn count_tokens(spans: &[Span], byte_fallback: bool, bytes: &[u8], space_extra: usize) -> usize {
    spans
        .iter()
        .map(|&(piece, begin, end)| match piece {
            UNKNOWN if byte_fallback => original_len(&bytes[begin..end], space_extra),
            _ => 1,
        })
        .sum()
}

/// Appends `text` as a trie that holds `▁` as `' '` walks it: each `▁` as
/// `' '` (a SIMD search for `▁`, which ordinary text seldom holds).
fn push_walk(text: &str, walk: &mut Vec<u8>) {
    let bytes = text.as_bytes();
    let mut copied = 0;
    for at in SPACE_SYMBOL_FINDER.find_iter(bytes) {
        walk.extend_from_slice(&bytes[copied..at]);
        walk.push(b' ');
        copied = at + SPACE_SYMBOL.len_utf8();
    }
    walk.extend_from_slice(&bytes[copied..]);
}

/// The length of a walk text's bytes in the original form.
fn original_len(walk: &[u8], space_extra: usize) -> usize {
    walk.len() + space_extra * memchr::memchr_iter(b' ', walk).count()
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
