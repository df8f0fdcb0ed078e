//! Unigram language model (Kudo 2018), SentencePiece's default: a
//! vocabulary of pieces with log-probabilities; a text is segmented into the
//! pieces whose scores sum highest (Viterbi, `encoder.rs`). SentencePiece's
//! BPE models share everything else with it and are this model with
//! another [`Segmentation`] (`merges.rs`).
//!
//! The model encodes pieces: normalized text with spaces written as `▁`
//! (U+2581). The text handling around it is SentencePiece's, after its
//! (here identity) normalization, with each of its switches, which the model
//! keeps as data (`Whitespace`; all on but `as_suffix` by default): extra
//! spaces removed (leading and trailing ones, and all but one of each run
//! inside), a space put in front (the "dummy prefix"), or at the end with
//! `as_suffix`, and spaces written as `▁`, so that pieces carry word
//! boundaries and decoding is lossless. A text that is empty, or only
//! spaces when extra spaces are removed, stays empty: no dummy space. The
//! pipeline runs these as steps (`presets.rs`); the training counter in one
//! pass (`text::sentencepiece`).
//!
//! Decoding follows SentencePiece too: `▁` back to spaces; while the text is
//! still empty, the leading `▁` of a piece is dropped, once (the dummy
//! prefix) when only `add_dummy_prefix` is on, from every such piece when
//! extra spaces are removed (whatever the dummy prefix); runs of byte pieces
//! are UTF-8, one U+FFFD per byte that is not part of a valid character;
//! the unknown piece is its surface (" ⁇ " unless the model says otherwise);
//! control pieces are nothing.
//!
//! What a model must be (SentencePiece's own checks, so that polytok refuses
//! what it refuses): non-empty pieces without NUL characters, distinct,
//! finite scores, at most one unknown piece, and one unless byte fallback
//! is on (unknown characters are then always bytes), at least one piece to
//! encode with (normal, user-defined or unused), byte pieces (`<0xHH>`,
//! upper-case hex) only with byte fallback, and then all 256 of them.
//! polytok also refuses a text that is two pieces of different kinds, which
//! SentencePiece allows (it then decodes the id of one as the other), and,
//! when extra spaces are removed, a user-defined piece with two spaces in a
//! row (SentencePiece keeps such a run whole where the input holds the
//! piece, which this encoder does not model).

mod encoder;
pub mod files;
mod lattice;
mod merges;
pub mod parity;
mod piece_trie;
mod seeds;
mod trainer;

pub use merges::{RankedSettings, Segmentation};
pub use seeds::PieceRules;
pub use trainer::{train, train_bpe, UnigramTrainerSettings};

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

/// How SentencePiece decodes the unknown piece unless the model says
/// otherwise.
pub const DEFAULT_UNK_SURFACE: &str = " \u{2047} ";

/// The id of a model's unknown piece when it has none: with byte fallback,
/// unknown characters become bytes, never this id.
const NO_UNKNOWN_PIECE: u32 = u32::MAX;

#[cfg(test)]
use crate::text::sentencepiece::prepare_text;
pub use crate::text::sentencepiece::{Whitespace, SPACE_SYMBOL};

/// Finds `▁` in text: a SIMD search on its rare bytes (a search for a
/// `char` would stop at every `’` or `—`, which share its first byte).
pub(super) static SPACE_SYMBOL_FINDER: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
    std::sync::LazyLock::new(|| memchr::memmem::Finder::new("\u{2581}".as_bytes()));

pub struct UnigramModel {
    pieces: Vec<Piece>,
    /// Normal, user-defined and unused pieces, by their bytes, with scores.
    trie: piece_trie::PieceTrie,
    /// Every piece's id, by its text.
    ids: rustc_hash::FxHashMap<String, u32>,
    /// The unknown piece, or `NO_UNKNOWN_PIECE` (with byte fallback only).
    unk: u32,
    /// `<0x00>`..`<0xFF>`, when unknown characters fall back to bytes.
    byte_pieces: Option<Box<[u32; 256]>>,
    whitespace: Whitespace,
    /// What the unknown piece decodes to.
    unk_surface: String,
    /// SentencePiece's normalization rules, when not the identity.
    normalization: Option<files::Normalization>,
    /// The trie holds `▁` as `' '`, and texts are walked with spaces as
    /// `' '` (see `walk_text`).
    ascii_spaces: bool,
    /// The longest piece, in bytes: how far a walk reaches.
    longest_walk: usize,
    min_score: f32,
    /// A BPE model's merge tables (see `merges.rs`); `None` for Unigram.
    merges: Option<Box<merges::Merges>>,
    /// Hugging Face's arithmetic, for a model read from a `tokenizer.json`
    /// (see [`UnigramModel::with_tokenizers_scores`]).
    tokenizers_scores: Option<TokenizersScores>,
}

