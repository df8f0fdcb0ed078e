//! Unigram training (Kudo 2018), laid out as SentencePiece's trainer:
//!
//! 1. **Characters**: the most frequent characters that together make
//!    `character_coverage` of the text are required pieces; the rest are
//!    rare, never part of a piece (`<unk>`, or bytes with byte fallback).
//! 2. **Seeds** (`seeds.rs`): the characters and the most frequent
//!    substrings, with log-frequencies as first scores.
//! 3. **EM**: the E-step computes each piece's expected count by
//!    forward-backward over each word's lattice (all cores); the M-step sets
//!    scores by the Bayesian update digamma(count) − digamma(total), which
//!    favours sparse vocabularies, and drops pieces expected less than half a
//!    time.
//! 4. **Pruning**: for each piece, the loss of likelihood if it were removed
//!    and its occurrences in the best segmentations were replaced by its own
//!    best alternative segmentation; the pieces that lose least go, down to
//!    `shrinking_factor` of the vocabulary. EM and pruning repeat until the
//!    vocabulary is within 10% of the size asked for.
//! 5. **Final vocabulary**: the required characters, then the best-scored
//!    pieces up to the size asked for, exactly.
//!
//! Determinism: words are processed in a fixed order and expected counts
//! (and pruning's counts of pieces) are added in fixed point (2^-20), so
//! sums do not depend on how the threads split the work: the same corpus
//! and settings give the same vocabulary.
//!
//! Parity-aware training (`parity.rs`) runs the same steps on the words of
//! several languages, each word counting in EM and pruning for its count
//! times its language's weight (`Words::weigh`), which it sets before each
//! round (`em_and_prune`'s `reweigh`).
//!
//! Scaling: every step that grows with the corpus or the seeds runs on all
//! cores: counting characters, laying out the words, seeding, E-steps, the
//! M-step's scores, pruning's losses. A parallel quicksort partitions the
//! whole slice on one thread first, so byte strings are sorted with their
//! first 8 bytes beside them as a number (`vocab::sort_key`), which settles most
//! comparisons there; the per-thread vectors of sums are added slice by
//! slice on all cores. Sequential still: the floating-point sums over pieces (total
//! counts and frequencies, added in index order, which fixes their
//! rounding) and the trie builds, which read their keys copied one after
//! another in sorted order. (`examples/profile_train_unigram.rs` measures
//! the sequential share of the work.)
//!
//! Cost per E-step: O(Σ word bytes × matches per byte), with no allocation
//! per lattice node (each thread reuses its buffers). Probabilities are
//! multiplied, not added as logarithms: each piece's probability is scaled
//! by e^(−λ·bytes), with λ the corpus's log-likelihood per byte, which
//! multiplies every segmentation of a word by the same factor and keeps the
//! sums far from underflow; a word that still leaves the range of `f64` is
//! rescaled by its own best path.

use std::sync::Mutex;

use rayon::prelude::*;
use rustc_hash::{FxHashMap, FxHashSet};

use super::seeds::{seed_pieces, PieceRules, WordText, RARE};
use super::{Piece, PieceKind, UnigramModel, Whitespace};
use crate::counting::PieceCounts;
use crate::error::{Error, Result};
use crate::pair_index::drop_in_background;
use crate::progress::{Progress, Stage};
use crate::trie::Trie;
use crate::vocab::sort_key;

#[derive(Clone, Debug)]
pub struct UnigramTrainerSettings {
    /// Total size: unknown and special pieces, byte pieces, learned pieces.
    pub vocab_size: usize,
    /// The share of the text's characters the vocabulary must cover.
    pub character_coverage: f64,
    /// Rare characters encode as their UTF-8 bytes (`<0x00>`…`<0xFF>`).
    pub byte_fallback: bool,
    /// The unknown piece (id 0).
    pub unk_token: String,
    /// Control pieces, after the unknown piece (`<s>`, `</s>`, `<pad>`).
    pub special_tokens: Vec<String>,
    pub rules: PieceRules,
    /// Seed pieces, characters included.
    pub seed_size: usize,
    /// The share of pieces each pruning step keeps.
    pub shrinking_factor: f64,
    /// EM iterations between pruning steps.
    pub sub_iterations: usize,
    pub whitespace: Whitespace,
}

impl UnigramTrainerSettings {
    /// SentencePiece's defaults (those of `UnigramTokenizer.train` too) for
    /// a vocabulary of `vocab_size` pieces.
    pub fn new(vocab_size: usize, whitespace: Whitespace) -> Self {
        UnigramTrainerSettings {
            vocab_size,
            character_coverage: 0.9995,
            byte_fallback: false,
            unk_token: "<unk>".into(),
            special_tokens: ["<s>", "</s>", "<pad>"].map(String::from).to_vec(),
            rules: PieceRules {
                max_piece_chars: 16,
                split_by_script: true,
                split_digits: false,
            },
            seed_size: 1_000_000,
            shrinking_factor: 0.75,
            sub_iterations: 2,
            whitespace,
        }
    }
}

/// Fixed-point scale of expected counts: a millionth of an occurrence, and
/// room in a `u64` for 1.7 × 10^13 occurrences of one piece.
const SCALE: f64 = (1u64 << 20) as f64;
/// The unknown piece's score below the lowest score, as SentencePiece.
const UNK_PENALTY: f64 = 10.0;
/// Pieces expected less often than this are dropped by the M-step.
const MIN_EXPECTED: f64 = 0.5;
/// Stop pruning within this factor of the size asked for.
const DESIRED_SLACK: f64 = 1.1;
/// Words per unit of parallel work.
const CHUNK: usize = 512;
/// A lattice node that is the unknown piece.
pub(super) const UNK: u32 = u32::MAX;

