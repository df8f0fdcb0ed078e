//! Parity-aware Unigram training: pruning that keeps the pieces the
//! worst-compressed languages rely on, so that every language costs about
//! the same number of tokens.
//!
//! Classical training (`trainer.rs`) prunes the pieces whose removal loses
//! least likelihood over the whole corpus, so a language with a hundredth
//! of the text has a hundredth of the say: its pieces go first, and its
//! text ends up cut into characters. Here each language `l` has a weight
//! `w_l`, and every word counts for its count times its language's weight,
//! in EM and in pruning alike. A piece's likelihood loss is then the sum of
//! each language's loss weighed by `w_l`: the pieces of a heavily weighed
//! language lose much when removed, and stay. The weights follow the
//! languages' costs: before each round of EM and pruning, each language's
//! tokens with the vocabulary then are measured, and
//! `w_l ← w_l × (cost_l / mean cost)^ETA`, scaled so that the words weigh
//! as much in all as they count (the M-step's Bayesian update and its
//! threshold of half an expected occurrence are not scale-free). The
//! languages that cost most gain weight round after round until their
//! pieces hold; those that cost least give some up. How a cost is measured
//! (`crate::parity`): `Target::Dev`, a parallel development set, its
//! tokens; `Target::Ratios`, the language's training text, its tokens over
//! its characters against a target ratio.
//!
//! The words of all languages are laid out together, language after
//! language (a word of two languages is there twice, each with its own
//! count); the seeds are those of all languages together, as classical
//! training on the summed counts finds them. The required characters are
//! those that make `character_coverage` of *each* language's text: over a
//! corpus that is mostly English, classical coverage leaves out the
//! characters of Chinese or Japanese, which then cost `<unk>` or three
//! bytes each whatever the weights. `ParitySettings::global_merges` is the number of first rounds
//! with every weight 1 (classical); the record's `chosen` names the
//! costliest language of each round (with the moving window, as
//! `Costs::worst` picks it), or `None` for those first rounds: the weights
//! follow every language's cost, not the choice. A language whose text no
//! seed shortens (its cost is its characters: rare characters only) is
//! passed over, its weight left out of the update, lest it take all the
//! weight for nothing.
//!
//! Cost: one Viterbi pass over the development words per round (a few
//! thousand words), or with ratios over the training words (less than an
//! E-step's forward-backward), and a pass setting the words' weights; EM
//! and pruning cost what they cost classical training (a word of several
//! languages is there once per language: a few percent more words). The
//! weights are computed in
//! language order from integer token counts, and words' weighed counts are
//! added in fixed point or in a fixed order (`trainer.rs`), so the same
//! input gives the same model.

use rayon::prelude::*;
use rustc_hash::FxHashMap;

use super::trainer::{
    self, count_characters, em_and_prune, finalize, n_meta, seeded, Seeded, Vocab, Words,
    RARE_BYTE, UNK,
};
use super::{UnigramModel, UnigramTrainerSettings};
use crate::counting::PieceCounts;
use crate::error::Result;
use crate::parity::{distinct_pieces, Costs, ParityRecord, ParitySettings, Target};
use crate::progress::Progress;

/// How fast the weights follow the costs: a language costing 10% more
/// than the mean gains 21% of weight a round (about a dozen rounds from a
/// million seeds to 16,000 pieces). Measured on the fairness benchmark
/// (`bench/fairness.py`, 32 languages, 16,000 and 32,000 pieces): 0.5
/// left the costs apart (Gini -48%, -39% against classical), 1 closed
/// less of the gap than 2 (-62%, -55%; 2: -66%, -66%), and 3 or 4 closed
/// it barely more for more tokens in all (-8% against classical at 3,
/// -9% at 2).
const ETA: f64 = 2.0;

