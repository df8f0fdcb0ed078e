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
//!
//! Building: the nodes are visited breadth-first. A node `v` that is a
//! token fails by committing it. Otherwise `v` fails as its parent `p` does
//! (committing pops(p), reaching fail(p)), then follows failure links
//! `a1 = fail(p)`, `a2 = fail(a1)`, ... until its last byte can be read:
//! pops(v) = pops(p) + pops(a1) + ... + pops(ak). Each step ak -> fail(ak)
//! drops at least one byte of the text, and fail(v) has at most one byte
//! more than fail(p): as in Aho-Corasick, the steps of the nodes along a
//! key's path add up to at most its length, and the steps of all nodes to
//! at most the total key length.
//!
//! Memory must stay linear in the vocabulary too. Copying pops(v) into each
//! node would not: in a long token none of whose prefixes is a token (as a
//! 10,000-letter line of a `vocab.txt`), the node at depth d has a pop per
//! few bytes, O(L²) pops in all for a token of L bytes (441 MB for 10,000
//! letters). So a node keeps its list flat only when it is short
//! (`FLAT_MAX` tokens, a copy; bert-base-uncased's lists have at most 5); a
//! longer one is the list of its parts, the nodes `p, a1, ..., ak`, whose
//! own pops are expanded in turn, and with k = 0 (no step) it is the
//! parent's very list, shared. Stored per node: the parts, 1 + k, so all
//! the parts are bounded by the nodes plus the steps, and the flat lists by
//! `FLAT_MAX` per node: O(total key length) in all (about 40 bytes per byte
//! of a long token, the trie included).
//!
//! Encoding cost is unchanged: every list is non-empty (a node with a
//! failure link commits at least one token), and a list of parts has at
//! least two, so expanding one is a walk of a tree whose inner nodes have
//! two or more children and whose leaves are non-empty flat lists: fewer
//! inner nodes than leaves, fewer leaves than tokens. Expansion costs
//! O(tokens emitted), and a word still O(n).

use crate::trie::Trie;

const NONE: u32 = u32::MAX;
/// Leads the trie keys of continuation tokens.
const SUFFIX_MARK: u8 = 0xFF;
/// Pops of at most this many tokens are stored as a flat copy.
const FLAT_MAX: u32 = 8;
/// Marks `PopList::len` of a list of parts.
const PARTS: u32 = 1 << 31;

pub(crate) struct Matcher {
    trie: Trie,
    /// The node of the continuation prefix alone: what remains after a
    /// token when nothing of the next one has been read.
    suffix_root: u32,
    /// Per node: where the matcher goes when it cannot extend the text read
    /// so far (`NONE`: nowhere, the word is `[UNK]`).
    fail: Vec<u32>,
    /// Per node: the tokens committed on that failure.
    pops: PopLists,
}

impl Matcher {
    /// A matcher for `tokens` (`(text, id)`), continuation tokens being
    /// those that start with `prefix` and are longer.
    pub(crate) fn new<'t>(tokens: impl Iterator<Item = (&'t [u8], u32)>, prefix: &[u8]) -> Matcher {
        let tokens: Vec<(&[u8], u32)> = tokens.collect();
        // The keys of continuation tokens, one after the other.
        let mut suffix_keys = Vec::new();
        let mut suffix_ends = Vec::new();
        for &(token, id) in &tokens {
            if let Some(rest) = token.strip_prefix(prefix).filter(|rest| !rest.is_empty()) {
                suffix_keys.push(SUFFIX_MARK);
                suffix_keys.extend_from_slice(rest);
                suffix_ends.push((suffix_keys.len(), id));
            }
        }
        let mut start = 0;
        let suffixes = suffix_ends.iter().map(|&(end, id)| {
            let key = &suffix_keys[start..end];
            start = end;
            (key, id)
        });
        let trie = Trie::new(
            std::iter::once((&[SUFFIX_MARK][..], Trie::NO_VALUE))
                .chain(tokens.iter().copied())
                .chain(suffixes),
        );
        let suffix_root = trie
            .child(Trie::ROOT, SUFFIX_MARK)
            .expect("the continuation prefix has a node");

        let n = trie.len();
        let mut fail = vec![NONE; n];
        let mut pops = PopLists::new(n);
        // The nodes of pops(v): the parent, then the failure links followed.
        let mut parts = Vec::new();
        // The trie numbers nodes breadth-first, so every failure link
        // points to a node already done: a failure link leads to a node no
        // deeper.
        for parent in 0..n as u32 {
            for (byte, node) in trie.children(parent) {
                let v = node as usize;
                if let Some(id) = trie.value(node) {
                    // The text read is a token: greedy takes it whole.
                    fail[v] = suffix_root;
                    pops.set_token(node, id);
                    continue;
                }
                if parent == Trie::ROOT || fail[parent as usize] == NONE {
                    continue; // No token starts the text read: `[UNK]`.
                }
                // Fail as the parent does, then follow failure links until
                // the byte can be read.
                parts.clear();
                parts.push(parent);
                let mut at = fail[parent as usize];
                loop {
                    if let Some(next) = trie.child(at, byte) {
                        fail[v] = next;
                        pops.set_joined(node, &parts);
                        break;
                    }
                    if fail[at as usize] == NONE {
                        break;
                    }
                    parts.push(at);
                    at = fail[at as usize];
                }
            }
        }
        Matcher {
            trie,
            suffix_root,
            fail,
            pops: pops.finish(),
        }
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
        self.pops.append(node, out);
        true
    }
}

