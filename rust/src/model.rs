//! The model stage: one interface over the three models, which encode
//! pre-tokenized pieces and know nothing of the text around them.
//!
//! An enum rather than a trait object: each arm calls the model's own
//! piece encoder directly, so the models' inner loops keep their inlining.

use std::borrow::Cow;
use std::ops::Range;
use std::sync::Arc;

use crate::batch::IdRuns;
use crate::bpe::BpeModel;
use crate::error::{Error, Result};
use crate::unigram::UnigramModel;
use crate::vocab::AllowedSpecial;
use crate::wordpiece::WordPieceModel;

#[derive(Clone)]
pub enum Model {
    Bpe(Arc<BpeModel>),
    WordPiece(Arc<WordPieceModel>),
    Unigram(Arc<UnigramModel>),
}

impl Model {
    /// Appends the ids of the pieces `pieces` of `text` and, with `ends`,
    /// the end byte in `text` of each token (its start is the previous
    /// token's end, or its piece's start).
    pub fn encode_pieces(
        &self,
        text: &str,
        pieces: &[Range<usize>],
        ids: &mut Vec<u32>,
        mut ends: Option<&mut Vec<u32>>,
    ) {
        match self {
            Model::Bpe(m) => m.encode_pieces(text, pieces, ids, ends),
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

    /// Appends the ids of a text without special tokens through the
    /// model's own text handling (a preset's pipeline, fused: no pieces in
    /// between).
    pub fn encode_whole(&self, text: &str, ids: &mut Vec<u32>) -> Result<()> {
        match self {
            Model::Bpe(m) => m.encode_into(text, &AllowedSpecial::None, ids),
            Model::WordPiece(m) => m.encode_into(text, &AllowedSpecial::None, ids),
            Model::Unigram(m) => {
                m.encode_into(text, ids);
                Ok(())
            }
        }
    }

    /// `encode_whole` of each text, appended to `runs`, on this thread (a
    /// chunk of a batch).
    pub fn encode_texts(&self, texts: &[&str], runs: &mut IdRuns) -> Result<()> {
        match self {
            Model::Bpe(m) => m.encode_texts(texts, &AllowedSpecial::None, runs),
            Model::WordPiece(m) => m.encode_texts(texts, &AllowedSpecial::None, runs),
            Model::Unigram(m) => m.encode_texts(texts, runs),
        }
    }

    /// The number of ids.
    pub fn vocab_size(&self) -> usize {
        match self {
            Model::Bpe(m) => m.vocab_size(),
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
            Model::Bpe(m) => Cow::Borrowed(m.token_bytes(id)?),
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
            Model::Bpe(m) => m.token_id(token),
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
