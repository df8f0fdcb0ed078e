//! The whole road from text to model input: added tokens are found first
//! (see `added_tokens`), each stretch of text between them is normalized
//! (then searched for the added tokens matched in normalized text),
//! pre-tokenized and encoded by the model, then the post-processor's
//! template, truncation and padding make the `Encoding`.
//!
//! With `track` off (ids only), no offsets are computed: the normalizers
//! write text only. With it on, each token's span goes back through the
//! normalizer's map to bytes of the caller's text, then to characters.

use std::cell::RefCell;
use std::ops::Range;

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::added_tokens::{AddedTokenFlags, AddedTokens, Matcher, Segment};
use crate::batch::IdRuns;
use crate::decoders::Decoder;
use crate::encoding::{Encoding, Token};
use crate::error::{Error, Result};
use crate::model::{Model, SAME_SPAN};
use crate::processors::{
    Padding, PaddingStrategy, Part, PostProcessor, SequenceId, Template, Truncation,
};
use crate::text::normalizers::Normalizer;
use crate::text::pattern::PreTokenizer as PatternSplitter;
use crate::text::pre_tokenizers::{PreTokenizer, PreTokenizerSpec};
use crate::text::{CharIndex, Normalized, Span};
use crate::vocab::AllowedSpecial;

/// The pipeline's settings, as saved (JSON).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PipelineSpec {
    #[serde(default)]
    pub normalizer: Option<serde_json::Value>,
    #[serde(default)]
    pub pre_tokenizer: Option<PreTokenizerSpec>,
    #[serde(default)]
    pub post_processor: Option<PostProcessor>,
    /// Text recognized as one token when allowed, before normalization.
    #[serde(default)]
    pub special_tokens: Vec<(String, u32)>,
    /// Text recognized as one token in every call, which is not special
    /// (Hugging Face's added tokens with `special: false`): kept by
    /// decoding with `skip_special`, 0 in the special-tokens mask.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub added_tokens: Vec<(String, u32)>,
    #[serde(default)]
    pub truncation: Option<Truncation>,
    #[serde(default)]
    pub padding: Option<Padding>,
    #[serde(default)]
    pub decoder: Option<serde_json::Value>,
    /// Special tokens are recognized in every call, whatever the caller
    /// allows, and are 0 in the special-tokens mask where found in text
    /// (Hugging Face's added tokens: tokenizers read from its files).
    #[serde(default, skip_serializing_if = "crate::serde_defaults::is_false")]
    pub always_special: bool,
    /// How special and added tokens are matched beyond their text
    /// (Hugging Face's `lstrip`, `rstrip`, `single_word`, `normalized`).
    #[serde(
        default,
        alias = "special_token_strip",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub added_token_flags: Vec<AddedTokenFlags>,
}

/// A model with its text handling and post-processing.
pub struct Tokenizer {
    model: Model,
    normalizer: Option<Normalizer>,
    pre_tokenizer: Option<PreTokenizer>,
    template: Option<Template>,
    added: AddedTokens,
    always_special: bool,
    /// RoBERTa's `trim_offsets`, with its `add_prefix_space`: token offsets
    /// leave out the spaces at the token's ends.
    trim_offsets: Option<bool>,
    truncation: Option<Truncation>,
    padding: Option<Padding>,
    decoder: Option<Decoder>,
    /// The ids of every special token (the pipeline's and the template's),
    /// sorted.
    special_ids: Vec<u32>,
    /// One past the largest id: the model's, or an added token's.
    vocab_size: usize,
}

/// Scratch space of one thread, reused between texts.
#[derive(Default)]
struct Scratch {
    text: Normalized,
    /// A stretch between added tokens found in normalized text.
    gap: Normalized,
    pieces: Vec<Range<usize>>,
    /// The text a streaming pre-tokenizer rewrites (`Metaspace`).
    buffer: String,
    ids: Vec<u32>,
    ends: Vec<u32>,
}

/// A text at least this long is cut and encoded on all cores (see
/// `Tokenizer::cut_sequence_ids`): below it, handing parts to other threads
/// costs more than it saves.
pub const CUT_BYTES: usize = 1 << 18;

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::default());
    /// The ids of a text on the ids-only path of an encoding (apart from
    /// `SCRATCH`, which the pipeline borrows while writing them).
    static SEQUENCE_IDS: RefCell<Vec<u32>> = const { RefCell::new(Vec::new()) };
}

