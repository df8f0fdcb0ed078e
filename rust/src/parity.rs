//! What parity-aware training shares across the models: how each language's
//! cost is measured (`Target`), the variants (`ParitySettings`), the checks
//! of that input, and the choice of the language that is worst off now
//! (`Costs`). Each model's trainer decides what a step is: a merge for BPE
//! (`bpe/parity.rs`) and WordPiece (`wordpiece/parity.rs`), a round of
//! weights for Unigram's pruning.
//!
//! A language's cost is the tokens of its development text (a parallel
//! set: the same lines in every language, so the totals compare), or,
//! without one, the tokens of its training text now over those it started
//! with, times a target ratio per language (the inverse of the compression
//! it should reach, relative to the others').

use std::collections::VecDeque;

use crate::counting::PieceCounts;
use crate::error::{Error, Result};

/// How each language's cost is measured (see the module docs).
pub enum Target {
    /// Each language's development pieces, counted as its training text
    /// was, from the same lines in every language.
    Dev(Vec<PieceCounts>),
    /// A target compression ratio per language (relative: only their
    /// proportions matter).
    Ratios(Vec<f64>),
}

impl Target {
    /// Each language's development pieces (`None` with ratios) and the
    /// ratios (`None` with a development set), for `n` languages.
    pub fn into_parts(self, n: usize) -> (Vec<Option<PieceCounts>>, Option<Vec<f64>>) {
        match self {
            Target::Dev(dev) => (dev.into_iter().map(Some).collect(), None),
            Target::Ratios(ratios) => (vec![None; n], Some(ratios)),
        }
    }
}

/// The variants of parity-aware training.
#[derive(Clone, Debug, Default)]
pub struct ParitySettings {
    /// Merges chosen by counts over all languages before parity takes over.
    pub global_merges: usize,
    /// The moving window: `(window, share)`; a language chosen more than
    /// `share / n_languages` of the last `window` steps is passed over.
    pub window: Option<(usize, f64)>,
    /// The languages' names, for progress notes (their numbers without).
    pub names: Vec<String>,
}

/// What parity-aware training did, for the training record.
#[derive(Debug, Clone)]
pub struct ParityRecord {
    /// The language each step was chosen for (`None`: by counts over all
    /// languages).
    pub chosen: Vec<Option<u32>>,
    /// Each language's tokens (of its development text, or of its training
    /// text with ratios) before the first step and after the last.
    pub tokens_before: Vec<u64>,
    pub tokens_after: Vec<u64>,
    /// Distinct pieces over all languages.
    pub distinct_pieces: usize,
}

/// Refuses what parity-aware training cannot use, naming it.
pub fn check(languages: &[&PieceCounts], target: &Target, parity: &ParitySettings) -> Result<()> {
    let n = languages.len();
    if n < 2 {
        return Err(Error::invalid(
            "parity-aware training needs at least two languages",
        ));
    }
    let name = |i: usize| {
        parity.names.get(i).map_or_else(
            || format!("language {i}"),
            |name| format!("language {name:?}"),
        )
    };
    if let Some(i) = languages.iter().position(|counts| counts.is_empty()) {
        return Err(Error::Corpus(format!(
            "{} has no text to learn from",
            name(i)
        )));
    }
    match target {
        Target::Dev(dev) if dev.len() != n => {
            return Err(Error::invalid(format!(
                "{} development sets for {n} languages",
                dev.len()
            )));
        }
        Target::Dev(dev) => {
            if let Some(i) = dev.iter().position(PieceCounts::is_empty) {
                return Err(Error::invalid(format!(
                    "{} has an empty development set",
                    name(i)
                )));
            }
        }
        Target::Ratios(ratios) if ratios.len() != n => {
            return Err(Error::invalid(format!(
                "{} target ratios for {n} languages",
                ratios.len()
            )));
        }
        Target::Ratios(ratios) => {
            if ratios.iter().any(|r| !(r.is_finite() && *r > 0.0)) {
                return Err(Error::invalid("target ratios must be positive numbers"));
            }
        }
    }
    if let Some((window, share)) = parity.window {
        if window == 0 || !(share.is_finite() && share > 0.0) {
            return Err(Error::invalid(
                "the moving window needs a positive size and a positive share",
            ));
        }
    }
    Ok(())
}

