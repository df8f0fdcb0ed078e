//! Decoders: the last stage of the pipeline, from the tokens of a sequence
//! of ids back to text. A token's text is bytes here: for byte-level BPE
//! the token's raw bytes (not GPT-2's byte-to-character stand-ins), for
//! WordPiece its text (`"##ing"`), for Unigram its piece (`"▁the"`,
//! `"<0xE3>"`).
//!
//! [`Decoder`] is one step or a [`Decoder::Sequence`] of them, saved as
//! `{"type": NAME, ...}` with Hugging Face `tokenizers`' names and fields.
//! Like there, each step maps a list of tokens to a list of tokens
//! ([`Decoder::decode_chain`]), and [`Decoder::decode`] joins the last list
//! into text (bytes that are not UTF-8 as U+FFFD).
//!
//! [`DecodeStream`] turns ids that arrive one at a time (generation) into
//! text that arrives in whole characters.

use fancy_regex::Regex;
use memchr::memmem;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{Error, Result};

/// One decoding step, or a sequence of them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", deny_unknown_fields)]
pub enum Decoder {
    /// Joins the tokens' bytes. (The three settings are those of Hugging
    /// Face's ByteLevel, which serves as pre-tokenizer too; they are kept
    /// for its files and do not change decoding.)
    ByteLevel {
        #[serde(default = "crate::serde_defaults::yes")]
        add_prefix_space: bool,
        #[serde(default = "crate::serde_defaults::yes")]
        trim_offsets: bool,
        #[serde(default = "crate::serde_defaults::yes")]
        use_regex: bool,
    },
    /// WordPiece's decoder: a token that starts with `prefix` is joined to
    /// the one before it without the prefix, any other token after the
    /// first is preceded by a space. With `cleanup`, the joined text loses
    /// the space before punctuation and in English contractions, as BERT's
    /// decoding (`transformers`' `clean_up_tokenization`) and polytok's
    /// WordPiece model: on the whole text, so also across tokens
    /// (`"don" "'" "t"` gives "don't"); with `each_token`, on each token
    /// apart, as Hugging Face's decoder step (then "don ' t"; tokenizers
    /// read from its files decode so).
    WordPiece {
        #[serde(default = "double_hash")]
        prefix: String,
        #[serde(default = "crate::serde_defaults::yes")]
        cleanup: bool,
        #[serde(default, skip_serializing_if = "crate::serde_defaults::is_false")]
        each_token: bool,
    },
    /// `replacement` (`▁`) back to a space; when the pre-tokenizer adds a
    /// prefix (`prepend_scheme` "always" or "first"), the first token loses
    /// its replacement characters instead, as in Hugging Face. `split`
    /// matters to the pre-tokenizer only.
    Metaspace {
        #[serde(default = "lower_block")]
        replacement: char,
        #[serde(default)]
        prepend_scheme: PrependScheme,
        #[serde(default = "crate::serde_defaults::yes")]
        split: bool,
    },
    /// Tokens `<0xNN>` become the byte 0xNN; each run of them becomes one
    /// token of text, each byte of the run that is not part of a valid
    /// UTF-8 character U+FFFD (as SentencePiece: Hugging Face turns every
    /// byte of a run with an invalid one into U+FFFD, so the two agree on
    /// runs of whole characters).
    ByteFallback {},
    /// All tokens into one.
    Fuse {},
    /// All tokens into one, with `separator` between each two: what
    /// Hugging Face does without a decoder (a space), so its files that
    /// have none decode as there. polytok's own step.
    Join {
        separator: String,
    },
    /// Removes up to `start` times `content` from the start of each token
    /// and up to `stop` times from its end.
    Strip {
        content: char,
        start: usize,
        stop: usize,
    },
    /// Replaces each match of `pattern` in each token by `content`.
    Replace {
        pattern: ReplacePattern,
        content: String,
    },
    Sequence {
        decoders: Vec<Decoder>,
    },
}

