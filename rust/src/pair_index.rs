//! The bookkeeping shared by the merge trainers (BPE, WordPiece): the
//! distinct words of a corpus as sequences of symbol ids, with their counts,
//! the count of every adjacent pair of symbols (weighted by word counts), and
//! where each pair occurs.
//!
//! Merging a pair adjusts the counts of the pairs around each occurrence, as
//! in the classic incremental algorithm, and must cost in proportion to the
//! occurrences it replaces, however the text was cut into words. Two kinds
//! of words, two ways:
//! - short words (fewer than `LONG_WORD` symbols: nearly every word that a
//!   pre-tokenizer makes): each pair lists the words it occurs in, and a
//!   merge rewrites those words in one pass each. Cheap and compact, since a
//!   short word costs little to rescan.
//! - long words (one line of megabytes with `pattern="none"`, long lines):
//!   rescanning a word at every merge that touches it would cost its length
//!   times the number of merges (a 2 MB line took 45 s). Their symbols are
//!   a linked list, and each pair lists the positions of its occurrences;
//!   a merge visits those positions only, in text order, so overlapping
//!   occurrences (`a a a`) merge left to right as in a short word.
//!
//! Lists may hold entries that no longer hold the pair, and duplicates;
//! both are dropped when the list is used.
//!
//! Cost: building is O(total word length), in parallel for short words; a
//! merge costs the length of the short words and the number of long-word
//! occurrences it touches.

use rayon::prelude::*;
use rustc_hash::FxHashMap;

/// Words of at least this many symbols are long (see the module docs).
const LONG_WORD: usize = 64;

/// A pair of symbol ids as one key.
#[inline(always)]
pub(crate) fn pair_key(left: u32, right: u32) -> u64 {
    ((left as u64) << 32) | right as u64
}

/// The two ids of a pair key.
#[inline(always)]
pub(crate) fn pair_ids(key: u64) -> (u32, u32) {
    ((key >> 32) as u32, key as u32)
}

pub(crate) struct PairIndex {
    /// The short words; a long word's entry is empty (it lives in `long`).
    words: Vec<Vec<u32>>,
    word_counts: Vec<u64>,
    pub pair_counts: FxHashMap<u64, i64>,
    /// Pair -> indices of the short words it occurs in (maybe stale, duplicated).
    pair_words: FxHashMap<u64, Vec<u32>>,
    long: LongWords,
}

/// The long words, one after another, as linked lists of symbols.
#[derive(Default)]
struct LongWords {
    /// The symbol at each position; `GONE` once merged into the one before.
    symbols: Vec<u32>,
    /// The next and previous live positions in the same word (`END`: none).
    next: Vec<u32>,
    prev: Vec<u32>,
    /// Where each long word starts, and its index among all words (for its
    /// count), in position order.
    starts: Vec<u32>,
    word_index: Vec<u32>,
    /// Pair -> positions of its left symbol (maybe stale, duplicated).
    pair_positions: FxHashMap<u64, Vec<u32>>,
}

const GONE: u32 = u32::MAX;
const END: u32 = u32::MAX;

impl PairIndex {
    /// Counts the pairs of `words` (each with its count), on all cores.
    pub fn new(mut words: Vec<Vec<u32>>, word_counts: Vec<u64>) -> Self {
        let mut long = LongWords::default();
        for (index, word) in words.iter_mut().enumerate() {
            if word.len() >= LONG_WORD {
                long.push(index as u32, &std::mem::take(word));
            }
        }
        let chunk = (words.len() / (4 * rayon::current_num_threads())).max(1024);
        let (mut pair_counts, pair_words) = words
            .par_chunks(chunk)
            .enumerate()
            .map(|(c, chunk_words)| {
                let mut counts: FxHashMap<u64, i64> = FxHashMap::default();
                let mut where_: FxHashMap<u64, Vec<u32>> = FxHashMap::default();
                for (i, word) in chunk_words.iter().enumerate() {
                    let index = (c * chunk + i) as u32;
                    let count = word_counts[index as usize] as i64;
                    for w in word.windows(2) {
                        let key = pair_key(w[0], w[1]);
                        *counts.entry(key).or_insert(0) += count;
                        let list = where_.entry(key).or_default();
                        if list.last() != Some(&index) {
                            list.push(index);
                        }
                    }
                }
                (counts, where_)
            })
            .reduce(
                || (FxHashMap::default(), FxHashMap::default()),
                |(mut counts_a, mut where_a), (counts_b, where_b)| {
                    for (key, count) in counts_b {
                        *counts_a.entry(key).or_insert(0) += count;
                    }
                    for (key, list) in where_b {
                        where_a.entry(key).or_insert_with(Vec::new).extend(list);
                    }
                    (counts_a, where_a)
                },
            );
        for (key, positions) in &long.pair_positions {
            let weight: i64 = positions
                .iter()
                .map(|&p| word_counts[long.word_of(p) as usize] as i64)
                .sum();
            *pair_counts.entry(*key).or_insert(0) += weight;
        }
        PairIndex {
            words,
            word_counts,
            pair_counts,
            pair_words,
            long,
        }
    }

