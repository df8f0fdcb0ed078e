//! The scanners must split exactly as the `regex` engine with the emulated
//! lookahead does (which in turn is checked against tiktoken from Python).

use super::*;
use crate::test_rng::XorShift;

/// Characters that exercise every branch of the three patterns.
const ALPHABET: &[char] = &[
    'a', 'b', 'Z', 'Q', 's', 'S', 't', 'l', 'L', 'v', 'e', 'r', 'R', 'd', 'm', 'ſ', '\'', '’', '0',
    '7', '٣', '½', '²', ' ', ' ', ' ', '\t', '\n', '\r', '\u{a0}', '\u{3000}', '\u{1c}', '\u{b}',
    '.', ',', '!', '/', '-', '(', '"', '😀', '\u{301}', '\u{308}', 'é', 'ß', 'ǅ', 'ʰ', '中', '文',
    'ア', 'ー', 'Ω', 'ω', 'Я', 'я', 'ا', '\u{200d}', '\u{fe0f}', '_', '$', '\u{85}', '\u{2028}',
    '龍', '말', '한', '\u{4dc0}',
];

fn random_text(rng: &mut XorShift, max_len: usize) -> String {
    let len = (rng.next() % max_len as u64) as usize;
    (0..len)
        .map(|_| ALPHABET[(rng.next() % ALPHABET.len() as u64) as usize])
        .collect()
}

/// For each preset, the scanner and the regex engine.
fn engines() -> Vec<(PreTokenizer, PreTokenizer)> {
    [Pattern::Gpt2, Pattern::Cl100k, Pattern::O200k]
        .into_iter()
        .map(|p| {
            (
                PreTokenizer::new(p.clone()).unwrap(),
                PreTokenizer::automaton(p).unwrap(),
            )
        })
        .collect()
}

fn assert_same_split(engines: &[(PreTokenizer, PreTokenizer)], text: &str) {
    for (fast, reference) in engines {
        assert_eq!(
            fast.split(text).unwrap(),
            reference.split(text).unwrap(),
            "{} on {text:?}",
            fast.pattern().spec()
        );
    }
}

#[test]
fn scanners_equal_the_regex_engine_on_random_text() {
    let engines = engines();
    let mut rng = XorShift(0x9E37_79B9_7F4A_7C15);
    for _ in 0..50_000 {
        assert_same_split(&engines, &random_text(&mut rng, 24));
    }
}

#[test]
fn scanners_equal_the_regex_engine_on_every_code_point_class() {
    // Each code point between letters, spaces and apostrophes, so that every
    // class boundary of the Unicode tables is crossed.
    let mut text = String::new();
    for cp in (0..0x3_2000u32).step_by(7).chain(0xE_0000..0xE_0080) {
        if let Some(c) = char::from_u32(cp) {
            text.push(c);
            text.push(if cp % 3 == 0 { ' ' } else { 'a' });
            if cp % 5 == 0 {
                text.push('\'');
            }
        }
    }
    let engines = engines();
    assert_same_split(&engines, &text);
    // Without AVX2 (nor AVX-512): no spans but `CASELESS_LEADS`, every
    // other non-ASCII character looked up.
    super::blocks::WITHOUT_AVX2.set(true);
    assert_same_split(&engines, &text);
    super::blocks::WITHOUT_AVX2.set(false);
}

#[test]
fn known_splits() {
    let cl100k = PreTokenizer::new(Pattern::Cl100k).unwrap();
    assert_eq!(
        cl100k.split("Hello world's  123456 \n\n  x!!\n").unwrap(),
        vec!["Hello", " world", "'s", " ", " ", "123", "456", " \n\n", " ", " x", "!!\n"]
    );
    let gpt2 = PreTokenizer::new(Pattern::Gpt2).unwrap();
    assert_eq!(
        gpt2.split("I'm  fine,  thanks 2024").unwrap(),
        vec!["I", "'m", " ", " fine", ",", " ", " thanks", " 2024"]
    );
    let o200k = PreTokenizer::new(Pattern::O200k).unwrap();
    assert_eq!(
        o200k.split("HelloWORLD you're\n  ").unwrap(),
        vec!["Hello", "WORLD", " you're", "\n", "  "]
    );
}

#[test]
fn pieces_cover_the_text() {
    let mut rng = XorShift(42);
    let user = Pattern::Regex(r"\p{L}+|\d".to_owned());
    let lookaround = Pattern::Regex(r"\p{L}+(?=\s)".to_owned());
    for _ in 0..2_000 {
        let text = random_text(&mut rng, 30);
        for pattern in [
            Pattern::Cl100k,
            Pattern::Whole,
            user.clone(),
            lookaround.clone(),
        ] {
            let pieces = PreTokenizer::new(pattern).unwrap().split(&text).unwrap();
            assert_eq!(pieces.concat(), text);
            assert!(pieces.iter().all(|p| !p.is_empty()));
        }
    }
}

