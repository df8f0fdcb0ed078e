//! The bookkeeping shared by the merge trainers (BPE, WordPiece): the
//! distinct words of a corpus as sequences of symbol ids, with their counts,
//! the count of every adjacent pair of symbols (weighted by word counts), and
//! where each pair occurs.
//!
//! Merging a pair adjusts the counts of the pairs around each occurrence, as
//! in the classic incremental algorithm, and must cost in proportion to the
//! occurrences it replaces, however the text was cut into words. Two kinds
//! of words, two ways:
//! - short words (fewer than `LONG_WORD` symbols: nearly every word that a
//!   pre-tokenizer makes): each pair lists the words it occurs in, and a
//!   merge rewrites those words in one pass each. Cheap and compact, since a
//!   short word costs little to rescan.
//! - long words (one line of megabytes with `pattern="none"`, long lines):
//!   rescanning a word at every merge that touches it would cost its length
//!   times the number of merges (a 2 MB line took 45 s). Their symbols are
//!   a linked list, and each pair lists the positions of its occurrences;
//!   a merge visits those positions only, in text order, so overlapping
//!   occurrences (`a a a`) merge left to right as in a short word.
//!
//! Lists may hold entries that no longer hold the pair, and duplicates;
//! both are dropped when the list is used.
//!
//! Speed: a trainer's merge loop is serial (each merge depends on the
//! counts the last one left), and a merge spends its time reaching words
//! and pairs scattered over memory. So:
//! - short words are records in one arena (length, count, symbols), and a
//!   pair lists the offsets of its records: reaching a word is one cache
//!   miss, where a `Vec` per word and an array of counts cost three. Each
//!   record is fetched `FETCH_AHEAD` records before its turn, so that the
//!   misses overlap with the work on the records before it (1.10x on the
//!   training of `rust/examples/profile_train.rs`, one thread);
//! - a merge's changes are gathered by the symbol next to each occurrence
//!   (`Changes`), one map entry per side, and turned into changed pairs
//!   once per merge (1.18x, where each occurrence updated four pair counts
//!   and two lists);
//! - a pair's count and records are one map entry (one lookup per pair a
//!   merge changes), and pairs that can no longer matter are forgotten
//!   (the `floor` of `new`): the map stays small;
//! - a merge that touches many words (`PARALLEL_WORDS`: the early merges,
//!   which do most of the rewriting) rewrites them on all cores, in
//!   disjoint parts of the arena, each part collecting its own changes;
//!   the changes are then summed, which gives exactly the serial result.
//!   The maps are kept from one merge to the next rather than allocated
//!   each time.
//!
//! No result depends on the order of the words (counts are sums, and
//! changes are reported in key order); callers may still order them so
//! that words a merge touches lie together.
//!
//! Cost: building is O(total word length), on all cores; a merge costs the
//! length of the short words and the number of long-word occurrences it
//! touches.

use std::collections::hash_map::Entry;

use rayon::prelude::*;
use rustc_hash::FxHashMap;

use crate::error::{Error, Result};

/// Words of at least this many symbols are long (see the module docs).
const LONG_WORD: usize = 64;

/// A merge that touches at least this many short words runs on all cores;
/// below, the cost of sharing out the work outweighs the gain.
const PARALLEL_WORDS: usize = 2048;

/// How many records ahead `merge_records` fetches.
const FETCH_AHEAD: usize = 16;

/// A short word's record in the arena: its length now, its count (low half,
/// high half), then its symbols. Merges shorten a record in place.
const HEADER: usize = 3;

/// A pair of symbol ids as one key.
#[inline(always)]
pub(crate) fn pair_key(left: u32, right: u32) -> u64 {
    ((left as u64) << 32) | right as u64
}

/// The two ids of a pair key.
#[inline(always)]
pub(crate) fn pair_ids(key: u64) -> (u32, u32) {
    ((key >> 32) as u32, key as u32)
}

