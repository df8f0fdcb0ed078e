//! BERT's text handling: the normalizer and the pre-tokenizer that the
//! released BERT vocabularies expect (those of Hugging Face `tokenizers`'
//! `BertNormalizer` and `BertPreTokenizer`, the reference for exactness).
//!
//! Normalization, in this order:
//! 1. clean: drop NUL, U+FFFD and control characters (general category C*,
//!    except tab, CR and LF); any white space becomes a space;
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
//! ASCII, most of any text, takes a table-driven fast path.

use unicode_categories::UnicodeCategories;
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
        // Non-ASCII characters wait here until an ASCII one (a starter, with
        // no decomposition) ends their run: NFD may reorder marks within a
        // run, never across an ASCII character.
        let mut run = String::new();
        for c in text.chars() {
            if c.is_ascii() {
                if !run.is_empty() {
                    self.finish_run(&run, out);
                    run.clear();
                }
                match ASCII_CLASS[c as usize] {
                    AsciiClass::Drop if self.clean_text => {}
                    AsciiClass::Space if self.clean_text => out.push(' '),
                    _ if self.lowercase => out.push(c.to_ascii_lowercase()),
                    _ => out.push(c),
                }
                continue;
            }
            if self.clean_text {
                if c == '\u{FFFD}' || is_control(c) {
                    continue;
                }
                if c.is_whitespace() {
                    self.finish_run(&run, out);
                    run.clear();
                    out.push(' ');
                    continue;
                }
            }
            if self.handle_chinese_chars && is_chinese_char(c) {
                self.finish_run(&run, out);
                run.clear();
                out.push(' ');
                self.finish_run(c.encode_utf8(&mut [0; 4]), out);
                out.push(' ');
                continue;
            }
            run.push(c);
        }
        self.finish_run(&run, out);
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
enum AsciiClass {
    /// NUL and the other control characters but tab, LF and CR.
    Drop,
    /// Tab, LF, CR and the space. (Vertical tab and form feed are white
    /// space too, but controls first: cleaning drops them.)
    Space,
    Punctuation,
    Other,
}

static ASCII_CLASS: [AsciiClass; 128] = ascii_classes();

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

/// A control character for BERT's cleaning: general category C* (Cc, Cf,
/// Cn, Co, Cs), tab, LF and CR excepted.
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

/// Calls `f` with each word of normalized text: the runs between white
/// space, with every punctuation character a word of its own.
pub fn for_each_word<'t>(text: &'t str, mut f: impl FnMut(&'t str)) {
    let mut start = None;
    for (i, c) in text.char_indices() {
        let space = c.is_whitespace();
        if space || is_punctuation(c) {
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
