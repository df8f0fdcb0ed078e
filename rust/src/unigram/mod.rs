//! Unigram language model (Kudo 2018), SentencePiece's default: a
//! vocabulary of pieces with log-probabilities; a text is segmented into the
//! pieces whose scores sum highest (Viterbi, `encoder.rs`).
//!
//! Text handling is SentencePiece's, after its (here identity) normalization:
//! extra spaces removed, a space put in front (the "dummy prefix"), and
//! spaces written as `▁` (U+2581), so that pieces carry word boundaries and
//! decoding is lossless.

mod encoder;
pub mod files;
mod lattice;
mod piece_trie;
mod seeds;
mod trainer;

pub use seeds::PieceRules;
pub use trainer::{train, UnigramTrainerSettings};

use crate::batch::{self, IdRuns};
use crate::error::{Error, Result};

/// SentencePiece's piece types (the values of its `.model` files; in
/// polytok JSON, their snake_case names).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PieceKind {
    Normal,
    Unknown,
    Control,
    UserDefined,
    Unused,
    Byte,
}

#[derive(Clone, Debug)]
pub struct Piece {
    pub text: String,
    pub score: f32,
    pub kind: PieceKind,
}

/// SentencePiece's whitespace handling (all on by default, as there).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Whitespace {
    /// Strip leading and trailing spaces, and keep one of each run inside.
    pub remove_extra: bool,
    /// Put a space in front of the text.
    pub add_dummy_prefix: bool,
    /// Write spaces as `▁`.
    pub escape: bool,
}

impl Default for Whitespace {
    fn default() -> Self {
        Whitespace {
            remove_extra: true,
            add_dummy_prefix: true,
            escape: true,
        }
    }
}

/// The piece that stands for a space.
pub const SPACE_SYMBOL: char = '\u{2581}';

/// Finds `▁` in text: a SIMD search on its rare bytes (a search for a
/// `char` would stop at every `’` or `—`, which share its first byte).
static SPACE_SYMBOL_FINDER: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
    std::sync::LazyLock::new(|| memchr::memmem::Finder::new("\u{2581}".as_bytes()));

pub struct UnigramModel {
    pieces: Vec<Piece>,
    /// Normal, user-defined and unused pieces, by their bytes, with scores.
    trie: piece_trie::PieceTrie,
    /// Every piece's id, by its text.
    ids: rustc_hash::FxHashMap<String, u32>,
    unk: u32,
    /// `<0x00>`..`<0xFF>`, when unknown characters fall back to bytes.
    byte_pieces: Option<Box<[u32; 256]>>,
    whitespace: Whitespace,
    /// The trie holds `▁` as `' '`, and texts are walked with spaces as
    /// `' '` (see `walk_text`).
    ascii_spaces: bool,
    /// The longest piece, in bytes: how far a walk reaches.
    longest_walk: usize,
    min_score: f32,
}