impl Tokenizer {
    /// Checks every part of `spec` against `model` (special-token ids in
    /// range, truncation leaving room for the template's tokens, ...).
    pub fn new(model: Model, spec: &PipelineSpec) -> Result<Self> {
        let normalizer = spec
            .normalizer
            .as_ref()
            .map(Normalizer::from_value)
            .transpose()?;
        let pre_tokenizer = spec
            .pre_tokenizer
            .as_ref()
            .map(PreTokenizer::new)
            .transpose()?;
        let template = spec
            .post_processor
            .as_ref()
            .map(Template::new)
            .transpose()?;
        let decoder = spec.decoder.as_ref().map(Decoder::from_value).transpose()?;
        let added = AddedTokens::new(
            &spec.special_tokens,
            &spec.added_tokens,
            &spec.added_token_flags,
            normalizer.as_ref(),
            spec.always_special,
        )?;
        // Added tokens may have ids past the model's (Hugging Face's added
        // vocabulary).
        let vocab_size = model.vocab_size().max(added.end_id() as usize);
        if let Some(t) = &spec.truncation {
            let added = |pair| {
                template
                    .as_ref()
                    .map_or(Ok(0), |t: &Template| t.added_tokens(pair))
            };
            t.check(added(false)?, added(true).ok())?;
        }
        if let Some(p) = &spec.padding {
            p.check()?;
            if p.pad_id as usize >= vocab_size {
                return Err(Error::invalid(format!(
                    "padding: pad id {} of {:?} is beyond the model's {vocab_size} ids",
                    p.pad_id, p.pad_token
                )));
            }
        }
        let mut special_ids: Vec<u32> = added.special_ids().collect();
        special_ids.extend(template.iter().flat_map(Template::token_ids));
        special_ids.sort_unstable();
        special_ids.dedup();
        Ok(Tokenizer {
            decoder,
            special_ids,
            model,
            normalizer,
            pre_tokenizer,
            template,
            added,
            always_special: spec.always_special,
            trim_offsets: spec
                .post_processor
                .as_ref()
                .and_then(PostProcessor::trim_offsets),
            truncation: spec.truncation.clone(),
            padding: spec.padding.clone(),
            vocab_size,
        })
    }

    pub fn model(&self) -> &Model {
        &self.model
    }

    pub fn padding(&self) -> Option<&Padding> {
        self.padding.as_ref()
    }

    /// The number of ids: the model's, and added tokens' past them.
    pub fn vocab_size(&self) -> usize {
        self.vocab_size
    }

    /// The id of a token given by its text: an added or special token of
    /// the pipeline, or of the model's vocabulary.
    pub fn token_id(&self, token: &str) -> Option<u32> {
        self.added
            .id(token)
            .or_else(|| self.model.token_id(token.as_bytes()))
    }