/// The pops of every node, stored in linear space (see the module doc).
struct PopLists {
    /// Per node: its list.
    lists: Vec<PopList>,
    /// The tokens of the flat lists.
    tokens: Vec<u32>,
    /// The parts of the other lists: nodes whose pops they concatenate.
    parts: Vec<u32>,
}

/// `len` tokens at `PopLists::tokens[start..]`, or, if `len` has the
/// `PARTS` bit, the pops of the nodes `PopLists::parts[start..]` one after
/// the other.
#[derive(Clone, Copy, Default)]
struct PopList {
    start: u32,
    len: u32,
}

impl PopLists {
    /// Empty lists for `n` nodes.
    fn new(n: usize) -> Self {
        PopLists {
            lists: vec![PopList::default(); n],
            tokens: Vec::new(),
            parts: Vec::new(),
        }
    }

    /// The pops of `node`: the token `id` alone.
    fn set_token(&mut self, node: u32, id: u32) {
        self.lists[node as usize] = PopList {
            start: self.tokens.len() as u32,
            len: 1,
        };
        self.tokens.push(id);
    }

    /// The pops of `node`: those of `parts` one after the other.
    fn set_joined(&mut self, node: u32, parts: &[u32]) {
        self.lists[node as usize] = if let [part] = parts {
            self.lists[*part as usize] // Shared, not copied.
        } else if let Some(len) = self.flat_len(parts) {
            let start = self.tokens.len() as u32;
            for &part in parts {
                let PopList { start, len } = self.lists[part as usize];
                self.tokens
                    .extend_from_within(start as usize..(start + len) as usize);
            }
            PopList { start, len }
        } else {
            let start = self.parts.len() as u32;
            self.parts.extend_from_slice(parts);
            PopList {
                start,
                len: PARTS | parts.len() as u32,
            }
        };
    }

    /// How many tokens the pops of `parts` hold, if they are flat lists
    /// with at most `FLAT_MAX` tokens in all. (A list is flat exactly when
    /// it holds at most `FLAT_MAX` tokens.)
    fn flat_len(&self, parts: &[u32]) -> Option<u32> {
        if parts.len() > FLAT_MAX as usize {
            return None; // Each part holds a token at least.
        }
        let mut total = 0;
        for &part in parts {
            let PopList { len, .. } = self.lists[part as usize];
            if len & PARTS != 0 {
                return None;
            }
            total += len;
        }
        (total <= FLAT_MAX).then_some(total)
    }

    /// The lists, built.
    fn finish(mut self) -> Self {
        self.tokens.shrink_to_fit();
        self.parts.shrink_to_fit();
        self
    }

    /// Appends the pops of `node` to `out`.
    #[inline(always)]
    fn append(&self, node: u32, out: &mut Vec<u32>) {
        let PopList { start, len } = self.lists[node as usize];
        if len & PARTS == 0 {
            out.extend_from_slice(&self.tokens[start as usize..(start + len) as usize]);
        } else {
            self.append_parts(start, len & !PARTS, out);
        }
    }

    /// Appends the pops of the nodes `parts[start..start + len]`. A loop
    /// over a stack of the parts to go, not recursion: lists nest as deep
    /// as the longest token is long.
    #[cold]
    #[inline(never)]
    fn append_parts(&self, start: u32, len: u32, out: &mut Vec<u32>) {
        let parts = |start: u32, len: u32| {
            self.parts[start as usize..(start + len) as usize]
                .iter()
                .rev()
        };
        let mut to_go: Vec<u32> = parts(start, len).copied().collect();
        while let Some(node) = to_go.pop() {
            let PopList { start, len } = self.lists[node as usize];
            if len & PARTS == 0 {
                out.extend_from_slice(&self.tokens[start as usize..(start + len) as usize]);
            } else {
                to_go.extend(parts(start, len & !PARTS));
            }
        }
    }

