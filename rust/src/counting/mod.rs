//! Counting the pieces of a corpus, in parallel: the input of training.
//!
//! Text is cut around special tokens (they are never part of a learned
//! token), pre-tokenized, and each piece's bytes counted in a table made
//! for it (`table.rs`: why it is fast). Files are counted into one table per
//! pool thread, kept from chunk to chunk; the tables are added shard by
//! shard on all cores (`PieceCounts::sum`), so no part of adding them up
//! is left to one thread.
//!
//! Counts are also a value of their own (`file.rs` writes and reads them):
//! counted apart, on many machines, they add up exactly, and training from
//! the sum gives the model that training from the whole corpus gives.

pub mod file;
mod table;
pub mod transfer;

pub use table::PieceTable;

/// Text counted per round when memory is bounded (`Counter::count_files`).
const ROUND_BYTES: u64 = 64 << 20;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use aho_corasick::AhoCorasick;
use rayon::prelude::*;

use crate::batch::StrRun;
use crate::corpus::{BadBytes, ChunkReader};
use crate::error::{Error, Result};
use crate::progress::{Progress, Stage};
use crate::text::bert::{for_each_word, BertNormalizer};
use crate::text::pattern::{Pattern, PreTokenizer};
use crate::text::sentencepiece::{for_each_word as sentencepiece_words, prepare_text, Whitespace};
use crate::vocab::{sort_key, special_matcher};

/// Piece bytes -> number of occurrences (64-bit: no overflow on any corpus).
#[derive(Default, Debug, Clone)]
pub struct PieceCounts {
    pub pieces: PieceTable,
    /// Bytes of text counted.
    pub text_bytes: u64,
    /// What pruning left out (`prune`).
    pub dropped: Dropped,
}

/// The pieces pruning left out, and their occurrences.
#[derive(Default, Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dropped {
    pub pieces: u64,
    pub occurrences: u64,
}

impl std::ops::AddAssign for Dropped {
    fn add_assign(&mut self, other: Dropped) {
        self.pieces += other.pieces;
        self.occurrences += other.occurrences;
    }
}

impl PieceCounts {
    pub fn is_empty(&self) -> bool {
        self.pieces.is_empty()
    }

    /// Distinct pieces.
    pub fn len(&self) -> usize {
        self.pieces.len()
    }

    /// How often a piece was seen, if it was.
    pub fn get(&self, piece: &[u8]) -> Option<u64> {
        self.pieces.get(piece)
    }

    /// Adds another count into this one (the smaller into the larger).
    pub fn merge(&mut self, mut other: PieceCounts) {
        if other.len() > self.len() {
            std::mem::swap(self, &mut other);
        }
        self.add(&other);
    }

    /// Adds another count into this one, leaving it as it is.
    pub fn add(&mut self, other: &PieceCounts) {
        self.pieces.add_table(&other.pieces);
        self.text_bytes += other.text_bytes;
        self.dropped += other.dropped;
    }

    /// Adds another count into this one with every count multiplied by
    /// `factor` (at least 1), rounded to the nearest whole number and never
    /// below 1: a piece counted is never lost (language-balanced training
    /// weighs languages up, not down). Bytes of text are added unscaled.
    pub fn add_scaled(&mut self, other: &PieceCounts, factor: f64) {
        debug_assert!(factor >= 1.0);
        self.pieces.add_tables(&[&other.pieces], |count| {
            ((count as f64 * factor).round() as u64).max(1)
        });
        self.text_bytes += other.text_bytes;
        self.dropped += other.dropped;
    }

    /// The sum of many counts, shard by shard on all cores (into the one
    /// with the most pieces).
    pub fn sum(mut parts: Vec<PieceCounts>) -> PieceCounts {
        let Some(largest) = (0..parts.len()).max_by_key(|&i| parts[i].len()) else {
            return PieceCounts::default();
        };
        let mut total = parts.swap_remove(largest);
        total.pieces.add_tables(
            &parts.iter().map(|part| &part.pieces).collect::<Vec<_>>(),
            |count| count,
        );
        for part in parts {
            total.text_bytes += part.text_bytes;
            total.dropped += part.dropped;
        }
        total
    }

