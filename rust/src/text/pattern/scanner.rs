//! Hand-written scanners for the preset patterns: the fast path of
//! pre-tokenization, several times faster than any regex engine because each
//! decision looks at one or two characters through a table lookup.
//!
//! Each scanner follows its pattern's alternatives in order, with the
//! pattern's leftmost-first (backtracking-order) semantics, so it yields
//! exactly the pieces of the pattern (tested against the `regex` engine on
//! random and adversarial text). Character classes come from `regex-syntax`'s
//! Unicode tables: the same tables the `regex` crate, and so tiktoken, uses.
//!
//! Complexity: O(n) in the text; each character is classified a constant
//! number of times (the o200k letter rule may look at a run twice).

use std::collections::HashMap;
use std::sync::OnceLock;

use regex_syntax::hir::{Class, HirKind};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Preset {
    Gpt2,
    Cl100k,
    O200k,
}

// Character class bits.
pub(super) const LETTER: u8 = 1; // \p{L}
pub(super) const NUMBER: u8 = 2; // \p{N}
pub(super) const SPACE: u8 = 4; // \s (Unicode White_Space)
pub(super) const UPPERISH: u8 = 8; // [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}] (o200k)
pub(super) const LOWERISH: u8 = 16; // [\p{Ll}\p{Lm}\p{Lo}\p{M}] (o200k)
const NEWLINE: u8 = 32; // \r or \n

/// A two-level table from code point to class bits: 256-entry blocks,
/// identical blocks shared (most of the code space is a handful of blocks).
pub(super) struct ClassTable {
    block_of: Vec<u16>,
    blocks: Vec<[u8; 256]>,
}

impl ClassTable {
    fn build() -> Self {
        let mut flags = vec![0u8; 0x11_0000];
        let classes: [(&str, u8); 5] = [
            (r"\p{L}", LETTER),
            (r"\p{N}", NUMBER),
            (r"\s", SPACE),
            (r"[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]", UPPERISH),
            (r"[\p{Ll}\p{Lm}\p{Lo}\p{M}]", LOWERISH),
        ];
        for (pattern, bit) in classes {
            for (start, end) in unicode_ranges(pattern) {
                for flag in &mut flags[start as usize..=end as usize] {
                    *flag |= bit;
                }
            }
        }
        flags['\r' as usize] |= NEWLINE;
        flags['\n' as usize] |= NEWLINE;

        let mut block_of = Vec::with_capacity(flags.len() / 256);
        let mut blocks: Vec<[u8; 256]> = Vec::new();
        let mut seen: HashMap<[u8; 256], u16> = HashMap::new();
        for chunk in flags.chunks_exact(256) {
            let block: [u8; 256] = chunk.try_into().expect("chunks are 256 long");
            let id = *seen.entry(block).or_insert_with(|| {
                blocks.push(block);
                (blocks.len() - 1) as u16
            });
            block_of.push(id);
        }
        ClassTable { block_of, blocks }
    }

    #[inline(always)]
    fn get(&self, c: char) -> u8 {
        self.of_code_point(c as u32)
    }

    /// The class bits of code point `cp` (below U+110000).
    #[inline(always)]
    pub(super) fn of_code_point(&self, cp: u32) -> u8 {
        let cp = cp as usize;
        self.blocks[self.block_of[cp >> 8] as usize][cp & 0xFF]
    }
}

/// The code point ranges of a regex character class, from regex-syntax.
fn unicode_ranges(pattern: &str) -> Vec<(u32, u32)> {
    let hir = regex_syntax::Parser::new()
        .parse(pattern)
        .expect("class patterns are valid");
    match hir.kind() {
        HirKind::Class(Class::Unicode(class)) => class
            .ranges()
            .iter()
            .map(|r| (r.start() as u32, r.end() as u32))
            .collect(),
        other => unreachable!("{pattern} is not a Unicode class: {other:?}"),
    }
}

pub(super) fn table() -> &'static ClassTable {
    static TABLE: OnceLock<ClassTable> = OnceLock::new();
    TABLE.get_or_init(ClassTable::build)
}