/// The scores a `tokenizer.json` gives its pieces, added as `tokenizers`
/// adds them: in `f64`, never rebased, the unknown piece's below the lowest
/// of all pieces.
pub(crate) struct TokenizersScores {
    /// By piece id, as the file has them.
    by_piece: Box<[f64]>,
    /// By trie unit (see `PieceTrie::per_unit`): what the encoder reads.
    pub(crate) by_unit: Box<[f64]>,
    pub(crate) unknown: f64,
}

impl UnigramModel {
    pub fn new(pieces: Vec<Piece>, byte_fallback: bool, whitespace: Whitespace) -> Result<Self> {
        let mut unk = None;
        let mut ids = rustc_hash::FxHashMap::default();
        for (id, piece) in pieces.iter().enumerate() {
            if piece.text.is_empty() {
                return Err(Error::invalid(format!("piece {id} is empty")));
            }
            if piece.text.contains('\0') {
                return Err(Error::invalid(format!(
                    "piece {id} ({:?}) holds a NUL character",
                    piece.text
                )));
            }
            if let Some(first) = ids.insert(piece.text.clone(), id as u32) {
                return Err(Error::invalid(format!(
                    "pieces {first} and {id} are both {:?}",
                    piece.text
                )));
            }
            match piece.kind {
                PieceKind::Unknown if unk.is_some() => {
                    return Err(Error::invalid("more than one unknown piece"));
                }
                PieceKind::Unknown => unk = Some(id as u32),
                PieceKind::Byte if !byte_fallback => {
                    return Err(Error::invalid(format!(
                        "piece {id} ({:?}) is a byte piece, but byte fallback is off",
                        piece.text
                    )));
                }
                PieceKind::Byte if parse_byte_piece(&piece.text).is_none() => {
                    return Err(Error::invalid(format!(
                        "byte piece {id} is {:?}, not <0xHH> (upper-case hex)",
                        piece.text
                    )));
                }
                PieceKind::UserDefined if whitespace.remove_extra && piece.text.contains("  ") => {
                    return Err(Error::invalid(format!(
                        "user-defined piece {id} ({:?}) holds two spaces in a row, which \
                         SentencePiece keeps unmerged with remove_extra_whitespaces: not supported",
                        piece.text
                    )));
                }
                _ => {}
            }
        }
        let unk = match unk {
            Some(unk) => unk,
            None if byte_fallback => NO_UNKNOWN_PIECE,
            None => return Err(Error::invalid("no unknown piece (<unk>)")),
        };
        if !pieces.iter().any(|p| {
            matches!(
                p.kind,
                PieceKind::Normal | PieceKind::UserDefined | PieceKind::Unused
            )
        }) {
            return Err(Error::invalid(
                "no piece to encode with (only unknown, control and byte pieces)",
            ));
        }
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
                    let byte = parse_byte_piece(&piece.text).expect("checked above");
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
            unk_surface: DEFAULT_UNK_SURFACE.to_owned(),
            normalization: None,
            ascii_spaces,
            longest_walk,
            min_score,
            merges: None,
            tokenizers_scores: None,
        })
    }

    /// The model adding piece scores as Hugging Face's `tokenizers` does
    /// (a model read from a `tokenizer.json`): `scores`, one per piece as
    /// the file has them, summed in `f64` and never rebased, the unknown
    /// piece at the lowest of all scores minus 10. SentencePiece sums `f32`
    /// scores in `f32` and rebases past ±100,000 (the default here): on
    /// near ties of long texts the two pick different paths, and with these
    /// scores polytok picks `tokenizers`' (n-best and sampling keep
    /// SentencePiece's arithmetic).
    pub fn with_tokenizers_scores(mut self, scores: Vec<f64>) -> Result<Self> {
        if scores.len() != self.pieces.len() {
            return Err(Error::invalid(format!(
                "{} scores for {} pieces",
                scores.len(),
                self.pieces.len()
            )));
        }
        if let Some(i) = scores.iter().position(|s| !s.is_finite()) {
            return Err(Error::invalid(format!(
                "piece {i} has the score {}, not a finite number",
                scores[i]
            )));
        }
        let lowest = scores.iter().copied().fold(f64::INFINITY, f64::min);
        self.tokenizers_scores = Some(TokenizersScores {
            by_unit: self
                .trie
                .per_unit(|id| scores[id as usize], f64::NEG_INFINITY)
                .into(),
            unknown: lowest - encoder::UNK_PENALTY as f64,
            by_piece: scores.into(),
        });
        Ok(self)
    }

    /// The scores of a model that adds them as `tokenizers` does (see
    /// [`UnigramModel::with_tokenizers_scores`]), by piece id.
    pub fn tokenizers_scores(&self) -> Option<&[f64]> {
        self.tokenizers_scores.as_ref().map(|s| &s.by_piece[..])
    }

    /// The model segmenting text as `segmentation` says (Unigram unless
    /// told otherwise).
    pub fn with_segmentation(mut self, segmentation: Segmentation) -> Result<Self> {
        self.merges = match segmentation {
            Segmentation::Unigram => None,
            Segmentation::Bpe => Some(Box::new(merges::Merges::by_scores(
                &self.pieces,
                self.whitespace.as_suffix,
            )?)),
        };
        Ok(self)
    }

    /// The model as a BPE model that merges as Hugging Face's does: the
    /// pairs of `ranked` (piece ids, best first) into the piece they spell,
    /// characters that are no piece unknown from the start, and `settings`'
    /// switches (`fuse_unk`, `ignore_merges`).
    pub fn with_ranked_merges(
        mut self,
        ranked: Vec<(u32, u32)>,
        settings: RankedSettings,
    ) -> Result<Self> {
        self.merges = Some(Box::new(merges::Merges::by_ranks(
            &self.pieces,
            ranked,
            settings,
        )?));
        Ok(self)
    }

    /// A BPE model's merges by rank and its switches, if it merges as
    /// Hugging Face's does (see [`UnigramModel::with_ranked_merges`]).
    pub fn ranked_merges(&self) -> Option<(&[(u32, u32)], RankedSettings)> {
        let merges = self.merges.as_ref()?;
        Some((merges.ranked()?, merges.settings()))
    }

    pub fn segmentation(&self) -> Segmentation {
        match self.merges {
            None => Segmentation::Unigram,
            Some(_) => Segmentation::Bpe,
        }
    }

    /// The model with the unknown piece decoding to `surface`
    /// (SentencePiece's `unk_surface`).
    pub fn with_unk_surface(mut self, surface: String) -> Self {
        self.unk_surface = surface;
        self
    }

    pub fn unk_surface(&self) -> &str {
        &self.unk_surface
    }

    pub fn pieces(&self) -> &[Piece] {
        &self.pieces
    }

    /// The id of a piece (of any kind).
    pub fn piece_id(&self, text: &str) -> Option<u32> {
        self.ids.get(text).copied()
    }

    pub fn unk_id(&self) -> Option<u32> {
        (self.unk != NO_UNKNOWN_PIECE).then_some(self.unk)
    }

    pub fn byte_fallback(&self) -> bool {
        self.byte_pieces.is_some()
    }

    pub fn whitespace(&self) -> Whitespace {
        self.whitespace
    }

    /// The ids of `text` through SentencePiece's whitespace rules as the
    /// model's flags say (what the preset's pipeline gives; for tests).
    #[cfg(test)]
    pub(crate) fn encode_text(&self, text: &str) -> Vec<u32> {
        let mut prepared = String::new();
        prepare_text(text, self.whitespace, &mut prepared);
        let mut ids = Vec::new();
        self.encode_piece(&prepared, &mut ids, None);
        ids
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

    /// The text of `ids`, as SentencePiece decodes it (see the module doc).
    pub fn decode(&self, ids: &[u32]) -> Result<String> {
        let ws = self.whitespace;
        let strips_leading_space = ws.add_dummy_prefix || ws.remove_extra;
        let mut text = String::new();
        let mut bytes = Vec::new();
        // Whether the text has been empty before every piece so far, and
        // whether the last piece had its leading `▁` dropped as the dummy
        // prefix (then no later one is).
        let mut at_start = true;
        let mut dropped_prefix = false;
        for &id in ids {
            let piece = self.pieces.get(id as usize).ok_or(Error::UnknownTokenId {
                id,
                vocab_size: self.pieces.len(),
            })?;
            if piece.kind == PieceKind::Byte {
                bytes.push(parse_byte_piece(&piece.text).expect("checked at load"));
                continue;
            }
            push_utf8_lossy(&mut text, &bytes);
            bytes.clear();
            at_start &= text.is_empty() && !dropped_prefix;
            dropped_prefix = false;
            match piece.kind {
                PieceKind::Control => {}
                PieceKind::Unknown => text.push_str(&self.unk_surface),
                _ => {
                    let mut surface = piece.text.as_str();
                    if at_start && strips_leading_space {
                        if let Some(rest) = surface.strip_prefix(SPACE_SYMBOL) {
                            surface = rest;
                            dropped_prefix = !ws.remove_extra;
                        }
                    }
                    text.push_str(&surface.replace(SPACE_SYMBOL, " "));
                }
            }
        }
        push_utf8_lossy(&mut text, &bytes);
        Ok(text)
    }
}