impl UnigramModel {
    pub fn new(pieces: Vec<Piece>, byte_fallback: bool, whitespace: Whitespace) -> Result<Self> {
        let mut unk = None;
        let mut ids = rustc_hash::FxHashMap::default();
        for (id, piece) in pieces.iter().enumerate() {
            if piece.text.is_empty() {
                return Err(Error::invalid(format!("piece {id} is empty")));
            }
            if let Some(first) = ids.insert(piece.text.clone(), id as u32) {
                return Err(Error::invalid(format!(
                    "pieces {first} and {id} are both {:?}",
                    piece.text
                )));
            }
            if piece.kind == PieceKind::Unknown {
                if unk.is_some() {
                    return Err(Error::invalid("more than one unknown piece"));
                }
                unk = Some(id as u32);
            }
        }
        let unk = unk.ok_or_else(|| Error::invalid("no unknown piece (<unk>)"))?;
        // Spaces walk the trie as ' ' unless some piece holds a real ' '.
        let ascii_spaces = whitespace.escape
            && !pieces
                .iter()
                .any(|p| p.kind != PieceKind::Control && p.text.contains(' '));
        let trie = piece_trie::PieceTrie::new(&pieces, ascii_spaces)?;
        // At least a character: an unknown piece covers one.
        let longest_walk = pieces
            .iter()
            .map(|p| p.text.len())
            .max()
            .unwrap_or(0)
            .max(4);
        // SentencePiece's lowest score starts at FLT_MAX.
        let min_score = pieces
            .iter()
            .filter(|p| p.kind == PieceKind::Normal)
            .map(|p| p.score)
            .fold(f32::MAX, f32::min);
        let byte_pieces = if byte_fallback {
            let mut ids = Box::new([u32::MAX; 256]);
            for (id, piece) in pieces.iter().enumerate() {
                if piece.kind == PieceKind::Byte {
                    let byte = parse_byte_piece(&piece.text).ok_or_else(|| {
                        Error::invalid(format!("byte piece {id} is {:?}, not <0xHH>", piece.text))
                    })?;
                    ids[byte as usize] = id as u32;
                }
            }
            if let Some(b) = ids.iter().position(|&id| id == u32::MAX) {
                return Err(Error::invalid(format!(
                    "byte fallback is on but the byte piece <0x{b:02X}> is missing"
                )));
            }
            Some(ids)
        } else {
            None
        };
        Ok(UnigramModel {
            pieces,
            trie,
            ids,
            unk,
            byte_pieces,
            whitespace,
            ascii_spaces,
            longest_walk,
            min_score,
        })
    }

    pub fn pieces(&self) -> &[Piece] {
        &self.pieces
    }

    /// The id of a piece (of any kind).
    pub fn piece_id(&self, text: &str) -> Option<u32> {
        self.ids.get(text).copied()
    }

    pub fn unk_id(&self) -> u32 {
        self.unk
    }

    pub fn byte_fallback(&self) -> bool {
        self.byte_pieces.is_some()
    }

    pub fn whitespace(&self) -> Whitespace {
        self.whitespace
    }

    /// `text` as the encoder walks it: prepared (see [`prepare_text`]), with
    /// spaces and `▁` as the byte `' '` when the trie holds `▁` as `' '`.
    /// A space is then one byte instead of three: fewer trie steps, and in
    /// the common case the text is copied whole.
    pub(super) fn walk_text(&self, text: &str, out: &mut String) {
        if !self.ascii_spaces {
            prepare_text(text, self.whitespace, out);
        } else if SPACE_SYMBOL_FINDER.find(text.as_bytes()).is_some() {
            // As SentencePiece: `▁` of the input is a space after escaping.
            prepare_text(text, self.whitespace, out);
            *out = out.replace(SPACE_SYMBOL, " ");
        } else {
            let unescaped = Whitespace {
                escape: false,
                ..self.whitespace
            };
            prepare_text(text, unescaped, out);
        }
    }

    /// Appends the byte pieces of an unknown span of a walk text (a space
    /// there is `▁`'s bytes).
    pub(super) fn push_byte_pieces(&self, byte_ids: &[u32; 256], span: &[u8], out: &mut Vec<u32>) {
        for &byte in span {
            if byte == b' ' && self.ascii_spaces {
                let mut buf = [0u8; 4];
                let symbol = SPACE_SYMBOL.encode_utf8(&mut buf).as_bytes();
                out.extend(symbol.iter().map(|&b| byte_ids[b as usize]));
            } else {
                out.push(byte_ids[byte as usize]);
            }
        }
    }

    /// The ids of `text`'s best segmentation.
    pub fn encode(&self, text: &str) -> Vec<u32> {
        let mut out = Vec::with_capacity(text.len() / 4 + 1);
        self.encode_into(text, &mut out);
        out
    }

