//! Normalizers: each rewrites a [`Normalized`] text and keeps its map to
//! the original.
//!
//! The steps, saved as `{"type": NAME, ...}` with Hugging Face
//! `tokenizers`' names and fields where it has the step (so that the text
//! they make is the same as theirs):
//!
//! - `NFC`, `NFD`, `NFKC`, `NFKD`: the Unicode normalization forms (the
//!   tables of `unicode-normalization-alignments`, as in `tokenizers`);
//! - `Lowercase`: each character's full lowercase mapping;
//! - `StripAccents`: removes combining marks (general category M: Mn, Mc
//!   and Me, as `tokenizers` does, so Indic vowel signs too) without
//!   decomposing first (put `NFD` or `NFKD` before it to strip `é` to `e`);
//! - `Strip {strip_left, strip_right}`: white space at either end;
//! - `Replace {pattern: {"String": s} | {"Regex": r}, content}`: every match
//!   of a literal or a regular expression (`fancy_regex`, with `\p{..}`
//!   classes) becomes `content`, taken literally;
//! - `Prepend {prepend}`: puts `prepend` before a non-empty text;
//! - `BertNormalizer {clean_text, handle_chinese_chars, strip_accents,
//!   lowercase}`: BERT's normalization, exactly the text of
//!   [`crate::text::bert::BertNormalizer`] (`strip_accents: null` follows
//!   `lowercase`);
//! - `Precompiled {precompiled_charsmap}`: a SentencePiece model's compiled
//!   rules (the blob of [`crate::text::precompiled`], standard base64), as
//!   Hugging Face applies them, which is not quite as SentencePiece does:
//!   the text is cut into extended grapheme clusters; a cluster shorter
//!   than 6 bytes that some rule is a prefix of becomes the replacement of
//!   the shortest such rule, whole; the characters of any other cluster are
//!   looked up one by one (a NUL ends a lookup);
//!
//! and polytok's own:
//!
//! - `HalfWidth {ascii, katakana}`: full-width ASCII forms (U+FF01–U+FF5E)
//!   and the ideographic space become ASCII (`ascii`); full-width katakana
//!   and the CJK punctuation that has half-width forms become half-width
//!   forms, a voiced kana two of them (`ガ` → `ｶﾞ`) (`katakana`);
//! - `FullWidth {ascii, katakana}`: the reverse: printable ASCII and the
//!   space become full-width (`ascii`), half-width katakana (U+FF61–U+FF9F)
//!   full-width, a sound mark composed with the kana before it where Unicode
//!   has the composed kana (`ｶﾞ` → `ガ`) (`katakana`). Japanese text is
//!   usually folded with `HalfWidth {ascii}` then `FullWidth {katakana}`;
//! - `Whitespace {strip, collapse, unicode_spaces}`: white space is ASCII's
//!   (space, `\t`, `\n`, `\v`, `\f`, `\r`), and with `unicode_spaces` every
//!   Unicode White_Space character too, each of which then becomes a space;
//!   `strip` removes it at both ends, `collapse` makes each run of it one
//!   space;
//! - `RemoveExtraWhitespaces {trailing_metaspace}`: SentencePiece's
//!   `remove_extra_whitespaces`: spaces (U+0020 only) dropped at the start
//!   and the end, each run of them inside made one; with
//!   `trailing_metaspace`, a `▁` at the end goes with the spaces there (as
//!   in SentencePiece, which trims the end after writing spaces as `▁`);
//! - `RemoveControl {keep_joiners}`: removes control and format characters
//!   (general category Cc and Cf) except tab, line feed and carriage return,
//!   and, with `keep_joiners`, the zero-width (non-)joiners U+200C and
//!   U+200D (which spell words in Indic and Arabic scripts and join emoji);
//! - `SentencePieceCharsmap {precompiled_charsmap, kept}`: a SentencePiece
//!   model's normalization rules (see `Precompiled` for the map), as
//!   SentencePiece applies them (`Normalizer::NormalizePrefix`): at each
//!   position, the longest of the `kept` texts (the model's user-defined
//!   pieces) that starts there is kept as it is; else the longest rule that
//!   starts there replaces what it matches; else a character is copied.
//!   SentencePiece's whitespace handling follows as steps of their own
//!   (`RemoveExtraWhitespaces` and so on): it trims the spaces of each
//!   replacement against what came before, which is the same as collapsing
//!   runs of spaces afterwards as long as no replacement holds two spaces
//!   in a row, and none of SentencePiece's own maps (`nmt_nfkc`, `nfkc`,
//!   `nmt_nfkc_cf`, `nfkc_cf`) has one;
//! - `Sequence {normalizers}`: the steps in order.
//!
//! The map: each output character carries the original span of the input
//! character it stands for, as Hugging Face's `NormalizedString` has it,
//! so that offsets through any step equal `tokenizers`': an expansion
//! (`ﬁ` → `fi`, `é` → `e` + U+0301 under NFD) gives each of its characters
//! the whole span; a merge stands for its first source (NFC's `e` + U+0301
//! → `é`, a `Precompiled` rule replacing several characters), a
//! `Replace`ment for the last character it replaces; an inserted character
//! for the one before it (at the start, the empty span there), the spaces
//! BERT puts around an ideograph for the ideograph, `Prepend`'s characters
//! for the first character. Removed characters leave no trace, except
//! where Hugging Face's `Precompiled` lets a removal shift the map (`\x1fa`
//! → `a`, spanning the removed `\x1f`), which polytok follows. A
//! `SentencePieceCharsmap` rule's replacement spans what the rule matched
//! (SentencePiece's own map, which `tokenizers` does not have).

use fancy_regex::Regex;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use unicode_categories::UnicodeCategories;
use unicode_normalization_alignments::char::{compose, decompose_canonical, is_combining_mark};
use unicode_normalization_alignments::{
    is_nfc_quick, is_nfd_quick, is_nfkc_quick, is_nfkd_quick, IsNormalized, UnicodeNormalization,
};

use super::bert::{self as bert_text, AsciiClass, ASCII_CLASS};
use super::precompiled::Charsmap;
use super::{find_double_space, Builder, CharIndex, Normalized, Span};
use crate::error::{Error, Result};

/// One normalization step, or a sequence of them. Saved in tokenizer files
/// as `{"type": NAME, ...}` (Hugging Face's names where a step exists there).
/// Build one from JSON with [`Normalizer::from_json`], which names the step
/// and the problem in its errors.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", deny_unknown_fields)]
pub enum Normalizer {
    NFC,
    NFD,
    NFKC,
    NFKD,
    Lowercase,
    StripAccents,
    Strip {
        strip_left: bool,
        strip_right: bool,
    },
    Replace {
        pattern: ReplacePattern,
        content: String,
    },
    Prepend {
        prepend: String,
    },
    BertNormalizer {
        clean_text: bool,
        handle_chinese_chars: bool,
        /// `None`: as `lowercase`.
        strip_accents: Option<bool>,
        lowercase: bool,
    },
    Precompiled {
        precompiled_charsmap: Charsmap,
    },
    HalfWidth {
        ascii: bool,
        katakana: bool,
    },
    FullWidth {
        ascii: bool,
        katakana: bool,
    },
    Whitespace {
        strip: bool,
        collapse: bool,
        unicode_spaces: bool,
    },
    RemoveExtraWhitespaces {
        trailing_metaspace: bool,
    },
    RemoveControl {
        keep_joiners: bool,
    },
    SentencePieceCharsmap {
        precompiled_charsmap: Charsmap,
        #[serde(default)]
        kept: KeptPieces,
    },
    Sequence {
        normalizers: Vec<Normalizer>,
    },
}

