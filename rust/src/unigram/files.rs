//! Unigram model files: SentencePiece's `.model` and polytok's own JSON.
//!
//! `.model`: a protobuf `ModelProto`. Only the fields that change encoding,
//! decoding or loading are read; prost skips the others (the trainer's
//! settings, `split_digits` and the like, shape the pieces but are not
//! used by SentencePiece once a model is trained). Read:
//! - the pieces with scores and types;
//! - the normalizer: its name and compiled rules (`precompiled_charsmap`,
//!   see `text::precompiled`; checked when read, empty for the identity),
//!   kept with the model and written back, and its whitespace switches;
//! - from the trainer's settings: the model type (Unigram, or BPE: see
//!   `merges.rs`),
//!   `byte_fallback`, `treat_whitespace_as_suffix` and `unk_surface`;
//! - the denormalizer, which SentencePiece applies to decoded text: refused
//!   unless empty.
//!
//! SentencePiece (0.2.3) loads a model whatever its self-test samples
//! (field 4) hold, so they are skipped too. Where it reads a number that is
//! no model or piece type as the default one (protobuf's rule for unknown
//! enum values), or a string that is not UTF-8, polytok refuses the file.
//!
//! The model itself must pass SentencePiece's checks (see the module doc of
//! `unigram`). Written with the same fields (and an identity normalizer
//! when the model has no rules), so that `sentencepiece` loads a polytok
//! model and encodes as polytok does.
//!
//! polytok JSON, version 1:
//! ```json
//! {"format": "polytok", "version": 1, "model": "unigram",
//!  "pieces": [["<unk>", 0.0, "unknown"], ["▁the", -3.52, "normal"], ...],  // id order
//!  "byte_fallback": false,
//!  "whitespace": {"remove_extra": true, "add_dummy_prefix": true},
//!  "normalization": {"name": "nmt_nfkc", "precompiled_charsmap": "<base64>"},
//!  "training": {...} | null}
//! ```
//! A BPE model has `"segmentation": "bpe"` (Unigram's is not written);
//! one read from a Hugging Face tokenizer.json, which merges by rank, also
//! `"ranked_merges": {"merges": [["▁", "t"], ...], "fuse_unknown": true}`
//! (and `"ignore_merges": true` where the file has it)
//! (best first), and has no `.model` form.
//! `normalization` is left out for the identity; the charsmap is the
//! `.model`'s blob in standard base64 (as Hugging Face writes it).
//! Scores are `f32`, written in their shortest exact form. Settings that
//! only a `.model` can carry are written when they are not SentencePiece's
//! defaults: `"escape": false` and `"as_suffix": true` in `whitespace`,
//! and `"unk_surface"`.

use serde::{Deserialize, Serialize};

use super::{
    Piece, PieceKind, RankedSettings, Segmentation, UnigramModel, Whitespace, DEFAULT_UNK_SURFACE,
};
use crate::error::{Error, Result};
use crate::model_file::{check_header, damaged, FORMAT_VERSION};
use crate::text::precompiled::Charsmap;

/// A `.model`'s normalization rules: SentencePiece's name for the rule set
/// (`nmt_nfkc`, ...; empty when the file names none) and the rules.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Normalization {
    pub name: String,
    pub precompiled_charsmap: Charsmap,
}

