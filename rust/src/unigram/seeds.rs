//! The seed vocabulary of Unigram training: every character of the corpus,
//! then its most frequent substrings, scored by frequency × length (the
//! characters they cover), as SentencePiece seeds its trainer.
//!
//! Frequencies are over the corpus, not over its distinct words: each word
//! counts as often as it occurs. The candidates are the substrings that are
//! right-maximal (followed by two different characters, or by the end of
//! words): a substring that is always followed by the same character has the
//! frequency of its extension and a lower score, so it never beats it.
//!
//! How: the suffixes of the distinct words (each word ends with its own
//! terminator) are sorted on their first `max_piece_chars + 1` characters,
//! which is all a piece can use. The longest common prefixes of neighbours
//! give the right-maximal substrings as LCP intervals (a stack walk over the
//! sorted suffixes); a prefix sum of word counts in suffix order gives each
//! interval's frequency in O(1). A substring inside only one distinct word is
//! no interval, but is a candidate when that word occurs twice or more: the
//! suffix of the word from that start, which is right-maximal at the word's
//! end. Cost: O(N log N) comparisons of at most `max_piece_chars + 1`
//! characters, N the characters of the distinct words; memory 13 bytes per
//! character (the text, the suffixes, their common prefixes), plus 16 per
//! candidate.
//!
//! Every step runs on all cores. A parallel quicksort of all the suffixes
//! would partition the whole array on one thread before it splits it, so
//! the suffixes are first put in buckets by their first character (in
//! parallel, each unit of words writing its own cell of every bucket) and
//! the buckets are sorted independently. The stack walk runs on segments of
//! the sorted suffixes cut where neighbours share at most one character: no
//! candidate's interval crosses such a cut. The result does not depend on
//! the threads: the candidates' order (score, then text) is total.

use std::sync::atomic::{AtomicBool, Ordering};

use rayon::prelude::*;
use rustc_hash::FxHashMap;
use unicode_script::{Script, UnicodeScript};

use super::SPACE_SYMBOL;

/// A character left out of the vocabulary (rarer than the coverage keeps).
pub(super) const RARE: u32 = u32::MAX - 1;
/// The end of a word in the suffix text.
const END: u32 = u32::MAX;

/// What a piece may be.
#[derive(Clone, Copy, Debug)]
pub struct PieceRules {
    /// The longest piece, in characters.
    pub max_piece_chars: usize,
    /// No piece mixes Unicode scripts (Hiragana and Katakana count as Han;
    /// combining marks take the script before them).
    pub split_by_script: bool,
    /// Digits are pieces of their own.
    pub split_digits: bool,
}

impl PieceRules {
    /// SentencePiece's rules for a piece: `▁` only at its start, no rare
    /// character, and (as configured) one script and no digit in a longer
    /// piece.
    pub fn allows(&self, chars: &[u32]) -> bool {
        if chars.is_empty() || chars.len() > self.max_piece_chars {
            return false;
        }
        let mut previous: Option<Script> = None;
        for (i, &code) in chars.iter().enumerate() {
            if code == RARE || code == END || code == 0 || code == u32::from(' ') {
                return false;
            }
            let Some(c) = char::from_u32(code) else {
                return false;
            };
            if c == SPACE_SYMBOL {
                if i > 0 {
                    return false;
                }
                continue;
            }
            if self.split_digits && chars.len() > 1 && c.is_ascii_digit() {
                return false;
            }
            let script = piece_script(c, previous);
            if self.split_by_script {
                if let (Some(a), Some(b)) = (previous, script) {
                    if a != b {
                        return false;
                    }
                }
            }
            previous = script;
        }
        true
    }
}

/// A character's script as the rules compare them: Hiragana, Katakana
/// and the prolonged sound mark count as Han, a combining mark (Inherited)
/// takes `previous`, the script before it.
pub(super) fn piece_script(c: char, previous: Option<Script>) -> Option<Script> {
    match c.script() {
        Script::Hiragana | Script::Katakana => Some(Script::Han),
        _ if c == '\u{30FC}' => Some(Script::Han),
        Script::Inherited => previous,
        script => Some(script),
    }
}

