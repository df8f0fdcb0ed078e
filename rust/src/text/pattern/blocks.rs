//! The fast path of the cl100k and o200k scanners: piece starts found 64
//! bytes at a time with whole-word bit operations instead of one piece at a
//! time.
//!
//! The scalar scanner (`scanner.rs`) decides each piece with a few
//! branches on its first characters; on English, pieces average five
//! bytes and those branches go one way or another at random, so the
//! mispredictions cost more than the work. Here a window of up to 64 bytes
//! is classified into one bitmap per character class (bit `i`: byte `i`;
//! ASCII by AVX2 compares, 32 bytes at once, or SSE2 ones, 16 at once,
//! on CPUs without AVX2), and the starts of all its
//! pieces follow from shifts, ands and a few additions (a carry runs
//! through a run of set bits: `fill`) per rule of the pattern (below); the
//! pieces are then read off the bitmap of starts, one `trailing_zeros` each.
//!
//! Non-ASCII characters are classified by their bytes where AVX-512 makes
//! that cheap and a span of `spans.rs` holds them (the letters of Latin-1,
//! Latin Extended-A and Cyrillic, kana, ideographs, Hangul, common
//! punctuation: on the multilingual mix, the pre-tokenizer alone went from
//! 626 to 820 MB/s on Russian, 510 to 617 on Japanese, 864 to 1,037 on
//! German; Chinese and Korean level); without AVX-512, only ideographs and
//! Hangul syllables by their first byte (`CASELESS_LEADS`). The others are
//! classified one by one (the Unicode tables of the scalar scanner), their
//! class bytes set at their first byte and turned into bitmaps 16 bytes at
//! a time (on the multilingual mix, 8% fewer instructions for cl100k's
//! pre-tokenizer, 14% for o200k's, which has six bitmaps to set, than
//! setting them bit by bit); then PEXT packs every bitmap to one bit per
//! character, the rules (which count characters: three digits, one prefix
//! character) run unchanged, and PDEP maps the starts back to bytes.
//! Without BMI2 a window stops at its first non-ASCII byte.
//!
//! A window starts where a piece starts, so that what came before does not
//! matter (the patterns look only forward: no alternative looks behind).
//! Rules that look past the window (how a run of white space ends, what
//! follows a run) would need text it has not seen, so only the pieces
//! before the start of its last run of one class are taken: those depend on
//! nothing past that run's start. The next window starts there. A window
//! that holds no complete piece (a run of 64 bytes of letters) leaves its
//! pieces to the scalar scanner for 8 bytes, and for twice as long after
//! each such window in a row (up to 4 kB), fewer after one that took
//! pieces.
//!
//! cl100k, `[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|
//! \s*[\r\n]|\s+(?!\S)|\s`, the contraction `'(?i:[sdmt]|ll|ve|re)` aside
//! (checked byte by byte, it is rare), as piece starts:
//!
//! - a run of other characters (`O`) starts a piece, unless a space
//!   precedes it: the space's piece ` ?O+` takes it. Its piece takes the
//!   line breaks that follow it (`[\r\n]*`).
//! - a run of letters starts a piece unless the character before it
//!   starts its piece (a white space that is no line break, or an `O` run
//!   of one character that no space precedes): `[^\r\n\p{L}\p{N}]?\p{L}+`.
//! - a run of digits starts a piece, and so does every third digit of it.
//! - white space (once an `O` run took its leading line breaks): the run
//!   starts a piece; so does its last character when that is no line
//!   break (`\s+(?!\S)` gives it back, to prefix what follows or stand
//!   alone); so does the character after its last line break when only
//!   spaces (no line break) follow to the end of the run (`\s*[\r\n]` ends
//!   at the last line break).
//!
//! o200k (`o200k_starts`) differs in four ways; its digits and white space
//! are cl100k's (`\s*[\r\n]+` ends where `\s*[\r\n]` does):
//!
//! - words are `[U]*[W]+` or `[U]+[W]*` with `U` = `[\p{Lu}\p{Lt}\p{Lm}
//!   \p{Lo}\p{M}]`, `W` = `[\p{Ll}\p{Lm}\p{Lo}\p{M}]`, so a run of letters
//!   and marks (`\p{M}`) splits by case: before an upper-case letter
//!   (`Lu`, `Lt`) that follows a lower-case one (`Ll`) with only letters of
//!   no case (`Lm`, `Lo`) or marks between; and, by backtracking, before
//!   the upper-case letters that end a run when a caseless character
//!   precedes them (`[U]*` gives back to the last caseless one).
//! - marks are letters there but other characters (`O`) for
//!   ` ?[^\s\p{L}\p{N}]+`: an `O` run of two or more (or after a space)
//!   takes the marks within and after it; a single `O` before a mark is the
//!   prefix of a word that starts with the mark.
//! - the contraction (`(?i:'s|'t|...)?`) ends a word: no piece starts at
//!   its apostrophe, one starts after it.
//! - the `O` run takes `[\r\n/]*` after it, where a `/` taken after a line
//!   break starts nothing; whether a run's piece takes line breaks depends
//!   on the runs before it, so the two are computed to a fixed point, one
//!   round unless a `/` follows a line break.
//!
//! Tested against the scalar scanner and the regex engine in `tests.rs`.

