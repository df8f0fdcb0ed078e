//! Pre-tokenizers: cut normalized text into the pieces a model encodes one
//! by one.
//!
//! A pre-tokenizer refines a list of pieces (byte ranges of the normalized
//! text, in order): it starts as the whole text and each step cuts every
//! piece further, drops white space, or (`Metaspace`) rewrites the text
//! itself, keeping its map to the original. Pieces are ranges, not copies,
//! so a step costs one pass over the text and one small vector.

use std::ops::Range;
use std::sync::Arc;

use regex_automata::meta;
use serde::{Deserialize, Serialize};

use super::Normalized;
use crate::error::{Error, Result};
use crate::text::bert::space_or_punctuation;
use crate::text::pattern::{Pattern, PreTokenizer as PatternSplitter};

/// Where `Metaspace` puts a `▁` in front of a piece that has none.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PrependScheme {
    /// In front of every piece (every text between special tokens).
    Always,
    /// In front of the text's first piece only (SentencePiece's dummy
    /// prefix).
    First,
    Never,
}

fn default_replacement() -> char {
    '\u{2581}'
}

/// A pre-tokenization step, as saved in tokenizer files (`{"type": NAME,
/// ...}`; Hugging Face's names and fields where the step exists there).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", deny_unknown_fields)]
pub enum PreTokenizerSpec {
    /// Pieces are the matches of a pattern (and the text between them):
    /// tiktoken's presets `gpt2`, `cl100k`, `o200k`, or a regular
    /// expression (byte-level BPE's pre-tokenizer).
    Pattern { pattern: String },
    /// BERT's: split at white space (dropped) and around each punctuation
    /// character.
    BertPreTokenizer,
    /// Runs of word characters and runs of other non-space characters
    /// (`\w+|[^\w\s]+`); white space is dropped.
    Whitespace,
    /// Split at white space, which is dropped.
    WhitespaceSplit,
    /// Each punctuation character is a piece of its own.
    Punctuation,
    /// Numeric characters apart from the rest: each alone, or in runs.
    Digits {
        #[serde(default)]
        individual_digits: bool,
    },
    /// SentencePiece's `▁`: spaces become `replacement`, a `replacement` is
    /// put in front as `prepend_scheme` says, and with `split` each piece is
    /// cut before every `replacement`.
    Metaspace {
        #[serde(default = "default_replacement")]
        replacement: char,
        prepend_scheme: PrependScheme,
        #[serde(default = "crate::serde_defaults::yes")]
        split: bool,
    },
    Sequence {
        pretokenizers: Vec<PreTokenizerSpec>,
    },
}

/// A pre-tokenizer ready to run (patterns compiled).
#[derive(Clone)]
pub enum PreTokenizer {
    Pattern(Arc<PatternSplitter>),
    Bert,
    Whitespace(Arc<meta::Regex>),
    WhitespaceSplit,
    Punctuation,
    Digits {
        individual: bool,
    },
    Metaspace {
        replacement: char,
        prepend: PrependScheme,
        split: bool,
    },
    Sequence(Vec<PreTokenizer>),
}

impl PreTokenizer {
    /// Compiles `spec`; a bad pattern is an error naming it.
    pub fn new(spec: &PreTokenizerSpec) -> Result<Self> {
        Ok(match spec {
            PreTokenizerSpec::Pattern { pattern } => {
                PreTokenizer::Pattern(Arc::new(PatternSplitter::new(Pattern::parse(pattern)?)?))
            }
            PreTokenizerSpec::BertPreTokenizer => PreTokenizer::Bert,
            PreTokenizerSpec::Whitespace => PreTokenizer::Whitespace(Arc::new(
                meta::Regex::new(r"\w+|[^\w\s]+").expect("a valid pattern"),
            )),
            PreTokenizerSpec::WhitespaceSplit => PreTokenizer::WhitespaceSplit,
            PreTokenizerSpec::Punctuation => PreTokenizer::Punctuation,
            PreTokenizerSpec::Digits { individual_digits } => PreTokenizer::Digits {
                individual: *individual_digits,
            },
            PreTokenizerSpec::Metaspace {
                replacement,
                prepend_scheme,
                split,
            } => PreTokenizer::Metaspace {
                replacement: *replacement,
                prepend: *prepend_scheme,
                split: *split,
            },
            PreTokenizerSpec::Sequence { pretokenizers } => PreTokenizer::Sequence(
                pretokenizers
                    .iter()
                    .map(PreTokenizer::new)
                    .collect::<Result<_>>()?,
            ),
        })
    }

