//! The text layer: what happens to text before a model sees it, and how
//! to find, afterwards, where in the caller's text each token came from.
//!
//! - [`Normalized`]: a text being transformed, with (when offsets are
//!   wanted) the span of original bytes behind each of its bytes;
//! - [`normalizers`]: Unicode forms, case, accents, white space, BERT's
//!   cleaning, regular-expression replacement, each keeping that map;
//! - [`pre_tokenizers`]: cutting normalized text into the pieces a model
//!   encodes one by one (patterns, white space and punctuation, `▁`);
//! - [`precompiled`]: SentencePiece's compiled normalization rules (the
//!   charsmap of its `.model` files and of Hugging Face's `Precompiled`);
//! - [`pattern`]: tiktoken's patterns (hand-written scanners) and regexes;
//! - [`bert`]: BERT's normalization and word splitting, fast, for the
//!   normalizer, the pre-tokenizer and the training counter;
//! - [`sentencepiece`]: SentencePiece's whitespace rules in one pass, for
//!   the training counter (the pipeline has them as steps);
//! - [`widths`]: text in CPython's fixed widths, read as UTF-8 on the
//!   thread that encodes it.
//!
//! The ids-only path builds a `Normalized` without the map (`track =
//! false`): the transforms then only write text, and no per-byte table is
//! filled. The `Encoding` path tracks it.

pub mod bert;
pub mod normalizers;
pub mod pattern;
pub mod pre_tokenizers;
pub mod precompiled;
pub mod sentencepiece;
pub mod widths;

use std::ops::Range;

/// A span of original bytes, `(start, end)`. A byte inserted by a
/// normalizer (a prefix, a space around a CJK ideograph) gets the empty span
/// at the place it was inserted.
pub type Span = (u32, u32);

/// Text under normalization. With tracking on, `spans[i]` is the span of
/// original bytes that byte `i` of `text` comes from; every byte of one
/// character has the same span.
#[derive(Clone, Debug, Default)]
pub struct Normalized {
    text: String,
    spans: Vec<Span>,
    track: bool,
    /// The buffers of the text before the last rewrite, reused by the next:
    /// a pipeline normalizes text after text without allocating.
    spare_text: String,
    spare_spans: Vec<Span>,
}

impl Normalized {
    /// `text` as it is, its map the identity when `track`.
    pub fn new(text: &str, track: bool) -> Self {
        let mut n = Normalized::default();
        n.reset(text, 0, track);
        n
    }

    /// Starts afresh with `text`, whose first byte is byte `offset` of the
    /// original (a segment between special tokens), keeping the buffers.
    pub fn reset(&mut self, text: &str, offset: u32, track: bool) {
        self.track = track;
        self.text.clear();
        self.text.push_str(text);
        self.spans.clear();
        if self.track {
            self.spans.reserve(text.len());
            for (i, c) in text.char_indices() {
                let span = (offset + i as u32, offset + (i + c.len_utf8()) as u32);
                self.spans.extend(std::iter::repeat_n(span, c.len_utf8()));
            }
        }
    }

    /// Starts afresh, untracked, with what `write` appends to an empty
    /// string given `text`: a first normalization step that writes its
    /// output straight from the caller's text, which is then not copied
    /// first.
    pub fn reset_untracked_with(&mut self, text: &str, write: impl FnOnce(&str, &mut String)) {
        self.track = false;
        self.text.clear();
        self.spans.clear();
        self.text.reserve(text.len());
        write(text, &mut self.text);
    }

    /// Becomes bytes `range` of `source`, with their spans (keeping this
    /// text's buffers).
    pub fn copy_from(&mut self, source: &Normalized, range: Range<usize>) {
        self.track = source.track;
        self.text.clear();
        self.text.push_str(&source.text[range.clone()]);
        self.spans.clear();
        if self.track {
            self.spans.extend_from_slice(&source.spans[range]);
        }
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }

    pub fn is_tracking(&self) -> bool {
        self.track
    }

