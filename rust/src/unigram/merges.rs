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
//! A BPE model read from a Hugging Face tokenizer.json (character-level
//! BPE, as `transformers` converts Llama's and Mistral's models) merges
//! by `tokenizers`' rule instead (`Merges::by_ranks`): only the pairs its
//! file lists, the best-ranked first, characters that are no token unknown
//! from the start, and its `fuse_unk` and `ignore_merges` switches. The
//! same machinery runs both rules; only the pair table and the switches
//! differ.
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

use std::collections::BinaryHeap;

use aho_corasick::{AhoCorasick, Anchored, Input, MatchKind, StartKind};
use rustc_hash::FxHashMap;

use super::{parse_byte_piece, Piece, PieceKind, UnigramModel, SPACE_SYMBOL, SPACE_SYMBOL_FINDER};
use crate::bpe::{new_instance, PieceCache, CACHED_PIECE};
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

/// Hugging Face's switches of a BPE model that merges by rank.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RankedSettings {
    /// `fuse_unk`: a run of unknown characters is one unknown token.
    pub fuse_unknown: bool,
    /// `ignore_merges`: a pre-tokenized piece that is a token is that
    /// token, whatever the merges would make of it.
    pub ignore_merges: bool,
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
///
/// Merges are looked up by the ids of the two symbols rather than by their
/// text: a symbol is a mergeable piece (its id) or a single character. By
/// SentencePiece's rule (`by_scores`), a character's id is its piece's if
/// it is one, else a number past the pieces given to each character that
/// some piece holds (a character in no piece never merges), and each
/// mergeable piece is entered under every split into two such symbols, so
/// a pair merges exactly when its text is a piece, in the order of the
/// pieces' scores. By Hugging Face's (`by_ranks`), only characters that are
/// tokens are symbols (the others are unknown from the start) and only the
/// listed pairs merge, in the order of the list.
pub(super) struct Merges {
    /// (left symbol << 32 | right symbol) → the piece they make, and its
    /// priority (`sortable_score`, or the complement of the rank).
    pairs: FxHashMap<u64, (u32, u32)>,
    /// The symbol id of each character that can merge.
    char_ids: FxHashMap<char, u32>,
    /// The same for ASCII, by byte (`NONE`: no piece holds it).
    ascii_ids: [u32; 128],
    /// The pieces a merge may make (normal, user-defined, unused), by text.
    mergeable: FxHashMap<Box<str>, u32>,
    /// Finds the user-defined piece a symbol starts with (anchored,
    /// longest), when the model has any.
    user_defined: Option<AhoCorasick>,
    cuts: WordCuts,
    has_unused: bool,
    /// Whether a run of unknown symbols is one unknown piece (always in
    /// SentencePiece), and whether a piece that is a token is taken whole
    /// (never in SentencePiece).
    settings: RankedSettings,
    /// Hugging Face's merges in rank order (left and right piece ids), kept
    /// to be written back; `None` for SentencePiece's rule.
    ranked: Option<Vec<(u32, u32)>>,
    /// Unique per model: tells the per-thread caches apart.
    instance: u64,
}

/// What both rules read off the pieces.
struct PieceScan<'p> {
    mergeable: FxHashMap<Box<str>, u32>,
    user_defined: Vec<&'p str>,
    has_unused: bool,
    /// Whether some piece has a `▁` after another character, or another
    /// character after a `▁`.
    space_after_other: bool,
    other_after_space: bool,
}

impl<'p> PieceScan<'p> {
    fn new(pieces: &'p [Piece]) -> Self {
        let mut scan = PieceScan {
            mergeable: FxHashMap::default(),
            user_defined: Vec::new(),
            has_unused: false,
            space_after_other: false,
            other_after_space: false,
        };
        for (id, piece) in pieces.iter().enumerate() {
            match piece.kind {
                PieceKind::Normal => {}
                PieceKind::UserDefined => scan.user_defined.push(piece.text.as_str()),
                PieceKind::Unused => scan.has_unused = true,
                PieceKind::Unknown | PieceKind::Control | PieceKind::Byte => continue,
            }
            scan.mergeable.insert(piece.text.as_str().into(), id as u32);
            let mut prev_space = None;
            for c in piece.text.chars() {
                let space = c == SPACE_SYMBOL;
                match (prev_space, space) {
                    (Some(false), true) => scan.space_after_other = true,
                    (Some(true), false) => scan.other_after_space = true,
                    _ => {}
                }
                prev_space = Some(space);
            }
        }
        scan
    }

