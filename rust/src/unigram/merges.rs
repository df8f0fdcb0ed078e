//! SentencePiece's BPE segmentation (`bpe_model.cc`, version 0.2.3), for
//! its BPE models (Llama 2's, Mistral's): a model of this kind shares
//! everything but the segmentation with a Unigram model (pieces with
//! scores and kinds, byte fallback, whitespace switches, decoding, the
//! `.model` file), so it is a [`UnigramModel`] whose [`Segmentation`] is
//! `Bpe`.
//!
//! A text starts as its characters, except that a user-defined piece
//! matching at a position (the longest) is one symbol that never merges.
//! Then, as long as two neighbours together spell a piece (normal,
//! user-defined or unused), the pair whose piece scores highest merges,
//! the leftmost among equal scores. An unused piece left at the end is
//! split back into the two symbols that made it (the last such pair the
//! text formed), recursively. A symbol that is no piece is unknown: with
//! byte fallback, its UTF-8 bytes; otherwise a run of them is one unknown
//! piece.
//!
//! The merges go through a heap of candidate pairs, stale entries skipped
//! when popped, as SentencePiece does: O(n log n) for n characters.
//! Words are encoded apart where no piece can span their boundary: before
//! a `▁` that follows another character when no piece has a `▁` after
//! something else (`as_suffix` models: after a `▁` that precedes one),
//! which the model checks once. Merges in one word never touch another,
//! so the result is the whole text's. Models with unused pieces encode the
//! whole text at once: which pair an unused piece splits into is the last
//! one formed anywhere in the text.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use aho_corasick::{AhoCorasick, Anchored, Input, MatchKind, StartKind};
use rustc_hash::FxHashMap;

use super::{Piece, PieceKind, UnigramModel, SPACE_SYMBOL, SPACE_SYMBOL_FINDER};
use crate::error::{Error, Result};
use crate::model::SAME_SPAN;

/// How a model segments a piece of text into its pieces: SentencePiece's
/// `model_type`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Segmentation {
    /// The pieces whose scores sum highest (Viterbi).
    #[default]
    Unigram,
    /// Characters merged pair by pair, the best-scoring piece first.
    Bpe,
}

/// Where a text may be cut into words that encode apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum WordCuts {
    /// Before a `▁` that follows another character.
    BeforeSpace,
    /// After a `▁` that precedes another character.
    AfterSpace,
    /// Nowhere.
    None,
}

/// What the BPE segmentation needs beyond the model's pieces.
pub(super) struct Merges {
    /// The pieces a merge may make (normal, user-defined, unused): id and
    /// score.
    mergeable: FxHashMap<Box<str>, (u32, f32)>,
    /// Finds the user-defined piece a symbol starts with (anchored,
    /// longest), when the model has any.
    user_defined: Option<AhoCorasick>,
    cuts: WordCuts,
    has_unused: bool,
}

impl Merges {
    pub(super) fn new(pieces: &[Piece], as_suffix: bool) -> Result<Self> {
        let mut mergeable = FxHashMap::default();
        let mut user_defined = Vec::new();
        let mut has_unused = false;
        let (mut space_after_other, mut other_after_space) = (false, false);
        for (id, piece) in pieces.iter().enumerate() {
            match piece.kind {
                PieceKind::Normal => {}
                PieceKind::UserDefined => user_defined.push(piece.text.as_str()),
                PieceKind::Unused => has_unused = true,
                PieceKind::Unknown | PieceKind::Control | PieceKind::Byte => continue,
            }
            mergeable.insert(piece.text.as_str().into(), (id as u32, piece.score));
            let mut prev_space = None;
            for c in piece.text.chars() {
                let space = c == SPACE_SYMBOL;
                match (prev_space, space) {
                    (Some(false), true) => space_after_other = true,
                    (Some(true), false) => other_after_space = true,
                    _ => {}
                }
                prev_space = Some(space);
            }
        }
        let cuts = match (as_suffix, space_after_other, other_after_space) {
            (false, false, _) => WordCuts::BeforeSpace,
            (true, _, false) => WordCuts::AfterSpace,
            _ => WordCuts::None,
        };
        let user_defined = if user_defined.is_empty() {
            None
        } else {
            Some(
                AhoCorasick::builder()
                    .match_kind(MatchKind::LeftmostLongest)
                    .start_kind(StartKind::Anchored)
                    .build(&user_defined)
                    .map_err(|e| Error::invalid(format!("user-defined pieces: {e}")))?,
            )
        };
        Ok(Merges {
            mergeable,
            user_defined,
            cuts,
            has_unused,
        })
    }
}