    /// Appends the ids of `text`'s best segmentation to `out`.
    pub fn encode_into(&self, text: &str, out: &mut Vec<u32>) {
        thread_local! {
            /// The prepared text, reused between calls: a fresh megabyte
            /// buffer per document costs page faults.
            static PREPARED: std::cell::RefCell<String> = const { std::cell::RefCell::new(String::new()) };
        }
        PREPARED.with(|prepared| {
            let prepared = &mut *prepared.borrow_mut();
            self.walk_text(text, prepared);
            self.encode_prepared(prepared, out);
        })
    }

    /// Encodes many texts on all cores.
    pub fn encode_batch(&self, texts: &[&str]) -> Vec<Vec<u32>> {
        batch::encode_batch(texts, |chunk, runs| self.encode_texts(chunk, runs))
            .expect("Unigram encoding does not fail")
    }

    /// Appends the ids of each text to `runs`, on this thread. (It never
    /// fails; the `Result` is the batch interface every model shares.)
    pub fn encode_texts(&self, texts: &[&str], runs: &mut IdRuns) -> Result<()> {
        texts.iter().try_for_each(|text| {
            runs.push(|out| {
                self.encode_into(text, out);
                Ok(())
            })
        })
    }

    /// The text of `ids`, as SentencePiece decodes it: `▁` back to spaces,
    /// the leading `▁` of the text dropped (the dummy prefix), runs of byte
    /// pieces joined as UTF-8 (invalid bytes as U+FFFD), `<unk>` as " ⁇ ",
    /// control pieces as nothing.
    pub fn decode(&self, ids: &[u32]) -> Result<String> {
        let mut text = String::new();
        let mut bytes = Vec::new();
        for &id in ids {
            let piece = self.pieces.get(id as usize).ok_or(Error::UnknownTokenId {
                id,
                vocab_size: self.pieces.len(),
            })?;
            if piece.kind == PieceKind::Byte {
                bytes.push(parse_byte_piece(&piece.text).expect("checked at load"));
                continue;
            }
            text.push_str(&String::from_utf8_lossy(&bytes));
            bytes.clear();
            match piece.kind {
                PieceKind::Control => {}
                PieceKind::Unknown => text.push_str(" \u{2047} "),
                _ => {
                    let mut surface = piece.text.as_str();
                    if text.is_empty() && self.whitespace.add_dummy_prefix {
                        surface = surface.strip_prefix(SPACE_SYMBOL).unwrap_or(surface);
                    }
                    text.push_str(&surface.replace(SPACE_SYMBOL, " "));
                }
            }
        }
        text.push_str(&String::from_utf8_lossy(&bytes));
        Ok(text)
    }
}