    /// The tables, with the pairs and character ids a rule made.
    fn finish(
        self,
        pairs: FxHashMap<u64, (u32, u32)>,
        char_ids: FxHashMap<char, u32>,
        as_suffix: bool,
        settings: RankedSettings,
        ranked: Option<Vec<(u32, u32)>>,
    ) -> Result<Merges> {
        let mut ascii_ids = [NONE; 128];
        for (b, slot) in ascii_ids.iter_mut().enumerate() {
            *slot = char_ids.get(&(b as u8 as char)).copied().unwrap_or(NONE);
        }
        let cuts = match (as_suffix, self.space_after_other, self.other_after_space) {
            (false, false, _) => WordCuts::BeforeSpace,
            (true, _, false) => WordCuts::AfterSpace,
            _ => WordCuts::None,
        };
        let user_defined = if self.user_defined.is_empty() {
            None
        } else {
            Some(
                AhoCorasick::builder()
                    .match_kind(MatchKind::LeftmostLongest)
                    .start_kind(StartKind::Anchored)
                    .build(&self.user_defined)
                    .map_err(|e| Error::invalid(format!("user-defined pieces: {e}")))?,
            )
        };
        Ok(Merges {
            pairs,
            char_ids,
            ascii_ids,
            mergeable: self.mergeable,
            user_defined,
            cuts,
            has_unused: self.has_unused,
            settings,
            ranked,
            instance: new_instance(),
        })
    }
}

impl Merges {
    /// SentencePiece's rule: a pair merges when its text is a piece, the
    /// best-scoring first.
    pub(super) fn by_scores(pieces: &[Piece], as_suffix: bool) -> Result<Self> {
        let scan = PieceScan::new(pieces);
        let mergeable = &scan.mergeable;
        // Symbol ids of single characters.
        let mut char_ids = FxHashMap::default();
        let mut next_id = pieces.len() as u32;
        for text in mergeable.keys() {
            for c in text.chars() {
                char_ids.entry(c).or_insert_with(|| {
                    let own = mergeable.get(c.encode_utf8(&mut [0; 4]) as &str).copied();
                    own.unwrap_or_else(|| {
                        next_id += 1;
                        next_id - 1
                    })
                });
            }
        }
        let symbol_id = |text: &str| -> Option<u32> {
            let mut chars = text.chars();
            match (chars.next(), chars.next()) {
                (Some(c), None) => char_ids.get(&c).copied(),
                _ => mergeable.get(text).copied(),
            }
        };
        let mut pairs = FxHashMap::default();
        for (text, &id) in mergeable {
            for (split, _) in text.char_indices().skip(1) {
                if let (Some(left), Some(right)) =
                    (symbol_id(&text[..split]), symbol_id(&text[split..]))
                {
                    pairs.insert(
                        pair_key(left, right),
                        (id, sortable_score(pieces[id as usize].score)),
                    );
                }
            }
        }
        let settings = RankedSettings {
            fuse_unknown: true,
            ignore_merges: false,
        };
        scan.finish(pairs, char_ids, as_suffix, settings, None)
    }

    /// Hugging Face's rule: the pairs of `ranked` (piece ids, best first)
    /// merge into the piece they spell, in that order; a pair listed twice
    /// keeps its last rank, as in `tokenizers`.
    pub(super) fn by_ranks(
        pieces: &[Piece],
        ranked: Vec<(u32, u32)>,
        settings: RankedSettings,
    ) -> Result<Self> {
        let scan = PieceScan::new(pieces);
        if scan.has_unused || !scan.user_defined.is_empty() {
            return Err(Error::invalid(
                "merges by rank over unused or user-defined pieces are not supported",
            ));
        }
        let mut char_ids = FxHashMap::default();
        for (text, &id) in &scan.mergeable {
            let mut chars = text.chars();
            if let (Some(c), None) = (chars.next(), chars.next()) {
                char_ids.insert(c, id);
            }
        }
        let mut pairs = FxHashMap::default();
        let mut text = String::new();
        for (rank, &(left, right)) in ranked.iter().enumerate() {
            let piece = |id: u32| {
                pieces
                    .get(id as usize)
                    .filter(|p| p.kind == PieceKind::Normal)
                    .ok_or_else(|| {
                        Error::invalid(format!(
                            "merge {rank} has the id {id}, which is no ordinary token"
                        ))
                    })
            };
            let (l, r) = (piece(left)?, piece(right)?);
            text.clear();
            text.push_str(&l.text);
            text.push_str(&r.text);
            let Some(&merged) = scan.mergeable.get(text.as_str()) else {
                return Err(Error::invalid(format!(
                    "merge {rank} ({:?} {:?}) makes {text:?}, which is not in the vocabulary",
                    l.text, r.text
                )));
            };
            pairs.insert(pair_key(left, right), (merged, u32::MAX - rank as u32));
        }
        scan.finish(pairs, char_ids, false, settings, Some(ranked))
    }