/// Refuses rules that polytok would apply otherwise than SentencePiece: a
/// replacement with two spaces in a row, which SentencePiece keeps when it
/// removes extra spaces (it trims only the spaces at the start of each
/// replacement), where the pipeline's `RemoveExtraWhitespaces` would merge
/// them.
fn check_normalization(
    normalization: Option<&Normalization>,
    ws: Whitespace,
) -> std::result::Result<(), String> {
    match normalization {
        Some(n) if ws.remove_extra && n.precompiled_charsmap.replaces_with_double_space() => {
            Err(format!(
                "its normalization rules ({}) replace some text with two spaces in a row, which \
             SentencePiece keeps unmerged with remove_extra_whitespaces: not supported",
                n.name
            ))
        }
        _ => Ok(()),
    }
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct UnigramFile {
    format: String,
    version: u32,
    model: String,
    pieces: Vec<(String, f32, PieceKind)>,
    byte_fallback: bool,
    whitespace: WhitespaceEntry,
    #[serde(
        default = "default_unk_surface",
        skip_serializing_if = "is_default_unk_surface"
    )]
    unk_surface: String,
    #[serde(default, skip_serializing_if = "is_unigram")]
    segmentation: Segmentation,
    /// A BPE model that merges by rank, as Hugging Face's (read from a
    /// tokenizer.json): its merges, best first, and whether a run of
    /// unknown characters is one unknown piece.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    ranked_merges: Option<RankedMerges>,
    /// A model that adds scores as Hugging Face's `tokenizers` (read from
    /// a tokenizer.json): its pieces' scores as the file had them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    tokenizers_scores: Option<Vec<f64>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    normalization: Option<Normalization>,
    training: Option<serde_json::Value>,
    /// The tokenizer's pipeline around the model (`polytok.Tokenizer`), if
    /// it is not the model's default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pipeline: Option<serde_json::Value>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct RankedMerges {
    merges: Vec<(String, String)>,
    fuse_unknown: bool,
    #[serde(default, skip_serializing_if = "crate::serde_defaults::is_false")]
    ignore_merges: bool,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct WhitespaceEntry {
    remove_extra: bool,
    add_dummy_prefix: bool,
    #[serde(
        default = "crate::serde_defaults::yes",
        skip_serializing_if = "is_true"
    )]
    escape: bool,
    #[serde(default, skip_serializing_if = "crate::serde_defaults::is_false")]
    as_suffix: bool,
}

fn is_true(value: &bool) -> bool {
    *value
}

fn is_unigram(segmentation: &Segmentation) -> bool {
    *segmentation == Segmentation::Unigram
}

fn default_unk_surface() -> String {
    DEFAULT_UNK_SURFACE.to_owned()
}

fn is_default_unk_surface(surface: &str) -> bool {
    surface == DEFAULT_UNK_SURFACE
}

/// SentencePiece's number of each piece type.
fn proto_kind(kind: PieceKind) -> i32 {
    match kind {
        PieceKind::Normal => 1,
        PieceKind::Unknown => 2,
        PieceKind::Control => 3,
        PieceKind::UserDefined => 4,
        PieceKind::Unused => 5,
        PieceKind::Byte => 6,
    }
}

