//! Text held in a fixed width per character, as CPython holds strings
//! (PEP 393: Latin-1, UCS-2 or UCS-4), read as UTF-8 a run at a time on the
//! thread that encodes it.
//!
//! A Python string has UTF-8 only once something asks for it
//! (`PyUnicode_AsUTF8AndSize`, which then keeps a copy in the string).
//! Asked for on the calling thread, the UTF-8 of every non-ASCII text of a
//! batch was made there, one text after another, before the work spread
//! over the cores: 8 ms of serial work per call on 10 MB of fresh lines
//! of the multilingual mix, and a UTF-8 copy kept in each string for as
//! long as the caller keeps it. The Python layer now only notes where each
//! string's characters lie ([`FixedWidth`]); each pool thread transcodes
//! its own run of texts into one buffer, reused from run to run, and reads
//! an ASCII text where it lies ([`StrRun`] for [`FixedWidth`]).
//!
//! Lone surrogates, which UTF-8 cannot hold, become U+FFFD as tiktoken has
//! it, and a high surrogate followed by a low one becomes the character the
//! pair encodes: what `text.encode("utf-16", "surrogatepass").decode(
//! "utf-16", "replace")` gives in Python.

use std::cell::RefCell;

use crate::batch::StrRun;

/// A text's characters, one code unit each, in the width of its widest.
#[derive(Clone, Copy, Debug)]
pub enum FixedWidth<'a> {
    Latin1(&'a [u8]),
    Ucs2(&'a [u16]),
    Ucs4(&'a [u32]),
}

/// Where a text's UTF-8 lies once [`FixedWidth::to_utf8`] is done.
enum Utf8<'a> {
    /// In the text itself (ASCII).
    InPlace(&'a str),
    /// This many bytes at the start of the buffer given.
    Written(usize),
}

impl<'a> FixedWidth<'a> {
    /// The text where it lies, if it is ASCII (and so UTF-8 as it is).
    fn as_ascii(self) -> Option<&'a str> {
        match self {
            // SAFETY: ASCII is UTF-8.
            FixedWidth::Latin1(chars) if chars.is_ascii() => {
                Some(unsafe { std::str::from_utf8_unchecked(chars) })
            }
            _ => None,
        }
    }

    /// The most bytes its UTF-8 can take: by its width (the room simdutf
    /// asks for), except for a UCS-4 text that would take more
    /// than `KEEP_UTF8` so: counted then (a pass over the text, where four
    /// bytes a character would be fresh memory at every call, zeroed by
    /// the kernel, then by `resize`).
    fn utf8_bound(self) -> usize {
        match self {
            FixedWidth::Latin1(chars) => 2 * chars.len(),
            FixedWidth::Ucs2(chars) => 3 * chars.len(),
            FixedWidth::Ucs4(chars) if 4 * chars.len() <= KEEP_UTF8 => 4 * chars.len(),
            // A character takes a byte, and one more from each of these
            // code points on. (A surrogate counts three, as U+FFFD takes; a
            // pair, six for four.)
            FixedWidth::Ucs4(chars) => chars
                .iter()
                .map(|&c| {
                    1 + usize::from(c >= 0x80) + usize::from(c >= 0x800) + usize::from(c >= 0x10000)
                })
                .sum(),
        }
    }

    /// Its characters as UTF-8: where they lie if ASCII, else written at
    /// the start of `out` (at least `utf8_bound` bytes long).
    ///
    /// By simdutf, whose vector code transcoded the multilingual benchmark
    /// mix's UTF-16 at 3.6 to 12.7 GB/s on one core (Zen 4), where
    /// `encoding_rs` took 0.7 to 1.1 (CJK and Cyrillic text, whose
    /// characters are not ASCII, is what it was slow on); on a warm pass over
    /// the mix, transcoding had taken a tenth of the time. simdutf refuses
    /// a lone surrogate (it gives 0 for a text that is not empty), which
    /// `code_points_to_utf8` then reads as UTF-16 decoding does.
    fn to_utf8(self, out: &mut [u8]) -> Utf8<'a> {
        if let Some(text) = self.as_ascii() {
            return Utf8::InPlace(text);
        }
        debug_assert!(out.len() >= self.utf8_bound());
        // SAFETY: `out` has room for the UTF-8 of the characters (the
        // caller's `utf8_bound`), and they are not in it.
        let written = unsafe {
            match self {
                FixedWidth::Latin1(chars) => {
                    simdutf::convert_latin1_to_utf8(chars.as_ptr(), chars.len(), out.as_mut_ptr())
                }
                FixedWidth::Ucs2(chars) => {
                    simdutf::convert_utf16_to_utf8(chars.as_ptr(), chars.len(), out.as_mut_ptr())
                }
                FixedWidth::Ucs4(chars) => {
                    simdutf::convert_utf32_to_utf8(chars.as_ptr(), chars.len(), out.as_mut_ptr())
                }
            }
        };
        Utf8::Written(match self {
            FixedWidth::Ucs2(chars) if written == 0 => code_points_to_utf8(chars, out),
            FixedWidth::Ucs4(chars) if written == 0 => code_points_to_utf8(chars, out),
            _ => written,
        })
    }
}