impl PieceRules {
    /// Cuts a word into the runs within which every piece the rules allow
    /// lies (no piece crosses a change of script with `split_by_script`, or
    /// holds a digit with anything else with `split_digits`), leaving out
    /// the characters `keep` refuses (rare ones); `f` gets each run.
    pub(super) fn runs<'w>(
        &self,
        word: &'w str,
        keep: impl Fn(char) -> bool,
        mut f: impl FnMut(&'w str),
    ) {
        let mut start = 0;
        let mut previous: Option<Script> = None;
        let mut previous_digit = false;
        for (i, c) in word.char_indices() {
            if !keep(c) {
                if i > start {
                    f(&word[start..i]);
                }
                start = i + c.len_utf8();
                previous = None;
                continue;
            }
            let script = piece_script(c, previous);
            let digit = self.split_digits && c.is_ascii_digit();
            let new_script = self.split_by_script
                && c != SPACE_SYMBOL
                && matches!((previous, script), (Some(a), Some(b)) if a != b);
            if i > start && (new_script || digit || previous_digit) {
                f(&word[start..i]);
                start = i;
            }
            previous = if c == SPACE_SYMBOL { None } else { script };
            previous_digit = digit;
        }
        if start < word.len() {
            f(&word[start..]);
        }
    }
}

/// The distinct words as one sequence of characters, each word followed by
/// `END`; rare characters are `RARE`.
pub(super) struct WordText {
    pub chars: Vec<u32>,
    /// Where each word starts in `chars`.
    pub starts: Vec<usize>,
    pub counts: Vec<u64>,
}

/// One suffix: where it starts, and its word.
#[derive(Clone, Copy)]
struct Suffix {
    at: u32,
    word: u32,
}

/// Characters per unit of parallel work when the suffixes are put in
/// buckets (fewer, larger units past `MAX_SCATTER_UNITS`).
const SCATTER_CHARS: usize = 1 << 16;
/// At most this many units put the suffixes in buckets: each unit has a
/// cell in every bucket.
const MAX_SCATTER_UNITS: usize = 64;
/// Sorted suffixes per unit of parallel work when candidates are found.
const SCAN_SUFFIXES: usize = 1 << 14;

/// The seed pieces with their frequencies: `characters` first (given with
/// their counts, most frequent first), then at most `seed_size` pieces in
/// all, by frequency × length (ties: the smaller string first). Once
/// `cancelled` is set, the sort finishes at once (in no useful order): the
/// caller drops the result.
pub(super) fn seed_pieces(
    text: &WordText,
    characters: &[(char, u64)],
    rules: PieceRules,
    seed_size: usize,
    cancelled: &AtomicBool,
) -> Vec<(String, u64)> {
    let depth = rules.max_piece_chars + 1;
    let chars = &text.chars;
    let suffixes = sorted_suffixes(text, depth, cancelled);
    // lcp[k]: the common prefix of suffixes k - 1 and k (capped at `depth`).
    let n = suffixes.len();
    let lcp: Vec<u8> = (0..n)
        .into_par_iter()
        .map(|k| {
            if k == 0 {
                0
            } else {
                common_prefix(
                    chars,
                    suffixes[k - 1].at as usize,
                    suffixes[k].at as usize,
                    depth,
                ) as u8
            }
        })
        .collect();
    // Segments of the sorted suffixes that start where the common prefix is
    // at most one character: no candidate's interval crosses their bounds.
    let mut bounds = vec![0];
    while let Some(k) = (bounds[bounds.len() - 1] + SCAN_SUFFIXES..n).find(|&k| lcp[k] <= 1) {
        bounds.push(k);
    }
    bounds.push(n);
    // The candidates among suffixes `start..end`, where `lcp[start]` and
    // `lcp[end]` (or the ends of the array) are at most 1: every interval
    // of a common prefix of two characters or more lies inside.
    let segment_candidates = |start: usize, end: usize| {
        let mut candidates = Vec::new();
        let mut consider = |at: u32, len: usize, frequency: u64| {
            let start = at as usize;
            if len >= 2 && rules.allows(&chars[start..start + len]) {
                candidates.push(Candidate {
                    score: frequency * len as u64,
                    at,
                    len: len as u8,
                });
            }
        };
        // Right-maximal substrings shared by two suffixes or more: LCP
        // intervals. A stack entry is (lcp, left bound, summed counts of the
        // suffixes before the left bound); `before` is that sum for suffix k
        // (both from `start`).
        let count_of = |k: usize| text.counts[suffixes[k].word as usize];
        let mut stack: Vec<(usize, usize, u64)> = vec![(0, start, 0)];
        let mut before = 0u64;
        for k in start + 1..=end {
            before += count_of(k - 1);
            let l = lcp[..end].get(k).map_or(0, |&l| l as usize);
            let mut left = (k - 1, before - count_of(k - 1));
            while l < stack.last().expect("the bottom entry stays").0 {
                let (interval_lcp, interval_left, counts_before) = stack.pop().expect("checked");
                if interval_lcp < depth {
                    consider(
                        suffixes[interval_left].at,
                        interval_lcp,
                        before - counts_before,
                    );
                }
                left = (interval_left, counts_before);
            }
            if l > stack.last().expect("the bottom entry stays").0 {
                stack.push((l, left.0, left.1));
            }
        }
        // Substrings of one distinct word that occurs twice or more: up to
        // the word's end, if no other suffix shares that much.
        for (k, suffix) in suffixes.iter().enumerate().take(end).skip(start) {
            let count = text.counts[suffix.word as usize];
            if count < 2 {
                continue;
            }
            let at = suffix.at as usize;
            let len = chars[at..]
                .iter()
                .take(depth)
                .take_while(|&&c| c != END)
                .count();
            let shared = (lcp[k] as usize).max(lcp.get(k + 1).map_or(0, |&l| l as usize));
            if len < depth && len > shared {
                consider(suffix.at, len, count);
            }
        }
        candidates
    };
    let mut candidates: Vec<Candidate> = bounds
        .par_windows(2)
        .flat_map_iter(|bounds| segment_candidates(bounds[0], bounds[1]))
        .collect();
    drop((suffixes, lcp));

    let mut seeds: Vec<(String, u64)> = characters
        .iter()
        .map(|&(c, count)| (c.to_string(), count))
        .collect();
    let wanted = seed_size.saturating_sub(seeds.len());
    let text_of = |c: &Candidate| &chars[c.at as usize..c.at as usize + c.len as usize];
    // A total order: no two candidates have the same text.
    let order = |a: &Candidate, b: &Candidate| {
        b.score
            .cmp(&a.score)
            .then_with(|| text_of(a).cmp(text_of(b)))
    };
    if candidates.len() > wanted && wanted > 0 {
        // Only candidates scoring at least the wanted-th score can be wanted:
        // found by sorting the scores alone, on all cores (a selection would
        // take one).
        let mut scores: Vec<u64> = candidates.par_iter().map(|c| c.score).collect();
        scores.par_sort_unstable_by(|a, b| b.cmp(a));
        let lowest = scores[wanted - 1];
        drop(scores);
        candidates.retain(|c| c.score >= lowest);
    }
    candidates.par_sort_unstable_by(order);
    candidates.truncate(wanted);
    seeds.par_extend(candidates.par_iter().map(|c| {
        let piece: String = text_of(c)
            .iter()
            .map(|&code| char::from_u32(code).expect("checked by the rules"))
            .collect();
        (piece, c.score)
    }));
    seeds
}