/// Learns a Unigram model from counted words (a SentencePiece counter's).
pub fn train(
    counts: PieceCounts,
    settings: &UnigramTrainerSettings,
    progress: &Progress,
) -> Result<UnigramModel> {
    check(settings)?;
    if counts.is_empty() {
        return Err(Error::Corpus("the corpus has no text to train on".into()));
    }
    let words = counts.sorted_owned();
    drop_in_background(counts);
    let Seeded {
        mut corpus,
        required,
        vocab,
    } = seeded(words, &[], settings, progress)?;
    let vocab = em_and_prune(vocab, &mut corpus, settings, progress, |_, _| Ok(None))?;
    let pieces = finalize(&vocab, &required, settings);
    UnigramModel::new(pieces, settings.byte_fallback, settings.whitespace)
}

/// Where EM and pruning start.
pub(super) struct Seeded {
    pub(super) corpus: Words,
    /// The required characters, most frequent first.
    pub(super) required: Vec<(char, u64)>,
    pub(super) vocab: Vocab,
}

/// Steps 1 and 2: the words laid out, the required characters and the
/// seed vocabulary. `groups`: where each group of words starts, and the
/// end, when the characters must cover each group's text (each language's,
/// parity-aware) rather than all of it.
pub(super) fn seeded(
    words: Vec<(Vec<u8>, u64)>,
    groups: &[usize],
    settings: &UnigramTrainerSettings,
    progress: &Progress,
) -> Result<Seeded> {
    let n_meta = n_meta(settings);

    // 1. Characters.
    let required = required_characters(&words, groups, settings)?;
    let required_set: FxHashMap<char, u64> = required.iter().copied().collect();
    let corpus = Words::new(&words, &required_set);
    // Hundreds of thousands of allocations: freed on all cores.
    words.into_par_iter().for_each(drop);

    // 2. Seeds.
    progress.force(Stage::Seeding, 0, 1)?;
    let seeds = progress.watch(Stage::Seeding, 0, 1, || {
        Ok(seed_pieces(
            &corpus.word_text(),
            &required,
            settings.rules,
            settings.seed_size,
            progress.cancel_flag(),
        ))
    })?;
    progress.force(Stage::Seeding, 1, 1)?;
    let most = n_meta + seeds.len();
    if settings.vocab_size > most {
        return Err(Error::invalid(format!(
            "vocab_size {} is more than this corpus can give: at most {most} (the {n_meta} \
             special and byte pieces, {} characters and {} seen twice or more{})",
            settings.vocab_size,
            required.len(),
            plural(seeds.len() - required.len(), "substring"),
            if seeds.len() == settings.seed_size {
                "; raise seed_size for more"
            } else {
                ""
            }
        )));
    }
    let (pieces, frequencies): (Vec<String>, Vec<u64>) = seeds.into_iter().unzip();
    let log_total = frequencies.iter().map(|&f| f as f64).sum::<f64>().ln();
    let scores = frequencies
        .par_iter()
        .map(|&f| (f as f64).ln() - log_total)
        .collect();
    Ok(Seeded {
        corpus,
        required,
        vocab: Vocab::new(pieces, scores),
    })
}

/// Steps 3 and 4: EM and pruning, rounds of them, until the vocabulary is
/// within `DESIRED_SLACK` of the size asked for. Before each round (and
/// its EM), `reweigh` may change what each word counts for (the corpus's
/// `mass`) from the vocabulary then; what it returns is the round's
/// progress note.
pub(super) fn em_and_prune(
    mut vocab: Vocab,
    corpus: &mut Words,
    settings: &UnigramTrainerSettings,
    progress: &Progress,
    mut reweigh: impl FnMut(&Vocab, &mut Words) -> Result<Option<String>>,
) -> Result<Vocab> {
    let learned = learned(settings);
    let desired = ((settings.vocab_size as f64 * DESIRED_SLACK) as usize).max(learned);
    let mut shift = -3.0;
    let mut round = 0u64;
    loop {
        let total = round + remaining_prunes(vocab.len(), desired, settings.shrinking_factor) + 1;
        let note = reweigh(&vocab, corpus)?;
        progress.force_noted(Stage::Em, round, total, || note)?;
        for _ in 0..settings.sub_iterations {
            let (expected, log_likelihood) = progress.watch(Stage::Em, round, total, || {
                Ok(vocab.expectations(corpus, shift, progress))
            })?;
            shift = log_likelihood / corpus.total_bytes;
            vocab = vocab.maximize(&expected, learned);
        }
        round += 1;
        if vocab.len() <= desired {
            break;
        }
        let kept = progress.watch(Stage::Em, round, total, || {
            Ok(vocab.prune(corpus, desired, settings.shrinking_factor, progress))
        })?;
        if kept.len() == vocab.len() {
            // Nothing can go: the pieces left have no other segmentation
            // (single characters). `finalize` takes the best of them.
            break;
        }
        let scores = kept.iter().map(|&i| vocab.scores[i]).collect();
        vocab = vocab.keep(&kept, scores);
    }
    progress.force(Stage::Em, round, round)?;
    Ok(vocab)
}

/// The learned pieces: all but the unknown, special and byte pieces.
fn learned(settings: &UnigramTrainerSettings) -> usize {
    settings.vocab_size - n_meta(settings)
}

/// The unknown, special and byte pieces.
pub(super) fn n_meta(settings: &UnigramTrainerSettings) -> usize {
    1 + settings.special_tokens.len() + if settings.byte_fallback { 256 } else { 0 }
}

