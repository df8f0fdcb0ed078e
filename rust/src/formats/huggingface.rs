//! Hugging Face's `tokenizer.json`, both ways.
//!
//! polytok's components carry Hugging Face's names and fields where a step
//! exists there, so most of a pipeline passes through as it is. What needs
//! translating:
//! - byte-level BPE: polytok's model works on bytes and merges by the rank
//!   of the token a pair makes (tiktoken's rule); Hugging Face's works on
//!   the printable byte alphabet (`ByteLevel` pre-tokenizer) and merges by
//!   the rank of the pair. The two agree when each token that merging can
//!   make has one merge, listed in the order of the tokens' ids, and
//!   `ignore_merges` is on (a piece that is a token is that token, as in
//!   tiktoken). Writing, polytok lists the last merge of each token (what
//!   BPE does on the token's own bytes); reading, it checks that the file's
//!   merges are exactly those, so a file whose merges follow another order
//!   is refused rather than encoded differently. polytok's `Pattern` is
//!   `Split` (its regex, `Isolated`) followed by `ByteLevel` without regex.
//! - added tokens: Hugging Face's are recognized in every call; a
//!   tokenizer read from a file does the same (`always_special`). Special
//!   ones are the pipeline's special tokens, the others its plain added
//!   tokens; their flags (`lstrip`, `rstrip`, `single_word`, `normalized`)
//!   are the pipeline's `added_token_flags` (see `added_tokens`). Those
//!   with ids past the model's vocabulary are the pipeline's alone (the
//!   byte-level BPE model keeps them as its special tokens, which it never
//!   merges).
//! - SentencePiece's `remove_extra_whitespaces` (`RemoveExtraWhitespaces`)
//!   is written as three regex `Replace` steps.
//! - SentencePiece's normalization rules: `Precompiled` is read as polytok's
//!   step of that name, which applies them as Hugging Face does (an empty
//!   charsmap is refused, as `tokenizers` refuses it). A `.model`'s rules
//!   (`SentencePieceCharsmap`) are written as `Precompiled`, as
//!   `transformers`' converters do, though Hugging Face applies them
//!   otherwise than SentencePiece: by grapheme cluster, the shortest rule
//!   where SentencePiece takes the longest (see `text::normalizers`), so the
//!   file may encode some rare texts otherwise than the `.model` did.
//! - Unigram: piece kinds are not in the format: control pieces are written
//!   as special added tokens (as `transformers`' converters do) and read
//!   back as control pieces; `<0xNN>` pieces are bytes with byte fallback.
//!   A model read keeps the file's scores and adds them as `tokenizers`
//!   does (`f64`; SentencePiece adds `f32`), so that near ties of long
//!   texts go its way (`UnigramModel::with_tokenizers_scores`); scores are
//!   written as the `f64` they stand for, as the converters write them.
//!
//! A component or setting polytok does not have is an error naming it and
//! its place in the file (`pre_tokenizer.pretokenizers[1]: ...`), never a
//! tokenizer that encodes differently.

use rustc_hash::FxHashMap;
use serde_json::{json, Map, Value};

use crate::added_tokens::AddedTokenFlags;
use crate::bpe::BpeModel;
use crate::byte_alphabet;
use crate::error::{Error, Result};
use crate::model::Model;
use crate::model_file::damaged;
use crate::processors::PostProcessor;
use crate::text::bert::BertNormalizer;
use crate::text::pattern::Pattern;
use crate::text::pre_tokenizers::{PreTokenizerSpec, PrependScheme};
use crate::tokenizer::PipelineSpec;
use crate::unigram::{
    parse_byte_piece, Piece, PieceKind, RankedSettings, Segmentation, UnigramModel, Whitespace,
};
use crate::wordpiece::{WordPieceModel, WordPieceSettings};

// ------------------------------------------------------------------ writing

/// How an unused id of a byte-level vocabulary is written (`<unused 7>`).
const UNUSED_ID: &str = "<unused";