#[derive(Default)]
pub(crate) struct PairIndex {
    /// The records of the short words of two symbols or more, one after
    /// another (a word of one symbol has no pair).
    records: Vec<u32>,
    /// Pair -> its count and records: one entry, so that a merge reaches
    /// both with one lookup.
    pairs: FxHashMap<u64, PairEntry>,
    long: LongWords,
    /// Pairs counted fewer times are forgotten (see `new`).
    floor: i64,
    /// The emptied maps of the last merge, for the next one (fresh maps
    /// grow, and their pages are zeroed on first touch): a merge's changes
    /// are gathered in `spare_changes`, those of each run of a parallel one
    /// in `spare_parts` first.
    spare_changes: Changes,
    spare_parts: Vec<Changes>,
    /// The emptied list of changed pairs of the last merge.
    spare_pairs: Vec<PairChange>,
}

/// What is known of a pair.
#[derive(Default)]
struct PairEntry {
    /// Occurrences, weighted by word counts.
    count: i64,
    /// Offsets of the records it occurs in (maybe stale, duplicated).
    records: Vec<u32>,
}

/// The long words, one after another, as linked lists of symbols.
#[derive(Default)]
struct LongWords {
    /// The symbol at each position; `GONE` once merged into the one before.
    symbols: Vec<u32>,
    /// The next and previous live positions in the same word (`END`: none).
    next: Vec<u32>,
    prev: Vec<u32>,
    /// Where each long word starts, in position order, and its count.
    starts: Vec<u32>,
    counts: Vec<u64>,
    /// Pair -> positions of its left symbol (maybe stale, duplicated).
    pair_positions: FxHashMap<u64, Vec<u32>>,
}

const GONE: u32 = u32::MAX;
const END: u32 = u32::MAX;

/// What a merge of `left right` into `new` changed, gathered by the
/// symbol next to each occurrence: after a symbol `s`, the occurrence
/// turned the pair `s left` into `s new`; before a symbol `t`, `right t`
/// into `new t`. Both changes of a side follow from its symbol, so the
/// words are rewritten with one map entry per side and occurrence (where
/// the changed pairs themselves took four counts and two lists, six
/// lookups), and the pairs are made from the symbols once per merge
/// (`Changes::pairs`).
///
/// Aligned to two cache lines: the runs of a parallel merge update their
/// own `Changes`, side by side in one vector, at every occurrence (the
/// maps' lengths, `replaced`); sharing lines made two threads slower than
/// one.
#[derive(Default)]
#[repr(align(128))]
struct Changes {
    /// The symbol before an occurrence -> the occurrences after it.
    before: FxHashMap<u32, Occurrences>,
    /// The symbol after an occurrence -> the occurrences before it.
    after: FxHashMap<u32, Occurrences>,
    /// Occurrences replaced, weighted by word counts.
    replaced: u64,
}

/// Occurrences next to one symbol: how many (weighted by word counts), and
/// the offsets of the short words' records they are in, in arena order.
#[derive(Default)]
struct Occurrences {
    count: i64,
    records: Vec<u32>,
}

impl Occurrences {
    #[inline]
    fn add(&mut self, count: u64, record: Option<u32>) {
        self.count += count as i64;
        if let Some(record) = record {
            if self.records.last() != Some(&record) {
                self.records.push(record);
            }
        }
    }
}

/// A changed pair: its change of count, and the records where it now
/// occurs.
type PairChange = (u64, i64, Vec<u32>);

impl Changes {
    /// Records an occurrence (`record`: the offset of its short word's
    /// record) between `before` and `after`, in a word counted `count`
    /// times.
    #[inline]
    fn add(&mut self, before: Option<u32>, after: Option<u32>, count: u64, record: Option<u32>) {
        if let Some(symbol) = before {
            self.before.entry(symbol).or_default().add(count, record);
        }
        if let Some(symbol) = after {
            self.after.entry(symbol).or_default().add(count, record);
        }
    }