/// The characters that make `character_coverage` of the words' text (with
/// `groups`, of each group's text), most frequent first (the others are
/// unknown, or bytes with byte fallback); an error if they and the meta
/// pieces exceed the vocabulary.
fn required_characters(
    words: &[(Vec<u8>, u64)],
    groups: &[usize],
    settings: &UnigramTrainerSettings,
) -> Result<Vec<(char, u64)>> {
    // The most frequent characters that make `character_coverage` of
    // `characters` (most frequent first).
    let covering = |characters: &[(char, u64)]| -> usize {
        let total: u64 = characters.iter().map(|&(_, n)| n).sum();
        let mut covered = 0u64;
        characters
            .iter()
            .take_while(|&&(_, n)| {
                let enough = covered as f64 >= settings.character_coverage * total as f64;
                covered += n;
                !enough
            })
            .count()
    };
    let characters = count_characters(words);
    let required: Vec<(char, u64)> = if groups.len() < 3 {
        characters[..covering(&characters)].to_vec()
    } else {
        let mut kept: FxHashSet<char> = FxHashSet::default();
        for group in groups.windows(2) {
            let own = count_characters(&words[group[0]..group[1]]);
            kept.extend(own[..covering(&own)].iter().map(|&(c, _)| c));
        }
        characters
            .into_iter()
            .filter(|(c, _)| kept.contains(c))
            .collect()
    };
    let n_meta = n_meta(settings);
    let least = n_meta + required.len();
    if settings.vocab_size < least {
        return Err(Error::invalid(format!(
            "vocab_size {} is too small: the {} special and byte pieces and the {} characters \
             that make {}% of the text need {least} (lower character_coverage to need fewer)",
            settings.vocab_size,
            n_meta,
            required.len(),
            settings.character_coverage * 100.0
        )));
    }
    Ok(required)
}

/// Learns a SentencePiece BPE model from counted words (a SentencePiece
/// counter's) with polytok's BPE trainer (`bpe::train_characters`): the
/// required characters are the symbols (a word is cut at any other
/// character, which is never part of a piece, and where the rules cut it:
/// `PieceRules::runs`), the most frequent pair merges first, pieces have
/// at most `max_piece_chars` characters. The
/// model's pieces, as SentencePiece lays out a BPE model: the unknown,
/// special and byte pieces, the merged pieces in merge order scored 0, -1,
/// -2, ... (so that encoding replays the merges in training order), then
/// the characters, most frequent first, scored on below. `min_frequency`:
/// pairs seen fewer times are never merged.
pub fn train_bpe(
    counts: PieceCounts,
    settings: &UnigramTrainerSettings,
    min_frequency: u64,
    progress: &Progress,
) -> Result<UnigramModel> {
    check(settings)?;
    if counts.is_empty() {
        return Err(Error::Corpus("the corpus has no text to train on".into()));
    }
    // Sorted: the same input order, so the same merges among ties' ids.
    let words = counts.sorted_owned();
    drop_in_background(counts);
    let required = required_characters(&words, &[], settings)?;
    let symbol_of: FxHashMap<char, u32> = required
        .iter()
        .enumerate()
        .map(|(i, &(c, _))| (c, i as u32))
        .collect();
    let symbols: Vec<(Vec<u32>, u64)> = words
        .par_iter()
        .flat_map_iter(|(word, count)| {
            let text = std::str::from_utf8(word).expect("counted text is UTF-8");
            let mut runs = Vec::new();
            settings.rules.runs(
                text,
                |c| symbol_of.contains_key(&c),
                |run| {
                    if run.chars().nth(1).is_some() {
                        runs.push((run.chars().map(|c| symbol_of[&c]).collect(), *count));
                    }
                },
            );
            runs
        })
        .collect();
    drop(words);
    let max_merges = settings.vocab_size - n_meta(settings) - required.len();
    let alphabet = required.iter().map(|&(c, _)| c.to_string()).collect();
    let merged = crate::bpe::train_characters(
        &symbols,
        alphabet,
        max_merges,
        min_frequency,
        settings.rules.max_piece_chars,
        progress,
    )?;
    if merged.len() < max_merges {
        return Err(Error::invalid(format!(
            "vocab_size {} is more than this corpus can give: at most {} (no pair is left to merge{})",
            settings.vocab_size,
            settings.vocab_size - (max_merges - merged.len()),
            if min_frequency > 1 { " as often as min_frequency" } else { "" }
        )));
    }
    let mut pieces = meta_pieces(settings);
    // Two merge paths can spell one piece ("ab" + "c", "a" + "bc"): the
    // first merge, which scores higher, keeps it.
    let mut seen = rustc_hash::FxHashSet::default();
    let learned = merged
        .into_iter()
        .filter(|text| seen.insert(text.clone()))
        .chain(required.into_iter().map(|(c, _)| c.to_string()));
    pieces.extend(learned.enumerate().map(|(i, text)| Piece {
        text,
        score: -(i as f32),
        kind: PieceKind::Normal,
    }));
    UnigramModel::new(pieces, settings.byte_fallback, settings.whitespace)?
        .with_segmentation(super::Segmentation::Bpe)
}

/// "1 substring", "2 substrings".
fn plural(n: usize, noun: &str) -> String {
    format!("{n} {noun}{}", if n == 1 { "" } else { "s" })
}

pub(super) fn check(settings: &UnigramTrainerSettings) -> Result<()> {
    let s = settings;
    if !(s.character_coverage > 0.0 && s.character_coverage <= 1.0) {
        return Err(Error::invalid(format!(
            "character_coverage must be in (0, 1], not {}",
            s.character_coverage
        )));
    }
    // Bounds that keep a run finite in practice: each pruning round costs
    // `sub_iterations` passes of EM, and a factor near 1 makes thousands of
    // rounds.
    if !(s.shrinking_factor > 0.0 && s.shrinking_factor <= 0.99) {
        return Err(Error::invalid(format!(
            "shrinking_factor must be in (0, 0.99], not {}",
            s.shrinking_factor
        )));
    }
    if !(1..=100).contains(&s.sub_iterations) {
        return Err(Error::invalid(format!(
            "sub_iterations must be in 1..=100, not {}",
            s.sub_iterations
        )));
    }
    if !(1..=100_000_000).contains(&s.seed_size) {
        return Err(Error::invalid(format!(
            "seed_size must be in 1..=100000000, not {}",
            s.seed_size
        )));
    }
    if !(1..=255).contains(&s.rules.max_piece_chars) {
        return Err(Error::invalid(format!(
            "max_piece_length must be in 1..=255, not {}",
            s.rules.max_piece_chars
        )));
    }
    let mut seen = std::collections::HashSet::new();
    for token in std::iter::once(&s.unk_token).chain(&s.special_tokens) {
        if token.is_empty() {
            return Err(Error::invalid("a special token is empty"));
        }
        if !seen.insert(token) {
            return Err(Error::invalid(format!(
                "special token {token:?} given twice"
            )));
        }
    }
    Ok(())
}