/// The `"type"` of each step, for error messages.
pub const NORMALIZER_TYPES: [&str; 18] = [
    "NFC",
    "NFD",
    "NFKC",
    "NFKD",
    "Lowercase",
    "StripAccents",
    "Strip",
    "Replace",
    "Prepend",
    "BertNormalizer",
    "Precompiled",
    "HalfWidth",
    "FullWidth",
    "Whitespace",
    "RemoveExtraWhitespaces",
    "RemoveControl",
    "SentencePieceCharsmap",
    "Sequence",
];

/// The steps without settings.
const UNIT_TYPES: [&str; 6] = ["NFC", "NFD", "NFKC", "NFKD", "Lowercase", "StripAccents"];

/// What `Replace` looks for, saved as `{"String": s}` or `{"Regex": r}`
/// (Hugging Face's form) and compiled once, when read.
#[derive(Clone, Debug)]
pub struct ReplacePattern {
    source: PatternSource,
    regex: Regex,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub enum PatternSource {
    String(String),
    Regex(String),
}

impl ReplacePattern {
    pub fn new(source: PatternSource) -> Result<Self> {
        let regex = match &source {
            PatternSource::String(s) => Regex::new(&fancy_regex::escape(s)),
            PatternSource::Regex(r) => Regex::new(r),
        };
        let regex = regex.map_err(|e| {
            let pattern = match &source {
                PatternSource::String(s) | PatternSource::Regex(s) => s,
            };
            Error::invalid(format!("invalid regular expression '{pattern}': {e}"))
        })?;
        Ok(ReplacePattern { source, regex })
    }

    pub fn source(&self) -> &PatternSource {
        &self.source
    }
}

impl PartialEq for ReplacePattern {
    fn eq(&self, other: &Self) -> bool {
        self.source == other.source
    }
}

impl Serialize for ReplacePattern {
    fn serialize<S: Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        self.source.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for ReplacePattern {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        let source = PatternSource::deserialize(deserializer)?;
        ReplacePattern::new(source).map_err(serde::de::Error::custom)
    }
}

/// The texts that `SentencePieceCharsmap` keeps unnormalized (a model's
/// user-defined pieces), saved as a list, with a matcher of the longest one
/// at a position.
#[derive(Clone, Debug)]
pub struct KeptPieces {
    pieces: Vec<String>,
    /// `None` when there are no pieces.
    matcher: Option<aho_corasick::AhoCorasick>,
    first_bytes: [bool; 256],
}

impl KeptPieces {
    pub fn new(pieces: Vec<String>) -> Result<Self> {
        let mut first_bytes = [false; 256];
        for piece in &pieces {
            match piece.as_bytes().first() {
                Some(&byte) => first_bytes[byte as usize] = true,
                None => return Err(Error::invalid("a kept piece is empty")),
            }
        }
        let matcher = if pieces.is_empty() {
            None
        } else {
            let matcher = aho_corasick::AhoCorasick::builder()
                .match_kind(aho_corasick::MatchKind::LeftmostLongest)
                .start_kind(aho_corasick::StartKind::Anchored)
                .build(&pieces)
                .map_err(|e| Error::invalid(format!("kept pieces: {e}")))?;
            Some(matcher)
        };
        Ok(KeptPieces {
            pieces,
            matcher,
            first_bytes,
        })
    }

    /// The length of the longest kept piece that starts at byte `at`.
    fn longest_at(&self, text: &str, at: usize) -> Option<usize> {
        if !self.first_bytes[text.as_bytes()[at] as usize] {
            return None;
        }
        let input = aho_corasick::Input::new(text)
            .range(at..)
            .anchored(aho_corasick::Anchored::Yes);
        Some(self.matcher.as_ref()?.find(input)?.len())
    }
}

impl Default for KeptPieces {
    fn default() -> Self {
        KeptPieces::new(Vec::new()).expect("no pieces")
    }
}

impl PartialEq for KeptPieces {
    fn eq(&self, other: &Self) -> bool {
        self.pieces == other.pieces
    }
}

impl Serialize for KeptPieces {
    fn serialize<S: Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        self.pieces.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for KeptPieces {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        KeptPieces::new(Vec::deserialize(deserializer)?).map_err(serde::de::Error::custom)
    }
}

impl Normalizer {
    /// The step that `json` describes, checked (regexes compiled). Errors
    /// name the step and the problem; an unknown `"type"` is named with
    /// the known ones.
    pub fn from_json(json: &str) -> Result<Normalizer> {
        let value: serde_json::Value = serde_json::from_str(json)
            .map_err(|e| Error::invalid(format!("normalizer: invalid JSON: {e}")))?;
        Self::from_value(&value)
    }

    /// As [`Normalizer::from_json`], from parsed JSON.
    pub fn from_value(value: &serde_json::Value) -> Result<Normalizer> {
        let known = || NORMALIZER_TYPES.join(", ");
        let Some(kind) = value.get("type").and_then(|t| t.as_str()) else {
            return Err(Error::invalid(format!(
                "a normalizer must be an object with a \"type\" (one of {}), not {value}",
                known()
            )));
        };
        if !NORMALIZER_TYPES.contains(&kind) {
            return Err(Error::invalid(format!(
                "unknown normalizer type \"{kind}\" (polytok knows: {})",
                known()
            )));
        }
        let object = value.as_object().expect("an object: it has a type");
        if kind == "Sequence" {
            // Nested steps one by one, so that an error names the step.
            if let Some(field) = object.keys().find(|k| *k != "type" && *k != "normalizers") {
                return Err(Error::invalid(format!(
                    "Sequence: unknown field `{field}`, expected `normalizers`"
                )));
            }
            let Some(steps) = object.get("normalizers").and_then(|n| n.as_array()) else {
                return Err(Error::invalid(
                    "Sequence: `normalizers` must be a list of normalizers",
                ));
            };
            let normalizers = steps
                .iter()
                .enumerate()
                .map(|(i, step)| {
                    Self::from_value(step)
                        .map_err(|e| Error::invalid(format!("Sequence: step {i}: {e}")))
                })
                .collect::<Result<_>>()?;
            return Ok(Normalizer::Sequence { normalizers });
        }
        if UNIT_TYPES.contains(&kind) {
            // serde lets a tagged unit variant have any other fields.
            if let Some(field) = object.keys().find(|k| *k != "type") {
                return Err(Error::invalid(format!(
                    "{kind}: unknown field `{field}`, it has none"
                )));
            }
        }
        Normalizer::deserialize(value).map_err(|e| Error::invalid(format!("{kind}: {e}")))
    }

    /// This step as JSON (the form [`Normalizer::from_json`] reads).
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("normalizers serialize")
    }

