//! Which strict prefixes and suffixes of a token are tokens themselves. The
//! pair table (every split of a token into two tokens) and the backtracking
//! encoder (the longest token that starts a token) ask this of every token.
//!
//! Looking every prefix up by hash costs O(L²) for a token of L bytes: a
//! single token of a megabyte took 53 s to load. Here prefixes of up to
//! `SHORT` bytes are still looked up by hash (at most `SHORT` lookups of at
//! most `SHORT` bytes each, the fast way for the short tokens that make up
//! ordinary vocabularies), and longer prefixes, which can only be long
//! tokens, are found by walking the token once down a trie of the long
//! tokens; suffixes likewise, walking the token backwards down a trie of the
//! long tokens reversed. A token then costs O(L) and a vocabulary
//! O(total bytes); ordinary vocabularies have few long tokens (cl100k: 121
//! of more than 64 bytes), so the tries are small.

use crate::trie::Trie;
use crate::vocab::Vocab;

/// Prefixes and suffixes up to this many bytes are looked up by hash.
const SHORT: usize = 64;

pub(super) struct Affixes {
    /// The tokens longer than `SHORT` bytes.
    forward: Trie,
    /// The same tokens, each reversed.
    backward: Trie,
}

impl Affixes {
    pub(super) fn new(vocab: &Vocab) -> Affixes {
        let long: Vec<u32> = (0..vocab.len() as u32)
            .filter(|&id| vocab.token_len(id) > SHORT)
            .collect();
        let reversed: Vec<Vec<u8>> = long
            .iter()
            .map(|&id| vocab.bytes(id).iter().rev().copied().collect())
            .collect();
        Affixes {
            forward: Trie::new(long.iter().map(|&id| (vocab.bytes(id), id))),
            backward: Trie::new(reversed.iter().map(Vec::as_slice).zip(long.iter().copied())),
        }
    }

    /// Calls `f(length, id)` for every strict prefix of `token` that is a
    /// token, shortest first.
    pub(super) fn for_each_prefix(
        &self,
        vocab: &Vocab,
        token: &[u8],
        mut f: impl FnMut(usize, u32),
    ) {
        let strict = token.len().saturating_sub(1);
        for len in 1..=strict.min(SHORT) {
            if let Some(id) = vocab.id(&token[..len]) {
                f(len, id);
            }
        }
        if strict > SHORT {
            walk(&self.forward, token[..strict].iter().copied(), f);
        }
    }

    /// Calls `f(length, id)` for every strict suffix of `token` that is a
    /// token, shortest first.
    pub(super) fn for_each_suffix(
        &self,
        vocab: &Vocab,
        token: &[u8],
        mut f: impl FnMut(usize, u32),
    ) {
        let strict = token.len().saturating_sub(1);
        let n = token.len();
        for len in 1..=strict.min(SHORT) {
            if let Some(id) = vocab.id(&token[n - len..]) {
                f(len, id);
            }
        }
        if strict > SHORT {
            walk(&self.backward, token[n - strict..].iter().rev().copied(), f);
        }
    }
}

/// Follows `bytes` down `trie` and calls `f(depth, value)` at every key it
/// passes; the trie only holds keys longer than `SHORT`, so these are the
/// long ones.
fn walk(trie: &Trie, bytes: impl Iterator<Item = u8>, mut f: impl FnMut(usize, u32)) {
    let mut node = Trie::ROOT;
    for (depth, byte) in bytes.enumerate() {
        let Some(child) = trie.child(node, byte) else {
            return;
        };
        node = child;
        if let Some(id) = trie.value(node) {
            f(depth + 1, id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_every_prefix_and_suffix_token_short_and_long() {
        // Tokens of every length up to 3 * SHORT made of one letter, and a
        // few others: every strict prefix and suffix of a run of a's is one.
        let mut tokens: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
        for len in 2..=3 * SHORT {
            tokens.push(vec![b'a'; len]);
        }
        let mut mixed = vec![b'a'; 2 * SHORT];
        mixed.push(b'b');
        tokens.push(mixed.clone());
        let vocab = Vocab::new(tokens).unwrap();
        let affixes = Affixes::new(&vocab);
        let naive = |token: &[u8], prefix: bool| -> Vec<(usize, u32)> {
            (1..token.len())
                .filter_map(|len| {
                    let part = if prefix {
                        &token[..len]
                    } else {
                        &token[token.len() - len..]
                    };
                    vocab.id(part).map(|id| (len, id))
                })
                .collect()
        };
        let token_ids = (0..vocab.len() as u32)
            .step_by(7)
            .chain([vocab.len() as u32 - 1]);
        for id in token_ids {
            let token = vocab.bytes(id);
            let (mut prefixes, mut suffixes) = (Vec::new(), Vec::new());
            affixes.for_each_prefix(&vocab, token, |len, id| prefixes.push((len, id)));
            affixes.for_each_suffix(&vocab, token, |len, id| suffixes.push((len, id)));
            assert_eq!(prefixes, naive(token, true), "prefixes of token {id}");
            assert_eq!(suffixes, naive(token, false), "suffixes of token {id}");
        }
    }
}
