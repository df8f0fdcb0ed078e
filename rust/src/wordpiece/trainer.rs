//! WordPiece training as WordPiece is defined: each step merges the pair of
//! adjacent symbols (a, b) with the highest likelihood score
//! `score(a, b) = count(a b) / (count(a) × count(b))`, counts taken over
//! the corpus's words weighted by their frequency: the merge that most
//! raises the likelihood of the corpus under a unigram model of symbols.
//! Raw pair frequency (what other libraries call WordPiece
//! training, i.e. BPE) favours pairs of frequent symbols; the score favours
//! pairs whose parts rarely occur apart.
//!
//! Symbols: a word starts as its characters, the first as itself and the
//! others with the continuation prefix (`##`); merging `a` and `##b` makes
//! `ab`, merging `##a` and `##b` makes `##ab`. Two different pairs can make
//! the same string (`##a ##bc` and `##ab ##c`): they share one token.
//!
//! Alphabet: with `limit_alphabet`, only that many characters (the most
//! frequent) are kept; words holding another character are left out of
//! training (encoding makes them `[UNK]`).
//!
//! Tie rule (documented for users): among equal scores, the higher pair
//! count wins, then the smaller (left id, right id). Scores are compared
//! exactly, as fractions, so the result does not depend on floating point.
//!
//! Bookkeeping: `pair_index` holds pair counts and the words of each pair; a
//! max-heap holds candidates by score. Merging (a, b) lowers count(a) and
//! count(b), which raises the score of every other pair holding a or b: those
//! pairs are pushed again with their new score (each symbol keeps the list of
//! pairs it has been part of). Entries whose score is out of date when they
//! surface are re-pushed with the current one. Cost per merge: the words it
//! touches, plus O(log H) per pair of a or b.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use rustc_hash::FxHashMap;

use super::{WordPieceModel, WordPieceSettings};
use crate::counting::PieceCounts;
use crate::error::{Error, Result};
use crate::pair_index::{pair_ids, PairIndex};
use crate::progress::{Progress, Stage};

#[derive(Clone, Debug)]
pub struct WordPieceTrainerSettings {
    /// Total size: special tokens + alphabet + merged tokens.
    pub vocab_size: usize,
    /// Pairs seen fewer times than this are never merged (however high
    /// their score: a pair seen once, of symbols seen once, scores highest).
    pub min_frequency: u64,
    /// Keep only this many characters (the most frequent).
    pub limit_alphabet: Option<usize>,
    /// The model's settings: prefix, unknown and special tokens (placed first,
    /// in this order), normalization.
    pub model: WordPieceSettings,
}

/// A heap entry: a pair and its score `count / (count(a) × count(b))` when
/// pushed.
#[derive(PartialEq, Eq)]
struct Candidate {
    count: u64,
    denominator: u128,
    pair: u64,
}

impl Ord for Candidate {
    fn cmp(&self, other: &Self) -> Ordering {
        // count / denominator, compared without division.
        let ours = self.count as u128 * other.denominator;
        let theirs = other.count as u128 * self.denominator;
        ours.cmp(&theirs)
            .then_with(|| self.count.cmp(&other.count))
            .then_with(|| other.pair.cmp(&self.pair))
    }
}

