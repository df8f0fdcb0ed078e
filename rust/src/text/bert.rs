//! BERT's text handling: the normalizer and the pre-tokenizer that the
//! released BERT vocabularies expect (those of Hugging Face `tokenizers`'
//! `BertNormalizer` and `BertPreTokenizer`, the reference for exactness).
//!
//! Normalization, in this order:
//! 1. clean: drop NUL, U+FFFD and control characters (general category Cc,
//!    Cf or Co, except tab, CR and LF); any white space becomes a space;
//! 2. put spaces around CJK ideographs, so that each is a word;
//! 3. strip accents: canonical decomposition (NFD), without nonspacing marks;
//! 4. lowercase, character by character.
//!
//! Pre-tokenization: split at white space (dropped) and around each
//! punctuation character (ASCII punctuation or general category P*).
//!
//! The Unicode category and decomposition tables are those of the crates
//! `tokenizers` uses (`unicode_categories`, `unicode-normalization-alignments`):
//! an older Unicode version than Rust's own tables, so a newer table would
//! classify recently added characters differently and break exactness.
//! ASCII, most of any text, takes a table-driven fast path, and so does the
//! rest of the Basic Multilingual Plane, through a table computed once from
//! those crates' functions.

use std::sync::OnceLock;

use unicode_categories::UnicodeCategories;
use unicode_normalization_alignments::char::{canonical_combining_class, decompose_canonical};
use unicode_normalization_alignments::UnicodeNormalization;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BertNormalizer {
    pub clean_text: bool,
    pub handle_chinese_chars: bool,
    pub strip_accents: bool,
    pub lowercase: bool,
}

impl BertNormalizer {
    /// bert-base-uncased's settings (accents follow lowercasing, as in BERT).
    pub fn uncased() -> Self {
        BertNormalizer {
            clean_text: true,
            handle_chinese_chars: true,
            strip_accents: true,
            lowercase: true,
        }
    }

    /// Appends the normalized `text` to `out`.
    pub fn normalize_into(&self, text: &str, out: &mut String) {
        out.reserve(text.len());
        // Characters that NFD may decompose or reorder wait here until a
        // plain character (a starter with no decomposition, such as any
        // ASCII one) ends their run: NFD never reorders across one.
        let mut run = String::new();
        let flush = |run: &mut String, out: &mut String| {
            if !run.is_empty() {
                self.finish_run(run, out);
                run.clear();
            }
        };
        for c in text.chars() {
            if c.is_ascii() {
                flush(&mut run, out);
                match ASCII_CLASS[c as usize] {
                    AsciiClass::Drop if self.clean_text => {}
                    AsciiClass::Space if self.clean_text => out.push(' '),
                    _ if self.lowercase => out.push(c.to_ascii_lowercase()),
                    _ => out.push(c),
                }
                continue;
            }
            let info = char_info(c);
            if self.clean_text && info.flags & DROP != 0 {
                continue;
            }
            if self.clean_text && info.flags & SPACE != 0 {
                flush(&mut run, out);
                out.push(' ');
                continue;
            }
            let chinese = self.handle_chinese_chars && info.flags & CHINESE != 0;
            if self.strip_accents && self.lowercase && info.flags & UNCASED != 0 {
                // The common case, BERT uncased, precomputed.
                flush(&mut run, out);
                if chinese {
                    out.push(' ');
                }
                for &unit in &info.uncased[..info.uncased_len as usize] {
                    out.push(char::from_u32(unit as u32).expect("a BMP character"));
                }
                if chinese {
                    out.push(' ');
                }
            } else if info.flags & PLAIN != 0 {
                flush(&mut run, out);
                if chinese {
                    out.push(' ');
                }
                if !(self.strip_accents && info.flags & MARK != 0) {
                    self.push_cased(c, info, out);
                }
                if chinese {
                    out.push(' ');
                }
            } else if chinese {
                flush(&mut run, out);
                out.push(' ');
                self.finish_run(c.encode_utf8(&mut [0; 4]), out);
                out.push(' ');
            } else {
                run.push(c);
            }
        }
        flush(&mut run, out);
    }

    /// A character as step 4 leaves it.
    #[inline(always)]
    fn push_cased(&self, c: char, info: CharInfo, out: &mut String) {
        if !self.lowercase {
            out.push(c);
        } else if info.flags & LOWER_ONE != 0 {
            out.push(char::from_u32(info.lower as u32).expect("a lowercase character"));
        } else {
            out.extend(c.to_lowercase());
        }
    }

