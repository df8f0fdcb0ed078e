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
//! Bookkeeping: the pair counts and word lists of `pair_index`, and a
//! max-heap of pairs by count. Heap entries are not updated in place: an
//! entry whose count is out of date is re-pushed with the current count when
//! it surfaces.
//!
//! Speed: counting pieces (`counting`) and indexing them (`pair_index`)
//! run on all cores, and so do the early merges, which rewrite many pieces
//! (`pair_index`). The merge loop itself is serial, since each merge
//! depends on the counts the last one left; it is what limits training on
//! many cores, so it is kept lean:
//! - the pieces are sorted first, so that pieces which share a start
//!   (" the", " them", " then") lie together and a merge reaches fewer
//!   parts of memory;
//! - the heap is kept small. A pair's count only falls once its newer token
//!   is made; so a pair counted fewer than `min_frequency` times is no
//!   candidate at all (it could never be merged), and a pair counted far
//!   less than the best waits in a plain list (most pairs made late are
//!   rare, and never merged) until the heap runs dry (`Candidates`);
//! - the pieces and the index are freed on a thread of their own.
//!
//! Cost: counting pairs is O(total piece length); each merge costs the length
//! of the pieces it touches plus O(log P) per changed pair.

use std::collections::BinaryHeap;

use super::BpeModel;
use crate::counting::PieceCounts;
use crate::error::{Error, Result};
use crate::pair_index::{drop_in_background, pair_ids, PairIndex};
use crate::progress::{Progress, Stage};
use crate::text::pattern::Pattern;

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
pub(super) struct Candidate {
    pub(super) count: u64,
    pub(super) pair: u64,
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

/// The pairs that could be merged, most frequent first: those counted
/// `floor` times or more in a heap, the others waiting in a list. Every
/// entry's count is at least its pair's count now (it may be out of date,
/// never too low), so the best in the heap beats every waiting pair.
pub(super) struct Candidates {
    heap: BinaryHeap<Candidate>,
    waiting: Vec<Candidate>,
    floor: u64,
    /// `min_frequency`, at least 1.
    min_count: u64,
    /// The longest token that may be made, in `measure`'s units.
    max_token_len: usize,
    measure: Measure,
}

/// What a token's length limit counts: its bytes (byte-level BPE) or its
/// characters (SentencePiece-style BPE, whose tokens are UTF-8 text).
#[derive(Clone, Copy)]
pub(super) enum Measure {
    Bytes,
    Chars,
}

impl Measure {
    #[inline]
    fn len(self, token: &[u8]) -> usize {
        match self {
            Measure::Bytes => token.len(),
            Measure::Chars => token.iter().filter(|&&b| b & 0xC0 != 0x80).count(),
        }
    }
}

/// When the heap runs dry, the waiting pairs counted at least
/// 1/`HEAP_SPAN` as often as the best of them move into it.
const HEAP_SPAN: u64 = 4;

impl Candidates {
    pub(super) fn new(min_count: u64, max_token_len: usize, measure: Measure) -> Self {
        Candidates {
            heap: BinaryHeap::new(),
            waiting: Vec::new(),
            floor: u64::MAX,
            min_count,
            max_token_len,
            measure,
        }
    }

    /// Adds a pair with its count if it could be merged: counted often
    /// enough, and its merged token (of `tokens`) within the length limit.
    pub(super) fn push(&mut self, tokens: &[Vec<u8>], pair: u64, count: u64) {
        let (left, right) = pair_ids(pair);
        let len = |id: u32| self.measure.len(&tokens[id as usize]);
        if count < self.min_count || len(left) + len(right) > self.max_token_len {
            return;
        }
        let candidate = Candidate { count, pair };
        if count >= self.floor {
            self.heap.push(candidate);
        } else {
            self.waiting.push(candidate);
        }
    }

    /// Starts afresh from `pairs` with their counts.
    pub(super) fn fill(&mut self, tokens: &[Vec<u8>], pairs: impl Iterator<Item = (u64, u64)>) {
        self.heap.clear();
        self.waiting.clear();
        self.floor = u64::MAX;
        for (pair, count) in pairs {
            self.push(tokens, pair, count);
        }
    }

    /// Takes the best entry (which may be out of date).
    pub(super) fn pop(&mut self) -> Option<Candidate> {
        if self.heap.is_empty() {
            let best = self.waiting.iter().map(|c| c.count).max()?;
            self.floor = best / HEAP_SPAN;
            let floor = self.floor;
            let (hot, waiting) = std::mem::take(&mut self.waiting)
                .into_iter()
                .partition(|c| c.count >= floor);
            self.heap = BinaryHeap::from(hot);
            self.waiting = waiting;
        }
        self.heap.pop()
    }
}

struct State {
    /// Each distinct piece as a sequence of token ids, and its pairs.
    index: PairIndex,
    /// The bytes of every token so far, by id.
    tokens: Vec<Vec<u8>>,
    candidates: Candidates,
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

