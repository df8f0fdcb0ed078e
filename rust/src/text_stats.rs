//! What the token-efficiency report reads from text besides tokens: the
//! writing system of a text, and its words. (Per character work, so in Rust:
//! the report reads hundreds of megabytes.)
//!
//! A text's script is the one most of its letters and marks belong to,
//! with Japanese kana counted as Han (Japanese mixes the three) and marks
//! that inherit their script from the letter before ignored. Text with no
//! letter of a script (digits, punctuation, spaces, emoji) is `Zyyy`
//! (Common).
//!
//! Words are the runs between white space, without the punctuation and
//! symbols at their edges ("(well," is "well"); marks stay, so a Devanagari
//! word keeps its final vowel sign.

use std::collections::hash_map::Entry;

use rustc_hash::FxHashMap;
use unicode_categories::UnicodeCategories;
use unicode_script::{Script, UnicodeScript};

/// The ISO 15924 code of the dominant script of `text` (`"Latn"`, `"Hani"`,
/// `"Mymr"`, …), or `"Zyyy"`.
pub fn dominant_script(text: &str) -> &'static str {
    // Few scripts occur in one text: a short list beats a map.
    let mut counts: Vec<(Script, usize)> = Vec::new();
    for c in text.chars() {
        let script = match c.script() {
            Script::Common | Script::Inherited | Script::Unknown => continue,
            Script::Hiragana | Script::Katakana => Script::Han,
            script => script,
        };
        match counts.iter_mut().find(|(s, _)| *s == script) {
            Some((_, n)) => *n += 1,
            None => counts.push((script, 1)),
        }
    }
    // The first seen wins a tie, so the answer does not depend on hashing.
    let mut best: Option<(Script, usize)> = None;
    for &(script, n) in &counts {
        if best.is_none_or(|(_, m)| n > m) {
            best = Some((script, n));
        }
    }
    best.map_or("Zyyy", |(script, _)| script.short_name())
}

/// The distinct words of `texts` with their counts, in the order they first
/// occur.
pub fn word_counts<'t>(texts: impl IntoIterator<Item = &'t str>) -> Vec<(&'t str, u64)> {
    let edge = |c: char| c.is_punctuation() || c.is_symbol();
    let mut index: FxHashMap<&str, usize> = FxHashMap::default();
    let mut words: Vec<(&str, u64)> = Vec::new();
    for text in texts {
        for word in text.split_whitespace() {
            let word = word.trim_matches(edge);
            if word.is_empty() {
                continue;
            }
            match index.entry(word) {
                Entry::Occupied(at) => words[*at.get()].1 += 1,
                Entry::Vacant(slot) => {
                    slot.insert(words.len());
                    words.push((word, 1));
                }
            }
        }
    }
    words
}

#[cfg(test)]
mod tests {
    use super::{dominant_script, word_counts};

    #[test]
    fn scripts_of_texts() {
        assert_eq!(dominant_script("Hello, world!"), "Latn");
        assert_eq!(dominant_script("東京は晴れです"), "Hani");
        assert_eq!(dominant_script("ကျွန်တော်"), "Mymr");
        assert_eq!(dominant_script("नमस्ते"), "Deva");
        assert_eq!(dominant_script("ሰላም"), "Ethi");
        assert_eq!(dominant_script("12, 3.5 € 😀"), "Zyyy");
        assert_eq!(dominant_script(""), "Zyyy");
        assert_eq!(dominant_script("the Ελλάδα"), "Grek");
    }

    #[test]
    fn words_without_edge_punctuation() {
        let words = word_counts(["(Well, well!) — नमस्ते «well»", "don't 3.5 €"]);
        assert_eq!(
            words,
            [
                ("Well", 1),
                ("well", 2),
                ("नमस्ते", 1),
                ("don't", 1),
                ("3.5", 1)
            ]
        );
    }
}
