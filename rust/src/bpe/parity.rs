//! Parity-aware BPE training (Foroutan et al., 2025, "Parity-aware
//! Byte-Pair Encoding"): merges chosen so that every language costs about
//! the same number of tokens.
//!
//! Classical BPE merges the pair most frequent over the whole corpus, so the
//! languages with the most text get the most merges. Here each step finds
//! the language that is worst off now, the one whose text costs the most
//! tokens, and merges the pair most frequent in *that* language's training
//! text; the merge applies to every language. How "worst off" is measured:
//! - `Target::Dev`: a parallel development set (the same lines in every
//!   language): the language whose development text is the most tokens now;
//! - `Target::Ratios`: no development set; the language whose training text
//!   has shrunk least against a target ratio per language (compression, the
//!   tokens it started with over the tokens now, divided by its ratio).
//!
//! The target, the variants and the choice of the worst-off language are
//! shared with the other models' parity-aware trainers (`crate::parity`).
//!
//! Variants: the first `global_merges` merges by counts over all languages
//! (the hybrid: the common merges of every language first), and a moving
//! window (a language chosen more than `share / n_languages` of the last
//! `window` merges is passed over for the next worst, so that one language
//! whose text no merge helps much cannot take every merge).
//!
//! A language with no pair left that is counted `min_frequency` times is
//! passed over from then on (the published algorithm stops training there;
//! the other languages still gain from more merges).
//!
//! Bookkeeping: one `PairIndex` per language over its training pieces and
//! one over its development pieces, each merge applied to all of them. A
//! merge then costs what it costs classical training (the occurrences it
//! replaces, now spread over the languages' indexes, plus one lookup per
//! index), not a loop over languages for every candidate pair. Each
//! language keeps its own candidates (`Candidates`, as classical
//! training); the counts over all languages that the hybrid needs are kept
//! from the indexes' reports of changed pairs while it lasts (the
//! languages' candidates are made when it ends). Indexes keep
//! every pair (floor 1): a merge chosen for one language must apply in
//! every other, however rare the pair is there. `PairIndex::merge` reports
//! the occurrences it replaced, so each language's token count is kept up
//! to date at no cost.

use rayon::prelude::*;
use rustc_hash::FxHashMap;

use super::trainer::{merged_token, model, Candidate, Candidates, Measure, TrainerSettings};
use super::BpeModel;
use crate::counting::PieceCounts;
use crate::error::Result;
use crate::pair_index::{drop_in_background, pair_ids, PairIndex};
use crate::parity::{check, distinct_pieces, Costs};
pub use crate::parity::{ParityRecord, ParitySettings, Target};
use crate::progress::{Progress, Stage};

struct Language {
    index: PairIndex,
    candidates: Candidates,
    dev: Option<PairIndex>,
}

/// Counts over all languages, for the hybrid's first merges.
struct Global {
    counts: FxHashMap<u64, i64>,
    candidates: Candidates,
}

/// Learns a model from each language's piece counts, parity-aware (see
/// the module docs).
pub fn train(
    languages: &[&PieceCounts],
    target: Target,
    settings: &TrainerSettings,
    parity: &ParitySettings,
    progress: &Progress,
) -> Result<(BpeModel, ParityRecord)> {
    settings.validate()?;
    check(languages, &target, parity)?;
    let min_count = settings.min_frequency.max(1);
    let max_len = settings.max_token_bytes.unwrap_or(usize::MAX);
    let tokens: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
    let (dev, ratios) = target.into_parts(languages.len());
    let hybrid = parity.global_merges > 0;
    let distinct_pieces = distinct_pieces(languages);
    let (languages, costs): (Vec<Language>, Vec<u64>) = languages
        .par_iter()
        .zip(dev)
        .map(|(counts, dev)| Language::new(counts, dev, &tokens, (min_count, max_len), !hybrid))
        .collect::<Result<Vec<_>>>()?
        .into_iter()
        .unzip();
    let global = hybrid.then(|| Global::new(&languages, &tokens, min_count, max_len));
    let mut state = State {
        costs: Costs::new(costs, ratios.as_deref(), parity),
        languages,
        global,
        tokens,
        merges: Vec::new(),
    };
    let target_tokens = settings.vocab_size - settings.special_tokens.len();
    state.learn(target_tokens, parity.global_merges, progress)?;
    let State {
        languages,
        global,
        tokens,
        merges,
        costs,
    } = state;
    drop_in_background((languages, global));
    Ok((
        model(tokens, merges, settings)?,
        costs.record(distinct_pieces),
    ))
}