    /// Starts `text` afresh, untracked, with `input` normalized: `reset`
    /// then `normalize`, except that a first step that can write its text
    /// straight from `input` (BERT's normalizer, the usual first step) does,
    /// and `input` is not copied first.
    pub fn normalize_untracked(&self, input: &str, text: &mut Normalized) -> Result<()> {
        match self {
            Normalizer::BertNormalizer { .. } => {
                let bert = self.bert().expect("a BertNormalizer");
                text.reset_untracked_with(input, |src, out| bert.normalize_into(src, out));
                Ok(())
            }
            Normalizer::Sequence { normalizers } if !normalizers.is_empty() => {
                normalizers[0].normalize_untracked(input, text)?;
                normalizers[1..].iter().try_for_each(|n| n.normalize(text))
            }
            _ => {
                text.reset(input, 0, false);
                self.normalize(text)
            }
        }
    }

    /// The settings of a `BertNormalizer` step.
    fn bert(&self) -> Option<bert_text::BertNormalizer> {
        let Normalizer::BertNormalizer {
            clean_text,
            handle_chinese_chars,
            strip_accents,
            lowercase,
        } = self
        else {
            return None;
        };
        Some(bert_text::BertNormalizer {
            clean_text: *clean_text,
            handle_chinese_chars: *handle_chinese_chars,
            strip_accents: strip_accents.unwrap_or(*lowercase),
            lowercase: *lowercase,
        })
    }

    /// Applies this step to `text`.
    pub fn normalize(&self, text: &mut Normalized) -> Result<()> {
        match self {
            Normalizer::NFC => unicode_form(text, Form::Nfc),
            Normalizer::NFD => unicode_form(text, Form::Nfd),
            Normalizer::NFKC => unicode_form(text, Form::Nfkc),
            Normalizer::NFKD => unicode_form(text, Form::Nfkd),
            Normalizer::Lowercase => lowercase(text),
            Normalizer::StripAccents => {
                if !text.as_str().is_ascii() {
                    filter(text, |c| !is_combining_mark(c));
                }
            }
            Normalizer::Strip {
                strip_left,
                strip_right,
            } => strip(text, *strip_left, *strip_right),
            Normalizer::Replace { pattern, content } => replace(text, &pattern.regex, content)?,
            Normalizer::Prepend { prepend } => {
                if !text.as_str().is_empty() && !prepend.is_empty() {
                    text.rebuild(|src, out| {
                        // The first character's span, as Hugging Face's
                        // (a token of the prefix alone then has text).
                        out.push_str(prepend, src.span_at(0));
                        out.copy(src, 0..src.as_str().len());
                    });
                }
            }
            Normalizer::BertNormalizer { .. } => {
                let bert = self.bert().expect("a BertNormalizer");
                if text.is_tracking() {
                    text.rebuild(|src, out| bert_tracked(bert, src, out));
                } else {
                    text.rewrite_untracked(|src, out| bert.normalize_into(src, out));
                }
            }
            Normalizer::HalfWidth { ascii, katakana } => half_width(text, *ascii, *katakana),
            Normalizer::FullWidth { ascii, katakana } => full_width(text, *ascii, *katakana),
            Normalizer::Whitespace {
                strip,
                collapse,
                unicode_spaces,
            } => whitespace(text, *strip, *collapse, *unicode_spaces),
            Normalizer::RemoveExtraWhitespaces { trailing_metaspace } => {
                remove_extra_spaces(text, *trailing_metaspace)
            }
            Normalizer::Precompiled {
                precompiled_charsmap,
            } => precompiled_by_graphemes(text, precompiled_charsmap),
            Normalizer::SentencePieceCharsmap {
                precompiled_charsmap,
                kept,
            } => precompiled_longest(text, precompiled_charsmap, kept),
            Normalizer::RemoveControl { keep_joiners } => {
                let keep_joiners = *keep_joiners;
                let s = text.as_str();
                let removes = if s.is_ascii() {
                    s.bytes().any(|b| is_ascii_control(b as char))
                } else {
                    s.chars().any(|c| is_removed_control(c, keep_joiners))
                };
                if removes {
                    filter(text, |c| !is_removed_control(c, keep_joiners));
                }
            }
            Normalizer::Sequence { normalizers } => {
                for n in normalizers {
                    n.normalize(text)?;
                }
            }
        }
        Ok(())
    }

    /// Normalizes `text` and gives, for each character of the result, the
    /// `(start, end)` character offsets in `text` that it stands for
    /// (empty for an inserted character).
    pub fn normalize_with_char_offsets(&self, text: &str) -> Result<(String, Vec<(usize, usize)>)> {
        let mut normalized = Normalized::new(text, true);
        self.normalize(&mut normalized)?;
        let chars = CharIndex::new(text);
        let offsets = normalized
            .chars_with_spans()
            .map(|(_, _, (start, end))| {
                let (start, end) = chars.span(start, end);
                (start as usize, end as usize)
            })
            .collect();
        Ok((normalized.as_str().to_owned(), offsets))
    }
}

#[derive(Clone, Copy)]
enum Form {
    Nfc,
    Nfd,
    Nfkc,
    Nfkd,
}

fn unicode_form(text: &mut Normalized, form: Form) {
    let s = text.as_str();
    if s.is_ascii() {
        return;
    }
    let quick = match form {
        Form::Nfc => is_nfc_quick(s.chars()),
        Form::Nfd => is_nfd_quick(s.chars()),
        Form::Nfkc => is_nfkc_quick(s.chars()),
        Form::Nfkd => is_nfkd_quick(s.chars()),
    };
    if quick == IsNormalized::Yes {
        return;
    }
    text.rebuild(|src, out| {
        let s = src.as_str();
        let spans = src.chars_with_spans().map(|(_, _, span)| span);
        let start = src.insertion_span(0);
        let mut push = |c, span| out.push(c, span);
        match form {
            Form::Nfc => walk_changes(s.nfc(), spans, start, &mut push),
            Form::Nfd => walk_changes(s.nfd(), spans, start, &mut push),
            Form::Nfkc => walk_changes(s.nfkc(), spans, start, &mut push),
            Form::Nfkd => walk_changes(s.nfkd(), spans, start, &mut push),
        }
    });
}

/// Gives each character of a `(char, change)` stream of
/// `unicode-normalization-alignments` (over input characters whose spans
/// are `spans`) its span as Hugging Face's `NormalizedString` does: a
/// change of 0 or `-n` replaces the next input character (its span) and
/// removes `n` more (a composed `é` stands for the `e`); a positive change
/// inserts a character that stands for the last input character consumed,
/// removed ones included. `start` is for the unlikely stream that begins
/// with an insertion.
fn walk_changes(
    stream: impl Iterator<Item = (char, isize)>,
    mut spans: impl Iterator<Item = Span>,
    start: Span,
    emit: &mut impl FnMut(char, Span),
) {
    let mut last = start;
    for (c, change) in stream {
        if change > 0 {
            emit(c, last);
            continue;
        }
        let span = spans.next().unwrap_or((last.1, last.1));
        last = span;
        for _ in 0..change.unsigned_abs() {
            last = spans.next().unwrap_or(last);
        }
        emit(c, span);
    }
}

fn lowercase(text: &mut Normalized) {
    if text.as_str().is_ascii() {
        text.as_mut_str_same_lengths().make_ascii_lowercase();
        return;
    }
    text.rebuild(|src, out| {
        for (_, c, span) in src.chars_with_spans() {
            if c.is_ascii() {
                out.push(c.to_ascii_lowercase(), span);
            } else {
                for lower in c.to_lowercase() {
                    out.push(lower, span);
                }
            }
        }
    });
}