    /// How many entries the lists hold in all.
    #[cfg(test)]
    fn entries(&self) -> usize {
        self.lists.len() + self.tokens.len() + self.parts.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// BERT's rule, plainly: at each position the longest token that starts
    /// there (a continuation token after the first), trying every length a
    /// token has, longest first. O(n × token lengths) lookups.
    fn greedy(vocab: &[&str], word: &str, unk: u32) -> Vec<u32> {
        let id = |s: &str| vocab.iter().position(|t| *t == s).map(|i| i as u32);
        let mut lengths: Vec<usize> = vocab
            .iter()
            .flat_map(|t| [t.len(), t.len().saturating_sub(2)])
            .filter(|&len| len > 0)
            .collect();
        lengths.sort_unstable_by(|a, b| b.cmp(a));
        lengths.dedup();
        let mut out = Vec::new();
        let mut start = 0;
        while start < word.len() {
            let found = lengths.iter().find_map(|&len| {
                let end = start + len;
                let piece = word.get(start..end)?;
                let i = if start > 0 {
                    id(&format!("##{piece}"))
                } else {
                    id(piece)
                }?;
                Some((i, end))
            });
            let Some((i, end)) = found else {
                return vec![unk];
            };
            out.push(i);
            start = end;
        }
        out
    }

    fn matcher(vocab: &[&str]) -> Matcher {
        Matcher::new(
            vocab
                .iter()
                .enumerate()
                .map(|(i, t)| (t.as_bytes(), i as u32)),
            b"##",
        )
    }

    /// A pseudo-random number generator for the tests (an LCG).
    fn next(seed: &mut u64) -> u64 {
        *seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        *seed >> 33
    }

    #[test]
    fn equals_the_quadratic_loop() {
        let vocab = [
            "[UNK]", "a", "ab", "abcd", "b", "##b", "##c", "##bc", "##d", "c", "é", "##é", "x",
            "##", "####", "##x", "xé", "##éa",
        ];
        let matcher = matcher(&vocab);
        let alphabet = ["a", "b", "c", "d", "é", "x", "#"];
        let mut seed = 7u64;
        for _ in 0..20_000 {
            let len = 1 + next(&mut seed) as usize % 8;
            let word: String = (0..len)
                .map(|_| alphabet[next(&mut seed) as usize % alphabet.len()])
                .collect();
            let mut out = Vec::new();
            matcher.encode_word(word.as_bytes(), 0, &mut out);
            assert_eq!(out, greedy(&vocab, &word, 0), "{word}");
        }
    }

    /// Long tokens none of whose prefixes are tokens: the failures deep in
    /// them commit hundreds of tokens, from lists of parts nested hundreds
    /// deep.
    #[test]
    fn long_tokens_equal_the_quadratic_loop() {
        let long = "ab".repeat(150);
        let long_continuation = format!("##{}", "ba".repeat(150));
        let long_odd = format!("{}c", "ab".repeat(60));
        let vocab = [
            "[UNK]",
            "a",
            "##a",
            "b",
            "##b",
            "##c",
            "ca",
            &long,
            &long_continuation,
            &long_odd,
            "##bab",
        ];
        let matcher = matcher(&vocab);
        let mut seed = 11u64;
        for _ in 0..3_000 {
            // Runs of "abab..." of any length, and a few other letters.
            let mut word = String::new();
            for _ in 0..1 + next(&mut seed) % 3 {
                let run = next(&mut seed) as usize % 320;
                let from = next(&mut seed) as usize % 2;
                word.push_str(&"ab".repeat(161)[from..from + run]);
                let letters = next(&mut seed) as usize % 3;
                for _ in 0..letters {
                    word.push(['a', 'b', 'c', 'd'][next(&mut seed) as usize % 4]);
                }
            }
            if word.is_empty() {
                continue; // Words are never empty.
            }
            let mut out = Vec::new();
            matcher.encode_word(word.as_bytes(), 0, &mut out);
            assert_eq!(out, greedy(&vocab, &word, 0), "{word}");
        }
    }

    /// The failure transitions take space linear in the vocabulary, where
    /// a flat copy of each node's pops would take space quadratic in the
    /// longest token; expanding lists nested as deep as a long token needs
    /// no recursion.
    #[test]
    fn long_tokens_take_linear_space() {
        for len in [1_000, 10_000, 100_000] {
            let long = "ab".repeat(len / 2);
            let long_continuation = format!("##{}", "ba".repeat(len / 2));
            let vocab = ["[UNK]", "a", "##a", "b", "##b", &long, &long_continuation];
            let matcher = matcher(&vocab);
            let key_bytes: usize = vocab.iter().map(|t| t.len()).sum();
            let entries = matcher.fail.len() + matcher.pops.entries();
            assert!(entries <= 6 * key_bytes, "{len}: {entries} entries");

            // Deep in the long token, then a letter it does not have: the
            // failure commits a token per letter.
            let mut word = long[..len - 1].to_owned();
            word.push('a');
            let mut out = Vec::new();
            assert!(matcher.encode_word(word.as_bytes(), 0, &mut out));
            let mut expected: Vec<u32> = (0..len - 1)
                .map(|i| match (i, i % 2) {
                    (0, _) => 1,
                    (_, 0) => 2,
                    _ => 4,
                })
                .collect();
            expected.push(2);
            assert_eq!(out, expected);
            out.clear();
            assert!(matcher.encode_word(long.as_bytes(), 0, &mut out));
            assert_eq!(out, [5]);
        }
    }
}
