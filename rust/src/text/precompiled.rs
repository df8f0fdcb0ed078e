//! SentencePiece's precompiled character map: the normalization rules of a
//! `.model` (`normalizer_spec.precompiled_charsmap`), which Hugging Face's
//! `Precompiled` normalizer carries too.
//!
//! The blob, as SentencePiece's `Normalizer::EncodePrecompiledCharsMap`
//! writes it: a `u32` (little-endian) `trie_size`, then `trie_size` bytes of
//! a Darts-clone double array (`u32` LE units), then the replacement
//! strings, each ending in NUL. The trie maps a rule's source text (its
//! UTF-8 bytes) to the offset of its replacement among the strings.
//!
//! A unit packs: `has_leaf` (bit 8: a key ends at this node), a `label`
//! (the low byte, and bit 31, set on value units so that no byte matches
//! them), an `offset` to the node's children (bits 10.., shifted by 8 more
//! when bit 9 is set), and, in a value unit, the `value` (the low 31 bits).
//! A search starts at the root's children (`pos = offset(units[0])`); each
//! key byte moves to `pos ^ byte`, which must carry that byte as its label;
//! `pos ^= offset` then reaches that node's children, and when the node has
//! a leaf, the unit at the new `pos` (its child labelled 0) holds the value
//! of the key read so far. A search yields every rule that is a prefix of
//! the key, shortest first.
//!
//! Checked when read, so that a damaged or hostile blob is an error, never
//! a panic or a read out of bounds: the sizes; the strings valid UTF-8;
//! every unit that can hold a leaf (a non-value unit with `has_leaf`)
//! pointing inside the array at a value that starts a character of the
//! strings and has a NUL after it. That covers every unit, reachable or
//! not, in one pass, so every value a search can read is known good;
//! positions a search computes are bounds-checked as it goes (a real trie,
//! built in blocks of 256 units, never leaves the array).
//!
//! Which rule applies, and where, is the normalizer's business: SentencePiece
//! takes the longest rule at each position, Hugging Face the shortest for a
//! whole grapheme (see `normalizers.rs`). Both start a rule only at a
//! character, so a table says which first bytes any rule has: text without
//! them (most ASCII) is copied whole.

use std::sync::Arc;

use base64::prelude::{Engine, BASE64_STANDARD};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A checked precompiled character map; cloning shares it.
#[derive(Clone)]
pub struct Charsmap(Arc<Rules>);

struct Rules {
    /// The blob as read, written back unchanged.
    blob: Vec<u8>,
    units: Vec<u32>,
    /// The NUL-terminated replacements.
    replacements: String,
    /// Whether some rule starts with each byte.
    first_bytes: [bool; 256],
    /// Whether some replacement holds two spaces in a row.
    double_space: bool,
}

fn has_leaf(unit: u32) -> bool {
    (unit >> 8) & 1 == 1
}

fn value(unit: u32) -> u32 {
    unit & 0x7FFF_FFFF
}

fn label(unit: u32) -> u32 {
    unit & (0x8000_0000 | 0xFF)
}

fn offset(unit: u32) -> usize {
    ((unit >> 10) << ((unit & (1 << 9)) >> 6)) as usize
}

fn is_value_unit(unit: u32) -> bool {
    unit & 0x8000_0000 != 0
}

fn is_utf8_continuation(byte: u8) -> bool {
    byte & 0xC0 == 0x80
}

impl Charsmap {
    /// The map in `blob`, checked (see the module doc); an error says what
    /// is wrong with it.
    pub fn new(blob: Vec<u8>) -> Result<Self, String> {
        let Some((size, rest)) = blob.split_first_chunk::<4>() else {
            return Err(format!(
                "the precompiled charsmap has {} bytes, too few for its header",
                blob.len()
            ));
        };
        let trie_size = u32::from_le_bytes(*size) as usize;
        if trie_size == 0 || !trie_size.is_multiple_of(4) || trie_size > rest.len() {
            return Err(format!(
                "the precompiled charsmap's trie size ({trie_size} bytes) does not fit its {} bytes \
                 (it must be a positive multiple of 4, within the blob)",
                rest.len()
            ));
        }
        let units: Vec<u32> = rest[..trie_size]
            .chunks_exact(4)
            .map(|b| u32::from_le_bytes(b.try_into().expect("chunks of 4")))
            .collect();
        let replacements = std::str::from_utf8(&rest[trie_size..])
            .map_err(|e| format!("the precompiled charsmap's replacements are not UTF-8: {e}"))?
            .to_owned();
        let last_nul = replacements.rfind('\0');
        let bytes = replacements.as_bytes();
        let nuls: Vec<usize> = memchr::memchr_iter(0, bytes).collect();
        let double_spaces: Vec<usize> = memchr::memmem::find_iter(bytes, b"  ").collect();
        let mut double_space = false;
        for (at, &unit) in units.iter().enumerate() {
            if is_value_unit(unit) || !has_leaf(unit) {
                continue;
            }
            let leaf = at ^ offset(unit);
            let Some(&value_unit) = units.get(leaf) else {
                return Err(format!(
                    "the precompiled charsmap's trie is damaged: unit {at} points outside the trie ({leaf})"
                ));
            };
            let start = value(value_unit) as usize;
            if last_nul.is_none_or(|nul| start > nul) || !replacements.is_char_boundary(start) {
                return Err(format!(
                    "the precompiled charsmap's trie is damaged: unit {leaf} points at byte {start}, \
                     not at a NUL-terminated replacement among the {} bytes of them",
                    replacements.len()
                ));
            }
            // The replacement runs from `start` to the next NUL.
            let end = nuls[nuls.partition_point(|&nul| nul < start)];
            let space = double_spaces.partition_point(|&ds| ds < start);
            double_space |= double_spaces.get(space).is_some_and(|&ds| ds + 2 <= end);
        }
        let mut first_bytes = [false; 256];
        let root = offset(units[0]);
        for byte in 0..=255u8 {
            // A rule starts only at a character: never at a continuation byte.
            first_bytes[byte as usize] = !is_utf8_continuation(byte)
                && units
                    .get(root ^ byte as usize)
                    .is_some_and(|&u| label(u) == byte as u32);
        }
        Ok(Charsmap(Arc::new(Rules {
            blob,
            units,
            replacements,
            first_bytes,
            double_space,
        })))
    }