/// A symbol: a span of the word, with its neighbours (`NONE` at the ends).
#[derive(Clone, Copy)]
struct Symbol {
    start: u32,
    end: u32,
    prev: u32,
    next: u32,
    frozen: bool,
}

const NONE: u32 = u32::MAX;

/// A candidate merge: `left` and the symbol after it, spelling a piece of
/// `score` that is `len` bytes long (stale once either has changed).
struct Candidate {
    score: f32,
    left: u32,
    right: u32,
    len: u32,
}

impl Ord for Candidate {
    /// The best first: the highest score, then the leftmost (scores are
    /// finite; `0.0` and `-0.0` tie, as they do in SentencePiece).
    fn cmp(&self, other: &Self) -> Ordering {
        self.score
            .partial_cmp(&other.score)
            .unwrap_or(Ordering::Equal)
            .then(other.left.cmp(&self.left))
    }
}

impl PartialOrd for Candidate {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Candidate {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Candidate {}

/// The buffers of one thread's words, reused between calls.
#[derive(Default)]
struct Buffers {
    symbols: Vec<Symbol>,
    heap: BinaryHeap<Candidate>,
}

thread_local! {
    static BUFFERS: std::cell::RefCell<Buffers> = std::cell::RefCell::new(Buffers::default());
}

/// What the tokens of a piece are made of, appended as they come.
struct Output<'o> {
    ids: &'o mut Vec<u32>,
    ends: Option<&'o mut Vec<u32>>,
    /// Where the next token starts in the pipeline's text.
    at: u32,
    /// Whether the last token is the unknown piece (a run of unknown
    /// symbols is one).
    after_unknown: bool,
}

impl UnigramModel {
    /// Appends the ids of `piece` (normalized text, `▁` for spaces) by BPE
    /// merges and, with `ends`, each token's end byte counted from `ends.1`.
    pub(super) fn encode_merges(
        &self,
        merges: &Merges,
        piece: &str,
        ids: &mut Vec<u32>,
        ends: Option<(&mut Vec<u32>, u32)>,
    ) {
        let (ends, at) = match ends {
            Some((ends, at)) => (Some(ends), at),
            None => (None, 0),
        };
        let mut out = Output {
            ids,
            ends,
            at,
            after_unknown: false,
        };
        BUFFERS.with(|buffers| {
            let buffers = &mut *buffers.borrow_mut();
            if merges.has_unused || merges.cuts == WordCuts::None {
                return self.encode_word(merges, piece, buffers, &mut out);
            }
            let bytes = piece.as_bytes();
            let space_len = SPACE_SYMBOL.len_utf8();
            let mut word_start = 0;
            for found in SPACE_SYMBOL_FINDER.find_iter(bytes) {
                let cut = match merges.cuts {
                    // Before this `▁` if another character precedes it.
                    WordCuts::BeforeSpace => {
                        (found > 0 && !bytes[..found].ends_with(SPACE_BYTES)).then_some(found)
                    }
                    // After it if another character follows.
                    _ => {
                        let after = found + space_len;
                        (after < bytes.len() && !bytes[after..].starts_with(SPACE_BYTES))
                            .then_some(after)
                    }
                };
                if let Some(cut) = cut {
                    if cut > word_start {
                        self.encode_word(merges, &piece[word_start..cut], buffers, &mut out);
                        word_start = cut;
                    }
                }
            }
            self.encode_word(merges, &piece[word_start..], buffers, &mut out);
        })
    }