impl Language {
    /// A language's indexes and the tokens its cost is measured on; its
    /// candidates too, unless the hybrid's global merges come first
    /// (`candidates`: they are made when those end, from the pairs then).
    fn new(
        counts: &PieceCounts,
        dev: Option<PieceCounts>,
        tokens: &[Vec<u8>],
        limits: (u64, usize),
        candidates: bool,
    ) -> Result<(Self, u64)> {
        let pieces = counts.sorted();
        let index = PairIndex::new(&pieces, 1)?;
        let mut language_candidates = Candidates::new(limits.0, limits.1, Measure::Bytes);
        if candidates {
            language_candidates.fill(tokens, index.pairs());
        }
        let length = |pieces: &[(&[u8], u64)]| pieces.iter().map(|(p, c)| p.len() as u64 * c).sum();
        let (dev, tokens_now) = match dev {
            Some(dev) => {
                let dev_pieces = dev.sorted();
                (Some(PairIndex::new(&dev_pieces, 1)?), length(&dev_pieces))
            }
            None => (None, length(&pieces)),
        };
        let language = Language {
            index,
            candidates: language_candidates,
            dev,
        };
        Ok((language, tokens_now))
    }

    /// The most frequent pair of this language that may still be merged
    /// (entries out of date are re-pushed with their count now).
    fn best(&mut self, tokens: &[Vec<u8>]) -> Option<u64> {
        while let Some(Candidate { count, pair }) = self.candidates.pop() {
            let now = self.index.count(pair);
            if now == count {
                return Some(pair);
            }
            self.candidates.push(tokens, pair, now);
        }
        None
    }
}

impl Global {
    fn new(languages: &[Language], tokens: &[Vec<u8>], min_count: u64, max_len: usize) -> Self {
        let mut counts: FxHashMap<u64, i64> = FxHashMap::default();
        for language in languages {
            for (pair, count) in language.index.pairs() {
                *counts.entry(pair).or_insert(0) += count as i64;
            }
        }
        let mut candidates = Candidates::new(min_count, max_len, Measure::Bytes);
        candidates.fill(
            tokens,
            counts.iter().map(|(&pair, &count)| (pair, count as u64)),
        );
        Global { counts, candidates }
    }

    fn best(&mut self, tokens: &[Vec<u8>]) -> Option<u64> {
        while let Some(Candidate { count, pair }) = self.candidates.pop() {
            let now = self.counts.get(&pair).copied().unwrap_or(0).max(0) as u64;
            if now == count {
                return Some(pair);
            }
            self.candidates.push(tokens, pair, now);
        }
        None
    }
}

struct State {
    languages: Vec<Language>,
    /// While the hybrid's global merges last.
    global: Option<Global>,
    /// The bytes of every token so far, by id.
    tokens: Vec<Vec<u8>>,
    merges: Vec<(u32, u32)>,
    costs: Costs,
}