/// A cursor over the text that classifies characters.
struct Text<'t> {
    text: &'t str,
    table: &'static ClassTable,
}

impl<'t> Text<'t> {
    fn new(text: &'t str) -> Self {
        Text {
            text,
            table: table(),
        }
    }

    /// The character at byte `pos` with its class bits and its length, or
    /// `None` at the end.
    #[inline(always)]
    fn at(&self, pos: usize) -> Option<(char, u8, usize)> {
        let bytes = self.text.as_bytes();
        let &first = bytes.get(pos)?;
        if first < 0x80 {
            return Some((first as char, ASCII_FLAGS[first as usize], 1));
        }
        let (cp, len) = decode_at(bytes, pos);
        let c = char::from_u32(cp).expect("str holds valid UTF-8");
        Some((c, self.table.get(c), len))
    }

    #[inline(always)]
    fn class(&self, pos: usize) -> u8 {
        self.at(pos).map_or(0, |(_, class, _)| class)
    }

    /// The end of the run of characters, from `pos`, whose class has any of
    /// `bits`.
    #[inline(always)]
    fn run(&self, mut pos: usize, bits: u8) -> usize {
        if bits == LETTER || bits == LOWERISH {
            pos = self.ascii_letter_run(pos, bits == LETTER);
        }
        while let Some((_, class, len)) = self.at(pos) {
            if class & bits == 0 {
                break;
            }
            pos += len;
        }
        pos
    }

    /// The end of the run of ASCII letters from `pos` (lowercase only if not
    /// `any_case`), eight bytes at a time: most words are ASCII, and a loop
    /// over their characters would end in a mispredicted branch at a
    /// different place each time. Stops early near the end of the text;
    /// `run` goes on from there character by character.
    #[inline(always)]
    fn ascii_letter_run(&self, mut pos: usize, any_case: bool) -> usize {
        const HIGH: u64 = 0x8080_8080_8080_8080;
        const ONES: u64 = 0x0101_0101_0101_0101;
        const A: u64 = b'a' as u64 * ONES;
        const AFTER_Z: u64 = (b'z' + 1) as u64 * ONES;
        let bytes = self.text.as_bytes();
        while let Some(chunk) = bytes.get(pos..pos + 8) {
            let word = u64::from_le_bytes(chunk.try_into().expect("eight bytes"));
            let folded = if any_case { word | (0x20 * ONES) } else { word };
            // High bit of each byte: folded byte >= 'a', and >= 'z' + 1; the
            // forced high bit keeps each subtraction inside its byte.
            let at_least_a = (folded | HIGH) - A;
            let beyond_z = (folded | HIGH) - AFTER_Z;
            let letters = at_least_a & !beyond_z & !word & HIGH;
            let n = (!letters & HIGH).trailing_zeros() as usize / 8;
            pos += n;
            if n < 8 {
                break;
            }
        }
        pos
    }

    /// The end of the run of `[^\s\p{L}\p{N}]` characters from `pos`.
    #[inline(always)]
    fn other_run(&self, mut pos: usize) -> usize {
        while let Some((_, class, len)) = self.at(pos) {
            if !is_other(class) {
                break;
            }
            pos += len;
        }
        pos
    }

    /// Like `run`, but at most `max` characters.
    #[inline(always)]
    fn run_at_most(&self, mut pos: usize, bits: u8, max: usize) -> usize {
        for _ in 0..max {
            match self.at(pos) {
                Some((_, class, len)) if class & bits != 0 => pos += len,
                _ => break,
            }
        }
        pos
    }