    /// Merges one word's symbols and appends its tokens.
    fn encode_word(&self, merges: &Merges, word: &str, buffers: &mut Buffers, out: &mut Output) {
        if word.is_empty() {
            return;
        }
        let Buffers { symbols, heap } = buffers;
        symbols.clear();
        heap.clear();
        let mut start = 0;
        while start < word.len() {
            let user_defined = merges.user_defined.as_ref().and_then(|matcher| {
                matcher
                    .find(Input::new(&word[start..]).anchored(Anchored::Yes))
                    .map(|m| m.end())
            });
            let len = user_defined.unwrap_or_else(|| char_len(word.as_bytes()[start]));
            let index = symbols.len() as u32;
            symbols.push(Symbol {
                start: start as u32,
                end: (start + len) as u32,
                prev: if index == 0 { NONE } else { index - 1 },
                next: if start + len < word.len() {
                    index + 1
                } else {
                    NONE
                },
                frozen: user_defined.is_some(),
            });
            start += len;
        }
        // The pair an unused piece was last made of, for splitting it back.
        let mut unmerged: FxHashMap<&str, (&str, &str)> = FxHashMap::default();
        let mut consider = |symbols: &[Symbol], heap: &mut BinaryHeap<Candidate>, left: u32| {
            let Some(l) = symbols.get(left as usize) else {
                return;
            };
            let Some(r) = symbols.get(l.next as usize) else {
                return;
            };
            if l.frozen || r.frozen {
                return;
            }
            let text = &word[l.start as usize..r.end as usize];
            if let Some(&(id, score)) = merges.mergeable.get(text) {
                heap.push(Candidate {
                    score,
                    left,
                    right: l.next,
                    len: r.end - l.start,
                });
                if merges.has_unused && self.pieces[id as usize].kind == PieceKind::Unused {
                    let middle = (l.end - l.start) as usize;
                    unmerged.insert(text, (&text[..middle], &text[middle..]));
                }
            }
        };
        for left in 0..symbols.len() as u32 - 1 {
            consider(symbols, heap, left);
        }
        while let Some(top) = heap.pop() {
            let (l, r) = (symbols[top.left as usize], symbols[top.right as usize]);
            // Stale: either side merged away or grown since.
            if l.start == l.end
                || r.start == r.end
                || r.end - l.start != top.len
                || l.next != top.right
            {
                continue;
            }
            symbols[top.left as usize].end = r.end;
            symbols[top.left as usize].next = r.next;
            if r.next != NONE {
                symbols[r.next as usize].prev = top.left;
            }
            symbols[top.right as usize].end = r.start;
            let prev = symbols[top.left as usize].prev;
            if prev != NONE {
                consider(symbols, heap, prev);
            }
            consider(symbols, heap, top.left);
        }
        let mut index = 0;
        while index != NONE {
            let s = symbols[index as usize];
            self.push_symbol(
                merges,
                &word[s.start as usize..s.end as usize],
                &unmerged,
                out,
            );
            index = s.next;
        }
    }

    /// Appends the token(s) of one merged symbol: its piece, an unused
    /// piece's halves, or the unknown piece or bytes.
    fn push_symbol(
        &self,
        merges: &Merges,
        text: &str,
        unmerged: &FxHashMap<&str, (&str, &str)>,
        out: &mut Output,
    ) {
        let len = text.len() as u32;
        if let Some(&(id, _)) = merges.mergeable.get(text) {
            if let Some(&(left, right)) = unmerged.get(text) {
                self.push_symbol(merges, left, unmerged, out);
                return self.push_symbol(merges, right, unmerged, out);
            }
            out.ids.push(id);
            out.at += len;
            if let Some(ends) = out.ends.as_deref_mut() {
                ends.push(out.at);
            }
            out.after_unknown = false;
            return;
        }
        out.at += len;
        match &self.byte_pieces {
            Some(byte_ids) => {
                // Each byte of an unknown character covers the character.
                out.ids.extend(text.bytes().map(|b| byte_ids[b as usize]));
                if let Some(ends) = out.ends.as_deref_mut() {
                    ends.push(out.at);
                    ends.extend(std::iter::repeat_n(out.at | SAME_SPAN, text.len() - 1));
                }
            }
            None if out.after_unknown => {
                if let Some(end) = out.ends.as_deref_mut().and_then(|e| e.last_mut()) {
                    *end = out.at;
                }
            }
            None => {
                out.ids.push(self.unk);
                if let Some(ends) = out.ends.as_deref_mut() {
                    ends.push(out.at);
                }
                out.after_unknown = true;
            }
        }
    }

    /// The error of the Unigram-only features on a BPE model.
    pub(super) fn unigram_only(&self, what: &str) -> Result<()> {
        match self.merges {
            None => Ok(()),
            Some(_) => Err(Error::invalid(format!(
                "{what} needs a Unigram model; this SentencePiece model is BPE"
            ))),
        }
    }
}

const SPACE_BYTES: &[u8] = "\u{2581}".as_bytes();

/// The length of the UTF-8 character that starts with `first`.
#[inline]
fn char_len(first: u8) -> usize {
    match first {
        0..0xE0 => 1 + (first >= 0xC0) as usize,
        0xE0..0xF0 => 3,
        _ => 4,
    }
}