#[test]
fn invalid_user_pattern_is_an_error() {
    let err = PreTokenizer::new(Pattern::Regex("(unclosed".to_owned()))
        .err()
        .unwrap();
    assert!(err.to_string().contains("invalid pre-tokenization pattern"));
}

#[test]
fn text_cut_at_cuts_splits_into_the_pieces_of_the_whole() {
    let engines = engines();
    let mut rng = XorShift(0x2545_F491_4F6C_DD1D);
    let mut cut_somewhere = 0;
    for _ in 0..20_000 {
        let text = random_text(&mut rng, 40);
        let every = 1 + (rng.next() % 6) as usize;
        for (fast, reference) in &engines {
            let cuts = fast.cuts(&text, every);
            cut_somewhere += usize::from(!cuts.is_empty());
            // Against the regex engine, not the scanner the rule is written
            // for: the rule is about the patterns.
            let mut parts = Vec::new();
            let mut start = 0;
            for &cut in cuts.iter().chain([text.len()].iter()) {
                assert!(cut > start || cut == text.len(), "cuts advance: {cuts:?}");
                parts.extend(reference.split(&text[start..cut]).unwrap());
                start = cut;
            }
            assert_eq!(
                parts,
                reference.split(&text).unwrap(),
                "{} cut at {cuts:?}: {text:?}",
                fast.pattern().spec()
            );
        }
    }
    assert!(cut_somewhere > 10_000, "the test cuts ({cut_somewhere})");
}

#[test]
fn cuts_are_apart_and_on_characters() {
    let text = "Über naïve straße – 東京 ok ".repeat(50);
    let cuts = PreTokenizer::new(Pattern::Cl100k).unwrap().cuts(&text, 7);
    assert!(cuts.len() > 50);
    assert!(cuts.windows(2).all(|w| w[1] >= w[0] + 7));
    assert!(cuts
        .iter()
        .all(|&c| text.is_char_boundary(c) && c < text.len()));
    // A user's pattern promises nothing.
    let user = PreTokenizer::new(Pattern::Regex(r"\w+|\W".into())).unwrap();
    assert!(user.cuts(&text, 7).is_empty());
}

#[test]
fn the_block_scanners_split_as_the_scalar_ones_and_the_regex_engine() {
    compare_the_block_scanners(20_000);
}

#[test]
fn the_block_scanners_split_the_same_without_bmi2() {
    // CPUs without PEXT/PDEP cut each window at its first non-ASCII byte.
    super::blocks::WITHOUT_BMI2.set(true);
    compare_the_block_scanners(5_000);
    super::blocks::WITHOUT_BMI2.set(false);
}

#[test]
fn the_block_scanners_split_the_same_without_avx2() {
    // CPUs without AVX2 classify windows 16 bytes at a time (SSE2).
    super::blocks::WITHOUT_AVX2.set(true);
    compare_the_block_scanners(2_000);
    super::blocks::WITHOUT_AVX2.set(false);
}