    /// Adds `later`'s changes (of records further on) to these, emptying
    /// `later` but keeping its maps' room for the next merge.
    fn absorb(&mut self, later: &mut Changes) {
        for (mine, theirs) in [
            (&mut self.before, &mut later.before),
            (&mut self.after, &mut later.after),
        ] {
            for (symbol, occurrences) in theirs.drain() {
                let entry = mine.entry(symbol).or_default();
                entry.count += occurrences.count;
                append(&mut entry.records, occurrences.records);
            }
        }
        self.replaced += std::mem::take(&mut later.replaced);
    }

    /// The pairs whose counts the merge of `left right` into `new` changed,
    /// in key order, each once, with where they now occur; emptying the
    /// maps (their room kept).
    fn pairs(&mut self, left: u32, right: u32, new: u32, into: &mut Vec<PairChange>) {
        into.clear();
        // Each symbol's occurrences: the pair they ended, and the one they
        // made.
        let before = self.before.drain().map(|(symbol, occurrences)| {
            (pair_key(symbol, left), pair_key(symbol, new), occurrences)
        });
        let after = self.after.drain().map(|(symbol, occurrences)| {
            (pair_key(right, symbol), pair_key(new, symbol), occurrences)
        });
        for (ended, made, occurrences) in before.chain(after) {
            into.push((ended, -occurrences.count, Vec::new()));
            into.push((made, occurrences.count, occurrences.records));
        }
        // One pair may come from both sides (`s left` is `right t` when
        // s = right and t = left): summed.
        into.sort_unstable_by_key(|&(key, _, _)| key);
        into.dedup_by(|later, kept| {
            if later.0 != kept.0 {
                return false;
            }
            kept.1 += later.1;
            append(&mut kept.2, std::mem::take(&mut later.2));
            true
        });
    }
}

/// Appends each list of `later` to the list of the same pair in `lists`.
fn append_lists(lists: &mut FxHashMap<u64, Vec<u32>>, later: FxHashMap<u64, Vec<u32>>) {
    for (key, list) in later {
        append(lists.entry(key).or_default(), list);
    }
}

/// Appends `list` to `to` (taking it whole when `to` is empty).
fn append(to: &mut Vec<u32>, list: Vec<u32>) {
    if to.is_empty() {
        *to = list;
    } else {
        to.extend(list);
    }
}

/// The index of one run of words, built on its own (see `PairIndex::new`).
#[derive(Default)]
struct Part {
    pairs: FxHashMap<u64, PairEntry>,
    long: LongWords,
}

impl Part {
    /// This part followed by `later` (the next run of words).
    fn then(mut self, later: Part) -> Part {
        for (key, pair) in later.pairs {
            let entry = self.pairs.entry(key).or_default();
            entry.count += pair.count;
            append(&mut entry.records, pair.records);
        }
        self.long.append(later.long);
        self
    }
}

/// Drops `value` on a thread of its own: freeing many small allocations
/// (the pieces, the index's lists) takes tens of milliseconds that training
/// need not wait for. Not on the pool, whose threads training may need at
/// once.
pub fn drop_in_background<T: Send + 'static>(value: T) {
    // Without a thread (none left to start), the closure, and so `value`,
    // is dropped here.
    let _ = std::thread::Builder::new().spawn(move || drop(value));
}

