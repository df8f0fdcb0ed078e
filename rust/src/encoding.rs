//! `Encoding`: a text's tokens with everything a model input needs, and
//! where each token came from.
//!
//! Offsets are computed only on the `Encoding` path that asks for them
//! (`offsets` empty otherwise); they are character offsets into the text
//! the caller passed (of the token's own sequence, for pairs).
//!
//! Tokens are kept as one list of records, not one list per field: an
//! encoding is one allocation to make and to free (batches make them on
//! polytok's threads and Python frees them on its own). Padding is
//! recorded, not written: a batch padded to its longest text is mostly
//! padding, and the lists are only made whole when read (`padded_*`).

/// Padding of an encoding: `count` tokens of id `id` and type `type_id`,
/// before the tokens (`left`) or after them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Pad {
    pub count: usize,
    pub left: bool,
    pub id: u32,
    pub type_id: u32,
}

/// One token of an encoding.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Token {
    pub id: u32,
    pub type_id: u32,
    /// Character `(start, end)` in its sequence's text; `(0, 0)` for added
    /// tokens and without offsets.
    pub offsets: (u32, u32),
    /// The pre-tokenized piece (word) it belongs to, within its sequence;
    /// `NO_WORD` for added tokens and without offsets.
    word: u32,
    /// Which input it comes from (0, 1), `NO_SEQUENCE` for added tokens.
    sequence: u8,
    /// Added by the template, or special-token text.
    pub special: bool,
}

const NO_WORD: u32 = u32::MAX;
const NO_SEQUENCE: u8 = u8::MAX;

impl Token {
    pub fn new(
        id: u32,
        type_id: u32,
        special: bool,
        sequence: Option<u32>,
        offsets: (u32, u32),
        word: Option<u32>,
    ) -> Self {
        Token {
            id,
            type_id,
            offsets,
            word: word.unwrap_or(NO_WORD),
            sequence: sequence.map_or(NO_SEQUENCE, |s| s as u8),
            special,
        }
    }

    pub fn word(&self) -> Option<u32> {
        (self.word != NO_WORD).then_some(self.word)
    }

    pub fn sequence(&self) -> Option<u32> {
        (self.sequence != NO_SEQUENCE).then_some(self.sequence as u32)
    }
}

/// One encoded input (a text, or a pair of texts) after the post-processor,
/// truncation and padding.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Encoding {
    /// The tokens, without the padding.
    pub tokens: Vec<Token>,
    /// The windows cut off by truncation, each a full encoding.
    pub overflowing: Vec<Encoding>,
    /// Padding around the tokens.
    pub pad: Pad,
}

impl Encoding {
    /// The number of tokens, padding included.
    pub fn len(&self) -> usize {
        self.tokens.len() + self.pad.count
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Where the tokens start among the padded positions.
    pub fn first_token(&self) -> usize {
        if self.pad.left {
            self.pad.count
        } else {
            0
        }
    }

    /// One field of every token, with the padding's `value`s around.
    pub fn padded<T: Clone>(&self, field: impl Fn(&Token) -> T, value: T) -> Vec<T> {
        let mut out = Vec::with_capacity(self.len());
        let pad = std::iter::repeat_n(value, self.pad.count);
        if self.pad.left {
            out.extend(pad);
            out.extend(self.tokens.iter().map(field));
        } else {
            out.extend(self.tokens.iter().map(field));
            out.extend(pad);
        }
        out
    }

    pub fn padded_ids(&self) -> Vec<u32> {
        self.padded(|t| t.id, self.pad.id)
    }

    pub fn padded_type_ids(&self) -> Vec<u32> {
        self.padded(|t| t.type_id, self.pad.type_id)
    }

    /// 1 for each token, 0 for padding.
    pub fn padded_attention_mask(&self) -> Vec<u32> {
        self.padded(|_| 1, 0)
    }

    pub fn padded_special_tokens_mask(&self) -> Vec<u32> {
        self.padded(|t| t.special as u32, 1)
    }

    pub fn padded_sequence_ids(&self) -> Vec<Option<u32>> {
        self.padded(Token::sequence, None)
    }

    pub fn padded_offsets(&self) -> Vec<(u32, u32)> {
        self.padded(|t| t.offsets, (0, 0))
    }

    pub fn padded_word_ids(&self) -> Vec<Option<u32>> {
        self.padded(Token::word, None)
    }

    /// The id at padded position `i` (`i < len()`).
    pub fn id_at(&self, i: usize) -> u32 {
        match i.checked_sub(self.first_token()) {
            Some(t) if t < self.tokens.len() => self.tokens[t].id,
            _ => self.pad.id,
        }
    }

    /// Appends one token.
    #[inline]
    pub fn push(&mut self, token: Token) {
        self.tokens.push(token);
    }

    /// Appends special tokens that the template adds (no text behind them).
    pub fn push_added(&mut self, ids: &[u32], type_id: u32) {
        self.tokens.extend(
            ids.iter()
                .map(|&id| Token::new(id, type_id, true, None, (0, 0), None)),
        );
    }

    /// Appends tokens `range` of `other`, with type id `type_id` (or
    /// their own).
    pub fn extend_from(
        &mut self,
        other: &Encoding,
        range: std::ops::Range<usize>,
        type_id: Option<u32>,
    ) {
        let tokens = other.tokens[range].iter();
        match type_id {
            Some(type_id) => self.tokens.extend(tokens.map(|t| Token { type_id, ..*t })),
            None => self.tokens.extend(tokens),
        }
    }

    /// The index (among the padded positions) of the token that holds
    /// character `char` of sequence `sequence`, if any.
    pub fn char_to_token(&self, char: u32, sequence: u32) -> Option<usize> {
        self.tokens
            .iter()
            .position(|t| {
                t.sequence() == Some(sequence) && t.offsets.0 <= char && char < t.offsets.1
            })
            .map(|i| i + self.first_token())
    }

    /// The sequence and character span of the token at padded position
    /// `token` (not for added tokens or padding).
    pub fn token_to_chars(&self, token: usize) -> Option<(u32, (u32, u32))> {
        let t = self.tokens.get(token.checked_sub(self.first_token())?)?;
        Some((t.sequence()?, t.offsets))
    }
}