/// Each character with its count in the corpus, the most frequent first
/// (ties: the smaller character first).
pub(super) fn count_characters(words: &[(Vec<u8>, u64)]) -> Vec<(char, u64)> {
    let counts = words
        .par_chunks(CHUNK)
        .map(|chunk| {
            let mut counts: FxHashMap<char, u64> = FxHashMap::default();
            for (word, count) in chunk {
                for c in std::str::from_utf8(word)
                    .expect("counted text is UTF-8")
                    .chars()
                {
                    *counts.entry(c).or_insert(0) += count;
                }
            }
            counts
        })
        .reduce(FxHashMap::default, |mut total, counts| {
            for (c, count) in counts {
                *total.entry(c).or_insert(0) += count;
            }
            total
        });
    let mut sorted: Vec<(char, u64)> = counts.into_iter().collect();
    sorted.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    sorted
}

/// How many more pruning steps take `size` pieces to `desired`.
fn remaining_prunes(size: usize, desired: usize, shrinking_factor: f64) -> u64 {
    if size <= desired {
        0
    } else {
        ((desired as f64 / size as f64).ln() / shrinking_factor.ln()).ceil() as u64
    }
}

/// The distinct words (of each language, in parity-aware training), their
/// bytes one after the other (a rare character as the byte 0xFF, which no
/// piece holds), with their counts.
pub(super) struct Words {
    bytes: Vec<u8>,
    /// Word `i` is `bytes[ends[i]..ends[i + 1]]`.
    ends: Vec<usize>,
    pub(super) counts: Vec<u64>,
    /// What each word counts for in EM and pruning: its count, unless
    /// `weigh` changed it.
    mass: Vec<f64>,
    /// Σ mass × bytes.
    total_bytes: f64,
}

/// The stand-in of a rare character in `Words`.
pub(super) const RARE_BYTE: u8 = 0xFF;

impl Words {
    pub(super) fn new(words: &[(Vec<u8>, u64)], required: &FxHashMap<char, u64>) -> Self {
        let (bytes, ends) = join_in_order(words.len(), |w, bytes| {
            for c in std::str::from_utf8(&words[w].0)
                .expect("counted text is UTF-8")
                .chars()
            {
                if required.contains_key(&c) {
                    let mut buf = [0u8; 4];
                    bytes.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
                } else {
                    bytes.push(RARE_BYTE);
                }
            }
        });
        let counts: Vec<u64> = words.iter().map(|&(_, count)| count).collect();
        let mut words = Words {
            bytes,
            ends,
            mass: counts.par_iter().map(|&c| c as f64).collect(),
            counts,
            total_bytes: 0.0,
        };
        words.total_bytes = words.total_bytes();
        words
    }

    /// Σ mass × bytes, added in a fixed order (chunks, then their sums in
    /// order): the same number however the threads split the work.
    fn total_bytes(&self) -> f64 {
        let chunks: Vec<f64> = self
            .mass
            .par_chunks(CHUNK)
            .enumerate()
            .map(|(chunk, mass)| {
                let first = chunk * CHUNK;
                mass.iter()
                    .enumerate()
                    .map(|(i, m)| (self.ends[first + i + 1] - self.ends[first + i]) as f64 * m)
                    .sum::<f64>()
            })
            .collect();
        chunks.iter().sum()
    }

    /// Each word counts for its count times `weight(word)` from now on.
    pub(super) fn weigh(&mut self, weight: impl Fn(usize) -> f64 + Sync) {
        let counts = &self.counts;
        self.mass
            .par_iter_mut()
            .enumerate()
            .for_each(|(w, mass)| *mass = counts[w] as f64 * weight(w));
        self.total_bytes = self.total_bytes();
    }

    pub(super) fn len(&self) -> usize {
        self.counts.len()
    }

    pub(super) fn word(&self, i: usize) -> &[u8] {
        &self.bytes[self.ends[i]..self.ends[i + 1]]
    }

    /// The words as characters, for seeding.
    fn word_text(&self) -> WordText {
        let (chars, mut starts) = join_in_order(self.len(), |i, chars| {
            let mut at = 0;
            let word = self.word(i);
            while at < word.len() {
                let len = char_len(word[at]);
                chars.push(if word[at] == RARE_BYTE {
                    RARE
                } else {
                    let c = std::str::from_utf8(&word[at..at + len]).expect("UTF-8");
                    u32::from(c.chars().next().expect("one character"))
                });
                at += len;
            }
            chars.push(u32::MAX);
        });
        starts.pop();
        WordText {
            chars,
            starts,
            counts: self.counts.clone(),
        }
    }

    /// Calls `work(word, buffers, sums)` for every word on all cores, and
    /// returns the integer `sums` (of `slots` entries) added over all words
    /// and the sum of what `work` returns, both independent of the threads.
    /// Once `progress` is cancelled, the remaining words are skipped.
    pub(super) fn sum_over<F>(&self, slots: usize, progress: &Progress, work: F) -> (Vec<u64>, f64)
    where
        F: Fn(usize, &mut Buffers, &mut [u64]) -> f64 + Sync,
    {
        // A thread takes a vector of sums from the pool for each chunk and
        // gives it back: there are never more vectors than threads.
        let pool: Mutex<Vec<Vec<u64>>> = Mutex::new(Vec::new());
        let partial: Vec<f64> = (0..self.len().div_ceil(CHUNK))
            .into_par_iter()
            .map_init(Buffers::default, |buffers, chunk| {
                let taken = pool.lock().unwrap_or_else(|e| e.into_inner()).pop();
                let mut sums = taken.unwrap_or_else(|| vec![0; slots]);
                let end = ((chunk + 1) * CHUNK).min(self.len());
                let end = if progress.cancelled() {
                    chunk * CHUNK
                } else {
                    end
                };
                let value = (chunk * CHUNK..end)
                    .map(|word| work(word, buffers, &mut sums))
                    .sum::<f64>();
                pool.lock().unwrap_or_else(|e| e.into_inner()).push(sums);
                value
            })
            .collect();
        let mut vectors = pool.into_inner().unwrap_or_else(|e| e.into_inner());
        let mut total = vectors.pop().unwrap_or_else(|| vec![0; slots]);
        // Integers: any order of addition gives the same sums.
        total
            .par_chunks_mut(CHUNK)
            .enumerate()
            .for_each(|(chunk, sums)| {
                for other in &vectors {
                    for (sum, o) in sums.iter_mut().zip(&other[chunk * CHUNK..]) {
                        *sum += o;
                    }
                }
            });
        (total, partial.iter().sum())
    }
}