impl PairIndex {
    /// Indexes `words` (each with its count), on all cores.
    ///
    /// Pairs counted fewer than `floor` times are forgotten, and stay so:
    /// no count, no list, no report of their changes. That is only for
    /// trainers whose every merge makes a new symbol: then a pair's count
    /// only falls once the merge that makes it is done, and a pair below
    /// the floor can never reach it (so BPE forgets the pairs it could
    /// never merge). With `floor` 1, every pair that occurs is kept.
    pub fn new<W, S>(words: &[(W, u64)], floor: u64) -> Result<Self>
    where
        W: AsRef<[S]> + Sync,
        S: Copy + Into<u32> + Sync,
    {
        let runs: Vec<&[(W, u64)]> = words
            .chunks((words.len() / (4 * rayon::current_num_threads())).max(1024))
            .collect();
        // The space each run takes in the arena and in the long words.
        let sizes: Vec<(usize, usize)> = runs
            .par_iter()
            .map(|run| {
                run.iter().fold((0, 0), |(short, long), (word, _)| {
                    match word.as_ref().len() {
                        0..2 => (short, long),
                        n if n < LONG_WORD => (short + HEADER + n, long),
                        n => (short, long + n),
                    }
                })
            })
            .collect();
        let records_len: usize = sizes.iter().map(|&(short, _)| short).sum();
        let long_len: usize = sizes.iter().map(|&(_, long)| long).sum();
        // Offsets and positions are u32, and `END` is one.
        if records_len > u32::MAX as usize || long_len >= END as usize {
            return Err(Error::Corpus(
                "the corpus has too many distinct pieces to train on (their lengths add up past 2^32)"
                    .to_owned(),
            ));
        }
        let mut records = vec![0u32; records_len];
        let parts = split_lengths(&mut records, sizes.iter().map(|&(short, _)| short));
        let mut starts = (0u32, 0u32);
        let starts: Vec<(u32, u32)> = sizes
            .iter()
            .map(|&(short, long)| {
                let run_start = starts;
                starts = (starts.0 + short as u32, starts.1 + long as u32);
                run_start
            })
            .collect();
        let built = runs
            .into_par_iter()
            .zip(parts)
            .zip(starts)
            .map(|((run, part), (records_start, long_start))| {
                index_run(run, part, records_start, long_start)
            })
            .reduce(Part::default, Part::then);
        let floor = floor.max(1) as i64;
        let mut pairs = built.pairs;
        pairs.retain(|_, pair| pair.count >= floor);
        Ok(PairIndex {
            records,
            pairs,
            long: built.long,
            floor,
            spare_changes: Changes::default(),
            spare_parts: Vec::new(),
            spare_pairs: Vec::new(),
        })
    }

    /// The current count of a pair (0 if it occurs nowhere, or is
    /// forgotten).
    pub fn count(&self, pair: u64) -> u64 {
        self.pairs.get(&pair).map_or(0, |entry| entry.count as u64)
    }