/// Writes `text` into `out` as a model sees it, after SentencePiece's
/// (identity) normalizer: leading spaces dropped, the dummy prefix added,
/// each run of spaces kept as one, spaces written as `▁`, and trailing `▁`
/// dropped (a `▁` of the input included, as there).
pub fn prepare_text(text: &str, ws: Whitespace, out: &mut String) {
    let input = if ws.remove_extra {
        text.trim_start_matches(' ')
    } else {
        text
    };
    let space = if ws.escape { "\u{2581}" } else { " " };
    out.clear();
    out.reserve(input.len() + 3);
    if ws.add_dummy_prefix {
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
}

/// Where `bytes` first holds two spaces in a row. Blocks are scanned
/// without an early exit, which vectorizes (a substring search for two
/// spaces, a needle of common bytes, goes byte by byte).
fn find_double_space(bytes: &[u8]) -> Option<usize> {
    const BLOCK: usize = 64;
    let (Some(first), Some(second)) = (bytes.get(..bytes.len().saturating_sub(1)), bytes.get(1..))
    else {
        return None;
    };
    let is_double = |(&x, &y): (&u8, &u8)| (x == b' ') & (y == b' ');
    first
        .chunks(BLOCK)
        .zip(second.chunks(BLOCK))
        .enumerate()
        .find_map(|(block, (a, b))| {
            let found = a
                .iter()
                .zip(b)
                .fold(false, |found, pair| found | is_double(pair));
            found.then(|| block * BLOCK + a.iter().zip(b).position(is_double).expect("found"))
        })
}

/// The words of a prepared text, for training: each starts at a `▁` (the
/// first may not, without a dummy prefix).
pub fn for_each_word(prepared: &str, mut f: impl FnMut(&str)) {
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

/// The byte of a `<0xHH>` piece.
fn parse_byte_piece(text: &str) -> Option<u8> {
    let hex = text.strip_prefix("<0x")?.strip_suffix('>')?;
    (hex.len() == 2)
        .then(|| u8::from_str_radix(hex, 16).ok())
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model(pieces: &[(&str, f32)], byte_fallback: bool) -> UnigramModel {
        let mut all = vec![Piece {
            text: "<unk>".into(),
            score: 0.0,
            kind: PieceKind::Unknown,
        }];
        all.extend(pieces.iter().map(|&(text, score)| Piece {
            text: text.into(),
            score,
            kind: PieceKind::Normal,
        }));
        if byte_fallback {
            all.extend((0..=255u8).map(|b| Piece {
                text: format!("<0x{b:02X}>"),
                score: 0.0,
                kind: PieceKind::Byte,
            }));
        }
        let whitespace = Whitespace {
            remove_extra: true,
            add_dummy_prefix: true,
            escape: true,
        };
        UnigramModel::new(all, byte_fallback, whitespace).unwrap()
    }

    #[test]
    fn whitespace_as_sentencepiece() {
        let m = model(&[("a", -1.0)], false);
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
            // The encoder walks the same text with spaces as ' '.
            let mut walked = String::new();
            m.walk_text(text, &mut walked);
            assert_eq!(walked, expected.replace(SPACE_SYMBOL, " "), "{text:?}");
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
        let m = model(&[("a", -1.0)], false);
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
            for (remove_extra, add_dummy_prefix, escape) in
                (0..8).map(|bits| (bits & 1 != 0, bits & 2 != 0, bits & 4 != 0))
            {
                let ws = Whitespace {
                    remove_extra,
                    add_dummy_prefix,
                    escape,
                };
                let space = if escape { "▁" } else { " " };
                let expected = if remove_extra {
                    let words: Vec<&str> = text.split(' ').filter(|w| !w.is_empty()).collect();
                    let joined = words.join(space);
                    let prefixed = if add_dummy_prefix && !joined.is_empty() {
                        format!("{space}{joined}")
                    } else {
                        joined
                    };
                    prefixed.trim_end_matches(space).to_owned()
                } else {
                    let prefix = if add_dummy_prefix { space } else { "" };
                    format!("{prefix}{}", text.replace(' ', space))
                };
                let mut out = String::new();
                prepare_text(text, ws, &mut out);
                assert_eq!(
                    out, expected,
                    "{text:?} {remove_extra} {add_dummy_prefix} {escape}"
                );
            }
            // The walk text is the prepared text with `▁` as a space.
            let mut prepared = String::new();
            prepare_text(text, Whitespace::default(), &mut prepared);
            let mut walked = String::new();
            m.walk_text(text, &mut walked);
            assert_eq!(walked, prepared.replace(SPACE_SYMBOL, " "), "{text:?}");
        }
    }

    #[test]
    fn best_path_unknown_runs_and_bytes() {
        let m = model(
            &[
                ("▁", -1.0),
                ("a", -2.0),
                ("b", -2.0),
                ("ab", -3.0),
                ("▁ab", -5.0),
            ],
            false,
        );
        // ▁ab (-5) loses to ▁ + ab (-4).
        assert_eq!(m.encode("ab"), [1, 4]);
        // Two unknown characters make one <unk>.
        assert_eq!(m.encode("xyab"), [1, 0, 4]);
        assert_eq!(m.decode(&[1, 0, 4]).unwrap(), " \u{2047} ab");
        let b = model(&[("▁", -1.0), ("a", -2.0)], true);
        let ids = b.encode("aé");
        assert_eq!(ids.len(), 4);
        assert_eq!(b.decode(&ids).unwrap(), "aé");
    }
}