/// `model` with the pipeline `spec` as a `tokenizer.json` document; an
/// error names what Hugging Face's format cannot express.
pub fn export(model: &Model, spec: &PipelineSpec) -> Result<String> {
    let cannot = |what: String| {
        Error::invalid(format!(
            "cannot be written as a Hugging Face tokenizer.json: {what} (save it as polytok JSON, .polytok, instead)"
        ))
    };
    let normalizer = spec
        .normalizer
        .as_ref()
        .map(|n| export_normalizer(n, "normalizer").map_err(cannot))
        .transpose()?;
    let pre_tokenizer = spec
        .pre_tokenizer
        .as_ref()
        .map(export_pre_tokenizer)
        .transpose()
        .map_err(cannot)?
        .flatten();
    let (pre_tokenizer, model_json, extra_added) = match model {
        Model::Bpe(m) => {
            let byte_level = json!({"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": false});
            let pre_tokenizer = Some(match pre_tokenizer {
                None => byte_level,
                Some(p) => json!({"type": "Sequence", "pretokenizers": [p, byte_level]}),
            });
            let json = export_bpe(m, &spec.special_tokens).map_err(cannot)?;
            (pre_tokenizer, json, Vec::new())
        }
        Model::WordPiece(m) => (pre_tokenizer, export_wordpiece(m), Vec::new()),
        Model::Unigram(m) if m.segmentation() == Segmentation::Bpe => {
            let (json, control) = export_character_bpe(m).map_err(cannot)?;
            (pre_tokenizer, json, control)
        }
        Model::Unigram(m) => {
            let (json, control) = export_unigram(m).map_err(cannot)?;
            (pre_tokenizer, json, control)
        }
    };
    let decoder = match (&spec.decoder, model) {
        // Hugging Face's decoding without a decoder.
        (Some(d), _) if d == &json!({"type": "Join", "separator": " "}) => None,
        (Some(d), _) => Some(export_decoder(d).map_err(cannot)?),
        // The Unigram preset decodes with the model's own rules; the
        // nearest steps of Hugging Face's (its converters' choice).
        (None, Model::Unigram(m)) => Some(unigram_decoder(m)),
        // polytok joins the tokens' bytes, where Hugging Face without a
        // decoder would put spaces between them.
        (None, Model::Bpe(_)) => Some(
            json!({"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true}),
        ),
        (None, Model::WordPiece(_)) => Some(json!({"type": "Fuse"})),
    };
    // Added tokens: the pipeline's special tokens, the template's, and the
    // model's control pieces, by id; then its plain added tokens.
    let mut added: Vec<(String, u32)> = spec.special_tokens.clone();
    let templating = spec.post_processor.as_ref().map(PostProcessor::templating);
    if let Some(Ok(Some(PostProcessor::TemplateProcessing { special_tokens, .. }))) = templating {
        for token in special_tokens.values() {
            if let [id] = token.ids[..] {
                added.push((token.id.clone(), id));
            }
        }
    }
    added.extend(extra_added);
    added.sort_by_key(|(_, id)| *id);
    added.dedup_by_key(|(_, id)| *id);
    let plain = spec.added_tokens.iter().map(|t| (t, false));
    let mut added_tokens: Vec<(u32, Value)> = added
        .iter()
        .map(|t| (t, true))
        .chain(plain)
        .map(|((content, id), special)| {
            let none = AddedTokenFlags::default();
            let flags = spec
                .added_token_flags
                .iter()
                .find(|f| f.token == *content)
                .unwrap_or(&none);
            let json = json!({
                "id": id, "content": content, "single_word": flags.single_word,
                "lstrip": flags.lstrip, "rstrip": flags.rstrip,
                "normalized": flags.normalized, "special": special,
            });
            (*id, json)
        })
        .collect();
    added_tokens.sort_by_key(|(id, _)| *id);
    let added_tokens: Vec<Value> = added_tokens.into_iter().map(|(_, t)| t).collect();
    let document = json!({
        "version": "1.0",
        "truncation": spec.truncation,
        "padding": spec.padding,
        "added_tokens": added_tokens,
        "normalizer": normalizer,
        "pre_tokenizer": pre_tokenizer,
        "post_processor": spec.post_processor,
        "decoder": decoder,
        "model": model_json,
    });
    Ok(serde_json::to_string_pretty(&document).expect("JSON values serialize"))
}

/// A decoder as Hugging Face has it: its WordPiece step always cleans each
/// token apart (polytok's `each_token`, which it does not name); polytok's
/// `Join` has no step there.
fn export_decoder(step: &Value) -> std::result::Result<Value, String> {
    let mut step = step.clone();
    if let Some(steps) = step.get_mut("decoders").and_then(Value::as_array_mut) {
        for s in steps.iter_mut() {
            *s = export_decoder(s)?;
        }
    }
    if let Some(object) = step.as_object_mut() {
        match object.get("type").and_then(Value::as_str) {
            Some("WordPiece") => {
                object.remove("each_token");
            }
            Some("Join") => {
                return Err(
                    "the decoder step Join (Hugging Face joins with spaces only without a decoder)"
                        .to_owned(),
                )
            }
            _ => {}
        }
    }
    Ok(step)
}

/// polytok's normalizer steps that Hugging Face lacks are written as its
/// steps where that is exact, else refused.
fn export_normalizer(step: &Value, place: &str) -> std::result::Result<Value, String> {
    let kind = step["type"].as_str().unwrap_or_default();
    Ok(match kind {
        "Sequence" => {
            let steps = step["normalizers"].as_array().cloned().unwrap_or_default();
            let steps = steps
                .iter()
                .enumerate()
                .map(|(i, s)| export_normalizer(s, &format!("{place}.normalizers[{i}]")))
                .collect::<std::result::Result<Vec<_>, _>>()?;
            json!({"type": "Sequence", "normalizers": steps})
        }
        "RemoveExtraWhitespaces" => {
            // Leading spaces, then trailing ones (with a `▁` among them
            // when asked), then runs inside.
            let trailing = if step["trailing_metaspace"].as_bool() == Some(true) {
                "[ \u{2581}]+\\z"
            } else {
                " +\\z"
            };
            let replace = |regex: &str, content: &str| json!({"type": "Replace", "pattern": {"Regex": regex}, "content": content});
            json!({"type": "Sequence", "normalizers": [
                replace("\\A +", ""), replace(trailing, ""), replace(" {2,}", " "),
            ]})
        }
        "SentencePieceCharsmap" => {
            if step["kept"].as_array().is_some_and(|kept| !kept.is_empty()) {
                return Err(format!(
                    "{place}: SentencePieceCharsmap keeps pieces unnormalized, which Hugging Face's Precompiled cannot"
                ));
            }
            json!({"type": "Precompiled", "precompiled_charsmap": step["precompiled_charsmap"]})
        }
        "HalfWidth" | "FullWidth" | "Whitespace" | "RemoveControl" => {
            return Err(format!(
                "{place}: the normalizer {kind} has no counterpart in Hugging Face's tokenizers"
            ))
        }
        _ => step.clone(),
    })
}

/// The pre-tokenizer in Hugging Face's form; `None` for one that does
/// nothing (the pattern `none`).
fn export_pre_tokenizer(spec: &PreTokenizerSpec) -> std::result::Result<Option<Value>, String> {
    Ok(Some(match spec {
        PreTokenizerSpec::Pattern { pattern } => {
            let pattern = Pattern::parse(pattern).map_err(|e| e.to_string())?;
            let Some(regex) = pattern.regex() else {
                return Ok(None);
            };
            json!({"type": "Split", "pattern": {"Regex": onig_regex(regex)?}, "behavior": "Isolated", "invert": false})
        }
        PreTokenizerSpec::Punctuation => json!({"type": "Punctuation", "behavior": "Isolated"}),
        PreTokenizerSpec::Sequence { pretokenizers } => {
            let steps: Vec<Value> = pretokenizers
                .iter()
                .map(export_pre_tokenizer)
                .collect::<std::result::Result<Vec<_>, _>>()?
                .into_iter()
                .flatten()
                .collect();
            json!({"type": "Sequence", "pretokenizers": steps})
        }
        other => serde_json::to_value(other).expect("specs serialize"),
    }))
}

fn export_bpe(
    model: &BpeModel,
    pipeline_special: &[(String, u32)],
) -> std::result::Result<Value, String> {
    let merges = model.merge_list().ok_or(
        "the BPE model's ranks do not follow its merges (Hugging Face's BPE merges by the rank of the pair, tiktoken's by the rank of the token)",
    )?;
    let vocab = model.vocab();
    let first = model.first_id();
    let name = |rank: u32| byte_alphabet::encode(vocab.bytes(rank));
    let mut tokens: Map<String, Value> = (0..vocab.len() as u32)
        .map(|rank| (name(rank), json!(rank + first)))
        .collect();
    // Hugging Face numbers added tokens that its model lacks from the end
    // of the model's vocabulary on, ignoring the ids in the file: every id
    // that is no rank goes in the vocabulary, a special token as its text,
    // an id no token has (cl100k's 100256) as a token with a space, which
    // no byte-level piece can be.
    let special: Vec<(&str, u32)> = model
        .special_tokens()
        .iter()
        .map(|(text, id)| (text, id + first))
        .chain(
            pipeline_special
                .iter()
                .map(|(text, id)| (text.as_str(), *id)),
        )
        .collect();
    let end = special
        .iter()
        .map(|&(_, id)| id + 1)
        .chain([first + model.vocab_size() as u32])
        .max()
        .unwrap_or(0);
    let ranks = first..first + vocab.len() as u32;
    for id in (0..end).filter(|id| !ranks.contains(id)) {
        let text = match special.iter().find(|&&(_, s)| s == id) {
            Some(&(text, _)) => text.to_owned(),
            None => format!("{UNUSED_ID} {id}>"),
        };
        tokens.insert(text, json!(id));
    }
    let merges: Vec<Value> = merges
        .iter()
        .map(|&(left, right)| json!([name(left), name(right)]))
        .collect();
    Ok(json!({
        "type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": null,
        "end_of_word_suffix": null, "fuse_unk": false, "byte_fallback": false,
        "ignore_merges": true, "vocab": tokens, "merges": merges,
    }))
}

fn export_wordpiece(model: &WordPieceModel) -> Value {
    let settings = model.settings();
    let vocab: Map<String, Value> = (0..model.vocab().len() as u32)
        .map(|id| (model.token(id).expect("in range").to_owned(), json!(id)))
        .collect();
    json!({
        "type": "WordPiece",
        "unk_token": settings.unk_token,
        "continuing_subword_prefix": settings.continuing_subword_prefix,
        "max_input_chars_per_word": settings.max_input_chars_per_word,
        "vocab": vocab,
    })
}

/// The model, and its control pieces (written as added tokens).
fn export_unigram(
    model: &UnigramModel,
) -> std::result::Result<(Value, Vec<(String, u32)>), String> {
    let control = control_pieces(model.pieces(), "Unigram")?;
    let mut vocab = Vec::with_capacity(model.pieces().len());
    for (id, piece) in model.pieces().iter().enumerate() {
        let score = match model.tokenizers_scores() {
            Some(scores) => scores[id],
            None => piece.score as f64,
        };
        vocab.push(json!([piece.text, score]));
    }
    let json = json!({
        "type": "Unigram",
        "unk_id": model.unk_id(),
        "vocab": vocab,
        "byte_fallback": model.byte_fallback(),
    });
    Ok((json, control))
}

/// A SentencePiece BPE model as Hugging Face's character-level BPE, with
/// its control pieces (added tokens). A model read from a tokenizer.json
/// keeps its merges; one read from a `.model` gets them as `transformers`'
/// converter makes them: every split of each normal piece into two normal
/// pieces, by the piece's score (best first), then its id, then the split's
/// text. Hugging Face then takes the better-ranked of two overlapping pairs
/// where SentencePiece takes the leftmost of two equal scores: the two
/// differ only where two pieces of equal score compete for a character.
fn export_character_bpe(
    model: &UnigramModel,
) -> std::result::Result<(Value, Vec<(String, u32)>), String> {
    let pieces = model.pieces();
    let control = control_pieces(pieces, "BPE")?;
    let (merges, settings) = match model.ranked_merges() {
        Some((merges, settings)) => (merges.to_vec(), settings),
        None => (
            merges_by_score(pieces),
            RankedSettings {
                fuse_unknown: true,
                ignore_merges: false,
            },
        ),
    };
    let vocab: Map<String, Value> = pieces
        .iter()
        .enumerate()
        .map(|(id, p)| (p.text.clone(), json!(id)))
        .collect();
    let merges: Vec<Value> = merges
        .iter()
        .map(|&(l, r)| json!([pieces[l as usize].text, pieces[r as usize].text]))
        .collect();
    let json = json!({
        "type": "BPE", "dropout": null,
        "unk_token": model.unk_id().map(|id| pieces[id as usize].text.clone()),
        "continuing_subword_prefix": null, "end_of_word_suffix": null,
        "fuse_unk": settings.fuse_unknown, "byte_fallback": model.byte_fallback(),
        "ignore_merges": settings.ignore_merges,
        "vocab": vocab, "merges": merges,
    });
    Ok((json, control))
}

/// A SentencePiece model's control pieces (written as added tokens); its
/// user-defined and unused pieces, which Hugging Face's `model` (its name)
/// has no kind for, are refused by name.
fn control_pieces(
    pieces: &[Piece],
    model: &str,
) -> std::result::Result<Vec<(String, u32)>, String> {
    let mut control = Vec::new();
    for (id, piece) in pieces.iter().enumerate() {
        let kind = match piece.kind {
            PieceKind::Control => {
                control.push((piece.text.clone(), id as u32));
                continue;
            }
            PieceKind::UserDefined => "user-defined",
            PieceKind::Unused => "unused",
            _ => continue,
        };
        return Err(format!(
            "piece {id} ({:?}) is {kind}: Hugging Face's {model} has no such pieces",
            piece.text
        ));
    }
    Ok(control)
}

/// Merges that rank SentencePiece's pieces by score (see
/// `export_character_bpe`).
fn merges_by_score(pieces: &[Piece]) -> Vec<(u32, u32)> {
    let normal: FxHashMap<&str, u32> = pieces
        .iter()
        .enumerate()
        .filter(|(_, p)| p.kind == PieceKind::Normal)
        .map(|(id, p)| (p.text.as_str(), id as u32))
        .collect();
    let mut ranked = Vec::new();
    for (&text, &id) in &normal {
        for (split, _) in text.char_indices().skip(1) {
            let (left, right) = text.split_at(split);
            if let (Some(&l), Some(&r)) = (normal.get(left), normal.get(right)) {
                ranked.push((pieces[id as usize].score, id, left, right, l, r));
            }
        }
    }
    ranked.sort_by(|a, b| {
        // -0.0 and 0.0 tie, as in Python's sort.
        b.0.partial_cmp(&a.0)
            .unwrap_or(std::cmp::Ordering::Equal)
            .then(a.1.cmp(&b.1))
            .then(a.2.cmp(b.2))
            .then(a.3.cmp(b.3))
    });
    ranked.into_iter().map(|(.., l, r)| (l, r)).collect()
}

/// The kind of a SentencePiece-style vocabulary's token `id`: the unknown
/// token, a `<0xHH>` byte under byte fallback, a special added token
/// (control), or an ordinary piece.
fn piece_kind(
    text: &str,
    id: usize,
    is_unk: bool,
    byte_fallback: bool,
    special: &[(String, u32)],
) -> PieceKind {
    if is_unk {
        PieceKind::Unknown
    } else if byte_fallback && parse_byte_piece(text).is_some() {
        PieceKind::Byte
    } else if special.iter().any(|(t, i)| *i == id as u32 && t == text) {
        PieceKind::Control
    } else {
        PieceKind::Normal
    }
}

/// SentencePiece's decoding in Hugging Face's steps: `▁` back to spaces,
/// byte pieces to bytes, the dummy prefix's space dropped.
fn unigram_decoder(model: &UnigramModel) -> Value {
    let ws = model.whitespace();
    let prefix = ws.add_dummy_prefix && !ws.as_suffix;
    if !model.byte_fallback() {
        let scheme = if prefix { "always" } else { "never" };
        return json!({"type": "Metaspace", "replacement": "\u{2581}", "prepend_scheme": scheme, "split": true});
    }
    let mut steps = vec![
        json!({"type": "Replace", "pattern": {"String": "\u{2581}"}, "content": " "}),
        json!({"type": "ByteFallback"}),
        json!({"type": "Fuse"}),
    ];
    if prefix {
        steps.push(json!({"type": "Strip", "content": " ", "start": 1, "stop": 0}));
    }
    json!({"type": "Sequence", "decoders": steps})
}

// ------------------------------------------------------------------ reading

/// A tokenizer read from a `tokenizer.json` document (its bytes): the model and its
/// pipeline (special tokens recognized in every call, as Hugging Face
/// does).
pub fn import(json: &[u8], source: &str) -> Result<(Model, PipelineSpec)> {
    // The vocabulary and merges (most of the file) are read into their
    // final shape at once; the small parts as JSON values.
    let document: Document = serde_json::from_slice(json).map_err(|e| {
        let what = match e.classify() {
            serde_json::error::Category::Eof => "is truncated",
            serde_json::error::Category::Syntax => "is not valid JSON",
            _ => "is not a Hugging Face tokenizer.json",
        };
        damaged(source, format!("{what} ({e})"))
    })?;
    Reader { source }.read(document)
}

/// A `tokenizer.json` document: the model's vocabulary and merges typed,
/// everything else as JSON.
#[derive(serde::Deserialize)]
struct Document {
    model: ModelDocument,
    #[serde(flatten)]
    parts: Map<String, Value>,
}

#[derive(serde::Deserialize)]
#[serde(expecting = "the model object")]
struct ModelDocument {
    #[serde(default)]
    vocab: Option<VocabDocument>,
    #[serde(default)]
    merges: Option<Vec<Merge>>,
    #[serde(flatten)]
    settings: Map<String, Value>,
}

/// `{token: id}` (BPE, WordPiece) or `[[piece, score]]` (Unigram), in file
/// order.
enum VocabDocument {
    Ids(Vec<(String, u64)>),
    Scored(Vec<(String, f64)>),
}

impl<'de> serde::Deserialize<'de> for VocabDocument {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = VocabDocument;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a vocabulary: {token: id} or [[piece, score], ...]")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> std::result::Result<Self::Value, A::Error> {
                let mut out = Vec::with_capacity(map.size_hint().unwrap_or(0));
                while let Some(entry) = map.next_entry::<String, u64>()? {
                    out.push(entry);
                }
                Ok(VocabDocument::Ids(out))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> std::result::Result<Self::Value, A::Error> {
                let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0));
                while let Some(entry) = seq.next_element::<(String, f64)>()? {
                    out.push(entry);
                }
                Ok(VocabDocument::Scored(out))
            }
        }
        d.deserialize_any(Visitor)
    }
}

