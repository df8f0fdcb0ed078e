//! The model stage: one interface over the three models, which encode
//! pre-tokenized pieces and know nothing of the text around them.
//!
//! An enum rather than a trait object: each arm calls the model's own
//! piece encoder directly, so the models' inner loops keep their inlining.

use std::borrow::Cow;
use std::cell::RefCell;
use std::ops::Range;
use std::sync::Arc;

use crate::bpe::{BpeModel, EncodeState, PieceBatch};
use crate::error::{Error, Result};
use crate::text::pattern::PreTokenizer as PatternSplitter;
use crate::text::pre_tokenizers::{write_metaspaced, Piece};
use crate::unigram::UnigramModel;
use crate::wordpiece::WordPieceModel;

/// Marks an end (of `Model::encode_pieces`) whose token covers the same
/// text as the token before it: the bytes of one unknown run under byte
/// fallback each cover the run.
pub const SAME_SPAN: u32 = 1 << 31;

#[derive(Clone)]
pub enum Model {
    Bpe(Arc<BpeModel>),
    WordPiece(Arc<WordPieceModel>),
    Unigram(Arc<UnigramModel>),
}

impl Model {
    /// Appends the ids of the pieces `pieces` of `text` and, with `ends`,
    /// the end byte in `text` of each token (its start is the previous
    /// token's end, or its piece's start; with `SAME_SPAN`, the previous
    /// token's span).
    pub fn encode_pieces(
        &self,
        text: &str,
        pieces: &[Range<usize>],
        ids: &mut Vec<u32>,
        mut ends: Option<&mut Vec<u32>>,
    ) {
        match self {
            Model::Bpe(m) => {
                let first = ids.len();
                m.encode_pieces(text, pieces, ids, ends);
                shift(&mut ids[first..], m.first_id());
            }
            Model::WordPiece(m) => m.encode_pieces(text, pieces, ids, ends),
            Model::Unigram(m) => {
                for range in pieces {
                    let at = range.start as u32;
                    m.encode_piece(
                        &text[range.clone()],
                        ids,
                        ends.as_deref_mut().map(|e| (e, at)),
                    );
                }
            }
        }
    }

    /// Runs `f` with this thread's encoder of single pieces (BPE's cache
    /// of merged pieces kept across the calls it makes): the ids-only path,
    /// which streams pieces from the pre-tokenizer without listing them.
    pub(crate) fn with_encoder<R>(&self, f: impl FnOnce(&mut PieceEncoder<'_>) -> R) -> R {
        match self {
            Model::Bpe(m) => m.with_state(|state| f(&mut PieceEncoder::Bpe(m, state))),
            Model::WordPiece(m) => f(&mut PieceEncoder::WordPiece(m)),
            Model::Unigram(m) => f(&mut PieceEncoder::Unigram(m)),
        }
    }

    /// The number of ids.
    pub fn vocab_size(&self) -> usize {
        match self {
            Model::Bpe(m) => m.first_id() as usize + m.vocab_size(),
            Model::WordPiece(m) => m.vocab().len(),
            Model::Unigram(m) => m.pieces().len(),
        }
    }

    /// A token's text as the decoders see it: a BPE token's bytes, a
    /// WordPiece token (`##ing`), a Unigram piece (`▁the`, `<0xE3>`).
    pub fn token(&self, id: u32) -> Result<Cow<'_, [u8]>> {
        let unknown = || Error::UnknownTokenId {
            id,
            vocab_size: self.vocab_size(),
        };
        Ok(match self {
            Model::Bpe(m) => Cow::Borrowed(
                id.checked_sub(m.first_id())
                    .and_then(|rank| m.token_bytes(rank).ok())
                    .ok_or_else(unknown)?,
            ),
            Model::WordPiece(m) => Cow::Borrowed(m.token(id)?.as_bytes()),
            Model::Unigram(m) => Cow::Borrowed(
                m.pieces()
                    .get(id as usize)
                    .ok_or_else(unknown)?
                    .text
                    .as_bytes(),
            ),
        })
    }

    /// The id of a token given by its text (as [`Model::token`] gives it).
    pub fn token_id(&self, token: &[u8]) -> Option<u32> {
        match self {
            Model::Bpe(m) => Some(m.token_id(token)? + m.first_id()),
            Model::WordPiece(m) => m.vocab().id(token),
            Model::Unigram(m) => m.piece_id(std::str::from_utf8(token).ok()?),
        }
    }

    /// `bpe`, `wordpiece` or `unigram`.
    pub fn kind(&self) -> &'static str {
        match self {
            Model::Bpe(_) => "bpe",
            Model::WordPiece(_) => "wordpiece",
            Model::Unigram(_) => "unigram",
        }
    }
}

/// A model encoding one piece at a time (see [`Model::with_encoder`]).
pub(crate) enum PieceEncoder<'m> {
    Bpe(&'m BpeModel, &'m mut EncodeState),
    WordPiece(&'m WordPieceModel),
    Unigram(&'m UnigramModel),
}

impl PieceEncoder<'_> {
    /// Appends the ids of one piece.
    #[inline]
    pub(crate) fn encode(&mut self, piece: &str, out: &mut Vec<u32>) {
        match self {
            PieceEncoder::Bpe(m, state) => {
                let first = out.len();
                m.encode_piece(piece.as_bytes(), out, state);
                shift(&mut out[first..], m.first_id());
            }
            PieceEncoder::WordPiece(m) => {
                m.encode_word(piece, out);
            }
            PieceEncoder::Unigram(m) => m.encode_piece(piece, out, None),
        }
    }

    /// Appends the ids of the pieces `splitter` cuts `text` into. BPE looks
    /// them up in batches (`bpe::PieceBatch`).
    pub(crate) fn encode_split(
        &mut self,
        text: &str,
        splitter: &PatternSplitter,
        out: &mut Vec<u32>,
    ) -> Result<()> {
        match self {
            PieceEncoder::Bpe(m, state) => {
                let first = out.len();
                let mut batch = PieceBatch::new(m, state, text, out);
                let base = text.as_ptr() as usize;
                splitter
                    .for_each_piece(text, |p| batch.push(p.as_ptr() as usize - base, p.len()))?;
                batch.finish();
                shift(&mut out[first..], m.first_id());
                Ok(())
            }
            _ => splitter.for_each_piece(text, |piece| self.encode(piece, out)),
        }
    }

    /// Appends the ids of a piece from a streaming pre-tokenizer.
    #[inline]
    pub(crate) fn encode_piece(&mut self, piece: Piece<'_>, out: &mut Vec<u32>) {
        match piece {
            Piece::Text(text) => self.encode(text, out),
            Piece::Spaced {
                text,
                replacement,
                prefix,
            } => {
                if let PieceEncoder::Unigram(m) = self {
                    if m.encode_spaced(text, replacement, prefix, out) {
                        return;
                    }
                }
                thread_local! {
                    static WRITTEN: RefCell<String> = const { RefCell::new(String::new()) };
                }
                WRITTEN.with(|written| {
                    let written = &mut *written.borrow_mut();
                    write_metaspaced(text, replacement, prefix, written);
                    self.encode(written, out);
                })
            }
        }
    }
}

/// BPE's ranks as the pipeline's ids (see `BpeModel::first_id`).
#[inline(always)]
fn shift(ids: &mut [u32], first_id: u32) {
    if first_id != 0 {
        ids.iter_mut().for_each(|id| *id += first_id);
    }
}
