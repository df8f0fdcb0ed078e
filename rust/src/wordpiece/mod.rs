//! WordPiece, BERT's model: a vocabulary of word-initial tokens and
//! continuation tokens (`##ing`); each word (normalized and cut from text
//! by the pipeline, as BERT does: `text::normalizers`, `text::pre_tokenizers`)
//! encoded greedily, longest token first (`encoder.rs`, in linear time).

mod encoder;
pub mod files;
pub mod parity;
mod trainer;

pub use trainer::{train, WordPieceTrainerSettings};

use crate::error::{Error, Result};
use crate::text::bert::BertNormalizer;
use crate::vocab::Vocab;

/// The settings of a WordPiece model besides its vocabulary.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WordPieceSettings {
    pub unk_token: String,
    /// Marks continuation tokens: `##` in BERT.
    pub continuing_subword_prefix: String,
    /// Longer words (in characters, after normalization) are `[UNK]`.
    pub max_input_chars_per_word: usize,
    /// The normalization the model was trained with (the preset's
    /// normalizer; the model itself encodes words, not text).
    pub normalizer: BertNormalizer,
    /// Tokens of the vocabulary that are special: recognized in text only
    /// when allowed. (Words can still match them, as in BERT, but BERT's
    /// are bracketed and brackets end words.)
    pub special_tokens: Vec<String>,
}

impl Default for WordPieceSettings {
    /// bert-base-uncased.
    fn default() -> Self {
        WordPieceSettings {
            unk_token: "[UNK]".to_owned(),
            continuing_subword_prefix: "##".to_owned(),
            max_input_chars_per_word: 100,
            normalizer: BertNormalizer::uncased(),
            special_tokens: ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
                .map(str::to_owned)
                .to_vec(),
        }
    }
}

pub struct WordPieceModel {
    vocab: Vocab,
    settings: WordPieceSettings,
    unk: u32,
    /// The special tokens present in the vocabulary, with their ids.
    special: Vec<(String, u32)>,
    matcher: encoder::Matcher,
}

impl WordPieceModel {
    /// A model from its tokens in id order. The unknown token must be one
    /// of them; special tokens that are not are ignored (a BERT vocabulary
    /// may lack `[MASK]`, say).
    pub fn new(tokens: Vec<String>, settings: WordPieceSettings) -> Result<Self> {
        let vocab = Vocab::new(tokens.into_iter().map(String::into_bytes).collect())?;
        let unk = vocab.id(settings.unk_token.as_bytes()).ok_or_else(|| {
            Error::invalid(format!(
                "the vocabulary lacks the unknown token {:?}",
                settings.unk_token
            ))
        })?;
        let special: Vec<(String, u32)> = settings
            .special_tokens
            .iter()
            .filter_map(|text| Some((text.clone(), vocab.id(text.as_bytes())?)))
            .collect();
        let matcher = encoder::Matcher::new(
            vocab.iter().zip(0..),
            settings.continuing_subword_prefix.as_bytes(),
        );
        Ok(WordPieceModel {
            vocab,
            settings,
            unk,
            special,
            matcher,
        })
    }

    pub fn vocab(&self) -> &Vocab {
        &self.vocab
    }

    pub fn settings(&self) -> &WordPieceSettings {
        &self.settings
    }

    pub fn unk_id(&self) -> u32 {
        self.unk
    }

    /// The id of a special token of this model.
    pub fn special_id(&self, text: &str) -> Option<u32> {
        self.special
            .iter()
            .find(|(t, _)| t == text)
            .map(|&(_, id)| id)
    }

    /// The text of token `id`.
    pub fn token(&self, id: u32) -> Result<&str> {
        if (id as usize) >= self.vocab.len() {
            return Err(Error::UnknownTokenId {
                id,
                vocab_size: self.vocab.len(),
            });
        }
        Ok(std::str::from_utf8(self.vocab.bytes(id)).expect("tokens are strings"))
    }

    /// Appends the tokens of `word`, or the unknown token; returns whether
    /// the word was matched.
    #[inline]
    pub(crate) fn encode_word(&self, word: &str, out: &mut Vec<u32>) -> bool {
        // Bytes bound characters: count them only for long words.
        let max = self.settings.max_input_chars_per_word;
        if word.len() > max && word.chars().count() > max {
            out.push(self.unk);
            return false;
        }
        self.matcher.encode_word(word.as_bytes(), self.unk, out)
    }