    /// Keeps the `max_pieces` most frequent pieces (ties: the smaller
    /// bytes), recording the others in `dropped`. Training on pruned
    /// counts is training on a corpus without the rarest pieces: merges
    /// and scores that only they would have supported are lost, the others
    /// are counted exactly.
    pub fn prune(&mut self, max_pieces: usize) {
        if self.len() <= max_pieces {
            return;
        }
        let mut entries: Vec<(&[u8], u64)> = self.pieces.par_iter().collect();
        entries.par_sort_unstable_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(b.0)));
        for &(_, count) in &entries[max_pieces..] {
            self.dropped.pieces += 1;
            self.dropped.occurrences += count;
        }
        let mut kept = PieceTable::with_key(self.pieces.key(), max_pieces);
        for &(piece, count) in &entries[..max_pieces] {
            kept.add(piece, count);
        }
        drop(entries);
        self.pieces = kept;
    }

    /// The pieces in byte order with their counts, borrowed (sorted on all
    /// cores): how count files are written, and how trainers lay pieces
    /// out so that pieces sharing a start lie together.
    pub fn sorted(&self) -> Vec<(&[u8], u64)> {
        let mut keyed: Vec<(u64, &[u8], u64)> = self
            .pieces
            .par_iter()
            .map(|(piece, count)| (sort_key(piece), piece, count))
            .collect();
        keyed.par_sort_unstable_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.cmp(b.1)));
        keyed
            .into_par_iter()
            .map(|(_, piece, count)| (piece, count))
            .collect()
    }

    /// The pieces in byte order with their counts, copied.
    pub fn sorted_owned(&self) -> Vec<(Vec<u8>, u64)> {
        self.sorted()
            .into_par_iter()
            .map(|(piece, count)| (piece.to_vec(), count))
            .collect()
    }

    /// All occurrences counted (pieces kept).
    pub fn occurrences(&self) -> u64 {
        self.pieces.par_iter().map(|(_, count)| count).sum()
    }
}