/// How many distinct pieces the languages hold together.
pub fn distinct_pieces(languages: &[&PieceCounts]) -> usize {
    let mut seen: rustc_hash::FxHashSet<&[u8]> = rustc_hash::FxHashSet::default();
    for counts in languages {
        seen.extend(counts.pieces.iter().map(|(piece, _)| piece));
    }
    seen.len()
}

/// Each language's cost now, and the choice of the worst off.
pub struct Costs {
    /// Tokens of the text each language's cost is measured on, now.
    pub tokens: Vec<u64>,
    /// Tokens before the first step.
    pub before: Vec<u64>,
    /// Cost is `tokens * weight`.
    weight: Vec<f64>,
    /// Languages with nothing left to gain from, passed over.
    exhausted: Vec<bool>,
    window: Option<(usize, f64)>,
    /// The languages chosen for the last steps (the moving window).
    recent: VecDeque<u32>,
    /// The language each step was chosen for.
    pub chosen: Vec<Option<u32>>,
    names: Vec<String>,
}

impl Costs {
    /// Costs from each language's tokens at first; `ratios` when they are
    /// of its training text, weighed against target ratios.
    pub fn new(tokens: Vec<u64>, ratios: Option<&[f64]>, parity: &ParitySettings) -> Self {
        let n = tokens.len();
        let weight = match ratios {
            // Compression (tokens at first over tokens now) over the
            // ratio is smallest where tokens * ratio / tokens at first is
            // largest.
            Some(ratios) => tokens
                .iter()
                .zip(ratios)
                .map(|(&t, r)| r / ratios[0] / t.max(1) as f64)
                .collect(),
            None => vec![1.0; n],
        };
        Costs {
            before: tokens.clone(),
            tokens,
            weight,
            exhausted: vec![false; n],
            window: parity.window,
            recent: VecDeque::new(),
            chosen: Vec::new(),
            names: parity.names.clone(),
        }
    }

    pub fn cost(&self, language: usize) -> f64 {
        self.tokens[language] as f64 * self.weight[language]
    }

    /// Passes `language` over from now on.
    pub fn exhaust(&mut self, language: usize) {
        self.exhausted[language] = true;
    }

    /// The language that costs the most now (ties: the first), among those
    /// not exhausted; with the moving window, the worst of those chosen at
    /// most `share / n` of the last steps.
    pub fn worst(&self) -> Option<usize> {
        let n = self.tokens.len();
        let mut order: Vec<usize> = (0..n).filter(|&i| !self.exhausted[i]).collect();
        order.sort_by(|&a, &b| self.cost(b).total_cmp(&self.cost(a)).then(a.cmp(&b)));
        let Some((size, share)) = self.window else {
            return order.first().copied();
        };
        let limit = share / n as f64;
        order
            .iter()
            .copied()
            .find(|&i| {
                let times = self.recent.iter().filter(|&&l| l as usize == i).count();
                times as f64 / size as f64 <= limit
            })
            .or(order.first().copied())
    }

    /// Records the language a step was chosen for (`None`: by counts over
    /// all languages).
    pub fn choose(&mut self, language: Option<usize>) {
        self.chosen.push(language.map(|l| l as u32));
        if let (Some((window, _)), Some(language)) = (self.window, language) {
            if self.recent.len() == window {
                self.recent.pop_front();
            }
            self.recent.push_back(language as u32);
        }
    }

    /// For progress: the language that costs the most now, and its cost
    /// over the cheapest's (with ratios: against its target).
    pub fn note(&self) -> Option<String> {
        let costs = (0..self.tokens.len()).map(|i| self.cost(i));
        let cheapest = costs.clone().fold(f64::INFINITY, f64::min);
        let (worst, cost) = costs
            .enumerate()
            .max_by(|a, b| a.1.total_cmp(&b.1).then(b.0.cmp(&a.0)))?;
        let name = self
            .names
            .get(worst)
            .cloned()
            .unwrap_or_else(|| format!("language {worst}"));
        Some(format!(
            "costliest: {name}, {:.2}x the cheapest",
            cost / cheapest
        ))
    }

    /// The record, once training is over.
    pub fn record(self, distinct_pieces: usize) -> ParityRecord {
        ParityRecord {
            chosen: self.chosen,
            tokens_before: self.before,
            tokens_after: self.tokens,
            distinct_pieces,
        }
    }
}