/// Keeps the characters for which `keep` holds, copying runs of them whole.
fn filter(text: &mut Normalized, keep: impl Fn(char) -> bool) {
    text.rebuild(|src, out| {
        let mut run_start = 0;
        for (i, c, _) in src.chars_with_spans() {
            if !keep(c) {
                out.copy(src, run_start..i);
                run_start = i + c.len_utf8();
            }
        }
        out.copy(src, run_start..src.as_str().len());
    });
}

fn strip(text: &mut Normalized, left: bool, right: bool) {
    let s = text.as_str();
    let start = if left {
        s.len() - s.trim_start().len()
    } else {
        0
    };
    let end = if right {
        s.trim_end().len().max(start)
    } else {
        s.len()
    };
    if start > 0 || end < s.len() {
        text.rebuild(|src, out| out.copy(src, start..end));
    }
}

fn replace(text: &mut Normalized, regex: &Regex, content: &str) -> Result<()> {
    if text.as_str().is_empty() {
        // As `tokenizers`: an empty text has no match, not even an empty one.
        return Ok(());
    }
    let mut matches = Vec::new();
    for m in regex.find_iter(text.as_str()) {
        let m = m.map_err(|e| Error::invalid(format!("Replace: matching failed: {e}")))?;
        matches.push(m.range());
    }
    if matches.is_empty() {
        return Ok(());
    }
    text.rebuild(|src, out| {
        let mut last = 0;
        for range in matches {
            out.copy(src, last..range.start);
            // Hugging Face's map: the replacement stands for the character
            // before its end (the match's last, or for an empty match the
            // one before it).
            out.push_str(content, src.span_before(range.end));
            last = range.end;
        }
        out.copy(src, last..src.as_str().len());
    });
    Ok(())
}

/// BERT's normalization with the map: the steps of
/// [`bert_text::BertNormalizer::normalize_into`] (same tables, same runs for
/// NFD), character by character.
fn bert_tracked(bert: bert_text::BertNormalizer, src: &Normalized, out: &mut Builder) {
    // Characters that NFD may decompose or reorder, until a character that
    // NFD never moves anything across ends their run.
    let mut run = String::new();
    let mut run_spans: Vec<Span> = Vec::new();
    let push_cased = |out: &mut Builder, c: char, span: Span| {
        if !bert.lowercase {
            out.push(c, span);
        } else if c.is_ascii() {
            out.push(c.to_ascii_lowercase(), span);
        } else {
            c.to_lowercase().for_each(|l| out.push(l, span));
        }
    };
    let flush = |out: &mut Builder, run: &mut String, run_spans: &mut Vec<Span>| {
        if run.is_empty() {
            return;
        }
        if bert.strip_accents {
            let start = (run_spans[0].0, run_spans[0].0);
            walk_changes(
                run.nfd(),
                run_spans.iter().copied(),
                start,
                &mut |c, span| {
                    if !c.is_mark_nonspacing() {
                        push_cased(out, c, span);
                    }
                },
            );
        } else {
            for (c, &span) in run.chars().zip(run_spans.iter()) {
                push_cased(out, c, span);
            }
        }
        run.clear();
        run_spans.clear();
    };
    for (_, c, span) in src.chars_with_spans() {
        if c.is_ascii() {
            flush(out, &mut run, &mut run_spans);
            match ASCII_CLASS[c as usize] {
                AsciiClass::Drop if bert.clean_text => {}
                AsciiClass::Space if bert.clean_text => out.push(' ', span),
                _ => push_cased(out, c, span),
            }
            continue;
        }
        let flags = bert_text::char_info(c).flags;
        if bert.clean_text && flags & bert_text::DROP != 0 {
            continue;
        }
        if bert.clean_text && flags & bert_text::SPACE != 0 {
            flush(out, &mut run, &mut run_spans);
            out.push(' ', span);
            continue;
        }
        let chinese = bert.handle_chinese_chars && flags & bert_text::CHINESE != 0;
        if chinese || flags & bert_text::PLAIN != 0 {
            flush(out, &mut run, &mut run_spans);
            // The spaces around an ideograph stand for it, as in Hugging
            // Face (a token that takes one, `rstrip`, reaches over it).
            if chinese {
                out.push(' ', span);
            }
            if flags & bert_text::PLAIN != 0 {
                if !(bert.strip_accents && flags & bert_text::MARK != 0) {
                    push_cased(out, c, span);
                }
            } else {
                run.push(c);
                run_spans.push(span);
                flush(out, &mut run, &mut run_spans);
            }
            if chinese {
                out.push(' ', span);
            }
        } else {
            run.push(c);
            run_spans.push(span);
        }
    }
    flush(out, &mut run, &mut run_spans);
}

/// Full-width katakana for U+FF61..=U+FF9D, in order (their NFKC forms).
const KATAKANA_FULL: &str = "。「」、・ヲァィゥェォャュョッーアイウエオカキクケコサシスセソタチツテトナニヌネノハヒフヘホマミムメモヤユヨラリルレロワン";
const HALF_VOICED: char = '\u{FF9E}';
const HALF_SEMI_VOICED: char = '\u{FF9F}';

/// The full-width form of a half-width katakana (U+FF61..=U+FF9F; the two
/// sound marks as the spacing ones, U+309B and U+309C).
fn katakana_to_full(c: char) -> Option<char> {
    match c {
        '\u{FF61}'..='\u{FF9D}' => {
            static TABLE: std::sync::OnceLock<Vec<char>> = std::sync::OnceLock::new();
            let table = TABLE.get_or_init(|| KATAKANA_FULL.chars().collect());
            table.get(c as usize - 0xFF61).copied()
        }
        HALF_VOICED => Some('\u{309B}'),
        HALF_SEMI_VOICED => Some('\u{309C}'),
        _ => None,
    }
}

/// The half-width form of a character of U+3000..=U+30FF, where it has one.
fn katakana_to_half(c: char) -> Option<char> {
    static TABLE: std::sync::OnceLock<[u16; 256]> = std::sync::OnceLock::new();
    let table = TABLE.get_or_init(|| {
        let mut table = [0u16; 256];
        for (i, full) in KATAKANA_FULL.chars().enumerate() {
            table[full as usize - 0x3000] = (0xFF61 + i) as u16;
        }
        for (full, half) in [('\u{3099}', HALF_VOICED), ('\u{309B}', HALF_VOICED)]
            .into_iter()
            .chain([
                ('\u{309A}', HALF_SEMI_VOICED),
                ('\u{309C}', HALF_SEMI_VOICED),
            ])
        {
            table[full as usize - 0x3000] = half as u16;
        }
        table
    });
    let offset = (c as u32).checked_sub(0x3000).filter(|&o| o < 256)?;
    char::from_u32(table[offset as usize] as u32).filter(|&h| h != '\0')
}