/// Bytes per part of a chunk for counters that count line by line (see
/// `Counter::parts`).
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

    /// How this counter cuts text, as JSON: what a count file records, and
    /// what two counts must share to be added. `kind` is `pattern` (BPE),
    /// `bert` (WordPiece) or `sentencepiece` (Unigram, SentencePiece BPE).
    pub fn description(&self) -> serde_json::Value {
        let mut description = match &self.splitter {
            Splitter::Pattern(pretokenizer) => serde_json::json!({
                "kind": "pattern",
                "pattern": pretokenizer.pattern().spec(),
            }),
            Splitter::Bert(normalizer) => serde_json::json!({
                "kind": "bert",
                "clean_text": normalizer.clean_text,
                "handle_chinese_chars": normalizer.handle_chinese_chars,
                "strip_accents": normalizer.strip_accents,
                "lowercase": normalizer.lowercase,
            }),
            Splitter::SentencePiece(whitespace) => serde_json::json!({
                "kind": "sentencepiece",
                "remove_extra_whitespaces": whitespace.remove_extra,
                "add_dummy_prefix": whitespace.add_dummy_prefix,
            }),
        };
        description["special_tokens"] = serde_json::json!(self.special_tokens);
        description
    }

    /// The counter a `description` describes.
    pub fn from_description(description: &serde_json::Value) -> Result<Counter> {
        let field = |name: &str| {
            description
                .get(name)
                .ok_or_else(|| Error::invalid(format!("the counter's description lacks {name:?}")))
        };
        let flag = |name: &str| {
            field(name)?.as_bool().ok_or_else(|| {
                Error::invalid(format!("the counter's {name:?} is not true or false"))
            })
        };
        let special_tokens: Vec<String> = serde_json::from_value(field("special_tokens")?.clone())
            .map_err(|e| Error::invalid(format!("the counter's special tokens: {e}")))?;
        match field("kind")?.as_str() {
            Some("pattern") => {
                let spec = field("pattern")?
                    .as_str()
                    .ok_or_else(|| Error::invalid("the counter's pattern is not a string"))?;
                Counter::new(Pattern::parse(spec)?, special_tokens)
            }
            Some("bert") => Counter::bert(
                BertNormalizer {
                    clean_text: flag("clean_text")?,
                    handle_chinese_chars: flag("handle_chinese_chars")?,
                    strip_accents: flag("strip_accents")?,
                    lowercase: flag("lowercase")?,
                },
                special_tokens,
            ),
            Some("sentencepiece") => Counter::sentencepiece(
                Whitespace {
                    remove_extra: flag("remove_extra_whitespaces")?,
                    add_dummy_prefix: flag("add_dummy_prefix")?,
                    ..Whitespace::default()
                },
                special_tokens,
            ),
            other => Err(Error::invalid(format!(
                "unknown counter kind {other:?} (pattern, bert or sentencepiece)"
            ))),
        }
    }

    /// Why counts of this counter and of `other` cannot be added (they cut
    /// text differently), naming the first setting that differs; `None`
    /// when they can.
    pub fn difference(&self, other: &Counter) -> Option<String> {
        let (ours, theirs) = (self.description(), other.description());
        if ours == theirs {
            return None;
        }
        // In the order a user reads them: the kind first (the others
        // follow from it), the special tokens last.
        let names = [
            "kind",
            "pattern",
            "clean_text",
            "handle_chinese_chars",
            "strip_accents",
            "lowercase",
            "remove_extra_whitespaces",
            "add_dummy_prefix",
            "special_tokens",
        ];
        let name = names
            .into_iter()
            .find(|name| ours.get(name) != theirs.get(name))
            .unwrap_or("settings");
        let show = |value: Option<&serde_json::Value>| {
            value.map_or("(none)".to_owned(), |v| v.to_string())
        };
        Some(format!(
            "counts made with {name} {} cannot be added to counts made with {name} {}",
            show(theirs.get(name)),
            show(ours.get(name))
        ))
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
        self.count_many([Ok(text)], counts)
    }

    /// Counts texts (stopping at the first error among them) into
    /// `counts`, one after another. Pieces cut from the text itself (by a
    /// pattern) go through one `Tally` for all the texts, so that its
    /// lookahead runs on from one short text into the next; normalized
    /// pieces (BERT's, SentencePiece's) live in a buffer the next text
    /// overwrites, so they are tallied text by text.
    pub fn count_many<'t>(
        &self,
        texts: impl IntoIterator<Item = Result<&'t str>>,
        counts: &mut PieceCounts,
    ) -> Result<()> {
        let mut text_bytes = 0;
        let mut texts = texts.into_iter().map(|text| {
            let text = text?;
            text_bytes += text.len() as u64;
            Ok(text)
        });
        let table = &mut counts.pieces;
        let mut normalized = String::new();
        let counted = match &self.splitter {
            Splitter::Pattern(pretokenizer) => {
                let mut tally = table.tally();
                texts.try_for_each(|text| {
                    self.for_each_segment(text?, |part| {
                        if *pretokenizer.pattern() == Pattern::Whole {
                            // Without pre-tokenization, a whole file (or chunk
                            // of one) would be a single piece: training counts
                            // lines instead.
                            part.split_inclusive('\n')
                                .for_each(|line| tally.add(line.as_bytes()));
                            Ok(())
                        } else {
                            pretokenizer.for_each_piece(part, |piece| tally.add(piece.as_bytes()))
                        }
                    })
                })
            }
            Splitter::Bert(normalizer) => texts.try_for_each(|text| {
                self.for_each_segment(text?, |part| {
                    normalized.clear();
                    normalizer.normalize_into(part, &mut normalized);
                    let mut tally = table.tally();
                    for_each_word(&normalized, |word| tally.add(word.as_bytes()));
                    Ok(())
                })
            }),
            Splitter::SentencePiece(whitespace) => texts.try_for_each(|text| {
                self.for_each_segment(text?, |part| {
                    for line in part.lines() {
                        prepare_text(line, *whitespace, &mut normalized);
                        let mut tally = table.tally();
                        sentencepiece_words(&normalized, |word| tally.add(word.as_bytes()));
                    }
                    Ok(())
                })
            }),
        };
        counts.text_bytes += text_bytes;
        counted
    }

    /// Calls `f` on each part of `text` between special tokens.
    fn for_each_segment<'t>(
        &self,
        text: &'t str,
        mut f: impl FnMut(&'t str) -> Result<()>,
    ) -> Result<()> {
        match &self.special {
            None => f(text),
            Some(special) => {
                let mut start = 0;
                for found in special.find_iter(text) {
                    f(&text[start..found.start()])?;
                    start = found.end();
                }
                f(&text[start..])
            }
        }
    }

    /// Counts many texts on all cores.
    pub fn count_texts<S: StrRun>(&self, texts: &[S]) -> Result<PieceCounts> {
        count_runs(texts.len(), |rows, counts| {
            S::with_strs(&texts[rows], |run| {
                self.count_many(run.iter().map(|&text| Ok(text)), counts)
            })
        })
    }

    /// Counts rows `0..n`, each the text `row` gives (or an error), on all
    /// cores.
    pub fn count_rows<'a>(
        &self,
        n: usize,
        row: impl Fn(usize) -> Result<&'a str> + Sync,
    ) -> Result<PieceCounts> {
        count_runs(n, |rows, counts| self.count_many(rows.map(&row), counts))
    }

    /// The parts of a chunk to count apart, as byte ranges. A SentencePiece
    /// counter counts line by line, so its chunks are cut after line breaks
    /// into parts of about `PART_BYTES` (unless a special token holds a line
    /// break): a few chunks of megabytes would keep most cores idle. Other
    /// counters count a chunk whole.
    fn parts(&self, text: &str) -> Vec<std::ops::Range<usize>> {
        let by_lines = matches!(self.splitter, Splitter::SentencePiece(_))
            && !self.special_tokens.iter().any(|t| t.contains('\n'));
        let mut parts = Vec::new();
        let mut start = 0;
        while by_lines && text.len() - start > PART_BYTES {
            let Some(at) = memchr::memchr(b'\n', &text.as_bytes()[start + PART_BYTES..]) else {
                break;
            };
            let end = start + PART_BYTES + at + 1;
            parts.push(start..end);
            start = end;
        }
        parts.push(start..text.len());
        parts
    }

    /// Counts files on all cores; `total_bytes` (the sum of the file sizes)
    /// is only for progress. This thread reads the files, hands each chunk
    /// to the pool as soon as it is read (reading overlaps counting, and no
    /// chunk waits for a batch to fill), and reports progress; each pool
    /// thread counts into a table of its own.
    ///
    /// With `max_pieces`, memory is bounded: the files are counted in rounds
    /// of `ROUND_BYTES` of text (in file order, whatever the number of
    /// threads), each round's counts added to the total, and the total
    /// pruned to `max_pieces` whenever it holds twice as many, and at the
    /// end. Which pieces are dropped depends only on the corpus, so the
    /// result is the same on any machine.
    pub fn count_files(
        &self,
        paths: &[std::path::PathBuf],
        bad_bytes: BadBytes,
        total_bytes: u64,
        max_pieces: Option<usize>,
        progress: &Progress,
    ) -> Result<PieceCounts> {
        let round_bytes = if max_pieces.is_some() {
            ROUND_BYTES
        } else {
            u64::MAX
        };
        self.count_files_in_rounds(
            paths,
            bad_bytes,
            total_bytes,
            max_pieces,
            round_bytes,
            progress,
        )
    }

    /// `count_files` with rounds of `round_bytes` (at least a chunk).
    fn count_files_in_rounds(
        &self,
        paths: &[std::path::PathBuf],
        bad_bytes: BadBytes,
        total_bytes: u64,
        max_pieces: Option<usize>,
        round_bytes: u64,
        progress: &Progress,
    ) -> Result<PieceCounts> {
        progress.force(Stage::Counting, 0, total_bytes)?;
        let mut files = paths.iter();
        let mut reader = None;
        let mut total = PieceCounts::default();
        loop {
            let counted_before = total.text_bytes;
            let (round, more) =
                self.count_round(&mut files, &mut reader, bad_bytes, round_bytes, |counted| {
                    progress.update(Stage::Counting, counted_before + counted, total_bytes)
                })?;
            total.merge(round);
            if let Some(max) = max_pieces {
                if total.len() > 2 * max || !more {
                    total.prune(max);
                }
            }
            if !more {
                break;
            }
        }
        progress.force(Stage::Counting, total.text_bytes, total_bytes)?;
        Ok(total)
    }

    /// One round of `count_files`: chunks read from `reader`, then the next
    /// of `files`, until `round_bytes` are read or the files end, counted on
    /// all cores. Returns the counts and whether text is left.
    fn count_round(
        &self,
        files: &mut std::slice::Iter<'_, std::path::PathBuf>,
        reader: &mut Option<ChunkReader>,
        bad_bytes: BadBytes,
        round_bytes: u64,
        progress: impl Fn(u64) -> Result<()> + Sync,
    ) -> Result<(PieceCounts, bool)> {
        let threads = rayon::current_num_threads();
        let per_thread: Vec<Mutex<PieceCounts>> = (0..threads).map(|_| Mutex::default()).collect();
        // Two chunks per thread at most are read and not yet counted (memory).
        let pending = Pending::new(2 * threads);
        let counted = AtomicU64::new(0);
        let failure: Mutex<Option<Error>> = Mutex::new(None);
        let report = || progress(counted.load(Ordering::Relaxed));
        let mut read_bytes = 0u64;
        let read = rayon::in_place_scope_fifo(|scope| -> Result<bool> {
            loop {
                if read_bytes >= round_bytes {
                    return Ok(true);
                }
                if reader.is_none() {
                    match files.next() {
                        Some(path) => *reader = Some(ChunkReader::open(path, bad_bytes)?),
                        None => return Ok(false),
                    }
                }
                let Some(chunk) = reader.as_mut().expect("opened above").next_chunk()? else {
                    *reader = None;
                    continue;
                };
                read_bytes += chunk.len() as u64;
                let chunk = Arc::new(chunk);
                for part in self.parts(&chunk) {
                    pending.enter(report)?;
                    if lock(&failure).is_some() {
                        return Ok(false);
                    }
                    let (per_thread, pending, counted, failure) =
                        (&per_thread, &pending, &counted, &failure);
                    let chunk = Arc::clone(&chunk);
                    scope.spawn_fifo(move |_| {
                        let counts = &per_thread[rayon::current_thread_index().unwrap_or(0)];
                        if let Err(err) = self.count_text(&chunk[part.clone()], &mut lock(counts)) {
                            lock(failure).get_or_insert(err);
                        }
                        counted.fetch_add(part.len() as u64, Ordering::Relaxed);
                        pending.leave();
                    });
                    report()?;
                }
            }
        });
        if let Some(err) = failure.into_inner().unwrap_or_else(|e| e.into_inner()) {
            return Err(err);
        }
        let more = read?;
        let total = sum_per_thread(per_thread);
        Ok((total, more))
    }
}

