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
pub(super) struct Candidate {
    count: u64,
    denominator: u128,
    pub(super) pair: u64,
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

/// Every symbol's text, by id (special tokens first): shared by all the
/// counts that training keeps (one set, or one per language).
pub(super) struct Symbols {
    texts: Vec<String>,
    ids: FxHashMap<String, u32>,
    prefix: String,
    /// Each alphabet character's symbol: word-initial, then continuation.
    chars: [FxHashMap<char, u32>; 2],
}

impl Symbols {
    /// The special tokens, then the alphabet of `words` (with counts; a
    /// word may come more than once, its counts are added): word-initial characters, then
    /// continuation ones, each in code point order. With `limit_alphabet`,
    /// characters past the limit are left out, and so are the words that
    /// hold them.
    pub(super) fn new<'w>(
        words: impl Iterator<Item = &'w (&'w str, u64)> + Clone,
        specials: &[String],
        settings: &WordPieceTrainerSettings,
    ) -> Self {
        let alphabet = alphabet(words.clone(), settings.limit_alphabet);
        let mut symbols = Symbols {
            texts: Vec::new(),
            ids: FxHashMap::default(),
            prefix: settings.model.continuing_subword_prefix.clone(),
            chars: [FxHashMap::default(), FxHashMap::default()],
        };
        for special in specials {
            symbols.id(special);
        }
        let mut initial: Vec<char> = Vec::new();
        let mut continuation: Vec<char> = Vec::new();
        for (word, _) in words {
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
        for c in initial {
            let id = symbols.id(&c.to_string());
            symbols.chars[0].insert(c, id);
        }
        for c in continuation {
            let id = symbols.id(&format!("{}{c}", symbols.prefix));
            symbols.chars[1].insert(c, id);
        }
        symbols
    }

    pub(super) fn len(&self) -> usize {
        self.texts.len()
    }

    /// The id of a symbol's text, added if new.
    fn id(&mut self, text: &str) -> u32 {
        if let Some(&id) = self.ids.get(text) {
            return id;
        }
        let id = self.texts.len() as u32;
        self.texts.push(text.to_owned());
        self.ids.insert(text.to_owned(), id);
        id
    }

    /// The symbol that merging `pair` makes (maybe one there already:
    /// `##a ##bc` and `##ab ##c` both make `##abc`).
    pub(super) fn merged(&mut self, pair: u64) -> u32 {
        let (left, right) = pair_ids(pair);
        let merged =
            self.texts[left as usize].clone() + &self.texts[right as usize][self.prefix.len()..];
        self.id(&merged)
    }

    /// A word as the symbols of its characters, or `None` if it holds a
    /// character outside the alphabet.
    pub(super) fn word(&self, word: &str) -> Option<Vec<u32>> {
        word.chars()
            .enumerate()
            .map(|(i, c)| self.chars[(i > 0) as usize].get(&c).copied())
            .collect()
    }

    /// Words as symbols, with their counts (words outside the alphabet
    /// left out).
    pub(super) fn words(&self, words: &[(&str, u64)]) -> Vec<(Vec<u32>, u64)> {
        self.counted_words(words).0
    }

    /// Words as symbols, with their counts, and how many words (weighted)
    /// were left out (outside the alphabet: `[UNK]` to the model).
    pub(super) fn counted_words(&self, words: &[(&str, u64)]) -> (Vec<(Vec<u32>, u64)>, u64) {
        let mut unknown = 0;
        let sequences = words
            .iter()
            .filter_map(|(word, count)| match self.word(word) {
                Some(sequence) => Some((sequence, *count)),
                None => {
                    unknown += count;
                    None
                }
            })
            .collect();
        (sequences, unknown)
    }

    pub(super) fn into_texts(self) -> Vec<String> {
        self.texts
    }
}

/// Words sorted, so that everything after is independent of hash order.
pub(super) fn sorted_words(counts: &PieceCounts) -> Vec<(&str, u64)> {
    counts
        .sorted()
        .into_iter()
        .map(|(bytes, count)| {
            let word = std::str::from_utf8(bytes).expect("words are normalized text");
            (word, count)
        })
        .collect()
}

/// The special tokens, the unknown token first if it is not one of them.
pub(super) fn specials(model: &WordPieceSettings) -> Vec<String> {
    let mut specials: Vec<String> = model.special_tokens.clone();
    if !specials.contains(&model.unk_token) {
        specials.insert(0, model.unk_token.clone());
    }
    specials
}

