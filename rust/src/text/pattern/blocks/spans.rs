//! The non-ASCII characters that the block scanner classifies by their
//! bytes, with vector compares (`Classes::spans`), instead of one by one
//! from the class table.

use super::super::scanner::{LETTER, LOWERISH, SPACE, UPPERISH};

/// Characters of one class, by the ranges their bytes are in: the first
/// byte in `lead`, the second in `second`, the third (three-byte
/// characters only) in `third`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Span {
    pub(crate) lead: (u8, u8),
    pub(crate) second: (u8, u8),
    pub(crate) third: (u8, u8),
    /// The class byte of every character of the span (`scanner::table`'s),
    /// or `CASED`.
    pub(crate) class: u8,
}

/// The lead bytes of `SPANS`, by width: the two-byte spans come first,
/// `TWO_BYTE_SPANS` of them.
pub(crate) const TWO_BYTE_SPANS: usize = 12;
pub(crate) const TWO_BYTE_LEADS: (u8, u8) = (0xC2, 0xD1);
pub(crate) const THREE_BYTE_LEADS: (u8, u8) = (0xE2, 0xEF);

/// Any continuation byte.
pub(crate) const ANY: (u8, u8) = (0x80, 0xBF);

/// The class of a span of letters of both cases, not in case order: a
/// letter for cl100k, looked up one by one for o200k. (A bit that no class
/// of the table has, beside `LETTER`.)
pub(crate) const CASED: u8 = LETTER | 0x80;

const fn span(lead: (u8, u8), second: (u8, u8), third: (u8, u8), class: u8) -> Span {
    Span {
        lead,
        second,
        third,
        class,
    }
}

const UPPER: u8 = LETTER | UPPERISH;
const LOWER: u8 = LETTER | LOWERISH;
const CASELESS: u8 = LETTER | UPPERISH | LOWERISH;
const OTHER: u8 = 0;
const WHITE: u8 = SPACE;

/// The characters `in_chars` classifies by their bytes, a few vector
/// compares a window, rather than one by one from the class table: the
/// letters of Latin-1, Latin Extended-A and Cyrillic, kana, ideographs and
/// Hangul, and the commonest CJK and general punctuation (on the
/// multilingual mix, nearly every non-ASCII character but those of
/// `U+3000..` and of fullwidth forms that are letters or digits). Each
/// span's class is tested against the class table, character by character.
pub(crate) const SPANS: [Span; 33] = [
    // No-break space, « and ».
    span((0xC2, 0xC2), (0xA0, 0xA0), ANY, WHITE),
    span((0xC2, 0xC2), (0xAB, 0xAB), ANY, OTHER),
    span((0xC2, 0xC2), (0xBB, 0xBB), ANY, OTHER),
    // Latin-1 letters (not × and ÷), Latin Extended-A.
    span((0xC3, 0xC3), (0x80, 0x96), ANY, UPPER),
    span((0xC3, 0xC3), (0x98, 0x9E), ANY, UPPER),
    span((0xC3, 0xC3), (0x9F, 0xB6), ANY, LOWER),
    span((0xC3, 0xC3), (0xB8, 0xBF), ANY, LOWER),
    span((0xC4, 0xC5), ANY, ANY, CASED),
    // Cyrillic, U+0400..=U+047F.
    span((0xD0, 0xD0), (0x80, 0xAF), ANY, UPPER),
    span((0xD0, 0xD0), (0xB0, 0xBF), ANY, LOWER),
    span((0xD1, 0xD1), (0x80, 0x9F), ANY, LOWER),
    span((0xD1, 0xD1), (0xA0, 0xBF), ANY, CASED),
    // Dashes, quotes, ellipsis: U+2010..=U+2027, U+2030..=U+203F.
    span((0xE2, 0xE2), (0x80, 0x80), (0x90, 0xA7), OTHER),
    span((0xE2, 0xE2), (0x80, 0x80), (0xB0, 0xBF), OTHER),
    // Box drawing, U+2500..=U+257F.
    span((0xE2, 0xE2), (0x94, 0x95), ANY, OTHER),
    // CJK punctuation: U+3001..=U+3004, U+3008..=U+3011, U+3014..=U+301F.
    span((0xE3, 0xE3), (0x80, 0x80), (0x81, 0x84), OTHER),
    span((0xE3, 0xE3), (0x80, 0x80), (0x88, 0x91), OTHER),
    span((0xE3, 0xE3), (0x80, 0x80), (0x94, 0x9F), OTHER),
    // Hiragana and katakana (not their combining marks, ゛゜, ゠ and ・),
    // U+3041..=U+30FF.
    span((0xE3, 0xE3), (0x81, 0x81), (0x81, 0xBF), CASELESS),
    span((0xE3, 0xE3), (0x82, 0x82), (0x80, 0x96), CASELESS),
    span((0xE3, 0xE3), (0x82, 0x82), (0x9D, 0x9F), CASELESS),
    span((0xE3, 0xE3), (0x82, 0x82), (0xA1, 0xBF), CASELESS),
    span((0xE3, 0xE3), (0x83, 0x83), (0x80, 0xBA), CASELESS),
    span((0xE3, 0xE3), (0x83, 0x83), (0xBC, 0xBF), CASELESS),
    // Ideographs, U+3400..=U+4DBF and U+4E00..=U+9FFF.
    span((0xE3, 0xE3), (0x90, 0xBF), ANY, CASELESS),
    span((0xE4, 0xE4), (0x80, 0xB6), ANY, CASELESS),
    span((0xE4, 0xE4), (0xB8, 0xBF), ANY, CASELESS),
    span((0xE5, 0xE9), ANY, ANY, CASELESS),
    // Hangul syllables, U+AC00..=U+D77F.
    span((0xEA, 0xEA), (0xB0, 0xBF), ANY, CASELESS),
    span((0xEB, 0xEC), ANY, ANY, CASELESS),
    span((0xED, 0xED), (0x80, 0x9D), ANY, CASELESS),
    // Fullwidth punctuation: U+FF01..=U+FF0F, U+FF1A..=U+FF20.
    span((0xEF, 0xEF), (0xBC, 0xBC), (0x81, 0x8F), OTHER),
    span((0xEF, 0xEF), (0xBC, 0xBC), (0x9A, 0xA0), OTHER),
];