/// Every suffix of the words, sorted on its first `depth` characters, then
/// by position: put in buckets by first character, then each bucket sorted
/// (see the module doc).
fn sorted_suffixes(text: &WordText, depth: usize, cancelled: &AtomicBool) -> Vec<Suffix> {
    let chars = &text.chars;
    let suffixes_of = |words: std::ops::Range<usize>| {
        words.flat_map(move |word| {
            (text.starts[word]..)
                .take_while(move |&at| chars[at] != END)
                .map(move |at| Suffix {
                    at: at as u32,
                    word: word as u32,
                })
        })
    };
    // Units of whole words, of about the same number of characters.
    let unit_chars = SCATTER_CHARS.max(chars.len() / MAX_SCATTER_UNITS + 1);
    let mut unit_starts = vec![0];
    for (word, &start) in text.starts.iter().enumerate() {
        if start - text.starts[unit_starts[unit_starts.len() - 1]] >= unit_chars {
            unit_starts.push(word);
        }
    }
    unit_starts.push(text.starts.len());
    let units: Vec<std::ops::Range<usize>> = unit_starts.windows(2).map(|w| w[0]..w[1]).collect();
    let unit_firsts: Vec<FxHashMap<u32, usize>> = units
        .par_iter()
        .map(|words| {
            let mut counts = FxHashMap::default();
            for suffix in suffixes_of(words.clone()) {
                *counts.entry(chars[suffix.at as usize]).or_insert(0) += 1;
            }
            counts
        })
        .collect();
    // Bucket order is character order: no suffix starts with END, the only
    // character `compare_prefixes` moves.
    let mut firsts: Vec<u32> = unit_firsts.iter().flat_map(|c| c.keys().copied()).collect();
    firsts.sort_unstable();
    firsts.dedup();
    let bucket_of: FxHashMap<u32, usize> =
        firsts.iter().enumerate().map(|(b, &c)| (c, b)).collect();
    // cell_sizes[unit][bucket]
    let cell_sizes: Vec<Vec<usize>> = unit_firsts
        .iter()
        .map(|counts| {
            firsts
                .iter()
                .map(|c| counts.get(c).copied().unwrap_or(0))
                .collect()
        })
        .collect();
    drop(unit_firsts);
    let bucket_sizes: Vec<usize> = (0..firsts.len())
        .map(|bucket| cell_sizes.iter().map(|sizes| sizes[bucket]).sum())
        .collect();

    // Made on all cores, where its pages are first touched.
    let mut suffixes: Vec<Suffix> = (0..bucket_sizes.iter().sum())
        .into_par_iter()
        .map(|_| Suffix { at: 0, word: 0 })
        .collect();
    // The cells, bucket after bucket, each by unit; regrouped by unit.
    let mut cells: Vec<Vec<&mut [Suffix]>> = units
        .iter()
        .map(|_| Vec::with_capacity(firsts.len()))
        .collect();
    let mut rest = suffixes.as_mut_slice();
    for bucket in 0..firsts.len() {
        for (unit, sizes) in cell_sizes.iter().enumerate() {
            let (cell, tail) = std::mem::take(&mut rest).split_at_mut(sizes[bucket]);
            cells[unit].push(cell);
            rest = tail;
        }
    }
    cells
        .into_par_iter()
        .zip(&units)
        .for_each(|(mut cells, words)| {
            let mut filled = vec![0; cells.len()];
            for suffix in suffixes_of(words.clone()) {
                let bucket = bucket_of[&chars[suffix.at as usize]];
                cells[bucket][filled[bucket]] = suffix;
                filled[bucket] += 1;
            }
        });

    let mut buckets = Vec::with_capacity(firsts.len());
    let mut rest = suffixes.as_mut_slice();
    for &size in &bucket_sizes {
        let (bucket, tail) = std::mem::take(&mut rest).split_at_mut(size);
        buckets.push(bucket);
        rest = tail;
    }
    buckets.into_par_iter().for_each(|bucket| {
        bucket.par_sort_unstable_by(|a, b| {
            if cancelled.load(Ordering::Relaxed) {
                return std::cmp::Ordering::Equal;
            }
            compare_prefixes(chars, a.at as usize, b.at as usize, depth)
                .then_with(|| a.at.cmp(&b.at))
        })
    });
    suffixes
}