/// A BPE merge: `"a b"` (older files) or `["a", "b"]`.
struct Merge(String, String);

impl<'de> serde::Deserialize<'de> for Merge {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = Merge;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a merge: \"left right\" or [left, right]")
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> std::result::Result<Merge, E> {
                let (left, right) = s
                    .split_once(' ')
                    .ok_or_else(|| E::custom(format!("the merge {s:?} is not two tokens")))?;
                Ok(Merge(left.to_owned(), right.to_owned()))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> std::result::Result<Merge, A::Error> {
                let two = |x: Option<String>| {
                    x.ok_or_else(|| serde::de::Error::custom("a merge is two tokens"))
                };
                let left = two(seq.next_element()?)?;
                let right = two(seq.next_element()?)?;
                if seq.next_element::<serde::de::IgnoredAny>()?.is_some() {
                    return Err(serde::de::Error::custom("a merge is two tokens"));
                }
                Ok(Merge(left, right))
            }
        }
        d.deserialize_any(Visitor)
    }
}

struct Reader<'s> {
    source: &'s str,
}

/// Fields of a component: each read with its place in the file named.
struct Fields<'v> {
    object: &'v Map<String, Value>,
    place: String,
}

impl Reader<'_> {
    fn error(&self, place: &str, what: impl std::fmt::Display) -> Error {
        damaged(self.source, format!("{place}: {what}"))
    }

    fn unsupported(&self, place: &str, kind: &str, what: &str) -> Error {
        self.error(
            place,
            format!("the {what} {kind:?} is not supported by polytok"),
        )
    }

    fn fields<'v>(&self, value: &'v Value, place: &str) -> Result<Fields<'v>> {
        match value.as_object() {
            Some(object) => Ok(Fields {
                object,
                place: place.to_owned(),
            }),
            None => Err(self.error(place, format!("expected an object, found {value}"))),
        }
    }

    fn read(&self, document: Document) -> Result<(Model, PipelineSpec)> {
        let Document {
            model: model_json,
            parts: document,
        } = document;
        for key in document.keys() {
            if !matches!(
                key.as_str(),
                "version"
                    | "truncation"
                    | "padding"
                    | "added_tokens"
                    | "normalizer"
                    | "pre_tokenizer"
                    | "post_processor"
                    | "decoder"
                    | "model"
            ) {
                return Err(self.error(key, "unknown field of a tokenizer.json"));
            }
        }
        let normalizer = present(document.get("normalizer"))
            .map(|n| self.normalizer(n, "normalizer"))
            .transpose()?;
        let added = self.added_tokens(document.get("added_tokens"))?;
        let (pre_tokenizer, byte_level) = match present(document.get("pre_tokenizer")) {
            Some(p) => self.pre_tokenizer(p)?,
            None => (None, false),
        };
        let post_processor = present(document.get("post_processor"))
            .map(|p| self.post_processor(p, "post_processor"))
            .transpose()?
            .flatten();
        // Without a decoder Hugging Face joins the tokens with spaces.
        let decoder = match present(document.get("decoder")) {
            Some(d) => self.decoder(d, "decoder")?,
            None => json!({"type": "Join", "separator": " "}),
        };
        let truncation = present(document.get("truncation"))
            .map(|t| serde_json::from_value(t.clone()).map_err(|e| self.error("truncation", e)))
            .transpose()?;
        let padding = present(document.get("padding"))
            .map(|p| serde_json::from_value(p.clone()).map_err(|e| self.error("padding", e)))
            .transpose()?;
        let kind = model_json
            .settings
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let model = match kind {
            "BPE" if !byte_level => self.character_bpe(&model_json, &added.special)?,
            "BPE" => {
                // The model records its pattern (for a preset's steps).
                let pattern = match &pre_tokenizer {
                    Some(PreTokenizerSpec::Pattern { pattern }) => {
                        Pattern::parse(pattern).map_err(|e| self.error("pre_tokenizer", e))?
                    }
                    _ => Pattern::Whole,
                };
                self.bpe(&model_json, &added.all(), pattern)?
            }
            "WordPiece" => self.wordpiece(&model_json, normalizer.as_ref(), &added.special)?,
            "Unigram" => self.unigram(&model_json, &added.special)?,
            "" => return Err(self.error("model", "no \"type\"")),
            other => return Err(self.unsupported("model", other, "model")),
        };
        if byte_level && kind != "BPE" {
            return Err(self.error(
                "pre_tokenizer",
                "ByteLevel is supported with a BPE model only",
            ));
        }
        let spec = PipelineSpec {
            normalizer,
            pre_tokenizer,
            post_processor,
            special_tokens: added.special,
            added_tokens: added.plain,
            truncation,
            padding,
            decoder: Some(decoder),
            always_special: true,
            added_token_flags: added.flags,
        };
        Ok((model, spec))
    }

    /// The added tokens: the special ones, the plain ones, and the flags
    /// of those that have any.
    fn added_tokens(&self, value: Option<&Value>) -> Result<FileAddedTokens> {
        let mut out = FileAddedTokens::default();
        let Some(value) = present(value) else {
            return Ok(out);
        };
        let Some(tokens) = value.as_array() else {
            return Err(self.error("added_tokens", "expected a list"));
        };
        for (i, token) in tokens.iter().enumerate() {
            let f = self.fields(token, &format!("added_tokens[{i}]"))?;
            f.only(
                self,
                &[
                    "id",
                    "content",
                    "single_word",
                    "lstrip",
                    "rstrip",
                    "normalized",
                    "special",
                ],
            )?;
            let content = f.string(self, "content")?;
            let id = f.id(self, "id")?;
            let special = f.flag(self, "special", false)?;
            let flags = AddedTokenFlags {
                token: content.clone(),
                lstrip: f.flag(self, "lstrip", false)?,
                rstrip: f.flag(self, "rstrip", false)?,
                single_word: f.flag(self, "single_word", false)?,
                // Hugging Face's default: special tokens are not.
                normalized: f.flag(self, "normalized", !special)?,
            };
            if flags
                != (AddedTokenFlags {
                    token: content.clone(),
                    ..Default::default()
                })
            {
                out.flags.push(flags);
            }
            if special {
                out.special.push((content, id));
            } else {
                out.plain.push((content, id));
            }
        }
        Ok(out)
    }

    /// A normalizer: Hugging Face's steps that polytok has (the same
    /// names and fields), checked here so that an error names its place.
    fn normalizer(&self, value: &Value, place: &str) -> Result<Value> {
        let f = self.fields(value, place)?;
        let kind = f.string(self, "type")?;
        match kind.as_str() {
            "Sequence" => {
                let steps = f.list(self, "normalizers")?;
                let steps = steps
                    .iter()
                    .enumerate()
                    .map(|(i, s)| self.normalizer(s, &format!("{place}.normalizers[{i}]")))
                    .collect::<Result<Vec<_>>>()?;
                Ok(json!({"type": "Sequence", "normalizers": steps}))
            }
            "NFC" | "NFD" | "NFKC" | "NFKD" | "Lowercase" | "StripAccents" | "Strip"
            | "Replace" | "Prepend" | "BertNormalizer" | "Precompiled" => {
                crate::text::normalizers::Normalizer::from_value(value)
                    .map_err(|e| self.error(place, e))?;
                Ok(value.clone())
            }
            other => Err(self.unsupported(place, other, "normalizer")),
        }
    }

    /// The pre-tokenizer, and whether the text is byte-level (a `ByteLevel`
    /// step, last).
    fn pre_tokenizer(&self, value: &Value) -> Result<(Option<PreTokenizerSpec>, bool)> {
        let place = "pre_tokenizer";
        let f = self.fields(value, place)?;
        let kind = f.string(self, "type")?;
        if kind == "ByteLevel" {
            return Ok((self.byte_level(&f)?, true));
        }
        if kind == "Sequence" {
            let steps = f.list(self, "pretokenizers")?;
            let last = steps.len().checked_sub(1);
            let mut out = Vec::with_capacity(steps.len());
            let mut byte_level = false;
            for (i, step) in steps.iter().enumerate() {
                let here = format!("{place}.pretokenizers[{i}]");
                let g = self.fields(step, &here)?;
                if g.string(self, "type")? == "ByteLevel" {
                    if Some(i) != last {
                        return Err(
                            self.error(&here, "ByteLevel is supported as the last step only")
                        );
                    }
                    byte_level = true;
                    out.extend(self.byte_level(&g)?);
                } else {
                    out.push(self.pre_tokenizer_step(step, &here)?);
                }
            }
            let spec = match out.len() {
                0 => None,
                1 => out.pop(),
                _ => Some(PreTokenizerSpec::Sequence { pretokenizers: out }),
            };
            return Ok((spec, byte_level));
        }
        Ok((Some(self.pre_tokenizer_step(value, place)?), false))
    }

    /// `ByteLevel` as a pre-tokenizer: GPT-2's pattern if it splits (the
    /// bytes themselves are the model's).
    fn byte_level(&self, f: &Fields<'_>) -> Result<Option<PreTokenizerSpec>> {
        f.only(
            self,
            &["type", "add_prefix_space", "trim_offsets", "use_regex"],
        )?;
        if f.flag(self, "add_prefix_space", true)? {
            return Err(self.error(
                &f.place,
                "ByteLevel with add_prefix_space: true is not supported by polytok",
            ));
        }
        Ok(f.flag(self, "use_regex", true)?
            .then(|| PreTokenizerSpec::Pattern {
                pattern: "gpt2".to_owned(),
            }))
    }

    fn pre_tokenizer_step(&self, value: &Value, place: &str) -> Result<PreTokenizerSpec> {
        let f = self.fields(value, place)?;
        let kind = f.string(self, "type")?;
        Ok(match kind.as_str() {
            "Split" => {
                f.only(self, &["type", "pattern", "behavior", "invert"])?;
                let behavior = f.string(self, "behavior")?;
                if behavior != "Isolated" || f.flag(self, "invert", false)? {
                    return Err(self.error(
                        place,
                        format!("Split with behavior {behavior:?} (invert: {}) is not supported by polytok (only Isolated, not inverted)", f.flag(self, "invert", false)?),
                    ));
                }
                let pattern = f.get(self, "pattern")?;
                let pattern = match (pattern.get("Regex"), pattern.get("String")) {
                    (Some(Value::String(r)), None) => match preset_of(r) {
                        Some(name) => name,
                        None => as_pattern_spec(
                            from_onig_regex(r).map_err(|e| self.error(&format!("{place}.pattern"), e))?,
                        ),
                    },
                    (None, Some(Value::String(s))) => as_pattern_spec(regex_syntax::escape(s)),
                    _ => {
                        return Err(self.error(
                            place,
                            format!("pattern must be {{\"Regex\": ...}} or {{\"String\": ...}}, not {pattern}"),
                        ))
                    }
                };
                PreTokenizerSpec::Pattern { pattern }
            }
            "Punctuation" => {
                f.only(self, &["type", "behavior"])?;
                let behavior = f
                    .object
                    .get("behavior")
                    .and_then(Value::as_str)
                    .unwrap_or("Isolated");
                if behavior != "Isolated" {
                    return Err(self.error(
                        place,
                        format!("Punctuation with behavior {behavior:?} is not supported by polytok (only Isolated)"),
                    ));
                }
                PreTokenizerSpec::Punctuation
            }
            "Metaspace" => {
                f.only(
                    self,
                    &[
                        "type",
                        "replacement",
                        "prepend_scheme",
                        "split",
                        "add_prefix_space",
                        "str_rep",
                    ],
                )?;
                let replacement = f.char(self, "replacement", '\u{2581}')?;
                let prepend_scheme = self.prepend_scheme(&f)?;
                let split = f.flag(self, "split", true)?;
                PreTokenizerSpec::Metaspace {
                    replacement,
                    prepend_scheme,
                    split,
                }
            }
            "Sequence" => {
                let steps = f.list(self, "pretokenizers")?;
                PreTokenizerSpec::Sequence {
                    pretokenizers: steps
                        .iter()
                        .enumerate()
                        .map(|(i, s)| {
                            let here = format!("{place}.pretokenizers[{i}]");
                            if s["type"] == "ByteLevel" {
                                return Err(self
                                    .error(&here, "ByteLevel is supported as the last step only"));
                            }
                            self.pre_tokenizer_step(s, &here)
                        })
                        .collect::<Result<_>>()?,
                }
            }
            "BertPreTokenizer" | "Whitespace" | "WhitespaceSplit" | "Digits" => {
                serde_json::from_value(value.clone()).map_err(|e| self.error(place, e))?
            }
            other => return Err(self.unsupported(place, other, "pre-tokenizer")),
        })
    }

    /// Metaspace's `prepend_scheme`, or the older `add_prefix_space`.
    fn prepend_scheme(&self, f: &Fields<'_>) -> Result<PrependScheme> {
        if let Some(scheme) = present(f.object.get("prepend_scheme")) {
            return serde_json::from_value(scheme.clone())
                .map_err(|e| self.error(&format!("{}.prepend_scheme", f.place), e));
        }
        Ok(if f.flag(self, "add_prefix_space", true)? {
            PrependScheme::Always
        } else {
            PrependScheme::Never
        })
    }

    /// The post-processor; `None` for steps that change nothing polytok
    /// gives (`ByteLevel` without trimming offsets).
    fn post_processor(&self, value: &Value, place: &str) -> Result<Option<PostProcessor>> {
        let f = self.fields(value, place)?;
        let kind = f.string(self, "type")?;
        match kind.as_str() {
            "ByteLevel" => {
                f.only(
                    self,
                    &["type", "add_prefix_space", "trim_offsets", "use_regex"],
                )?;
                // Without trim_offsets it changes nothing.
                if !f.flag(self, "trim_offsets", true)? {
                    return Ok(None);
                }
                Ok(Some(PostProcessor::ByteLevel {
                    add_prefix_space: f.flag(self, "add_prefix_space", true)?,
                    trim_offsets: true,
                    use_regex: f.flag(self, "use_regex", true)?,
                }))
            }
            "Sequence" => {
                let steps = f.list(self, "processors")?;
                let mut kept = Vec::new();
                for (i, step) in steps.iter().enumerate() {
                    kept.extend(self.post_processor(step, &format!("{place}.processors[{i}]"))?);
                }
                if kept.len() < 2 {
                    return Ok(kept.pop());
                }
                let sequence = PostProcessor::Sequence { processors: kept };
                sequence.templating().map_err(|e| self.error(place, e))?;
                Ok(Some(sequence))
            }
            "TemplateProcessing" | "BertProcessing" | "RobertaProcessing" => {
                let processor = serde_json::from_value(value.clone());
                Ok(Some(processor.map_err(|e| self.error(place, e))?))
            }
            other => Err(self.unsupported(place, other, "post-processor")),
        }
    }

    fn decoder(&self, value: &Value, place: &str) -> Result<Value> {
        let f = self.fields(value, place)?;
        let kind = f.string(self, "type")?;
        let value = match kind.as_str() {
            "Sequence" => {
                let steps = f.list(self, "decoders")?;
                let steps = steps
                    .iter()
                    .enumerate()
                    .map(|(i, s)| self.decoder(s, &format!("{place}.decoders[{i}]")))
                    .collect::<Result<Vec<_>>>()?;
                json!({"type": "Sequence", "decoders": steps})
            }
            "Metaspace" => {
                let scheme = self.prepend_scheme(&f)?;
                json!({
                    "type": "Metaspace",
                    "replacement": f.char(self, "replacement", '\u{2581}')?.to_string(),
                    "prepend_scheme": scheme,
                    "split": f.flag(self, "split", true)?,
                })
            }
            // Hugging Face's WordPiece step cleans each token apart.
            "WordPiece" => {
                let mut step = value.clone();
                step["each_token"] = Value::Bool(true);
                step
            }
            "ByteLevel" | "ByteFallback" | "Fuse" | "Strip" | "Replace" => value.clone(),
            other => return Err(self.unsupported(place, other, "decoder")),
        };
        crate::decoders::Decoder::from_value(&value).map_err(|e| self.error(place, e))?;
        Ok(value)
    }

    /// Byte-level BPE; added tokens beyond its vocabulary become the
    /// model's special tokens too (the pipeline keeps them all).
    fn bpe(
        &self,
        document: &ModelDocument,
        added: &[(String, u32)],
        pattern: Pattern,
    ) -> Result<Model> {
        let place = "model";
        let f = self.bpe_fields(document)?;
        if f.flag(self, "byte_fallback", false)? {
            return Err(self.error(
                place,
                "byte-level BPE with byte_fallback is not supported by polytok",
            ));
        }
        let mut tokens = self.vocab_in_id_order(document)?;
        let merges = document
            .merges
            .as_deref()
            .ok_or_else(|| self.error(place, "missing field `merges`"))?;
        // The vocabulary's tail of added tokens and unused ids (as polytok
        // writes special tokens, see `export_bpe`) are special tokens
        // beyond the model's own.
        let merged: std::collections::HashSet<&str> = merges
            .iter()
            .flat_map(|m| [m.0.as_str(), m.1.as_str()])
            .collect();
        let is_tail = |id: usize, text: &str| {
            !merged.contains(text)
                && (text.starts_with(UNUSED_ID) && text.contains(' ')
                    || added.iter().any(|(t, i)| *i as usize == id && t == text))
        };
        while tokens.len() > 256 && is_tail(tokens.len() - 1, &tokens[tokens.len() - 1]) {
            tokens.pop();
        }
        let tokens_by_name = tokens;
        let tokens = tokens_by_name
            .iter()
            .enumerate()
            .map(|(id, text)| {
                byte_alphabet::decode(text).ok_or_else(|| {
                    self.error(
                        "model.vocab",
                        format!("token {id} ({text:?}) is not in the byte-level alphabet"),
                    )
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let n = tokens.len();
        // Added tokens beyond the vocabulary are the model's special tokens.
        let beyond: Vec<(String, u32)> = added
            .iter()
            .filter(|(_, id)| *id as usize >= n)
            .cloned()
            .collect();
        let model =
            BpeModel::new(tokens, pattern, beyond, None).map_err(|e| self.error(place, e))?;
        // The file's merges must be the ones polytok's rule makes (see the
        // module doc).
        let expected = model.merge_list().ok_or_else(|| {
            self.error("model.merges", "the vocabulary's ids do not follow its merges: polytok merges by the id of the token a pair makes")
        })?;
        let vocab = model.vocab();
        // The file's own names of the tokens (no decoding per merge).
        let ids: rustc_hash::FxHashMap<&str, u32> = tokens_by_name
            .iter()
            .enumerate()
            .map(|(id, name)| (name.as_str(), id as u32))
            .collect();
        let pair_of = |i: usize, merge: &Merge| -> Result<(u32, u32)> {
            let id = |token: &str| {
                ids.get(token).copied().ok_or_else(|| {
                    self.error(
                        &format!("model.merges[{i}]"),
                        format!("{token:?} is not in the vocabulary"),
                    )
                })
            };
            Ok((id(&merge.0)?, id(&merge.1)?))
        };
        for (i, merge) in merges.iter().enumerate() {
            let pair = pair_of(i, merge)?;
            if expected.get(i) != Some(&pair) {
                let made = [vocab.bytes(pair.0), vocab.bytes(pair.1)].concat();
                return Err(self.error(
                    &format!("model.merges[{i}]"),
                    match vocab.id(&made) {
                        None => "the merge makes no token of the vocabulary".to_owned(),
                        Some(_) => "the merges are not in the order of the ids of the tokens they make (polytok merges by that id), or a token has more than one merge".to_owned(),
                    },
                ));
            }
        }
        if merges.len() != expected.len() {
            let missing = expected[merges.len()..][0];
            let token = [vocab.bytes(missing.0), vocab.bytes(missing.1)].concat();
            return Err(self.error(
                "model.merges",
                format!(
                    "no merge makes the token {:?}, which polytok's rule makes",
                    byte_alphabet::encode(&token)
                ),
            ));
        }
        if !f.flag(self, "ignore_merges", false)? {
            // Without ignore_merges a piece that is a token no merge makes
            // stays in parts; polytok's rule takes the token. They agree
            // unless such a token can be a piece: only added tokens, which
            // are found before pre-tokenization, are safe.
            if let Some(id) = model.unreachable_tokens().find(|&id| {
                !added
                    .iter()
                    .any(|(text, _)| text.as_bytes() == vocab.bytes(id))
            }) {
                return Err(self.error(
                    "model",
                    format!(
                        "ignore_merges is false and no merge makes the token {id} ({:?}), which polytok would give for a piece that is exactly it",
                        byte_alphabet::encode(vocab.bytes(id))
                    ),
                ));
            }
        }
        let model = model.with_merges(expected);
        Ok(Model::Bpe(std::sync::Arc::new(model)))
    }

    fn wordpiece(
        &self,
        document: &ModelDocument,
        normalizer: Option<&Value>,
        special: &[(String, u32)],
    ) -> Result<Model> {
        let place = "model";
        let f = self.model_fields(document);
        f.only(
            self,
            &[
                "type",
                "unk_token",
                "continuing_subword_prefix",
                "max_input_chars_per_word",
                "vocab",
            ],
        )?;
        let tokens = self.vocab_in_id_order(document)?;
        let defaults = WordPieceSettings::default();
        let mut settings = WordPieceSettings {
            unk_token: f.string(self, "unk_token")?,
            continuing_subword_prefix: f
                .object
                .get("continuing_subword_prefix")
                .and_then(Value::as_str)
                .unwrap_or("##")
                .to_owned(),
            max_input_chars_per_word: f
                .object
                .get("max_input_chars_per_word")
                .and_then(Value::as_u64)
                .unwrap_or(100) as usize,
            // The model's record of its normalization: the file's BERT
            // normalizer, if it has one (the pipeline runs the file's).
            normalizer: bert_normalizer(normalizer).unwrap_or(defaults.normalizer),
            special_tokens: Vec::new(),
        };
        // The added tokens of the vocabulary are the model's special tokens.
        settings.special_tokens = special
            .iter()
            .filter(|(text, id)| tokens.get(*id as usize) == Some(text))
            .map(|(text, _)| text.clone())
            .collect();
        let model = WordPieceModel::new(tokens, settings).map_err(|e| self.error(place, e))?;
        Ok(Model::WordPiece(std::sync::Arc::new(model)))
    }

    /// A BPE model's fields, with the settings polytok has not refused.
    fn bpe_fields<'d>(&self, document: &'d ModelDocument) -> Result<Fields<'d>> {
        let place = "model";
        let f = self.model_fields(document);
        f.only(
            self,
            &[
                "type",
                "dropout",
                "unk_token",
                "continuing_subword_prefix",
                "end_of_word_suffix",
                "fuse_unk",
                "byte_fallback",
                "ignore_merges",
                "vocab",
                "merges",
            ],
        )?;
        if present(f.object.get("dropout")).is_some() {
            return Err(self.error(place, "BPE dropout is not supported by polytok"));
        }
        for setting in ["continuing_subword_prefix", "end_of_word_suffix"] {
            if present(f.object.get(setting)).is_some_and(|v| v != "") {
                return Err(self.error(
                    place,
                    format!("BPE with a {setting} is not supported by polytok"),
                ));
            }
        }
        Ok(f)
    }

    /// A BPE model over characters (no ByteLevel step; SentencePiece-style,
    /// as Llama's and Mistral's converted files): a SentencePiece model
    /// that merges by rank as `tokenizers` does (see
    /// `UnigramModel::with_ranked_merges`), with `<0xHH>` byte tokens under
    /// byte fallback, the unknown token, and special added tokens as
    /// control pieces.
    fn character_bpe(&self, document: &ModelDocument, special: &[(String, u32)]) -> Result<Model> {
        let place = "model";
        let f = self.bpe_fields(document)?;
        let byte_fallback = f.flag(self, "byte_fallback", false)?;
        let settings = RankedSettings {
            fuse_unknown: f.flag(self, "fuse_unk", false)?,
            ignore_merges: f.flag(self, "ignore_merges", false)?,
        };
        let unk_token = match present(f.object.get("unk_token")) {
            None => None,
            Some(_) => Some(f.string(self, "unk_token")?),
        };
        let tokens = self.vocab_in_id_order(document)?;
        let pieces: Vec<Piece> = tokens
            .into_iter()
            .enumerate()
            .map(|(id, text)| {
                let is_unk = unk_token.as_deref() == Some(text.as_str());
                let kind = piece_kind(&text, id, is_unk, byte_fallback, special);
                Piece {
                    text,
                    score: 0.0,
                    kind,
                }
            })
            .collect();
        let merges = document
            .merges
            .as_deref()
            .ok_or_else(|| self.error(place, "missing field `merges`"))?;
        let model = UnigramModel::new(pieces, byte_fallback, Whitespace::default())
            .map_err(|e| self.error(place, e))?;
        let ranked = merges
            .iter()
            .enumerate()
            .map(|(rank, Merge(left, right))| {
                let id = |text: &str| {
                    model.piece_id(text).ok_or_else(|| {
                        self.error(
                            "model.merges",
                            format!("merge {rank} holds {text:?}, which is not in the vocabulary"),
                        )
                    })
                };
                Ok((id(left)?, id(right)?))
            })
            .collect::<Result<Vec<_>>>()?;
        let model = model
            .with_ranked_merges(ranked, settings)
            .map_err(|e| self.error("model.merges", e))?;
        Ok(Model::Unigram(std::sync::Arc::new(model)))
    }

    fn unigram(&self, document: &ModelDocument, special: &[(String, u32)]) -> Result<Model> {
        let place = "model";
        let f = self.model_fields(document);
        f.only(self, &["type", "unk_id", "vocab", "byte_fallback"])?;
        let byte_fallback = f.flag(self, "byte_fallback", false)?;
        let unk = match present(f.object.get("unk_id")) {
            None => None,
            Some(_) => Some(f.id(self, "unk_id")?),
        };
        let entries = match &document.vocab {
            Some(VocabDocument::Scored(entries)) => entries,
            Some(VocabDocument::Ids(_)) => {
                return Err(self.error("model.vocab", "expected [[piece, score], ...]"))
            }
            None => return Err(self.error(place, "missing field `vocab`")),
        };
        let mut pieces = Vec::with_capacity(entries.len());
        for (id, (text, score)) in entries.iter().enumerate() {
            let (text, score) = (text.clone(), *score as f32);
            let kind = piece_kind(&text, id, unk == Some(id as u32), byte_fallback, special);
            pieces.push(Piece { text, score, kind });
        }
        // Scores added as tokenizers adds them (see the module doc).
        let scores = entries.iter().map(|(_, score)| *score).collect();
        if let Some(unk) = unk.filter(|&u| u as usize >= pieces.len()) {
            return Err(self.error(
                "model.unk_id",
                format!("{unk} is beyond the {} pieces", pieces.len()),
            ));
        }
        let model = UnigramModel::new(pieces, byte_fallback, Whitespace::default())
            .and_then(|m| m.with_tokenizers_scores(scores))
            .map_err(|e| self.error(place, e))?;
        Ok(Model::Unigram(std::sync::Arc::new(model)))
    }

    /// A `{token: id}` map as the tokens in id order; the ids must be
    /// `0..n`, each once.
    /// A model's `{token: id}` vocabulary as the tokens in id order; the
    /// ids must be `0..n`, each once.
    fn vocab_in_id_order(&self, document: &ModelDocument) -> Result<Vec<String>> {
        let place = "model.vocab";
        let entries = match &document.vocab {
            Some(VocabDocument::Ids(entries)) => entries,
            Some(VocabDocument::Scored(_)) => {
                return Err(self.error(place, "expected an object of token: id"))
            }
            None => return Err(self.error("model", "missing field `vocab`")),
        };
        let n = entries.len();
        let mut tokens: Vec<Option<String>> = vec![None; n];
        for (token, id) in entries {
            let slot = tokens.get_mut(*id as usize).ok_or_else(|| {
                self.error(
                    place,
                    format!("token {token:?} has id {id}: ids must be 0..{n}"),
                )
            })?;
            if let Some(other) = slot.replace(token.clone()) {
                return Err(self.error(
                    place,
                    format!("tokens {other:?} and {token:?} have the same id {id}"),
                ));
            }
        }
        Ok(tokens
            .into_iter()
            .map(|t| t.expect("ids 0..n, each once"))
            .collect())
    }

    /// The model's settings (everything but its vocabulary and merges).
    fn model_fields<'v>(&self, document: &'v ModelDocument) -> Fields<'v> {
        Fields {
            object: &document.settings,
            place: "model".to_owned(),
        }
    }
}

