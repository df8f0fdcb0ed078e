//! Counting the pieces of a corpus, in parallel: the input of training.
//!
//! Text is cut around special tokens (they are never part of a learned
//! token), pre-tokenized, and each piece's bytes counted. Chunks of text are
//! counted on all cores into maps of their own, then added together on all
//! cores (`PieceCounts::merge_all`).

use std::hash::BuildHasher;

use aho_corasick::AhoCorasick;
use rayon::prelude::*;
use rustc_hash::{FxBuildHasher, FxHashMap};

use crate::corpus::{BadBytes, ChunkReader};
use crate::error::{Error, Result};
use crate::progress::{Progress, Stage};
use crate::text::bert::{for_each_word, BertNormalizer};
use crate::text::pattern::{Pattern, PreTokenizer};
use crate::text::sentencepiece::{for_each_word as sentencepiece_words, prepare_text, Whitespace};
use crate::vocab::special_matcher;

/// Piece bytes -> number of occurrences (64-bit: no overflow on any corpus).
#[derive(Default, Debug)]
pub struct PieceCounts {
    pub counts: FxHashMap<Vec<u8>, u64>,
    /// Bytes of text counted.
    pub text_bytes: u64,
}

impl PieceCounts {
    pub fn is_empty(&self) -> bool {
        self.counts.is_empty()
    }

    /// Adds counts together on all cores. Adding maps one into another
    /// takes one thread, so the pieces of each count are dealt into shards
    /// by hash, each shard is added up on its own, and the shards are joined
    /// into one map. (Two counts, all that one or two threads leave, add
    /// faster one into the other.)
    fn merge_all(mut parts: Vec<PieceCounts>) -> PieceCounts {
        if parts.len() <= 2 {
            let mut total = parts.pop().unwrap_or_default();
            if let Some(other) = parts.pop() {
                total.merge(other);
            }
            return total;
        }
        type Entries = Vec<(Vec<u8>, u64)>;
        let text_bytes = parts.iter().map(|part| part.text_bytes).sum();
        // Hash bits that the maps leave alone (a map's low bits pick a
        // bucket, its top 7 tag it), so that a shard's map spreads as well
        // as a whole one.
        let shard_of = |piece: &[u8]| (FxBuildHasher.hash_one(piece) >> 32) as usize % MERGE_SHARDS;
        let dealt: Vec<Vec<Entries>> = parts
            .into_par_iter()
            .map(|part| {
                let mut shards = vec![Vec::new(); MERGE_SHARDS];
                for (piece, count) in part.counts {
                    shards[shard_of(&piece)].push((piece, count));
                }
                shards
            })
            .collect();
        let mut by_shard: Vec<Vec<Entries>> = (0..MERGE_SHARDS)
            .map(|_| Vec::with_capacity(dealt.len()))
            .collect();
        for shards in dealt {
            for (lists, list) in by_shard.iter_mut().zip(shards) {
                lists.push(list);
            }
        }
        let shards: Vec<FxHashMap<Vec<u8>, u64>> = by_shard
            .into_par_iter()
            .map(|lists| {
                let mut counts = FxHashMap::default();
                for (piece, count) in lists.into_iter().flatten() {
                    *counts.entry(piece).or_insert(0) += count;
                }
                counts
            })
            .collect();
        let mut counts = FxHashMap::with_capacity_and_hasher(
            shards.iter().map(|shard| shard.len()).sum(),
            FxBuildHasher,
        );
        for shard in shards {
            counts.extend(shard);
        }
        PieceCounts { counts, text_bytes }
    }

    /// Adds another count into this one.
    pub fn merge(&mut self, other: PieceCounts) {
        let (mut big, small) = if self.counts.len() >= other.counts.len() {
            (std::mem::take(&mut self.counts), other.counts)
        } else {
            (other.counts, std::mem::take(&mut self.counts))
        };
        for (piece, count) in small {
            *big.entry(piece).or_insert(0) += count;
        }
        self.counts = big;
        self.text_bytes += other.text_bytes;
    }
}

/// Shards of `PieceCounts::merge_all`.
const MERGE_SHARDS: usize = 64;

/// Bytes per unit of parallel counting for counters that count line by line
/// (see `Counter::parts`).
const PART_BYTES: usize = 1 << 18;