/// Hugging Face's Metaspace setting: where the pre-tokenizer puts a `▁`
/// in front of the text.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PrependScheme {
    #[default]
    Always,
    First,
    Never,
}

/// What [`Decoder::Replace`] looks for: `{"String": s}` (the text itself)
/// or `{"Regex": r}` (compiled when the decoder is read).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(try_from = "PatternSpec", into = "PatternSpec")]
pub struct ReplacePattern {
    spec: PatternSpec,
    regex: Option<Regex>,
}

/// The saved form of a [`ReplacePattern`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub enum PatternSpec {
    String(String),
    Regex(String),
}

impl TryFrom<PatternSpec> for ReplacePattern {
    type Error = String;

    fn try_from(spec: PatternSpec) -> std::result::Result<Self, String> {
        let regex = match &spec {
            PatternSpec::String(_) => None,
            PatternSpec::Regex(r) => {
                Some(Regex::new(r).map_err(|e| format!("invalid regex {r:?}: {e}"))?)
            }
        };
        Ok(ReplacePattern { spec, regex })
    }
}

impl From<ReplacePattern> for PatternSpec {
    fn from(p: ReplacePattern) -> Self {
        p.spec
    }
}

impl PartialEq for ReplacePattern {
    fn eq(&self, other: &Self) -> bool {
        self.spec == other.spec
    }
}

impl ReplacePattern {
    pub fn string(s: &str) -> Self {
        ReplacePattern {
            spec: PatternSpec::String(s.to_owned()),
            regex: None,
        }
    }

    pub fn regex(r: &str) -> Result<Self> {
        PatternSpec::Regex(r.to_owned())
            .try_into()
            .map_err(Error::invalid)
    }

    /// `token` with each match replaced by `content`. A regex applies to
    /// each stretch of valid UTF-8 of the token (a byte-level token may
    /// hold part of a character); an empty string matches nothing.
    fn replace(&self, token: &[u8], content: &[u8]) -> Result<Vec<u8>> {
        match (&self.spec, &self.regex) {
            (PatternSpec::String(s), _) => Ok(replace_bytes(token, s.as_bytes(), content)),
            (_, Some(regex)) => {
                let mut out = Vec::with_capacity(token.len());
                for chunk in token.utf8_chunks() {
                    let text = chunk.valid();
                    let mut last = 0;
                    for found in regex.find_iter(text) {
                        let found = found.map_err(|e| {
                            Error::invalid(format!("decoder Replace: regex failed: {e}"))
                        })?;
                        out.extend_from_slice(&text.as_bytes()[last..found.start()]);
                        out.extend_from_slice(content);
                        last = found.end();
                    }
                    out.extend_from_slice(&text.as_bytes()[last..]);
                    out.extend_from_slice(chunk.invalid());
                }
                Ok(out)
            }
            (PatternSpec::Regex(_), None) => unreachable!("regex patterns are compiled when built"),
        }
    }
}

fn double_hash() -> String {
    "##".to_owned()
}

fn lower_block() -> char {
    '▁'
}

/// The steps polytok knows, by their saved name.
const KNOWN: [&str; 9] = [
    "ByteFallback",
    "ByteLevel",
    "Fuse",
    "Join",
    "Metaspace",
    "Replace",
    "Sequence",
    "Strip",
    "WordPiece",
];

impl Decoder {
    /// Reads a decoder from its JSON (`{"type": NAME, ...}`), checking it
    /// all: an unknown type or setting, a missing or mistyped one, or a
    /// regex that does not compile is an `InvalidArgument` that names the
    /// step (and its place in a sequence).
    pub fn from_json(json: &str) -> Result<Decoder> {
        let value: Value = serde_json::from_str(json)
            .map_err(|e| Error::invalid(format!("decoder: not valid JSON: {e}")))?;
        Self::from_value(&value)
    }

    /// As [`Decoder::from_json`], from parsed JSON.
    pub fn from_value(value: &Value) -> Result<Decoder> {
        Self::read(value, "decoder")
    }