impl Fields<'_> {
    fn get(&self, r: &Reader<'_>, key: &str) -> Result<&Value> {
        present(self.object.get(key))
            .ok_or_else(|| r.error(&self.place, format!("missing field `{key}`")))
    }

    fn string(&self, r: &Reader<'_>, key: &str) -> Result<String> {
        match self.get(r, key)? {
            Value::String(s) => Ok(s.clone()),
            other => Err(r.error(
                &self.place,
                format!("`{key}` must be a string, not {other}"),
            )),
        }
    }

    fn id(&self, r: &Reader<'_>, key: &str) -> Result<u32> {
        let value = self.get(r, key)?;
        value
            .as_u64()
            .and_then(|id| u32::try_from(id).ok())
            .ok_or_else(|| r.error(&self.place, format!("`{key}` must be an id, not {value}")))
    }

    fn flag(&self, r: &Reader<'_>, key: &str, default: bool) -> Result<bool> {
        match present(self.object.get(key)) {
            None => Ok(default),
            Some(Value::Bool(b)) => Ok(*b),
            Some(other) => Err(r.error(
                &self.place,
                format!("`{key}` must be true or false, not {other}"),
            )),
        }
    }

    fn char(&self, r: &Reader<'_>, key: &str, default: char) -> Result<char> {
        match present(self.object.get(key)) {
            None => Ok(default),
            Some(Value::String(s)) if s.chars().count() == 1 => Ok(s.chars().next().expect("one")),
            Some(other) => Err(r.error(
                &self.place,
                format!("`{key}` must be one character, not {other}"),
            )),
        }
    }

    fn list(&self, r: &Reader<'_>, key: &str) -> Result<&Vec<Value>> {
        match self.get(r, key)? {
            Value::Array(items) => Ok(items),
            other => Err(r.error(&self.place, format!("`{key}` must be a list, not {other}"))),
        }
    }

    /// Refuses fields polytok would ignore.
    fn only(&self, r: &Reader<'_>, known: &[&str]) -> Result<()> {
        match self.object.keys().find(|k| !known.contains(&k.as_str())) {
            Some(key) => Err(r.error(
                &self.place,
                format!("unknown field `{key}` (polytok knows {})", known.join(", ")),
            )),
            None => Ok(()),
        }
    }
}