/// Learns a model from each language's counted words (SentencePiece
/// counters'), parity-aware (see the module docs).
pub fn train(
    languages: &[&PieceCounts],
    target: Target,
    settings: &UnigramTrainerSettings,
    parity: &ParitySettings,
    progress: &Progress,
) -> Result<(UnigramModel, ParityRecord)> {
    trainer::check(settings)?;
    crate::parity::check(languages, &target, parity)?;
    let distinct_pieces = distinct_pieces(languages);
    let (words, layout) = laid_out(languages.iter().map(|counts| counts.sorted_owned()));
    // Each language's characters, for what its rare ones cost as bytes
    // (of the training text when it is what costs are measured on).
    let training_characters = (settings.byte_fallback && matches!(target, Target::Ratios(_)))
        .then(|| character_counts(&words, &layout));
    let Seeded {
        mut corpus,
        required,
        vocab,
    } = seeded(words, &layout.starts, settings, progress)?;
    let required_set: FxHashMap<char, u64> = required.iter().copied().collect();
    let (dev, ratios, measured_characters) = match target {
        Target::Dev(dev) => {
            let (words, layout) = laid_out(dev.iter().map(PieceCounts::sorted_owned));
            let characters = settings
                .byte_fallback
                .then(|| character_counts(&words, &layout));
            (
                Some((Words::new(&words, &required_set), layout)),
                None,
                characters,
            )
        }
        Target::Ratios(ratios) => (None, Some(ratios), training_characters),
    };
    // With byte fallback a rare character is its UTF-8 bytes, not one
    // `<unk>`: each language's tokens are those of its words with every
    // rare character one token, plus this.
    let unknown = Unknown {
        extra_bytes: measured_characters.map(|languages| {
            languages
                .iter()
                .map(|characters| {
                    characters
                        .iter()
                        .filter(|(c, _)| !required_set.contains_key(c))
                        .map(|&(c, n)| (c.len_utf8() as u64 - 1) * n)
                        .sum()
                })
                .collect()
        }),
    };
    // What each language's cost is measured on.
    fn measured<'a>(
        dev: &'a Option<(Words, Layout)>,
        corpus: &'a Words,
        layout: &'a Layout,
    ) -> (&'a Words, &'a Layout) {
        dev.as_ref()
            .map_or((corpus, layout), |(words, layout)| (words, layout))
    }
    let (words, words_layout) = measured(&dev, &corpus, &layout);
    let mut costs = Costs::new(
        characters(words, words_layout, &unknown, progress),
        ratios.as_deref(),
        parity,
    );
    let mut weights = Weights::new(&corpus, &layout);
    let mut round = 0;
    let vocab = em_and_prune(vocab, &mut corpus, settings, progress, |vocab, corpus| {
        let (words, words_layout) = measured(&dev, corpus, &layout);
        costs.tokens = tokens(vocab, words, words_layout, &unknown, progress);
        if round == 0 {
            // The seeds, every piece there will be: a language they do not
            // shorten, none will.
            weights.exhaust_unshortened(&mut costs);
        }
        if round < parity.global_merges {
            costs.choose(None);
        } else {
            weights.follow(&costs);
            costs.choose(costs.worst());
            corpus.weigh(|w| weights.weight[layout.language(w)]);
        }
        round += 1;
        Ok(costs.note())
    })?;
    let pieces = finalize(&vocab, &required, settings);
    // The costs with the final vocabulary, scores rounded as the model's.
    let (texts, scores) = pieces[n_meta(settings)..]
        .iter()
        .map(|p| (p.text.clone(), f64::from(p.score)))
        .unzip();
    let (words, words_layout) = measured(&dev, &corpus, &layout);
    costs.tokens = tokens(
        &Vocab::new(texts, scores),
        words,
        words_layout,
        &unknown,
        progress,
    );
    let model = UnigramModel::new(pieces, settings.byte_fallback, settings.whitespace)?;
    Ok((model, costs.record(distinct_pieces)))
}

/// Which language each word is of: language `l`'s words are
/// `starts[l]..starts[l + 1]`.
struct Layout {
    starts: Vec<usize>,
}

impl Layout {
    fn languages(&self) -> usize {
        self.starts.len() - 1
    }

    fn language(&self, word: usize) -> usize {
        self.starts.partition_point(|&start| start <= word) - 1
    }
}

/// Each language's words in byte order, one language after another.
fn laid_out(languages: impl Iterator<Item = Vec<(Vec<u8>, u64)>>) -> (Vec<(Vec<u8>, u64)>, Layout) {
    let mut words = Vec::new();
    let mut starts = vec![0];
    for language in languages {
        words.extend(language);
        starts.push(words.len());
    }
    (words, Layout { starts })
}

/// How the model encodes unknown (rare) characters: in a row, one `<unk>`;
/// with byte fallback (`extra_bytes`: each language's rare characters'
/// UTF-8 bytes past their first, weighted), each its bytes.
struct Unknown {
    extra_bytes: Option<Vec<u64>>,
}