impl PartialOrd for Candidate {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

struct State {
    index: PairIndex,
    /// Every symbol's text, by id (special tokens first).
    symbols: Vec<String>,
    symbol_ids: FxHashMap<String, u32>,
    /// How often each symbol occurs in the words, weighted.
    symbol_counts: Vec<u64>,
    /// Every pair each symbol has been part of (maybe gone since).
    pairs_of: Vec<Vec<u64>>,
    heap: BinaryHeap<Candidate>,
    prefix: String,
    /// Pairs counted fewer times are not candidates.
    min_frequency: u64,
}

/// Learns a WordPiece model from word counts (see `Counter::bert`).
pub fn train(
    counts: PieceCounts,
    settings: &WordPieceTrainerSettings,
    progress: &Progress,
) -> Result<WordPieceModel> {
    if counts.is_empty() {
        return Err(Error::Corpus(
            "the corpus is empty: there is no text to learn from".to_owned(),
        ));
    }
    let model = &settings.model;
    let mut specials: Vec<String> = model.special_tokens.clone();
    if !specials.contains(&model.unk_token) {
        specials.insert(0, model.unk_token.clone());
    }
    let mut state = State::new(counts, &specials, settings)?;
    if state.symbols.len() > settings.vocab_size {
        return Err(Error::invalid(format!(
            "vocab_size {} is too small: the special tokens and the alphabet of this corpus already take {} \
             (lower limit_alphabet, or raise vocab_size)",
            settings.vocab_size,
            state.symbols.len()
        )));
    }
    let total_merges = (settings.vocab_size - state.symbols.len()) as u64;
    let mut merges = 0;
    progress.force(Stage::Merging, 0, total_merges)?;
    while state.symbols.len() < settings.vocab_size {
        let Some(best) = state.pop_best() else { break };
        state.merge(best.pair);
        merges += 1;
        progress.update(Stage::Merging, merges, total_merges)?;
    }
    progress.force(Stage::Merging, merges, total_merges)?;
    WordPieceModel::new(state.symbols, model.clone())
}

impl State {
    fn new(
        counts: PieceCounts,
        specials: &[String],
        settings: &WordPieceTrainerSettings,
    ) -> Result<Self> {
        let prefix = settings.model.continuing_subword_prefix.clone();
        // Sorted, so that everything after is independent of hash order.
        let mut words: Vec<(String, u64)> = counts
            .counts
            .into_iter()
            .map(|(bytes, count)| {
                let word = String::from_utf8(bytes).expect("words are normalized text");
                (word, count)
            })
            .collect();
        words.sort_unstable();

        let alphabet = alphabet(&words, settings.limit_alphabet);
        let mut state = State {
            index: PairIndex::default(),
            symbols: Vec::new(),
            symbol_ids: FxHashMap::default(),
            symbol_counts: Vec::new(),
            pairs_of: Vec::new(),
            heap: BinaryHeap::new(),
            prefix,
            min_frequency: settings.min_frequency.max(1),
        };
        for special in specials {
            state.symbol(special);
        }
        // The alphabet: word-initial characters, then continuation ones, each
        // in code point order.
        let mut initial: Vec<char> = Vec::new();
        let mut continuation: Vec<char> = Vec::new();
        for (word, _) in &words {
            if !word.chars().all(|c| alphabet.contains_key(&c)) {
                continue;
            }
            let mut chars = word.chars();
            initial.extend(chars.next());
            continuation.extend(chars);
        }
        for list in [&mut initial, &mut continuation] {
            list.sort_unstable();
            list.dedup();
        }
        let mut char_symbol = [FxHashMap::default(), FxHashMap::default()];
        for c in initial {
            char_symbol[0].insert(c, state.symbol(&c.to_string()));
        }
        for c in continuation {
            let text = format!("{}{c}", state.prefix);
            char_symbol[1].insert(c, state.symbol(&text));
        }

        let mut sequences = Vec::new();
        for (word, count) in &words {
            let Some(sequence) = word
                .chars()
                .enumerate()
                .map(|(i, c)| char_symbol[(i > 0) as usize].get(&c).copied())
                .collect::<Option<Vec<u32>>>()
            else {
                continue; // A character outside the alphabet.
            };
            for &symbol in &sequence {
                state.symbol_counts[symbol as usize] += count;
            }
            sequences.push((sequence, *count));
        }
        state.index = PairIndex::new(&sequences, 1)?;
        let mut pairs: Vec<u64> = state.index.pairs().map(|(pair, _)| pair).collect();
        pairs.sort_unstable();
        for pair in pairs {
            let (left, right) = pair_ids(pair);
            state.pairs_of[left as usize].push(pair);
            if right != left {
                state.pairs_of[right as usize].push(pair);
            }
            state.push(pair);
        }
        Ok(state)
    }

    /// The id of a symbol's text, added if new.
    fn symbol(&mut self, text: &str) -> u32 {
        if let Some(&id) = self.symbol_ids.get(text) {
            return id;
        }
        let id = self.symbols.len() as u32;
        self.symbols.push(text.to_owned());
        self.symbol_ids.insert(text.to_owned(), id);
        self.symbol_counts.push(0);
        self.pairs_of.push(Vec::new());
        id
    }

    fn candidate(&self, pair: u64) -> Candidate {
        let (left, right) = pair_ids(pair);
        Candidate {
            count: self.index.count(pair),
            denominator: self.symbol_counts[left as usize] as u128
                * self.symbol_counts[right as usize] as u128,
            pair,
        }
    }