    /// The end of a white-space piece starting at `pos` (a white-space
    /// character): the `\s` rules of the presets, in their order.
    ///
    /// - gpt2 and cl100k: `\s++$`, a run that reaches the end of the text is
    ///   one piece.
    /// - cl100k `\s*[\r\n]`, o200k `\s*[\r\n]+`: a run that holds a newline
    ///   ends after its last newline (o200k checks this before the end rule).
    /// - all: `\s+(?!\S)`, the run less its last character when a non-space
    ///   follows, or a lone character (`\s`) when that leaves nothing; at the
    ///   end of the text the whole run.
    #[inline(always)]
    fn space_piece(&self, pos: usize, preset: Preset) -> usize {
        let mut end = pos;
        let mut last_newline_end = None;
        let mut last_char_start = pos;
        while let Some((_, class, len)) = self.at(end) {
            if class & SPACE == 0 {
                break;
            }
            if class & NEWLINE != 0 {
                last_newline_end = Some(end + len);
            }
            last_char_start = end;
            end += len;
        }
        let at_end = end == self.text.len();
        if at_end && preset != Preset::O200k {
            return end;
        }
        if preset != Preset::Gpt2 {
            if let Some(newline_end) = last_newline_end {
                return newline_end;
            }
        }
        if at_end || last_char_start == pos {
            end
        } else {
            last_char_start
        }
    }
}

const fn ascii_flags() -> [u8; 128] {
    let mut flags = [0u8; 128];
    let mut b = 0;
    while b < 128 {
        let c = b as u8;
        flags[b] = if c.is_ascii_alphabetic() {
            LETTER
                | if c.is_ascii_uppercase() {
                    UPPERISH
                } else {
                    LOWERISH
                }
        } else if c.is_ascii_digit() {
            NUMBER
        } else if matches!(c, b' ' | b'\t' | b'\n' | 0x0B | 0x0C | b'\r') {
            // ASCII White_Space: the C0 separators 0x1C..0x1F are not.
            SPACE | if c == b'\n' || c == b'\r' { NEWLINE } else { 0 }
        } else {
            0
        };
        b += 1;
    }
    flags
}

static ASCII_FLAGS: [u8; 128] = ascii_flags();

/// Neither white space, letter nor number: `[^\s\p{L}\p{N}]`.
#[inline(always)]
fn is_other(class: u8) -> bool {
    class & (SPACE | LETTER | NUMBER) == 0
}

/// Calls `f` with each piece of `text` under the preset's pattern
/// (cl100k's and o200k's through the block scanner of `blocks.rs`).
pub fn for_each_piece<'t>(preset: Preset, text: &'t str, f: impl FnMut(&'t str)) {
    match preset {
        Preset::Gpt2 => each_piece(text, f, gpt2_piece),
        Preset::Cl100k => super::blocks::cl100k_pieces(text, f),
        Preset::O200k => super::blocks::o200k_pieces(text, f),
    }
}

/// Calls `f` with each piece of `text`, `piece` giving the end of the
/// piece that starts at a position.
#[inline(always)]
fn each_piece<'t>(
    text: &'t str,
    mut f: impl FnMut(&'t str),
    piece: impl Fn(&Text, usize) -> usize,
) {
    let cursor = Text::new(text);
    let mut pos = 0;
    while pos < text.len() {
        let end = piece(&cursor, pos);
        debug_assert!(end > pos);
        f(&text[pos..end]);
        pos = end;
    }
}

/// Byte positions of `text`, at least `every` bytes apart, where each
/// preset's pieces are sure to end, so that the text cut there splits into
/// the same pieces, part by part. A cut lies after a letter (`\p{L}`)
/// followed by a character that is neither a letter, a mark (`\p{M}`) nor an
/// apostrophe: no alternative of the three patterns holds a letter followed
/// by such a character (letters run on through letters, o200k's also
/// through marks and a contraction `'s`), and as the part before a cut ends
/// in a letter, its `$` and `(?!\S)` alternatives, which look at the end,
/// match there as they do in the whole text. Linear in the text: text with
/// no such place (all Han, say) is scanned once and not cut.
pub fn cuts(text: &str, every: usize) -> Vec<usize> {
    let cursor = Text::new(text);
    let mut cuts = Vec::new();
    let mut pos = every.max(1);
    let mut letter_before = false;
    while pos < text.len() {
        // Start on a character, looking at the one before it.
        while !text.is_char_boundary(pos) {
            pos += 1;
        }
        if let Some(before) = text[..pos].chars().next_back() {
            letter_before = cursor.table.get(before) & LETTER != 0;
        }
        let mut found = None;
        while let Some((c, class, len)) = cursor.at(pos) {
            let ends_letters = class & (LETTER | UPPERISH | LOWERISH) == 0 && c != '\'';
            if letter_before && ends_letters {
                found = Some(pos);
                break;
            }
            letter_before = class & LETTER != 0;
            pos += len;
        }
        let Some(cut) = found else { break };
        cuts.push(cut);
        pos = cut + every.max(1);
    }
    cuts
}