    fn read(value: &Value, place: &str) -> Result<Decoder> {
        let kind = match value.as_object().map(|o| o.get("type")) {
            Some(Some(Value::String(kind))) => kind.as_str(),
            Some(Some(other)) => {
                return Err(Error::invalid(format!(
                    "{place}: \"type\" must be a string, not {other}"
                )))
            }
            _ => {
                return Err(Error::invalid(format!(
                    "{place}: a decoder must be an object with a \"type\", not {value}"
                )))
            }
        };
        if !KNOWN.contains(&kind) {
            return Err(Error::invalid(format!(
                "{place}: unknown decoder type {kind:?} (polytok knows: {})",
                KNOWN.join(", ")
            )));
        }
        if kind == "Sequence" {
            let object = value.as_object().expect("checked above");
            if let Some(key) = object.keys().find(|k| *k != "type" && *k != "decoders") {
                return Err(Error::invalid(format!(
                    "{place} Sequence: unknown field `{key}`, expected `decoders`"
                )));
            }
            let Some(list) = object.get("decoders").and_then(Value::as_array) else {
                return Err(Error::invalid(format!(
                    "{place} Sequence: `decoders` must be a list of decoders"
                )));
            };
            let decoders = list
                .iter()
                .enumerate()
                .map(|(i, v)| Self::read(v, &format!("{place} Sequence.decoders[{i}]")))
                .collect::<Result<_>>()?;
            return Ok(Decoder::Sequence { decoders });
        }
        serde_json::from_value(value.clone())
            .map_err(|e| Error::invalid(format!("{place} {kind}: {e}")))
    }

    /// The decoder as JSON, as [`Decoder::from_json`] reads it.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("decoders serialize")
    }

    /// The text of `tokens`: the steps' tokens joined, bytes that are not
    /// UTF-8 replaced by U+FFFD.
    pub fn decode(&self, tokens: Vec<Vec<u8>>) -> Result<String> {
        let bytes = self.decode_chain(tokens)?.concat();
        Ok(match String::from_utf8(bytes) {
            Ok(text) => text,
            Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
        })
    }

    /// This step's tokens from the tokens before it.
    pub fn decode_chain(&self, tokens: Vec<Vec<u8>>) -> Result<Vec<Vec<u8>>> {
        Ok(match self {
            Decoder::ByteLevel { .. } | Decoder::Fuse {} => vec![tokens.concat()],
            Decoder::Join { separator } => vec![tokens.join(separator.as_bytes())],
            Decoder::WordPiece {
                prefix,
                cleanup,
                each_token,
            } => wordpiece(tokens, prefix.as_bytes(), *cleanup, *each_token),
            Decoder::Metaspace {
                replacement,
                prepend_scheme,
                ..
            } => {
                let mut buf = [0u8; 4];
                let replacement = replacement.encode_utf8(&mut buf).as_bytes();
                let drops_first = *prepend_scheme != PrependScheme::Never;
                tokens
                    .into_iter()
                    .enumerate()
                    .map(|(i, token)| {
                        let with = if i == 0 && drops_first {
                            &b""[..]
                        } else {
                            b" "
                        };
                        replace_bytes(&token, replacement, with)
                    })
                    .collect()
            }
            Decoder::ByteFallback {} => byte_fallback(tokens),
            Decoder::Strip {
                content,
                start,
                stop,
            } => {
                let mut buf = [0u8; 4];
                let content = content.encode_utf8(&mut buf).as_bytes();
                tokens
                    .into_iter()
                    .map(|token| strip(&token, content, *start, *stop).to_vec())
                    .collect()
            }
            Decoder::Replace { pattern, content } => tokens
                .iter()
                .map(|token| pattern.replace(token, content.as_bytes()))
                .collect::<Result<_>>()?,
            Decoder::Sequence { decoders } => decoders
                .iter()
                .try_fold(tokens, |tokens, d| d.decode_chain(tokens))?,
        })
    }

    /// How many tokens a [`DecodeStream`] must wait before it returns the
    /// text of a token, for this decoder to give the same text in pieces as
    /// at once: 0 where a token's text does not depend on the tokens after
    /// it; 2 for WordPiece's cleanup (the space before `'` goes once the
    /// token after it is known, the one before `n't` two tokens later), and
    /// for a replacement over tokens already joined (a guess: a pattern may
    /// reach further); 1 for stripping the end of joined tokens.
    pub fn stream_lookahead(&self) -> usize {
        fn walk(d: &Decoder, joined: &mut bool) -> usize {
            match d {
                Decoder::WordPiece {
                    cleanup: true,
                    each_token: false,
                    ..
                } => {
                    *joined = true;
                    2
                }
                Decoder::ByteLevel { .. } | Decoder::Fuse {} | Decoder::Join { .. } => {
                    *joined = true;
                    0
                }
                Decoder::Replace { .. } if *joined => 2,
                Decoder::Strip { stop, .. } if *joined && *stop > 0 => 1,
                Decoder::Sequence { decoders } => {
                    decoders.iter().map(|d| walk(d, joined)).max().unwrap_or(0)
                }
                _ => 0,
            }
        }
        walk(self, &mut false)
    }
}