    fn push(&mut self, pair: u64) {
        let candidate = self.candidate(pair);
        if candidate.count >= self.min_frequency {
            self.heap.push(candidate);
        }
    }

    /// The pair with the highest current score.
    fn pop_best(&mut self) -> Option<Candidate> {
        while let Some(top) = self.heap.pop() {
            let current = self.candidate(top.pair);
            if current.count < self.min_frequency {
                continue; // Pushed again if it becomes frequent enough.
            }
            if current.count == top.count && current.denominator == top.denominator {
                return Some(top);
            }
            // Out of date: the score fell (pair count down or a symbol's
            // count up); rises were pushed when they happened.
            self.heap.push(current);
        }
        None
    }

    fn merge(&mut self, pair: u64) {
        let (left, right) = pair_ids(pair);
        let merged = self.symbols[left as usize].clone()
            + &self.symbols[right as usize][self.prefix.len()..];
        let new_id = self.symbol(&merged);
        let mut created = Vec::new();
        let occurrences = self
            .index
            .merge(left, right, new_id, |changed, count, delta| {
                if delta > 0 && count == delta {
                    created.push(changed);
                }
            });
        self.symbol_counts[left as usize] -= occurrences;
        self.symbol_counts[right as usize] -= occurrences;
        self.symbol_counts[new_id as usize] += occurrences;
        for &pair in &created {
            let (l, r) = pair_ids(pair);
            self.pairs_of[l as usize].push(pair);
            if r != l {
                self.pairs_of[r as usize].push(pair);
            }
        }
        // Every pair of the new symbol (its count rose: scores fell, but new
        // pairs need an entry), and of the two merged ones (their counts fell:
        // scores rose).
        for symbol in [new_id, left, right] {
            let mut pairs = std::mem::take(&mut self.pairs_of[symbol as usize]);
            pairs.sort_unstable();
            pairs.dedup();
            pairs.retain(|&p| self.index.count(p) > 0);
            for &p in &pairs {
                self.push(p);
            }
            self.pairs_of[symbol as usize] = pairs;
        }
        // Out-of-date entries pile up: rebuild from the live pairs now and
        // then, so that memory stays proportional to them.
        if self.heap.len() > 4 * self.index.pairs().len() + 4096 {
            let mut pairs: Vec<u64> = self.index.pairs().map(|(pair, _)| pair).collect();
            pairs.sort_unstable();
            self.heap = pairs
                .into_iter()
                .map(|p| self.candidate(p))
                .filter(|c| c.count >= self.min_frequency)
                .collect();
        }
    }
}

/// The characters kept, with their weighted counts: all of them, or the
/// `limit` most frequent (ties: smaller code point first).
fn alphabet(words: &[(String, u64)], limit: Option<usize>) -> FxHashMap<char, u64> {
    let mut counts: FxHashMap<char, u64> = FxHashMap::default();
    for (word, count) in words {
        for c in word.chars() {
            *counts.entry(c).or_insert(0) += count;
        }
    }
    if let Some(limit) = limit.filter(|&limit| limit < counts.len()) {
        let mut ranked: Vec<(char, u64)> = counts.into_iter().collect();
        ranked.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        ranked.truncate(limit);
        counts = ranked.into_iter().collect();
    }
    counts
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::counting::Counter;

    fn train_on(texts: &[&str], vocab_size: usize) -> WordPieceModel {
        let model = WordPieceSettings::default();
        let counts = Counter::bert(model.normalizer, vec![])
            .unwrap()
            .count_texts(texts)
            .unwrap();
        let settings = WordPieceTrainerSettings {
            vocab_size,
            min_frequency: 1,
            limit_alphabet: None,
            model,
        };
        train(counts, &settings, &Progress::silent()).unwrap()
    }

    #[test]
    fn cohesive_pairs_merge_first() {
        // "e s" is the most frequent pair, but e and s are everywhere; "q u"
        // is rare and always together: its score is the highest.
        let text = "ques es es es es eses sees seas easy ease";
        let model = train_on(&[text], 5 + 8 + 1);
        let learned = model.token(model.vocab().len() as u32 - 1).unwrap();
        assert_eq!(learned, "qu");
    }

    #[test]
    fn deterministic() {
        let text = "the quick brown fox jumps over the lazy dog ".repeat(5);
        let a = train_on(&[&text], 60).to_vocab_txt();
        let b = train_on(&[&text], 60).to_vocab_txt();
        assert_eq!(a, b);
    }
}