/// A file's added tokens (text, id), special and plain, and their flags.
#[derive(Default)]
struct FileAddedTokens {
    special: Vec<(String, u32)>,
    plain: Vec<(String, u32)>,
    flags: Vec<AddedTokenFlags>,
}

impl FileAddedTokens {
    /// Every added token, special or not.
    fn all(&self) -> Vec<(String, u32)> {
        [&self.special[..], &self.plain[..]].concat()
    }
}

/// `None` for an absent field or `null`.
fn present(value: Option<&Value>) -> Option<&Value> {
    value.filter(|v| !v.is_null())
}

/// The preset (tiktoken's pattern) that a `Split` regex is, as polytok
/// writes it or as tiktoken has it: polytok's hand-written scanners run
/// those.
fn preset_of(regex: &str) -> Option<String> {
    ["gpt2", "cl100k", "o200k"].into_iter().find_map(|name| {
        let preset = Pattern::parse(name).ok()?.regex()?.to_owned();
        let same = regex == preset || onig_regex(&preset).is_ok_and(|r| r == regex);
        same.then(|| name.to_owned())
    })
}

/// A regex as polytok's pattern spec: one that reads as a preset's name
/// (letters only, or `none`) is grouped, so that it stays a regex.
fn as_pattern_spec(regex: String) -> String {
    match Pattern::parse(&regex) {
        Ok(Pattern::Regex(_)) => regex,
        _ => format!("(?:{regex})"),
    }
}