/// How many chunks are handed to the pool and not yet counted, up to a limit.
struct Pending {
    count: Mutex<usize>,
    room: Condvar,
    limit: usize,
}

/// How long `Pending::enter` waits between reports.
const WAIT_REPORT: Duration = Duration::from_millis(50);

impl Pending {
    fn new(limit: usize) -> Self {
        Pending {
            count: Mutex::new(0),
            room: Condvar::new(),
            limit,
        }
    }

    /// Takes a place for one more chunk, waiting for one if none is free;
    /// `report` runs while waiting (progress, Ctrl-C).
    fn enter(&self, report: impl Fn() -> Result<()>) -> Result<()> {
        loop {
            let mut count = lock(&self.count);
            if *count < self.limit {
                *count += 1;
                return Ok(());
            }
            if rayon::current_thread_index().is_some() {
                // On a pool thread: count chunks rather than wait for others to.
                drop(count);
                if rayon::yield_now() == Some(rayon::Yield::Idle) {
                    std::thread::yield_now();
                }
            } else {
                drop(self.room.wait_timeout(count, WAIT_REPORT));
            }
            report()?;
        }
    }

    /// Frees the place of a chunk counted.
    fn leave(&self) {
        *lock(&self.count) -= 1;
        self.room.notify_one();
    }
}