/// Calls `write(i, out)` for `i` in `0..n` on all cores (in chunks of
/// `CHUNK`) and joins what they wrote in order of `i`; also returns where
/// each part starts, and the total length last.
fn join_in_order<T: Copy + Default + Send + Sync>(
    n: usize,
    write: impl Fn(usize, &mut Vec<T>) + Sync,
) -> (Vec<T>, Vec<usize>) {
    let parts: Vec<(Vec<T>, Vec<usize>)> = (0..n.div_ceil(CHUNK))
        .into_par_iter()
        .map(|chunk| {
            let mut out = Vec::new();
            let mut starts = Vec::with_capacity(CHUNK);
            for i in chunk * CHUNK..((chunk + 1) * CHUNK).min(n) {
                starts.push(out.len());
                write(i, &mut out);
            }
            (out, starts)
        })
        .collect();
    // Copied on all cores too. (Zeros, as for bytes and characters, are
    // fresh pages that are first touched there.)
    let mut joined = vec![T::default(); parts.iter().map(|(out, _)| out.len()).sum()];
    let mut rest = joined.as_mut_slice();
    let mut offset = 0;
    let mut starts = Vec::with_capacity(n + 1);
    let mut slices = Vec::with_capacity(parts.len());
    for (out, part_starts) in &parts {
        starts.extend(part_starts.iter().map(|start| offset + start));
        offset += out.len();
        let (slice, tail) = std::mem::take(&mut rest).split_at_mut(out.len());
        slices.push(slice);
        rest = tail;
    }
    starts.push(offset);
    slices
        .into_par_iter()
        .zip(&parts)
        .for_each(|(slice, (out, _))| slice.copy_from_slice(out));
    (joined, starts)
}

/// The length of the character that starts with `first` in `Words`.
fn char_len(first: u8) -> usize {
    match first {
        RARE_BYTE => 1,
        _ => super::encoder::utf8_len(first),
    }
}

/// A piece occurrence in a word's lattice.
#[derive(Clone, Copy)]
struct Node {
    start: u32,
    end: u32,
    /// The piece, or `UNK`.
    id: u32,
    /// Its (scaled) probability, or its score.
    weight: f64,
}

/// A thread's reusable lattice buffers.
#[derive(Default)]
pub(super) struct Buffers {
    nodes: Vec<Node>,
    forward: Vec<f64>,
    backward: Vec<f64>,
    /// Best path: (score, node index) ending at each byte.
    best: Vec<(f64, u32)>,
}

/// The vocabulary during training.
pub(super) struct Vocab {
    pieces: Vec<String>,
    scores: Vec<f64>,
    /// Built over the pieces of some earlier step, a superset of these.
    trie: Trie,
    /// Trie value -> index in `pieces`, or `UNK` if that piece is gone.
    slot: Vec<u32>,
}