    /// Every pair kept, with its count, in no set order.
    pub fn pairs(&self) -> impl ExactSizeIterator<Item = (u64, u64)> + '_ {
        self.pairs
            .iter()
            .map(|(&pair, entry)| (pair, entry.count as u64))
    }

    /// Replaces every occurrence of `left right` by `new_id`, left to right
    /// in each word, and calls `changed(pair, new count, change)` for every
    /// other pair whose count changed, in key order. Returns the number of
    /// occurrences replaced, weighted by word counts: less than the pair's
    /// count when `left == right` and occurrences overlap (`a a a` makes one
    /// `aa`).
    pub fn merge(
        &mut self,
        left: u32,
        right: u32,
        new_id: u32,
        mut changed: impl FnMut(u64, i64, i64),
    ) -> u64 {
        let pair = pair_key(left, right);
        let mut offsets = self
            .pairs
            .remove(&pair)
            .map(|entry| entry.records)
            .unwrap_or_default();
        offsets.sort_unstable();
        offsets.dedup();

        let threads = rayon::current_num_threads();
        let parallel = offsets.len() >= PARALLEL_WORDS && threads > 1;
        let mut changes = if parallel {
            // Each run of offsets with the part of the arena that holds its
            // records (up to the next run's first record).
            let runs: Vec<&[u32]> = offsets
                .chunks(offsets.len().div_ceil(4 * threads))
                .collect();
            let first = offsets[0] as usize;
            let part_lengths = runs.windows(2).map(|w| (w[1][0] - w[0][0]) as usize);
            let last_length = self.records.len() - runs[runs.len() - 1][0] as usize;
            let parts = split_lengths(
                &mut self.records[first..],
                part_lengths.chain(std::iter::once(last_length)),
            );
            let mut part_changes = std::mem::take(&mut self.spare_parts);
            if part_changes.len() < runs.len() {
                part_changes.resize_with(runs.len(), Changes::default);
            }
            runs.into_par_iter()
                .zip(parts)
                .zip(&mut part_changes[..])
                .for_each(|((run, part), changes)| {
                    merge_records(part, run[0], run, left, right, new_id, changes);
                });
            // Summed in arena order (the lists stay in arena order).
            let mut changes = std::mem::take(&mut self.spare_changes);
            for part in &mut part_changes {
                changes.absorb(part);
            }
            self.spare_parts = part_changes;
            changes
        } else {
            let mut changes = std::mem::take(&mut self.spare_changes);
            merge_records(
                &mut self.records,
                0,
                &offsets,
                left,
                right,
                new_id,
                &mut changes,
            );
            changes
        };
        self.long.merge(left, right, new_id, &mut changes);
        let replaced = std::mem::take(&mut changes.replaced);
        let mut pairs = std::mem::take(&mut self.spare_pairs);
        changes.pairs(left, right, new_id, &mut pairs);
        self.spare_changes = changes;

        // In key order, so that callers see changes in a fixed order.
        for (key, delta, records) in pairs.drain(..) {
            if key == pair {
                continue;
            }
            let count = match self.pairs.entry(key) {
                Entry::Occupied(mut entry) => {
                    let count = entry.get().count + delta;
                    debug_assert!(count >= 0);
                    if count < self.floor {
                        entry.remove();
                    } else {
                        let entry = entry.get_mut();
                        entry.count = count;
                        append(&mut entry.records, records);
                    }
                    count
                }
                Entry::Vacant(entry) if delta >= self.floor => {
                    entry.insert(PairEntry {
                        count: delta,
                        records,
                    });
                    delta
                }
                // Below the floor: forgotten, or never kept.
                Entry::Vacant(_) => continue,
            };
            if delta != 0 {
                changed(key, count, delta);
            }
        }
        self.spare_pairs = pairs;
        replaced
    }
}

/// The index of a run of words: their records written into `part` (the
/// arena from offset `records_start`), their long words placed from
/// position `long_start`.
fn index_run<W, S>(run: &[(W, u64)], part: &mut [u32], records_start: u32, long_start: u32) -> Part
where
    W: AsRef<[S]>,
    S: Copy + Into<u32>,
{
    let mut built = Part::default();
    let mut at = 0;
    for (word, count) in run {
        let word = word.as_ref();
        if word.len() < 2 {
            continue;
        }
        for w in word.windows(2) {
            built
                .pairs
                .entry(pair_key(w[0].into(), w[1].into()))
                .or_default()
                .count += *count as i64;
        }
        if word.len() >= LONG_WORD {
            let start = long_start + built.long.symbols.len() as u32;
            built.long.push(start, word, *count);
            continue;
        }
        let offset = records_start + at as u32;
        let record = &mut part[at..at + HEADER + word.len()];
        record[0] = word.len() as u32;
        record[1] = *count as u32;
        record[2] = (*count >> 32) as u32;
        for (slot, &symbol) in record[HEADER..].iter_mut().zip(word) {
            *slot = symbol.into();
        }
        for w in record[HEADER..].windows(2) {
            let list = &mut built.pairs.entry(pair_key(w[0], w[1])).or_default().records;
            if list.last() != Some(&offset) {
                list.push(offset);
            }
        }
        at += record.len();
    }
    built
}

