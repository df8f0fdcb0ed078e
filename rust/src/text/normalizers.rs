//! Normalizers: each rewrites a [`Normalized`] text and keeps its map to
//! the original.

use serde::{Deserialize, Serialize};

use super::Normalized;
use crate::error::Result;

/// One normalization step, or a sequence of them. Saved in tokenizer files
/// as `{"type": NAME, ...}` (Hugging Face's names where a step exists there).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", deny_unknown_fields)]
pub enum Normalizer {
    Lowercase,
    Sequence { normalizers: Vec<Normalizer> },
}

impl Normalizer {
    /// Parses a JSON spec, naming what is wrong with it.
    pub fn from_json(json: &str) -> Result<Self> {
        serde_json::from_str(json).map_err(|e| crate::error::Error::invalid(format!("normalizer {json}: {e}")))
    }

    /// Applies this step to `text`.
    pub fn normalize(&self, text: &mut Normalized) -> Result<()> {
        match self {
            Normalizer::Lowercase => text.rebuild(|src, out| {
                for (_, c, span) in src.chars_with_spans() {
                    for lower in c.to_lowercase() {
                        out.push(lower, span);
                    }
                }
            }),
            Normalizer::Sequence { normalizers } => {
                for n in normalizers {
                    n.normalize(text)?;
                }
            }
        }
        Ok(())
    }
}