impl Vocab {
    pub(super) fn new(pieces: Vec<String>, scores: Vec<f64>) -> Self {
        let mut keys: Vec<(u64, &[u8], u32)> = pieces
            .par_iter()
            .zip(0..pieces.len() as u32)
            .map(|(p, i)| (sort_key(p.as_bytes()), p.as_bytes(), i))
            .collect();
        keys.par_sort_unstable_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.cmp(b.1)));
        // Copied one after another in sorted order: `Trie::new` (on one
        // thread) then finds them sorted at once, and reads them in order
        // rather than from each piece's own allocation (about twice faster).
        let (joined, ends) = join_in_order(keys.len(), |k, out| out.extend_from_slice(keys[k].1));
        let trie = Trie::new(
            keys.iter()
                .enumerate()
                .map(|(k, &(_, _, i))| (&joined[ends[k]..ends[k + 1]], i)),
        );
        let slot = (0..pieces.len() as u32).collect();
        Vocab {
            pieces,
            scores,
            trie,
            slot,
        }
    }

    pub(super) fn len(&self) -> usize {
        self.pieces.len()
    }

    /// The vocabulary of the pieces `kept` (indices, ascending) with new
    /// scores; the trie is kept unless most of it is gone.
    fn keep(self, kept: &[usize], scores: Vec<f64>) -> Self {
        let Vocab {
            pieces: mut old_pieces,
            trie,
            slot,
            ..
        } = self;
        let pieces: Vec<String> = kept
            .iter()
            .map(|&i| std::mem::take(&mut old_pieces[i]))
            .collect();
        if kept.len() * 2 < slot.len() {
            return Vocab::new(pieces, scores);
        }
        let mut new_index = vec![UNK; old_pieces.len()];
        for (new, &old) in kept.iter().enumerate() {
            new_index[old] = new as u32;
        }
        let slot = slot
            .par_iter()
            .map(|&old| {
                if old == UNK {
                    UNK
                } else {
                    new_index[old as usize]
                }
            })
            .collect();
        Vocab {
            pieces,
            scores,
            trie,
            slot,
        }
    }

    pub(super) fn unk_score(&self) -> f64 {
        // The minimum of finite numbers: the same in any order.
        self.scores
            .par_iter()
            .copied()
            .reduce(|| f64::INFINITY, f64::min)
            - UNK_PENALTY
    }

    /// The lattice of `word` into `nodes`, by start: every piece at every
    /// character start, and the unknown piece over each character that no
    /// piece covers alone; each node's `weight` from `weights` (by piece) or
    /// `unk_weight`.
    fn lattice(&self, word: &[u8], weights: &[f64], unk_weight: f64, nodes: &mut Vec<Node>) {
        nodes.clear();
        let mut start = 0;
        while start < word.len() {
            let len = char_len(word[start]).min(word.len() - start);
            let mut single = false;
            let mut node = Trie::ROOT;
            for end in start + 1..=word.len() {
                let Some(next) = self.trie.child(node, word[end - 1]) else {
                    break;
                };
                node = next;
                if let Some(slot) = self.trie.value(node) {
                    let id = self.slot[slot as usize];
                    if id != UNK {
                        nodes.push(Node {
                            start: start as u32,
                            end: end as u32,
                            id,
                            weight: weights[id as usize],
                        });
                        single |= end - start == len;
                    }
                }
            }
            if !single {
                nodes.push(Node {
                    start: start as u32,
                    end: (start + len) as u32,
                    id: UNK,
                    weight: unk_weight,
                });
            }
            start += len;
        }
    }

    /// The E-step: each piece's expected count (fixed point) over the
    /// corpus, and the corpus's log-likelihood.
    fn expectations(&self, corpus: &Words, shift: f64, progress: &Progress) -> (Vec<u64>, f64) {
        let unk_score = self.unk_score();
        let probabilities: Vec<f64> = self.scores.par_iter().map(|s| s.exp()).collect();
        let max_len = self
            .pieces
            .par_iter()
            .map(|p| p.len())
            .max()
            .unwrap_or(1)
            .max(4);
        let scales =
            |shift: f64| -> Vec<f64> { (0..=max_len).map(|n| (-shift * n as f64).exp()).collect() };
        let scale = scales(shift);
        corpus.sum_over(self.len(), progress, |w, buffers, sums| {
            let word = corpus.word(w);
            let count = corpus.mass[w];
            let n = word.len();
            self.lattice(word, &probabilities, unk_score.exp(), &mut buffers.nodes);
            let mut word_shift = shift;
            let mut log_z = forward_backward(n, &scale, buffers);
            if log_z.is_none() {
                // Out of range: scale by this word's own best path instead.
                let best = self.best_segmentation(word, unk_score, buffers, |_| {});
                word_shift = best / n as f64;
                self.lattice(word, &probabilities, unk_score.exp(), &mut buffers.nodes);
                log_z = forward_backward(n, &scales(word_shift), buffers);
            }
            let Some(log_z) = log_z else {
                // Still out of range (a word of megabytes): its best path
                // takes the whole count.
                let best = self.best_segmentation(word, unk_score, buffers, |id| {
                    if id != UNK {
                        sums[id as usize] += (count * SCALE).round() as u64;
                    }
                });
                return count * best;
            };
            let z = buffers.forward[n];
            for node in &buffers.nodes {
                if node.id != UNK {
                    let marginal = buffers.forward[node.start as usize]
                        * node.weight
                        * buffers.backward[node.end as usize]
                        / z;
                    sums[node.id as usize] += (count * marginal * SCALE).round() as u64;
                }
            }
            count * (log_z + word_shift * n as f64)
        })
    }

    /// The M-step: scores from expected counts by the Bayesian update;
    /// pieces expected less than `MIN_EXPECTED` times go, unless that would
    /// leave fewer than `keep_at_least`.
    fn maximize(self, expected: &[u64], keep_at_least: usize) -> Self {
        let counts: Vec<f64> = expected.par_iter().map(|&e| e as f64 / SCALE).collect();
        let mut kept: Vec<usize> = (0..self.len())
            .filter(|&i| counts[i] >= MIN_EXPECTED)
            .collect();
        if kept.len() < keep_at_least.min(self.len()) {
            let mut order: Vec<usize> = (0..self.len()).collect();
            order.sort_by(|&a, &b| counts[b].total_cmp(&counts[a]).then(a.cmp(&b)));
            kept = order[..keep_at_least.min(self.len())].to_vec();
            kept.sort_unstable();
        }
        // A piece kept with (almost) no expected count still needs a finite score.
        let count_of = |i: usize| counts[i].max(0.1);
        let total: f64 = kept.iter().map(|&i| count_of(i)).sum();
        let log_total = digamma(total);
        let scores = kept
            .par_iter()
            .map(|&i| digamma(count_of(i)) - log_total)
            .collect();
        self.keep(&kept, scores)
    }

    /// Pruning: the pieces to keep (indices, ascending), those whose removal
    /// would lose most likelihood, `shrinking_factor` of them (at least
    /// `desired`).
    fn prune(
        &self,
        corpus: &Words,
        desired: usize,
        shrinking_factor: f64,
        progress: &Progress,
    ) -> Vec<usize> {
        let unk_score = self.unk_score();
        // How often each piece is in the corpus's best segmentations (fixed
        // point, as expected counts).
        let (frequency, _) = corpus.sum_over(self.len(), progress, |w, buffers, sums| {
            let mass = (corpus.mass[w] * SCALE).round() as u64;
            self.best_segmentation(corpus.word(w), unk_score, buffers, |id| {
                if id != UNK {
                    sums[id as usize] += mass;
                }
            });
            0.0
        });
        let frequency: Vec<f64> = frequency.par_iter().map(|&f| f as f64 / SCALE).collect();
        let sum: f64 = frequency.iter().sum();
        let all_words: f64 = corpus.mass.iter().sum();
        let log_sum = sum.ln();

        // The pieces in the best segmentations, each with the likelihood lost
        // if its own best segmentation without it replaced it, or `None` if
        // nothing can (it stays). A piece whose best segmentation is already
        // another goes.
        let losses: Vec<Option<(usize, Option<f64>)>> = (0..self.len())
            .into_par_iter()
            .map_init(Buffers::default, |buffers, i| {
                let f = frequency[i];
                if f == 0.0 {
                    return None;
                }
                match self.alternative(i as u32, unk_score, buffers) {
                    Alternative::Better => None,
                    Alternative::None => Some((i, None)),
                    Alternative::Pieces(others) => {
                        let log_sum_alt = (sum + f * (others.len() as f64 - 1.0)).ln();
                        let log_p_alt: f64 = others
                            .iter()
                            .map(|&o| (frequency[o as usize] + f).ln() - log_sum_alt)
                            .sum();
                        let loss = (f.ln() - log_sum) - log_p_alt;
                        Some((i, Some(f / all_words * loss)))
                    }
                }
            })
            .collect();
        let mut kept: Vec<usize> = losses
            .iter()
            .flatten()
            .filter(|(_, loss)| loss.is_none())
            .map(|&(i, _)| i)
            .collect();
        let mut candidates: Vec<(f64, usize)> = losses
            .iter()
            .flatten()
            .filter_map(|&(i, loss)| Some((loss?, i)))
            .collect();
        let target = ((shrinking_factor * self.len() as f64) as usize).max(desired);
        candidates.par_sort_unstable_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        let room = target.saturating_sub(kept.len());
        kept.extend(candidates.iter().take(room).map(|&(_, i)| i));
        kept.par_sort_unstable();
        kept
    }

    /// Viterbi: calls `visit` with each piece of `word`'s best segmentation
    /// (`UNK`: an unknown character), last first; returns its score.
    pub(super) fn best_segmentation(
        &self,
        word: &[u8],
        unk_score: f64,
        buffers: &mut Buffers,
        mut visit: impl FnMut(u32),
    ) -> f64 {
        self.lattice(word, &self.scores, unk_score, &mut buffers.nodes);
        let (best, _) = best_path(word.len(), &buffers.nodes, &mut buffers.best);
        let mut end = word.len();
        while end > 0 {
            let node = buffers.nodes[buffers.best[end].1 as usize];
            visit(node.id);
            end = node.start as usize;
        }
        best
    }

    /// How piece `i` would be segmented without it.
    fn alternative(&self, i: u32, unk_score: f64, buffers: &mut Buffers) -> Alternative {
        let text = self.pieces[i as usize].as_bytes();
        self.lattice(text, &self.scores, unk_score, &mut buffers.nodes);
        buffers.nodes.retain(|n| n.id != i);
        let (score, complete) = best_path(text.len(), &buffers.nodes, &mut buffers.best);
        if !complete {
            return Alternative::None;
        }
        let mut ids = Vec::new();
        let mut end = text.len();
        while end > 0 {
            let node = buffers.nodes[buffers.best[end].1 as usize];
            if node.id == UNK {
                return Alternative::None;
            }
            ids.push(node.id);
            end = node.start as usize;
        }
        if score > self.scores[i as usize] {
            Alternative::Better
        } else {
            ids.reverse();
            Alternative::Pieces(ids)
        }
    }
}

