//! Mistral's Tekken files (`tekken_*.json`, read by `mistral-common`): a
//! tiktoken-style rank table in JSON with its pattern and special tokens.
//!
//! The ids: the first `default_num_special_tokens` ids (1,000) are special
//! tokens, the named ones of the file (or, in files without a
//! `special_tokens` list, the twenty of Mistral's v3 tokenizers) then
//! `<SPECIAL_n>` fillers; ordinary tokens follow, rank r being id
//! r + 1,000, and only the first `default_vocab_size` ids are used (the
//! table may hold more ranks). Special tokens are never found in text
//! unless the caller allows them, as in `mistral-common`, which encodes text
//! with none.

use serde::Deserialize;

use crate::bpe::BpeModel;
use crate::error::Result;
use crate::model::Model;
use crate::model_file::damaged;
use crate::text::pattern::Pattern;
use crate::text::pre_tokenizers::PreTokenizerSpec;
use crate::tokenizer::PipelineSpec;

/// The special tokens of Tekken files that list none (Mistral's v3
/// tokenizers), ids 0 to 19.
const V3_SPECIAL_TOKENS: [&str; 20] = [
    "<unk>",
    "<s>",
    "</s>",
    "[INST]",
    "[/INST]",
    "[AVAILABLE_TOOLS]",
    "[/AVAILABLE_TOOLS]",
    "[TOOL_RESULTS]",
    "[/TOOL_RESULTS]",
    "[TOOL_CALLS]",
    "[IMG]",
    "<pad>",
    "[IMG_BREAK]",
    "[IMG_END]",
    "[PREFIX]",
    "[MIDDLE]",
    "[SUFFIX]",
    "[SYSTEM_PROMPT]",
    "[/SYSTEM_PROMPT]",
    "[TOOL_CONTENT]",
];

#[derive(Deserialize)]
struct TekkenFile {
    config: Config,
    vocab: Vec<Entry>,
    #[serde(default)]
    special_tokens: Option<Vec<SpecialEntry>>,
}

#[derive(Deserialize)]
struct Config {
    pattern: String,
    default_vocab_size: usize,
    default_num_special_tokens: usize,
}

#[derive(Deserialize)]
struct Entry {
    rank: usize,
    token_bytes: String,
}

#[derive(Deserialize)]
struct SpecialEntry {
    rank: usize,
    token_str: String,
}

/// The model and pipeline of a Tekken file's text; errors name `source`.
pub fn import(text: &str, source: &str) -> Result<(Model, PipelineSpec)> {
    use base64::Engine as _;
    let file: TekkenFile = serde_json::from_str(text).map_err(|e| {
        let what = if e.is_eof() {
            "is truncated"
        } else {
            "is not a Tekken file"
        };
        damaged(source, format!("{what} ({e})"))
    })?;
    let config = &file.config;
    let specials = config.default_num_special_tokens;
    let ordinary = config
        .default_vocab_size
        .checked_sub(specials)
        .filter(|&n| n <= file.vocab.len())
        .ok_or_else(|| {
            damaged(
                source,
                format!(
                    "config: default_vocab_size {} must be default_num_special_tokens {specials} plus at most the {} ranks of the vocabulary",
                    config.default_vocab_size,
                    file.vocab.len()
                ),
            )
        })?;
    // Every rank once, in order (mistral-common asserts the same).
    let mut tokens = Vec::with_capacity(ordinary);
    for (i, entry) in file.vocab.iter().take(ordinary).enumerate() {
        if entry.rank != i {
            let seen = file.vocab[..i].iter().any(|e| e.rank == entry.rank);
            let what = if seen {
                "is given twice"
            } else {
                "is out of order"
            };
            return Err(damaged(
                source,
                format!("vocab[{i}]: rank {} {what} (rank {i} expected)", entry.rank),
            ));
        }
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(&entry.token_bytes)
            .map_err(|e| {
                damaged(
                    source,
                    format!("vocab[{i}]: token_bytes is not base64 ({e})"),
                )
            })?;
        tokens.push(bytes);
    }
    let named: Vec<(String, usize)> = match &file.special_tokens {
        Some(list) => list.iter().map(|t| (t.token_str.clone(), t.rank)).collect(),
        None => V3_SPECIAL_TOKENS
            .iter()
            .enumerate()
            .map(|(rank, text)| (text.to_string(), rank))
            .collect(),
    };
    let mut special: Vec<Option<String>> = vec![None; specials];
    for (text, rank) in named {
        let slot = special.get_mut(rank).ok_or_else(|| {
            damaged(
                source,
                format!(
                    "special token {text:?} has rank {rank}, beyond the {specials} special ids"
                ),
            )
        })?;
        if let Some(other) = slot.replace(text.clone()) {
            return Err(damaged(
                source,
                format!("special tokens {other:?} and {text:?} have the same rank {rank}"),
            ));
        }
    }
    let special_tokens: Vec<(String, u32)> = special
        .into_iter()
        .enumerate()
        .map(|(id, text)| (text.unwrap_or_else(|| format!("<SPECIAL_{id}>")), id as u32))
        .collect();
    let pattern = Pattern::parse(&config.pattern)
        .map_err(|e| damaged(source, format!("config.pattern: {e}")))?;
    let model = BpeModel::new(tokens, pattern.clone(), Vec::new(), None)
        .and_then(|m| m.with_first_id(specials as u32))
        .map_err(|e| damaged(source, e))?;
    let spec = PipelineSpec {
        pre_tokenizer: Some(PreTokenizerSpec::Pattern {
            pattern: pattern.spec().to_owned(),
        }),
        special_tokens,
        decoder: Some(serde_json::json!({
            "type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true,
        })),
        ..PipelineSpec::default()
    };
    Ok((Model::Bpe(std::sync::Arc::new(model)), spec))
}