    /// Parses and compiles a JSON spec, naming what is wrong with it.
    pub fn from_json(json: &str) -> Result<Self> {
        let spec: PreTokenizerSpec = serde_json::from_str(json)
            .map_err(|e| Error::invalid(format!("pre-tokenizer {json}: {e}")))?;
        PreTokenizer::new(&spec)
    }

    /// Cuts `pieces` (byte ranges of `text`, in order) further. `text_start`:
    /// the text is the start of what the caller passed (not a stretch after
    /// a special token), for `PrependScheme::First`.
    pub fn pre_tokenize(
        &self,
        text: &mut Normalized,
        pieces: &mut Vec<Range<usize>>,
        text_start: bool,
    ) -> Result<()> {
        match self {
            PreTokenizer::Metaspace {
                replacement,
                prepend,
                split,
            } => {
                metaspace(text, pieces, *replacement, *prepend, text_start);
                if *split {
                    refine(text.as_str(), pieces, |piece, offset, out| {
                        split_before(piece, *replacement, |r| {
                            out.push(offset + r.start..offset + r.end)
                        });
                        Ok(())
                    })?;
                }
            }
            PreTokenizer::Sequence(steps) => {
                for step in steps {
                    step.pre_tokenize(text, pieces, text_start)?;
                }
            }
            step => refine(text.as_str(), pieces, |piece, offset, out| {
                step.split(piece, |r| out.push(offset + r.start..offset + r.end))
            })?,
        }
        Ok(())
    }

    /// Whether [`PreTokenizer::for_each_piece`] can run this step: one
    /// step, not a sequence (whose steps need the pieces of the one before).
    pub fn streams(&self) -> bool {
        !matches!(self, PreTokenizer::Sequence(_))
    }