/// What replaces a piece that is removed.
enum Alternative {
    /// Nothing does: the piece stays.
    None,
    /// Its best segmentation is already another: it goes.
    Better,
    /// These pieces.
    Pieces(Vec<u32>),
}

/// Forward-backward over the lattice in `buffers.nodes`, whose weights are
/// probabilities; each is multiplied by `scale[bytes]` in place. Fills
/// `buffers.forward` and `buffers.backward` and returns the log of the
/// scaled total, or `None` if it leaves the range of `f64`.
fn forward_backward(n: usize, scale: &[f64], buffers: &mut Buffers) -> Option<f64> {
    let Buffers {
        nodes,
        forward,
        backward,
        ..
    } = buffers;
    forward.clear();
    forward.resize(n + 1, 0.0);
    forward[0] = 1.0;
    for node in nodes.iter_mut() {
        node.weight *= scale[(node.end - node.start) as usize];
        forward[node.end as usize] += forward[node.start as usize] * node.weight;
    }
    let z = forward[n];
    if !z.is_normal() {
        return None;
    }
    backward.clear();
    backward.resize(n + 1, 0.0);
    backward[n] = 1.0;
    for node in nodes.iter().rev() {
        backward[node.start as usize] += node.weight * backward[node.end as usize];
    }
    Some(z.ln())
}

/// Viterbi over a lattice whose nodes' `weight` is a score: `best[end]` is
/// the best (score, node) ending there; returns the best total and whether
/// any path reaches the end.
fn best_path(n: usize, nodes: &[Node], best: &mut Vec<(f64, u32)>) -> (f64, bool) {
    best.clear();
    best.resize(n + 1, (f64::NEG_INFINITY, UNK));
    best[0].0 = 0.0;
    for (k, node) in nodes.iter().enumerate() {
        let candidate = best[node.start as usize].0 + node.weight;
        let target = &mut best[node.end as usize];
        if candidate > target.0 {
            *target = (candidate, k as u32);
        }
    }
    (best[n].0, best[n].1 != UNK)
}

/// ψ(x) for x > 0: the recurrence up to 10, then the asymptotic series
/// (error below 1e-12).
fn digamma(mut x: f64) -> f64 {
    let mut result = 0.0;
    while x < 10.0 {
        result -= 1.0 / x;
        x += 1.0;
    }
    let inv = 1.0 / x;
    let inv2 = inv * inv;
    result + x.ln()
        - 0.5 * inv
        - inv2 * (1.0 / 12.0 - inv2 * (1.0 / 120.0 - inv2 * (1.0 / 252.0 - inv2 * (1.0 / 240.0))))
}