/// A regex in the Oniguruma dialect of Hugging Face's `Split`. One
/// construct reads differently there: `X{n,m}+` is possessive for polytok
/// (as in tiktoken's patterns) but a repetition of `X{n,m}` for Oniguruma,
/// so it is written as an atomic group, `(?>X{n,m})`.
fn onig_regex(regex: &str) -> std::result::Result<String, String> {
    rewrite_counted_plus(regex, &|atom, count| format!("(?>{atom}{count})"))
}

/// The inverse of [`onig_regex`]: Oniguruma's `X{n,m}+` is `(?:X{n,m})+`.
fn from_onig_regex(regex: &str) -> std::result::Result<String, String> {
    rewrite_counted_plus(regex, &|atom, count| format!("(?:{atom}{count})+"))
}

/// Rewrites each `ATOM{n,m}+` of `regex` with `rewrite(ATOM, "{n,m}")`.
fn rewrite_counted_plus(
    regex: &str,
    rewrite: &dyn Fn(&str, &str) -> String,
) -> std::result::Result<String, String> {
    let chars: Vec<char> = regex.chars().collect();
    let mut out = String::with_capacity(regex.len());
    // Where each atom written so far starts in `out`, to wrap the last.
    let mut atom_start = 0;
    let mut i = 0;
    let unclosed = || format!("the regex {regex:?} is not closed");
    while i < chars.len() {
        let start = i;
        match chars[i] {
            '\\' => {
                i += 2;
                // \p{..}, \P{..}, \x{..}: the braces belong to the escape.
                if matches!(chars.get(start + 1), Some('p' | 'P' | 'x'))
                    && chars.get(i) == Some(&'{')
                {
                    i = chars[i..]
                        .iter()
                        .position(|&c| c == '}')
                        .map(|p| i + p + 1)
                        .ok_or_else(unclosed)?;
                }
            }
            '[' => {
                i += 1;
                if chars.get(i) == Some(&'^') {
                    i += 1;
                }
                if chars.get(i) == Some(&']') {
                    i += 1;
                }
                let mut depth = 1;
                while depth > 0 {
                    match chars.get(i) {
                        None => return Err(unclosed()),
                        Some('\\') => i += 1,
                        Some('[') => depth += 1,
                        Some(']') => depth -= 1,
                        _ => {}
                    }
                    i += 1;
                }
            }
            '(' => {
                // A group: find its end, rewriting inside it.
                let mut depth = 0;
                let mut j = i;
                loop {
                    match chars.get(j) {
                        None => return Err(unclosed()),
                        Some('\\') => j += 1,
                        Some('[') => {
                            j += 1;
                            while chars.get(j).is_some_and(|&c| c != ']') {
                                if chars[j] == '\\' {
                                    j += 1;
                                }
                                j += 1;
                            }
                        }
                        Some('(') => depth += 1,
                        Some(')') => {
                            depth -= 1;
                            if depth == 0 {
                                break;
                            }
                        }
                        _ => {}
                    }
                    j += 1;
                }
                let inner: String = chars[i + 1..j].iter().collect();
                atom_start = out.len();
                out.push('(');
                out.push_str(&rewrite_counted_plus(&inner, rewrite)?);
                out.push(')');
                i = j + 1;
                continue;
            }
            '{' => {
                // A count after the last atom, possibly with `+`.
                let end = chars[i..].iter().position(|&c| c == '}').map(|p| i + p + 1);
                let count: Option<String> = end.map(|e| chars[i..e].iter().collect());
                if let (Some(end), Some(count)) = (end, count) {
                    let digits = count[1..count.len() - 1]
                        .chars()
                        .all(|c| c.is_ascii_digit() || c == ',');
                    if digits && chars.get(end) == Some(&'+') {
                        let atom = out.split_off(atom_start);
                        out.push_str(&rewrite(&atom, &count));
                        i = end + 1;
                        continue;
                    }
                }
                i += 1;
            }
            _ => i += 1,
        }
        let piece: String = chars[start..i.min(chars.len())].iter().collect();
        if !matches!(chars[start], '{' | '*' | '+' | '?' | '|') {
            atom_start = out.len();
        }
        out.push_str(&piece);
    }
    Ok(out)
}