    /// Calls `f` with each piece of `text`, in order, without a list of
    /// pieces or a map to the original: the ids-only path. `Metaspace`
    /// with `split` writes its text into `buffer`; without, it hands the
    /// text over unwritten ([`Piece::Spaced`]). Not for a `Sequence` (see
    /// [`PreTokenizer::streams`]).
    pub fn for_each_piece(
        &self,
        text: &str,
        text_start: bool,
        buffer: &mut String,
        mut f: impl FnMut(Piece<'_>),
    ) -> Result<()> {
        match self {
            PreTokenizer::Metaspace {
                replacement,
                prepend,
                split,
            } => {
                if text.is_empty() {
                    return Ok(());
                }
                let prefix = takes_prefix(text, *replacement, *prepend, text_start);
                if !*split {
                    f(Piece::Spaced {
                        text,
                        replacement: *replacement,
                        prefix,
                    });
                    return Ok(());
                }
                write_metaspaced(text, *replacement, prefix, buffer);
                split_before(buffer, *replacement, |r| f(Piece::Text(&buffer[r])));
                Ok(())
            }
            // Slices straight from the splitter (the hottest case: no
            // ranges to slice again).
            PreTokenizer::Pattern(splitter) => splitter.for_each_piece(text, |p| f(Piece::Text(p))),
            PreTokenizer::Sequence(_) => unreachable!("a Sequence does not stream"),
            step => step.split(text, |r| f(Piece::Text(&text[r]))),
        }
    }

    /// Cuts one piece as this step does (not `Metaspace` nor `Sequence`,
    /// which change the text or chain steps): `emit` gets the new pieces'
    /// ranges in `piece`.
    fn split(&self, piece: &str, mut emit: impl FnMut(Range<usize>)) -> Result<()> {
        match self {
            PreTokenizer::Pattern(splitter) => {
                let base = piece.as_ptr() as usize;
                splitter.for_each_piece(piece, |p| {
                    let start = p.as_ptr() as usize - base;
                    emit(start..start + p.len());
                })?;
            }
            PreTokenizer::Bert => split_chars(piece, emit, |c| {
                let (space, punctuation) = space_or_punctuation(c);
                if space {
                    Cut::Drop
                } else if punctuation {
                    Cut::Isolate
                } else {
                    Cut::Keep
                }
            }),
            PreTokenizer::Whitespace(regex) => {
                regex.find_iter(piece).for_each(|m| emit(m.range()));
            }
            PreTokenizer::WhitespaceSplit => split_chars(piece, emit, |c| {
                if c.is_whitespace() {
                    Cut::Drop
                } else {
                    Cut::Keep
                }
            }),
            PreTokenizer::Punctuation => split_chars(piece, emit, |c| {
                if space_or_punctuation(c).1 {
                    Cut::Isolate
                } else {
                    Cut::Keep
                }
            }),
            PreTokenizer::Digits { individual: true } => split_chars(piece, emit, |c| {
                if c.is_numeric() {
                    Cut::Isolate
                } else {
                    Cut::Keep
                }
            }),
            PreTokenizer::Digits { individual: false } => {
                split_runs(piece, emit, |c| c.is_numeric())
            }
            PreTokenizer::Metaspace { .. } | PreTokenizer::Sequence(_) => {
                unreachable!("Metaspace and Sequence are not one-piece splits")
            }
        }
        Ok(())
    }
}

/// What a character does to the piece it is in.
enum Cut {
    Keep,
    /// A piece of its own.
    Isolate,
    /// Ends the piece and is dropped.
    Drop,
}

/// Replaces each piece by what `split(piece_text, piece_start, out)`
/// pushes (ranges of the whole text).
fn refine(
    text: &str,
    pieces: &mut Vec<Range<usize>>,
    mut split: impl FnMut(&str, usize, &mut Vec<Range<usize>>) -> Result<()>,
) -> Result<()> {
    thread_local! {
        /// The pieces being refined, reused: no allocation per text.
        static OLD: std::cell::RefCell<Vec<Range<usize>>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    OLD.with(|old| {
        let old = &mut *old.borrow_mut();
        std::mem::swap(old, pieces);
        pieces.clear();
        let result = old
            .drain(..)
            .try_for_each(|range| split(&text[range.clone()], range.start, pieces));
        result
    })
}

fn split_chars(piece: &str, mut emit: impl FnMut(Range<usize>), cut: impl Fn(char) -> Cut) {
    let mut start = None;
    for (i, c) in piece.char_indices() {
        match cut(c) {
            Cut::Keep => {
                start.get_or_insert(i);
            }
            what => {
                if let Some(s) = start.take() {
                    emit(s..i);
                }
                if let Cut::Isolate = what {
                    emit(i..i + c.len_utf8());
                }
            }
        }
    }
    if let Some(s) = start {
        emit(s..piece.len());
    }
}

/// Cuts where `in_run` changes: runs of characters it holds for, and the
/// stretches between them.
fn split_runs(piece: &str, mut emit: impl FnMut(Range<usize>), in_run: impl Fn(char) -> bool) {
    let mut start = 0;
    let mut inside = None;
    for (i, c) in piece.char_indices() {
        let now = in_run(c);
        if inside.is_some_and(|was| was != now) {
            emit(start..i);
            start = i;
        }
        inside = Some(now);
    }
    if start < piece.len() {
        emit(start..piece.len());
    }
}

/// A piece on the ids-only path (see [`PreTokenizer::for_each_piece`]).
pub enum Piece<'t> {
    Text(&'t str),
    /// `Metaspace`'s text (not split) before its rewrite: each space stands
    /// for `replacement`, and with `prefix` one more goes in front. A model
    /// that reads `▁` as a space itself (Unigram's trie) encodes it as it
    /// is, without writing every space as `▁` and back; others get it
    /// written ([`write_metaspaced`]).
    Spaced {
        text: &'t str,
        replacement: char,
        prefix: bool,
    },
}

/// `text` with each space written as `replacement`, and one in front with
/// `prefix`, into `out`.
pub fn write_metaspaced(text: &str, replacement: char, prefix: bool, out: &mut String) {
    out.clear();
    out.reserve(text.len() + text.len() / 2 + replacement.len_utf8());
    if prefix {
        out.push(replacement);
    }
    for (i, part) in text.split(' ').enumerate() {
        if i > 0 {
            out.push(replacement);
        }
        out.push_str(part);
    }
}

/// Cuts before each `mark` (`Metaspace`'s split).
fn split_before(piece: &str, mark: char, mut emit: impl FnMut(Range<usize>)) {
    let mut start = 0;
    for (i, _) in piece.match_indices(mark) {
        if i > start {
            emit(start..i);
        }
        start = i;
    }
    if start < piece.len() {
        emit(start..piece.len());
    }
}

/// Rewrites the pieces' spaces as `replacement` and puts one in front of
/// the pieces `prepend` says, updating the ranges. Text between pieces
/// (dropped white space) is left out.
/// Whether `Metaspace` puts `replacement` in front of `piece` (the text's
/// first piece when `starts_text`). A piece that starts with a space starts
/// with `replacement` once spaces are replaced: it gets no other.
fn takes_prefix(piece: &str, replacement: char, prepend: PrependScheme, starts_text: bool) -> bool {
    let wanted = match prepend {
        PrependScheme::Always => true,
        PrependScheme::First => starts_text,
        PrependScheme::Never => false,
    };
    let first = piece.chars().next();
    wanted && first != Some(replacement) && first != Some(' ')
}

fn metaspace(
    text: &mut Normalized,
    pieces: &mut [Range<usize>],
    replacement: char,
    prepend: PrependScheme,
    text_start: bool,
) {
    text.rebuild(|src, out| {
        let s = src.as_str();
        for (index, range) in pieces.iter_mut().enumerate() {
            let start = out.as_str().len();
            let starts_text = index == 0 && text_start && range.start == 0;
            if takes_prefix(&s[range.clone()], replacement, prepend, starts_text) {
                // The span of the piece's first character, as Hugging
                // Face's (a token of the prefix alone then has text).
                let span = if range.start == range.end {
                    src.insertion_span(range.start)
                } else {
                    src.span_at(range.start)
                };
                out.push(replacement, span);
            }
            let mut copied = range.start;
            for (i, _) in s[range.clone()].match_indices(' ') {
                let at = range.start + i;
                out.copy(src, copied..at);
                out.push(replacement, src.original_span(at..at + 1));
                copied = at + 1;
            }
            out.copy(src, copied..range.end);
            *range = start..out.as_str().len();
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(spec: &str, text: &str) -> (String, Vec<String>, Vec<(u32, u32)>) {
        let pre = PreTokenizer::from_json(spec).unwrap();
        let mut n = Normalized::new(text, true);
        let mut pieces = Vec::new();
        pieces.push(0..n.as_str().len());
        pre.pre_tokenize(&mut n, &mut pieces, true).unwrap();
        let words = pieces
            .iter()
            .map(|r| n.as_str()[r.clone()].to_owned())
            .collect();
        let spans = pieces.iter().map(|r| n.original_span(r.clone())).collect();
        (n.as_str().to_owned(), words, spans)
    }

    /// The pieces of the ids-only path, `Metaspace`'s unwritten text
    /// written out.
    fn streamed(spec: &str, text: &str, text_start: bool) -> Vec<String> {
        let pre = PreTokenizer::from_json(spec).unwrap();
        let mut pieces = Vec::new();
        let mut buffer = String::new();
        pre.for_each_piece(text, text_start, &mut buffer, |piece| match piece {
            Piece::Text(t) => pieces.push(t.to_owned()),
            Piece::Spaced {
                text,
                replacement,
                prefix,
            } => {
                let mut written = String::new();
                write_metaspaced(text, replacement, prefix, &mut written);
                pieces.push(written);
            }
        })
        .unwrap();
        pieces
    }

    #[test]
    fn streamed_pieces_equal_the_listed_ones() {
        let specs = [
            r#"{"type": "Pattern", "pattern": "cl100k"}"#,
            r#"{"type": "Pattern", "pattern": "\\w+|\\s+|[^\\w\\s]+"}"#,
            r#"{"type": "BertPreTokenizer"}"#,
            r#"{"type": "Whitespace"}"#,
            r#"{"type": "WhitespaceSplit"}"#,
            r#"{"type": "Punctuation"}"#,
            r#"{"type": "Digits", "individual_digits": true}"#,
            r#"{"type": "Digits", "individual_digits": false}"#,
            r#"{"type": "Metaspace", "prepend_scheme": "always", "split": true}"#,
            r#"{"type": "Metaspace", "prepend_scheme": "first", "split": false}"#,
            r#"{"type": "Metaspace", "prepend_scheme": "never", "split": true}"#,
        ];
        let texts = [
            "",
            " ",
            "Hello, world!  It's 2024...",
            " lead▁ and ▁trail ",
            "日本語のテキスト、１２３。",
            "tab\there\nnew  line",
            "क्षि ـ 🙂 e\u{301}",
        ];
        for spec in specs {
            for text in texts {
                for text_start in [true, false] {
                    let pre = PreTokenizer::from_json(spec).unwrap();
                    let mut n = Normalized::new(text, false);
                    let mut pieces = Vec::new();
                    if !text.is_empty() {
                        pieces.push(0..text.len());
                    }
                    pre.pre_tokenize(&mut n, &mut pieces, text_start).unwrap();
                    let listed: Vec<String> = pieces
                        .iter()
                        .map(|r| n.as_str()[r.clone()].to_owned())
                        .collect();
                    assert_eq!(
                        streamed(spec, text, text_start),
                        listed,
                        "{spec} on {text:?}"
                    );
                }
            }
        }
        let sequence = PreTokenizer::from_json(
            r#"{"type": "Sequence", "pretokenizers": [{"type": "WhitespaceSplit"}]}"#,
        )
        .unwrap();
        assert!(!sequence.streams());
    }

    #[test]
    fn bert_splits_at_space_and_punctuation() {
        let (_, words, spans) = run(r#"{"type": "BertPreTokenizer"}"#, "Hi, you!");
        assert_eq!(words, ["Hi", ",", "you", "!"]);
        assert_eq!(spans, [(0, 2), (2, 3), (4, 7), (7, 8)]);
    }

    #[test]
    fn metaspace_prefix_and_split() {
        let (text, words, spans) = run(
            r#"{"type": "Metaspace", "prepend_scheme": "first", "split": true}"#,
            "ab cd",
        );
        assert_eq!(text, "▁ab▁cd");
        assert_eq!(words, ["▁ab", "▁cd"]);
        // The prefix is inserted before "a"; the second ▁ is the space.
        assert_eq!(spans, [(0, 2), (2, 5)]);
        let (_, words, _) = run(
            r#"{"type": "Metaspace", "prepend_scheme": "never", "split": false}"#,
            "ab cd",
        );
        assert_eq!(words, ["ab▁cd"]);
    }

    #[test]
    fn sequence_of_whitespace_and_digits() {
        let (_, words, _) = run(
            r#"{"type": "Sequence", "pretokenizers": [{"type": "WhitespaceSplit"}, {"type": "Digits", "individual_digits": true}]}"#,
            "a12 b3",
        );
        assert_eq!(words, ["a", "1", "2", "b", "3"]);
        let (_, words, _) = run(r#"{"type": "Whitespace"}"#, "it's 12!");
        assert_eq!(words, ["it", "'", "s", "12", "!"]);
    }

    #[test]
    fn pattern_pieces_cover_the_text() {
        let (_, words, _) = run(
            r#"{"type": "Pattern", "pattern": "cl100k"}"#,
            "Hello world  123",
        );
        assert_eq!(words.concat(), "Hello world  123");
        assert_eq!(words[0], "Hello");
        assert!(PreTokenizer::from_json(r#"{"type": "Pattern", "pattern": "cl100K"}"#).is_err());
        let err = PreTokenizer::from_json(r#"{"type": "Nope"}"#)
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("Nope"), "{err}");
    }
}