/// Counts rows `0..n` on all cores: `count_run` counts a run of them
/// into the table of the pool thread it runs on, and the tables are
/// added at the end.
fn count_runs(
    n: usize,
    count_run: impl Fn(std::ops::Range<usize>, &mut PieceCounts) -> Result<()> + Sync,
) -> Result<PieceCounts> {
    let threads = rayon::current_num_threads();
    let per_thread: Vec<Mutex<PieceCounts>> = (0..threads).map(|_| Mutex::default()).collect();
    // More runs than threads, so that a thread done early takes another.
    let runs = (4 * threads).min(n);
    (0..runs).into_par_iter().try_for_each(|run| {
        let counts = &per_thread[rayon::current_thread_index().unwrap_or(0) % threads];
        count_run(run * n / runs..(run + 1) * n / runs, &mut lock(counts))
    })?;
    Ok(sum_per_thread(per_thread))
}

/// The sum of the counts of each pool thread.
fn sum_per_thread(per_thread: Vec<Mutex<PieceCounts>>) -> PieceCounts {
    PieceCounts::sum(
        per_thread
            .into_iter()
            .map(|counts| counts.into_inner().unwrap_or_else(|e| e.into_inner()))
            .collect(),
    )
}

/// Locks a mutex; a panic elsewhere leaves its data usable here.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
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
        let texts = [text, "no line break at the end".to_string()];
        let parts: Vec<&str> = texts
            .iter()
            .flat_map(|t| counter.parts(t).into_iter().map(move |r| &t[r]))
            .collect();
        assert!(parts.len() > 3);
        assert_eq!(parts.concat(), texts.concat());
        let mut whole = PieceCounts::default();
        counter.count_text(&texts.concat(), &mut whole).unwrap();
        let counted = counter.count_texts(&parts).unwrap();
        assert_eq!(counted.pieces, whole.pieces);
        assert_eq!(counted.text_bytes, whole.text_bytes);
        // Counted apart and added: the same.
        let mut sharded = PieceCounts::default();
        for part in &parts {
            sharded.add(&counter.count_texts(&[*part]).unwrap());
        }
        assert_eq!(sharded.pieces, whole.pieces);
        assert_eq!(sharded.text_bytes, whole.text_bytes);
    }

    #[test]
    fn bounded_counting_prunes_the_same_pieces_on_any_number_of_threads() {
        let directory = std::env::temp_dir().join(format!("polytok-rounds-{}", std::process::id()));
        std::fs::create_dir_all(&directory).unwrap();
        let paths: Vec<std::path::PathBuf> = (0..8)
            .map(|file| {
                let path = directory.join(format!("{file}.txt"));
                let text: String = (0..2000)
                    .map(|i| format!("common{} rare{}x{file}\n", i % 50, i))
                    .collect();
                std::fs::write(&path, text).unwrap();
                path
            })
            .collect();
        let counter = Counter::new(Pattern::Cl100k, Vec::new()).unwrap();
        let count = |threads: usize, max: Option<usize>, round: u64| {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap();
            pool.install(|| {
                counter
                    .count_files_in_rounds(
                        &paths,
                        BadBytes::Error,
                        0,
                        max,
                        round,
                        &Progress::silent(),
                    )
                    .unwrap()
            })
        };
        let whole = count(2, None, u64::MAX);
        // A round per file: pruned between files.
        let bounded = count(1, Some(300), 1);
        assert_eq!(bounded.len(), 300);
        assert_eq!(bounded.text_bytes, whole.text_bytes);
        assert_eq!(
            bounded.occurrences() + bounded.dropped.occurrences,
            whole.occurrences()
        );
        // The frequent pieces survive, exactly counted.
        for i in 0..50 {
            let piece = format!("common{i}").into_bytes();
            assert_eq!(bounded.get(&piece), whole.get(&piece));
        }
        for threads in [2, 4] {
            let again = count(threads, Some(300), 1);
            assert_eq!(again.pieces, bounded.pieces);
            assert_eq!(again.dropped, bounded.dropped);
        }
        std::fs::remove_dir_all(&directory).unwrap();
    }
}