/// Merges `left right` in the records at `offsets` (in arena order), which
/// lie in `part`, the arena from offset `part_start`, and adds what changed
/// to `changes`.
fn merge_records(
    part: &mut [u32],
    part_start: u32,
    offsets: &[u32],
    left: u32,
    right: u32,
    new_id: u32,
    changes: &mut Changes,
) {
    for (at, &offset) in offsets.iter().enumerate() {
        // The records are scattered over the arena and each is a cache
        // miss: fetched `FETCH_AHEAD` records ahead, their misses overlap
        // with the work on the records before them.
        if let Some(&ahead) = offsets.get(at + FETCH_AHEAD) {
            crate::prefetch::line(&part[(ahead - part_start) as usize]);
        }
        let record = &mut part[(offset - part_start) as usize..];
        let (len, count) = (record[0], record[1] as u64 | (record[2] as u64) << 32);
        let symbols = &mut record[HEADER..HEADER + len as usize];
        let (merged, new_len) = merge_word(symbols, left, right, new_id, |before, after| {
            changes.add(before, after, count, Some(offset));
        });
        record[0] = new_len as u32;
        changes.replaced += merged * count;
    }
}

/// `slice` cut into consecutive parts of the given lengths.
fn split_lengths<T>(mut slice: &mut [T], lengths: impl Iterator<Item = usize>) -> Vec<&mut [T]> {
    lengths
        .map(|len| {
            let (part, rest) = std::mem::take(&mut slice).split_at_mut(len);
            slice = rest;
            part
        })
        .collect()
}

impl LongWords {
    /// Appends a long word that starts at position `start` (this list may be
    /// the part of a larger one that starts before its first position).
    fn push<S: Copy + Into<u32>>(&mut self, start: u32, word: &[S], count: u64) {
        self.starts.push(start);
        self.counts.push(count);
        let n = word.len() as u32;
        self.symbols
            .extend(word.iter().map(|&symbol| symbol.into()));
        self.next
            .extend((start + 1..start + n).chain(std::iter::once(END)));
        self.prev
            .extend(std::iter::once(END).chain(start..start + n - 1));
        for (i, w) in word.windows(2).enumerate() {
            self.pair_positions
                .entry(pair_key(w[0].into(), w[1].into()))
                .or_default()
                .push(start + i as u32);
        }
    }

    /// Appends the long words of `later`, which start where these end.
    fn append(&mut self, mut later: LongWords) {
        self.symbols.append(&mut later.symbols);
        self.next.append(&mut later.next);
        self.prev.append(&mut later.prev);
        self.starts.append(&mut later.starts);
        self.counts.append(&mut later.counts);
        append_lists(&mut self.pair_positions, later.pair_positions);
    }

    /// The count of the word at `position`.
    fn count_at(&self, position: u32) -> u64 {
        let at = self.starts.partition_point(|&start| start <= position) - 1;
        self.counts[at]
    }

    /// Merges the occurrences of `left right` in the long words and adds
    /// them to `changes` (with no records: their positions are listed
    /// here).
    fn merge(&mut self, left: u32, right: u32, new_id: u32, changes: &mut Changes) {
        let Some(mut positions) = self.pair_positions.remove(&pair_key(left, right)) else {
            return;
        };
        // Text order: overlapping occurrences merge left to right.
        positions.sort_unstable();
        positions.dedup();
        for at in positions {
            let second = self.next[at as usize];
            if self.symbols[at as usize] != left
                || second == END
                || self.symbols[second as usize] != right
            {
                continue; // Merged away since it was listed.
            }
            let before = self.prev[at as usize];
            let before_symbol = (before != END).then(|| self.symbols[before as usize]);
            if let Some(symbol) = before_symbol {
                self.pair_positions
                    .entry(pair_key(symbol, new_id))
                    .or_default()
                    .push(before);
            }
            let after = self.next[second as usize];
            let after_symbol = (after != END).then(|| self.symbols[after as usize]);
            if let Some(symbol) = after_symbol {
                self.pair_positions
                    .entry(pair_key(new_id, symbol))
                    .or_default()
                    .push(at);
                self.prev[after as usize] = at;
            }
            let count = self.count_at(at);
            changes.add(before_symbol, after_symbol, count, None);
            changes.replaced += count;
            self.symbols[at as usize] = new_id;
            self.symbols[second as usize] = GONE;
            self.next[at as usize] = after;
        }
    }
}

