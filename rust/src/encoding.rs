//! `Encoding`: a text's tokens with everything a model input needs, and
//! where each token came from.
//!
//! Offsets are computed only on the `Encoding` path that asks for them
//! (`offsets` empty otherwise); they are character offsets into the text
//! the caller passed (of the token's own sequence, for pairs).
//!
//! Padding is recorded, not written: a batch padded to its longest text is
//! mostly padding, and the lists are only made whole when read (`padded`).

use std::borrow::Cow;

/// Padding of an encoding: `count` tokens of id `id` and type `type_id`,
/// before the tokens (`left`) or after them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Pad {
    pub count: usize,
    pub left: bool,
    pub id: u32,
    pub type_id: u32,
}

/// One encoded input (a text, or a pair of texts) after the post-processor,
/// truncation and padding.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Encoding {
    pub ids: Vec<u32>,
    pub type_ids: Vec<u32>,
    /// 1 for special tokens (added by the template, or special-token text).
    pub special_tokens_mask: Vec<u32>,
    /// Character `(start, end)` of each token in its sequence's text; `(0,
    /// 0)` for added tokens. Empty when offsets were not asked for.
    pub offsets: Vec<(u32, u32)>,
    /// The pre-tokenized piece (word) each token belongs to, within its
    /// sequence; `None` for added tokens. Empty without offsets.
    pub word_ids: Vec<Option<u32>>,
    /// Which input each token comes from (0, 1), `None` for added tokens.
    pub sequence_ids: Vec<Option<u32>>,
    /// The windows cut off by truncation, each a full encoding.
    pub overflowing: Vec<Encoding>,
    /// Padding around the lists above (which hold the tokens only).
    pub pad: Pad,
}

impl Encoding {
    /// The number of tokens, padding included.
    pub fn len(&self) -> usize {
        self.ids.len() + self.pad.count
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// `values` (one of the lists) with the padding's `value`s around it.
    pub fn padded<'a, T: Clone>(&self, values: &'a [T], value: T) -> Cow<'a, [T]> {
        if self.pad.count == 0 {
            return Cow::Borrowed(values);
        }
        let pad = std::iter::repeat_n(value, self.pad.count);
        let mut out = Vec::with_capacity(values.len() + self.pad.count);
        if self.pad.left {
            out.extend(pad);
            out.extend_from_slice(values);
        } else {
            out.extend_from_slice(values);
            out.extend(pad);
        }
        Cow::Owned(out)
    }

    /// Where the tokens start among the padded positions.
    pub fn first_token(&self) -> usize {
        if self.pad.left { self.pad.count } else { 0 }
    }

    pub fn padded_ids(&self) -> Cow<'_, [u32]> {
        self.padded(&self.ids, self.pad.id)
    }

    pub fn padded_type_ids(&self) -> Cow<'_, [u32]> {
        self.padded(&self.type_ids, self.pad.type_id)
    }

    /// 1 for each token, 0 for padding (which is all that is not a token:
    /// no list is kept).
    pub fn padded_attention_mask(&self) -> Cow<'_, [u32]> {
        Cow::Owned(self.padded(&vec![1; self.ids.len()], 0).into_owned())
    }

    pub fn padded_special_tokens_mask(&self) -> Cow<'_, [u32]> {
        self.padded(&self.special_tokens_mask, 1)
    }

    pub fn padded_sequence_ids(&self) -> Cow<'_, [Option<u32>]> {
        self.padded(&self.sequence_ids, None)
    }

    pub fn padded_offsets(&self) -> Cow<'_, [(u32, u32)]> {
        self.padded(&self.offsets, (0, 0))
    }

    pub fn padded_word_ids(&self) -> Cow<'_, [Option<u32>]> {
        self.padded(&self.word_ids, None)
    }

    /// Whether offsets and word ids were computed.
    pub fn has_offsets(&self) -> bool {
        self.offsets.len() == self.ids.len()
    }

    /// Room for `n` more tokens in every list (`with_offsets`: in the
    /// offsets and word ids too), so that filling them allocates once.
    pub fn reserve(&mut self, n: usize, with_offsets: bool) {
        self.ids.reserve(n);
        self.type_ids.reserve(n);
        self.special_tokens_mask.reserve(n);
        self.sequence_ids.reserve(n);
        if with_offsets {
            self.offsets.reserve(n);
            self.word_ids.reserve(n);
        }
    }

    /// Appends one token.
    pub fn push(&mut self, id: u32, type_id: u32, special: bool, sequence: Option<u32>, offsets: Option<((u32, u32), Option<u32>)>) {
        self.ids.push(id);
        self.type_ids.push(type_id);
        self.special_tokens_mask.push(special as u32);
        self.sequence_ids.push(sequence);
        if let Some((span, word)) = offsets {
            self.offsets.push(span);
            self.word_ids.push(word);
        }
    }

    /// Appends tokens `range` of `other`, with type id `type_id` (or
    /// their own).
    pub fn extend_from(&mut self, other: &Encoding, range: std::ops::Range<usize>, type_id: Option<u32>) {
        self.ids.extend_from_slice(&other.ids[range.clone()]);
        match type_id {
            Some(t) => self.type_ids.extend(std::iter::repeat_n(t, range.len())),
            None => self.type_ids.extend_from_slice(&other.type_ids[range.clone()]),
        }
        self.special_tokens_mask.extend_from_slice(&other.special_tokens_mask[range.clone()]);
        self.sequence_ids.extend_from_slice(&other.sequence_ids[range.clone()]);
        if other.has_offsets() {
            self.offsets.extend_from_slice(&other.offsets[range.clone()]);
            self.word_ids.extend_from_slice(&other.word_ids[range]);
        }
    }

    /// The index (among the padded positions) of the token that holds
    /// character `char` of sequence `sequence`, if any.
    pub fn char_to_token(&self, char: u32, sequence: u32) -> Option<usize> {
        (0..self.ids.len())
            .find(|&i| {
                self.sequence_ids[i] == Some(sequence) && {
                    let (start, end) = self.offsets[i];
                    start <= char && char < end
                }
            })
            .map(|i| i + self.first_token())
    }

    /// The sequence and character span of the token at padded position
    /// `token` (not for added tokens or padding).
    pub fn token_to_chars(&self, token: usize) -> Option<(u32, (u32, u32))> {
        let i = token.checked_sub(self.first_token())?;
        let sequence = (*self.sequence_ids.get(i)?)?;
        Some((sequence, *self.offsets.get(i)?))
    }
}