/// Refuses a vocabulary smaller than the special tokens and the alphabet.
pub(super) fn check_size(symbols: &Symbols, settings: &WordPieceTrainerSettings) -> Result<()> {
    if symbols.len() > settings.vocab_size {
        return Err(Error::invalid(format!(
            "vocab_size {} is too small: the special tokens and the alphabet of this corpus already take {} \
             (lower limit_alphabet, or raise vocab_size)",
            settings.vocab_size,
            symbols.len()
        )));
    }
    Ok(())
}

/// The scores of the pairs of one body of text (the corpus, or one
/// language of it): each symbol's count and the pairs it has been part of,
/// and the candidates by score. Pair counts are not kept here: they come
/// from a `PairIndex`, or from sums over several (`pop_best`'s `count`).
///
/// A merge of (a, b) into c lowers the counts of a and b, which raises the
/// score of every other pair holding them, and makes c's pairs: those
/// symbols are marked, and their pairs pushed again with their new scores
/// when a candidate is next wanted. Between merges that changes nothing;
/// where several bodies of text are kept (one per language) and only one
/// is asked for a candidate, the others' marks pile up until they are
/// asked, and each symbol is pushed once however many merges marked it.
#[derive(Default)]
pub(super) struct Scores {
    /// How often each symbol occurs in the words, weighted.
    counts: Vec<u64>,
    /// Every pair each symbol has been part of (maybe gone since).
    pairs_of: Vec<Vec<u64>>,
    /// The length of all the lists of `pairs_of`.
    listed: usize,
    /// Symbols whose pairs' scores may have risen since the last push.
    marked: Vec<u32>,
    heap: BinaryHeap<Candidate>,
    /// Pairs counted fewer times are not candidates.
    min_frequency: u64,
}

impl Scores {
    /// `counts`: each symbol's; `pairs`: every pair with its count.
    pub(super) fn new(
        counts: Vec<u64>,
        pairs: impl Iterator<Item = (u64, u64)>,
        min_frequency: u64,
    ) -> Self {
        let mut scores = Scores {
            pairs_of: vec![Vec::new(); counts.len()],
            counts,
            listed: 0,
            marked: Vec::new(),
            heap: BinaryHeap::new(),
            min_frequency: min_frequency.max(1),
        };
        let mut pairs: Vec<(u64, u64)> = pairs.collect();
        pairs.sort_unstable();
        for &(pair, _) in &pairs {
            scores.made(pair);
        }
        scores.heap = pairs
            .into_iter()
            .map(|(pair, count)| scores.candidate(pair, count))
            .filter(|c| c.count >= scores.min_frequency)
            .collect();
        scores
    }

    /// Each symbol's count in `words`, for `n` symbols.
    pub(super) fn symbol_counts(words: &[(Vec<u32>, u64)], n: usize) -> Vec<u64> {
        let mut counts = vec![0; n];
        for (word, count) in words {
            for &symbol in word {
                counts[symbol as usize] += count;
            }
        }
        counts
    }

    /// Each symbol's count.
    pub(super) fn counts(&self) -> &[u64] {
        &self.counts
    }

    pub(super) fn into_counts(self) -> Vec<u64> {
        self.counts
    }

    /// A pair made by a merge (its symbols will list it).
    fn made(&mut self, pair: u64) {
        let (left, right) = pair_ids(pair);
        self.pairs_of[left as usize].push(pair);
        self.listed += 1;
        if right != left {
            self.pairs_of[right as usize].push(pair);
            self.listed += 1;
        }
    }

    fn candidate(&self, pair: u64, count: u64) -> Candidate {
        let (left, right) = pair_ids(pair);
        Candidate {
            count,
            denominator: self.counts[left as usize] as u128 * self.counts[right as usize] as u128,
            pair,
        }
    }

    /// After `pair` was merged into `new_id` (`occurrences` times) in this
    /// text, making the pairs `made`.
    pub(super) fn merged(&mut self, pair: u64, new_id: u32, occurrences: u64, made: &[u64]) {
        self.counted(pair, new_id, occurrences);
        let (left, right) = pair_ids(pair);
        for &pair in made {
            self.made(pair);
        }
        self.marked.extend([new_id, left, right]);
    }