/// The block scanners (cl100k, o200k) against the scalar ones and the
/// regex engine, on `rounds` random texts each.
fn compare_the_block_scanners(rounds: usize) {
    // Long text, so that windows of 64 bytes fill and their runs cross
    // from one window to the next: every rule of `blocks.rs` (contractions,
    // prefixes, runs of white space with line breaks, digits in threes,
    // o200k's cases, marks and `/`) next to each other, in ASCII text and
    // with non-ASCII characters of every class (the rules then count
    // characters, not bytes).
    const ASCII: &[&str] = &[
        "a", "b", "Z", "s", "t", "l", "v", "e", "r", "d", "m", "S", "L", "L", "E", "'", "'", "0",
        "7", "1", " ", " ", " ", "  ", "\t", "\n", "\r", "\r\n", "\x0b", "\x0c", "\x1c", ".", ",",
        "!", "-", "(", "\"", "$", "_", "/", "/", "\n/", "//", "Ab", "AB", "aB", "word", " word",
        "'s", "'ll", "'Ve", "'re", "'d", "'m", "'T", "12345", "\n\n", " \n ", "...", "\n  ",
    ];
    const OTHERS: &[&str] = &[
        "é",
        "ſ",
        "中",
        "\u{a0}",
        "\u{2028}",
        "😀",
        "٣",
        "½",
        "\u{301}",
        "\u{308}",
        "\u{93f}",
        "’",
        "\u{85}",
        "Я",
        "я",
        "\u{3000}",
        "'ſ",
        " été",
        "٣٣٣٣",
        "ʰ",
        "ǅ",
        "ア",
        "ー",
        "Ω",
        "ω",
        "\u{301}\u{301}",
        "e\u{301}",
        ".\u{301}",
        "ʰA",
        "中B",
        "\u{301}A",
        // The spans of `blocks::spans::SPANS` and the characters next to them.
        "×",
        "÷",
        "«",
        "»",
        "¬",
        "─",
        "╿",
        "▀",
        "Ā",
        "ł",
        "Ѡ",
        "ѡ",
        "Ґ",
        "—",
        "…",
        "‰",
        "\u{2000}",
        "、",
        "「",
        "〇",
        "々",
        "ぁ",
        "\u{3099}",
        "゛",
        "ゟ",
        "゠",
        "・",
        "ヿ",
        "㐀",
        "䷀",
        "一",
        "가",
        "힣",
        "，",
        "？",
        "１",
        "Ａ",
        "ａ",
    ];
    let parts: Vec<&str> = ASCII.iter().chain(OTHERS).copied().collect();
    let mut rng = XorShift(0x2545_F491_4F6C_DD1D);
    for (pattern, piece_at) in [
        (
            Pattern::Cl100k,
            super::scanner::cl100k_piece_at as fn(&str, usize) -> usize,
        ),
        (Pattern::O200k, super::scanner::o200k_piece_at),
    ] {
        let fast = PreTokenizer::new(pattern.clone()).unwrap();
        let reference = PreTokenizer::automaton(pattern).unwrap();
        for round in 0..rounds {
            let len = 1 + (rng.next() % 200) as usize;
            // Some texts ASCII only, so that no window is cut short.
            let choices = if round % 2 == 0 {
                ASCII.len()
            } else {
                parts.len()
            };
            let text: String = (0..len)
                .map(|_| parts[(rng.next() % choices as u64) as usize])
                .collect();
            let mut scalar = Vec::new();
            let mut pos = 0;
            while pos < text.len() {
                let end = piece_at(&text, pos);
                scalar.push(&text[pos..end]);
                pos = end;
            }
            let pieces = fast.split(&text).unwrap();
            let spec = fast.pattern().spec();
            assert_eq!(pieces, scalar, "{spec} on {text:?}");
            assert_eq!(
                pieces,
                reference.split(&text).unwrap(),
                "{spec} on {text:?}"
            );
        }
    }
}

#[test]
fn every_character_of_a_span_has_its_class() {
    // The block scanner classifies the characters of these spans by their
    // bytes, without looking them up.
    let table = scanner::table();
    let range = |(low, high): (u8, u8)| low..=high;
    for (i, span) in blocks::spans::SPANS.into_iter().enumerate() {
        let three = span.lead.0 >= 0xE0;
        assert_eq!(three, i >= blocks::spans::TWO_BYTE_SPANS);
        let widths = if three {
            blocks::spans::THREE_BYTE_LEADS
        } else {
            blocks::spans::TWO_BYTE_LEADS
        };
        assert!(range(widths).contains(&span.lead.0) && range(widths).contains(&span.lead.1));
        let thirds = if three { range(span.third) } else { 0..=0 };
        let mut characters = 0;
        for lead in range(span.lead) {
            for second in range(span.second) {
                for third in thirds.clone() {
                    let bytes = if three {
                        vec![lead, second, third]
                    } else {
                        vec![lead, second]
                    };
                    let c = std::str::from_utf8(&bytes)
                        .unwrap_or_else(|_| panic!("{bytes:02X?} is one character"))
                        .chars()
                        .next()
                        .unwrap();
                    let class = table.of_code_point(c as u32);
                    if span.class == blocks::spans::CASED {
                        let case = scanner::LETTER | scanner::UPPERISH | scanner::LOWERISH;
                        assert!(
                            class == scanner::LETTER | scanner::UPPERISH
                                || class == scanner::LETTER | scanner::LOWERISH,
                            "U+{:04X}: {class}",
                            c as u32
                        );
                        assert_ne!(class & case, case);
                    } else {
                        assert_eq!(class, span.class, "U+{:04X}", c as u32);
                    }
                    characters += 1;
                }
            }
        }
        assert!(characters > 0);
    }
    // The lead bytes classified without AVX-512 are spans of their own.
    for leads in blocks::CASELESS_LEADS {
        assert!(blocks::spans::SPANS.iter().any(|span| span.lead == leads
            && span.second == blocks::spans::ANY
            && span.third == blocks::spans::ANY
            && span.class == scanner::LETTER | scanner::UPPERISH | scanner::LOWERISH));
    }
}