    /// The original span of the normalized bytes `range` (non-empty for a
    /// non-empty range; `(0, 0)` without tracking).
    pub fn original_span(&self, range: Range<usize>) -> Span {
        if !self.track {
            return (0, 0);
        }
        if range.is_empty() {
            let at = self
                .spans
                .get(range.start)
                .map_or_else(|| self.end_of_original(), |s| s.0);
            return (at, at);
        }
        (
            self.byte_position(range.start, false),
            self.byte_position(range.end, true),
        )
    }

    /// The original byte of normalized byte `at` (a start), or of the end
    /// of normalized byte `at - 1` (an `end`). Inside a character that
    /// stands for an original one of the same length (unchanged), the
    /// byte's own position: tokens of byte-level models split characters.
    /// Otherwise the start (or end) of what the character stands for.
    fn byte_position(&self, at: usize, end: bool) -> u32 {
        let byte = if end { at - 1 } else { at };
        let (start, stop) = self.spans[byte];
        let mut char_start = byte;
        while !self.text.is_char_boundary(char_start) {
            char_start -= 1;
        }
        let char_len = self.text[char_start..]
            .chars()
            .next()
            .map_or(1, char::len_utf8);
        if char_len > 1 && (stop - start) as usize == char_len {
            start + (at - char_start) as u32
        } else if end {
            stop
        } else {
            start
        }
    }

    /// Where the original text ends, as far as this text knows.
    fn end_of_original(&self) -> u32 {
        self.spans.last().map_or(0, |s| s.1)
    }

    /// The span of the character at byte `at` (`(0, 0)` without tracking).
    fn span_at(&self, at: usize) -> Span {
        if !self.track {
            return (0, 0);
        }
        self.spans[at]
    }

    /// Replaces the text by what `build` writes into a [`Builder`], given
    /// this text: each character it pushes comes with the original span it
    /// stands for.
    pub fn rebuild(&mut self, build: impl FnOnce(&Normalized, &mut Builder)) {
        let mut builder = Builder {
            text: std::mem::take(&mut self.spare_text),
            spans: std::mem::take(&mut self.spare_spans),
            track: self.track,
        };
        builder.text.clear();
        builder.spans.clear();
        builder.text.reserve(self.text.len());
        if self.track {
            builder.spans.reserve(self.text.len());
        }
        build(self, &mut builder);
        self.spare_text = std::mem::replace(&mut self.text, builder.text);
        self.spare_spans = std::mem::replace(&mut self.spans, builder.spans);
    }

    /// Replaces the text by what `write` appends to an empty string, given
    /// this text: the text-only form of a transform that has a faster way
    /// to write its text than character by character. Without tracking only
    /// (there is no map to keep).
    pub fn rewrite_untracked(&mut self, write: impl FnOnce(&str, &mut String)) {
        assert!(!self.track, "rewrite_untracked on a tracked text");
        let mut text = std::mem::take(&mut self.spare_text);
        text.clear();
        text.reserve(self.text.len());
        write(&self.text, &mut text);
        self.spare_text = std::mem::replace(&mut self.text, text);
    }

    /// The text, to change in place where each character keeps its length
    /// (ASCII case mapping): every byte keeps its span.
    pub fn as_mut_str_same_lengths(&mut self) -> &mut str {
        &mut self.text
    }

    /// Each character with its byte position and original span (`(0, 0)`
    /// without tracking).
    pub fn chars_with_spans(&self) -> impl Iterator<Item = (usize, char, Span)> + '_ {
        self.text.char_indices().map(move |(i, c)| {
            let span = if self.track { self.span_at(i) } else { (0, 0) };
            (i, c, span)
        })
    }

    /// The span of the character that ends at byte `at`, or the empty span
    /// at the start for 0 (`(0, 0)` without tracking).
    pub fn span_before(&self, at: usize) -> Span {
        match at.checked_sub(1) {
            Some(last) if self.track => self.spans[last],
            _ => self.insertion_span(0),
        }
    }

    /// The empty span just before the character at byte `at` (or at the
    /// end), for inserted text.
    pub fn insertion_span(&self, at: usize) -> Span {
        if !self.track {
            return (0, 0);
        }
        let p = self
            .spans
            .get(at)
            .map_or_else(|| self.end_of_original(), |s| s.0);
        (p, p)
    }
}

/// Collects a rebuilt text and its map (see [`Normalized::rebuild`]).
pub struct Builder {
    text: String,
    spans: Vec<Span>,
    track: bool,
}

