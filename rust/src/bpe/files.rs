//! BPE model files: polytok's own JSON format and tiktoken rank files.
//!
//! polytok JSON, version 1:
//! ```json
//! {"format": "polytok", "version": 1, "model": "bpe",
//!  "pattern": {"preset": "cl100k", "regex": "..."} | {"regex": "..."} | null,
//!  "tokens": ["!", "\"", ..., "Ġthe"],          // byte-level strings, id order
//!  "merges": [[32, 116], ...] | null,            // pair that made each token
//!  "special_tokens": [{"text": "<|endoftext|>", "id": 100257}],
//!  "training": {...} | null}                     // the settings it was trained with
//! ```
//! Tokens are stored in the byte-level alphabet (`byte_alphabet`), so any
//! byte string is representable and the file stays readable.
//!
//! tiktoken: one line per token, `base64(bytes) rank`, ranks 0..n-1.

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use serde::{Deserialize, Serialize};

use super::BpeModel;
use crate::byte_alphabet;
use crate::error::Result;
use crate::model_file::{check_header, damaged, FORMAT_VERSION};
use crate::text::pattern::Pattern;

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct BpeFile {
    format: String,
    version: u32,
    model: String,
    /// `null` is no pre-tokenization; a missing key is a damaged file (an
    /// edit that dropped it must not silently change the tokenizer).
    #[serde(deserialize_with = "present")]
    pattern: Option<PatternEntry>,
    tokens: Vec<String>,
    merges: Option<Vec<(u32, u32)>>,
    special_tokens: Vec<SpecialEntry>,
    /// The id of rank 0 when ids do not start at 0 (Tekken's files).
    #[serde(default, skip_serializing_if = "is_zero")]
    first_id: u32,
    training: Option<serde_json::Value>,
    /// The tokenizer's pipeline around the model (`polytok.Tokenizer`), if
    /// it is not the model's default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pipeline: Option<serde_json::Value>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct PatternEntry {
    #[serde(skip_serializing_if = "Option::is_none", default)]
    preset: Option<String>,
    regex: String,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct SpecialEntry {
    text: String,
    id: u32,
}

/// Reads an optional value whose key must be there: without a `default`,
/// serde reports a missing key as an error, where a plain `Option` field
/// would read it as `None`.
fn present<'de, D, T>(deserializer: D) -> std::result::Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::deserialize(deserializer)
}

impl BpeModel {
    /// The model as polytok JSON; `training` records how it was made.
    pub fn to_json(
        &self,
        training: Option<&serde_json::Value>,
        pipeline: Option<&serde_json::Value>,
    ) -> String {
        let pattern = match self.pattern() {
            Pattern::Whole => None,
            Pattern::Regex(re) => Some(PatternEntry {
                preset: None,
                regex: re.clone(),
            }),
            preset => Some(PatternEntry {
                preset: Some(preset.spec().to_owned()),
                regex: preset.regex().expect("presets have a regex").to_owned(),
            }),
        };
        let file = BpeFile {
            format: "polytok".to_owned(),
            version: FORMAT_VERSION,
            model: "bpe".to_owned(),
            pattern,
            tokens: self.vocab.iter().map(byte_alphabet::encode).collect(),
            merges: self.merges.clone(),
            first_id: self.first_id,
            special_tokens: self
                .special
                .iter()
                .map(|(text, id)| SpecialEntry {
                    text: text.to_owned(),
                    id,
                })
                .collect(),
            training: training.cloned(),
            pipeline: pipeline.cloned(),
        };
        serde_json::to_string(&file).expect("the model serializes")
    }

    /// A model from polytok JSON; `source` names the file in errors. Returns
    /// the training record too.
    pub fn from_json(
        json: &str,
        source: &str,
    ) -> Result<(
        BpeModel,
        Option<serde_json::Value>,
        Option<serde_json::Value>,
    )> {
        let file: BpeFile = serde_json::from_str(json).map_err(|e| {
            let kind = if e.is_eof() {
                "is truncated"
            } else {
                "is not a valid polytok tokenizer file"
            };
            damaged(source, format!("{kind} ({e})"))
        })?;
        check_header(source, &file.format, file.version, &file.model, "bpe")?;
        let pattern = match file.pattern {
            None => Pattern::Whole,
            Some(PatternEntry {
                preset: Some(name), ..
            }) => match Pattern::parse(&name) {
                Ok(Pattern::Regex(_) | Pattern::Whole) | Err(_) => {
                    return Err(damaged(source, format!("unknown pattern preset {name:?}")))
                }
                Ok(preset) => preset,
            },
            Some(PatternEntry {
                preset: None,
                regex,
            }) => Pattern::Regex(regex),
        };
        let tokens = file
            .tokens
            .iter()
            .enumerate()
            .map(|(id, text)| {
                byte_alphabet::decode(text).ok_or_else(|| {
                    damaged(
                        source,
                        format!("token {id} ({text:?}) is not in the byte-level alphabet"),
                    )
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let special = file
            .special_tokens
            .into_iter()
            .map(|s| (s.text, s.id))
            .collect();
        let model = BpeModel::new(tokens, pattern, special, file.merges)
            .and_then(|m| m.with_first_id(file.first_id))
            .map_err(|e| damaged(source, e))?;
        Ok((model, file.training, file.pipeline))
    }

    /// The ordinary tokens as a tiktoken rank file.
    pub fn to_tiktoken(&self) -> String {
        let mut out = String::with_capacity(self.vocab.len() * 16);
        for (rank, bytes) in self.vocab.iter().enumerate() {
            out.push_str(&BASE64.encode(bytes));
            out.push(' ');
            out.push_str(&rank.to_string());
            out.push('\n');
        }
        out
    }

    /// A model from a tiktoken rank file, with the pattern and special tokens
    /// the caller gives (the file holds neither).
    pub fn from_tiktoken(
        text: &str,
        source: &str,
        pattern: Pattern,
        special: Vec<(String, u32)>,
    ) -> Result<BpeModel> {
        let mut ranked: Vec<(u32, Vec<u8>)> = Vec::new();
        for (i, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let bad_line =
                |what: &str| damaged(source, format!("line {}: {what}: {line:?}", i + 1));
            let (token, rank) = line
                .split_once(' ')
                .ok_or_else(|| bad_line("expected \"<base64 token> <rank>\""))?;
            let bytes = BASE64
                .decode(token)
                .map_err(|_| bad_line("the token is not valid base64"))?;
            let rank: u32 = rank
                .trim()
                .parse()
                .map_err(|_| bad_line("the rank is not a number"))?;
            ranked.push((rank, bytes));
        }
        if ranked.is_empty() {
            return Err(damaged(source, "holds no tokens"));
        }
        ranked.sort_by_key(|&(rank, _)| rank);
        for (expected, &(rank, _)) in ranked.iter().enumerate() {
            if rank as usize != expected {
                let problem = if (rank as usize) < expected {
                    "appears twice"
                } else {
                    "is missing"
                };
                let which = if (rank as usize) < expected {
                    rank as usize
                } else {
                    expected
                };
                return Err(damaged(
                    source,
                    format!(
                        "ranks must be 0..{} without gaps: rank {which} {problem}",
                        ranked.len()
                    ),
                ));
            }
        }
        let tokens = ranked.into_iter().map(|(_, bytes)| bytes).collect();
        BpeModel::new(tokens, pattern, special, None).map_err(|e| damaged(source, e))
    }
}

fn is_zero(value: &u32) -> bool {
    *value == 0
}