/// How a counter cuts text into pieces.
enum Splitter {
    /// A pre-tokenization pattern (byte-level BPE).
    Pattern(PreTokenizer),
    /// BERT's normalization and word splitting (WordPiece).
    Bert(BertNormalizer),
    /// SentencePiece's whitespace handling, line by line, and its words:
    /// each starts at a `▁` (Unigram).
    SentencePiece(Whitespace),
}

/// Cuts text into pieces and counts them.
pub struct Counter {
    splitter: Splitter,
    /// Special tokens, cut out of the text (never part of a learned token).
    special_tokens: Vec<String>,
    special: Option<AhoCorasick>,
}

impl Counter {
    pub fn new(pattern: Pattern, special_tokens: Vec<String>) -> Result<Self> {
        Self::with_splitter(
            Splitter::Pattern(PreTokenizer::new(pattern)?),
            special_tokens,
        )
    }

    /// A counter of BERT words: normalized, then cut at white space and
    /// punctuation.
    pub fn bert(normalizer: BertNormalizer, special_tokens: Vec<String>) -> Result<Self> {
        Self::with_splitter(Splitter::Bert(normalizer), special_tokens)
    }

    /// A counter of SentencePiece words.
    pub fn sentencepiece(whitespace: Whitespace, special_tokens: Vec<String>) -> Result<Self> {
        Self::with_splitter(Splitter::SentencePiece(whitespace), special_tokens)
    }

    fn with_splitter(splitter: Splitter, special_tokens: Vec<String>) -> Result<Self> {
        if special_tokens.iter().any(String::is_empty) {
            return Err(Error::invalid("a special token is empty"));
        }
        Ok(Counter {
            splitter,
            special: special_matcher(&special_tokens)?,
            special_tokens,
        })
    }

    /// The pattern of a pattern counter (none for a BERT one).
    pub fn pattern(&self) -> Option<&Pattern> {
        match &self.splitter {
            Splitter::Pattern(pretokenizer) => Some(pretokenizer.pattern()),
            Splitter::Bert(_) | Splitter::SentencePiece(_) => None,
        }
    }

    /// The normalizer of a BERT counter.
    pub fn bert_normalizer(&self) -> Option<BertNormalizer> {
        match &self.splitter {
            Splitter::Bert(normalizer) => Some(*normalizer),
            Splitter::Pattern(_) | Splitter::SentencePiece(_) => None,
        }
    }

    /// The whitespace handling of a SentencePiece counter.
    pub fn whitespace(&self) -> Option<Whitespace> {
        match &self.splitter {
            Splitter::SentencePiece(whitespace) => Some(*whitespace),
            Splitter::Pattern(_) | Splitter::Bert(_) => None,
        }
    }

    pub fn special_tokens(&self) -> &[String] {
        &self.special_tokens
    }

    /// Counts one text into `counts`.
    pub fn count_text(&self, text: &str, counts: &mut PieceCounts) -> Result<()> {
        counts.text_bytes += text.len() as u64;
        let map = &mut counts.counts;
        let mut add = |piece: &str| {
            let bytes = piece.as_bytes();
            if let Some(count) = map.get_mut(bytes) {
                *count += 1;
            } else {
                map.insert(bytes.to_vec(), 1);
            }
        };
        let mut normalized = String::new();
        let mut pieces_of = |part: &str| match &self.splitter {
            // Without pre-tokenization, a whole file (or chunk of one) would
            // be a single piece: training counts lines instead.
            Splitter::Pattern(pretokenizer) if *pretokenizer.pattern() == Pattern::Whole => {
                part.split_inclusive('\n').for_each(&mut add);
                Ok(())
            }
            Splitter::Pattern(pretokenizer) => pretokenizer.for_each_piece(part, &mut add),
            Splitter::Bert(normalizer) => {
                normalized.clear();
                normalizer.normalize_into(part, &mut normalized);
                for_each_word(&normalized, &mut add);
                Ok(())
            }
            Splitter::SentencePiece(whitespace) => {
                for line in part.lines() {
                    prepare_text(line, *whitespace, &mut normalized);
                    sentencepiece_words(&normalized, &mut add);
                }
                Ok(())
            }
        };
        match &self.special {
            None => pieces_of(text),
            Some(special) => {
                let mut start = 0;
                for found in special.find_iter(text) {
                    pieces_of(&text[start..found.start()])?;
                    start = found.end();
                }
                pieces_of(&text[start..])
            }
        }
    }

