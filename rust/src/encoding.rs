//! `Encoding`: a text's tokens with everything a model input needs, and
//! where each token came from.
//!
//! Offsets are computed only on the `Encoding` path that asks for them
//! (`offsets` empty otherwise); they are character offsets into the text
//! the caller passed (of the token's own sequence, for pairs).

/// One encoded input (a text, or a pair of texts) after the post-processor,
/// truncation and padding.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Encoding {
    pub ids: Vec<u32>,
    pub type_ids: Vec<u32>,
    /// 1 for special tokens (added by the template, or special-token text).
    pub special_tokens_mask: Vec<u32>,
    /// 0 for padding.
    pub attention_mask: Vec<u32>,
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
}

impl Encoding {
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// Whether offsets and word ids were computed.
    pub fn has_offsets(&self) -> bool {
        self.offsets.len() == self.ids.len()
    }

    /// Appends one token.
    pub fn push(&mut self, id: u32, type_id: u32, special: bool, sequence: Option<u32>, offsets: Option<((u32, u32), Option<u32>)>) {
        self.ids.push(id);
        self.type_ids.push(type_id);
        self.special_tokens_mask.push(special as u32);
        self.attention_mask.push(1);
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
        self.attention_mask.extend_from_slice(&other.attention_mask[range.clone()]);
        self.sequence_ids.extend_from_slice(&other.sequence_ids[range.clone()]);
        if other.has_offsets() {
            self.offsets.extend_from_slice(&other.offsets[range.clone()]);
            self.word_ids.extend_from_slice(&other.word_ids[range]);
        }
    }

    /// The index of the token that holds character `char` of sequence
    /// `sequence`, if any.
    pub fn char_to_token(&self, char: u32, sequence: u32) -> Option<usize> {
        (0..self.len()).find(|&i| {
            self.sequence_ids[i] == Some(sequence) && {
                let (start, end) = self.offsets[i];
                start <= char && char < end
            }
        })
    }

    /// The sequence and character span of token `token` (not for added
    /// tokens).
    pub fn token_to_chars(&self, token: usize) -> Option<(u32, (u32, u32))> {
        let sequence = (*self.sequence_ids.get(token)?)?;
        Some((sequence, *self.offsets.get(token)?))
    }
}
