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
//! count); the required characters and the seeds are those of all
//! languages together, as classical training on the summed counts finds
//! them. `ParitySettings::global_merges` is the number of first rounds
//! with every weight 1 (classical); the record's `chosen` names the
//! costliest language of each round (with the moving window, as
//! `Costs::worst` picks it), or `None` for those first rounds. A language
//! whose text no piece shortens (its cost is its characters: rare
//! characters only) keeps its weight, lest it take all of it for nothing.
//!
//! Cost: one Viterbi pass over the development words per round (a few
//! thousand words), or with ratios over the training words (less than an
//! E-step's forward-backward), and a pass setting the words' weights; EM
//! and pruning cost what they cost classical training, the words of a
//! language being those of its own text. The weights are computed in
//! language order from integer token counts, and words' weighed counts are
//! added in fixed point or in a fixed order (`trainer.rs`), so the same
//! input gives the same model.

use rayon::prelude::*;
use rustc_hash::FxHashMap;

use super::trainer::{
    self, em_and_prune, finalize, n_meta, seeded, sorted_words, Seeded, Vocab, Words,
};
use super::{UnigramModel, UnigramTrainerSettings};
use crate::counting::PieceCounts;
use crate::error::Result;
use crate::parity::{distinct_pieces, Costs};
pub use crate::parity::{ParityRecord, ParitySettings, Target};
use crate::progress::Progress;

/// How fast the weights follow the costs: a language costing twice the
/// mean doubles its weight each round (about 14 rounds from a million
/// seeds to 16,000 pieces).
const ETA: f64 = 1.0;

/// Learns a model from each language's counted words (SentencePiece
/// counters'), parity-aware (see the module docs).
pub fn train_parity(
    languages: &[&PieceCounts],
    target: Target,
    settings: &UnigramTrainerSettings,
    parity: &ParitySettings,
    progress: &Progress,
) -> Result<(UnigramModel, ParityRecord)> {
    trainer::check(settings)?;
    crate::parity::check(languages, &target, parity)?;
    let distinct_pieces = distinct_pieces(languages);
    let (words, layout) = laid_out(
        languages
            .iter()
            .map(|counts| counts.counts.iter().map(|(w, &c)| (w.clone(), c)).collect()),
    );
    let Seeded {
        mut corpus,
        required,
        vocab,
    } = seeded(words, settings, progress)?;
    let (dev, ratios) = match target {
        Target::Dev(dev) => {
            let required: FxHashMap<char, u64> = required.iter().copied().collect();
            let (words, layout) = laid_out(dev.into_iter().map(|c| c.counts.into_iter().collect()));
            (Some((Words::new(&words, &required), layout)), None)
        }
        Target::Ratios(ratios) => (None, Some(ratios)),
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
        characters(words, words_layout, progress),
        ratios.as_deref(),
        parity,
    );
    let mut weights = Weights::new(&corpus, &layout);
    let mut round = 0;
    let vocab = em_and_prune(vocab, &mut corpus, settings, progress, |vocab, corpus| {
        let (words, words_layout) = measured(&dev, corpus, &layout);
        costs.tokens = tokens(vocab, words, words_layout, progress);
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
    costs.tokens = tokens(&Vocab::new(texts, scores), words, words_layout, progress);
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
        words.extend(sorted_words(language));
        starts.push(words.len());
    }
    (words, Layout { starts })
}

/// Each language's tokens with `vocab`: Σ count × pieces in each word's
/// best segmentation (an unknown character is one).
fn tokens(vocab: &Vocab, words: &Words, layout: &Layout, progress: &Progress) -> Vec<u64> {
    let unk_score = vocab.unk_score();
    let (tokens, _) = words.sum_over(layout.languages(), progress, |w, buffers, sums| {
        let mut pieces = 0;
        vocab.best_segmentation(words.word(w), unk_score, buffers, |_| pieces += 1);
        sums[layout.language(w)] += pieces * words.counts[w];
        0.0
    });
    tokens
}

/// Each language's characters: its tokens before any piece longer than one.
fn characters(words: &Words, layout: &Layout, progress: &Progress) -> Vec<u64> {
    let (characters, _) = words.sum_over(layout.languages(), progress, |w, _, sums| {
        // A character starts at every byte but UTF-8's continuation bytes
        // (a rare character is one byte, 0xFF).
        let starts = words.word(w).iter().filter(|&&b| b & 0xC0 != 0x80).count();
        sums[layout.language(w)] += starts as u64 * words.counts[w];
        0.0
    });
    characters
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
