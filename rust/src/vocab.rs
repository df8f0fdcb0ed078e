//! The vocabulary: token ids and their bytes, and the special tokens.
//!
//! Ordinary tokens have the ids `0..len`, with no gaps (an id is also a BPE
//! token's merge rank). Special tokens (`<|endoftext|>`) have ids of their own
//! outside that range, are matched in text only when the caller allows it
//! (see `added_tokens`), and never take part in merges.

use std::hash::BuildHasher;

use aho_corasick::{AhoCorasick, MatchKind};
use hashbrown::HashTable;
use rustc_hash::FxBuildHasher;

use crate::error::{Error, Result};

pub struct Vocab {
    /// The bytes of token `id` are `bytes[offsets[id]..offsets[id + 1]]`.
    bytes: Vec<u8>,
    offsets: Vec<u32>,
    index: HashTable<Slot>,
}

/// An index entry. The first 8 bytes of the token are kept in the slot, so
/// that looking up a short piece (most are) never leaves the table: that
/// lookup is the hot path of encoding.
#[derive(Clone, Copy)]
struct Slot {
    prefix: u64,
    len: u32,
    id: u32,
}

/// The hash of a byte string, as used by every byte-keyed table here.
#[inline(always)]
pub(crate) fn hash_bytes(bytes: &[u8]) -> u64 {
    FxBuildHasher.hash_one(bytes)
}

/// The first 8 bytes as a big-endian number, zeros past the end: ordering
/// by it, then by the bytes, is ordering by the bytes, and most comparisons
/// end at the number, without reading the bytes (which a sort of borrowed
/// pieces would fetch from all over memory).
#[inline(always)]
pub(crate) fn sort_key(bytes: &[u8]) -> u64 {
    prefix(bytes).swap_bytes()
}

/// The first 8 bytes, zero-padded. Built from at most two fixed-size loads
/// (a variable-length copy would be a call to `memcpy` on every lookup).
#[inline(always)]
pub(crate) fn prefix(bytes: &[u8]) -> u64 {
    let n = bytes.len();
    if n >= 8 {
        u64::from_le_bytes(bytes[..8].try_into().unwrap())
    } else if n >= 4 {
        // Two overlapping 4-byte loads.
        let low = u32::from_le_bytes(bytes[..4].try_into().unwrap()) as u64;
        let high = u32::from_le_bytes(bytes[n - 4..n].try_into().unwrap()) as u64;
        low | (high << (8 * (n - 4)))
    } else {
        bytes
            .iter()
            .rev()
            .fold(0u64, |acc, &b| (acc << 8) | b as u64)
    }
}

impl Vocab {
    /// A vocabulary from the tokens' bytes, in id order; tokens must be
    /// distinct and non-empty.
    pub fn new(tokens: Vec<Vec<u8>>) -> Result<Self> {
        let mut vocab = Vocab {
            bytes: Vec::with_capacity(tokens.iter().map(Vec::len).sum()),
            offsets: Vec::with_capacity(tokens.len() + 1),
            index: HashTable::with_capacity(tokens.len()),
        };
        vocab.offsets.push(0);
        for token in tokens {
            vocab.push(token)?;
        }
        Ok(vocab)
    }

    /// Adds a token with the next id.
    pub fn push(&mut self, token: Vec<u8>) -> Result<u32> {
        let id = self.len() as u32;
        if token.is_empty() {
            return Err(Error::invalid(format!("token {id} is empty")));
        }
        if let Some(other) = self.id(&token) {
            return Err(Error::invalid(format!(
                "token {id} has the same bytes as token {other}: {:?}",
                String::from_utf8_lossy(&token)
            )));
        }
        if self.bytes.len() + token.len() > u32::MAX as usize {
            return Err(Error::invalid("the vocabulary is larger than 4 GB"));
        }
        self.bytes.extend_from_slice(&token);
        self.offsets.push(self.bytes.len() as u32);
        let slot = Slot {
            prefix: prefix(&token),
            len: token.len() as u32,
            id,
        };
        let offsets = &self.offsets;
        let bytes = &self.bytes;
        self.index.insert_unique(hash_bytes(&token), slot, |s| {
            hash_bytes(&bytes[offsets[s.id as usize] as usize..offsets[s.id as usize + 1] as usize])
        });
        Ok(id)
    }