    /// The current count of a pair (0 if it occurs nowhere).
    pub fn count(&self, pair: u64) -> u64 {
        self.pair_counts.get(&pair).copied().unwrap_or(0) as u64
    }

    /// Replaces every occurrence of `left right` by `new_id`, left to right
    /// in each word, and calls `changed(pair, new count, change)` for every
    /// other pair whose count changed. Returns the number of occurrences
    /// replaced, weighted by word counts: less than the pair's count when
    /// `left == right` and occurrences overlap (`a a a` makes one `aa`).
    pub fn merge(
        &mut self,
        left: u32,
        right: u32,
        new_id: u32,
        mut changed: impl FnMut(u64, i64, i64),
    ) -> u64 {
        let pair = pair_key(left, right);
        let mut word_list = self.pair_words.remove(&pair).unwrap_or_default();
        word_list.sort_unstable();
        word_list.dedup();
        self.pair_counts.remove(&pair);

        // Count changes, weighted by word counts, and (pair, word) additions.
        let mut deltas: FxHashMap<u64, i64> = FxHashMap::default();
        let mut additions: Vec<(u64, u32)> = Vec::new();
        let mut replaced = 0;
        for &index in &word_list {
            let word = &mut self.words[index as usize];
            let count = self.word_counts[index as usize];
            let merged = merge_word(word, left, right, new_id, |key, delta| {
                *deltas.entry(key).or_insert(0) += delta * count as i64;
                if delta > 0 {
                    additions.push((key, index));
                }
            });
            replaced += merged * count;
        }
        replaced += self
            .long
            .merge(left, right, new_id, &self.word_counts, &mut deltas);
        // In key order, so that callers see changes in a fixed order.
        let mut deltas: Vec<(u64, i64)> = deltas.into_iter().collect();
        deltas.sort_unstable();
        for (key, delta) in deltas {
            if key == pair || delta == 0 {
                continue;
            }
            let count = self.pair_counts.entry(key).or_insert(0);
            *count += delta;
            let count = *count;
            debug_assert!(count >= 0);
            if count <= 0 {
                self.pair_counts.remove(&key);
            }
            changed(key, count, delta);
        }
        for (key, index) in additions {
            let list = self.pair_words.entry(key).or_default();
            if list.last() != Some(&index) {
                list.push(index);
            }
        }
        replaced
    }
}

impl LongWords {
    /// Appends a long word (`index` among all words).
    fn push(&mut self, index: u32, word: &[u32]) {
        let start = self.symbols.len() as u32;
        self.starts.push(start);
        self.word_index.push(index);
        let n = word.len() as u32;
        self.symbols.extend_from_slice(word);
        self.next
            .extend((start + 1..start + n).chain(std::iter::once(END)));
        self.prev
            .extend(std::iter::once(END).chain(start..start + n - 1));
        for (i, w) in word.windows(2).enumerate() {
            self.pair_positions
                .entry(pair_key(w[0], w[1]))
                .or_default()
                .push(start + i as u32);
        }
    }

    /// The index (among all words) of the word at `position`.
    fn word_of(&self, position: u32) -> u32 {
        let at = self.starts.partition_point(|&start| start <= position) - 1;
        self.word_index[at]
    }

    /// Merges the occurrences of `left right` in the long words, adds the
    /// changes of pair counts (weighted) to `deltas`, and returns how many
    /// it merged (weighted).
    fn merge(
        &mut self,
        left: u32,
        right: u32,
        new_id: u32,
        word_counts: &[u64],
        deltas: &mut FxHashMap<u64, i64>,
    ) -> u64 {
        let Some(mut positions) = self.pair_positions.remove(&pair_key(left, right)) else {
            return 0;
        };
        // Text order: overlapping occurrences merge left to right.
        positions.sort_unstable();
        positions.dedup();
        let mut replaced = 0;
        for at in positions {
            let second = self.next[at as usize];
            if self.symbols[at as usize] != left
                || second == END
                || self.symbols[second as usize] != right
            {
                continue; // Merged away since it was listed.
            }
            let count = word_counts[self.word_of(at) as usize] as i64;
            let mut change = |key: u64, delta: i64| {
                *deltas.entry(key).or_insert(0) += delta * count;
            };
            let before = self.prev[at as usize];
            if before != END {
                let symbol = self.symbols[before as usize];
                change(pair_key(symbol, left), -1);
                change(pair_key(symbol, new_id), 1);
                self.pair_positions
                    .entry(pair_key(symbol, new_id))
                    .or_default()
                    .push(before);
            }
            let after = self.next[second as usize];
            if after != END {
                let symbol = self.symbols[after as usize];
                change(pair_key(right, symbol), -1);
                change(pair_key(new_id, symbol), 1);
                self.pair_positions
                    .entry(pair_key(new_id, symbol))
                    .or_default()
                    .push(at);
                self.prev[after as usize] = at;
            }
            self.symbols[at as usize] = new_id;
            self.symbols[second as usize] = GONE;
            self.next[at as usize] = after;
            replaced += count as u64;
        }
        replaced
    }
}

