//! Parity-aware WordPiece training: parity-aware BPE's rule (`bpe/parity.rs`,
//! after Foroutan et al., 2025) with WordPiece's score. Each step finds the
//! language that is worst off now (`crate::parity::Costs`: the most tokens
//! of its development text, or the least compression of its training text
//! against a target ratio) and merges the pair with the highest likelihood
//! score `count(ab) / (count(a) × count(b))` *in that language's words*;
//! the merge applies to every language. The hybrid's first merges, and
//! classical training, score pairs by counts over all languages.
//!
//! The alphabet (with `limit_alphabet`, the most frequent characters) is
//! that of all languages together, as classical training on their summed
//! counts finds it, so that the two differ only in the merges they choose.
//!
//! A language's cost is counted as training sees it: its words' symbols
//! after the merges so far (a word outside the alphabet is one `[UNK]`).
//! Encoding takes the longest token first rather than replaying merges,
//! so the tokens of the finished model can differ slightly; the choice of
//! the worst-off language barely does.
//!
//! Bookkeeping: one `PairIndex` per language over its training words and
//! one over its development words, each merge applied to all of them, and
//! the scores of each language's pairs (`trainer::Scores`). A merge lowers
//! the counts of the two symbols merged, which raises the scores of all
//! their other pairs; each language only marks those symbols, and pushes
//! their pairs again when it is next the worst off, once however many
//! merges marked them. So a merge costs the occurrences it replaces, spread
//! over the languages' indexes, plus one lookup per language; the pushes
//! are paid by the language that needs its best pair.

use rayon::prelude::*;
use rustc_hash::FxHashMap;

use super::trainer::{
    check_size, merge, sorted_words, specials, Scores, Symbols, WordPieceTrainerSettings,
};
use super::WordPieceModel;
use crate::counting::PieceCounts;
use crate::error::Result;
use crate::pair_index::{drop_in_background, pair_ids, PairIndex};
use crate::parity::{check, distinct_pieces, Costs, ParityRecord, ParitySettings, Target};
use crate::progress::{Progress, Stage};

struct Language {
    index: PairIndex,
    /// Its symbols' counts; its pairs' scores once parity takes over.
    scores: Scores,
    dev: Option<PairIndex>,
}

/// Counts over all languages, for the hybrid's first merges.
struct Global {
    pairs: FxHashMap<u64, i64>,
    scores: Scores,
}

/// Learns a WordPiece model from each language's word counts,
/// parity-aware (see the module docs).
pub fn train(
    languages: &[&PieceCounts],
    target: Target,
    settings: &WordPieceTrainerSettings,
    parity: &ParitySettings,
    progress: &Progress,
) -> Result<(WordPieceModel, ParityRecord)> {
    check(languages, &target, parity)?;
    let (distinct_pieces, words) = rayon::join(
        || distinct_pieces(languages),
        || -> Vec<Vec<(&str, u64)>> { languages.par_iter().map(|c| sorted_words(c)).collect() },
    );
    let mut symbols = Symbols::new(words.iter().flatten(), &specials(&settings.model), settings);
    check_size(&symbols, settings)?;
    let (dev, ratios) = target.into_parts(languages.len());
    let hybrid = parity.global_merges > 0;
    // Each language's indexes and scores, and the tokens its cost is
    // measured on, on all cores.
    let (languages, tokens): (Vec<Language>, Vec<u64>) = words
        .par_iter()
        .zip(dev)
        .map(|(words, dev)| {
            let sequences = symbols.words(words);
            let index = PairIndex::new(&sequences, 1)?;
            let counts = Scores::symbol_counts(&sequences, symbols.len());
            let scores = if hybrid {
                Scores::new(counts, std::iter::empty(), settings.min_frequency)
            } else {
                Scores::new(counts, index.pairs(), settings.min_frequency)
            };
            let (dev, cost) = match dev {
                Some(dev) => {
                    let (sequences, unknown) = symbols.counted_words(&sorted_words(&dev));
                    (
                        Some(PairIndex::new(&sequences, 1)?),
                        length(&sequences) + unknown,
                    )
                }
                None => (None, length(&sequences)),
            };
            Ok((Language { index, scores, dev }, cost))
        })
        .collect::<Result<Vec<_>>>()?
        .into_iter()
        .unzip();
    drop(words);
    let mut state = State {
        languages,
        global: None,
        min_frequency: settings.min_frequency,
        merges: 0,
    };
    if hybrid {
        state.global = Some(Global::new(
            &state.languages,
            symbols.len(),
            settings.min_frequency,
        ));
    }
    let mut costs = Costs::new(tokens, ratios.as_deref(), parity);
    let total_merges = (settings.vocab_size - symbols.len()) as u64;
    progress.force(Stage::Merging, 0, total_merges)?;
    while symbols.len() < settings.vocab_size {
        let (pair, language) = if state.merges < parity.global_merges && state.global.is_some() {
            match state.global.as_mut().and_then(Global::best) {
                Some(pair) => (pair, None),
                None => {
                    state.end_global();
                    continue;
                }
            }
        } else {
            state.end_global();
            let Some(worst) = costs.worst() else {
                break; // every language is out of pairs
            };
            let language = &mut state.languages[worst];
            let index = &language.index;
            match language.scores.pop_best(|pair| index.count(pair)) {
                Some(best) => (best.pair, Some(worst)),
                None => {
                    costs.exhaust(worst);
                    continue;
                }
            }
        };
        let new_id = symbols.merged(pair);
        state.merge(pair, new_id, &mut costs.tokens);
        costs.choose(language);
        progress.update_noted(Stage::Merging, state.merges as u64, total_merges, || {
            costs.note()
        })?;
    }
    progress.force_noted(Stage::Merging, state.merges as u64, total_merges, || {
        costs.note()
    })?;
    drop_in_background(state);
    let model = WordPieceModel::new(symbols.into_texts(), settings.model.clone())?;
    Ok((model, costs.record(distinct_pieces)))
}