    /// A token's text as the decoder sees it: an added token's, or the
    /// model's (see [`Model::token`]).
    pub fn token(&self, id: u32) -> Result<std::borrow::Cow<'_, [u8]>> {
        match self.added.text(id) {
            Some(text) => Ok(std::borrow::Cow::Borrowed(text.as_bytes())),
            None => self.model.token(id).map_err(|e| match e {
                Error::UnknownTokenId { id, .. } => Error::UnknownTokenId {
                    id,
                    vocab_size: self.vocab_size,
                },
                e => e,
            }),
        }
    }

    /// The text of `ids`: the tokens' texts (special tokens left out with
    /// `skip_special`) through the decoder, or joined without one; bytes
    /// that are not UTF-8 replaced.
    pub fn decode(&self, ids: &[u32], skip_special: bool) -> Result<String> {
        let mut tokens = Vec::with_capacity(ids.len());
        for &id in ids {
            if skip_special && self.is_special(id) {
                continue;
            }
            tokens.push(self.token(id)?.into_owned());
        }
        match &self.decoder {
            Some(decoder) => decoder.decode(tokens),
            None => Ok(String::from_utf8_lossy(&tokens.concat()).into_owned()),
        }
    }

    /// Whether `id` is a special token: of the pipeline or its template.
    pub fn is_special(&self, id: u32) -> bool {
        // Most ids are below the first special one: one comparison.
        self.special_ids.first().is_some_and(|&first| id >= first)
            && self.special_ids.binary_search(&id).is_ok()
    }

    /// Encodes `a` (and `b`, a pair). `add_special_tokens`: apply the
    /// template; `track`: compute offsets and word ids.
    pub fn encode(
        &self,
        a: &str,
        b: Option<&str>,
        add_special_tokens: bool,
        allowed: &AllowedSpecial,
        track: bool,
    ) -> Result<Encoding> {
        let matcher = self.matcher(allowed)?;
        let mut encoding =
            self.encode_one(a, b, add_special_tokens, matcher.as_deref(), track, true)?;
        if let Some(p) = &self.padding {
            if let PaddingStrategy::Fixed(_) = p.strategy {
                p.apply(&mut encoding, p.target(0));
            } else if p.pad_to_multiple_of.is_some() {
                let longest = encoding.len();
                p.apply(&mut encoding, p.target(longest));
            }
        }
        Ok(encoding)
    }

    /// Encodes many inputs on all cores (the caller's pool), then pads
    /// them together.
    pub fn encode_batch(
        &self,
        inputs: &[(&str, Option<&str>)],
        add_special_tokens: bool,
        allowed: &AllowedSpecial,
        track: bool,
    ) -> Result<Vec<Encoding>> {
        let matcher = self.matcher(allowed)?;
        let matcher = matcher.as_deref();
        let mut encodings = inputs
            .par_iter()
            .with_min_len(16)
            .map(|&(a, b)| self.encode_one(a, b, add_special_tokens, matcher, track, false))
            .collect::<Result<Vec<_>>>()?;
        if let Some(p) = &self.padding {
            let longest = encodings
                .iter()
                .flat_map(|e| {
                    std::iter::once(e.len()).chain(e.overflowing.iter().map(Encoding::len))
                })
                .max()
                .unwrap_or(0);
            let target = p.target(longest);
            encodings.par_iter_mut().for_each(|e| p.apply(e, target));
        }
        Ok(encodings)
    }

    /// The matcher of added tokens in the text as given, for what the
    /// caller allows.
    fn matcher(&self, allowed: &AllowedSpecial) -> Result<Option<std::borrow::Cow<'_, Matcher>>> {
        self.added.raw_matcher(allowed, self.always_special)
    }

    /// Whether a token found in text is flagged special: a special token,
    /// unless the tokenizer follows Hugging Face (`always_special`), whose
    /// mask flags the template's tokens only.
    fn special_in_text(&self, id: u32) -> bool {
        !self.always_special && self.is_special(id)
    }

    /// One input's encoding; `share`: a long text may be shared among the
    /// pool's threads (see `cut_sequence_ids`).
    fn encode_one(
        &self,
        a: &str,
        b: Option<&str>,
        add_special_tokens: bool,
        matcher: Option<&Matcher>,
        track: bool,
        share: bool,
    ) -> Result<Encoding> {
        let template = self.template.as_ref().filter(|_| add_special_tokens);
        let Some(truncation) = &self.truncation else {
            // Straight into one encoding: the template's tokens, and each
            // text where the template has it.
            let mut out = Encoding::default();
            match template {
                Some(t) => {
                    for part in t.parts(b.is_some())? {
                        match part {
                            Part::Tokens { ids, type_id } => out.push_added(ids, type_id),
                            Part::Sequence { id, type_id } => {
                                let (text, sequence) = match id {
                                    SequenceId::A => (a, 0),
                                    SequenceId::B => (b.expect("a pair template with a pair"), 1),
                                };
                                self.encode_sequence(
                                    text, sequence, type_id, matcher, track, share, &mut out,
                                )?;
                            }
                        }
                    }
                }
                None => {
                    self.encode_sequence(a, 0, 0, matcher, track, share, &mut out)?;
                    if let Some(b) = b {
                        self.encode_sequence(b, 1, 1, matcher, track, share, &mut out)?;
                    }
                }
            }
            return Ok(out);
        };
        let mut first = Encoding::default();
        self.encode_sequence(a, 0, 0, matcher, track, share, &mut first)?;
        let mut second = match b {
            Some(b) => {
                let mut second = Encoding::default();
                self.encode_sequence(b, 1, 1, matcher, track, share, &mut second)?;
                Some(second)
            }
            None => None,
        };
        let added = template.map_or(Ok(0), |t| t.added_tokens(b.is_some()))?;
        truncation.apply(&mut first, second.as_mut(), added)?;
        self.merge(&first, second.as_ref(), template)
    }

    /// `a` and `b` through the template (or joined), with the windows that
    /// truncation cut off either, combined as Hugging Face's tokenizers
    /// combine them: each window of `a` with `b` (itself holding the
    /// windows of `b` with it) and with each window of `b`, then `a`
    /// (holding the windows of `a`) with each window of `b`.
    fn merge(
        &self,
        a: &Encoding,
        b: Option<&Encoding>,
        template: Option<&Template>,
    ) -> Result<Encoding> {
        let combine = |a: &Encoding, b: Option<&Encoding>| match template {
            Some(t) => t.apply(a, b),
            None => {
                let mut out = Encoding::default();
                out.extend_from(a, 0..a.len(), None);
                if let Some(b) = b {
                    out.extend_from(b, 0..b.len(), None);
                }
                Ok(out)
            }
        };
        let mut out = combine(a, b)?;
        let Some(b) = b else {
            out.overflowing = a
                .overflowing
                .iter()
                .map(|w| combine(w, None))
                .collect::<Result<_>>()?;
            return Ok(out);
        };
        for a_window in &a.overflowing {
            out.overflowing
                .push(self.merge(a_window, Some(b), template)?);
            for b_window in &b.overflowing {
                out.overflowing.push(combine(a_window, Some(b_window))?);
            }
        }
        for b_window in &b.overflowing {
            out.overflowing
                .push(self.merge(a, Some(b_window), template)?);
        }
        Ok(out)
    }

    /// Whether ids can be had without building encodings: nothing but a
    /// template around the model (no truncation, no padding).
    pub fn ids_direct(&self) -> bool {
        self.truncation.is_none() && self.padding.is_none()
    }

    /// Appends the ids of `text`, with the template when
    /// `add_special_tokens`, for an `ids_direct` tokenizer. A long text is
    /// cut and encoded on every thread of the rayon pool this is called in
    /// (`ThreadPool::install`; outside any pool, on this thread alone) where
    /// the pre-tokenizer allows it (see `cut_splitter`); call this from
    /// outside any parallel loop of the pipeline's.
    pub fn encode_ids_into(
        &self,
        text: &str,
        add_special_tokens: bool,
        allowed: &AllowedSpecial,
        out: &mut Vec<u32>,
    ) -> Result<()> {
        let matcher = self.matcher(allowed)?;
        let matcher = matcher.as_deref();
        match self.cut_splitter(text) {
            Some(splitter) => self.with_template(add_special_tokens, out, |out| {
                self.cut_sequence_ids(text, splitter, matcher, out)
            }),
            None => self.single_ids_into(text, add_special_tokens, matcher, out),
        }
    }

    /// The pre-tokenizer to cut `text` with, if it is long enough to share
    /// among threads, this thread is one of a rayon pool's with others
    /// (`ThreadPool::install`), and the pipeline's pieces come from a
    /// preset pattern straight from the text (no normalizer, no second pass
    /// of added tokens). Outside any pool nothing is cut: asking for the
    /// global pool would start it, and in a child made by `fork` it has no
    /// threads to wait for.
    pub(crate) fn cut_splitter(&self, text: &str) -> Option<&PatternSplitter> {
        if text.len() < CUT_BYTES
            || rayon::current_thread_index().is_none()
            || rayon::current_num_threads() < 2
            || self.normalizer.is_some()
            || self.added.has_normalized()
        {
            return None;
        }
        match &self.pre_tokenizer {
            Some(PreTokenizer::Pattern(splitter)) => Some(splitter),
            _ => None,
        }
    }

    /// Appends the ids of one long text (no template) as `sequence_ids`
    /// does, on all cores: the text between special tokens is cut where the
    /// pattern's pieces are sure to end (`PatternSplitter::cuts`), and the
    /// parts, which split into the pieces of the whole, are encoded apart
    /// and their ids joined in order. Exact, since BPE encodes each piece on
    /// its own. The special tokens are found first, in the whole text: a cut
    /// could fall inside one. No thread-local is borrowed while this thread
    /// waits for the parts: the pool may hand it other work meanwhile.
    fn cut_sequence_ids(
        &self,
        text: &str,
        splitter: &PatternSplitter,
        matcher: Option<&Matcher>,
        out: &mut Vec<u32>,
    ) -> Result<()> {
        enum Part {
            Special(u32),
            Text(Range<usize>),
        }
        // A few parts per thread, so that a slow part (rare pieces) does not
        // leave the others idle at the end; none so small that handing it
        // over costs more than a fraction of its encoding.
        let every = (text.len() / (4 * rayon::current_num_threads())).max(1 << 15);
        let mut parts = Vec::new();
        self.added.split(text, matcher, |segment| -> Result<()> {
            match segment {
                Segment::Added { id, .. } => parts.push(Part::Special(id)),
                Segment::Text(part) => {
                    let start = part.as_ptr() as usize - text.as_ptr() as usize;
                    let mut from = start;
                    for cut in splitter.cuts(part, every) {
                        parts.push(Part::Text(from..start + cut));
                        from = start + cut;
                    }
                    parts.push(Part::Text(from..start + part.len()));
                }
            }
            Ok(())
        })?;
        let ids = parts
            .par_iter()
            .map(|part| match part {
                Part::Special(id) => Ok(vec![*id]),
                Part::Text(range) => SCRATCH.with(|scratch| {
                    let mut ids = Vec::new();
                    let part = &text[range.clone()];
                    self.stretch_ids(part, range.start, &mut scratch.borrow_mut(), &mut ids)?;
                    Ok(ids)
                }),
            })
            .collect::<Result<Vec<_>>>()?;
        out.reserve(ids.iter().map(Vec::len).sum());
        for part in ids {
            out.extend_from_slice(&part);
        }
        Ok(())
    }

    /// The ids of `text` without the template (for tests).
    #[cfg(test)]
    pub(crate) fn ids(&self, text: &str, allowed: &AllowedSpecial) -> Vec<u32> {
        let mut ids = Vec::new();
        self.encode_ids_into(text, false, allowed, &mut ids)
            .unwrap();
        ids
    }

    /// Appends the ids of each text to `runs` (see `encode_ids_into`; here
    /// truncation and padding are never applied), on this thread: a chunk
    /// of a batch (`batch::encode_chunks`).
    pub fn encode_texts(
        &self,
        texts: &[&str],
        add_special_tokens: bool,
        allowed: &AllowedSpecial,
        runs: &mut IdRuns,
    ) -> Result<()> {
        let matcher = self.matcher(allowed)?;
        texts.iter().try_for_each(|text| {
            runs.push(|out| self.single_ids_into(text, add_special_tokens, matcher.as_deref(), out))
        })
    }

    fn single_ids_into(
        &self,
        text: &str,
        add_special_tokens: bool,
        matcher: Option<&Matcher>,
        out: &mut Vec<u32>,
    ) -> Result<()> {
        self.with_template(add_special_tokens, out, |out| {
            self.sequence_ids(text, matcher, out)
        })
    }

    /// Appends the template's ids around those `sequence` appends (when
    /// `add_special_tokens` and there is a template), or these alone.
    fn with_template(
        &self,
        add_special_tokens: bool,
        out: &mut Vec<u32>,
        sequence: impl FnOnce(&mut Vec<u32>) -> Result<()>,
    ) -> Result<()> {
        let Some(template) = self.template.as_ref().filter(|_| add_special_tokens) else {
            return sequence(out);
        };
        let mut sequence = Some(sequence);
        for part in template.parts(false)? {
            match part {
                Part::Tokens { ids, .. } => out.extend_from_slice(ids),
                Part::Sequence { .. } => {
                    let sequence = sequence.take().expect("a single template has one sequence");
                    sequence(out)?
                }
            }
        }
        Ok(())
    }

    /// The encoding (without offsets) of one text whose ids
    /// `encode_ids_into` gave, for an `ids_direct` tokenizer: what
    /// `encode` makes of the text without tracking. The template's tokens
    /// are where it puts them; the text's ids are those between.
    pub fn encoding_of_ids(&self, ids: &[u32], add_special_tokens: bool) -> Result<Encoding> {
        let mut out = Encoding::default();
        let Some(template) = self.template.as_ref().filter(|_| add_special_tokens) else {
            self.push_text_ids(ids, 0, 0, &mut out);
            return Ok(out);
        };
        let text_ids = ids.len() - template.added_tokens(false)?;
        let mut rest = ids;
        for part in template.parts(false)? {
            rest = match part {
                Part::Tokens {
                    ids: added,
                    type_id,
                } => {
                    out.push_added(added, type_id);
                    &rest[added.len()..]
                }
                Part::Sequence { type_id, .. } => {
                    self.push_text_ids(&rest[..text_ids], 0, type_id, &mut out);
                    &rest[text_ids..]
                }
            };
        }
        Ok(out)
    }

    /// Appends the tokens of ids found in the text of sequence `sequence`,
    /// without offsets.
    fn push_text_ids(&self, ids: &[u32], sequence: u32, type_id: u32, out: &mut Encoding) {
        out.tokens.extend(ids.iter().map(|&id| {
            Token::new(
                id,
                type_id,
                self.special_in_text(id),
                Some(sequence),
                (0, 0),
                None,
            )
        }))
    }

    /// Appends the ids of one text (no template), without offsets.
    fn sequence_ids(
        &self,
        text: &str,
        matcher: Option<&Matcher>,
        out: &mut Vec<u32>,
    ) -> Result<()> {
        SCRATCH.with(|scratch| {
            let scratch = &mut *scratch.borrow_mut();
            if matcher.is_none() {
                return self.stretch_ids(text, 0, scratch, out);
            }
            self.added.split(text, matcher, |segment| -> Result<()> {
                match segment {
                    Segment::Added { id, .. } => out.push(id),
                    Segment::Text(part) => {
                        let offset = part.as_ptr() as usize - text.as_ptr() as usize;
                        self.stretch_ids(part, offset, scratch, out)?;
                    }
                }
                Ok(())
            })
        })
    }

    /// Appends the ids of one stretch of text between special tokens (at
    /// byte `offset` of its sequence): normalized, then each piece handed
    /// from the pre-tokenizer to the model as it is found, with no list of
    /// pieces (a `Sequence` of pre-tokenizers, which refines one, aside).
    fn stretch_ids(
        &self,
        part: &str,
        offset: usize,
        scratch: &mut Scratch,
        out: &mut Vec<u32>,
    ) -> Result<()> {
        if part.is_empty() {
            return Ok(());
        }
        if self.pre_tokenizer.as_ref().is_some_and(|p| !p.streams()) || self.added.has_normalized()
        {
            let Scratch {
                text, gap, pieces, ..
            } = scratch;
            self.normalize(part, offset, false, text)?;
            return self.each_found(offset, text, gap, pieces, |found| {
                match found {
                    Found::Added { id, .. } => out.push(id),
                    Found::Pieces { text, pieces } => {
                        self.model.encode_pieces(text.as_str(), pieces, out, None)
                    }
                }
                Ok(())
            });
        }
        let Scratch { text, buffer, .. } = scratch;
        let normalized = match &self.normalizer {
            None => part,
            Some(n) => {
                n.normalize_untracked(part, text)?;
                text.as_str()
            }
        };
        self.model.with_encoder(|model| match &self.pre_tokenizer {
            Some(PreTokenizer::Pattern(splitter)) => model.encode_split(normalized, splitter, out),
            Some(p) => p.for_each_piece(normalized, offset == 0, buffer, |piece| {
                model.encode_piece(piece, out)
            }),
            None => {
                if !normalized.is_empty() {
                    model.encode(normalized, out);
                }
                Ok(())
            }
        })
    }

    /// Appends the tokens of one text to `out`, with sequence id
    /// `sequence` and type id `type_id`.
    #[allow(clippy::too_many_arguments)]
    fn encode_sequence(
        &self,
        text: &str,
        sequence: u32,
        type_id: u32,
        matcher: Option<&Matcher>,
        track: bool,
        share: bool,
        out: &mut Encoding,
    ) -> Result<()> {
        if !track {
            let push_ids =
                |ids: &[u32], out: &mut Encoding| self.push_text_ids(ids, sequence, type_id, out);
            // A shared text is encoded into a vector of its own: the
            // thread-local one must not stay borrowed while this thread
            // waits for the others, which could hand it other work.
            if let Some(splitter) = self.cut_splitter(text).filter(|_| share) {
                let mut ids = Vec::new();
                self.cut_sequence_ids(text, splitter, matcher, &mut ids)?;
                push_ids(&ids, out);
                return Ok(());
            }
            return SEQUENCE_IDS.with(|ids| {
                let ids = &mut *ids.borrow_mut();
                ids.clear();
                self.sequence_ids(text, matcher, ids)?;
                push_ids(ids, out);
                Ok(())
            });
        }
        let at = Tracked {
            text,
            chars: CharIndex::new(text),
            sequence,
            type_id,
            first_token: out.tokens.len(),
        };
        let mut word = 0u32;
        SCRATCH.with(|scratch| {
            let scratch = &mut *scratch.borrow_mut();
            self.added.split(text, matcher, |segment| -> Result<()> {
                match segment {
                    Segment::Added { id, span } => {
                        let span = (span.start as u32, span.end as u32);
                        self.push_added(id, span, &at, word, out);
                        word += 1;
                    }
                    Segment::Text(part) if !part.is_empty() => {
                        let offset = part.as_ptr() as usize - text.as_ptr() as usize;
                        word = self.encode_tracked(part, offset, &at, word, scratch, out)?;
                    }
                    Segment::Text(_) => {}
                }
                Ok(())
            })
        })
    }

    /// Pushes an added token found in text, at the original bytes `span`
    /// (with the white space it strips, as Hugging Face has it), as word
    /// `word`.
    fn push_added(&self, id: u32, span: Span, at: &Tracked, word: u32, out: &mut Encoding) {
        let mut offsets = at.chars.span(span.0, span.1);
        if let Some(add_prefix_space) = self.trim_offsets {
            // Hugging Face trims the token's text: what was matched.
            let matched = &at.text[span.0 as usize..span.1 as usize];
            let leading = matched.chars().take_while(|c| c.is_whitespace()).count();
            let trailing = matched
                .chars()
                .rev()
                .take_while(|c| c.is_whitespace())
                .count();
            let first = out.tokens.len() == at.first_token;
            trim_span(
                &mut offsets,
                leading as u32,
                trailing as u32,
                first,
                add_prefix_space,
            );
        }
        out.push(Token::new(
            id,
            at.type_id,
            self.special_in_text(id),
            Some(at.sequence),
            offsets,
            Some(word),
        ));
    }

    /// Normalizes one stretch of text between added tokens (at byte
    /// `offset` of its sequence) into `text`.
    fn normalize(
        &self,
        part: &str,
        offset: usize,
        track: bool,
        text: &mut Normalized,
    ) -> Result<()> {
        match &self.normalizer {
            Some(n) if !track => n.normalize_untracked(part, text),
            Some(n) => {
                text.reset(part, offset as u32, track);
                n.normalize(text)
            }
            None => {
                text.reset(part, offset as u32, track);
                Ok(())
            }
        }
    }

    /// Cuts normalized `text` into `pieces` with the pre-tokenizer (from
    /// the whole text). `text_start`: the text is the start of its input
    /// (see `PreTokenizer::pre_tokenize`).
    fn pre_tokenize_all(
        &self,
        text: &mut Normalized,
        pieces: &mut Vec<Range<usize>>,
        text_start: bool,
    ) -> Result<()> {
        pieces.clear();
        if !text.as_str().is_empty() {
            pieces.push(0..text.as_str().len());
        }
        match &self.pre_tokenizer {
            Some(p) => p.pre_tokenize(text, pieces, text_start),
            None => Ok(()),
        }
    }

    /// Goes through a normalized stretch (`text`, at byte `offset` of its
    /// sequence) in order: the added tokens found in normalized text, and
    /// between them (or all of it, when there are none to find) the
    /// pre-tokenized pieces, with the text they are ranges of (`gap`
    /// holding a stretch between tokens).
    fn each_found(
        &self,
        offset: usize,
        text: &mut Normalized,
        gap: &mut Normalized,
        pieces: &mut Vec<Range<usize>>,
        mut f: impl FnMut(Found<'_>) -> Result<()>,
    ) -> Result<()> {
        let Some(matcher) = self.added.normalized_matcher() else {
            self.pre_tokenize_all(text, pieces, offset == 0)?;
            return f(Found::Pieces { text, pieces });
        };
        let text = &*text;
        let whole = text.as_str();
        self.added
            .split(whole, Some(matcher), |segment| match segment {
                Segment::Added { id, span } => f(Found::Added {
                    id,
                    span: text.original_span(span),
                }),
                Segment::Text("") => Ok(()),
                Segment::Text(part) => {
                    let start = part.as_ptr() as usize - whole.as_ptr() as usize;
                    gap.copy_from(text, start..start + part.len());
                    // Hugging Face's test of a stretch's start: its original
                    // offset is 0.
                    self.pre_tokenize_all(gap, pieces, offset == 0 && start == 0)?;
                    f(Found::Pieces { text: gap, pieces })
                }
            })
    }

    /// RoBERTa's `trim_offsets` on tokens of the model (see `trim_span`),
    /// by their texts; `starts_sequence`: the first is its sequence's
    /// first.
    fn trim_offsets(&self, tokens: &mut [Token], add_prefix_space: bool, starts_sequence: bool) {
        for (i, token) in tokens.iter_mut().enumerate() {
            let Ok(text) = self.model.token(token.id) else {
                continue;
            };
            let leading = text.iter().take_while(|&&b| b == b' ').count() as u32;
            let trailing = text.iter().rev().take_while(|&&b| b == b' ').count() as u32;
            let first = i == 0 && starts_sequence;
            trim_span(
                &mut token.offsets,
                leading,
                trailing,
                first,
                add_prefix_space,
            );
        }
    }

    /// The normalized pieces of `text` (no added tokens looked for), as
    /// the model gets them.
    pub fn pieces_of(&self, text: &str) -> Result<Vec<String>> {
        SCRATCH.with(|scratch| {
            let Scratch {
                text: normalized,
                pieces,
                ..
            } = &mut *scratch.borrow_mut();
            self.normalize(text, 0, false, normalized)?;
            self.pre_tokenize_all(normalized, pieces, true)?;
            let normalized = normalized.as_str();
            Ok(pieces
                .iter()
                .map(|r| normalized[r.clone()].to_owned())
                .collect())
        })
    }

    /// Encodes one stretch of text between added tokens (at byte `offset`
    /// of its sequence) with offsets, its first piece word `word`,
    /// appending to `out`; returns the next word id.
    fn encode_tracked(
        &self,
        part: &str,
        offset: usize,
        at: &Tracked,
        mut word: u32,
        scratch: &mut Scratch,
        out: &mut Encoding,
    ) -> Result<u32> {
        let Scratch {
            text,
            gap,
            pieces,
            ids,
            ends,
            ..
        } = scratch;
        self.normalize(part, offset, true, text)?;
        self.each_found(offset, text, gap, pieces, |found| {
            match found {
                Found::Added { id, span } => {
                    self.push_added(id, span, at, word, out);
                    word += 1;
                }
                Found::Pieces { text, pieces } => {
                    let first = out.tokens.len();
                    self.push_pieces(text, pieces, at, word, ids, ends, out);
                    if let Some(add_prefix_space) = self.trim_offsets {
                        let starts_sequence = first == at.first_token;
                        self.trim_offsets(
                            &mut out.tokens[first..],
                            add_prefix_space,
                            starts_sequence,
                        );
                    }
                    word += pieces.len() as u32;
                }
            }
            Ok(())
        })?;
        Ok(word)
    }

    /// Encodes `pieces` of normalized `text` and pushes their tokens with
    /// offsets, the first piece word `word`.
    #[allow(clippy::too_many_arguments)]
    fn push_pieces(
        &self,
        text: &Normalized,
        pieces: &[Range<usize>],
        at: &Tracked,
        word: u32,
        ids: &mut Vec<u32>,
        ends: &mut Vec<u32>,
        out: &mut Encoding,
    ) {
        ids.clear();
        ends.clear();
        self.model
            .encode_pieces(text.as_str(), pieces, ids, Some(ends));
        out.tokens.reserve(ids.len());
        let mut piece = 0;
        let mut start = None;
        let mut last_start = 0;
        for (&id, &end) in ids.iter().zip(ends.iter()) {
            let same_span = end & SAME_SPAN != 0;
            let end = (end & !SAME_SPAN) as usize;
            while pieces[piece].end < end {
                piece += 1;
                start = None;
            }
            let token_start = if same_span {
                last_start
            } else {
                start.unwrap_or(pieces[piece].start)
            };
            last_start = token_start;
            let (s, e) = text.original_span(token_start..end);
            out.push(Token::new(
                id,
                at.type_id,
                false,
                Some(at.sequence),
                at.chars.span(s, e),
                Some(word + piece as u32),
            ));
            start = Some(end);
        }
    }
}