    let candidates = Candidates::new(
        settings.min_frequency.max(1),
        settings.max_token_bytes.unwrap_or(usize::MAX),
        Measure::Bytes,
    );
    let state = State::new(counts, candidates)?;
    let (tokens, merges) = state.learn(total_merges, progress)?;
    model(tokens, merges, settings)
}

/// The model of learned `tokens` and `merges`, with the special tokens of
/// `settings` given the ids after them.
pub(super) fn model(
    tokens: Vec<Vec<u8>>,
    merges: Vec<(u32, u32)>,
    settings: &TrainerSettings,
) -> Result<BpeModel> {
    let first_special = tokens.len() as u32;
    let special = settings
        .special_tokens
        .iter()
        .enumerate()
        .map(|(i, text)| (text.clone(), first_special + i as u32))
        .collect();
    BpeModel::new(tokens, settings.pattern.clone(), special, Some(merges))
}

/// The bytes of the token that merges `left` and `right`.
pub(super) fn merged_token(tokens: &[Vec<u8>], left: u32, right: u32) -> Vec<u8> {
    [&tokens[left as usize][..], &tokens[right as usize][..]].concat()
}

/// Learns merges over words already cut into symbols (SentencePiece-style
/// BPE: `alphabet` holds the text of each symbol id, its characters): as
/// `train` does, with at most `max_merges` merges, pairs seen fewer than
/// `min_frequency` times never merged and no token longer than
/// `max_token_chars` characters. Gives the text of each merged token, in
/// merge order.
pub fn train_characters(
    words: &[(Vec<u32>, u64)],
    alphabet: Vec<String>,
    max_merges: usize,
    min_frequency: u64,
    max_token_chars: usize,
    progress: &Progress,
) -> Result<Vec<String>> {
    let mut candidates = Candidates::new(min_frequency.max(1), max_token_chars, Measure::Chars);
    let index = PairIndex::new(words, candidates.min_count)?;
    let tokens: Vec<Vec<u8>> = alphabet.into_iter().map(String::into_bytes).collect();
    for (pair, count) in index.pairs() {
        candidates.push(&tokens, pair, count);
    }
    let first = tokens.len();
    let state = State {
        index,
        tokens,
        candidates,
    };
    let (tokens, _) = state.learn(max_merges as u64, progress)?;
    Ok(tokens
        .into_iter()
        .skip(first)
        .map(|t| String::from_utf8(t).expect("tokens of characters are UTF-8"))
        .collect())
}

/// Every token's bytes by id, and the merges that made them.
type Learned = (Vec<Vec<u8>>, Vec<(u32, u32)>);

impl State {
    /// Merges the most frequent pair, `total_merges` times at most (fewer
    /// when no pair is left): every token's bytes by id, and the merges.
    /// On a thread of the pool (`Progress::on_pool`).
    fn learn(self, total_merges: u64, progress: &Progress) -> Result<Learned> {
        progress.on_pool(Stage::Merging, total_merges, || {
            self.merge_all(total_merges, progress)
        })
    }

    /// `learn`, on the calling thread.
    fn merge_all(mut self, total_merges: u64, progress: &Progress) -> Result<Learned> {
        let target_tokens = self.tokens.len() + total_merges as usize;
        let mut merges: Vec<(u32, u32)> = Vec::with_capacity(total_merges as usize);
        progress.force(Stage::Merging, 0, total_merges)?;
        while self.tokens.len() < target_tokens {
            let Some(Candidate { count, pair }) = self.candidates.pop() else {
                break;
            };
            let current = self.index.count(pair);
            if current != count {
                self.candidates.push(&self.tokens, pair, current);
                continue;
            }
            let (left, right) = pair_ids(pair);
            let new_id = self.tokens.len() as u32;
            self.tokens.push(merged_token(&self.tokens, left, right));
            merges.push((left, right));
            self.apply_merge(left, right, new_id);
            progress.update(Stage::Merging, merges.len() as u64, total_merges)?;
        }
        progress.force(Stage::Merging, merges.len() as u64, total_merges)?;
        let State {
            index,
            tokens,
            candidates,
        } = self;
        drop_in_background((index, candidates));
        Ok((tokens, merges))
    }

    fn new(counts: PieceCounts, mut candidates: Candidates) -> Result<Self> {
        // Sorted for speed (see the module docs); no result depends on the
        // order.
        let pieces = counts.sorted();
        let index = PairIndex::new(&pieces, candidates.min_count)?;
        drop(pieces);
        drop_in_background(counts);
        let tokens: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
        for (pair, count) in index.pairs() {
            candidates.push(&tokens, pair, count);
        }
        Ok(State {
            index,
            tokens,
            candidates,
        })
    }

    /// Replaces every occurrence of `left right` by `new_id` and updates the
    /// heap with the pairs that became more frequent.
    fn apply_merge(&mut self, left: u32, right: u32, new_id: u32) {
        let State {
            index,
            tokens,
            candidates,
        } = self;
        // Heap counts come from the pair counts: the number replaced is not needed.
        let _ = index.merge(left, right, new_id, |pair, count, delta| {
            if delta > 0 {
                candidates.push(tokens, pair, count as u64);
            }
        });
    }
}