use super::scanner::{
    cl100k_piece_at, decode_at, o200k_piece_at, table, two_byte_classes, LETTER, LOWERISH, NUMBER,
    SPACE, UPPERISH,
};
#[cfg(any(test, target_arch = "x86_64"))]
pub(super) mod spans;
#[cfg(target_arch = "x86_64")]
use spans::{Span, ANY, CASED, SPANS, THREE_BYTE_LEADS, TWO_BYTE_LEADS, TWO_BYTE_SPANS};

/// Per-class bitmaps of a window: bit `i` is byte `i` (or, once
/// `in_chars`, character `i`) of the window's first `valid.count_ones()`.
/// A non-ASCII character's class is on its first byte.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Classes {
    letter: u64,
    digit: u64,
    /// `\s`: tab, line feed, vertical tab, form feed, carriage return,
    /// space, and non-ASCII white space.
    white: u64,
    /// `\r`, `\n`.
    newline: u64,
    space: u64,
    apostrophe: u64,
    /// o200k only (`Rules::CASES`): letters of upper case (`Lu`, `Lt`),
    /// of lower case (`Ll`), marks (`\p{M}`), and `/`. Letters of neither
    /// case (`Lm`, `Lo`) are `letter` alone.
    upper: u64,
    lower: u64,
    mark: u64,
    slash: u64,
    /// The bytes (characters) of the window.
    valid: u64,
    /// Bytes of non-ASCII characters, and those of them that continue one.
    high: u64,
    continuing: u64,
}

impl Classes {
    /// Neither letter, digit nor white space.
    fn other(&self) -> u64 {
        self.valid & !(self.letter | self.digit | self.white)
    }

    /// The classes of the window's first `len` bytes (`pieces` pads a
    /// window cut by the text's end with zeros, and a zero byte is in no
    /// class), non-ASCII characters unclassified; the o200k ones only if
    /// `R::CASES`.
    fn of<R: Rules>(window: &[u8; 64], len: usize) -> Classes {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: SSE2 is part of x86-64; AVX2 is checked.
        let mut classes = match avx2() {
            true => unsafe { classify_avx2::<R>(window, len) },
            false => unsafe { classify_sse2::<R>(window, len) },
        };
        #[cfg(not(target_arch = "x86_64"))]
        let mut classes = classify_bytes::<R>(window);
        classes.valid = u64::MAX.checked_shr(64 - len as u32).unwrap_or(0);
        classes
    }

    /// Keeps only the window's bytes before its first non-ASCII one.
    fn ascii_prefix(&mut self) {
        if self.high != 0 {
            self.valid &= (1u64 << self.high.trailing_zeros()) - 1;
            self.keep_valid();
        }
    }

    /// The class bitmaps, `valid` aside (the o200k ones last).
    fn classes_mut(&mut self) -> [&mut u64; 10] {
        [
            &mut self.letter,
            &mut self.digit,
            &mut self.white,
            &mut self.newline,
            &mut self.space,
            &mut self.apostrophe,
            &mut self.upper,
            &mut self.lower,
            &mut self.mark,
            &mut self.slash,
        ]
    }

    fn keep_valid(&mut self) {
        let valid = self.valid;
        for class in self.classes_mut() {
            *class &= valid;
        }
    }

    /// Classifies the characters of `leads` (first bytes in `window`) that
    /// one of `SPANS` holds, without a lookup each; returns the others.
    /// AVX-512 compares all 64 bytes to a range in two instructions; with
    /// SSE2's sixteen at a time, the spans cost more than the lookups they
    /// spare.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512bw")]
    fn spans<R: Rules>(&mut self, window: &[u8; 64], leads: u64) -> u64 {
        use std::arch::x86_64::*;
        // SAFETY: the load reads the window's 64 bytes.
        let bytes = unsafe { _mm512_loadu_si512(window.as_ptr().cast()) };
        let between = |(low, high): (u8, u8)| -> u64 {
            let offset = _mm512_sub_epi8(bytes, _mm512_set1_epi8(low as i8));
            _mm512_cmple_epu8_mask(offset, _mm512_set1_epi8((high - low) as i8))
        };
        // Every span's bitmap, written out span by span with the span a
        // constant, so that the compiler keeps only the compares a span
        // needs and makes each compare once for all spans; the two-byte
        // ones only if the window has two-byte characters of their leads,
        // the three-byte ones likewise (windows are of one script, most
        // often). Without a branch per span: they mispredicted more than
        // the compares cost.
        let mut left = leads;
        let mut apply = |span: Span, width_leads: u64| {
            if R::CASES && span.class == CASED {
                return;
            }
            let mut held = width_leads & between(span.lead);
            // (A continuation byte is 80..=BF: the whole range is no test.)
            if span.second != ANY {
                held &= between(span.second) >> 1;
            }
            if span.third != ANY {
                held &= between(span.third) >> 2;
            }
            if span.class & LETTER != 0 {
                self.letter |= held;
            }
            if span.class & SPACE != 0 {
                self.white |= held;
            }
            if R::CASES {
                let case = LETTER | UPPERISH | LOWERISH;
                if span.class & case == LETTER | UPPERISH {
                    self.upper |= held;
                }
                if span.class & case == LETTER | LOWERISH {
                    self.lower |= held;
                }
            }
            left &= !held;
        };
        // (The lists below name every span once.)
        const { assert!(SPANS.len() == 33 && TWO_BYTE_SPANS == 12) };
        macro_rules! each_span {
            ($width_leads:expr; $($i:literal)*) => {
                $(apply(SPANS[$i], $width_leads);)*
            };
        }
        let two = leads & between(TWO_BYTE_LEADS);
        if two != 0 {
            each_span!(two; 0 1 2 3 4 5 6 7 8 9 10 11);
        }
        let three = leads & between(THREE_BYTE_LEADS);
        if three != 0 {
            each_span!(three; 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32);
        }
        left
    }

