//! BPE training: learn merges from piece counts.
//!
//! The vocabulary starts with the 256 single bytes (ids 0..=255). Each step
//! merges the most frequent adjacent pair of tokens, counted over all pieces
//! weighted by their occurrences, into a new token with the next id.
//!
//! Tie rule (deterministic, documented for users): among equally frequent
//! pairs, the pair with the smaller left id wins, then the smaller right id.
//! Ids are bytes values and then merge order, so this prefers older tokens.
//!
//! Bookkeeping, as in the classic incremental algorithm: the count of every
//! pair, the list of pieces each pair occurs in, and a max-heap of pairs by
//! count. A merge rewrites only the pieces on its list and adjusts the counts
//! of the pairs around each occurrence. Heap entries are not updated in
//! place: an entry whose count is out of date is re-pushed with the current
//! count when it surfaces. Piece lists may hold pieces that no longer contain
//! the pair (they are skipped) and duplicates (removed before use).
//!
//! Cost: counting pairs is O(total piece length); each merge costs the length
//! of the pieces it touches plus O(log P) per changed pair.

use std::collections::BinaryHeap;

use rayon::prelude::*;
use rustc_hash::FxHashMap;

use super::{pair_key, BpeModel};
use crate::counting::PieceCounts;
use crate::error::{Error, Result};
use crate::pretokenize::Pattern;
use crate::progress::{Progress, Stage};

#[derive(Clone, Debug)]
pub struct TrainerSettings {
    /// Total size: 256 bytes + merges + special tokens.
    pub vocab_size: usize,
    /// Pairs seen fewer times than this are never merged.
    pub min_frequency: u64,
    /// Special tokens, given the ids after the learned tokens.
    pub special_tokens: Vec<String>,
    /// No token longer than this many bytes is learned.
    pub max_token_bytes: Option<usize>,
    pub pattern: Pattern,
}

impl TrainerSettings {
    pub fn validate(&self) -> Result<()> {
        let smallest = 256 + self.special_tokens.len();
        if self.vocab_size < smallest {
            return Err(Error::invalid(format!(
                "vocab_size {} is too small: it must be at least 256 (one token per byte) plus {} special token(s) = {smallest}",
                self.vocab_size,
                self.special_tokens.len()
            )));
        }
        if self.vocab_size > u32::MAX as usize / 2 {
            return Err(Error::invalid(format!(
                "vocab_size {} is too large",
                self.vocab_size
            )));
        }
        if self.max_token_bytes == Some(0) || self.max_token_bytes == Some(1) {
            return Err(Error::invalid("max_token_bytes must be at least 2"));
        }
        Ok(())
    }
}

/// A max-heap entry: higher count first, then smaller (left, right).
#[derive(PartialEq, Eq)]
struct Candidate {
    count: u64,
    pair: u64,
}

impl Ord for Candidate {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.count
            .cmp(&other.count)
            .then_with(|| other.pair.cmp(&self.pair))
    }
}