fn half_width(text: &mut Normalized, ascii: bool, katakana: bool) {
    if text.as_str().is_ascii() {
        return;
    }
    text.rebuild(|src, out| {
        let mut run_start = 0;
        for (i, c, span) in src.chars_with_spans() {
            let mut replace = |out: &mut Builder, chars: &[char]| {
                out.copy(src, run_start..i);
                chars.iter().for_each(|&h| out.push(h, span));
                run_start = i + c.len_utf8();
            };
            match c {
                '\u{FF01}'..='\u{FF5E}' if ascii => {
                    replace(out, &[char::from_u32(c as u32 - 0xFEE0).expect("ASCII")])
                }
                '\u{3000}' if ascii => replace(out, &[' ']),
                '\u{3000}'..='\u{30FF}' if katakana => {
                    if let Some(half) = katakana_to_half(c) {
                        replace(out, &[half]);
                    } else {
                        let mut parts = [None; 2];
                        let mut n = 0;
                        decompose_canonical(c, |d| {
                            if n < 2 {
                                parts[n] = Some(d);
                            }
                            n += 1;
                        });
                        if let (2, [Some(base), Some(mark)]) = (n, parts) {
                            if let (Some(b), Some(m)) =
                                (katakana_to_half(base), katakana_to_half(mark))
                            {
                                replace(out, &[b, m]);
                            }
                        }
                    }
                }
                _ => {}
            }
        }
        out.copy(src, run_start..src.as_str().len());
    });
}

fn full_width(text: &mut Normalized, ascii: bool, katakana: bool) {
    let s = text.as_str();
    if !ascii && s.is_ascii() {
        return;
    }
    text.rebuild(|src, out| {
        let mut run_start = 0;
        let mut chars = src.chars_with_spans().peekable();
        while let Some((i, c, span)) = chars.next() {
            let mut end = i + c.len_utf8();
            let mut span = span;
            let full = match c {
                '!'..='~' if ascii => char::from_u32(c as u32 + 0xFEE0),
                ' ' if ascii => Some('\u{3000}'),
                '\u{FF61}'..='\u{FF9F}' if katakana => {
                    let full = katakana_to_full(c);
                    // A sound mark after a kana composes with it.
                    let mark = match chars.peek() {
                        Some(&(_, HALF_VOICED, _)) => Some('\u{3099}'),
                        Some(&(_, HALF_SEMI_VOICED, _)) => Some('\u{309A}'),
                        _ => None,
                    };
                    match (full, mark.and_then(|m| compose(full?, m))) {
                        (_, Some(composed)) if c < HALF_VOICED => {
                            let (j, m, mark_span) = chars.next().expect("peeked");
                            end = j + m.len_utf8();
                            span = (span.0.min(mark_span.0), span.1.max(mark_span.1));
                            Some(composed)
                        }
                        (full, _) => full,
                    }
                }
                _ => None,
            };
            if let Some(full) = full {
                out.copy(src, run_start..i);
                out.push(full, span);
                run_start = end;
            }
        }
        out.copy(src, run_start..src.as_str().len());
    });
}

fn whitespace(text: &mut Normalized, strip: bool, collapse: bool, unicode_spaces: bool) {
    let is_space = |c: char| {
        if c.is_ascii() {
            matches!(c, ' ' | '\t' | '\n' | '\x0B' | '\x0C' | '\r')
        } else {
            unicode_spaces && c.is_whitespace()
        }
    };
    text.rebuild(|src, out| {
        let s = src.as_str();
        let (start, end) = if strip {
            let trimmed = s.trim_start_matches(is_space);
            let start = s.len() - trimmed.len();
            (start, start + trimmed.trim_end_matches(is_space).len())
        } else {
            (0, s.len())
        };
        // Unchanged text since `run_start`; the span of a run of white
        // space being collapsed.
        let mut run_start = start;
        let mut space: Option<Span> = None;
        for (i, c, span) in src.chars_with_spans() {
            if i < start || i >= end {
                continue;
            }
            let after = i + c.len_utf8();
            if !is_space(c) {
                if let Some(run_span) = space.take() {
                    out.push(' ', run_span);
                    run_start = i;
                }
                continue;
            }
            if collapse {
                space = Some(match space {
                    None => {
                        out.copy(src, run_start..i);
                        span
                    }
                    Some(run_span) => (run_span.0.min(span.0), run_span.1.max(span.1)),
                });
            } else if c != ' ' && !c.is_ascii() {
                out.copy(src, run_start..i);
                out.push(' ', span);
                run_start = after;
            }
        }
        match space {
            Some(run_span) => out.push(' ', run_span),
            None => out.copy(src, run_start..end),
        }
    });
}

fn remove_extra_spaces(text: &mut Normalized, trailing_metaspace: bool) {
    let s = text.as_str();
    let start = s.len() - s.trim_start_matches(' ').len();
    let end = start
        + s[start..]
            .trim_end_matches(|c| c == ' ' || (trailing_metaspace && c == '\u{2581}'))
            .len();
    if start == 0 && end == s.len() && find_double_space(s.as_bytes()).is_none() {
        return;
    }
    text.rebuild(|src, out| {
        let bytes = src.as_str().as_bytes();
        let (mut copied, mut at) = (start, start);
        while let Some(found) = memchr::memchr(b' ', &bytes[at..end]) {
            let space = at + found;
            let run = bytes[space..end].iter().take_while(|&&b| b == b' ').count();
            if run > 1 {
                out.copy(src, copied..space);
                // The run's last space is kept (the others removed): the
                // map Hugging Face's `Replace` gives it.
                out.push(' ', src.original_span(space + run - 1..space + run));
                copied = space + run;
            }
            at = space + run;
        }
        out.copy(src, copied..end);
    });
}

/// `SentencePieceCharsmap`: SentencePiece's walk (see the module doc).
fn precompiled_longest(text: &mut Normalized, charsmap: &Charsmap, kept: &KeptPieces) {
    let Some(first) = next_longest_rule(text.as_str(), 0, charsmap, kept) else {
        return;
    };
    text.rebuild(|src, out| {
        let s = src.as_str();
        let mut copied = 0;
        let mut rule = Some(first);
        while let Some((at, length, replacement)) = rule {
            out.copy(src, copied..at);
            out.push_str(replacement, src.original_span(at..at + length));
            copied = at + length;
            rule = next_longest_rule(s, copied, charsmap, kept);
        }
        out.copy(src, copied..s.len());
    });
}

/// The next rule SentencePiece applies in `text` from byte `from` on (a
/// character), as its position, length and replacement: kept pieces are
/// skipped whole, characters without a rule one by one.
fn next_longest_rule<'a>(
    text: &str,
    from: usize,
    charsmap: &'a Charsmap,
    kept: &KeptPieces,
) -> Option<(usize, usize, &'a str)> {
    let bytes = text.as_bytes();
    let mut at = from;
    while at < bytes.len() {
        let byte = bytes[at];
        // Neither a rule nor a kept piece starts at a continuation byte, so
        // `at` stays on characters.
        if !charsmap.starts_rule(byte) && !kept.first_bytes[byte as usize] {
            at += 1;
        } else if let Some(length) = kept.longest_at(text, at) {
            at += length;
        } else if let Some((length, replacement)) = charsmap.longest_rule(&text[at..]) {
            return Some((at, length, replacement));
        } else {
            at += 1;
        }
    }
    None
}

