//! The byte-level alphabet of GPT-2: a printable character for each of the
//! 256 byte values, so that byte-level tokens can be shown and stored as text
//! (`Ġthe` for " the"). Hugging Face `tokenizer.json` files use it too.

use std::sync::OnceLock;

/// Printable bytes stand for themselves; the other 68 map, in order, to
/// U+0100 and up.
fn tables() -> &'static ([char; 256], std::collections::HashMap<char, u8>) {
    static TABLES: OnceLock<([char; 256], std::collections::HashMap<char, u8>)> = OnceLock::new();
    TABLES.get_or_init(|| {
        let mut to_char = ['\0'; 256];
        let mut next = 0x100u32;
        for b in 0..=255u8 {
            let printable = matches!(b, b'!'..=b'~' | 0xA1..=0xAC | 0xAE..=0xFF);
            to_char[b as usize] = if printable {
                b as char
            } else {
                let c = char::from_u32(next).expect("U+0100.. are chars");
                next += 1;
                c
            };
        }
        let to_byte = to_char
            .iter()
            .enumerate()
            .map(|(b, &c)| (c, b as u8))
            .collect();
        (to_char, to_byte)
    })
}

/// The printable form of a token's bytes.
pub fn encode(bytes: &[u8]) -> String {
    let (to_char, _) = tables();
    bytes.iter().map(|&b| to_char[b as usize]).collect()
}

/// The bytes of a printable token, or `None` if a character is not in the
/// alphabet.
pub fn decode(text: &str) -> Option<Vec<u8>> {
    let (_, to_byte) = tables();
    text.chars().map(|c| to_byte.get(&c).copied()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_every_byte() {
        let all: Vec<u8> = (0..=255).collect();
        assert_eq!(decode(&encode(&all)).unwrap(), all);
        assert_eq!(encode(b" the"), "Ġthe");
        assert_eq!(encode(b"\n"), "Ċ");
        assert_eq!(decode("not☃"), None);
    }
}