/// Merges the occurrences of `left right` in one word, left to right, in one
/// pass, calls `occurrence(before, after)` with the symbols next to each
/// (the one before as merged so far), and returns how many it merged and
/// the word's new length.
fn merge_word(
    word: &mut [u32],
    left: u32,
    right: u32,
    new_id: u32,
    mut occurrence: impl FnMut(Option<u32>, Option<u32>),
) -> (u64, usize) {
    let n = word.len();
    let mut merged = 0;
    // The merged word is written over the word as it is read.
    let (mut read, mut write) = (0usize, 0usize);
    while read < n {
        if read + 1 < n && word[read] == left && word[read + 1] == right {
            let before = write.checked_sub(1).map(|at| word[at]);
            occurrence(before, word.get(read + 2).copied());
            word[write] = new_id;
            read += 2;
            merged += 1;
        } else {
            word[write] = word[read];
            read += 1;
        }
        write += 1;
    }
    (merged, write)
}

#[cfg(test)]
mod tests {
    use super::*;

    impl PairIndex {
        /// The count of every pair kept.
        fn counts(&self) -> FxHashMap<u64, i64> {
            self.pairs()
                .map(|(pair, count)| (pair, count as i64))
                .collect()
        }

        /// Every word as it stands now, given the words it was built from
        /// (in order: records and long words keep it).
        fn current_words(&self, built_from: &[Vec<u32>]) -> Vec<Vec<u32>> {
            let (mut offset, mut long) = (0, 0);
            built_from
                .iter()
                .map(|word| match word.len() {
                    0..2 => word.clone(),
                    n if n < LONG_WORD => {
                        let len = self.records[offset] as usize;
                        let symbols = &self.records[offset + HEADER..offset + HEADER + len];
                        offset += HEADER + n;
                        symbols.to_vec()
                    }
                    _ => {
                        let mut word = Vec::new();
                        let mut at = self.long.starts[long];
                        long += 1;
                        while at != END {
                            word.push(self.long.symbols[at as usize]);
                            at = self.long.next[at as usize];
                        }
                        word
                    }
                })
                .collect()
        }
    }

    /// The pair counts of `words` from scratch.
    fn recount(words: &[Vec<u32>], counts: &[u64]) -> FxHashMap<u64, i64> {
        let mut pairs = FxHashMap::default();
        for (word, &count) in words.iter().zip(counts) {
            for w in word.windows(2) {
                *pairs.entry(pair_key(w[0], w[1])).or_insert(0) += count as i64;
            }
        }
        pairs
    }

    /// The plain way: rebuild each word, merging left to right.
    fn naive_merge(word: &[u32], left: u32, right: u32, new_id: u32) -> (Vec<u32>, u64) {
        let (mut out, mut merged, mut i) = (Vec::new(), 0, 0);
        while i < word.len() {
            if i + 1 < word.len() && word[i] == left && word[i + 1] == right {
                out.push(new_id);
                merged += 1;
                i += 2;
            } else {
                out.push(word[i]);
                i += 1;
            }
        }
        (out, merged)
    }

    /// `count` random words over `symbols` symbols (runs like `a a a` are
    /// frequent with few), of the given lengths in turn, with random
    /// counts (some above 1).
    fn random_words(count: usize, symbols: u64, lengths: &[usize]) -> (Vec<Vec<u32>>, Vec<u64>) {
        let mut rng = crate::test_rng::XorShift(0x2545_F491_4F6C_DD1D);
        let mut next = move |n: u64| rng.next() % n;
        let words: Vec<Vec<u32>> = (0..count)
            .map(|i| {
                (0..lengths[i % lengths.len()])
                    .map(|_| next(symbols) as u32)
                    .collect()
            })
            .collect();
        let counts = (0..count).map(|_| 1 + next(3)).collect();
        (words, counts)
    }