    pub(super) fn ranked(&self) -> Option<&[(u32, u32)]> {
        self.ranked.as_deref()
    }

    pub(super) fn settings(&self) -> RankedSettings {
        self.settings
    }

    /// The symbol id of the character `c` (`NONE` if no piece holds it).
    #[inline]
    fn char_id(&self, c: &str) -> u32 {
        match c.as_bytes() {
            [b] if *b < 128 => self.ascii_ids[*b as usize],
            _ => {
                let c = c.chars().next().expect("one character");
                self.char_ids.get(&c).copied().unwrap_or(NONE)
            }
        }
    }
}

#[inline]
fn pair_key(left: u32, right: u32) -> u64 {
    (left as u64) << 32 | right as u64
}

/// A symbol: a span of the word, its symbol id (`NONE`: never merges),
/// and its neighbours (`NONE` at the ends).
#[derive(Clone, Copy)]
struct Symbol {
    start: u32,
    end: u32,
    id: u32,
    prev: u32,
    next: u32,
}

const NONE: u32 = u32::MAX;

/// A candidate merge as one number, the best the largest: its priority
/// (the score of the piece it makes as `sortable_score`, or the complement
/// of its rank) above the complement of its left symbol's index, so that
/// among equal priorities the leftmost wins.
///
/// Entries are not invalidated when their symbols change: a popped entry
/// is taken only if the pair now at its left symbol makes a piece of its
/// score. That is SentencePiece's choice: every current pair has its own
/// entry, so the largest entry that passes is the largest current pair's,
/// and an entry that passes for a pair it was not made for has that pair's
/// very key.
#[inline]
fn candidate(score: u32, left: u32) -> u64 {
    (score as u64) << 32 | (u32::MAX - left) as u64
}

/// A score as a number that orders as the score does (`-0.0` ties with
/// `0.0`, as in SentencePiece's comparison).
fn sortable_score(score: f32) -> u32 {
    let bits = if score == 0.0 { 0 } else { score.to_bits() };
    if bits >> 31 == 1 {
        !bits
    } else {
        bits | 1 << 31
    }
}

