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
use crate::bert_text::space_or_punctuation;
use crate::error::{Error, Result};
use crate::pretokenize::{Pattern, PreTokenizer as PatternSplitter};

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

fn yes() -> bool {
    true
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
        #[serde(default = "yes")]
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
            PreTokenizer::Pattern(splitter) => {
                let s = text.as_str();
                let base = s.as_ptr() as usize;
                let mut result = Ok(());
                refine(s, pieces, |piece, offset, out| {
                    if result.is_ok() {
                        result = splitter.for_each_piece(piece, |p| {
                            let start = p.as_ptr() as usize - base;
                            debug_assert!(start >= offset);
                            out.push(start..start + p.len());
                        });
                    }
                });
                result?;
            }
            PreTokenizer::Bert => refine(text.as_str(), pieces, |piece, offset, out| {
                split_chars(piece, offset, out, |c| {
                    let (space, punctuation) = space_or_punctuation(c);
                    if space {
                        Cut::Drop
                    } else if punctuation {
                        Cut::Isolate
                    } else {
                        Cut::Keep
                    }
                })
            }),
            PreTokenizer::Whitespace(regex) => {
                refine(text.as_str(), pieces, |piece, offset, out| {
                    out.extend(
                        regex
                            .find_iter(piece)
                            .map(|m| offset + m.start()..offset + m.end()),
                    )
                })
            }
            PreTokenizer::WhitespaceSplit => refine(text.as_str(), pieces, |piece, offset, out| {
                split_chars(piece, offset, out, |c| {
                    if c.is_whitespace() {
                        Cut::Drop
                    } else {
                        Cut::Keep
                    }
                })
            }),
            PreTokenizer::Punctuation => refine(text.as_str(), pieces, |piece, offset, out| {
                split_chars(piece, offset, out, |c| {
                    if space_or_punctuation(c).1 {
                        Cut::Isolate
                    } else {
                        Cut::Keep
                    }
                })
            }),
            PreTokenizer::Digits { individual } => {
                refine(text.as_str(), pieces, |piece, offset, out| {
                    if *individual {
                        split_chars(piece, offset, out, |c| {
                            if c.is_numeric() {
                                Cut::Isolate
                            } else {
                                Cut::Keep
                            }
                        })
                    } else {
                        split_runs(piece, offset, out, |c| c.is_numeric())
                    }
                })
            }
            PreTokenizer::Metaspace {
                replacement,
                prepend,
                split,
            } => {
                metaspace(text, pieces, *replacement, *prepend, text_start);
                if *split {
                    refine(text.as_str(), pieces, |piece, offset, out| {
                        let mut start = 0;
                        for (i, _) in piece.match_indices(*replacement) {
                            if i > start {
                                out.push(offset + start..offset + i);
                            }
                            start = i;
                        }
                        if start < piece.len() {
                            out.push(offset + start..offset + piece.len());
                        }
                    });
                }
            }
            PreTokenizer::Sequence(steps) => {
                for step in steps {
                    step.pre_tokenize(text, pieces, text_start)?;
                }
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
    mut split: impl FnMut(&str, usize, &mut Vec<Range<usize>>),
) {
    thread_local! {
        /// The pieces being refined, reused: no allocation per text.
        static OLD: std::cell::RefCell<Vec<Range<usize>>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    OLD.with(|old| {
        let old = &mut *old.borrow_mut();
        std::mem::swap(old, pieces);
        pieces.clear();
        for range in old.drain(..) {
            split(&text[range.clone()], range.start, pieces);
        }
    })
}

fn split_chars(piece: &str, offset: usize, out: &mut Vec<Range<usize>>, cut: impl Fn(char) -> Cut) {
    let mut start = None;
    for (i, c) in piece.char_indices() {
        match cut(c) {
            Cut::Keep => {
                start.get_or_insert(i);
            }
            what => {
                if let Some(s) = start.take() {
                    out.push(offset + s..offset + i);
                }
                if let Cut::Isolate = what {
                    out.push(offset + i..offset + i + c.len_utf8());
                }
            }
        }
    }
    if let Some(s) = start {
        out.push(offset + s..offset + piece.len());
    }
}

/// Cuts where `in_run` changes: runs of characters it holds for, and the
/// stretches between them.
fn split_runs(
    piece: &str,
    offset: usize,
    out: &mut Vec<Range<usize>>,
    in_run: impl Fn(char) -> bool,
) {
    let mut start = 0;
    let mut inside = None;
    for (i, c) in piece.char_indices() {
        let now = in_run(c);
        if inside.is_some_and(|was| was != now) {
            out.push(offset + start..offset + i);
            start = i;
        }
        inside = Some(now);
    }
    if start < piece.len() {
        out.push(offset + start..offset + piece.len());
    }
}

/// Rewrites the pieces' spaces as `replacement` and puts one in front of
/// the pieces `prepend` says, updating the ranges. Text between pieces
/// (dropped white space) is left out.
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
            let wants_prefix = match prepend {
                PrependScheme::Always => true,
                PrependScheme::First => index == 0 && text_start && range.start == 0,
                PrependScheme::Never => false,
            };
            // A piece that starts with a space starts with `replacement`
            // once spaces are replaced: it gets no other.
            let first = s[range.clone()].chars().next();
            if wants_prefix && first != Some(replacement) && first != Some(' ') {
                out.push(replacement, src.insertion_span(range.start));
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