    /// After `pair` was merged into `new_id` (`occurrences` times): the
    /// symbols' counts alone, while no candidates are wanted from this text.
    pub(super) fn counted(&mut self, pair: u64, new_id: u32, occurrences: u64) {
        let (left, right) = pair_ids(pair);
        if new_id as usize >= self.counts.len() {
            self.counts.resize(new_id as usize + 1, 0);
            self.pairs_of.resize(new_id as usize + 1, Vec::new());
        }
        self.counts[left as usize] -= occurrences;
        self.counts[right as usize] -= occurrences;
        self.counts[new_id as usize] += occurrences;
    }

    /// The pair with the highest score now (`count`: a pair's count now).
    pub(super) fn pop_best(&mut self, count: impl Fn(u64) -> u64) -> Option<Candidate> {
        self.push_marked(&count);
        while let Some(top) = self.heap.pop() {
            let current = self.candidate(top.pair, count(top.pair));
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

    /// Pushes every live pair of the marked symbols (new symbols' pairs
    /// need an entry; merged ones' scores rose).
    fn push_marked(&mut self, count: &impl Fn(u64) -> u64) {
        let mut marked = std::mem::take(&mut self.marked);
        // Each once, however many merges marked it (the heap's order is
        // total: the order of pushes does not matter).
        marked.sort_unstable();
        marked.dedup();
        for &symbol in &marked {
            let mut pairs = std::mem::take(&mut self.pairs_of[symbol as usize]);
            self.listed -= pairs.len();
            pairs.sort_unstable();
            pairs.dedup();
            pairs.retain(|&p| count(p) > 0);
            for &p in &pairs {
                let candidate = self.candidate(p, count(p));
                if candidate.count >= self.min_frequency {
                    self.heap.push(candidate);
                }
            }
            self.listed += pairs.len();
            self.pairs_of[symbol as usize] = pairs;
        }
        marked.clear();
        self.marked = marked;
        // Out-of-date entries pile up: rebuild from the live pairs now and
        // then, so that memory stays proportional to them (each live pair
        // is listed once or twice).
        if self.heap.len() > 4 * self.listed + 4096 {
            let mut pairs: Vec<u64> = self.pairs_of.iter().flatten().copied().collect();
            pairs.sort_unstable();
            pairs.dedup();
            self.heap = pairs
                .into_iter()
                .map(|p| self.candidate(p, count(p)))
                .filter(|c| c.count >= self.min_frequency)
                .collect();
        }
    }
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
    let words = sorted_words(&counts);
    let mut symbols = Symbols::new(words.iter(), &specials(&settings.model), settings);
    check_size(&symbols, settings)?;
    let sequences = symbols.words(&words);
    drop(words);
    drop(counts);
    let mut index = PairIndex::new(&sequences, 1)?;
    let mut scores = Scores::new(
        Scores::symbol_counts(&sequences, symbols.len()),
        index.pairs(),
        settings.min_frequency,
    );
    drop(sequences);
    let total_merges = (settings.vocab_size - symbols.len()) as u64;
    progress.force(Stage::Merging, 0, total_merges)?;
    progress.on_pool(Stage::Merging, total_merges, || {
        let mut merges = 0;
        while symbols.len() < settings.vocab_size {
            let Some(best) = scores.pop_best(|pair| index.count(pair)) else {
                break;
            };
            let new_id = symbols.merged(best.pair);
            let (made, occurrences) = merge(&mut index, best.pair, new_id, |_, _, _| {});
            scores.merged(best.pair, new_id, occurrences, &made);
            merges += 1;
            progress.update(Stage::Merging, merges, total_merges)?;
        }
        Ok(())
    })?;
    WordPieceModel::new(symbols.into_texts(), settings.model.clone())
}

/// Merges `pair` into `new_id` in `index`, calling `changed` as
/// `PairIndex::merge` does: the pairs it made, and the occurrences it
/// replaced.
pub(super) fn merge(
    index: &mut PairIndex,
    pair: u64,
    new_id: u32,
    mut changed: impl FnMut(u64, i64, i64),
) -> (Vec<u64>, u64) {
    let (left, right) = pair_ids(pair);
    let mut made = Vec::new();
    let occurrences = index.merge(left, right, new_id, |pair, count, delta| {
        if delta > 0 && count == delta {
            made.push(pair);
        }
        changed(pair, count, delta);
    });
    (made, occurrences)
}

/// The characters kept, with their weighted counts: all of them, or the
/// `limit` most frequent (ties: smaller code point first).
fn alphabet<'w>(
    words: impl Iterator<Item = &'w (&'w str, u64)>,
    limit: Option<usize>,
) -> FxHashMap<char, u64> {
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