    /// The pair counts of `words` from scratch, of the pairs counted at
    /// least `floor` times.
    fn recount_from(words: &[Vec<u32>], counts: &[u64], floor: i64) -> FxHashMap<u64, i64> {
        let mut pairs = recount(words, counts);
        pairs.retain(|_, &mut count| count >= floor);
        pairs
    }

    /// Merges the most frequent pair (smallest key on ties) `merges` times,
    /// with new symbols from `first_id` on, checking the index (which
    /// forgets pairs counted less than `floor` times) against the plain way
    /// after each; returns every change reported.
    fn merge_checked(
        mut words: Vec<Vec<u32>>,
        counts: &[u64],
        first_id: u32,
        merges: u32,
        floor: u64,
    ) -> Vec<(u64, i64, i64)> {
        let floor_count = floor as i64;
        let pieces: Vec<(Vec<u32>, u64)> = words.iter().cloned().zip(counts.to_vec()).collect();
        let mut index = PairIndex::new(&pieces, floor).unwrap();
        assert_eq!(index.counts(), recount_from(&words, counts, floor_count));
        let mut all_changes = Vec::new();
        for new_id in first_id..first_id + merges {
            let Some((pair, _)) = index
                .pairs()
                .max_by_key(|&(k, c)| (c, std::cmp::Reverse(k)))
            else {
                break;
            };
            let (left, right) = pair_ids(pair);
            let mut changes = Vec::new();
            let replaced = index.merge(left, right, new_id, |key, count, delta| {
                changes.push((key, count, delta));
            });
            let mut naive_replaced = 0;
            for (word, count) in words.iter_mut().zip(counts) {
                let (merged, n) = naive_merge(word, left, right, new_id);
                *word = merged;
                naive_replaced += n * count;
            }
            assert_eq!(replaced, naive_replaced, "merge {new_id}");
            assert_eq!(
                index.current_words(&pieces.iter().map(|p| p.0.clone()).collect::<Vec<_>>()),
                words,
                "merge {new_id}"
            );
            let expected = recount(&words, counts);
            assert_eq!(
                index.counts(),
                recount_from(&words, counts, floor_count),
                "merge {new_id}"
            );
            // Every reported change is the pair's new count, in key order.
            assert!(changes.windows(2).all(|w| w[0].0 < w[1].0));
            for &(key, count, _) in &changes {
                assert_eq!(
                    count,
                    expected.get(&key).copied().unwrap_or(0),
                    "merge {new_id}"
                );
            }
            all_changes.extend(changes);
        }
        all_changes
    }

    #[test]
    fn merges_equal_the_plain_way_on_short_and_long_words() {
        let lengths = [1, 2, 3, 5, 8, 63, 64, 65, 200, 3000];
        let (words, counts) = random_words(60, 3, &lengths);
        merge_checked(words, &counts, 3, 57, 1);
    }

    #[test]
    fn pairs_below_the_floor_are_forgotten() {
        let lengths = [2, 3, 4, 6, 9, 70];
        let (words, counts) = random_words(400, 8, &lengths);
        for floor in [2, 5, 40] {
            merge_checked(words.clone(), &counts, 8, 60, floor);
        }
    }

    #[test]
    fn parallel_merges_equal_the_plain_way() {
        // Enough words that the early merges run in parallel (when the
        // tests have more than one thread).
        let (words, counts) = random_words(20 * PARALLEL_WORDS, 6, &[2, 3, 4, 7, 12, 30]);
        merge_checked(words, &counts, 6, 40, 1);
    }

    #[test]
    fn results_do_not_depend_on_word_order() {
        let lengths = [2, 3, 5, 8, 70, 4, 9];
        let (words, counts) = random_words(3 * PARALLEL_WORDS, 4, &lengths);
        let forward = merge_checked(words.clone(), &counts, 4, 30, 2);
        let backward = merge_checked(
            words.into_iter().rev().collect(),
            &counts.into_iter().rev().collect::<Vec<_>>(),
            4,
            30,
            2,
        );
        assert_eq!(forward, backward);
    }
}