    /// Classifies the characters of `leads` (first bytes in `window`) that
    /// their bytes tell, and returns the others: those of `SPANS` with
    /// AVX-512, else those of `CASELESS_LEADS`.
    #[inline(always)]
    fn by_bytes<R: Rules>(&mut self, window: &[u8; 64], leads: u64) -> u64 {
        #[cfg(target_arch = "x86_64")]
        if avx512bw() {
            // SAFETY: the CPU has AVX-512BW.
            return unsafe { self.spans::<R>(window, leads) };
        }
        let caseless = leads
            & CASELESS_LEADS.iter().fold(0, |bits, &(low, high)| {
                bits | bits_between(window, low, high)
            });
        self.letter |= caseless;
        leads & !caseless
    }

    /// Classifies the non-ASCII characters of `window` (the bytes these
    /// classes are of, zero padded past the text's end) and moves every
    /// bitmap from bytes to characters (bit `i`: character `i`), so that
    /// the rules, which count characters, apply unchanged. Returns the first byte of each character, the map back;
    /// `None` (and the window cut before its first non-ASCII byte) where
    /// the CPU has no PEXT/PDEP.
    fn in_chars<R: Rules>(&mut self, window: &[u8; 64]) -> Option<u64> {
        if !bmi2() {
            self.ascii_prefix();
            return None;
        }
        // (The window starts a character: its first non-ASCII byte leads.)
        let mut leads = self.high & !self.continuing & self.valid;
        // A character cut by the window's end is left to the next window.
        let last = 63 - leads.leading_zeros() as usize;
        if last + window[last].leading_ones() as usize > self.valid.count_ones() as usize {
            self.valid &= (1u64 << last) - 1;
            self.keep_valid();
            leads &= self.valid;
        }
        leads = self.by_bytes::<R>(window, leads);
        let two_byte = two_byte_classes();
        let table = table();
        // Each character's class byte at its first byte (zero elsewhere),
        // then each bitmap from all 64 at once (`bits_where`): setting 3 to
        // 6 bitmaps bit by bit per character cost more than its lookup.
        let mut found = [0u8; 64];
        while leads != 0 {
            let at = leads.trailing_zeros() as usize;
            // Decoded here (the window holds the whole character): two-byte
            // characters from their flat table, the others (CJK text is all
            // three-byte ones) from the class table.
            found[at] = match window[at] {
                lead @ ..0xE0 => {
                    two_byte[((lead & 0x1F) as usize) << 6 | (window[at + 1] & 0x3F) as usize]
                }
                _ => table.of_code_point(decode_at(window, at).0),
            };
            leads &= leads - 1;
        }
        self.letter |= bits_where(&found, LETTER, LETTER);
        self.digit |= bits_where(&found, NUMBER, NUMBER);
        self.white |= bits_where(&found, SPACE, SPACE);
        if R::CASES {
            let case = LETTER | UPPERISH | LOWERISH;
            self.upper |= bits_where(&found, case, LETTER | UPPERISH);
            self.lower |= bits_where(&found, case, LETTER | LOWERISH);
            self.mark |= bits_where(&found, case, UPPERISH | LOWERISH);
        }
        let starts = self.valid & !self.continuing;
        // The o200k bitmaps are all zero for cl100k.
        let used = if R::CASES { 10 } else { 6 };
        // SAFETY (every `gather`): `bmi2()` holds.
        for class in self.classes_mut().into_iter().take(used) {
            *class = unsafe { bits::gather(*class, starts) };
        }
        self.valid = unsafe { bits::gather(self.valid, starts) };
        Some(starts)
    }
}