impl State {
    fn learn(
        &mut self,
        target_tokens: usize,
        global_merges: usize,
        progress: &Progress,
    ) -> Result<()> {
        let total_merges = target_tokens.saturating_sub(self.tokens.len()) as u64;
        progress.force(Stage::Merging, 0, total_merges)?;
        while self.tokens.len() < target_tokens {
            let (pair, language) = if self.merges.len() < global_merges && self.global.is_some() {
                match self.global.as_mut().and_then(|g| g.best(&self.tokens)) {
                    Some(pair) => (pair, None),
                    None => {
                        self.end_global();
                        continue;
                    }
                }
            } else {
                self.end_global();
                let Some(worst) = self.costs.worst() else {
                    break; // every language is out of pairs
                };
                match self.languages[worst].best(&self.tokens) {
                    Some(pair) => (pair, Some(worst)),
                    None => {
                        self.costs.exhaust(worst);
                        continue;
                    }
                }
            };
            self.merge(pair);
            self.costs.choose(language);
            progress.update_noted(
                Stage::Merging,
                self.merges.len() as u64,
                total_merges,
                || self.costs.note(),
            )?;
        }
        progress.force_noted(
            Stage::Merging,
            self.merges.len() as u64,
            total_merges,
            || self.costs.note(),
        )?;
        Ok(())
    }

    /// Ends the hybrid's global merges, if they ran: their counts go, and
    /// each language's candidates are made from its pairs now (kept up to
    /// date all along, they would cost every global merge a push per
    /// changed pair and language).
    fn end_global(&mut self) {
        if self.global.take().is_none() {
            return;
        }
        let tokens = &self.tokens;
        self.languages.par_iter_mut().for_each(|language| {
            language.candidates.fill(tokens, language.index.pairs());
        });
    }

