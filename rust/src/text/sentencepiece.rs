//! SentencePiece's whitespace rules after its identity normalization, in
//! one pass over the text: what the Unigram trainer's counter does to each
//! line. (The pipeline has the same rules as steps: the normalizers
//! `RemoveExtraWhitespaces` and `Prepend`, the `Metaspace` pre-tokenizer;
//! see `presets.rs`.)

use super::find_double_space;

/// The piece that stands for a space.
pub const SPACE_SYMBOL: char = '\u{2581}';

/// SentencePiece's whitespace handling (its defaults by default).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Whitespace {
    /// Strip leading and trailing spaces, and keep one of each run inside
    /// (`remove_extra_whitespaces`).
    pub remove_extra: bool,
    /// Put a space in front of the text (`add_dummy_prefix`).
    pub add_dummy_prefix: bool,
    /// Write spaces as `▁` (`escape_whitespaces`).
    pub escape: bool,
    /// The dummy space goes at the end of the text instead
    /// (`treat_whitespace_as_suffix`).
    pub as_suffix: bool,
}

impl Default for Whitespace {
    fn default() -> Self {
        Whitespace {
            remove_extra: true,
            add_dummy_prefix: true,
            escape: true,
            as_suffix: false,
        }
    }
}

/// Writes `text` into `out` as a model sees it, after SentencePiece's
/// (identity) normalizer, by default: leading spaces dropped, the dummy
/// prefix added, each run of spaces kept as one, spaces written as `▁`, and
/// trailing `▁` dropped (a `▁` of the input included, as there). Each step
/// as `ws` says; nothing for a text left empty.
pub fn prepare_text(text: &str, ws: Whitespace, out: &mut String) {
    let input = if ws.remove_extra {
        text.trim_start_matches(' ')
    } else {
        text
    };
    out.clear();
    if input.is_empty() {
        return;
    }
    let space = if ws.escape { "\u{2581}" } else { " " };
    out.reserve(input.len() + 3);
    if ws.add_dummy_prefix && !ws.as_suffix {
        out.push_str(space);
    }
    if ws.escape || !ws.remove_extra {
        // Copy the runs between spaces whole; each run of spaces becomes one
        // `space` (or, keeping extra spaces, as many).
        let mut rest = input;
        while let Some(at) = memchr::memchr(b' ', rest.as_bytes()) {
            out.push_str(&rest[..at]);
            let run = rest.as_bytes()[at..]
                .iter()
                .take_while(|&&b| b == b' ')
                .count();
            for _ in 0..if ws.remove_extra { 1 } else { run } {
                out.push_str(space);
            }
            rest = &rest[at + run..];
        }
        out.push_str(rest);
    } else {
        // Spaces stay spaces: only runs of them change, and ordinary text has
        // few, so the text between them is copied whole.
        let mut rest = input;
        while let Some(at) = find_double_space(rest.as_bytes()) {
            out.push_str(&rest[..=at]);
            rest = rest[at..].trim_start_matches(' ');
        }
        out.push_str(rest);
    }
    if ws.remove_extra {
        while out.ends_with(space) {
            out.truncate(out.len() - space.len());
        }
    }
    if ws.add_dummy_prefix && ws.as_suffix {
        out.push_str(space);
    }
}

/// The words of a prepared text, for training: each starts at a `▁` (the
/// first may not, without a dummy prefix).
pub fn for_each_word<'t>(prepared: &'t str, mut f: impl FnMut(&'t str)) {
    let mut start = 0;
    for (i, _) in prepared.match_indices(SPACE_SYMBOL) {
        if i > start {
            f(&prepared[start..i]);
        }
        start = i;
    }
    if start < prepared.len() {
        f(&prepared[start..]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whitespace_as_sentencepiece() {
        let cases = [
            ("  a   b  ", "▁a▁b"),
            ("a▁", "▁a"),
            ("▁", ""),
            ("a ▁ b", "▁a▁▁▁b"),
            ("a\tb", "▁a\tb"),
        ];
        for (text, expected) in cases {
            let mut prepared = String::new();
            prepare_text(text, Whitespace::default(), &mut prepared);
            assert_eq!(prepared, expected, "{text:?}");
        }
        assert_eq!(find_double_space(b"ab  c"), Some(2));
        assert_eq!(find_double_space(&[b' '; 2]), Some(0));
        for text in [&b" a b "[..], b" ", b""] {
            assert_eq!(find_double_space(text), None);
        }
        let long = format!("{}  ", "a b".repeat(100));
        assert_eq!(find_double_space(long.as_bytes()), Some(300));
        // Spaces kept as spaces (the encoder's walk text), same rules.
        let plain = Whitespace {
            escape: false,
            ..Whitespace::default()
        };
        for (text, expected) in [
            ("  a   b  ", " a b"),
            ("ab", " ab"),
            ("", ""),
            ("  ", ""),
            ("a b", " a b"),
        ] {
            let mut out = String::new();
            prepare_text(text, plain, &mut out);
            assert_eq!(out, expected, "{text:?}");
        }
    }

    /// Every short text over a few characters, prepared with each setting,
    /// against the rules written plainly (split on spaces, rejoin).
    #[test]
    fn whitespace_rules_exhaustively() {
        let alphabet = ['a', ' ', '▁', '\t'];
        let mut texts = vec![String::new()];
        for _ in 0..6 {
            let longer: Vec<String> = texts
                .iter()
                .flat_map(|t| alphabet.iter().map(move |&c| format!("{t}{c}")))
                .collect();
            texts.extend(longer);
        }
        texts.push(format!("{}  b ", "a ".repeat(70)));
        for text in &texts {
            for bits in 0..16 {
                let ws = Whitespace {
                    remove_extra: bits & 1 != 0,
                    add_dummy_prefix: bits & 2 != 0,
                    escape: bits & 4 != 0,
                    as_suffix: bits & 8 != 0,
                };
                let space = if ws.escape { "▁" } else { " " };
                let (prefix, suffix) = match (ws.add_dummy_prefix, ws.as_suffix) {
                    (false, _) => ("", ""),
                    (true, false) => (space, ""),
                    (true, true) => ("", space),
                };
                let expected = if ws.remove_extra {
                    let words: Vec<&str> = text.split(' ').filter(|w| !w.is_empty()).collect();
                    let joined = format!("{prefix}{}", words.join(space));
                    let trimmed = joined.trim_end_matches(space);
                    if words.is_empty() {
                        String::new()
                    } else {
                        format!("{trimmed}{suffix}")
                    }
                } else if text.is_empty() {
                    String::new()
                } else {
                    format!("{prefix}{}{suffix}", text.replace(' ', space))
                };
                let mut out = String::new();
                prepare_text(text, ws, &mut out);
                assert_eq!(out, expected, "{text:?} {ws:?}");
            }
        }
    }
}