/// The code point and the length of the non-ASCII character that starts at
/// byte `pos` of `bytes` (valid UTF-8, so its continuation bytes follow):
/// decoding here costs a fraction of `chars()`, which re-checks the
/// boundary and the end.
#[inline(always)]
pub(super) fn decode_at(bytes: &[u8], pos: usize) -> (u32, usize) {
    let first = bytes[pos];
    let tail = |i: usize| (bytes[pos + i] & 0x3F) as u32;
    if first < 0xE0 {
        (((first & 0x1F) as u32) << 6 | tail(1), 2)
    } else if first < 0xF0 {
        (((first & 0x0F) as u32) << 12 | tail(1) << 6 | tail(2), 3)
    } else {
        (
            ((first & 0x07) as u32) << 18 | tail(1) << 12 | tail(2) << 6 | tail(3),
            4,
        )
    }
}

/// The class bits of the code points below U+0800 (the characters of two
/// UTF-8 bytes: Latin, Greek, Cyrillic, Hebrew, Arabic), flat: one load
/// where `ClassTable::get` takes two.
pub(super) fn two_byte_classes() -> &'static [u8; 0x800] {
    static TWO_BYTE: OnceLock<[u8; 0x800]> = OnceLock::new();
    TWO_BYTE.get_or_init(|| {
        let table = table();
        std::array::from_fn(|cp| char::from_u32(cp as u32).map_or(0, |c| table.get(c)))
    })
}

/// The end of the cl100k piece that starts at byte `pos` of `text`.
pub(super) fn cl100k_piece_at(text: &str, pos: usize) -> usize {
    cl100k_piece(&Text::new(text), pos)
}

/// The end of the o200k piece that starts at byte `pos` of `text`.
pub(super) fn o200k_piece_at(text: &str, pos: usize) -> usize {
    o200k_piece(&Text::new(text), pos)
}

/// A contraction at `pos` (which holds an apostrophe): `'s 't 'm 'd 'll 've
/// 're`, lowercase only or in any case (`(?i:...)`, where the long s `ſ`
/// folds to `s`). Returns the end of the contraction.
#[inline(always)]
fn contraction(t: &Text, pos: usize, any_case: bool) -> Option<usize> {
    let (c1, _, len1) = t.at(pos + 1)?;
    let fold = |c: char| {
        if !any_case {
            c
        } else if c == 'ſ' {
            's'
        } else {
            c.to_ascii_lowercase()
        }
    };
    match fold(c1) {
        's' | 'd' | 'm' | 't' => Some(pos + 1 + len1),
        first @ ('l' | 'v' | 'r') => {
            let (c2, _, len2) = t.at(pos + 1 + len1)?;
            let second = fold(c2);
            let matches = matches!((first, second), ('l', 'l') | ('v', 'e') | ('r', 'e'));
            matches.then_some(pos + 1 + len1 + len2)
        }
        _ => None,
    }
}

/// `'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s`
#[inline(always)]
fn gpt2_piece(t: &Text, pos: usize) -> usize {
    let (c, class, len) = t.at(pos).expect("pos is inside the text");
    if c == '\'' {
        if let Some(end) = contraction(t, pos, false) {
            return end;
        }
    }
    // ` ?X+` for X in letters, numbers, others: an optional leading space.
    let (body, body_class) = if c == ' ' {
        match t.at(pos + 1) {
            Some((_, next, _)) if next & SPACE == 0 => (pos + 1, next),
            _ => (pos, class),
        }
    } else {
        (pos, class)
    };
    if body_class & LETTER != 0 {
        return t.run(body, LETTER);
    }
    if body_class & NUMBER != 0 {
        return t.run(body, NUMBER);
    }
    if is_other(body_class) {
        return t.other_run(body);
    }
    debug_assert!(class & SPACE != 0 && len > 0);
    t.space_piece(pos, Preset::Gpt2)
}