/// WordPiece's decoder step (see [`Decoder::WordPiece`]).
fn wordpiece(tokens: Vec<Vec<u8>>, prefix: &[u8], cleanup: bool, each_token: bool) -> Vec<Vec<u8>> {
    let tokens: Vec<Vec<u8>> = tokens
        .into_iter()
        .enumerate()
        .map(|(i, mut token)| {
            if i > 0 {
                if !prefix.is_empty() && token.starts_with(prefix) {
                    token.drain(..prefix.len());
                } else {
                    token.insert(0, b' ');
                }
            }
            token
        })
        .collect();
    if !cleanup || tokens.is_empty() {
        return tokens;
    }
    let clean = |bytes: Vec<u8>| {
        let text = match String::from_utf8(bytes) {
            Ok(text) => text,
            Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
        };
        crate::wordpiece::cleanup_spaces(&text).into_bytes()
    };
    if each_token {
        return tokens.into_iter().map(clean).collect();
    }
    vec![clean(tokens.concat())]
}

/// The byte of a token `<0xNN>` (hexadecimal digits of either case, as
/// Hugging Face).
fn byte_token(token: &[u8]) -> Option<u8> {
    let hex = token.strip_prefix(b"<0x")?.strip_suffix(b">")?;
    let digit = |b: u8| (b as char).to_digit(16);
    match hex {
        [hi, lo] => Some((digit(*hi)? * 16 + digit(*lo)?) as u8),
        _ => None,
    }
}

/// ByteFallback's step (see [`Decoder::ByteFallback`]).
fn byte_fallback(tokens: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
    let mut out = Vec::with_capacity(tokens.len());
    let mut run = Vec::new();
    let end_run = |run: &mut Vec<u8>, out: &mut Vec<Vec<u8>>| {
        if !run.is_empty() {
            let mut text = String::with_capacity(run.len());
            crate::unigram::push_utf8_lossy(&mut text, run);
            out.push(text.into_bytes());
            run.clear();
        }
    };
    for token in tokens {
        match byte_token(&token) {
            Some(byte) => run.push(byte),
            None => {
                end_run(&mut run, &mut out);
                out.push(token);
            }
        }
    }
    end_run(&mut run, &mut out);
    out
}

/// `token` without up to `start` copies of `content` at its start and up
/// to `stop` at its end.
fn strip<'a>(mut token: &'a [u8], content: &[u8], start: usize, stop: usize) -> &'a [u8] {
    for _ in 0..start {
        match token.strip_prefix(content) {
            Some(rest) => token = rest,
            None => break,
        }
    }
    for _ in 0..stop {
        match token.strip_suffix(content) {
            Some(rest) => token = rest,
            None => break,
        }
    }
    token
}