    /// Counts many texts on all cores.
    pub fn count_texts<S: AsRef<str> + Sync>(&self, texts: &[S]) -> Result<PieceCounts> {
        // About one count per thread: each is a map to add at the end.
        let per_thread: Vec<PieceCounts> = texts
            .par_iter()
            .with_min_len(texts.len() / rayon::current_num_threads())
            .fold(
                || Ok(PieceCounts::default()),
                |acc: Result<PieceCounts>, text| {
                    let mut acc = acc?;
                    self.count_text(text.as_ref(), &mut acc)?;
                    Ok(acc)
                },
            )
            .collect::<Result<_>>()?;
        Ok(PieceCounts::merge_all(per_thread))
    }

    /// The texts, cut for counting on all cores. A SentencePiece counter
    /// counts line by line, so its texts are cut after line breaks into
    /// parts of about `PART_BYTES` (unless a special token holds a line
    /// break): a few chunks of megabytes would keep most cores idle.
    fn parts<'t>(&self, texts: &'t [String]) -> Vec<&'t str> {
        let by_lines = matches!(self.splitter, Splitter::SentencePiece(_))
            && !self.special_tokens.iter().any(|t| t.contains('\n'));
        let mut parts = Vec::new();
        for text in texts {
            let mut rest = text.as_str();
            while by_lines && rest.len() > PART_BYTES {
                let Some(at) = memchr::memchr(b'\n', &rest.as_bytes()[PART_BYTES..]) else {
                    break;
                };
                let (part, tail) = rest.split_at(PART_BYTES + at + 1);
                parts.push(part);
                rest = tail;
            }
            parts.push(rest);
        }
        parts
    }

    /// Counts files, a batch of chunks at a time on all cores; `total_bytes`
    /// (the sum of the file sizes) is only for progress.
    pub fn count_files(
        &self,
        paths: &[std::path::PathBuf],
        bad_bytes: BadBytes,
        total_bytes: u64,
        progress: &Progress,
    ) -> Result<PieceCounts> {
        let batch_len = 2 * rayon::current_num_threads();
        let mut total = PieceCounts::default();
        progress.force(Stage::Counting, 0, total_bytes)?;
        for path in paths {
            let mut reader = ChunkReader::open(path, bad_bytes)?;
            loop {
                let mut batch = Vec::with_capacity(batch_len);
                while batch.len() < batch_len {
                    match reader.next_chunk()? {
                        Some(chunk) => batch.push(chunk),
                        None => break,
                    }
                }
                if batch.is_empty() {
                    break;
                }
                total.merge(self.count_texts(&self.parts(&batch))?);
                progress.update(Stage::Counting, total.text_bytes, total_bytes)?;
            }
        }
        progress.force(Stage::Counting, total.text_bytes, total_bytes)?;
        Ok(total)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_and_shards_count_as_the_whole_text() {
        let counter = Counter::sentencepiece(Whitespace::default(), Vec::new()).unwrap();
        let text: String = (0..40_000)
            .map(|i| format!("word{}  and more {}\r\n", i % 5000, i % 7))
            .collect();
        let texts = vec![text, "no line break at the end".to_string()];
        let parts = counter.parts(&texts);
        assert!(parts.len() > 3);
        assert_eq!(parts.concat(), texts.concat());
        let mut whole = PieceCounts::default();
        counter.count_text(&texts.concat(), &mut whole).unwrap();
        let counted = counter.count_texts(&parts).unwrap();
        assert_eq!(counted.counts, whole.counts);
        assert_eq!(counted.text_bytes, whole.text_bytes);
        // Added through shards: the same as one into another.
        let each: Vec<PieceCounts> = parts
            .iter()
            .map(|part| counter.count_texts(&[part]).unwrap())
            .collect();
        let sharded = PieceCounts::merge_all(each);
        assert_eq!(sharded.counts, whole.counts);
        assert_eq!(sharded.text_bytes, whole.text_bytes);
    }
}