    /// Whether some rule's replacement holds two spaces in a row (which
    /// SentencePiece keeps when it removes extra spaces).
    pub fn replaces_with_double_space(&self) -> bool {
        self.0.double_space
    }

    /// The blob, as read.
    pub fn blob(&self) -> &[u8] {
        &self.0.blob
    }

    /// Whether some rule starts with `byte`.
    #[inline]
    pub fn starts_rule(&self, byte: u8) -> bool {
        self.0.first_bytes[byte as usize]
    }

    /// Calls `found(length, replacement)` for each rule that is a prefix of
    /// `key`, shortest first, until it returns false. A NUL byte of the key
    /// is read as a label, as SentencePiece does, unless `nul_ends_key`
    /// (Hugging Face's search stops there).
    fn prefix_rules<'a>(
        &'a self,
        key: &[u8],
        nul_ends_key: bool,
        mut found: impl FnMut(usize, &'a str) -> bool,
    ) {
        let units = &self.0.units;
        let mut pos = offset(units[0]);
        for (i, &byte) in key.iter().enumerate() {
            if byte == 0 && nul_ends_key {
                return;
            }
            pos ^= byte as usize;
            let Some(&unit) = units.get(pos) else {
                return;
            };
            if label(unit) != byte as u32 {
                return;
            }
            pos ^= offset(unit);
            if has_leaf(unit) && !found(i + 1, self.replacement(units[pos])) {
                return;
            }
        }
    }

    /// The replacement that a value unit points at (checked at load).
    fn replacement(&self, value_unit: u32) -> &str {
        let rest = &self.0.replacements[value(value_unit) as usize..];
        &rest[..memchr::memchr(0, rest.as_bytes()).unwrap_or(rest.len())]
    }

    /// SentencePiece's rule at the start of `text`: the longest, as its
    /// length and replacement. Only rules that end at a character of `text`
    /// count (a real map has no other).
    pub fn longest_rule<'a>(&'a self, text: &str) -> Option<(usize, &'a str)> {
        let mut longest = None;
        self.prefix_rules(text.as_bytes(), false, |length, replacement| {
            if text.is_char_boundary(length) {
                longest = Some((length, replacement));
            }
            true
        });
        longest
    }

    /// Hugging Face's rule for `chunk`: the replacement of the shortest rule
    /// that is a prefix of it (which then stands for the whole chunk).
    pub fn first_rule(&self, chunk: &str) -> Option<&str> {
        let mut first = None;
        self.prefix_rules(chunk.as_bytes(), true, |_, replacement| {
            first = Some(replacement);
            false
        });
        first
    }
}

impl PartialEq for Charsmap {
    fn eq(&self, other: &Self) -> bool {
        self.blob() == other.blob()
    }
}

impl std::fmt::Debug for Charsmap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Charsmap({} bytes)", self.0.blob.len())
    }
}

/// Saved as the standard base64 of the blob, as Hugging Face writes it.
impl Serialize for Charsmap {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&BASE64_STANDARD.encode(self.blob()))
    }
}