/// Merges the occurrences of `left right` in one word, left to right, in one
/// pass, reports each change of a pair count (+1 or -1 per occurrence), and
/// returns how many it merged.
fn merge_word(
    word: &mut Vec<u32>,
    left: u32,
    right: u32,
    new_id: u32,
    mut change: impl FnMut(u64, i64),
) -> u64 {
    let n = word.len();
    let mut merged = 0;
    // The merged word is written over the word as it is read.
    let (mut read, mut write) = (0, 0);
    while read < n {
        if read + 1 < n && word[read] == left && word[read + 1] == right {
            if write > 0 {
                change(pair_key(word[write - 1], left), -1);
                change(pair_key(word[write - 1], new_id), 1);
            }
            if read + 2 < n {
                change(pair_key(right, word[read + 2]), -1);
                change(pair_key(new_id, word[read + 2]), 1);
            }
            word[write] = new_id;
            read += 2;
            merged += 1;
        } else {
            word[write] = word[read];
            read += 1;
        }
        write += 1;
    }
    word.truncate(write);
    merged
}

#[cfg(test)]
mod tests {
    use super::*;

    impl PairIndex {
        /// Every word as it stands now, long ones read off their lists.
        fn current_words(&self) -> Vec<Vec<u32>> {
            let mut words = self.words.clone();
            for (&start, &index) in self.long.starts.iter().zip(&self.long.word_index) {
                let mut word = Vec::new();
                let mut at = start;
                while at != END {
                    word.push(self.long.symbols[at as usize]);
                    at = self.long.next[at as usize];
                }
                words[index as usize] = word;
            }
            words
        }
    }

    /// The pair counts of `words` from scratch.
    fn recount(words: &[Vec<u32>], counts: &[u64]) -> FxHashMap<u64, i64> {
        let mut pairs = FxHashMap::default();
        for (word, &count) in words.iter().zip(counts) {
            for w in word.windows(2) {
                *pairs.entry(pair_key(w[0], w[1])).or_insert(0) += count as i64;
            }
        }
        pairs
    }

    /// The plain way: rebuild each word, merging left to right.
    fn naive_merge(word: &[u32], left: u32, right: u32, new_id: u32) -> (Vec<u32>, u64) {
        let (mut out, mut merged, mut i) = (Vec::new(), 0, 0);
        while i < word.len() {
            if i + 1 < word.len() && word[i] == left && word[i + 1] == right {
                out.push(new_id);
                merged += 1;
                i += 2;
            } else {
                out.push(word[i]);
                i += 1;
            }
        }
        (out, merged)
    }

    #[test]
    fn merges_equal_the_plain_way_on_short_and_long_words() {
        let mut seed = 0x2545_F491_4F6C_DD1Du64;
        let mut next = move |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        // Words over three symbols (runs like `a a a` are frequent), short
        // and long, some repeated (counts above 1).
        let lengths = [1, 2, 3, 5, 8, 63, 64, 65, 200, 3000];
        let mut words: Vec<Vec<u32>> = (0..60)
            .map(|i| {
                (0..lengths[i % lengths.len()])
                    .map(|_| next(3) as u32)
                    .collect()
            })
            .collect();
        let counts: Vec<u64> = (0..words.len()).map(|_| 1 + next(3)).collect();
        let mut index = PairIndex::new(words.clone(), counts.clone());
        assert_eq!(index.pair_counts, recount(&words, &counts));
        for new_id in 3..60u32 {
            // The most frequent pair, smallest key on ties.
            let Some((&pair, _)) = index
                .pair_counts
                .iter()
                .max_by_key(|&(&k, &c)| (c, std::cmp::Reverse(k)))
            else {
                break;
            };
            let (left, right) = pair_ids(pair);
            let mut expected_changes = Vec::new();
            let replaced = index.merge(left, right, new_id, |key, count, delta| {
                expected_changes.push((key, count, delta));
            });
            let mut naive_replaced = 0;
            for (word, count) in words.iter_mut().zip(&counts) {
                let (merged, n) = naive_merge(word, left, right, new_id);
                *word = merged;
                naive_replaced += n * count;
            }
            assert_eq!(replaced, naive_replaced, "merge {new_id}");
            assert_eq!(index.current_words(), words, "merge {new_id}");
            let expected = recount(&words, &counts);
            assert_eq!(index.pair_counts, expected, "merge {new_id}");
            // Every reported change is the pair's new count.
            for (key, count, _) in expected_changes {
                assert_eq!(
                    count,
                    expected.get(&key).copied().unwrap_or(0),
                    "merge {new_id}"
                );
            }
        }
    }
}