/// The model's pieces: the unknown and special pieces, the byte pieces, then
/// the learned ones by score (the required characters always among them).
pub(super) fn finalize(
    vocab: &Vocab,
    required: &[(char, u64)],
    settings: &UnigramTrainerSettings,
) -> Vec<Piece> {
    let learned = learned(settings);
    let score_of: FxHashMap<&str, f64> = vocab
        .pieces
        .iter()
        .map(String::as_str)
        .zip(vocab.scores.iter().copied())
        .collect();
    let min_score = vocab.scores.iter().copied().fold(f64::INFINITY, f64::min);
    let mut chosen: FxHashMap<String, f64> = FxHashMap::default();
    // Missing required characters: just below the lowest score, the more
    // frequent ones higher, so that no two tie.
    let mut penalty = 0.0;
    for &(c, _) in required {
        let text = c.to_string();
        let score = match score_of.get(text.as_str()) {
            Some(&score) => score,
            None => {
                penalty += 1e-4;
                min_score - penalty
            }
        };
        chosen.insert(text, score);
    }
    let mut by_score: Vec<(&str, f64)> = score_of.iter().map(|(&p, &s)| (p, s)).collect();
    by_score.par_sort_unstable_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(b.0)));
    for (piece, score) in by_score {
        if chosen.len() >= learned {
            break;
        }
        chosen.entry(piece.to_owned()).or_insert(score);
    }
    let mut learned_pieces: Vec<(String, f64)> = chosen.into_iter().collect();
    learned_pieces.par_sort_unstable_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));

    let mut pieces = meta_pieces(settings);
    pieces.extend(learned_pieces.into_iter().map(|(text, score)| Piece {
        text,
        score: score as f32,
        kind: PieceKind::Normal,
    }));
    pieces
}

/// The unknown piece, the special pieces (control) and, with byte
/// fallback, the 256 byte pieces: the first ids of a trained model.
fn meta_pieces(settings: &UnigramTrainerSettings) -> Vec<Piece> {
    let control = |text: &str, kind| Piece {
        text: text.to_owned(),
        score: 0.0,
        kind,
    };
    let mut pieces = vec![control(&settings.unk_token, PieceKind::Unknown)];
    pieces.extend(
        settings
            .special_tokens
            .iter()
            .map(|t| control(t, PieceKind::Control)),
    );
    if settings.byte_fallback {
        pieces.extend((0..=255u8).map(|b| control(&format!("<0x{b:02X}>"), PieceKind::Byte)));
    }
    pieces
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::counting::Counter;

    fn settings(vocab_size: usize) -> UnigramTrainerSettings {
        UnigramTrainerSettings {
            character_coverage: 1.0,
            special_tokens: vec!["<s>".into(), "</s>".into()],
            ..UnigramTrainerSettings::new(vocab_size, Whitespace::default())
        }
    }

    fn corpus() -> Vec<String> {
        // Words built from a few stems and endings, with Zipf-like counts.
        let stems = [
            "walk", "talk", "play", "jump", "read", "work", "look", "call",
        ];
        let ends = ["", "s", "ed", "ing", "er", "ers"];
        let mut lines = Vec::new();
        for (i, stem) in stems.iter().enumerate() {
            for (j, end) in ends.iter().enumerate() {
                let line = format!("the {stem}{end} of a day, né à Zürich");
                for _ in 0..(40 / (i + j + 1)) {
                    lines.push(line.clone());
                }
            }
        }
        lines
    }

    fn train_on(lines: &[String], settings: &UnigramTrainerSettings) -> Result<UnigramModel> {
        let counter = Counter::sentencepiece(settings.whitespace, Vec::new()).unwrap();
        let counts = counter.count_texts(lines).unwrap();
        train(counts, settings, &Progress::silent())
    }

    fn texts(model: &UnigramModel) -> Vec<&str> {
        model.pieces().iter().map(|p| p.text.as_str()).collect()
    }

    #[test]
    fn exact_size_deterministic_and_lossless() {
        let lines = corpus();
        for vocab_size in [60, 100] {
            let a = train_on(&lines, &settings(vocab_size)).unwrap();
            let b = train_on(&lines, &settings(vocab_size)).unwrap();
            assert_eq!(a.pieces().len(), vocab_size);
            assert_eq!(texts(&a), texts(&b));
            assert_eq!(&texts(&a)[..3], ["<unk>", "<s>", "</s>"]);
            let scores: Vec<f32> = a.pieces()[3..].iter().map(|p| p.score).collect();
            assert!(scores.windows(2).all(|w| w[0] >= w[1]), "by score");
            for line in &lines[..20] {
                assert_eq!(&a.decode(&a.encode_text(line)).unwrap(), line);
            }
        }
        // A frequent word is one piece in a large enough vocabulary.
        let big = train_on(&lines, &settings(100)).unwrap();
        assert!(texts(&big).contains(&"▁the"));
    }

    #[test]
    fn coverage_and_byte_fallback() {
        let mut lines = corpus();
        lines.push("ǂ".into()); // one rare character
        let mut s = settings(400);
        s.character_coverage = 0.9995;
        s.byte_fallback = true;
        let model = train_on(&lines, &s).unwrap();
        assert_eq!(model.pieces().len(), 400);
        assert!(!texts(&model).contains(&"ǂ"));
        assert!(texts(&model).contains(&"ü"));
        let ids = model.encode_text("ǂ ü");
        assert!(!ids.contains(&model.unk_id().unwrap()));
        assert_eq!(model.decode(&ids).unwrap(), "ǂ ü");
    }

    #[test]
    fn sizes_out_of_reach_say_what_is_possible() {
        let lines = corpus();
        let err = train_on(&lines, &settings(10)).err().unwrap().to_string();
        assert!(err.contains("too small") && err.contains("need"), "{err}");
        let err = train_on(&lines, &settings(100_000))
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("at most"), "{err}");
        let most: usize = err
            .split("at most ")
            .nth(1)
            .and_then(|rest| rest.split(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap();
        assert_eq!(
            train_on(&lines, &settings(most)).unwrap().pieces().len(),
            most
        );
        let empty = train_on(&["   ".to_string()], &settings(100));
        assert!(matches!(empty, Err(Error::Corpus(_))));
    }

    #[test]
    fn digamma_values() {
        // ψ(1) = −γ, ψ(1/2) = −γ − 2 ln 2, ψ(10) = H(9) − γ.
        let gamma = 0.577_215_664_901_532_9;
        assert!((digamma(1.0) + gamma).abs() < 1e-12);
        assert!((digamma(0.5) + gamma + 2.0 * 2f64.ln()).abs() < 1e-12);
        let h9: f64 = (1..10).map(|k| 1.0 / k as f64).sum();
        assert!((digamma(10.0) - (h9 - gamma)).abs() < 1e-12);
    }
}