/// `'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+|
///  ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s`
#[inline(always)]
fn cl100k_piece(t: &Text, pos: usize) -> usize {
    let (c, class, len) = t.at(pos).expect("pos is inside the text");
    if class & LETTER != 0 {
        return t.run(pos + len, LETTER);
    }
    if c == '\'' {
        if let Some(end) = contraction(t, pos, true) {
            return end;
        }
    }
    let next = t.class(pos + len);
    if class & (NUMBER | NEWLINE) == 0 && next & LETTER != 0 {
        return t.run(pos + len, LETTER);
    }
    if class & NUMBER != 0 {
        return t.run_at_most(pos, NUMBER, 3);
    }
    let other_start = if c == ' ' && is_other(next) {
        pos + len
    } else if is_other(class) {
        pos
    } else {
        return t.space_piece(pos, Preset::Cl100k);
    };
    let end = t.other_run(other_start);
    t.run(end, NEWLINE)
}

/// o200k's letter alternatives, from `start` (after the optional prefix):
/// `[U]*[W]+` (`first`) or `[U]+[W]*` (second), with U the upper-ish and W
/// the lower-ish class, followed by an optional contraction. Returns the end
/// of the match, following the backtracking order of the greedy `[U]*`.
#[inline(always)]
fn o200k_letters(t: &Text, start: usize, first: bool) -> Option<usize> {
    let upper_end = t.run(start, UPPERISH);
    let end = if first {
        if t.class(upper_end) & LOWERISH != 0 {
            t.run(upper_end, LOWERISH)
        } else {
            // `[U]*` gives characters back until one of them is lower-ish
            // too (Lm, Lo, M are in both classes); `[W]+` then takes just
            // that one, since the character after it is not lower-ish.
            let mut best = None;
            let mut p = start;
            while p < upper_end {
                let (_, class, len) = t.at(p)?;
                if class & LOWERISH != 0 {
                    best = Some(p + len);
                }
                p += len;
            }
            best?
        }
    } else {
        if upper_end == start {
            return None;
        }
        t.run(upper_end, LOWERISH)
    };
    if t.at(end).is_some_and(|(c, _, _)| c == '\'') {
        if let Some(contraction_end) = contraction(t, end, true) {
            return Some(contraction_end);
        }
    }
    Some(end)
}

/// o200k: `[^\r\n\p{L}\p{N}]?[U]*[W]+(?i:'s|...)?|[^\r\n\p{L}\p{N}]?[U]+[W]*(?i:'s|...)?|
/// \p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`
#[inline(always)]
fn o200k_piece(t: &Text, pos: usize) -> usize {
    let (c, class, len) = t.at(pos).expect("pos is inside the text");
    let can_prefix = class & (LETTER | NUMBER | NEWLINE) == 0;
    for first in [true, false] {
        if can_prefix {
            if let Some(end) = o200k_letters(t, pos + len, first) {
                return end;
            }
        }
        if class & (UPPERISH | LOWERISH) != 0 {
            if let Some(end) = o200k_letters(t, pos, first) {
                return end;
            }
        }
    }
    if class & NUMBER != 0 {
        return t.run_at_most(pos, NUMBER, 3);
    }
    let next = t.class(pos + len);
    let other_start = if c == ' ' && is_other(next) {
        pos + len
    } else if is_other(class) {
        pos
    } else {
        return t.space_piece(pos, Preset::O200k);
    };
    let mut end = t.other_run(other_start);
    while let Some((c, _, len)) = t.at(end) {
        if !matches!(c, '\r' | '\n' | '/') {
            break;
        }
        end += len;
    }
    end
}