/// Appends `bytes` as UTF-8, each byte that is not part of a valid
/// character as U+FFFD (as SentencePiece; `String::from_utf8_lossy` would
/// put one U+FFFD for an incomplete sequence of several bytes).
pub(crate) fn push_utf8_lossy(text: &mut String, mut bytes: &[u8]) {
    loop {
        match std::str::from_utf8(bytes) {
            Ok(valid) => return text.push_str(valid),
            Err(e) => {
                let (valid, rest) = bytes.split_at(e.valid_up_to());
                text.push_str(std::str::from_utf8(valid).expect("valid up to here"));
                let invalid = e.error_len().unwrap_or(rest.len());
                text.extend(std::iter::repeat_n('\u{FFFD}', invalid));
                bytes = &rest[invalid..];
            }
        }
    }
}

/// The byte of a `<0xHH>` piece (upper-case hex digits, as SentencePiece
/// writes and requires them).
pub(crate) fn parse_byte_piece(text: &str) -> Option<u8> {
    let hex = text.strip_prefix("<0x")?.strip_suffix('>')?;
    let upper_hex = |b| matches!(b, b'0'..=b'9' | b'A'..=b'F');
    (hex.len() == 2 && hex.bytes().all(upper_hex))
        .then(|| u8::from_str_radix(hex, 16).expect("two hex digits"))
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
        UnigramModel::new(all, byte_fallback, Whitespace::default()).unwrap()
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
        assert_eq!(m.encode_text("ab"), [1, 4]);
        // Two unknown characters make one <unk>.
        assert_eq!(m.encode_text("xyab"), [1, 0, 4]);
        assert_eq!(m.decode(&[1, 0, 4]).unwrap(), " \u{2047} ab");
        let b = model(&[("▁", -1.0), ("a", -2.0)], true);
        let ids = b.encode_text("aé");
        assert_eq!(ids.len(), 4);
        assert_eq!(b.decode(&ids).unwrap(), "aé");
    }

    /// The leading `▁` SentencePiece drops in decoding, by setting: once
    /// with only the dummy prefix, from each piece while the text is empty
    /// with extra spaces removed, never with neither.
    #[test]
    fn decoding_leading_spaces() {
        let pieces = [("▁", -1.0), ("▁a", -2.0), ("a", -2.0)];
        let mut all = vec![Piece {
            text: "<unk>".into(),
            score: 0.0,
            kind: PieceKind::Unknown,
        }];
        all.push(Piece {
            text: "<s>".into(),
            score: 0.0,
            kind: PieceKind::Control,
        });
        all.extend(pieces.iter().map(|&(text, score)| Piece {
            text: text.into(),
            score,
            kind: PieceKind::Normal,
        }));
        // <s> ▁ ▁ ▁a a
        let ids = [1, 2, 2, 3, 4];
        for (remove_extra, add_dummy_prefix, expected) in [
            (true, true, "aa"),
            (true, false, "aa"),
            (false, true, "  aa"),
            (false, false, "   aa"),
        ] {
            let ws = Whitespace {
                remove_extra,
                add_dummy_prefix,
                ..Whitespace::default()
            };
            let m = UnigramModel::new(all.clone(), false, ws).unwrap();
            assert_eq!(m.decode(&ids).unwrap(), expected, "{ws:?}");
            // The unknown piece's surface makes the text non-empty.
            let m = m.with_unk_surface("?".into());
            assert_eq!(m.decode(&[0, 3]).unwrap(), "? a");
        }
    }

    #[test]
    fn byte_runs_decode_one_replacement_per_bad_byte() {
        let b = model(&[("▁", -1.0)], true);
        let byte = |x: u8| b.piece_id(&format!("<0x{x:02X}>")).unwrap();
        // An incomplete `▁` (E2 96), then 'A': two U+FFFD, as SentencePiece.
        let ids = [byte(0xE2), byte(0x96), byte(b'A'), byte(0xC3), byte(0xA9)];
        assert_eq!(b.decode(&ids).unwrap(), "\u{FFFD}\u{FFFD}Aé");
        assert_eq!(
            b.decode(&[byte(0xF0), byte(0x9F)]).unwrap(),
            "\u{FFFD}\u{FFFD}"
        );
    }

    /// Models SentencePiece refuses (and one it reads otherwise).
    #[test]
    fn inconsistent_models_refused() {
        let piece = |text: &str, kind| Piece {
            text: text.into(),
            score: -1.0,
            kind,
        };
        let unk = piece("<unk>", PieceKind::Unknown);
        let a = piece("a", PieceKind::Normal);
        let cases = [
            (
                vec![unk.clone(), piece("<0x41>", PieceKind::Byte), a.clone()],
                "byte fallback is off",
            ),
            (vec![unk.clone(), piece("a\0", PieceKind::Normal)], "NUL"),
            (
                vec![unk.clone(), piece("<s>", PieceKind::Control)],
                "no piece to encode with",
            ),
            (
                vec![unk.clone(), a.clone(), piece("a", PieceKind::Control)],
                "both \"a\"",
            ),
            (
                vec![unk.clone(), piece("x  y", PieceKind::UserDefined)],
                "two spaces in a row",
            ),
            (vec![a.clone()], "no unknown piece"),
        ];
        for (pieces, message) in cases {
            let err = UnigramModel::new(pieces, false, Whitespace::default()).err();
            let err = err.expect(message).to_string();
            assert!(err.contains(message), "{err}");
        }
        // Byte pieces are <0xHH> with upper-case hex.
        let mut bytes: Vec<Piece> = (0..=255u8)
            .map(|b| piece(&format!("<0x{b:02X}>"), PieceKind::Byte))
            .collect();
        bytes.extend([unk, a]);
        assert!(UnigramModel::new(bytes.clone(), true, Whitespace::default()).is_ok());
        // With byte fallback, SentencePiece also loads a model without an
        // unknown piece: unknown characters are bytes.
        let no_unk = bytes[..256].iter().chain(&bytes[257..]).cloned().collect();
        let m = UnigramModel::new(no_unk, true, Whitespace::default()).unwrap();
        assert_eq!(m.unk_id(), None);
        let ids = m.encode_text("é");
        assert_eq!(ids.len(), 5); // `▁` and `é`, as bytes
        assert!(ids
            .iter()
            .all(|&id| m.pieces()[id as usize].kind == PieceKind::Byte));
        for bad in ["<0x4a>", "<0x+A>", "<0x4A >", "<0x004A>"] {
            bytes[0x4A].text = bad.into();
            let err = UnigramModel::new(bytes.clone(), true, Whitespace::default()).err();
            assert!(err.expect(bad).to_string().contains("not <0xHH>"), "{bad}");
        }
    }
}