/// What a thread keeps between words and calls: the merge buffers and a
/// cache of encoded words (those without the unknown piece, whose runs
/// join across words), for one model at a time.
#[derive(Default)]
struct Buffers {
    symbols: Vec<Symbol>,
    heap: BinaryHeap<u64>,
    /// `Merges::instance` of the model the cache belongs to.
    model: u64,
    cache: PieceCache,
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
        if merges.settings.ignore_merges {
            if let Some(&id) = merges.mergeable.get(piece) {
                return self.push_symbol(merges, piece, Some(id), &FxHashMap::default(), &mut out);
            }
        }
        BUFFERS.with(|buffers| {
            let buffers = &mut *buffers.borrow_mut();
            if merges.has_unused || merges.cuts == WordCuts::None {
                return self.encode_word(merges, piece, buffers, &mut out);
            }
            if buffers.model != merges.instance {
                buffers.model = merges.instance;
                buffers.cache.clear();
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
                        self.encode_cached(merges, &piece[word_start..cut], buffers, &mut out);
                        word_start = cut;
                    }
                }
            }
            self.encode_cached(merges, &piece[word_start..], buffers, &mut out);
        })
    }

    /// Appends a word's tokens from the cache, or merges it and caches it.
    fn encode_cached(&self, merges: &Merges, word: &str, buffers: &mut Buffers, out: &mut Output) {
        if word.len() > CACHED_PIECE {
            return self.encode_word(merges, word, buffers, out);
        }
        let hash = buffers.cache.hash(word.as_bytes());
        if let Some(ids) = buffers.cache.get(word.as_bytes(), hash) {
            out.ids.extend_from_slice(ids);
            if let Some(ends) = out.ends.as_deref_mut() {
                push_ends(self, ids, &mut out.at, ends);
            }
            out.after_unknown = false;
            return;
        }
        let first = out.ids.len();
        self.encode_word(merges, word, buffers, out);
        let ids = &out.ids[first..];
        if !ids.contains(&self.unk) {
            buffers.cache.insert(word.as_bytes(), hash, ids);
        }
    }

    /// Merges one word's symbols and appends its tokens.
    fn encode_word(&self, merges: &Merges, word: &str, buffers: &mut Buffers, out: &mut Output) {
        if word.is_empty() {
            return;
        }
        let Buffers { symbols, heap, .. } = buffers;
        symbols.clear();
        heap.clear();
        let mut start = 0;
        while start < word.len() {
            let user_defined = merges.user_defined.as_ref().and_then(|matcher| {
                matcher
                    .find(Input::new(&word[start..]).anchored(Anchored::Yes))
                    .map(|m| m.end())
            });
            let (len, id) = match user_defined {
                // Frozen: never merges.
                Some(len) => (len, NONE),
                None => {
                    let len = char_len(word.as_bytes()[start]);
                    (len, merges.char_id(&word[start..start + len]))
                }
            };
            let index = symbols.len() as u32;
            symbols.push(Symbol {
                start: start as u32,
                end: (start + len) as u32,
                id,
                prev: if index == 0 { NONE } else { index - 1 },
                next: if start + len < word.len() {
                    index + 1
                } else {
                    NONE
                },
            });
            start += len;
        }
        // The byte length of the left half of an unused piece as last made,
        // for splitting it back.
        let mut unmerged: FxHashMap<u32, u32> = FxHashMap::default();
        let mut consider = |symbols: &[Symbol], heap: &mut BinaryHeap<u64>, left: u32| {
            let l = symbols[left as usize];
            let Some(r) = symbols.get(l.next as usize) else {
                return;
            };
            if l.id == NONE || r.id == NONE {
                return;
            }
            if let Some(&(id, score)) = merges.pairs.get(&pair_key(l.id, r.id)) {
                heap.push(candidate(score, left));
                if merges.has_unused && self.pieces[id as usize].kind == PieceKind::Unused {
                    unmerged.insert(id, l.end - l.start);
                }
            }
        };
        for left in 0..symbols.len() as u32 - 1 {
            consider(symbols, heap, left);
        }
        while let Some(top) = heap.pop() {
            let left = u32::MAX - top as u32;
            let l = symbols[left as usize];
            // Merged into the symbol before it since.
            if l.start == l.end {
                continue;
            }
            let Some(&r) = symbols.get(l.next as usize) else {
                continue;
            };
            if l.id == NONE || r.id == NONE {
                continue;
            }
            let Some(&(id, score)) = merges.pairs.get(&pair_key(l.id, r.id)) else {
                continue;
            };
            if score != (top >> 32) as u32 {
                continue;
            }
            let right = l.next;
            let merged = &mut symbols[left as usize];
            merged.end = r.end;
            merged.next = r.next;
            merged.id = id;
            let prev = merged.prev;
            if r.next != NONE {
                symbols[r.next as usize].prev = left;
            }
            symbols[right as usize].end = r.start;
            if prev != NONE {
                consider(symbols, heap, prev);
            }
            consider(symbols, heap, left);
        }
        let mut index = 0;
        while index != NONE {
            let s = symbols[index as usize];
            let text = &word[s.start as usize..s.end as usize];
            // A frozen symbol is a user-defined piece, found by its text.
            let id = if s.id == NONE {
                merges.mergeable.get(text).copied()
            } else {
                Some(s.id)
            };
            self.push_symbol(
                merges,
                text,
                id.filter(|&id| (id as usize) < self.pieces.len()),
                &unmerged,
                out,
            );
            index = s.next;
        }
    }

    /// Appends the token(s) of one merged symbol: its piece (`id`), an
    /// unused piece's halves, or, for a character that is no piece, the
    /// unknown piece or its bytes.
    fn push_symbol(
        &self,
        merges: &Merges,
        text: &str,
        id: Option<u32>,
        unmerged: &FxHashMap<u32, u32>,
        out: &mut Output,
    ) {
        let len = text.len() as u32;
        if let Some(id) = id {
            if let Some(&left) = unmerged.get(&id) {
                let (left, right) = text.split_at(left as usize);
                let piece = |text: &str| self.piece_id(text).filter(|&id| self.is_mergeable(id));
                self.push_symbol(merges, left, piece(left), unmerged, out);
                return self.push_symbol(merges, right, piece(right), unmerged, out);
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
            None if out.after_unknown && merges.settings.fuse_unknown => {
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

    fn is_mergeable(&self, id: u32) -> bool {
        matches!(
            self.pieces[id as usize].kind,
            PieceKind::Normal | PieceKind::UserDefined | PieceKind::Unused
        )
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

/// Appends the ends of a cached word's tokens: a piece covers its text,
/// the byte pieces of a character each cover the character.
fn push_ends(model: &UnigramModel, ids: &[u32], at: &mut u32, ends: &mut Vec<u32>) {
    for &id in ids {
        let piece = &model.pieces[id as usize];
        if piece.kind != PieceKind::Byte {
            *at += piece.text.len() as u32;
            ends.push(*at);
            continue;
        }
        let byte = parse_byte_piece(&piece.text).expect("checked at load");
        if byte & 0xC0 == 0x80 {
            ends.push(*at | SAME_SPAN);
        } else {
            *at += char_len(byte) as u32;
            ends.push(*at);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::unigram::Whitespace;

    fn model(pieces: &[(&str, f32, PieceKind)], byte_fallback: bool) -> UnigramModel {
        let mut all = vec![Piece {
            text: "<unk>".into(),
            score: 0.0,
            kind: PieceKind::Unknown,
        }];
        all.extend(pieces.iter().map(|&(text, score, kind)| Piece {
            text: text.into(),
            score,
            kind,
        }));
        if byte_fallback {
            all.extend((0..=255u8).map(|b| Piece {
                text: format!("<0x{b:02X}>"),
                score: 0.0,
                kind: PieceKind::Byte,
            }));
        }
        UnigramModel::new(all, byte_fallback, Whitespace::default())
            .unwrap()
            .with_segmentation(Segmentation::Bpe)
            .unwrap()
    }

    fn encode(m: &UnigramModel, piece: &str) -> Vec<u32> {
        let mut ids = Vec::new();
        m.encode_piece(piece, &mut ids, None);
        ids
    }

    #[test]
    fn scores_order_as_numbers() {
        let scores = [f32::MIN, -3.5, -1.0, -0.0, 0.0, 1e-30, 2.0, f32::MAX];
        for pair in scores.windows(2) {
            assert!(
                sortable_score(pair[0]) <= sortable_score(pair[1]),
                "{pair:?}"
            );
        }
        assert_eq!(sortable_score(-0.0), sortable_score(0.0));
    }

    #[test]
    fn best_score_first_then_leftmost() {
        use PieceKind::Normal;
        let m = model(
            &[
                ("a", -9.0, Normal),
                ("b", -9.0, Normal),
                ("ab", -2.0, Normal),
                ("ba", -1.0, Normal),
            ],
            false,
        );
        // "aba": ba (-1) beats ab (-2).
        assert_eq!(encode(&m, "aba"), [1, 4]);
        // "abab": ba (in the middle) is the best pair: a ba b.
        assert_eq!(encode(&m, "abab"), [1, 4, 2]);
        // Equal scores: the leftmost merges first.
        let tie = model(&[("a", -9.0, Normal), ("aa", -1.0, Normal)], false);
        assert_eq!(encode(&tie, "aaa"), [2, 1]);
    }

    #[test]
    fn unknown_runs_bytes_and_unused_pieces() {
        use PieceKind::{Normal, Unused};
        let m = model(
            &[
                ("a", -9.0, Normal),
                ("b", -9.0, Normal),
                ("ab", -1.0, Unused),
            ],
            false,
        );
        // An unused piece splits back; unknown characters make one <unk>.
        assert_eq!(encode(&m, "abxyb"), [1, 2, 0, 2]);
        let bytes = model(&[("a", -9.0, Normal)], true);
        let ids = encode(&bytes, "aé");
        assert_eq!(ids.len(), 3);
        assert_eq!(bytes.decode(&ids).unwrap(), "aé");
    }
}