impl<'de> Deserialize<'de> for Charsmap {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        let blob = BASE64_STANDARD.decode(text).map_err(|e| {
            serde::de::Error::custom(format!("the precompiled charsmap is not base64: {e}"))
        })?;
        Charsmap::new(blob).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A map built as Darts-clone lays one out, by hand: rules `a` → `x`,
    /// `ab` → `yz`, `é` → `e` (and `c` → nothing).
    pub(crate) fn small_map() -> Vec<u8> {
        let mut units = vec![0u32; 1024];
        let unit =
            |label: u32, offset: u32, leaf: bool| (offset << 10) | ((leaf as u32) << 8) | label;
        let replacements = b"x\0yz\0e\0\0";
        // Root: children at 256 ^ byte.
        units[0] = unit(0, 256, false);
        // 'a' at 256 ^ 'a', a leaf; its children at 512 ^ ...
        let a = 256 ^ b'a' as usize;
        units[a] = unit(b'a' as u32, (a ^ 512) as u32, true);
        units[512] = 0x8000_0000; // value 0: "x"
        let b = 512 ^ b'b' as usize;
        units[b] = unit(b'b' as u32, (b ^ 768) as u32, true);
        units[768] = 0x8000_0000 | 2; // "yz"
                                      // 'é' = C3 A9: C3 at 256 ^ C3, A9 below it.
        let c3 = 256 ^ 0xC3;
        units[c3] = unit(0xC3, (c3 ^ 640) as u32, false);
        let a9 = 640 ^ 0xA9;
        units[a9] = unit(0xA9, (a9 ^ 896) as u32, true);
        units[896] = 0x8000_0000 | 5; // "e"
        let c = 256 ^ b'c' as usize;
        units[c] = unit(b'c' as u32, (c ^ 0x3F0) as u32, true);
        units[0x3F0] = 0x8000_0000 | 7; // ""
        let mut blob = ((units.len() * 4) as u32).to_le_bytes().to_vec();
        for u in units {
            blob.extend(u.to_le_bytes());
        }
        blob.extend(replacements);
        blob
    }

    #[test]
    fn finds_rules_shortest_first() {
        let map = Charsmap::new(small_map()).unwrap();
        assert_eq!(map.longest_rule("abc"), Some((2, "yz")));
        assert_eq!(map.longest_rule("ac"), Some((1, "x")));
        assert_eq!(map.first_rule("ab"), Some("x"));
        assert_eq!(map.longest_rule("éa"), Some((2, "e")));
        assert_eq!(map.longest_rule("c"), Some((1, "")));
        assert_eq!(map.longest_rule("b"), None);
        assert_eq!(map.longest_rule(""), None);
        assert!(map.starts_rule(b'a') && map.starts_rule(0xC3) && !map.starts_rule(b'b'));
        assert!(!map.starts_rule(0xA9), "a continuation byte starts no rule");
        assert!(!map.replaces_with_double_space());
        let mut spaced = small_map();
        let yz = spaced.len() - 6;
        spaced[yz..yz + 2].copy_from_slice(b"  ");
        let spaced = Charsmap::new(spaced).unwrap();
        assert_eq!(spaced.longest_rule("ab"), Some((2, "  ")));
        assert!(spaced.replaces_with_double_space());
    }

    #[test]
    fn damaged_blobs_are_errors_not_panics() {
        let good = small_map();
        assert!(Charsmap::new(Vec::new()).unwrap_err().contains("too few"));
        let mut oversized = good.clone();
        oversized[..4].copy_from_slice(&(good.len() as u32).to_le_bytes());
        assert!(Charsmap::new(oversized).unwrap_err().contains("trie size"));
        let mut not_utf8 = good.clone();
        let last = not_utf8.len() - 3;
        not_utf8[last] = 0xFF;
        assert!(Charsmap::new(not_utf8).unwrap_err().contains("UTF-8"));
        let mut no_nul = good.clone();
        no_nul.truncate(good.len() - 4); // "x\0yz" left: "e" has no NUL
        no_nul.push(b'q');
        assert!(Charsmap::new(no_nul)
            .unwrap_err()
            .contains("NUL-terminated"));
        // Every truncation, and garbled bytes anywhere: an error or a map
        // whose searches stay in bounds.
        let probe = |map: &Charsmap| {
            for text in ["abc", "é", "\0a", "zzz", "ab\u{10FFFF}"] {
                map.longest_rule(text);
                map.first_rule(text);
            }
        };
        for len in 0..good.len() {
            if let Ok(map) = Charsmap::new(good[..len].to_vec()) {
                probe(&map);
            }
        }
        let mut rng = crate::test_rng::XorShift(0x2545_F491_4F6C_DD1D);
        for _ in 0..2000 {
            let mut garbled = good.clone();
            for _ in 0..8 {
                let state = rng.next();
                let at = 4 + (state % (garbled.len() as u64 - 4)) as usize;
                garbled[at] = (state >> 32) as u8;
            }
            if let Ok(map) = Charsmap::new(garbled) {
                probe(&map);
            }
        }
    }

    #[test]
    fn base64_round_trip() {
        let map = Charsmap::new(small_map()).unwrap();
        let json = serde_json::to_string(&map).unwrap();
        let back: Charsmap = serde_json::from_str(&json).unwrap();
        assert_eq!(back, map);
        let err = serde_json::from_str::<Charsmap>("\"%%\"").unwrap_err();
        assert!(err.to_string().contains("base64"), "{err}");
    }
}