/// `haystack` with every `from` replaced by `to` (nothing for an empty
/// `from`).
fn replace_bytes(haystack: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
    if from.is_empty() {
        return haystack.to_vec();
    }
    let mut out = Vec::with_capacity(haystack.len());
    let mut last = 0;
    for at in memmem::find_iter(haystack, from) {
        out.extend_from_slice(&haystack[last..at]);
        out.extend_from_slice(to);
        last = at + from.len();
    }
    out.extend_from_slice(&haystack[last..]);
    out
}

/// Tokens kept before the first one whose text is not yet returned, so
/// that decoders that treat the first token apart (Metaspace's prefix,
/// WordPiece's spaces) see the new ones as they would in the whole text.
const CONTEXT: usize = 3;
/// A character cut across tokens is complete within 4 tokens of at least
/// a byte: a U+FFFD at the end waits for 3 more tokens at most (and for
/// [`DecodeStream::flush`]).
const MAX_WAIT: usize = 4;
/// An incomplete character decodes to at most 3 U+FFFD (one per byte, as
/// SentencePiece; one for all, as `String::from_utf8_lossy`): more before
/// it are final.
const MAX_HELD_FFFD: usize = 3;
/// The window is cut down to its last tokens once this many more than it
/// needs have come.
const SLACK: usize = 16;

const FFFD: char = '\u{FFFD}';

/// Decodes ids that come one at a time (a model generating text) into text
/// that comes in whole characters.
///
/// Each [`step`](DecodeStream::step) decodes a window of the last ids
/// (some already shown, as context, and the new ones) with the whole
/// tokenizer's decode and returns what that text has beyond what was
/// returned before, as Hugging Face's `DecodeStream` (its prefix and read
/// index). Held back:
/// - a trailing U+FFFD, which may be a character cut across tokens, until
///   it completes, or until 3 more tokens have come without it completing
///   (then it is a real U+FFFD of bytes that are not UTF-8), or the
///   [`flush`](DecodeStream::flush) at the end;
/// - with a lookahead of `n` tokens ([`Decoder::stream_lookahead`]), the
///   text that the last `n` tokens changed, for decoders where a token
///   changes the text before it (WordPiece's cleanup).
///
/// Everything returned, then `flush`, is the decoding of all the ids at
/// once, for decoders whose tokens reach no further than the context and
/// the lookahead. Were the window's decoding ever to contradict text
/// already returned, `step` says so with an error rather than return
/// something else.
#[derive(Clone, Debug, Default)]
pub struct DecodeStream {
    /// The window: the last ids.
    ids: Vec<u32>,
    /// What has been returned of the window's decoding (a prefix of it).
    shown: String,
    lookahead: usize,
    /// For how many steps the text after `shown` has begun with U+FFFD.
    waited: usize,
}

impl DecodeStream {
    /// A stream for decoders that need no lookahead (byte-level BPE,
    /// Metaspace, byte fallback, SentencePiece's decoding).
    pub fn new() -> Self {
        Self::with_lookahead(0)
    }

    /// A stream that holds back the text that the last `lookahead` tokens
    /// changed.
    pub fn with_lookahead(lookahead: usize) -> Self {
        DecodeStream {
            lookahead,
            ..Default::default()
        }
    }

    /// A stream for a tokenizer whose decoder is `decoder`.
    pub fn for_decoder(decoder: &Decoder) -> Self {
        Self::with_lookahead(decoder.stream_lookahead())
    }

    pub fn lookahead(&self) -> usize {
        self.lookahead
    }