#[cfg(test)]
thread_local! {
    /// Makes `bmi2()` false on this thread, so that tests run the path of
    /// CPUs without it (windows cut at their first non-ASCII byte).
    pub(super) static WITHOUT_BMI2: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

#[cfg(test)]
thread_local! {
    /// Makes `avx2()` false on this thread, so that tests run the SSE2
    /// classification on CPUs with AVX2.
    pub(super) static WITHOUT_AVX2: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Whether this CPU has AVX2 (checked once by the standard library, then a
/// load per window).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn avx2() -> bool {
    #[cfg(test)]
    if WITHOUT_AVX2.get() {
        return false;
    }
    std::arch::is_x86_feature_detected!("avx2")
}

/// Whether this CPU has AVX-512BW (as `avx2`; false in the tests that
/// take AVX2 away).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn avx512bw() -> bool {
    avx2() && std::arch::is_x86_feature_detected!("avx512bw")
}

/// Whether this CPU has BMI2 (PEXT, PDEP); checked once.
fn bmi2() -> bool {
    #[cfg(test)]
    if WITHOUT_BMI2.get() {
        return false;
    }
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("bmi2")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// PEXT and PDEP, to be called only where `bmi2()`.
#[cfg(target_arch = "x86_64")]
mod bits {
    /// The bits of `x` at the set bits of `mask`, packed low (PEXT).
    #[target_feature(enable = "bmi2")]
    pub(super) fn gather(x: u64, mask: u64) -> u64 {
        std::arch::x86_64::_pext_u64(x, mask)
    }

    /// The low bits of `x` put at the set bits of `mask` (PDEP).
    #[target_feature(enable = "bmi2")]
    pub(super) fn scatter(x: u64, mask: u64) -> u64 {
        std::arch::x86_64::_pdep_u64(x, mask)
    }
}

#[cfg(not(target_arch = "x86_64"))]
mod bits {
    pub(super) unsafe fn gather(_: u64, _: u64) -> u64 {
        unreachable!("bmi2() is false off x86-64")
    }

    pub(super) unsafe fn scatter(_: u64, _: u64) -> u64 {
        unreachable!("bmi2() is false off x86-64")
    }
}

/// The classes byte by byte (other architectures; on x86-64, the reference
/// of the tests).
#[cfg(any(test, not(target_arch = "x86_64")))]
fn classify_bytes<R: Rules>(bytes: &[u8]) -> Classes {
    let mut c = Classes::default();
    for (i, &b) in bytes.iter().enumerate() {
        let bit = 1u64 << i;
        c.valid |= bit;
        if b >= 0x80 {
            c.high |= bit;
            if b < 0xC0 {
                c.continuing |= bit;
            }
        } else if b.is_ascii_alphabetic() {
            c.letter |= bit;
            if R::CASES {
                if b.is_ascii_uppercase() {
                    c.upper |= bit;
                } else {
                    c.lower |= bit;
                }
            }
        } else if b.is_ascii_digit() {
            c.digit |= bit;
        } else if matches!(b, b'\t' | b'\n' | 0x0B | 0x0C | b'\r' | b' ') {
            c.white |= bit;
            if b == b'\n' || b == b'\r' {
                c.newline |= bit;
            }
            if b == b' ' {
                c.space |= bit;
            }
        } else if b == b'\'' {
            c.apostrophe |= bit;
        } else if R::CASES && b == b'/' {
            c.slash |= bit;
        }
    }
    c
}

/// Bit `i` set where `low <= bytes[i] <= high` (`bytes[i] - low`,
/// unsigned, at most `high - low`).
#[inline(always)]
fn bits_between(bytes: &[u8; 64], low: u8, high: u8) -> u64 {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: SSE2 is part of x86-64.
    unsafe {
        use std::arch::x86_64::*;
        let (low, span) = (_mm_set1_epi8(low as i8), _mm_set1_epi8((high - low) as i8));
        lane_bits(bytes, |v| {
            let offset = _mm_sub_epi8(v, low);
            _mm_cmpeq_epi8(_mm_min_epu8(offset, span), offset)
        })
    }
    #[cfg(not(target_arch = "x86_64"))]
    scalar_bits(bytes, |b| (low..=high).contains(&b))
}

/// The lead bytes (ranges) of three-byte characters that are all letters
/// of no case: U+5000..=U+9FFF (CJK ideographs) and U+B000..=U+CFFF
/// (Hangul syllables). Two of `SPANS` (tested), the only ones classified
/// without AVX-512: two SSE2 compares, no lookup for most CJK characters.
pub(super) const CASELESS_LEADS: [(u8, u8); 2] = [(0xE5, 0xE9), (0xEB, 0xEC)];

/// Bit `i` set where `bytes[i] & mask == value` (`value` not zero).
#[inline(always)]
fn bits_where(bytes: &[u8; 64], mask: u8, value: u8) -> u64 {
    debug_assert!(value != 0 && value & mask == value);
    #[cfg(target_arch = "x86_64")]
    // SAFETY: SSE2 is part of x86-64.
    unsafe {
        use std::arch::x86_64::*;
        let (mask, value) = (_mm_set1_epi8(mask as i8), _mm_set1_epi8(value as i8));
        lane_bits(bytes, |v| _mm_cmpeq_epi8(_mm_and_si128(v, mask), value))
    }
    #[cfg(not(target_arch = "x86_64"))]
    scalar_bits(bytes, |b| b & mask == value)
}

/// Bit `i` set where the lane of byte `i` in `test` of its 16 bytes is all
/// ones: 16 bytes per SSE2 compare, one `movemask` each.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn lane_bits(
    bytes: &[u8; 64],
    test: impl Fn(std::arch::x86_64::__m128i) -> std::arch::x86_64::__m128i,
) -> u64 {
    use std::arch::x86_64::*;
    (0..4).fold(0, |bits, k| {
        // SAFETY: SSE2 is part of x86-64; the load reads bytes
        // 16k..16k + 16 of the 64.
        let lanes = unsafe { test(_mm_loadu_si128(bytes.as_ptr().add(16 * k) as *const __m128i)) };
        // SAFETY: as above.
        bits | (unsafe { _mm_movemask_epi8(lanes) } as u16 as u64) << (16 * k)
    })
}

#[cfg(not(target_arch = "x86_64"))]
fn scalar_bits(bytes: &[u8; 64], test: impl Fn(u8) -> bool) -> u64 {
    bytes
        .iter()
        .enumerate()
        .fold(0, |bits, (i, &b)| bits | (test(b) as u64) << i)
}

/// `classify_bytes` on 64 bytes, `$width` at a time with the compares of
/// `$feature`: one body for the SSE2 and the AVX2 versions, which differ in
/// their vector type and intrinsics only. Only the vectors that hold some of
/// the first `len` bytes are classified (a short line's window is often one
/// of two): the bitmaps are zero past them, and `valid` is the caller's to
/// cut.
macro_rules! classify_vectors {
    ($(#[$doc:meta])* $name:ident, $feature:literal, $width:literal, $vector:ident, $mask_bits:ty,
     $load:ident, $set1:ident, $cmpgt:ident, $cmpeq:ident, $and:ident, $or:ident, $movemask:ident) => {
        $(#[$doc])*
        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = $feature)]
        unsafe fn $name<R: Rules>(bytes: &[u8; 64], len: usize) -> Classes {
            use std::arch::x86_64::*;
            let splat = |b: u8| $set1(b as i8);
            // Signed compares: a non-ASCII byte is negative and falls in no
            // range.
            let within = |v: $vector, low: u8, high: u8| {
                $and($cmpgt(v, splat(low - 1)), $cmpgt(splat(high + 1), v))
            };
            let mask = |v: $vector| $movemask(v) as $mask_bits as u64;
            let mut c = Classes {
                valid: u64::MAX,
                ..Classes::default()
            };
            for k in 0..len.div_ceil($width) {
                // SAFETY: `$width` bytes at `$width * k` < 64, an unaligned
                // load.
                let v = unsafe { $load(bytes.as_ptr().add($width * k) as *const $vector) };
                let at = $width * k;
                c.high |= mask(v) << at;
                // 0x80..=0xBF: below -64 as signed bytes.
                c.continuing |= mask($cmpgt(splat(0xC0), v)) << at;
                if R::CASES {
                    let upper = mask(within(v, b'A', b'Z'));
                    let lower = mask(within(v, b'a', b'z'));
                    c.upper |= upper << at;
                    c.lower |= lower << at;
                    c.letter |= (upper | lower) << at;
                    c.slash |= mask($cmpeq(v, splat(b'/'))) << at;
                } else {
                    c.letter |= mask(within($or(v, splat(0x20)), b'a', b'z')) << at;
                }
                c.digit |= mask(within(v, b'0', b'9')) << at;
                let space = $cmpeq(v, splat(b' '));
                c.space |= mask(space) << at;
                c.white |= mask($or(space, within(v, b'\t', b'\r'))) << at;
                c.newline |= mask($or($cmpeq(v, splat(b'\n')), $cmpeq(v, splat(b'\r')))) << at;
                c.apostrophe |= mask($cmpeq(v, splat(b'\''))) << at;
            }
            c
        }
    };
}

classify_vectors!(
    /// 16 bytes at a time (SSE2, part of x86-64).
    classify_sse2, "sse2", 16, __m128i, u16, _mm_loadu_si128, _mm_set1_epi8, _mm_cmpgt_epi8,
    _mm_cmpeq_epi8, _mm_and_si128, _mm_or_si128, _mm_movemask_epi8
);

classify_vectors!(
    /// 32 bytes at a time (AVX2): half the compares and `movemask`s, and a
    /// bitmap takes two halves instead of four quarters (cachegrind, 2 MB
    /// of English: the pre-tokenizer alone 15.9 -> 12.2 million
    /// instructions, a warm encode 70.2 -> 66.3 million). AVX-512BW would
    /// give the bitmaps straight from its mask compares, but its intrinsics
    /// need Rust 1.89.
    classify_avx2, "avx2", 32, __m256i, u32, _mm256_loadu_si256, _mm256_set1_epi8,
    _mm256_cmpgt_epi8, _mm256_cmpeq_epi8, _mm256_and_si256, _mm256_or_si256, _mm256_movemask_epi8
);

/// Bit `i` set where bit `i - 1` of `x` is: "the byte before is in `x`"
/// (nothing before the window).
#[inline(always)]
fn before(x: u64) -> u64 {
    x << 1
}

/// Bit `i` set where bit `i + 1` of `x` is: "the byte after is in `x`"
/// (unknown past the window: taken as in no class).
#[inline(always)]
fn after(x: u64) -> u64 {
    x >> 1
}

/// The bits of `mask` reached from a bit of `seeds` (which are bits of
/// `mask`) going up through set bits of `mask`: from each seed to the end
/// of its run. A carry runs up a run of ones and stops past it; a second
/// seed in the same run leaves its own bit set, hence `| seeds`.
#[inline(always)]
fn fill(mask: u64, seeds: u64) -> u64 {
    (mask & !mask.wrapping_add(seeds)) | seeds
}

/// The starts of white space pieces (and of the digits' pieces of three),
/// shared by cl100k and o200k: `taken` are the line breaks that an `O`
/// run's piece takes.
fn white_and_digit_starts(c: &Classes, taken: u64) -> u64 {
    let blank = c.white & !c.newline;
    let white = c.white & !taken;
    let white_starts = white & !before(white);
    let last_white = c.white & !after(c.white) & blank;
    let mut starts = white_starts | last_white;
    // After the last line break of a run, if blanks alone follow to a
    // character that is not white space.
    let mut after_breaks = blank & before(c.newline & white);
    while after_breaks != 0 {
        let at = after_breaks.trailing_zeros();
        let end = at + (!(blank >> at)).trailing_zeros();
        if end < 64 && c.valid >> end & 1 == 1 && c.white >> end & 1 == 0 {
            starts |= 1 << at;
        }
        after_breaks &= after_breaks - 1;
    }
    // Digits, in threes.
    let digit_runs = c.digit & !before(c.digit);
    starts |= digit_runs;
    let threes = c.digit & before(c.digit) & before(before(c.digit));
    let mut group = digit_runs;
    loop {
        group = (group << 3) & threes;
        if group == 0 {
            break;
        }
        starts |= group;
    }
    starts
}

/// The piece starts of a window that starts a piece (bit 0 is set), all
/// of them correct before the start of the window's last run of one class.
/// `contraction`: the characters of the contraction at an apostrophe (by
/// its index), if one is there.
fn cl100k_starts(c: &Classes, contraction: impl Fn(usize) -> Option<usize>) -> u64 {
    let other = c.other();
    let blank = c.white & !c.newline;
    // Runs of other characters, and the line breaks each one's piece takes.
    let other_runs = other & !before(other);
    let other_starts = other_runs & !before(c.space);
    let other_ends = other & !after(other);
    let taken = fill(c.newline, before(other_ends) & c.newline);
    let mut starts = other_starts | white_and_digit_starts(c, taken);
    // Letters, unless the character before starts their piece.
    let letter_runs = c.letter & !before(c.letter);
    let prefixes = blank | (other_starts & other_ends);
    starts |= letter_runs & !before(prefixes);
    // Contractions: an apostrophe that starts a piece, before a letter.
    let mut apostrophes = c.apostrophe & other_starts & after(c.letter);
    while apostrophes != 0 {
        let at = apostrophes.trailing_zeros() as usize;
        if let Some(len) = contraction(at) {
            if at + len < 64 {
                starts |= 1 << (at + len);
            }
        }
        apostrophes &= apostrophes - 1;
    }
    starts
}

/// `cl100k_starts` for o200k's pattern (the module's notes give its rules).
fn o200k_starts(c: &Classes, contraction: impl Fn(usize) -> Option<usize>) -> u64 {
    let other = c.other(); // marks included
    let pure = other & !c.mark;
    let breaks = c.newline | c.slash;
    // `covered`: the characters of `O` runs whose piece is ` ?O+[\r\n/]*`
    // (from two `O` in a row, or one after a space, to the run's end);
    // `taken`: the `[\r\n/]*` after such a piece (or after a single `O`,
    // as a line break follows no word). A `/` taken is no `O` of its own:
    // the rounds go on until the `/` taken stay the same.
    let mut taken = 0;
    let (covered, pairs) = loop {
        let other = other & !taken;
        let pure = pure & !taken;
        let pairs = pure & after(pure);
        let covered = fill(other, pairs | (pure & before(c.space)));
        let piece_ends = other & !after(other) & (pure | covered);
        let now_taken = fill(breaks, before(piece_ends) & c.newline);
        let settled = (now_taken ^ taken) & c.slash == 0;
        taken = now_taken;
        if settled {
            break (covered, pairs);
        }
    };
    // Contractions, after a word (letters or a mark not covered), in order:
    // the letters of one are not a word that another could follow.
    let words = (c.letter | c.mark) & !covered;
    let mut contractions = 0u64;
    let mut apostrophes = c.apostrophe & !covered & before(words);
    while apostrophes != 0 {
        let at = apostrophes.trailing_zeros() as usize;
        if contractions >> (at - 1) & 1 == 0 {
            if let Some(len) = contraction(at) {
                contractions |= (u64::MAX >> (64 - len)) << at;
            }
        }
        apostrophes &= apostrophes - 1;
    }
    let words = words & !contractions;
    // A single `O` that starts its piece: alone, or the prefix of a word.
    let single = pure & !taken & !covered & !contractions;
    let mut starts = single
        | (pairs & !before(covered | c.space))
        | (before(contractions) & !contractions)
        | white_and_digit_starts(c, taken);
    let prefixes = (c.white & !c.newline) | single;
    starts |= words & !before(words) & !before(prefixes);
    // Case: an upper-case letter after a lower-case one, caseless ones
    // between (the carry runs from the lower-case letter through them).
    let upper = c.upper & words;
    let caseless = words & !c.upper & !c.lower;
    let after_lower = ((c.lower & words) << 1).wrapping_add(caseless) & !caseless;
    starts |= upper & after_lower;
    // The upper-case letters that end a word, after a caseless one.
    let after_caseless = upper & before(caseless);
    if after_caseless != 0 {
        let mut word_ends = upper.wrapping_add(after_caseless) & !upper & !words & c.valid;
        while word_ends != 0 {
            let end = word_ends.trailing_zeros();
            let upper_run = (!(upper << (64 - end))).leading_zeros();
            starts |= 1 << (end - upper_run);
            word_ends &= word_ends - 1;
        }
    }
    starts
}

/// The characters of `'s 'd 'm 't 'll 've 're` (any case, and `'ſ`, whose
/// `ſ` folds to `s`) whose letters begin `rest`, apostrophe included.
fn contraction_len(rest: &[u8]) -> Option<usize> {
    let lower = |i: usize| rest.get(i).map(u8::to_ascii_lowercase);
    match lower(0)? {
        b's' | b'd' | b'm' | b't' => Some(2),
        0xC5 if rest.get(1) == Some(&0xBF) => Some(2),
        first @ (b'l' | b'v' | b'r') => {
            let second = lower(1)?;
            matches!((first, second), (b'l', b'l') | (b'v', b'e') | (b'r', b'e')).then_some(3)
        }
        _ => None,
    }
}

/// What differs between the patterns of the block scanner.
trait Rules {
    /// Whether the rules need the o200k bitmaps (`Classes::upper`...).
    const CASES: bool;
    /// The piece starts of a window (`cl100k_starts`).
    fn starts(c: &Classes, contraction: impl Fn(usize) -> Option<usize>) -> u64;
    /// The classes whose runs `sure_end` looks at: one for each character.
    fn classes(c: &Classes) -> [u64; 4];
    /// The end of the piece from byte `pos` of `text`, by the scalar scanner.
    fn piece_at(text: &str, pos: usize) -> usize;
}

struct Cl100k;

impl Rules for Cl100k {
    const CASES: bool = false;

    fn starts(c: &Classes, contraction: impl Fn(usize) -> Option<usize>) -> u64 {
        cl100k_starts(c, contraction)
    }

    fn classes(c: &Classes) -> [u64; 4] {
        [c.letter, c.digit, c.white, c.other()]
    }

    fn piece_at(text: &str, pos: usize) -> usize {
        cl100k_piece_at(text, pos)
    }
}

struct O200k;

impl Rules for O200k {
    const CASES: bool = true;

    fn starts(c: &Classes, contraction: impl Fn(usize) -> Option<usize>) -> u64 {
        o200k_starts(c, contraction)
    }

    /// Marks with the letters: where a mark's piece is an `O` run's, the
    /// run's start comes before it.
    fn classes(c: &Classes) -> [u64; 4] {
        [c.letter | c.mark, c.digit, c.white, c.other() & !c.mark]
    }

    fn piece_at(text: &str, pos: usize) -> usize {
        o200k_piece_at(text, pos)
    }
}

/// The end of the pieces of a window that are sure: the last start at or
/// before the start of the window's last run of one of `classes`. 0 when
/// there is none past the first.
fn sure_end(c: &Classes, classes: [u64; 4], starts: u64) -> usize {
    let len = c.valid.count_ones();
    if len < 2 {
        return 0;
    }
    let last = len - 1;
    let class = classes
        .into_iter()
        .find(|class| class >> last & 1 == 1)
        .expect("a character has a class");
    // The run of `class` that ends the window, from its start.
    let run_len = (!(class << (63 - last))).leading_zeros();
    let run_start = len - run_len;
    let sure = starts & (u64::MAX >> (63 - run_start));
    (63 - sure.leading_zeros()) as usize
}

/// Calls `f` with each piece of `text` under cl100k's pattern.
pub(super) fn cl100k_pieces<'t>(text: &'t str, f: impl FnMut(&'t str)) {
    pieces::<Cl100k>(text, f)
}

/// Calls `f` with each piece of `text` under o200k's pattern.
pub(super) fn o200k_pieces<'t>(text: &'t str, f: impl FnMut(&'t str)) {
    pieces::<O200k>(text, f)
}

/// Calls `f` with each piece of `text` under the pattern of `R`.
fn pieces<'t, R: Rules>(text: &'t str, mut f: impl FnMut(&'t str)) {
    let bytes = text.as_bytes();
    let mut pos = 0;
    // The scalar scanner's turn runs to here: past the character that
    // stopped the last window, and further after each window in a row that
    // took nothing, fewer after one that did.
    let mut scalar_until = 0;
    let mut misses = 0u32;
    while pos < bytes.len() {
        if pos >= scalar_until {
            let rest_of_text = &bytes[pos..];
            let padded: [u8; 64];
            let window = match rest_of_text.first_chunk::<64>() {
                Some(window) => window,
                None => {
                    padded = zero_padded(rest_of_text);
                    &padded
                }
            };
            let mut classes = Classes::of::<R>(window, rest_of_text.len().min(64));
            let chars = match classes.high {
                0 => None,
                _ => classes.in_chars::<R>(window),
            };
            // SAFETY (both `scatter`s): `chars` is only `Some` where `bmi2()`.
            let byte_of = |at: usize| match chars {
                Some(starts) => unsafe { bits::scatter(1 << at, starts) }.trailing_zeros() as usize,
                None => at,
            };
            let starts = R::starts(&classes, |at| {
                contraction_len(&rest_of_text[byte_of(at) + 1..])
            });
            let end = sure_end(&classes, R::classes(&classes), starts);
            if end > 0 {
                let mut rest = starts & ((1u64 << end) - 1) & !1;
                if let Some(char_starts) = chars {
                    rest = unsafe { bits::scatter(rest, char_starts) };
                }
                let end = byte_of(end);
                // Checking the bounds and the character boundaries of each
                // slice took a third of the scan's time (the scan alone:
                // 510-660 -> 850-920 MB/s on English).
                let piece = |from: usize, to: usize| {
                    debug_assert!(
                        text.is_char_boundary(pos + from) && text.is_char_boundary(pos + to)
                    );
                    // SAFETY: `rest`'s bits and `end` are starts of
                    // characters within the window (ASCII bytes, or the
                    // leads `scatter` maps the characters to), and
                    // `from < to`: each piece is whole characters of `text`.
                    unsafe { text.get_unchecked(pos + from..pos + to) }
                };
                let mut from = 0;
                while rest != 0 {
                    let to = rest.trailing_zeros() as usize;
                    f(piece(from, to));
                    from = to;
                    rest &= rest - 1;
                }
                f(piece(from, end));
                pos += end;
                misses = misses.saturating_sub(1);
                continue;
            }
            scalar_until = pos + (8 << misses);
            misses = (misses + 1).min(MAX_MISSES);
        }
        let end = R::piece_at(text, pos);
        f(&text[pos..end]);
        pos = end;
    }
}

/// The last window of a text (its last bytes, fewer than 64), zero padded.
/// Not inlined: where it was, LLVM stopped inlining `PieceBatch::push`
/// into the scanner's loop (10% more instructions on English).
#[inline(never)]
fn zero_padded(bytes: &[u8]) -> [u8; 64] {
    let mut window = [0u8; 64];
    window[..bytes.len()].copy_from_slice(bytes);
    window
}

/// After this many windows in a row that took nothing, the scalar scanner
/// runs 8 << `MAX_MISSES` bytes (4 kB) before the next window.
const MAX_MISSES: u32 = 9;

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::*;
    use crate::test_rng::XorShift;

    /// The vector classifications (SSE2, and AVX2 where the CPU has it)
    /// against the byte-by-byte one, for both patterns' classes, on windows
    /// of random bytes (every value, ASCII or not, lead or continuation) and
    /// on windows of one byte value each.
    #[test]
    fn vector_classifications_agree_with_the_bytes() {
        fn check<R: Rules>(window: &[u8; 64]) {
            let expected = classify_bytes::<R>(window);
            // SAFETY: SSE2 is part of x86-64; AVX2 is checked.
            assert_eq!(
                unsafe { classify_sse2::<R>(window, 64) },
                expected,
                "{window:?}"
            );
            if std::arch::is_x86_feature_detected!("avx2") {
                let avx2 = unsafe { classify_avx2::<R>(window, 64) };
                assert_eq!(avx2, expected, "{window:?}");
            }
        }
        let mut rng = XorShift(0x9E37_79B9_7F4A_7C15);
        let windows = (0..20_000)
            .map(|_| std::array::from_fn(|_| rng.below(256) as u8))
            .chain((0..=255u8).map(|b| [b; 64]));
        for window in windows {
            check::<Cl100k>(&window);
            check::<O200k>(&window);
        }
    }

    /// Windows cut short by the text's end, zero padded, against the
    /// byte-by-byte classes of their bytes, at every length, with and
    /// without AVX2.
    #[test]
    fn short_windows_classify_as_their_bytes() {
        let mut rng = XorShift(0x2545_F491_4F6C_DD1D);
        for round in 0..4_000 {
            let window: Vec<u8> = (0..round % 65).map(|_| rng.below(256) as u8).collect();
            let padded = zero_padded(&window);
            for without_avx2 in [false, true] {
                WITHOUT_AVX2.set(without_avx2);
                assert_eq!(
                    Classes::of::<Cl100k>(&padded, window.len()),
                    classify_bytes::<Cl100k>(&window),
                    "{window:?}"
                );
                assert_eq!(
                    Classes::of::<O200k>(&padded, window.len()),
                    classify_bytes::<O200k>(&window),
                    "{window:?}"
                );
            }
            WITHOUT_AVX2.set(false);
        }
    }
}