/// The settings of a `BertNormalizer` step (alone, or first in a sequence).
fn bert_normalizer(normalizer: Option<&Value>) -> Option<BertNormalizer> {
    let step = normalizer?;
    let step = if step["type"] == "Sequence" {
        step["normalizers"].get(0)?
    } else {
        step
    };
    match crate::text::normalizers::Normalizer::from_value(step).ok()? {
        crate::text::normalizers::Normalizer::BertNormalizer {
            clean_text,
            handle_chinese_chars,
            strip_accents,
            lowercase,
        } => Some(BertNormalizer {
            clean_text,
            handle_chinese_chars,
            strip_accents: strip_accents.unwrap_or(lowercase),
            lowercase,
        }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counted_possessive_repetitions_are_rewritten_for_oniguruma() {
        let cl100k = Pattern::Cl100k.regex().unwrap();
        let onig = onig_regex(cl100k).unwrap();
        assert!(onig.contains(r"(?>\p{N}{1,3})") && !onig.contains("{1,3}+"));
        assert_eq!(preset_of(&onig).as_deref(), Some("cl100k"));
        assert_eq!(preset_of(cl100k).as_deref(), Some("cl100k"));
        // Oniguruma's `X{n,m}+` repeats `X{n,m}`.
        assert_eq!(from_onig_regex(r"[ab]{2}+c").unwrap(), r"(?:[ab]{2})+c");
        assert_eq!(from_onig_regex(r"(x|y){1,3}+").unwrap(), r"(?:(x|y){1,3})+");
        assert_eq!(
            onig_regex(r"\p{L}{1,3}+|a++").unwrap(),
            r"(?>\p{L}{1,3})|a++"
        );
        assert_eq!(onig_regex(r"a{2}").unwrap(), "a{2}");
        assert!(onig_regex("(a").is_err());
    }

    #[test]
    fn presets_survive_a_round_trip() {
        // 256 bytes, "ab", then a special token past two unused ids.
        let mut tokens: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
        tokens.push(b"ab".to_vec());
        let special = vec![("<|end|>".to_owned(), 259)];
        let bpe = BpeModel::new(tokens, Pattern::Cl100k, special, None).unwrap();
        let bpe = Model::Bpe(std::sync::Arc::new(bpe));
        let wordpiece = WordPieceModel::new(
            ["[UNK]", "[CLS]", "[SEP]", "a", "##b"]
                .map(str::to_owned)
                .to_vec(),
            WordPieceSettings::default(),
        )
        .unwrap();
        for model in [bpe, Model::WordPiece(std::sync::Arc::new(wordpiece))] {
            let spec = crate::presets::preset_spec(&model);
            let json = export(&model, &spec).unwrap();
            let (again, read) = import(json.as_bytes(), "t.json").unwrap();
            assert_eq!(read.pre_tokenizer, spec.pre_tokenizer);
            assert_eq!(read.special_tokens, spec.special_tokens);
            assert!(read.always_special);
            assert_eq!(again.vocab_size(), model.vocab_size());
        }
    }

    #[test]
    fn damaged_documents_are_named() {
        let err = |json: &str| import(json.as_bytes(), "x.json").err().unwrap().to_string();
        assert!(err("{").contains("x.json: is truncated"));
        assert!(err("[1]").contains("x.json: is not a Hugging Face tokenizer.json"));
        assert!(err("{]").contains("x.json: is not valid JSON"));
        assert!(err("{}").contains("not a Hugging Face tokenizer.json (missing field `model`"));
        assert!(err(r#"{"model": {"type": "WordLevel"}}"#)
            .contains(r#"model: the model "WordLevel" is not supported"#));
        // Without ByteLevel: BPE over characters, which needs a vocabulary.
        assert!(
            err(r#"{"model": {"type": "BPE"}, "pre_tokenizer": {"type": "Whitespace"}}"#)
                .contains("model: missing field `vocab`")
        );
    }
}
