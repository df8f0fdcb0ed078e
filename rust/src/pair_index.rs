//! The bookkeeping shared by the merge trainers (BPE, WordPiece): the
//! distinct words of a corpus as sequences of symbol ids, with their counts,
//! the count of every adjacent pair of symbols (weighted by word counts), and
//! the list of words each pair occurs in.
//!
//! Merging a pair rewrites only the words on its list and adjusts the counts
//! of the pairs around each occurrence, as in the classic incremental
//! algorithm. Word lists may hold words that no longer contain the pair and
//! duplicates; both are dropped when the list is used.
//!
//! Cost: building is O(total word length), in parallel; a merge costs the
//! length of the words it touches.

use rayon::prelude::*;
use rustc_hash::FxHashMap;

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
    pub words: Vec<Vec<u32>>,
    pub word_counts: Vec<u64>,
    pub pair_counts: FxHashMap<u64, i64>,
    /// Pair -> indices of the words it occurs in (maybe stale, duplicated).
    pub pair_words: FxHashMap<u64, Vec<u32>>,
}

impl PairIndex {
    /// Counts the pairs of `words` (each with its count), on all cores.
    pub fn new(words: Vec<Vec<u32>>, word_counts: Vec<u64>) -> Self {
        let chunk = (words.len() / (4 * rayon::current_num_threads())).max(1024);
        let (pair_counts, pair_words) = words
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
        PairIndex {
            words,
            word_counts,
            pair_counts,
            pair_words,
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

/// Merges the occurrences of `left right` in one word, left to right,
/// reports each change of a pair count (+1 or -1 per occurrence), and returns
/// how many it merged.
fn merge_word(
    word: &mut Vec<u32>,
    left: u32,
    right: u32,
    new_id: u32,
    mut change: impl FnMut(u64, i64),
) -> u64 {
    let mut merged = 0;
    let mut i = 0;
    while i + 1 < word.len() {
        if word[i] == left && word[i + 1] == right {
            if i > 0 {
                change(pair_key(word[i - 1], left), -1);
                change(pair_key(word[i - 1], new_id), 1);
            }
            if i + 2 < word.len() {
                change(pair_key(right, word[i + 2]), -1);
                change(pair_key(new_id, word[i + 2]), 1);
            }
            word[i] = new_id;
            word.remove(i + 1);
            merged += 1;
        }
        i += 1;
    }
    merged
}
