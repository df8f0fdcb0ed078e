//! Greedy longest-match-first WordPiece in linear time: LinMaxMatch, after
//! Song et al. 2021, "Fast WordPiece Tokenization".
//!
//! BERT's rule: take the longest token that starts the word, then the
//! longest continuation token (`##...`) that starts the rest, and so on; if
//! no token fits somewhere, the whole word is `[UNK]`. The usual
//! implementation tries every shorter substring after each failure, O(n²)
//! in the word. Here every vocabulary string is in one trie, word-initial
//! tokens as they are and continuation tokens, without their prefix, under
//! the byte `SUFFIX_MARK` (never in UTF-8 text). The matcher walks the word
//! once; where the trie has no way on, a precomputed failure transition
//! tells which tokens the greedy rule has committed to ("pops") and where in
//! the trie the rest of the text already read stands (the "failure link"),
//! exactly as Aho-Corasick does for substring search. Each byte is read
//! once and each failure emits at least one token: O(n) per word, whatever
//! the vocabulary.

use crate::trie::Trie;

const NONE: u32 = u32::MAX;
/// Leads the trie keys of continuation tokens.
const SUFFIX_MARK: u8 = 0xFF;

pub(crate) struct Matcher {
    trie: Trie,
    /// The node of the continuation prefix alone: what remains after a
    /// token when nothing of the next one has been read.
    suffix_root: u32,
    /// Per node: where the matcher goes when it cannot extend the text read
    /// so far (`NONE`: nowhere, the word is `[UNK]`).
    fail: Vec<u32>,
    /// Per node: the tokens committed on that failure, as
    /// `pops[pop_start[v]..pop_start[v + 1]]`.
    pop_start: Vec<u32>,
    pops: Vec<u32>,
}

impl Matcher {
    /// A matcher for `tokens` (`(text, id)`), continuation tokens being
    /// those that start with `prefix` and are longer.
    pub(crate) fn new<'t>(tokens: impl Iterator<Item = (&'t [u8], u32)>, prefix: &[u8]) -> Matcher {
        let mut keys: Vec<(Vec<u8>, u32)> = vec![(vec![SUFFIX_MARK], Trie::NO_VALUE)];
        for (token, id) in tokens {
            if let Some(rest) = token.strip_prefix(prefix).filter(|rest| !rest.is_empty()) {
                let mut key = vec![SUFFIX_MARK];
                key.extend_from_slice(rest);
                keys.push((key, id));
            }
            keys.push((token.to_vec(), id));
        }
        let trie = Trie::new(keys.iter().map(|(key, id)| (key.as_slice(), *id)));
        let suffix_root = trie
            .child(Trie::ROOT, SUFFIX_MARK)
            .expect("the continuation prefix has a node");

        // Breadth-first, so that every failure link points to a node whose
        // own link is known: a failure link leads to a node no deeper.
        let n = trie.len();
        let mut fail = vec![NONE; n];
        let mut pops: Vec<Vec<u32>> = vec![Vec::new(); n];
        let mut queue = std::collections::VecDeque::from([Trie::ROOT]);
        while let Some(parent) = queue.pop_front() {
            for (byte, node) in trie.children(parent) {
                queue.push_back(node);
                let v = node as usize;
                if let Some(id) = trie.value(node) {
                    // The text read is a token: greedy takes it whole.
                    fail[v] = suffix_root;
                    pops[v] = vec![id];
                    continue;
                }
                if parent == Trie::ROOT || fail[parent as usize] == NONE {
                    continue; // No token starts the text read: `[UNK]`.
                }
                // Fail as the parent does, then follow failure links until
                // the byte can be read.
                let mut committed = pops[parent as usize].clone();
                let mut at = fail[parent as usize];
                loop {
                    if let Some(next) = trie.child(at, byte) {
                        fail[v] = next;
                        pops[v] = committed;
                        break;
                    }
                    if fail[at as usize] == NONE {
                        break;
                    }
                    committed.extend_from_slice(&pops[at as usize]);
                    at = fail[at as usize];
                }
            }
        }
        let mut pop_start = Vec::with_capacity(n + 1);
        pop_start.push(0);
        let mut flat = Vec::new();
        for list in &pops {
            flat.extend_from_slice(list);
            pop_start.push(flat.len() as u32);
        }
        Matcher {
            trie,
            suffix_root,
            fail,
            pop_start,
            pops: flat,
        }
    }

    #[inline(always)]
    fn pops(&self, node: u32) -> &[u32] {
        let node = node as usize;
        &self.pops[self.pop_start[node] as usize..self.pop_start[node + 1] as usize]
    }

    /// Appends the tokens of `word` to `out`, or `unk` alone if the greedy
    /// rule finds no token somewhere. Returns whether the word was matched.
    #[inline]
    pub(crate) fn encode_word(&self, word: &[u8], unk: u32, out: &mut Vec<u32>) -> bool {
        let start = out.len();
        let mut node = Trie::ROOT;
        for &byte in word {
            loop {
                if let Some(next) = self.trie.child(node, byte) {
                    node = next;
                    break;
                }
                if !self.fail_at(node, out) {
                    out.truncate(start);
                    out.push(unk);
                    return false;
                }
                node = self.fail[node as usize];
            }
        }
        // The end of the word: commit what remains.
        while node != self.suffix_root {
            if !self.fail_at(node, out) {
                out.truncate(start);
                out.push(unk);
                return false;
            }
            node = self.fail[node as usize];
        }
        true
    }

    /// Commits the pops of `node`; false if it has no failure link.
    #[inline(always)]
    fn fail_at(&self, node: u32, out: &mut Vec<u32>) -> bool {
        if self.fail[node as usize] == NONE {
            return false;
        }
        out.extend_from_slice(self.pops(node));
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// BERT's own loop, for comparison: the longest token at each position.
    fn greedy(vocab: &[&str], word: &str, unk: u32) -> Vec<u32> {
        let id = |s: &str| vocab.iter().position(|t| *t == s).map(|i| i as u32);
        let mut out = Vec::new();
        let mut start = 0;
        while start < word.len() {
            let mut end = word.len();
            let found = loop {
                if end <= start {
                    break None;
                }
                let piece = &word[start..end];
                let key = if start > 0 {
                    format!("##{piece}")
                } else {
                    piece.to_owned()
                };
                if let Some(i) = id(&key) {
                    break Some(i);
                }
                end -= word[..end].chars().next_back().unwrap().len_utf8();
            };
            match found {
                Some(i) => out.push(i),
                None => return vec![unk],
            }
            start = end;
        }
        out
    }

    #[test]
    fn equals_the_quadratic_loop() {
        let vocab = [
            "[UNK]", "a", "ab", "abcd", "b", "##b", "##c", "##bc", "##d", "c", "é", "##é", "x",
            "##", "####", "##x", "xé", "##éa",
        ];
        let matcher = Matcher::new(
            vocab
                .iter()
                .enumerate()
                .map(|(i, t)| (t.as_bytes(), i as u32)),
            b"##",
        );
        let alphabet = ["a", "b", "c", "d", "é", "x", "#"];
        let mut seed = 7u64;
        for _ in 0..20_000 {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let len = 1 + (seed >> 60) as usize % 8;
            let word: String = (0..len)
                .map(|i| alphabet[(seed >> (4 * i + 8)) as usize % alphabet.len()])
                .collect();
            let mut out = Vec::new();
            matcher.encode_word(word.as_bytes(), 0, &mut out);
            assert_eq!(out, greedy(&vocab, &word, 0), "{word}");
        }
    }
}