    /// Appends the ids of the words `pieces` of `text` (normalized and
    /// pre-tokenized by the caller) and, with `ends`, each token's end byte
    /// in `text`: a continuation token covers its text without the prefix,
    /// the unknown token its whole word.
    pub fn encode_pieces(
        &self,
        text: &str,
        pieces: &[std::ops::Range<usize>],
        out: &mut Vec<u32>,
        mut ends: Option<&mut Vec<u32>>,
    ) {
        let prefix = self.settings.continuing_subword_prefix.len();
        for range in pieces {
            let first = out.len();
            let matched = self.encode_word(&text[range.clone()], out);
            if let Some(ends) = ends.as_deref_mut() {
                if !matched {
                    ends.push(range.end as u32);
                    continue;
                }
                let mut at = range.start;
                for (i, &id) in out[first..].iter().enumerate() {
                    at += self.vocab.token_len(id) - if i > 0 { prefix } else { 0 };
                    ends.push(at as u32);
                }
            }
        }
    }

    /// The text of `ids`: continuation tokens joined to the token before
    /// them, other tokens separated by a space; with `cleanup`, no space
    /// before punctuation and English contractions (BERT's decoder).
    pub fn decode(&self, ids: &[u32], cleanup: bool) -> Result<String> {
        let prefix = self.settings.continuing_subword_prefix.as_str();
        let mut text = String::new();
        for (i, &id) in ids.iter().enumerate() {
            let token = self.token(id)?;
            match token
                .strip_prefix(prefix)
                .filter(|_| !prefix.is_empty() && i > 0)
            {
                Some(rest) => text.push_str(rest),
                None => {
                    if i > 0 {
                        text.push(' ');
                    }
                    text.push_str(token);
                }
            }
        }
        if cleanup {
            text = cleanup_spaces(&text);
        }
        Ok(text)
    }
}

/// BERT's decoding cleanup: no space before punctuation and in English
/// contractions.
pub(crate) fn cleanup_spaces(text: &str) -> String {
    const RULES: [(&str, &str); 11] = [
        (" .", "."),
        (" ?", "?"),
        (" !", "!"),
        (" ,", ","),
        (" ' ", "'"),
        (" n't", "n't"),
        (" 'm", "'m"),
        (" do not", " don't"),
        (" 's", "'s"),
        (" 've", "'ve"),
        (" 're", "'re"),
    ];
    RULES
        .iter()
        .fold(text.to_owned(), |text, (from, to)| text.replace(from, to))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Model;
    use crate::presets::preset;
    use crate::vocab::AllowedSpecial;
    use std::sync::Arc;

    fn model(tokens: &[&str]) -> WordPieceModel {
        WordPieceModel::new(
            tokens.iter().map(|t| t.to_string()).collect(),
            WordPieceSettings::default(),
        )
        .unwrap()
    }

    #[test]
    fn bert_semantics() {
        let m = model(&[
            "[UNK]", "[CLS]", "un", "##aff", "##able", "hello", ",", "!", "中",
        ]);
        let m = Arc::new(m);
        let preset = preset(Model::WordPiece(m.clone()));
        let ids = preset.ids("Unaffable, HELLO! 中 xyz", &AllowedSpecial::None);
        assert_eq!(ids, [2, 3, 4, 6, 5, 7, 8, 0]);
        assert_eq!(m.decode(&ids, true).unwrap(), "unaffable, hello! 中 [UNK]");
        // Special tokens: ordinary text unless allowed.
        assert_eq!(preset.ids("[CLS]", &AllowedSpecial::None), [0, 0, 0]);
        assert_eq!(preset.ids("[CLS]", &AllowedSpecial::All), [1]);
    }

    #[test]
    fn long_words_are_unknown() {
        let m = model(&["[UNK]", "a", "##a"]);
        let word = "a".repeat(101);
        let mut ids = Vec::new();
        m.encode_word(&word, &mut ids);
        assert_eq!(ids, [0]);
        ids.clear();
        m.encode_word(&word[1..], &mut ids);
        assert_eq!(ids.len(), 100);
    }

    #[test]
    fn missing_unk_is_an_error() {
        let err = WordPieceModel::new(vec!["a".into()], WordPieceSettings::default());
        assert!(err.err().unwrap().to_string().contains("[UNK]"));
    }
}