/// RoBERTa's `trim_offsets` (Hugging Face's rule) on one token's offsets:
/// they leave out the `leading` and `trailing` spaces of its text, except
/// the one space of the first token that `add_prefix_space` put there.
fn trim_span(
    offsets: &mut (u32, u32),
    mut leading: u32,
    trailing: u32,
    first: bool,
    add_prefix_space: bool,
) {
    let (start, end) = offsets;
    if leading > 0 {
        if (first || *start == 0) && add_prefix_space && leading == 1 {
            leading = 0;
        }
        *start = (*start + leading).min(*end);
    }
    if trailing > 0 && *end >= trailing {
        *end = (*end - trailing).max(*start);
    }
}

/// What [`Tokenizer::each_found`] goes through.
enum Found<'a> {
    /// An added token, at original bytes `span`.
    Added { id: u32, span: Span },
    /// Pre-tokenized pieces: ranges of `text`.
    Pieces {
        text: &'a Normalized,
        pieces: &'a [Range<usize>],
    },
}

/// One sequence being encoded with offsets: its text, the sequence and
/// type ids of its tokens, and where its tokens start in the encoding.
struct Tracked<'t> {
    text: &'t str,
    chars: CharIndex,
    sequence: u32,
    type_id: u32,
    first_token: usize,
}