/// Writes `chars` as UTF-8 at the start of `out`, surrogates as UTF-16
/// decoding reads them (a pair as its character, one alone as U+FFFD), and
/// gives the number of bytes written: for the texts simdutf refuses (they
/// hold a lone surrogate, or a pair in UCS-4), a character at a time.
fn code_points_to_utf8<C: Copy + Into<u32>>(chars: &[C], out: &mut [u8]) -> usize {
    let mut written = 0;
    let mut units = chars.iter().map(|&c| c.into()).peekable();
    while let Some(mut c) = units.next() {
        if let (0xD800..=0xDBFF, Some(&low @ 0xDC00..=0xDFFF)) = (c, units.peek()) {
            c = 0x10000 + ((c - 0xD800) << 10) + (low - 0xDC00);
            units.next();
        }
        let c = char::from_u32(c).unwrap_or(char::REPLACEMENT_CHARACTER);
        written += c.encode_utf8(&mut out[written..]).len();
    }
    written
}

thread_local! {
    /// Each thread's UTF-8 of its run of texts, reused from run to run.
    static UTF8: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// A reused buffer above this many bytes is dropped after its run.
const KEEP_UTF8: usize = 1 << 24;

impl StrRun for FixedWidth<'_> {
    fn with_strs<R>(run: &[Self], read: impl FnOnce(&[&str]) -> R) -> R {
        // A run of ASCII (most runs of most text) in one pass, no buffer.
        let mut strs = Vec::with_capacity(run.len());
        strs.extend(run.iter().map_while(|text| text.as_ascii()));
        if strs.len() == run.len() {
            return read(&strs);
        }
        drop(strs);
        // Taken out, not borrowed: while `read` waits on the pool it may run
        // other work of the pool, which may come here too.
        let mut utf8 = UTF8.take();
        let needed: usize = run.iter().map(|text| text.utf8_bound()).sum();
        if utf8.len() < needed {
            // Fresh room rather than `resize`, which would copy the last
            // run's bytes (no use now) to fresh pages, and rounded up, so
            // that the next text, a little longer, fits too: 1 MB documents
            // of German grew the buffer at nearly every call, and a first
            // pass over three took 2,121 page faults, now 1,361.
            utf8 = vec![0; needed.next_power_of_two().min(KEEP_UTF8).max(needed)];
        }
        let mut places = Vec::with_capacity(run.len());
        let mut written = 0;
        for &text in run {
            places.push(match text.to_utf8(&mut utf8[written..]) {
                Utf8::InPlace(text) => Utf8::InPlace(text),
                Utf8::Written(len) => {
                    written += len;
                    Utf8::Written(written)
                }
            });
        }
        // Each written text ends where the next one starts.
        let mut start = 0;
        let strs: Vec<&str> = places
            .into_iter()
            .map(|place| match place {
                Utf8::InPlace(text) => text,
                Utf8::Written(end) => {
                    let bytes = &utf8[std::mem::replace(&mut start, end)..end];
                    // SAFETY: `to_utf8` wrote UTF-8 there.
                    unsafe { std::str::from_utf8_unchecked(bytes) }
                }
            })
            .collect();
        let result = read(&strs);
        drop(strs);
        if utf8.len() <= KEEP_UTF8 {
            UTF8.set(utf8);
        }
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What Python's `encode("utf-16", "surrogatepass").decode("utf-16",
    /// "replace")` gives for these code points.
    fn as_utf16_decoding_reads(chars: &[u32]) -> String {
        let units: Vec<u16> = chars
            .iter()
            .flat_map(|&c| match char::from_u32(c) {
                Some(ch) => ch.encode_utf16(&mut [0; 2]).to_vec(),
                None => vec![c as u16],
            })
            .collect();
        String::from_utf16_lossy(&units)
    }

    /// Code points, each of the widths they fit, and the UTF-8 expected.
    fn samples() -> Vec<(FixedWidth<'static>, String)> {
        let code_points: &[&[u32]] = &[
            &[],
            &[0x61, 0x62],
            &[0x61, 0xE9, 0xFF],
            &[0x6587, 0x5B57, 0x20, 0x61, 0xFFFF],
            &[0x1F600, 0x61, 0x10FFFF],
            // Surrogates: a pair, one alone (high, low), a high before a
            // character beyond the BMP, a low after one, at either end.
            &[0xD83D, 0xDE00, 0x61],
            &[0xD800, 0x61, 0xDFFF],
            &[0xD800, 0x1F600, 0xDE00],
            &[0xDBFF],
            &[0x61, 0xD800],
            &[0xDC00, 0xD800],
        ];
        let mut samples = Vec::new();
        for &chars in code_points {
            let expected = as_utf16_decoding_reads(chars);
            let widest = chars.iter().copied().max().unwrap_or(0);
            let latin1 = chars.iter().map(|&c| c as u8).collect::<Vec<_>>();
            let ucs2 = chars.iter().map(|&c| c as u16).collect::<Vec<_>>();
            samples.push((FixedWidth::Ucs4(chars), expected.clone()));
            if widest <= 0xFFFF {
                samples.push((FixedWidth::Ucs2(ucs2.leak()), expected.clone()));
            }
            if widest <= 0xFF {
                samples.push((FixedWidth::Latin1(latin1.leak()), expected));
            }
        }
        samples
    }

    #[test]
    fn every_width_reads_as_its_utf8() {
        let (texts, expected): (Vec<_>, Vec<_>) = samples().into_iter().unzip();
        FixedWidth::with_strs(&texts, |strs| assert_eq!(strs, expected));
        for (text, expected) in texts.iter().zip(&expected) {
            FixedWidth::with_strs(std::slice::from_ref(text), |strs| {
                assert_eq!(strs, [expected])
            });
        }
    }

    #[test]
    fn long_texts_of_every_width_read_as_their_utf8() {
        // Long enough for simdutf's vector loops, with characters of every
        // UTF-8 length; then with a lone surrogate (which it refuses) or, in
        // UCS-4, a pair, at every offset near the start.
        let base: Vec<u32> = (0..300u32)
            .map(|i| match i % 7 {
                0 => 0xE9,
                1 => 0x6587,
                2 => 0x1F600,
                _ => 0x20 + i % 90,
            })
            .collect();
        let mut cases = vec![base.clone(), base.iter().map(|&c| c.min(0xFF)).collect()];
        for other in [&[0xDC00][..], &[0xD800], &[0xD83D, 0xDE00]] {
            for at in 0..70 {
                let mut chars = base.clone();
                chars.splice(at..at, other.iter().copied());
                cases.push(chars);
            }
        }
        for chars in cases {
            let expected = as_utf16_decoding_reads(&chars);
            let mut texts = vec![FixedWidth::Ucs4(&chars[..])];
            let ucs2: Vec<u16> = chars.iter().map(|&c| c as u16).collect();
            let latin1: Vec<u8> = chars.iter().map(|&c| c as u8).collect();
            if chars.iter().all(|&c| c <= 0xFFFF) {
                texts.push(FixedWidth::Ucs2(&ucs2));
            }
            if chars.iter().all(|&c| c <= 0xFF) {
                texts.push(FixedWidth::Latin1(&latin1));
            }
            for text in texts {
                FixedWidth::with_strs(&[text], |strs| assert_eq!(strs[0], expected, "{text:?}"));
            }
        }
    }

    #[test]
    fn ascii_is_read_where_it_lies() {
        let text = b"plain ascii";
        FixedWidth::with_strs(&[FixedWidth::Latin1(text)], |strs| {
            assert_eq!(strs[0].as_ptr(), text.as_ptr())
        });
    }

    #[test]
    fn runs_inside_runs_get_their_own_buffer() {
        let outer = [FixedWidth::Latin1(b"caf\xe9"), FixedWidth::Ucs2(&[0x4E2D])];
        FixedWidth::with_strs(&outer, |strs| {
            FixedWidth::with_strs(&[FixedWidth::Latin1(b"\xfc")], |inner| {
                assert_eq!(inner, ["ü"])
            });
            assert_eq!(strs, ["café", "中"]);
        });
    }

    #[test]
    fn a_huge_ucs4_text_is_given_the_room_its_utf8_takes() {
        // Characters of every UTF-8 length, a surrogate pair and lone
        // surrogates, repeated past `KEEP_UTF8` bytes at four a character:
        // the room is counted, and must hold the UTF-8.
        let one: &[u32] = &[
            0x61, 0xE9, 0x6587, 0x1F600, 0xD83D, 0xDE00, 0xD800, 0x61, 0xDFFF, 0x10FFFF,
        ];
        let copies = KEEP_UTF8 / 4 / one.len() + 1;
        let huge = FixedWidth::Ucs4(one.repeat(copies).leak());
        let expected = as_utf16_decoding_reads(one).repeat(copies);
        let bound = huge.utf8_bound();
        assert!(bound >= expected.len() && bound < 2 * expected.len());
        FixedWidth::with_strs(&[huge], |strs| assert!(strs[0] == expected));
    }
}