#[derive(Clone, PartialEq, prost::Message)]
struct ModelProto {
    #[prost(message, repeated, tag = "1")]
    pieces: Vec<SentencePiece>,
    #[prost(message, optional, tag = "2")]
    trainer_spec: Option<TrainerSpec>,
    #[prost(message, optional, tag = "3")]
    normalizer_spec: Option<NormalizerSpec>,
    #[prost(message, optional, tag = "5")]
    denormalizer_spec: Option<NormalizerSpec>,
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
    #[prost(int32, optional, tag = "4")]
    vocab_size: Option<i32>,
    #[prost(bool, optional, tag = "35")]
    byte_fallback: Option<bool>,
    #[prost(bool, optional, tag = "24")]
    treat_whitespace_as_suffix: Option<bool>,
    #[prost(string, optional, tag = "44")]
    unk_surface: Option<String>,
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

impl UnigramModel {
    /// A model from a SentencePiece `.model` file's bytes; errors name
    /// `source`. What SentencePiece refuses is refused, and so are models
    /// that polytok would encode or decode otherwise (see the module doc).
    pub fn from_sentencepiece(data: &[u8], source: &str) -> Result<Self> {
        use prost::Message;
        let proto = ModelProto::decode(data)
            .map_err(|e| damaged(source, format!("not a SentencePiece model: {e}")))?;
        if proto.pieces.is_empty() {
            return Err(damaged(source, "not a SentencePiece model: no pieces"));
        }
        let trainer = proto.trainer_spec.unwrap_or_default();
        let segmentation = match trainer.model_type.unwrap_or(1) {
            1 => Segmentation::Unigram,
            2 => Segmentation::Bpe,
            other => {
                let kind = match other {
                    3 => "a word model".to_owned(),
                    4 => "a character model".to_owned(),
                    _ => format!("model type {other}"),
                };
                return Err(damaged(
                    source,
                    format!("{kind}, which polytok does not support (only Unigram and BPE)"),
                ));
            }
        };
        let mut normalizer = proto.normalizer_spec.unwrap_or_default();
        let normalization = match normalizer.precompiled_charsmap.take() {
            Some(blob) if !blob.is_empty() => Some(Normalization {
                name: normalizer.name.clone().unwrap_or_default(),
                precompiled_charsmap: Charsmap::new(blob).map_err(|e| damaged(source, e))?,
            }),
            _ => None,
        };
        if let Some(denormalizer) = &proto.denormalizer_spec {
            if !denormalizer.precompiled_charsmap().is_empty() {
                return Err(damaged(
                    source,
                    format!(
                        "it denormalizes decoded text ({}), which polytok does not support",
                        denormalizer.name.as_deref().unwrap_or("custom rules")
                    ),
                ));
            }
        }
        let whitespace = Whitespace {
            remove_extra: normalizer.remove_extra_whitespaces.unwrap_or(true),
            add_dummy_prefix: normalizer.add_dummy_prefix.unwrap_or(true),
            escape: normalizer.escape_whitespaces.unwrap_or(true),
            as_suffix: trainer.treat_whitespace_as_suffix.unwrap_or(false),
        };
        check_normalization(normalization.as_ref(), whitespace).map_err(|e| damaged(source, e))?;
        let pieces = proto
            .pieces
            .into_iter()
            .enumerate()
            .map(|(id, p)| {
                let number = p.kind.unwrap_or(1);
                let kind = ALL_KINDS
                    .into_iter()
                    .find(|&k| proto_kind(k) == number)
                    .ok_or_else(|| {
                        damaged(source, format!("piece {id} has the unknown type {number}"))
                    })?;
                Ok(Piece {
                    text: p.piece.unwrap_or_default(),
                    score: p.score.unwrap_or(0.0),
                    kind,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let model = UnigramModel::new(pieces, trainer.byte_fallback.unwrap_or(false), whitespace)
            .and_then(|m| m.with_segmentation(segmentation))
            .map_err(|e| damaged(source, e))?;
        Ok(model
            .with_unk_surface(trainer.unk_surface.unwrap_or_else(default_unk_surface))
            .with_normalization(normalization))
    }

    /// The model with SentencePiece's normalization rules (`None`: the
    /// identity).
    pub fn with_normalization(mut self, normalization: Option<Normalization>) -> Self {
        self.normalization = normalization;
        self
    }

    pub fn normalization(&self) -> Option<&Normalization> {
        self.normalization.as_ref()
    }

    /// The model as a SentencePiece `.model` file; an error for a BPE model
    /// that merges by rank (Hugging Face's), which SentencePiece cannot do.
    pub fn to_sentencepiece(&self) -> Result<Vec<u8>> {
        use prost::Message;
        if self.ranked_merges().is_some() {
            return Err(crate::error::Error::invalid(
                "a BPE model that merges by rank (read from a Hugging Face tokenizer.json) has no \
                 SentencePiece .model form: SentencePiece merges by piece score",
            ));
        }
        let ws = self.whitespace;
        Ok(ModelProto {
            pieces: self
                .pieces
                .iter()
                .map(|p| SentencePiece {
                    piece: Some(p.text.clone()),
                    score: Some(p.score),
                    kind: Some(proto_kind(p.kind)),
                })
                .collect(),
            trainer_spec: Some(TrainerSpec {
                model_type: Some(match self.segmentation() {
                    Segmentation::Unigram => 1,
                    Segmentation::Bpe => 2,
                }),
                vocab_size: Some(self.pieces.len() as i32),
                byte_fallback: Some(self.byte_fallback()),
                treat_whitespace_as_suffix: Some(ws.as_suffix),
                unk_surface: Some(self.unk_surface.clone()),
            }),
            normalizer_spec: Some(NormalizerSpec {
                name: Some(
                    self.normalization
                        .as_ref()
                        .map_or("identity", |n| &n.name)
                        .to_owned(),
                ),
                precompiled_charsmap: Some(
                    self.normalization
                        .as_ref()
                        .map_or(Vec::new(), |n| n.precompiled_charsmap.blob().to_vec()),
                ),
                add_dummy_prefix: Some(ws.add_dummy_prefix),
                remove_extra_whitespaces: Some(ws.remove_extra),
                escape_whitespaces: Some(ws.escape),
            }),
            denormalizer_spec: None,
        }
        .encode_to_vec())
    }

    /// The model as polytok JSON; `training` records how it was made.
    pub fn to_json(
        &self,
        training: Option<&serde_json::Value>,
        pipeline: Option<&serde_json::Value>,
    ) -> String {
        let file = UnigramFile {
            format: "polytok".to_owned(),
            version: FORMAT_VERSION,
            model: "unigram".to_owned(),
            pieces: self
                .pieces
                .iter()
                .map(|p| (p.text.clone(), p.score, p.kind))
                .collect(),
            byte_fallback: self.byte_fallback(),
            whitespace: WhitespaceEntry {
                remove_extra: self.whitespace.remove_extra,
                add_dummy_prefix: self.whitespace.add_dummy_prefix,
                escape: self.whitespace.escape,
                as_suffix: self.whitespace.as_suffix,
            },
            unk_surface: self.unk_surface.clone(),
            segmentation: self.segmentation(),
            ranked_merges: self.ranked_merges().map(|(merges, settings)| RankedMerges {
                merges: merges
                    .iter()
                    .map(|&(l, r)| {
                        let text = |id: u32| self.pieces[id as usize].text.clone();
                        (text(l), text(r))
                    })
                    .collect(),
                fuse_unknown: settings.fuse_unknown,
                ignore_merges: settings.ignore_merges,
            }),
            tokenizers_scores: self.tokenizers_scores().map(<[f64]>::to_vec),
            normalization: self.normalization.clone(),
            training: training.cloned(),
            pipeline: pipeline.cloned(),
        };
        serde_json::to_string(&file).expect("serializable")
    }

    /// A model from polytok JSON, with its training record; errors name
    /// `source`.
    pub fn from_json(
        json: &str,
        source: &str,
    ) -> Result<(Self, Option<serde_json::Value>, Option<serde_json::Value>)> {
        let file: UnigramFile = serde_json::from_str(json)
            .map_err(|e| damaged(source, format!("not a polytok Unigram file: {e}")))?;
        check_header(source, &file.format, file.version, &file.model, "unigram")?;
        let pieces = file
            .pieces
            .into_iter()
            .map(|(text, score, kind)| Piece { text, score, kind })
            .collect();
        let whitespace = Whitespace {
            remove_extra: file.whitespace.remove_extra,
            add_dummy_prefix: file.whitespace.add_dummy_prefix,
            escape: file.whitespace.escape,
            as_suffix: file.whitespace.as_suffix,
        };
        check_normalization(file.normalization.as_ref(), whitespace)
            .map_err(|e| damaged(source, e))?;
        let model = UnigramModel::new(pieces, file.byte_fallback, whitespace)
            .and_then(|m| match file.ranked_merges {
                Some(ranked) if file.segmentation == Segmentation::Bpe => {
                    let ids = ranked
                        .merges
                        .iter()
                        .enumerate()
                        .map(|(rank, (l, r))| {
                            let id = |text: &str| {
                                m.piece_id(text).ok_or_else(|| {
                                    Error::invalid(format!(
                                        "merge {rank} holds {text:?}, which is no piece"
                                    ))
                                })
                            };
                            Ok((id(l)?, id(r)?))
                        })
                        .collect::<Result<Vec<_>>>()?;
                    let settings = RankedSettings {
                        fuse_unknown: ranked.fuse_unknown,
                        ignore_merges: ranked.ignore_merges,
                    };
                    m.with_ranked_merges(ids, settings)
                }
                Some(_) => Err(Error::invalid(
                    "ranked_merges need \"segmentation\": \"bpe\"",
                )),
                None => m.with_segmentation(file.segmentation),
            })
            .and_then(|m| match file.tokenizers_scores {
                Some(scores) => m.with_tokenizers_scores(scores),
                None => Ok(m),
            })
            .map_err(|e| damaged(source, e))?
            .with_unk_surface(file.unk_surface)
            .with_normalization(file.normalization);
        Ok((model, file.training, file.pipeline))
    }
}

const ALL_KINDS: [PieceKind; 6] = [
    PieceKind::Normal,
    PieceKind::Unknown,
    PieceKind::Control,
    PieceKind::UserDefined,
    PieceKind::Unused,
    PieceKind::Byte,
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_and_model_round_trips() {
        let mut pieces = vec![
            Piece {
                text: "<unk>".into(),
                score: 0.0,
                kind: PieceKind::Unknown,
            },
            Piece {
                text: "<s>".into(),
                score: 0.0,
                kind: PieceKind::Control,
            },
        ];
        pieces.extend(
            ["▁a", "b", "▁", "ab"]
                .iter()
                .enumerate()
                .map(|(i, t)| Piece {
                    text: t.to_string(),
                    score: -1.1 - i as f32 / 3.0,
                    kind: PieceKind::Normal,
                }),
        );
        let unusual = Whitespace {
            remove_extra: false,
            add_dummy_prefix: true,
            escape: false,
            as_suffix: true,
        };
        let rules = Normalization {
            name: "nmt_nfkc".into(),
            precompiled_charsmap: Charsmap::new(crate::text::precompiled::tests::small_map())
                .unwrap(),
        };
        for (whitespace, unk_surface, normalization) in [
            (Whitespace::default(), DEFAULT_UNK_SURFACE, None),
            (unusual, "<?>", Some(rules.clone())),
        ] {
            let model = UnigramModel::new(pieces.clone(), false, whitespace)
                .unwrap()
                .with_unk_surface(unk_surface.to_owned())
                .with_normalization(normalization.clone());
            let same = |other: &UnigramModel| {
                assert_eq!(other.pieces().len(), model.pieces().len());
                for (a, b) in other.pieces().iter().zip(model.pieces()) {
                    assert_eq!(
                        (&a.text, a.score.to_bits(), a.kind),
                        (&b.text, b.score.to_bits(), b.kind)
                    );
                }
                assert_eq!(other.whitespace(), whitespace);
                assert_eq!(other.unk_surface(), unk_surface);
                assert_eq!(other.normalization(), normalization.as_ref());
                assert_eq!(other.encode_text(" ab  b"), model.encode_text(" ab  b"));
            };
            let training = serde_json::json!({"vocab_size": 6});
            let json = model.to_json(Some(&training), None);
            // SentencePiece's defaults are left out, as files had them.
            let defaults = whitespace == Whitespace::default();
            for key in ["escape", "as_suffix", "unk_surface", "normalization"] {
                assert_eq!(json.contains(key), !defaults, "{key}");
            }
            let (json_model, record, _) = UnigramModel::from_json(&json, "m.json").unwrap();
            same(&json_model);
            assert_eq!(record, Some(training));
            same(
                &UnigramModel::from_sentencepiece(&model.to_sentencepiece().unwrap(), "m.model")
                    .unwrap(),
            );
        }
        // A damaged charsmap names the file and the problem.
        use prost::Message;
        let model_with_rules = UnigramModel::new(pieces, false, Whitespace::default())
            .unwrap()
            .with_normalization(Some(rules));
        let mut proto =
            ModelProto::decode(&model_with_rules.to_sentencepiece().unwrap()[..]).unwrap();
        let spec = proto.normalizer_spec.as_mut().unwrap();
        spec.precompiled_charsmap.as_mut().unwrap().truncate(10);
        let err = UnigramModel::from_sentencepiece(&proto.encode_to_vec(), "m.model");
        let err = err.err().unwrap().to_string();
        assert!(
            err.starts_with("m.model: the precompiled charsmap's trie size"),
            "{err}"
        );
        let err = UnigramModel::from_json("{\"format\": \"polytok\"}", "m.json");
        assert!(err
            .err()
            .unwrap()
            .to_string()
            .starts_with("m.json: not a polytok Unigram file"));
    }
}
