//! The presets: each model with the steps it was trained with, as a
//! pipeline. `BPETokenizer`, `WordPieceTokenizer` and `UnigramTokenizer` are
//! these pipelines; the models themselves encode pieces, not text.
//!
//! - byte-level BPE: its pattern (`Pattern` pre-tokenizer), its special
//!   tokens, the `ByteLevel` decoder;
//! - WordPiece: BERT's normalizer with the model's settings, BERT's
//!   pre-tokenizer, `[CLS] A [SEP]` when the vocabulary has both tokens, the
//!   special tokens it has, the `WordPiece` decoder;
//! - Unigram: the model's normalization rules, if any, as SentencePiece
//!   applies them (`SentencePieceCharsmap`, the model's user-defined pieces
//!   kept unnormalized), then SentencePiece's whitespace handling, each
//!   step as the model's flags say:
//!   `RemoveExtraWhitespaces`, the dummy prefix as `Prepend(" ")` (always,
//!   even before a `▁`, as SentencePiece does; not `Metaspace`'s prefix,
//!   which a leading `▁` or space would suppress), then `Metaspace` (never
//!   a prefix, not split) writing spaces as `▁` and keeping the text one
//!   piece. No decoder: the model decodes as SentencePiece does.

use serde_json::{json, Value};

use crate::model::Model;
use crate::processors::PostProcessor;
use crate::text::pre_tokenizers::{PreTokenizerSpec, PrependScheme};
use crate::tokenizer::PipelineSpec;
use crate::unigram::{PieceKind, Whitespace};

/// The pipeline of `model`'s preset.
pub fn preset_spec(model: &Model) -> PipelineSpec {
    match model {
        Model::Bpe(m) => PipelineSpec {
            pre_tokenizer: Some(PreTokenizerSpec::Pattern {
                pattern: m.pattern().spec().to_owned(),
            }),
            special_tokens: m
                .special_tokens()
                .iter()
                .map(|(text, id)| (text.to_owned(), id))
                .collect(),
            decoder: Some(json!({
                "type": "ByteLevel",
                "add_prefix_space": true,
                "trim_offsets": true,
                "use_regex": true,
            })),
            ..PipelineSpec::default()
        },
        Model::WordPiece(m) => {
            let settings = m.settings();
            let n = settings.normalizer;
            let special: Vec<(String, u32)> = settings
                .special_tokens
                .iter()
                .filter_map(|t| Some((t.clone(), m.special_id(t)?)))
                .collect();
            let id = |token: &str| {
                special
                    .iter()
                    .find(|(t, _)| t == token)
                    .map(|(t, id)| (t.clone(), *id))
            };
            let post_processor = match (id("[CLS]"), id("[SEP]")) {
                (Some(cls), Some(sep)) => Some(PostProcessor::BertProcessing { sep, cls }),
                _ => None,
            };
            PipelineSpec {
                normalizer: Some(json!({
                    "type": "BertNormalizer",
                    "clean_text": n.clean_text,
                    "handle_chinese_chars": n.handle_chinese_chars,
                    "strip_accents": n.strip_accents,
                    "lowercase": n.lowercase,
                })),
                pre_tokenizer: Some(PreTokenizerSpec::BertPreTokenizer),
                post_processor,
                special_tokens: special,
                decoder: Some(json!({
                    "type": "WordPiece",
                    "prefix": settings.continuing_subword_prefix,
                    "cleanup": true,
                })),
                ..PipelineSpec::default()
            }
        }
        Model::Unigram(m) => {
            let charsmap = m.normalization().map(|n| {
                let kept: Vec<&str> = m
                    .pieces()
                    .iter()
                    .filter(|p| p.kind == PieceKind::UserDefined)
                    .map(|p| p.text.as_str())
                    .collect();
                json!({
                    "type": "SentencePieceCharsmap",
                    "precompiled_charsmap": n.precompiled_charsmap,
                    "kept": kept,
                })
            });
            let (normalizer, pre_tokenizer) = sentencepiece_steps(charsmap, m.whitespace());
            PipelineSpec {
                normalizer,
                pre_tokenizer,
                ..PipelineSpec::default()
            }
        }
    }
}

/// SentencePiece's normalization (`charsmap`, its step) and whitespace
/// handling as a normalizer and a pre-tokenizer (see the module doc).
fn sentencepiece_steps(
    charsmap: Option<Value>,
    ws: Whitespace,
) -> (Option<Value>, Option<PreTokenizerSpec>) {
    let replace = |regex: &str, content: &str| json!({"type": "Replace", "pattern": {"Regex": regex}, "content": content});
    let suffix = ws.add_dummy_prefix && ws.as_suffix;
    let mut steps = Vec::from_iter(charsmap);
    if ws.remove_extra && suffix {
        // SentencePiece trims the end, then puts the suffix after any text
        // that was more than spaces ("▁" alone keeps one): one step does both.
        let trailing = if ws.escape { "[ \u{2581}]" } else { " " };
        // `\A`, not `^`, and no `(?s)`: Oniguruma (Hugging Face's engine,
        // for exported files) reads `^` as a line start and has no `(?s)`.
        steps.push(replace("\\A +", ""));
        steps.push(replace(" {2,}", " "));
        steps.push(replace(&format!("{trailing}*\\z"), " "));
    } else if ws.remove_extra {
        steps.push(json!({"type": "RemoveExtraWhitespaces", "trailing_metaspace": ws.escape}));
    }
    // The dummy prefix is a space, which Metaspace then writes as `▁`.
    if ws.add_dummy_prefix && !ws.as_suffix {
        steps.push(json!({"type": "Prepend", "prepend": " "}));
    }
    if suffix && !ws.remove_extra {
        steps.push(replace("(?<=[\\s\\S])\\z", " "));
    }
    let normalizer = match steps.len() {
        0 => None,
        1 => steps.pop(),
        _ => Some(json!({"type": "Sequence", "normalizers": steps})),
    };
    let pre_tokenizer = ws.escape.then_some(PreTokenizerSpec::Metaspace {
        replacement: '\u{2581}',
        prepend_scheme: PrependScheme::Never,
        split: false,
    });
    (normalizer, pre_tokenizer)
}

/// A model's preset, ready to encode (for the models' tests).
#[cfg(test)]
pub(crate) fn preset(model: Model) -> crate::tokenizer::Tokenizer {
    let spec = preset_spec(&model);
    crate::tokenizer::Tokenizer::new(model, &spec).unwrap()
}