/// Hugging Face's `Precompiled` (see the module doc): its rules by
/// grapheme cluster, and its map (the `(char, change)` stream its
/// `NormalizedString` is transformed with, walked as there).
fn precompiled_by_graphemes(text: &mut Normalized, charsmap: &Charsmap) {
    use unicode_segmentation::UnicodeSegmentation;
    let s = text.as_str();
    if !s.bytes().any(|b| charsmap.starts_rule(b)) {
        return;
    }
    // Hugging Face's `replace`: a replacement's characters replace, its
    // extra ones are insertions, and a shorter one makes the character
    // before it (whatever it is) remove the difference.
    fn replace(stream: &mut Vec<(char, isize)>, old: &str, new: &str) {
        let diff = new.chars().count() as isize - old.chars().count() as isize;
        stream.extend(new.chars().map(|c| (c, 0)));
        if diff > 0 {
            let n = stream.len();
            stream[n - diff as usize..]
                .iter_mut()
                .for_each(|(_, change)| *change = 1);
        } else if let Some((_, change)) = stream.last_mut().filter(|_| diff < 0) {
            *change += diff;
        }
    }
    let mut stream = Vec::with_capacity(s.len());
    let mut modified = false;
    for grapheme in s.graphemes(true) {
        let whole = (grapheme.len() < 6)
            .then(|| charsmap.first_rule(grapheme))
            .flatten();
        if let Some(replacement) = whole {
            replace(&mut stream, grapheme, replacement);
            modified = true;
            continue;
        }
        for (i, c) in grapheme.char_indices() {
            let one = &grapheme[i..i + c.len_utf8()];
            match charsmap.first_rule(one) {
                Some(replacement) => {
                    replace(&mut stream, one, replacement);
                    modified = true;
                }
                None => stream.push((c, 0)),
            }
        }
    }
    if !modified {
        return;
    }
    text.rebuild(|src, out| {
        let spans = src.chars_with_spans().map(|(_, _, span)| span);
        let start = src.insertion_span(0);
        walk_changes(stream.into_iter(), spans, start, &mut |c, span| {
            out.push(c, span)
        });
    });
}

fn is_ascii_control(c: char) -> bool {
    (c < ' ' && !matches!(c, '\t' | '\n' | '\r')) || c == '\x7F'
}