    /// Steps 3 and 4 for a run of non-ASCII characters.
    fn finish_run(&self, run: &str, out: &mut String) {
        let mut push = |c: char| {
            if self.lowercase {
                out.extend(c.to_lowercase());
            } else {
                out.push(c);
            }
        };
        if self.strip_accents {
            for (c, _) in run.nfd() {
                if !c.is_mark_nonspacing() {
                    push(c);
                }
            }
        } else {
            run.chars().for_each(push);
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum AsciiClass {
    /// NUL and the other control characters but tab, LF and CR.
    Drop,
    /// Tab, LF, CR and the space. (Vertical tab and form feed are white
    /// space too, but controls first: cleaning drops them.)
    Space,
    Punctuation,
    Other,
}

pub(crate) static ASCII_CLASS: [AsciiClass; 128] = ascii_classes();

const fn ascii_classes() -> [AsciiClass; 128] {
    let mut classes = [AsciiClass::Other; 128];
    let mut b = 0;
    while b < 128 {
        let c = b as u8;
        classes[b] = if matches!(c, b'\t' | b'\n' | b'\r' | b' ') {
            AsciiClass::Space
        } else if c < 0x20 || c == 0x7F {
            AsciiClass::Drop
        } else if c.is_ascii_punctuation() {
            AsciiClass::Punctuation
        } else {
            AsciiClass::Other
        };
        b += 1;
    }
    classes
}

/// What BERT's text handling asks of a character, precomputed for the Basic
/// Multilingual Plane (from the same functions, so with the same answers).
#[derive(Clone, Copy, Default)]
pub(crate) struct CharInfo {
    pub(crate) flags: u8,
    /// The lowercase character, when `LOWER_ONE`.
    lower: u16,
    /// What stripping accents and lowercasing make of it, when `UNCASED`.
    uncased: [u16; 3],
    uncased_len: u8,
}

/// NUL, U+FFFD or a control character: cleaning drops it.
pub(crate) const DROP: u8 = 1;
/// White space.
pub(crate) const SPACE: u8 = 2;
/// A CJK ideograph.
pub(crate) const CHINESE: u8 = 4;
const PUNCT: u8 = 8;
/// A nonspacing mark (Mn): stripping accents drops it.
pub(crate) const MARK: u8 = 16;
/// NFD leaves it as it is and never moves a mark across it: a starter
/// (canonical combining class 0) without canonical decomposition.
pub(crate) const PLAIN: u8 = 32;
/// Its lowercase is one BMP character, `lower`.
const LOWER_ONE: u8 = 64;
/// BERT uncased (strip accents, lowercase) makes it `uncased`, and NFD never
/// moves a kept mark across it: a starter whose decomposition holds only
/// starters and nonspacing marks (dropped), such as `é` or a Hangul
/// syllable, each kept part lowercasing to one BMP character.
const UNCASED: u8 = 128;

#[inline(always)]
pub(crate) fn char_info(c: char) -> CharInfo {
    static BMP: OnceLock<Box<[CharInfo]>> = OnceLock::new();
    if (c as u32) < 0x10000 {
        // Built on one thread: a parallel build inside `get_or_init` could
        // wait for pool threads that are themselves waiting on this lock.
        let table = BMP.get_or_init(|| {
            (0..0x10000u32)
                .map(|cp| char::from_u32(cp).map_or(CharInfo::default(), compute_char_info))
                .collect()
        });
        table[c as usize]
    } else {
        compute_char_info(c)
    }
}

fn compute_char_info(c: char) -> CharInfo {
    let mut flags = 0;
    let mut set = |bit: u8, on: bool| {
        if on {
            flags |= bit;
        }
    };
    set(DROP, c == '\0' || c == '\u{FFFD}' || is_control(c));
    set(SPACE, c.is_whitespace());
    set(CHINESE, is_chinese_char(c));
    set(PUNCT, is_punctuation(c));
    set(MARK, c.is_mark_nonspacing());
    let mut decomposition = Vec::new();
    decompose_canonical(c, |d| decomposition.push(d));
    let starter = canonical_combining_class(c) == 0;
    set(PLAIN, starter && decomposition == [c]);
    let single_lower = |c: char| {
        let mut lower = c.to_lowercase();
        match (lower.next(), lower.next()) {
            (Some(l), None) if (l as u32) < 0x10000 => Some(l as u16),
            _ => None,
        }
    };
    let lower = single_lower(c);
    set(LOWER_ONE, lower.is_some());
    let mut info = CharInfo {
        flags,
        lower: lower.unwrap_or(0),
        ..CharInfo::default()
    };
    let kept: Vec<char> = decomposition
        .into_iter()
        .filter(|d| !d.is_mark_nonspacing())
        .collect();
    let only_starters = kept.iter().all(|&d| canonical_combining_class(d) == 0);
    let uncased: Option<Vec<u16>> = kept.iter().map(|&d| single_lower(d)).collect();
    if let Some(units) = uncased.filter(|u| starter && only_starters && u.len() <= 3) {
        info.flags |= UNCASED;
        info.uncased[..units.len()].copy_from_slice(&units);
        info.uncased_len = units.len() as u8;
    }
    info
}

/// A control character for BERT's cleaning: general category Cc, Cf or Co
/// (`unicode_categories`' "other"), tab, LF and CR excepted.
fn is_control(c: char) -> bool {
    !matches!(c, '\t' | '\n' | '\r') && c.is_other()
}

/// BERT's "Chinese character": the CJK Unified Ideographs blocks and their
/// extensions and compatibility forms (not kana or hangul, which are
/// written with spaces).
fn is_chinese_char(c: char) -> bool {
    matches!(c as u32,
        0x4E00..=0x9FFF
        | 0x3400..=0x4DBF
        | 0x20000..=0x2A6DF
        | 0x2A700..=0x2B73F
        | 0x2B740..=0x2B81F
        | 0x2B920..=0x2CEAF
        | 0xF900..=0xFAFF
        | 0x2F800..=0x2FA1F)
}

fn is_punctuation(c: char) -> bool {
    if c.is_ascii() {
        ASCII_CLASS[c as usize] == AsciiClass::Punctuation
    } else {
        c.is_punctuation()
    }
}

/// Whether `c` is white space, and whether it is punctuation, to BERT's
/// pre-tokenizer.
#[inline]
pub(crate) fn space_or_punctuation(c: char) -> (bool, bool) {
    if c.is_ascii() {
        let class = ASCII_CLASS[c as usize];
        (
            class == AsciiClass::Space || matches!(c, '\x0B' | '\x0C'),
            class == AsciiClass::Punctuation,
        )
    } else {
        let flags = char_info(c).flags;
        (flags & SPACE != 0, flags & PUNCT != 0)
    }
}

/// Calls `f` with each word of normalized text: the runs between white
/// space, with every punctuation character a word of its own.
pub fn for_each_word<'t>(text: &'t str, mut f: impl FnMut(&'t str)) {
    let mut start = None;
    for (i, c) in text.char_indices() {
        let (space, punctuation) = space_or_punctuation(c);
        if space || punctuation {
            if let Some(s) = start.take() {
                f(&text[s..i]);
            }
            if !space {
                f(&text[i..i + c.len_utf8()]);
            }
        } else if start.is_none() {
            start = Some(i);
        }
    }
    if let Some(s) = start {
        f(&text[s..]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(text: &str, normalizer: BertNormalizer) -> Vec<String> {
        let mut normalized = String::new();
        normalizer.normalize_into(text, &mut normalized);
        let mut out = Vec::new();
        for_each_word(&normalized, |w| out.push(w.to_owned()));
        out
    }

    #[test]
    fn uncased_bert() {
        assert_eq!(
            words(
                "Héllo, WORLD!\u{0}\tnaïve 中文x\u{200B}y",
                BertNormalizer::uncased()
            ),
            ["hello", ",", "world", "!", "naive", "中", "文", "xy"]
        );
    }

    /// BERT's steps done one after the other on the whole text, as
    /// `tokenizers` does: the definition the fast paths must equal.
    fn reference(text: &str, n: BertNormalizer) -> String {
        let mut s: String = text
            .chars()
            .filter(|&c| !(n.clean_text && (c == '\0' || c == '\u{FFFD}' || is_control(c))))
            .map(|c| {
                if n.clean_text && c.is_whitespace() {
                    ' '
                } else {
                    c
                }
            })
            .collect();
        if n.handle_chinese_chars {
            s = s
                .chars()
                .flat_map(|c| {
                    if is_chinese_char(c) {
                        vec![' ', c, ' ']
                    } else {
                        vec![c]
                    }
                })
                .collect();
        }
        if n.strip_accents {
            s = s
                .nfd()
                .map(|(c, _)| c)
                .filter(|c| !c.is_mark_nonspacing())
                .collect();
        }
        if n.lowercase {
            s = s.chars().flat_map(char::to_lowercase).collect();
        }
        s
    }

    #[test]
    fn every_bmp_character_and_mark_orders_as_the_reference() {
        let settings = [(true, true), (false, true), (false, false), (true, false)].map(
            |(strip_accents, lowercase)| BertNormalizer {
                strip_accents,
                lowercase,
                ..BertNormalizer::uncased()
            },
        );
        // After each character: nothing, and marks of several classes (a
        // reordering across it would show), nonspacing or not (U+302E and
        // U+1D165 are spacing marks that NFD reorders and cleaning keeps).
        let tails = [
            "",
            "\u{0323}\u{0301}",
            "\u{0F72}\u{0334}",
            "a\u{0345}",
            "\u{1D165}",
            "\u{302E}\u{0323}",
        ];
        for cp in (0..0x10000).chain([0x1D15E, 0x2F800, 0x1F600, 0xE0001]) {
            let Some(c) = char::from_u32(cp) else {
                continue;
            };
            for tail in tails {
                let text = format!("x{c}{tail}y");
                for n in settings {
                    let mut ours = String::new();
                    n.normalize_into(&text, &mut ours);
                    assert_eq!(ours, reference(&text, n), "U+{cp:04X} {tail:?} {n:?}");
                }
            }
        }
    }

    #[test]
    fn cased_keeps_case_and_accents() {
        let cased = BertNormalizer {
            strip_accents: false,
            lowercase: false,
            ..BertNormalizer::uncased()
        };
        assert_eq!(words("Héllo  «x»", cased), ["Héllo", "«", "x", "»"]);
    }
}