    pub fn len(&self) -> usize {
        self.offsets.len() - 1
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The bytes of token `id`; `id` must be below `len()`.
    #[inline(always)]
    pub fn bytes(&self, id: u32) -> &[u8] {
        let id = id as usize;
        &self.bytes[self.offsets[id] as usize..self.offsets[id + 1] as usize]
    }

    #[inline(always)]
    pub fn id(&self, bytes: &[u8]) -> Option<u32> {
        self.id_with_hash(bytes, hash_bytes(bytes))
    }

    /// `id`, with the hash of `bytes` (`hash_bytes`) already computed.
    #[inline(always)]
    pub(crate) fn id_with_hash(&self, bytes: &[u8], hash: u64) -> Option<u32> {
        let (len, first) = (bytes.len() as u32, prefix(bytes));
        self.index
            .find(hash, |s| {
                s.len == len
                    && s.prefix == first
                    && (len <= 8 || self.bytes(s.id)[8..] == bytes[8..])
            })
            .map(|s| s.id)
    }

    /// The length of token `id` in bytes; `id` must be below `len()`.
    #[inline(always)]
    pub fn token_len(&self, id: u32) -> usize {
        let id = id as usize;
        (self.offsets[id + 1] - self.offsets[id]) as usize
    }

    pub fn iter(&self) -> impl Iterator<Item = &[u8]> + '_ {
        (0..self.len() as u32).map(|id| self.bytes(id))
    }
}

/// Special tokens: text that maps to one reserved id.
#[derive(Clone, Debug, Default)]
pub struct SpecialTokens {
    /// In id order.
    tokens: Vec<(String, u32)>,
}

impl SpecialTokens {
    /// Checks that texts and ids are distinct, non-empty and outside the
    /// ordinary ids `0..vocab_len`.
    pub fn new(mut tokens: Vec<(String, u32)>, vocab_len: usize) -> Result<Self> {
        tokens.sort_by_key(|&(_, id)| id);
        for (i, (text, id)) in tokens.iter().enumerate() {
            if text.is_empty() {
                return Err(Error::invalid("a special token is empty"));
            }
            if *id >= 1 << 31 {
                return Err(Error::invalid(format!(
                    "special token {text:?} has id {id}: ids must be below 2^31"
                )));
            }
            if (*id as usize) < vocab_len {
                return Err(Error::invalid(format!(
                    "special token {text:?} has id {id}, which an ordinary token has (ids 0..{vocab_len})"
                )));
            }
            if let Some((other, _)) = tokens[..i].iter().find(|(_, other_id)| other_id == id) {
                return Err(Error::invalid(format!(
                    "special tokens {other:?} and {text:?} have the same id {id}"
                )));
            }
            if tokens[..i].iter().any(|(other, _)| other == text) {
                return Err(Error::invalid(format!(
                    "special token {text:?} is given twice"
                )));
            }
        }
        Ok(SpecialTokens { tokens })
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, u32)> {
        self.tokens.iter().map(|(text, id)| (text.as_str(), *id))
    }

    pub fn id(&self, text: &str) -> Option<u32> {
        self.tokens
            .iter()
            .find(|(t, _)| t == text)
            .map(|&(_, id)| id)
    }

    pub fn text(&self, id: u32) -> Option<&str> {
        self.tokens
            .binary_search_by_key(&id, |&(_, id)| id)
            .ok()
            .map(|i| self.tokens[i].0.as_str())
    }

    pub fn len(&self) -> usize {
        self.tokens.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }

    /// One past the largest id, or 0.
    pub fn end_id(&self) -> u32 {
        self.tokens.last().map_or(0, |&(_, id)| id + 1)
    }
}

/// Which special tokens `encode` recognizes in the text; the others are
/// encoded as ordinary text.
#[derive(Clone, Debug)]
pub enum AllowedSpecial {
    None,
    All,
    Only(Vec<String>),
}

/// Finds special tokens in text, the longest where they overlap; `None`
/// when there are none to find.
pub fn special_matcher<S: AsRef<str>>(texts: &[S]) -> Result<Option<AhoCorasick>> {
    if texts.is_empty() {
        return Ok(None);
    }
    AhoCorasick::builder()
        .match_kind(MatchKind::LeftmostLongest)
        .build(texts.iter().map(|t| t.as_ref()))
        .map(Some)
        .map_err(|e| Error::invalid(format!("special tokens: {e}")))
}

#[cfg(test)]
mod tests {
    use super::prefix;

    #[test]
    fn prefix_is_the_zero_padded_first_eight_bytes() {
        let bytes: Vec<u8> = (1..=12).collect();
        for n in 0..=bytes.len() {
            let mut padded = [0u8; 8];
            let k = n.min(8);
            padded[..k].copy_from_slice(&bytes[..k]);
            assert_eq!(
                prefix(&bytes[..n]),
                u64::from_le_bytes(padded),
                "length {n}"
            );
        }
    }
}