fn is_removed_control(c: char, keep_joiners: bool) -> bool {
    if c.is_ascii() {
        return is_ascii_control(c);
    }
    if keep_joiners && matches!(c, '\u{200C}' | '\u{200D}') {
        return false;
    }
    c.is_other_control() || c.is_other_format()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(json: &str) -> Normalizer {
        Normalizer::from_json(json).unwrap_or_else(|e| panic!("{json}: {e}"))
    }

    /// The text and the span of each character.
    fn run(json: &str, text: &str) -> (String, Vec<Span>) {
        let mut n = Normalized::new(text, true);
        spec(json).normalize(&mut n).unwrap();
        let spans = n.chars_with_spans().map(|(_, _, s)| s).collect();
        let mut untracked = Normalized::new(text, false);
        spec(json).normalize(&mut untracked).unwrap();
        assert_eq!(
            untracked.as_str(),
            n.as_str(),
            "tracking changes the text of {json}"
        );
        (n.as_str().to_owned(), spans)
    }

    #[test]
    fn unicode_forms_expand_and_merge() {
        // NFD: é (bytes 1..3) becomes e and U+0301, both standing for it.
        assert_eq!(
            run(r#"{"type":"NFD"}"#, "xé"),
            ("xe\u{301}".into(), vec![(0, 1), (1, 3), (1, 3)])
        );
        // NFC: e + U+0301 (bytes 1..4) merge into é, which stands for the
        // e (as in Hugging Face).
        assert_eq!(
            run(r#"{"type":"NFC"}"#, "xe\u{301}y"),
            ("xéy".into(), vec![(0, 1), (1, 2), (4, 5)])
        );
        // NFKC: the ligature ﬁ (3 bytes) expands to f and i.
        assert_eq!(
            run(r#"{"type":"NFKC"}"#, "ﬁ"),
            ("fi".into(), vec![(0, 3), (0, 3)])
        );
        assert_eq!(run(r#"{"type":"NFKD"}"#, "Ａé").0, "Ae\u{301}");
        // Already normalized: unchanged.
        assert_eq!(run(r#"{"type":"NFC"}"#, "naïve").0, "naïve");
    }

    #[test]
    fn lowercase_and_strip_accents() {
        // İ lowercases to i + U+0307, both standing for it.
        assert_eq!(
            run(r#"{"type":"Lowercase"}"#, "AİB"),
            ("ai\u{307}b".into(), vec![(0, 1), (1, 3), (1, 3), (3, 4)])
        );
        assert_eq!(run(r#"{"type":"Lowercase"}"#, "ABC").0, "abc");
        // Only Mn characters go; é is not decomposed.
        assert_eq!(
            run(r#"{"type":"StripAccents"}"#, "e\u{301}é"),
            ("eé".into(), vec![(0, 1), (3, 5)])
        );
    }

    #[test]
    fn strip_and_whitespace() {
        let both = r#"{"type":"Strip","strip_left":true,"strip_right":true}"#;
        assert_eq!(
            run(both, " \u{3000}a b\n"),
            ("a b".into(), vec![(4, 5), (5, 6), (6, 7)])
        );
        assert_eq!(run(both, "  ").0, "");
        let left = r#"{"type":"Strip","strip_left":true,"strip_right":false}"#;
        assert_eq!(run(left, " a ").0, "a ");
        let all = r#"{"type":"Whitespace","strip":true,"collapse":true,"unicode_spaces":true}"#;
        assert_eq!(
            run(all, " a \t\u{A0} b\u{3000}"),
            ("a b".into(), vec![(1, 2), (2, 7), (7, 8)])
        );
        assert_eq!(run(all, " \n ").0, "");
        let ascii = r#"{"type":"Whitespace","strip":true,"collapse":true,"unicode_spaces":false}"#;
        assert_eq!(run(ascii, "\u{A0}a  b\u{A0}").0, "\u{A0}a b\u{A0}");
        let map = r#"{"type":"Whitespace","strip":false,"collapse":false,"unicode_spaces":true}"#;
        assert_eq!(
            run(map, "a\u{2003}\tb "),
            (
                "a \tb ".into(),
                vec![(0, 1), (1, 4), (4, 5), (5, 6), (6, 7)]
            )
        );
        let collapse =
            r#"{"type":"Whitespace","strip":false,"collapse":true,"unicode_spaces":false}"#;
        assert_eq!(run(collapse, "  a\n\nb  ").0, " a b ");
    }

    #[test]
    fn normalize_untracked_equals_reset_then_normalize() {
        let specs = [
            r#"{"type":"BertNormalizer","clean_text":true,"handle_chinese_chars":true,"strip_accents":null,"lowercase":true}"#,
            r#"{"type":"Sequence","normalizers":[{"type":"BertNormalizer","clean_text":true,"handle_chinese_chars":true,"strip_accents":false,"lowercase":false},{"type":"Prepend","prepend":"x"}]}"#,
            r#"{"type":"Sequence","normalizers":[{"type":"NFKC"},{"type":"Lowercase"}]}"#,
            r#"{"type":"Sequence","normalizers":[]}"#,
        ];
        for json in specs {
            for text in ["", "Héllo,\tWORLD 中文 ﬁ\u{0}", "  a  "] {
                let mut expected = Normalized::new(text, false);
                spec(json).normalize(&mut expected).unwrap();
                // A used buffer, as the pipeline's is.
                let mut direct = Normalized::new("stale text", false);
                spec(json).normalize_untracked(text, &mut direct).unwrap();
                assert_eq!(direct.as_str(), expected.as_str(), "{json} on {text:?}");
            }
        }
    }

    #[test]
    fn remove_extra_whitespaces_as_sentencepiece() {
        let with = r#"{"type":"RemoveExtraWhitespaces","trailing_metaspace":true}"#;
        let without = r#"{"type":"RemoveExtraWhitespaces","trailing_metaspace":false}"#;
        for (text, expected) in [
            ("", ""),
            ("   ", ""),
            ("a", "a"),
            ("  a  b   c  ", "a b c"),
            ("a \t  b", "a \t b"),
            ("\u{2581}a \u{2581} ", "\u{2581}a"),
            ("\u{2581}", ""),
        ] {
            assert_eq!(run(with, text).0, expected, "{text:?}");
        }
        assert_eq!(run(without, "a\u{2581} ").0, "a\u{2581}");
        // A collapsed run is its last space.
        let (text, spans) = run(with, " ab   c ");
        assert_eq!(text, "ab c");
        assert_eq!(spans, [(1, 2), (2, 3), (5, 6), (6, 7)]);
    }

    /// A charsmap step on the test map of `precompiled` (`a` → `x`, `ab` →
    /// `yz`, `é` → `e`, `c` → nothing), as JSON.
    fn charsmap_step(kind: &str, kept: &[&str]) -> String {
        use base64::prelude::{Engine, BASE64_STANDARD};
        let charsmap = BASE64_STANDARD.encode(crate::text::precompiled::tests::small_map());
        let mut step = serde_json::json!({"type": kind, "precompiled_charsmap": charsmap});
        if kind == "SentencePieceCharsmap" {
            step["kept"] = serde_json::json!(kept);
        }
        step.to_string()
    }

    #[test]
    fn sentencepiece_charsmap_takes_the_longest_rule() {
        let step = charsmap_step("SentencePieceCharsmap", &[]);
        // `ab` (0..2) is one rule, `c` (2..3) goes, `é` (3..5) is `e`.
        assert_eq!(
            run(&step, "abcéb"),
            ("yzeb".into(), vec![(0, 2), (0, 2), (3, 5), (5, 6)])
        );
        assert_eq!(run(&step, "a\u{301}").0, "x\u{301}");
        assert_eq!(run(&step, "do it").0, "do it");
        // A kept piece is not normalized, even where a rule would match.
        let kept = charsmap_step("SentencePieceCharsmap", &["ab", "é"]);
        assert_eq!(run(&kept, "aabcé").0, "xabé");
        assert_eq!(spec(&spec(&kept).to_json()), spec(&kept));
    }

    #[test]
    fn precompiled_replaces_graphemes_by_their_first_rule() {
        let step = charsmap_step("Precompiled", &[]);
        // Each ASCII character is its own grapheme: `a` and `b` apart.
        assert_eq!(run(&step, "abc").0, "xb");
        // `a` + U+0301 is one grapheme; its first rule (`a`) replaces it
        // whole, accent and all; the `x` stands for the `a`, as in Hugging
        // Face.
        assert_eq!(
            run(&step, "za\u{301}é"),
            ("zxe".into(), vec![(0, 1), (1, 2), (4, 6)])
        );
        // From 6 bytes on, each character is looked up alone.
        assert_eq!(
            run(&step, "a\u{301}\u{301}\u{301}").0,
            "x\u{301}\u{301}\u{301}"
        );
        // A NUL ends Hugging Face's lookup.
        assert_eq!(run(&step, "\0a").0, "\0x");
        assert_eq!(spec(&spec(&step).to_json()), spec(&step));
    }

    #[test]
    fn charsmap_steps_refuse_a_damaged_map() {
        let err = |json: &str| Normalizer::from_json(json).unwrap_err().to_string();
        let short = err(r#"{"type":"Precompiled","precompiled_charsmap":"AAAA"}"#);
        assert!(
            short.starts_with("Precompiled:") && short.contains("charsmap"),
            "{short}"
        );
        let garbage =
            err(r#"{"type":"SentencePieceCharsmap","precompiled_charsmap":"!","kept":[]}"#);
        assert!(garbage.contains("base64"), "{garbage}");
    }

    #[test]
    fn replace_merges_and_inserts() {
        // A replacement stands for the last character it replaces, as in
        // Hugging Face.
        let s = r#"{"type":"Replace","pattern":{"String":"ab"},"content":"X"}"#;
        assert_eq!(
            run(s, "cabab"),
            ("cXX".into(), vec![(0, 1), (2, 3), (4, 5)])
        );
        let r = r#"{"type":"Replace","pattern":{"Regex":"\\p{Han}+"},"content":"<>"}"#;
        assert_eq!(
            run(r, "a中文b"),
            ("a<>b".into(), vec![(0, 1), (4, 7), (4, 7), (7, 8)])
        );
        // An empty match at the start inserts with an empty span.
        let start = r#"{"type":"Replace","pattern":{"Regex":"^"},"content":"_"}"#;
        assert_eq!(
            run(start, "ab"),
            ("_ab".into(), vec![(0, 0), (0, 1), (1, 2)])
        );
        // Removal.
        let del = r#"{"type":"Replace","pattern":{"Regex":"\\s"},"content":""}"#;
        assert_eq!(run(del, "a b"), ("ab".into(), vec![(0, 1), (2, 3)]));
    }

    #[test]
    fn prepend_takes_the_first_characters_span() {
        let p = r#"{"type":"Prepend","prepend":"▁"}"#;
        assert_eq!(run(p, "ab"), ("▁ab".into(), vec![(0, 1), (0, 1), (1, 2)]));
        assert_eq!(run(p, "").0, "");
    }

    #[test]
    fn bert_spans() {
        let b = r#"{"type":"BertNormalizer","clean_text":true,"handle_chinese_chars":true,"strip_accents":null,"lowercase":true}"#;
        let (text, spans) = run(b, "É\u{0}中\tx");
        assert_eq!(text, "e 中  x");
        // É (0..2) becomes e; NUL (2..3) goes; the spaces around 中 (3..6)
        // stand for it, as in Hugging Face; the tab (6..7) is a space.
        assert_eq!(spans, vec![(0, 2), (3, 6), (3, 6), (3, 6), (6, 7), (7, 8)]);
    }

    #[test]
    fn bert_text_equals_the_fast_normalizer() {
        let mut samples = vec![
            "Héllo, WORLD!\u{0}\tnaïve 中文x\u{200B}y".to_owned(),
            "e\u{301}\u{0}\u{323}x\u{F900}\u{1D165}Ⅻ ǅ İ ß ﬁ".to_owned(),
        ];
        // Every BMP character after a letter and before marks.
        let mut all = String::new();
        for cp in (0..0x10000u32).chain([0x1D15E, 0x2F800, 0x1F600, 0xE0001]) {
            if let Some(c) = char::from_u32(cp) {
                all.push('x');
                all.push(c);
                all.push_str("\u{323}\u{301}\u{302E}");
            }
        }
        samples.push(all);
        for (clean_text, handle_chinese_chars, strip_accents, lowercase) in [
            (true, true, None, true),
            (true, true, Some(false), false),
            (false, false, Some(true), false),
            (true, false, Some(false), true),
        ] {
            let fast = bert_text::BertNormalizer {
                clean_text,
                handle_chinese_chars,
                strip_accents: strip_accents.unwrap_or(lowercase),
                lowercase,
            };
            let step = Normalizer::BertNormalizer {
                clean_text,
                handle_chinese_chars,
                strip_accents,
                lowercase,
            };
            for text in &samples {
                let mut expected = String::new();
                fast.normalize_into(text, &mut expected);
                for track in [true, false] {
                    let mut n = Normalized::new(text, track);
                    step.normalize(&mut n).unwrap();
                    assert!(n.as_str() == expected, "{step:?} track={track}");
                }
            }
        }
    }

    #[test]
    fn widths() {
        let half = r#"{"type":"HalfWidth","ascii":true,"katakana":false}"#;
        assert_eq!(
            run(half, "Ａｂ１！\u{3000}ガ"),
            (
                "Ab1! ガ".into(),
                vec![(0, 3), (3, 6), (6, 9), (9, 12), (12, 15), (15, 18)]
            )
        );
        let half_kana = r#"{"type":"HalfWidth","ascii":false,"katakana":true}"#;
        assert_eq!(
            run(half_kana, "ガパア。ヰＡ"),
            (
                "ｶﾞﾊﾟｱ｡ヰＡ".into(),
                vec![
                    (0, 3),
                    (0, 3),
                    (3, 6),
                    (3, 6),
                    (6, 9),
                    (9, 12),
                    (12, 15),
                    (15, 18)
                ]
            )
        );
        let full = r#"{"type":"FullWidth","ascii":true,"katakana":false}"#;
        assert_eq!(run(full, "Ab 1~é").0, "Ａｂ\u{3000}１～é");
        let full_kana = r#"{"type":"FullWidth","ascii":false,"katakana":true}"#;
        // ｶﾞ (6 bytes) composes into ガ; ﾞ alone is the spacing mark; ｱﾞ has
        // no composed form.
        assert_eq!(
            run(full_kana, "ｶﾞﾊﾟﾞｱﾞｳﾞa"),
            (
                "ガパ゛ア゛ヴa".into(),
                vec![
                    (0, 6),
                    (6, 12),
                    (12, 15),
                    (15, 18),
                    (18, 21),
                    (21, 27),
                    (27, 28)
                ]
            )
        );
        // Round trip of every half-width katakana.
        let every: String = (0xFF61..=0xFF9F).filter_map(char::from_u32).collect();
        let (full_text, _) = run(full_kana, &every);
        assert_eq!(run(half_kana, &full_text).0, every);
        for (i, c) in KATAKANA_FULL.chars().enumerate() {
            let half = char::from_u32(0xFF61 + i as u32).unwrap();
            assert_eq!(
                half.to_string().nfkc().map(|(c, _)| c).collect::<String>(),
                c.to_string()
            );
        }
    }

    #[test]
    fn remove_control() {
        let r = r#"{"type":"RemoveControl","keep_joiners":false}"#;
        assert_eq!(
            run(r, "a\u{0}\tb\u{200D}\u{FEFF}c\r\n\u{7F}"),
            (
                "a\tbc\r\n".into(),
                vec![(0, 1), (2, 3), (3, 4), (10, 11), (11, 12), (12, 13)]
            )
        );
        let keep = r#"{"type":"RemoveControl","keep_joiners":true}"#;
        assert_eq!(run(keep, "क्\u{200D}ष\u{200E}").0, "क्\u{200D}ष");
        assert_eq!(run(keep, "plain").0, "plain");
    }

    #[test]
    fn sequence_composes_maps() {
        let seq = r#"{"type":"Sequence","normalizers":[{"type":"NFKD"},{"type":"StripAccents"},{"type":"Lowercase"},{"type":"Prepend","prepend":"▁"}]}"#;
        assert_eq!(
            run(seq, "Éﬁ"),
            ("▁efi".into(), vec![(0, 2), (0, 2), (2, 5), (2, 5)])
        );
    }

    #[test]
    fn untracked_keeps_no_map() {
        for json in [
            r#"{"type":"NFD"}"#,
            r#"{"type":"Prepend","prepend":"▁"}"#,
            r#"{"type":"Replace","pattern":{"String":"a"},"content":"bb"}"#,
            r#"{"type":"BertNormalizer","clean_text":true,"handle_chinese_chars":true,"strip_accents":null,"lowercase":true}"#,
        ] {
            let mut n = Normalized::new("aé中", false);
            spec(json).normalize(&mut n).unwrap();
            assert!(!n.is_tracking());
            assert_eq!(n.original_span(0..1), (0, 0));
            assert_eq!(
                n.chars_with_spans()
                    .map(|(_, _, s)| s)
                    .filter(|&s| s != (0, 0))
                    .count(),
                0
            );
        }
    }

    #[test]
    fn json_round_trip_and_errors() {
        for json in [
            r#"{"type":"NFC"}"#,
            r#"{"type":"Strip","strip_left":true,"strip_right":false}"#,
            r#"{"type":"Replace","pattern":{"Regex":"\\s+"},"content":" "}"#,
            r#"{"type":"BertNormalizer","clean_text":true,"handle_chinese_chars":true,"strip_accents":null,"lowercase":true}"#,
            r#"{"type":"Sequence","normalizers":[{"type":"NFD"},{"type":"RemoveControl","keep_joiners":true}]}"#,
        ] {
            assert_eq!(spec(json).to_json(), json);
        }
        let err = |json: &str| Normalizer::from_json(json).unwrap_err().to_string();
        let unknown = err(r#"{"type":"Nope"}"#);
        assert!(
            unknown.contains("Nope") && unknown.contains("StripAccents"),
            "{unknown}"
        );
        let field = err(r#"{"type":"Strip","strip_left":true,"strip_right":true,"x":1}"#);
        assert!(
            field.starts_with("Strip:") && field.contains("`x`"),
            "{field}"
        );
        let unit_field = err(r#"{"type":"NFC","x":1}"#);
        assert!(unit_field.contains("`x`"), "{unit_field}");
        let regex = err(r#"{"type":"Replace","pattern":{"Regex":"("},"content":""}"#);
        assert!(
            regex.starts_with("Replace: invalid regular expression '(':"),
            "{regex}"
        );
        let nested =
            err(r#"{"type":"Sequence","normalizers":[{"type":"NFC"},{"type":"Prepend"}]}"#);
        assert!(
            nested.starts_with("Sequence: step 1: Prepend:") && nested.contains("prepend"),
            "{nested}"
        );
        assert!(err(r#"{"type":"Sequence","normalizers":[],"x":1}"#).contains("`x`"));
        assert!(err("[1]").contains("\"type\""));
        for name in NORMALIZER_TYPES {
            assert!(!err(&format!(r#"{{"type":"{name}","zzz":1}}"#))
                .contains("unknown normalizer type"));
        }
    }

    #[test]
    fn char_offsets() {
        let (text, offsets) = spec(r#"{"type":"NFD"}"#)
            .normalize_with_char_offsets("aé中")
            .unwrap();
        assert_eq!(text, "ae\u{301}中");
        assert_eq!(offsets, vec![(0, 1), (1, 2), (1, 2), (2, 3)]);
    }
}