impl PartialOrd for Candidate {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

struct State {
    /// Each distinct piece as a sequence of token ids, and its count.
    words: Vec<Vec<u32>>,
    word_counts: Vec<u64>,
    pair_counts: FxHashMap<u64, i64>,
    /// Pair -> indices of the words it occurs in (maybe stale, duplicated).
    pair_words: FxHashMap<u64, Vec<u32>>,
    /// The bytes of every token so far, by id.
    tokens: Vec<Vec<u8>>,
    max_token_bytes: usize,
    heap: BinaryHeap<Candidate>,
}

/// Learns a model from piece counts.
pub fn train(
    counts: PieceCounts,
    settings: &TrainerSettings,
    progress: &Progress,
) -> Result<BpeModel> {
    settings.validate()?;
    if counts.is_empty() {
        return Err(Error::Corpus(
            "the corpus is empty: there is no text to learn from".to_owned(),
        ));
    }
    let target_tokens = settings.vocab_size - settings.special_tokens.len();
    let total_merges = (target_tokens - 256) as u64;

    let mut state = State::new(counts, settings.max_token_bytes.unwrap_or(usize::MAX));
    let mut merges: Vec<(u32, u32)> = Vec::with_capacity(total_merges as usize);

    progress.force(Stage::Merging, 0, total_merges)?;
    while state.tokens.len() < target_tokens {
        let Some(Candidate { count, pair }) = state.heap.pop() else {
            break;
        };
        let current = state.pair_counts.get(&pair).copied().unwrap_or(0);
        if current as u64 != count {
            if current > 0 {
                state.heap.push(Candidate {
                    count: current as u64,
                    pair,
                });
            }
            continue;
        }
        if count < settings.min_frequency.max(1) {
            break;
        }
        let (left, right) = ((pair >> 32) as u32, pair as u32);
        let new_id = state.tokens.len() as u32;
        let merged = [
            &state.tokens[left as usize][..],
            &state.tokens[right as usize][..],
        ]
        .concat();
        state.tokens.push(merged);
        merges.push((left, right));
        state.apply_merge(left, right, new_id);
        progress.update(Stage::Merging, merges.len() as u64, total_merges)?;
    }
    progress.force(Stage::Merging, merges.len() as u64, total_merges)?;

    let tokens = state.tokens;
    let first_special = tokens.len() as u32;
    let special = settings
        .special_tokens
        .iter()
        .enumerate()
        .map(|(i, text)| (text.clone(), first_special + i as u32))
        .collect();
    BpeModel::new(tokens, settings.pattern.clone(), special, Some(merges))
}

impl State {
    fn new(counts: PieceCounts, max_token_bytes: usize) -> Self {
        // Sorted by bytes, so that word indices (and everything after) do not
        // depend on hash map order.
        let mut pieces: Vec<(Vec<u8>, u64)> = counts.counts.into_iter().collect();
        pieces.par_sort_unstable_by(|a, b| a.0.cmp(&b.0));
        let (words, word_counts): (Vec<Vec<u32>>, Vec<u64>) = pieces
            .into_par_iter()
            .map(|(bytes, count)| (bytes.into_iter().map(u32::from).collect(), count))
            .unzip();

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

        let mut state = State {
            words,
            word_counts,
            pair_counts,
            pair_words,
            tokens: (0..=255u8).map(|b| vec![b]).collect(),
            max_token_bytes,
            heap: BinaryHeap::new(),
        };
        let candidates: Vec<Candidate> = state
            .pair_counts
            .iter()
            .filter(|&(&pair, _)| state.fits(pair))
            .map(|(&pair, &count)| Candidate {
                count: count as u64,
                pair,
            })
            .collect();
        state.heap = BinaryHeap::from(candidates);
        state
    }

    /// Whether the pair's merged token respects the length limit.
    fn fits(&self, pair: u64) -> bool {
        let (left, right) = ((pair >> 32) as usize, (pair as u32) as usize);
        self.tokens[left].len() + self.tokens[right].len() <= self.max_token_bytes
    }

    /// Replaces every occurrence of `left right` by `new_id` and updates the
    /// pair counts, piece lists and heap.
    fn apply_merge(&mut self, left: u32, right: u32, new_id: u32) {
        let pair = pair_key(left, right);
        let mut word_list = self.pair_words.remove(&pair).unwrap_or_default();
        word_list.sort_unstable();
        word_list.dedup();
        self.pair_counts.remove(&pair);

        // Count changes, weighted by word counts, and (pair, word) additions.
        let mut deltas: FxHashMap<u64, i64> = FxHashMap::default();
        let mut additions: Vec<(u64, u32)> = Vec::new();
        for &index in &word_list {
            let word = &mut self.words[index as usize];
            let count = self.word_counts[index as usize] as i64;
            merge_word(word, left, right, new_id, |key, delta| {
                *deltas.entry(key).or_insert(0) += delta * count;
                if delta > 0 {
                    additions.push((key, index));
                }
            });
        }

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
            } else if delta > 0 && self.fits(key) {
                self.heap.push(Candidate {
                    count: count as u64,
                    pair: key,
                });
            }
        }
        for (key, index) in additions {
            let list = self.pair_words.entry(key).or_default();
            if list.last() != Some(&index) {
                list.push(index);
            }
        }
    }
}

/// Merges the occurrences of `left right` in one word, left to right, and
/// reports each change of a pair count (+1 or -1 per occurrence).
fn merge_word(
    word: &mut Vec<u32>,
    left: u32,
    right: u32,
    new_id: u32,
    mut change: impl FnMut(u64, i64),
) {
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
        }
        i += 1;
    }
}