impl Builder {
    /// Appends `c`, which stands for the original bytes `span`.
    #[inline]
    pub fn push(&mut self, c: char, span: Span) {
        self.text.push(c);
        if self.track {
            self.spans.extend(std::iter::repeat_n(span, c.len_utf8()));
        }
    }

    /// Appends `s`, every character of it standing for `span`.
    pub fn push_str(&mut self, s: &str, span: Span) {
        self.text.push_str(s);
        if self.track {
            self.spans.extend(std::iter::repeat_n(span, s.len()));
        }
    }

    /// Appends bytes `range` of `source` unchanged, with their spans.
    pub fn copy(&mut self, source: &Normalized, range: Range<usize>) {
        self.text.push_str(&source.text[range.clone()]);
        if self.track {
            self.spans.extend_from_slice(&source.spans[range]);
        }
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }
}

/// Byte offsets of a text to character offsets. A span that starts or ends
/// inside a character takes the whole character: tokens that split one
/// (byte-level BPE) each cover it, as in Hugging Face's `tokenizers`.
pub struct CharIndex {
    /// Characters starting before each byte position; `None` for ASCII.
    before: Option<Vec<u32>>,
}

impl CharIndex {
    pub fn new(text: &str) -> Self {
        if text.is_ascii() {
            return CharIndex { before: None };
        }
        let mut before = Vec::with_capacity(text.len() + 1);
        let mut count = 0u32;
        for &b in text.as_bytes() {
            before.push(count);
            count += (b & 0xC0 != 0x80) as u32;
        }
        before.push(count);
        CharIndex {
            before: Some(before),
        }
    }

    pub fn span(&self, start: u32, end: u32) -> (u32, u32) {
        match &self.before {
            None => (start, end),
            Some(before) => {
                let start = start as usize;
                // A continuation byte adds no character: back to the one
                // it belongs to. (An end inside a character already
                // counts it.)
                let inside = start + 1 < before.len() && before[start + 1] == before[start];
                (before[start] - inside as u32, before[end as usize])
            }
        }
    }
}

/// Where `bytes` first holds two spaces in a row. Blocks are scanned
/// without an early exit, which vectorizes (a substring search for two
/// spaces, a needle of common bytes, goes byte by byte).
pub(crate) fn find_double_space(bytes: &[u8]) -> Option<usize> {
    const BLOCK: usize = 64;
    let (Some(first), Some(second)) = (bytes.get(..bytes.len().saturating_sub(1)), bytes.get(1..))
    else {
        return None;
    };
    let is_double = |(&x, &y): (&u8, &u8)| (x == b' ') & (y == b' ');
    first
        .chunks(BLOCK)
        .zip(second.chunks(BLOCK))
        .enumerate()
        .find_map(|(block, (a, b))| {
            let found = a
                .iter()
                .zip(b)
                .fold(false, |found, pair| found | is_double(pair));
            found.then(|| block * BLOCK + a.iter().zip(b).position(is_double).expect("found"))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identity_map_and_rebuild() {
        let mut n = Normalized::new("aé b", true);
        assert_eq!(n.original_span(1..3), (1, 3));
        n.rebuild(|src, out| {
            out.push('▁', src.insertion_span(0));
            for (_, c, span) in src.chars_with_spans() {
                if c == ' ' {
                    out.push('▁', span);
                } else {
                    out.push_str(&c.to_uppercase().to_string(), span);
                }
            }
        });
        assert_eq!(n.as_str(), "▁AÉ▁B");
        // "▁A" is the inserted prefix and "a": original bytes 0..1.
        assert_eq!(n.original_span(0..4), (0, 1));
        assert_eq!(n.original_span(0..3), (0, 0));
        // "É" is "é" (bytes 1..3), "▁" the space (3..4).
        assert_eq!(n.original_span(4..6), (1, 3));
        assert_eq!(n.original_span(6..9), (3, 4));
    }

    #[test]
    fn untracked_writes_text_only() {
        let mut n = Normalized::new("ab", false);
        n.rebuild(|src, out| out.copy(src, 0..1));
        assert_eq!(n.as_str(), "a");
        assert_eq!(n.original_span(0..1), (0, 0));
    }
}