    /// Merges `pair` into a new token in every language, training and
    /// development text alike.
    fn merge(&mut self, pair: u64) {
        let (left, right) = pair_ids(pair);
        let new_id = self.tokens.len() as u32;
        self.tokens.push(merged_token(&self.tokens, left, right));
        self.merges.push((left, right));
        let State {
            languages,
            global,
            tokens,
            costs,
            ..
        } = self;
        for (language, cost_tokens) in languages.iter_mut().zip(costs.tokens.iter_mut()) {
            let Language {
                index,
                candidates,
                dev,
            } = language;
            let replaced = index.merge(left, right, new_id, |pair, count, delta| match global {
                Some(global) => {
                    let total = global.counts.entry(pair).or_insert(0);
                    *total += delta;
                    if delta > 0 {
                        global.candidates.push(tokens, pair, *total as u64);
                    }
                }
                None if delta > 0 => candidates.push(tokens, pair, count as u64),
                None => {}
            });
            match dev {
                Some(dev) => *cost_tokens -= dev.merge(left, right, new_id, |_, _, _| {}),
                None => *cost_tokens -= replaced,
            }
        }
        if let Some(global) = global.as_mut() {
            global.counts.remove(&pair);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::counting::Counter;
    use crate::text::pattern::Pattern;

    fn counts(texts: &[&str]) -> PieceCounts {
        Counter::new(Pattern::Cl100k, vec![])
            .unwrap()
            .count_texts(texts)
            .unwrap()
    }

    fn refs(languages: &[PieceCounts]) -> Vec<&PieceCounts> {
        languages.iter().collect()
    }

    fn settings(vocab_size: usize) -> TrainerSettings {
        TrainerSettings {
            vocab_size,
            min_frequency: 2,
            special_tokens: vec![],
            max_token_bytes: None,
            pattern: Pattern::Cl100k,
        }
    }

    /// A corpus where English has forty times the text of Finnish.
    fn skewed() -> (Vec<PieceCounts>, Vec<PieceCounts>) {
        let english = "the cat sat on the mat and the dog sat on the log ".repeat(40);
        let finnish = "kissa istui matolla ja koira makasi tukilla ".repeat(3);
        let languages = vec![counts(&[&english]), counts(&[&finnish])];
        let dev = vec![
            counts(&["the dog sat on the mat"]),
            counts(&["koira istui matolla"]),
        ];
        (languages, dev)
    }

    /// Tokens of each development text after training.
    fn costs(
        languages: Vec<PieceCounts>,
        target: Target,
        parity: &ParitySettings,
    ) -> (Vec<u64>, BpeModel) {
        let (model, record) = train(
            &refs(&languages),
            target,
            &settings(290),
            parity,
            &Progress::new(None),
        )
        .unwrap();
        assert_eq!(record.chosen.len(), model.merges().unwrap().len());
        (record.tokens_after, model)
    }

    #[test]
    fn the_worst_off_language_gets_merges() {
        let (languages, dev) = skewed();
        let (parity, _) = costs(
            languages.clone(),
            Target::Dev(dev.clone()),
            &ParitySettings::default(),
        );
        // Classical: every merge by counts over both languages.
        let all_global = ParitySettings {
            global_merges: usize::MAX,
            ..ParitySettings::default()
        };
        let (classical, _) = costs(languages, Target::Dev(dev), &all_global);
        let gap = |c: &[u64]| c[0].abs_diff(c[1]);
        assert!(
            gap(&parity) < gap(&classical),
            "{parity:?} vs {classical:?}"
        );
        assert!(parity[1] < classical[1]);
    }

    #[test]
    fn global_merges_alone_are_classical_training() {
        let (languages, dev) = skewed();
        let all_global = ParitySettings {
            global_merges: usize::MAX,
            ..ParitySettings::default()
        };
        let (_, model) = costs(languages.clone(), Target::Dev(dev), &all_global);
        let mut total = PieceCounts::default();
        for language in languages {
            total.merge(language);
        }
        let classical = super::super::train(total, &settings(290), &Progress::new(None)).unwrap();
        assert_eq!(model.merges(), classical.merges());
    }

    #[test]
    fn ratios_and_the_window_steer_the_choice() {
        let (languages, _) = skewed();
        let (model, record) = train(
            &refs(&languages),
            Target::Ratios(vec![1.0, 1.0]),
            &settings(290),
            &ParitySettings::default(),
            &Progress::new(None),
        )
        .unwrap();
        assert!(model.merges().unwrap().len() > 10);
        assert!(record.chosen.contains(&Some(1)));
        // A window of 4 with share 1: no language more than half of the last 4.
        let (_, record) = train(
            &refs(&languages),
            Target::Ratios(vec![1.0, 1.0]),
            &settings(290),
            &ParitySettings {
                window: Some((4, 1.0)),
                ..ParitySettings::default()
            },
            &Progress::new(None),
        )
        .unwrap();
        let chosen: Vec<u32> = record.chosen.iter().map(|c| c.unwrap()).collect();
        // Until Finnish runs out of pairs (then English takes every merge).
        let both = chosen.iter().rposition(|&l| l == 1).unwrap();
        for run in chosen[..both].windows(5) {
            let last = run[4];
            let before = run[..4].iter().filter(|&&l| l == last).count();
            assert!(before <= 2, "{chosen:?}");
        }
    }

    #[test]
    fn bad_input_is_named() {
        let (languages, dev) = skewed();
        let train_with = |languages: Vec<PieceCounts>, target: Target, parity: ParitySettings| {
            train(
                &refs(&languages),
                target,
                &settings(290),
                &parity,
                &Progress::new(None),
            )
            .err()
            .unwrap()
            .to_string()
        };
        assert!(train_with(
            languages[..1].to_vec(),
            Target::Ratios(vec![1.0]),
            ParitySettings::default()
        )
        .contains("at least two languages"));
        assert!(train_with(
            languages.clone(),
            Target::Dev(dev[..1].to_vec()),
            ParitySettings::default()
        )
        .contains("1 development sets for 2 languages"));
        assert!(train_with(
            languages.clone(),
            Target::Ratios(vec![1.0, 0.0]),
            ParitySettings::default()
        )
        .contains("positive numbers"));
        assert!(train_with(
            vec![languages[0].clone(), PieceCounts::default()],
            Target::Dev(dev.clone()),
            ParitySettings::default()
        )
        .contains("language 1 has no text"));
        assert!(train_with(
            languages,
            Target::Dev(dev),
            ParitySettings {
                window: Some((0, 1.0)),
                ..ParitySettings::default()
            }
        )
        .contains("moving window"));
    }
}