impl Unknown {
    /// Each language's tokens, from its words' tokens with every rare
    /// character one token (`each_one`), or with those in a row one.
    fn tokens(&self, each_one: impl Fn(bool) -> Vec<u64>) -> Vec<u64> {
        match &self.extra_bytes {
            Some(extra) => each_one(false)
                .iter()
                .zip(extra)
                .map(|(t, e)| t + e)
                .collect(),
            None => each_one(true),
        }
    }
}

/// Each language's tokens with `vocab`: Σ count × pieces in each word's
/// best segmentation, unknown characters counted as the model encodes them
/// (`Unknown`).
fn tokens(
    vocab: &Vocab,
    words: &Words,
    layout: &Layout,
    unknown: &Unknown,
    progress: &Progress,
) -> Vec<u64> {
    let unk_score = vocab.unk_score();
    unknown.tokens(|merge_runs| {
        let (tokens, _) = words.sum_over(layout.languages(), progress, |w, buffers, sums| {
            let mut pieces = 0;
            let mut last = None;
            vocab.best_segmentation(words.word(w), unk_score, buffers, |id| {
                if !(merge_runs && id == UNK && last == Some(UNK)) {
                    pieces += 1;
                }
                last = Some(id);
            });
            sums[layout.language(w)] += pieces * words.counts[w];
            0.0
        });
        tokens
    })
}

/// Each language's characters: its tokens before any piece longer than one
/// (rare characters counted as `tokens` counts them).
fn characters(words: &Words, layout: &Layout, unknown: &Unknown, progress: &Progress) -> Vec<u64> {
    unknown.tokens(|merge_runs| {
        let (characters, _) = words.sum_over(layout.languages(), progress, |w, _, sums| {
            // A character starts at every byte but UTF-8's continuation
            // bytes; a rare character is one byte, 0xFF.
            let word = words.word(w);
            let starts = (0..word.len())
                .filter(|&i| {
                    word[i] & 0xC0 != 0x80
                        && !(merge_runs
                            && word[i] == RARE_BYTE
                            && i > 0
                            && word[i - 1] == RARE_BYTE)
                })
                .count();
            sums[layout.language(w)] += starts as u64 * words.counts[w];
            0.0
        });
        characters
    })
}

/// Each language's characters, weighted by their words' counts.
fn character_counts(words: &[(Vec<u8>, u64)], layout: &Layout) -> Vec<Vec<(char, u64)>> {
    layout
        .starts
        .windows(2)
        .map(|group| count_characters(&words[group[0]..group[1]]))
        .collect()
}

/// The languages' weights.
struct Weights {
    weight: Vec<f64>,
    /// The languages whose weights move (those some piece shortens).
    live: Vec<usize>,
    /// Each language's words (Σ counts), what the weights are scaled by.
    words: Vec<f64>,
}

impl Weights {
    fn new(corpus: &Words, layout: &Layout) -> Self {
        let words = layout
            .starts
            .windows(2)
            .map(|range| {
                let counts = &corpus.counts[range[0]..range[1]];
                counts.par_iter().sum::<u64>() as f64
            })
            .collect();
        Weights {
            weight: vec![1.0; layout.languages()],
            live: (0..layout.languages()).collect(),
            words,
        }
    }

    /// Passes over, from now on, the languages whose tokens now are their
    /// characters: no piece shortens their text, and a weight growing
    /// every round would take the whole corpus's for nothing.
    fn exhaust_unshortened(&mut self, costs: &mut Costs) {
        self.live.retain(|&l| {
            let shortened = costs.tokens[l] < costs.before[l];
            if !shortened {
                costs.exhaust(l);
            }
            shortened
        });
    }