/// Symbols of `words`, weighted.
fn length(words: &[(Vec<u32>, u64)]) -> u64 {
    words.iter().map(|(w, c)| w.len() as u64 * c).sum()
}

impl Global {
    fn new(languages: &[Language], n_symbols: usize, min_frequency: u64) -> Self {
        let mut pairs: FxHashMap<u64, i64> = FxHashMap::default();
        let mut counts = vec![0; n_symbols];
        for language in languages {
            for (pair, count) in language.index.pairs() {
                *pairs.entry(pair).or_insert(0) += count as i64;
            }
            for (total, count) in counts.iter_mut().zip(language.scores.counts()) {
                *total += count;
            }
        }
        let scores = Scores::new(
            counts,
            pairs.iter().map(|(&pair, &count)| (pair, count as u64)),
            min_frequency,
        );
        Global { pairs, scores }
    }

    fn best(&mut self) -> Option<u64> {
        let pairs = &self.pairs;
        let count = |pair| pairs.get(&pair).copied().unwrap_or(0).max(0) as u64;
        Some(self.scores.pop_best(count)?.pair)
    }
}

struct State {
    languages: Vec<Language>,
    /// While the hybrid's global merges last.
    global: Option<Global>,
    min_frequency: u64,
    merges: usize,
}

impl State {
    /// Ends the hybrid's global merges, if they ran: each language's
    /// scores are made from its pairs now.
    fn end_global(&mut self) {
        if self.global.take().is_none() {
            return;
        }
        for language in &mut self.languages {
            let counts = std::mem::take(&mut language.scores).into_counts();
            language.scores = Scores::new(counts, language.index.pairs(), self.min_frequency);
        }
    }