    /// Takes the next id; returns the text that is now final, if any.
    /// `decode` is the tokenizer's decoding of a slice of ids.
    pub fn step<E: From<Error>>(
        &mut self,
        id: u32,
        mut decode: impl FnMut(&[u32]) -> std::result::Result<String, E>,
    ) -> std::result::Result<Option<String>, E> {
        self.ids.push(id);
        let (text, mut end) = match self.decode_new(&mut decode) {
            Ok(decoded) => decoded,
            Err(e) => {
                // As if `id` had not come: the stream goes on.
                self.ids.pop();
                return Err(e);
            }
        };
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        let start = self.shown.len();
        let end = end.max(start);
        // The last U+FFFD may be an incomplete character.
        let fffds = text[start..end]
            .chars()
            .rev()
            .take_while(|&c| c == FFFD)
            .count();
        let mut cut = end - fffds.min(MAX_HELD_FFFD) * FFFD.len_utf8();
        if cut > start {
            self.waited = usize::from(cut < end);
        } else if end > start {
            self.waited += 1;
            if self.waited >= MAX_WAIT {
                cut += FFFD.len_utf8();
                self.waited = 0;
            }
        }
        let out = &text[start..cut];
        self.shown.push_str(out);
        let out = (!out.is_empty()).then(|| out.to_owned());
        self.slide(&text, &mut decode);
        Ok(out)
    }

    /// The window's text, and the end of what the last `lookahead` tokens
    /// did not change in it (at a character boundary).
    fn decode_new<E: From<Error>>(
        &self,
        decode: &mut impl FnMut(&[u32]) -> std::result::Result<String, E>,
    ) -> std::result::Result<(String, usize), E> {
        let text = decode(&self.ids)?;
        self.check(&text)?;
        let mut end = text.len();
        for back in 1..=self.lookahead.min(self.ids.len()) {
            let before = decode(&self.ids[..self.ids.len() - back])?;
            end = end.min(common_prefix(&text, &before));
        }
        Ok((text, end))
    }

    /// Returns the rest of the text (the U+FFFD of an incomplete character
    /// at the end included) and starts afresh.
    pub fn flush<E: From<Error>>(
        &mut self,
        mut decode: impl FnMut(&[u32]) -> std::result::Result<String, E>,
    ) -> std::result::Result<String, E> {
        let rest = if self.ids.is_empty() {
            String::new()
        } else {
            let text = decode(&self.ids)?;
            self.check(&text)?;
            text[self.shown.len()..].to_owned()
        };
        *self = Self::with_lookahead(self.lookahead);
        Ok(rest)
    }

    /// That the window's decoding `text` goes on from what was returned.
    fn check(&self, text: &str) -> Result<()> {
        if text.starts_with(&self.shown) {
            return Ok(());
        }
        Err(Error::invalid(format!(
            "decode stream: the last {} tokens now decode to {text:?}, which does not begin with \
             {:?} as returned before (the decoder changes text further back than the stream's \
             lookahead of {} tokens)",
            self.ids.len(),
            self.shown,
            self.lookahead
        )))
    }

    /// Drops the window's oldest ids once there are many more than the
    /// context needs, when the rest decodes to text that ends with the same
    /// text not yet returned (so the ids dropped are all shown, and do not
    /// change what comes after them).
    fn slide<E>(
        &mut self,
        text: &str,
        decode: &mut impl FnMut(&[u32]) -> std::result::Result<String, E>,
    ) {
        let keep = CONTEXT + self.lookahead + MAX_WAIT;
        if self.ids.len() < keep + SLACK {
            return;
        }
        let drop = self.ids.len() - keep;
        // (A failure here only leaves the window as it is: the text of
        // this step is already taken.)
        let Ok(rest) = decode(&self.ids[drop..]) else {
            return;
        };
        let pending = &text[self.shown.len()..];
        if rest.len() > pending.len() && rest.ends_with(pending) {
            let shown = rest.len() - pending.len();
            if rest.is_char_boundary(shown) {
                self.ids.drain(..drop);
                self.shown = rest[..shown].to_owned();
            }
        }
    }
}

/// The length of the longest common prefix of `a` and `b`, in bytes.
fn common_prefix(a: &str, b: &str) -> usize {
    a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count()
}

#[cfg(test)]
mod tests;