struct Candidate {
    score: u64,
    at: u32,
    len: u8,
}

/// Compares two suffixes on at most `depth` characters; a word's end is
/// smaller than any character and ends the comparison.
fn compare_prefixes(chars: &[u32], a: usize, b: usize, depth: usize) -> std::cmp::Ordering {
    for k in 0..depth {
        let (x, y) = (chars[a + k], chars[b + k]);
        if x != y {
            // END is u32::MAX: order it first.
            return x.wrapping_add(1).cmp(&y.wrapping_add(1));
        }
        if x == END {
            break;
        }
    }
    std::cmp::Ordering::Equal
}

/// The characters two suffixes share at their start (a word's end matches
/// nothing), at most `depth`.
fn common_prefix(chars: &[u32], a: usize, b: usize, depth: usize) -> usize {
    (0..depth)
        .take_while(|&k| chars[a + k] == chars[b + k] && chars[a + k] != END)
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    const RULES: PieceRules = PieceRules {
        max_piece_chars: 16,
        split_by_script: true,
        split_digits: false,
    };

    fn word_text(words: &[(&str, u64)]) -> WordText {
        let mut text = WordText {
            chars: Vec::new(),
            starts: Vec::new(),
            counts: Vec::new(),
        };
        for &(word, count) in words {
            text.starts.push(text.chars.len());
            text.chars.extend(word.chars().map(u32::from));
            text.chars.push(END);
            text.counts.push(count);
        }
        text
    }

    /// Every substring of two characters or more that the rules allow, with
    /// frequency × length: kept if it occurs at two places or more of the
    /// distinct words and is followed there by two different characters or
    /// by a word's end (each end is a character of its own), or if it
    /// occurs at one place only, at the end of a word that occurs twice or
    /// more.
    fn brute_force(words: &[(&str, u64)], rules: PieceRules) -> HashMap<String, u64> {
        // substring -> (frequency, places, followers; None for a word's end)
        type Stats = (u64, usize, std::collections::HashSet<Option<char>>);
        let mut stats: HashMap<Vec<char>, Stats> = HashMap::new();
        for &(word, count) in words {
            let chars: Vec<char> = word.chars().collect();
            for i in 0..chars.len() {
                for j in i + 1..=chars.len() {
                    let entry = stats.entry(chars[i..j].to_vec()).or_default();
                    entry.0 += count;
                    entry.1 += 1;
                    entry.2.insert(chars.get(j).copied());
                }
            }
        }
        stats
            .into_iter()
            .filter(|(sub, (frequency, places, followers))| {
                let codes: Vec<u32> = sub.iter().map(|&c| c as u32).collect();
                let shared = *places >= 2 && (followers.len() >= 2 || followers.contains(&None));
                let alone = *places == 1 && followers.contains(&None) && *frequency >= 2;
                sub.len() >= 2 && rules.allows(&codes) && (shared || alone)
            })
            .map(|(sub, (frequency, _, _))| {
                (sub.iter().collect::<String>(), frequency * sub.len() as u64)
            })
            .collect()
    }

    #[test]
    fn seeds_equal_brute_force() {
        let words = [
            ("▁abab", 3),
            ("▁abc", 1),
            ("▁bab", 2),
            ("▁xyz", 5),
            ("▁ab", 1),
            ("▁cab", 1),
            ("▁ca", 1),
            ("▁naïve", 2),
            ("ab12", 2),
            ("▁12", 1),
            // Shared prefixes longer than a piece can be.
            ("▁abcdefghijklmnopqrstu", 2),
            ("▁abcdefghijklmnopqrstv", 1),
            ("▁bcdefghijklmnopqrs", 3),
        ];
        let text = word_text(&words);
        let seeds = seed_pieces(&text, &[], RULES, usize::MAX, &AtomicBool::new(false));
        let ours: HashMap<String, u64> = seeds.into_iter().collect();
        assert_eq!(ours, brute_force(&words, RULES));
    }

    /// Enough text for several units of the bucket sort and several
    /// segments of the candidate scan.
    #[test]
    fn seeds_equal_brute_force_at_scale() {
        let mut state = 12345u64;
        let mut next = |n: u64| {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (state >> 33) % n
        };
        let letters = ['a', 'b', 'c', 'd', 'é', '1', '▁'];
        let mut words: HashMap<String, u64> = HashMap::new();
        while words.len() < 25_000 {
            let len = 2 + next(9);
            let word: String = std::iter::once('▁')
                .chain((0..len).map(|_| letters[next(letters.len() as u64) as usize]))
                .collect();
            words.insert(word, 1 + next(3));
        }
        let mut words: Vec<(&str, u64)> = words.iter().map(|(w, &c)| (w.as_str(), c)).collect();
        words.sort_unstable();
        let text = word_text(&words);
        assert!(text.chars.len() > 3 * SCATTER_CHARS && text.chars.len() > 3 * SCAN_SUFFIXES);
        let seeds = seed_pieces(&text, &[], RULES, usize::MAX, &AtomicBool::new(false));
        let ours: HashMap<String, u64> = seeds.into_iter().collect();
        assert_eq!(ours, brute_force(&words, RULES));
    }

    #[test]
    fn rules_as_sentencepiece() {
        let allows = |s: &str| RULES.allows(&s.chars().map(u32::from).collect::<Vec<_>>());
        assert!(allows("▁the"));
        assert!(!allows("a▁b"));
        assert!(!allows("a,"));
        assert!(allows("12"));
        assert!(!allows("a1"));
        assert!(allows("ひらカナ漢字"));
        assert!(allows("e\u{301}t")); // the combining mark takes Latin
        assert!(!allows("\u{301}a▁"));
        assert!(!allows("aб"));
        assert!(!allows(&"a".repeat(17)));
        let digits = PieceRules {
            split_digits: true,
            ..RULES
        };
        assert!(!digits.allows(&"12".chars().map(u32::from).collect::<Vec<_>>()));
    }

    #[test]
    fn runs_cut_where_no_piece_may_cross() {
        let runs = |rules: PieceRules, word: &str| {
            let mut out = Vec::new();
            rules.runs(word, |c| c != '#', |run| out.push(run.to_owned()));
            out
        };
        // Scripts (a combining mark goes with the letter before it), the
        // rare character left out, ▁ with what follows it.
        assert_eq!(runs(RULES, "▁héllo,мир#ok"), ["▁héllo", ",", "мир", "ok"]);
        assert_eq!(runs(RULES, "▁e\u{301}té"), ["▁e\u{301}té"]);
        assert_eq!(runs(RULES, "ひらカナ漢字"), ["ひらカナ漢字"]);
        let digits = PieceRules {
            split_digits: true,
            ..RULES
        };
        assert_eq!(runs(digits, "▁a12b"), ["▁a", "1", "2", "b"]);
        assert_eq!(runs(RULES, "▁a12b"), ["▁a", "12", "b"]);
    }
}