    /// Merges `pair` into `new_id` in every language, training and
    /// development words alike; `cost_tokens` falls by what each language's
    /// cost is measured on.
    fn merge(&mut self, pair: u64, new_id: u32, cost_tokens: &mut [u64]) {
        self.merges += 1;
        let (left, right) = pair_ids(pair);
        let mut global_made = Vec::new();
        let mut global_occurrences = 0;
        for (language, cost) in self.languages.iter_mut().zip(cost_tokens.iter_mut()) {
            if let Some(dev) = &mut language.dev {
                if dev.count(pair) > 0 {
                    *cost -= dev.merge(left, right, new_id, |_, _, _| {});
                }
            }
            if language.index.count(pair) == 0 {
                continue; // Nothing to merge (every pair is kept: floor 1).
            }
            let occurrences = match &mut self.global {
                Some(global) => {
                    let (_, occurrences) =
                        merge(&mut language.index, pair, new_id, |changed, _, delta| {
                            let total = global.pairs.entry(changed).or_insert(0);
                            *total += delta;
                            if delta > 0 && *total == delta {
                                global_made.push(changed);
                            }
                        });
                    language.scores.counted(pair, new_id, occurrences);
                    global_occurrences += occurrences;
                    occurrences
                }
                None => {
                    let (made, occurrences) =
                        merge(&mut language.index, pair, new_id, |_, _, _| {});
                    language.scores.merged(pair, new_id, occurrences, &made);
                    occurrences
                }
            };
            if language.dev.is_none() {
                *cost -= occurrences;
            }
        }
        if let Some(global) = &mut self.global {
            global.pairs.remove(&pair);
            global
                .scores
                .merged(pair, new_id, global_occurrences, &global_made);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::counting::Counter;
    use crate::wordpiece::WordPieceSettings;

    fn counts(texts: &[&str]) -> PieceCounts {
        Counter::bert(WordPieceSettings::default().normalizer, vec![])
            .unwrap()
            .count_texts(texts)
            .unwrap()
    }

    fn settings(vocab_size: usize) -> WordPieceTrainerSettings {
        WordPieceTrainerSettings {
            vocab_size,
            min_frequency: 2,
            limit_alphabet: None,
            model: WordPieceSettings::default(),
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

    fn run(
        languages: &[PieceCounts],
        target: Target,
        parity: &ParitySettings,
        vocab_size: usize,
    ) -> (WordPieceModel, ParityRecord) {
        let languages: Vec<&PieceCounts> = languages.iter().collect();
        train(
            &languages,
            target,
            &settings(vocab_size),
            parity,
            &Progress::silent(),
        )
        .unwrap()
    }

    fn all_global() -> ParitySettings {
        ParitySettings {
            global_merges: usize::MAX,
            ..ParitySettings::default()
        }
    }

    fn classical(languages: &[PieceCounts], vocab_size: usize) -> WordPieceModel {
        let mut total = PieceCounts::default();
        for language in languages {
            total.merge(language.clone());
        }
        super::super::train(total, &settings(vocab_size), &Progress::silent()).unwrap()
    }

    #[test]
    fn the_worst_off_language_gets_merges() {
        let (languages, dev) = skewed();
        let (_, parity) = run(
            &languages,
            Target::Dev(dev.clone()),
            &ParitySettings::default(),
            55,
        );
        let (_, global) = run(&languages, Target::Dev(dev), &all_global(), 55);
        let (parity, global) = (parity.tokens_after, global.tokens_after);
        // The costliest language costs less, and Finnish gains.
        let costliest = |c: &[u64]| c.iter().copied().max().unwrap();
        assert!(
            costliest(&parity) < costliest(&global),
            "{parity:?} vs {global:?}"
        );
        assert!(parity[1] < global[1], "{parity:?} vs {global:?}");
    }

    #[test]
    fn global_merges_alone_are_classical_training() {
        let (languages, dev) = skewed();
        let (model, record) = run(&languages, Target::Dev(dev), &all_global(), 60);
        assert!(record.chosen.iter().all(Option::is_none));
        assert_eq!(
            model.to_vocab_txt(),
            classical(&languages, 60).to_vocab_txt()
        );
    }

    #[test]
    fn two_copies_of_a_corpus_train_as_one() {
        // Each language's best pair is then the corpus's: the per-language
        // scores, pushed late, choose as classical training does.
        let text = "the quick brown fox jumps over the lazy dog and the cat naps ".repeat(6)
            + "quickly quietly queueing questions ";
        let corpus = counts(&[&text]);
        let languages = vec![corpus.clone(), corpus.clone()];
        let (model, record) = run(
            &languages,
            Target::Ratios(vec![1.0, 1.0]),
            &ParitySettings::default(),
            80,
        );
        assert!(record.chosen.iter().all(Option::is_some));
        assert_eq!(
            model.to_vocab_txt(),
            classical(&[corpus], 80).to_vocab_txt()
        );
    }

    #[test]
    fn the_hybrid_and_the_window() {
        let (languages, dev) = skewed();
        let hybrid = ParitySettings {
            global_merges: 5,
            ..ParitySettings::default()
        };
        let (_, record) = run(&languages, Target::Dev(dev.clone()), &hybrid, 60);
        assert!(record.chosen[..5].iter().all(Option::is_none));
        assert!(record.chosen[5..].iter().all(Option::is_some));
        let window = ParitySettings {
            window: Some((4, 1.0)),
            ..ParitySettings::default()
        };
        let (_, record) = run(&languages, Target::Ratios(vec![1.0, 1.0]), &window, 60);
        let chosen: Vec<u32> = record.chosen.iter().map(|c| c.unwrap()).collect();
        let both = chosen.iter().rposition(|&l| l == 1).unwrap();
        for run in chosen[..both].windows(5) {
            let before = run[..4].iter().filter(|&&l| l == run[4]).count();
            assert!(before <= 2, "{chosen:?}");
        }
    }

    #[test]
    fn bad_input_is_named() {
        let (languages, dev) = skewed();
        let refs: Vec<&PieceCounts> = languages.iter().collect();
        let error = |languages: &[&PieceCounts], target: Target| {
            train(
                languages,
                target,
                &settings(60),
                &ParitySettings::default(),
                &Progress::silent(),
            )
            .err()
            .unwrap()
            .to_string()
        };
        assert!(error(&refs[..1], Target::Ratios(vec![1.0])).contains("at least two languages"));
        assert!(error(&refs, Target::Dev(dev[..1].to_vec()))
            .contains("1 development sets for 2 languages"));
        let empty = PieceCounts::default();
        assert!(error(&[refs[0], &empty], Target::Dev(dev)).contains("language 1 has no text"));
    }
}
