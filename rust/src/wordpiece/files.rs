//! WordPiece model files: BERT's `vocab.txt` and polytok's own JSON.
//!
//! `vocab.txt`: one token per line, its id the line number from 0 (the
//! format of every released BERT model). Trailing white space is not part
//! of a token, as in BERT's loader.
//!
//! polytok JSON, version 1:
//! ```json
//! {"format": "polytok", "version": 1, "model": "wordpiece",
//!  "tokens": ["[PAD]", ..., "##s"],               // id order
//!  "unk_token": "[UNK]", "continuing_subword_prefix": "##",
//!  "max_input_chars_per_word": 100,
//!  "normalizer": {"clean_text": true, "handle_chinese_chars": true,
//!                 "strip_accents": true, "lowercase": true},
//!  "special_tokens": ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"],
//!  "training": {...} | null}
//! ```

use serde::{Deserialize, Serialize};

use super::{WordPieceModel, WordPieceSettings};
use crate::error::Result;
use crate::model_file::{check_header, damaged, FORMAT_VERSION};
use crate::text::bert::BertNormalizer;

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct WordPieceFile {
    format: String,
    version: u32,
    model: String,
    tokens: Vec<String>,
    unk_token: String,
    continuing_subword_prefix: String,
    max_input_chars_per_word: usize,
    normalizer: NormalizerEntry,
    special_tokens: Vec<String>,
    training: Option<serde_json::Value>,
    /// The tokenizer's pipeline around the model (`polytok.Tokenizer`), if
    /// it is not the model's default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pipeline: Option<serde_json::Value>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct NormalizerEntry {
    clean_text: bool,
    handle_chinese_chars: bool,
    strip_accents: bool,
    lowercase: bool,
}

/// The tokens of a `vocab.txt`, checked: no empty line, no token twice.
pub fn parse_vocab_txt(text: &str, source: &str) -> Result<Vec<String>> {
    let mut tokens = Vec::new();
    let mut seen = std::collections::HashMap::new();
    for (i, line) in text.lines().enumerate() {
        let token = line.trim_end();
        if token.is_empty() {
            return Err(damaged(source, format!("line {}: empty token", i + 1)));
        }
        if let Some(first) = seen.insert(token, i + 1) {
            return Err(damaged(
                source,
                format!("line {}: token {token:?} already on line {first}", i + 1),
            ));
        }
        tokens.push(token.to_owned());
    }
    if tokens.is_empty() {
        return Err(damaged(source, "no tokens"));
    }
    Ok(tokens)
}

impl WordPieceModel {
    /// A model from a `vocab.txt`'s text; errors name `source`.
    pub fn from_vocab_txt(text: &str, source: &str, settings: WordPieceSettings) -> Result<Self> {
        let tokens = parse_vocab_txt(text, source)?;
        WordPieceModel::new(tokens, settings).map_err(|e| damaged(source, e))
    }

    /// The vocabulary as a `vocab.txt`.
    pub fn to_vocab_txt(&self) -> String {
        let mut text = String::new();
        for id in 0..self.vocab.len() as u32 {
            text.push_str(self.token(id).expect("ids below len are tokens"));
            text.push('\n');
        }
        text
    }

    /// The model as polytok JSON; `training` records how it was made.
    pub fn to_json(
        &self,
        training: Option<&serde_json::Value>,
        pipeline: Option<&serde_json::Value>,
    ) -> String {
        let s = &self.settings;
        let n = s.normalizer;
        let file = WordPieceFile {
            format: "polytok".to_owned(),
            version: FORMAT_VERSION,
            model: "wordpiece".to_owned(),
            tokens: (0..self.vocab.len() as u32)
                .map(|id| self.token(id).expect("ids below len are tokens").to_owned())
                .collect(),
            unk_token: s.unk_token.clone(),
            continuing_subword_prefix: s.continuing_subword_prefix.clone(),
            max_input_chars_per_word: s.max_input_chars_per_word,
            normalizer: NormalizerEntry {
                clean_text: n.clean_text,
                handle_chinese_chars: n.handle_chinese_chars,
                strip_accents: n.strip_accents,
                lowercase: n.lowercase,
            },
            special_tokens: s.special_tokens.clone(),
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
        let file: WordPieceFile = serde_json::from_str(json)
            .map_err(|e| damaged(source, format!("not a polytok WordPiece file: {e}")))?;
        check_header(source, &file.format, file.version, &file.model, "wordpiece")?;
        let n = file.normalizer;
        let settings = WordPieceSettings {
            unk_token: file.unk_token,
            continuing_subword_prefix: file.continuing_subword_prefix,
            max_input_chars_per_word: file.max_input_chars_per_word,
            normalizer: BertNormalizer {
                clean_text: n.clean_text,
                handle_chinese_chars: n.handle_chinese_chars,
                strip_accents: n.strip_accents,
                lowercase: n.lowercase,
            },
            special_tokens: file.special_tokens,
        };
        let model = WordPieceModel::new(file.tokens, settings).map_err(|e| damaged(source, e))?;
        Ok((model, file.training, file.pipeline))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vocab_txt_round_trip_and_errors() {
        let text = "[PAD]\n[UNK]\nhello\n##s\n";
        let model =
            WordPieceModel::from_vocab_txt(text, "v.txt", WordPieceSettings::default()).unwrap();
        assert_eq!(model.to_vocab_txt(), text);
        let (again, _, _) =
            WordPieceModel::from_json(&model.to_json(None, None), "m.json").unwrap();
        assert_eq!(again.to_vocab_txt(), text);
        assert_eq!(again.settings(), model.settings());

        let dup = WordPieceModel::from_vocab_txt(
            "[UNK]\na\nb\na\n",
            "v.txt",
            WordPieceSettings::default(),
        );
        assert_eq!(
            dup.err().unwrap().to_string(),
            "v.txt: line 4: token \"a\" already on line 2"
        );
        let no_unk =
            WordPieceModel::from_vocab_txt("a\nb\n", "v.txt", WordPieceSettings::default());
        assert!(no_unk
            .err()
            .unwrap()
            .to_string()
            .contains("lacks the unknown token"));
        let empty_line =
            WordPieceModel::from_vocab_txt("[UNK]\n\nb\n", "v.txt", WordPieceSettings::default());
        assert!(empty_line
            .err()
            .unwrap()
            .to_string()
            .contains("line 2: empty token"));
        assert!(WordPieceModel::from_json("{", "m.json").is_err());
    }
}
