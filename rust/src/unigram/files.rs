//! SentencePiece `.model` files: a protobuf `ModelProto`. Only the fields
//! encoding needs are read (pieces with scores and types, byte fallback,
//! whitespace handling); prost skips the others.

use super::{Piece, PieceKind, UnigramModel, Whitespace};
use crate::error::{Error, Result};

#[derive(Clone, PartialEq, prost::Message)]
struct ModelProto {
    #[prost(message, repeated, tag = "1")]
    pieces: Vec<SentencePiece>,
    #[prost(message, optional, tag = "2")]
    trainer_spec: Option<TrainerSpec>,
    #[prost(message, optional, tag = "3")]
    normalizer_spec: Option<NormalizerSpec>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct SentencePiece {
    #[prost(string, optional, tag = "1")]
    piece: Option<String>,
    #[prost(float, optional, tag = "2")]
    score: Option<f32>,
    /// NORMAL = 1 (the default), UNKNOWN = 2, CONTROL = 3, USER_DEFINED = 4,
    /// BYTE = 6, UNUSED = 5.
    #[prost(int32, optional, tag = "3")]
    kind: Option<i32>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct TrainerSpec {
    /// UNIGRAM = 1 (the default), BPE = 2, WORD = 3, CHAR = 4.
    #[prost(int32, optional, tag = "3")]
    model_type: Option<i32>,
    #[prost(bool, optional, tag = "35")]
    byte_fallback: Option<bool>,
    #[prost(bool, optional, tag = "24")]
    treat_whitespace_as_suffix: Option<bool>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct NormalizerSpec {
    #[prost(string, optional, tag = "1")]
    name: Option<String>,
    #[prost(bytes = "vec", optional, tag = "2")]
    precompiled_charsmap: Option<Vec<u8>>,
    #[prost(bool, optional, tag = "3")]
    add_dummy_prefix: Option<bool>,
    #[prost(bool, optional, tag = "4")]
    remove_extra_whitespaces: Option<bool>,
    #[prost(bool, optional, tag = "5")]
    escape_whitespaces: Option<bool>,
}

fn damaged(source: &str, what: impl std::fmt::Display) -> Error {
    Error::TokenizerFile(format!("{source}: {what}"))
}

impl UnigramModel {
    /// A model from a SentencePiece `.model` file's bytes; errors name
    /// `source`. Models whose normalization is not the identity are refused:
    /// polytok would encode other text than SentencePiece does.
    pub fn from_sentencepiece(data: &[u8], source: &str) -> Result<Self> {
        use prost::Message;
        let proto = ModelProto::decode(data)
            .map_err(|e| damaged(source, format!("not a SentencePiece model: {e}")))?;
        if proto.pieces.is_empty() {
            return Err(damaged(source, "not a SentencePiece model: no pieces"));
        }
        let trainer = proto.trainer_spec.unwrap_or_default();
        let model_type = trainer.model_type.unwrap_or(1);
        if model_type != 1 {
            return Err(damaged(
                source,
                format!("not a Unigram model (SentencePiece model type {model_type})"),
            ));
        }
        if trainer.treat_whitespace_as_suffix.unwrap_or(false) {
            return Err(damaged(
                source,
                "treat_whitespace_as_suffix is not supported",
            ));
        }
        let normalizer = proto.normalizer_spec.unwrap_or_default();
        let charsmap = normalizer
            .precompiled_charsmap
            .as_deref()
            .unwrap_or_default();
        if !charsmap.is_empty() {
            return Err(damaged(
                source,
                format!(
                    "its normalization ({}) is not the identity; train it with normalization_rule_name=\"identity\"",
                    normalizer.name.as_deref().unwrap_or("a custom one")
                ),
            ));
        }
        let whitespace = Whitespace {
            remove_extra: normalizer.remove_extra_whitespaces.unwrap_or(true),
            add_dummy_prefix: normalizer.add_dummy_prefix.unwrap_or(true),
            escape: normalizer.escape_whitespaces.unwrap_or(true),
        };
        let pieces = proto
            .pieces
            .into_iter()
            .enumerate()
            .map(|(id, p)| {
                let kind = match p.kind.unwrap_or(1) {
                    1 => PieceKind::Normal,
                    2 => PieceKind::Unknown,
                    3 => PieceKind::Control,
                    4 => PieceKind::UserDefined,
                    5 => PieceKind::Unused,
                    6 => PieceKind::Byte,
                    other => {
                        return Err(damaged(
                            source,
                            format!("piece {id} has the unknown type {other}"),
                        ))
                    }
                };
                Ok(Piece {
                    text: p.piece.unwrap_or_default(),
                    score: p.score.unwrap_or(0.0),
                    kind,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        UnigramModel::new(pieces, trainer.byte_fallback.unwrap_or(false), whitespace)
            .map_err(|e| damaged(source, e))
    }
}