    /// Moves each live language's weight by its cost over the mean cost
    /// (see the module docs).
    fn follow(&mut self, costs: &Costs) {
        if self.live.is_empty() {
            return;
        }
        let mean = self.live.iter().map(|&l| costs.cost(l)).sum::<f64>() / self.live.len() as f64;
        for &language in &self.live {
            self.weight[language] *= (costs.cost(language) / mean).powf(ETA);
        }
        let words: f64 = self.words.iter().sum();
        let weighed: f64 = self
            .weight
            .iter()
            .zip(&self.words)
            .map(|(w, n)| w * n)
            .sum();
        for weight in &mut self.weight {
            *weight *= words / weighed;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::counting::Counter;
    use crate::unigram::Whitespace;

    fn counts(lines: &[String]) -> PieceCounts {
        Counter::sentencepiece(Whitespace::default(), Vec::new())
            .unwrap()
            .count_texts(lines)
            .unwrap()
    }

    fn refs(languages: &[PieceCounts]) -> Vec<&PieceCounts> {
        languages.iter().collect()
    }

    fn settings(vocab_size: usize) -> UnigramTrainerSettings {
        UnigramTrainerSettings {
            character_coverage: 1.0,
            special_tokens: vec!["<s>".into(), "</s>".into()],
            ..UnigramTrainerSettings::new(vocab_size, Whitespace::default())
        }
    }

    /// Lines of two words each, the words made of one part from each of
    /// `parts` (every combination), each line `times` to three times as
    /// often.
    fn lines(parts: &[&[&str]], times: usize) -> Vec<String> {
        let mut words = vec![String::new()];
        for choices in parts {
            words = words
                .iter()
                .flat_map(|word| choices.iter().map(move |part| format!("{word}{part}")))
                .collect();
        }
        let n = words.len();
        (0..n)
            .flat_map(|k| {
                let line = format!("{} {}", words[k], words[(k * 7 + 3) % n]);
                std::iter::repeat_n(line, times * (1 + k % 3))
            })
            .collect()
    }

    const VOCAB: usize = 120;

    const ENGLISH: [&[&str]; 3] = [
        &["", "re", "un", "over"],
        &[
            "walk", "talk", "play", "jump", "read", "work", "look", "call",
        ],
        &["", "s", "ed", "ing", "er"],
    ];
    const FINNISH: [&[&str]; 3] = [
        &[
            "talo", "kissa", "koira", "metsä", "järvi", "kirja", "pöytä", "ikkuna",
        ],
        &["", "ssa", "sta", "lla", "lle", "ksi", "na", "t"],
        &["", "ni", "si", "mme"],
    ];

    /// A corpus where English has about forty times the text of Finnish,
    /// and each language's development lines.
    fn skewed() -> (Vec<PieceCounts>, Vec<Vec<String>>) {
        let english = lines(&ENGLISH, 40);
        let finnish = lines(&FINNISH, 1);
        let languages = vec![counts(&english), counts(&finnish)];
        let dev = vec![lines(&ENGLISH, 1), finnish];
        (languages, dev)
    }

    fn dev_counts(dev: &[Vec<String>]) -> Target {
        Target::Dev(dev.iter().map(|lines| counts(lines)).collect())
    }

    fn run(
        languages: &[PieceCounts],
        target: Target,
        parity: &ParitySettings,
    ) -> (UnigramModel, ParityRecord) {
        super::train(
            &refs(languages),
            target,
            &settings(VOCAB),
            parity,
            &Progress::silent(),
        )
        .unwrap()
    }

    /// Each language's development tokens as the model encodes them.
    fn encoded(model: &UnigramModel, dev: &[Vec<String>]) -> Vec<usize> {
        dev.iter()
            .map(|lines| lines.iter().map(|l| model.encode_text(l).len()).sum())
            .collect()
    }

    fn texts(model: &UnigramModel) -> Vec<(&str, f32)> {
        model
            .pieces()
            .iter()
            .map(|p| (p.text.as_str(), p.score))
            .collect()
    }

    #[test]
    fn the_worst_off_language_keeps_its_pieces() {
        let (languages, dev) = skewed();
        let (parity, record) = run(&languages, dev_counts(&dev), &ParitySettings::default());
        assert_eq!(parity.pieces().len(), VOCAB);
        let mut total = PieceCounts::default();
        for language in languages.clone() {
            total.merge(language);
        }
        let classical = super::super::train(total, &settings(VOCAB), &Progress::silent()).unwrap();
        let (parity_costs, classical_costs) = (encoded(&parity, &dev), encoded(&classical, &dev));
        let gap = |c: &[usize]| c[0].abs_diff(c[1]) as f64 / (c[0] + c[1]) as f64;
        assert!(
            gap(&parity_costs) < gap(&classical_costs),
            "{parity_costs:?} vs {classical_costs:?}"
        );
        assert!(parity_costs[1] < classical_costs[1]);
        // The record: Finnish costliest at first, costs measured as the
        // model encodes, after the last round.
        assert_eq!(record.chosen[0], Some(1), "{record:?}");
        assert_eq!(
            record.tokens_after,
            parity_costs.iter().map(|&c| c as u64).collect::<Vec<_>>()
        );
        assert!(record.tokens_before[1] > record.tokens_after[1]);
        for line in &dev[1] {
            assert_eq!(&parity.decode(&parity.encode_text(line)).unwrap(), line);
        }
    }

    #[test]
    fn deterministic() {
        let (languages, dev) = skewed();
        let (a, record_a) = run(&languages, dev_counts(&dev), &ParitySettings::default());
        let (b, record_b) = run(&languages, dev_counts(&dev), &ParitySettings::default());
        assert_eq!(texts(&a), texts(&b));
        assert_eq!(record_a.tokens_after, record_b.tokens_after);
    }

    #[test]
    fn ratios_steer_and_global_rounds_are_classical() {
        let (languages, _) = skewed();
        let ratios = |ratios: Vec<f64>| {
            let (model, record) = run(
                &languages,
                Target::Ratios(ratios),
                &ParitySettings::default(),
            );
            assert_eq!(model.pieces().len(), VOCAB);
            record
        };
        // A language asked to compress 4 times as much as the other.
        let english_first = ratios(vec![4.0, 1.0]);
        let finnish_first = ratios(vec![1.0, 4.0]);
        assert!(finnish_first.chosen.contains(&Some(1)), "{finnish_first:?}");
        // Tokens of the training text, fewer than its characters.
        assert!(finnish_first.tokens_after[1] < finnish_first.tokens_before[1]);
        assert!(
            finnish_first.tokens_after[1] < english_first.tokens_after[1],
            "{finnish_first:?} vs {english_first:?}"
        );
        // Every round classical: no language chosen.
        let (_, record) = run(
            &languages,
            Target::Ratios(vec![1.0, 1.0]),
            &ParitySettings {
                global_merges: usize::MAX,
                ..ParitySettings::default()
            },
        );
        assert!(record.chosen.iter().all(Option::is_none), "{record:?}");
    }

    #[test]
    fn every_language_is_covered_and_one_no_piece_shortens_is_passed_over() {
        let (mut languages, dev) = skewed();
        // Below the coverage of all the text, but each language's own
        // characters are covered.
        languages[1] = counts(&["ǂǀ ǂǀ".to_string()]);
        let dev = vec![dev[0].clone(), vec!["ǂǀ".to_string()]];
        let (model, record) = super::train(
            &refs(&languages),
            dev_counts(&dev),
            &UnigramTrainerSettings {
                character_coverage: 0.9995,
                ..settings(VOCAB)
            },
            &ParitySettings::default(),
            &Progress::silent(),
        )
        .unwrap();
        assert_eq!(model.pieces().len(), VOCAB);
        for c in ["ǂ", "ǀ"] {
            assert!(model.pieces().iter().any(|p| p.text == c), "{c}");
        }
        // Its three characters (▁ǂǀ) stay three tokens: no seed shortens
        // them, and it is passed over rather than weighed up every round.
        assert_eq!((record.tokens_before[1], record.tokens_after[1]), (3, 3));
        assert!(record.chosen.iter().all(|&c| c == Some(0)), "{record:?}");
    }

    #[test]
    fn bad_input_is_named() {
        let (languages, dev) = skewed();
        let train_with = |languages: Vec<PieceCounts>, target: Target, parity: ParitySettings| {
            super::train(
                &refs(&languages),
                target,
                &settings(VOCAB),
                &parity,
                &Progress::silent(),
            )
            .err()
            .unwrap()
            .to_string()
        };
        let default = ParitySettings::default;
        assert!(train_with(
            languages[..1].to_vec(),
            Target::Ratios(vec![1.0]),
            default()
        )
        .contains("at least two languages"));
        assert!(
            train_with(languages.clone(), dev_counts(&dev[..1]), default())
                .contains("1 development sets for 2 languages")
        );
        assert!(
            train_with(languages.clone(), Target::Ratios(vec![1.0, 0.0]), default())
                .contains("positive numbers")
        );
        let names = ParitySettings {
            names: vec!["eng".into(), "fin".into()],
            ..default()
        };
        assert!(train_with(
            vec![languages[0].clone(), PieceCounts::default()],
            dev_counts(&dev),
            names
        )
        .contains("language \"fin\" has no text"));
        assert!(train_with(
            languages.clone(),
            dev_counts(&dev),
            ParitySettings {
                window: Some((0, 1.0)),
                ..default()
            }
        )
        .contains("moving window"));
        let err = super::train(
            &refs(&languages),
            Target::Ratios(vec![1.0, 1.0]),
            &UnigramTrainerSettings {
                shrinking_factor: 1.0,
                ..settings(VOCAB)
            },
            &default(),
            &Progress::silent(),
        )
        .err()
        .unwrap()
        .to_string();
        assert!(err.contains("shrinking_factor"), "{err}");
    }
}
