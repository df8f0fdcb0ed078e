//! Post-processing: templates that add special tokens around one text or a
//! pair, truncation to a maximum length (with overflowing windows), and
//! padding. Saved in Hugging Face's `tokenizer.json` shapes.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::encoding::{Encoding, Pad};
use crate::error::{Error, Result};

/// Which input a template's `Sequence` stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum SequenceId {
    A,
    B,
}

/// One item of a template.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum TemplatePiece {
    SpecialToken { id: String, type_id: u32 },
    Sequence { id: SequenceId, type_id: u32 },
}

/// What a template's special token name stands for: one or more ids.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TemplateToken {
    pub id: String,
    pub ids: Vec<u32>,
    pub tokens: Vec<String>,
}

/// A post-processor, as saved (`{"type": NAME, ...}`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", deny_unknown_fields)]
pub enum PostProcessor {
    TemplateProcessing {
        single: Vec<TemplatePiece>,
        #[serde(default)]
        pair: Option<Vec<TemplatePiece>>,
        #[serde(default)]
        special_tokens: BTreeMap<String, TemplateToken>,
    },
    /// `[CLS] A [SEP]` and `[CLS] A [SEP] B [SEP]`, type ids 0 then 1.
    BertProcessing {
        sep: (String, u32),
        cls: (String, u32),
    },
    /// `<s> A </s>` and `<s> A </s></s> B </s>`, type ids 0.
    RobertaProcessing {
        sep: (String, u32),
        cls: (String, u32),
        #[serde(default)]
        trim_offsets: bool,
        #[serde(default)]
        add_prefix_space: bool,
    },
    /// Hugging Face's post-processor of byte-level BPE: no tokens added;
    /// with `trim_offsets`, RoBERTa's trim of the offsets (the files of
    /// GPT-NeoX and Pythia). `use_regex` matters to its pre-tokenizer only.
    ByteLevel {
        #[serde(default = "crate::serde_defaults::yes")]
        add_prefix_space: bool,
        #[serde(default = "crate::serde_defaults::yes")]
        trim_offsets: bool,
        #[serde(default = "crate::serde_defaults::yes")]
        use_regex: bool,
    },
    /// The steps in order, at most one of which adds tokens (Llama 3's
    /// `ByteLevel` then `TemplateProcessing`).
    Sequence { processors: Vec<PostProcessor> },
}

impl PostProcessor {
    /// RoBERTa's `trim_offsets`, with its `add_prefix_space`, if a step
    /// trims offsets.
    pub fn trim_offsets(&self) -> Option<bool> {
        match self {
            PostProcessor::RobertaProcessing {
                trim_offsets: true,
                add_prefix_space,
                ..
            }
            | PostProcessor::ByteLevel {
                trim_offsets: true,
                add_prefix_space,
                ..
            } => Some(*add_prefix_space),
            PostProcessor::Sequence { processors } => {
                processors.iter().find_map(PostProcessor::trim_offsets)
            }
            _ => None,
        }
    }

    /// The step that adds tokens, if any (an error if a sequence has
    /// more than one).
    pub fn templating(&self) -> Result<Option<&PostProcessor>> {
        match self {
            PostProcessor::ByteLevel { .. } => Ok(None),
            PostProcessor::Sequence { processors } => {
                let mut found = None;
                for step in processors {
                    if let Some(t) = step.templating()? {
                        if found.replace(t).is_some() {
                            return Err(Error::invalid(
                                "a Sequence of post-processors with more than one that adds tokens",
                            ));
                        }
                    }
                }
                Ok(found)
            }
            templating => Ok(Some(templating)),
        }
    }
}

/// A post-processor as a template (every kind is one).
#[derive(Clone, Debug)]
pub struct Template {
    single: Vec<TemplatePiece>,
    pair: Option<Vec<TemplatePiece>>,
    tokens: BTreeMap<String, TemplateToken>,
}

impl Template {
    /// Checks `processor` (each named special token defined, each template
    /// holding its sequences once) and turns it into a template.
    pub fn new(processor: &PostProcessor) -> Result<Self> {
        let special = |(text, id): &(String, u32)| {
            (
                text.clone(),
                TemplateToken {
                    id: text.clone(),
                    ids: vec![*id],
                    tokens: vec![text.clone()],
                },
            )
        };
        let item = |text: &str, type_id| TemplatePiece::SpecialToken {
            id: text.to_owned(),
            type_id,
        };
        let seq = |id, type_id| TemplatePiece::Sequence { id, type_id };
        let Some(processor) = processor.templating()? else {
            // No tokens: each text as it is, the pair's second of type 1.
            return Ok(Template {
                single: vec![seq(SequenceId::A, 0)],
                pair: Some(vec![seq(SequenceId::A, 0), seq(SequenceId::B, 1)]),
                tokens: BTreeMap::new(),
            });
        };
        let template = match processor {
            PostProcessor::TemplateProcessing {
                single,
                pair,
                special_tokens,
            } => Template {
                single: single.clone(),
                pair: pair.clone(),
                tokens: special_tokens.clone(),
            },
            PostProcessor::BertProcessing { sep, cls } => Template {
                single: vec![item(&cls.0, 0), seq(SequenceId::A, 0), item(&sep.0, 0)],
                pair: Some(vec![
                    item(&cls.0, 0),
                    seq(SequenceId::A, 0),
                    item(&sep.0, 0),
                    seq(SequenceId::B, 1),
                    item(&sep.0, 1),
                ]),
                tokens: [special(cls), special(sep)].into_iter().collect(),
            },
            PostProcessor::RobertaProcessing { sep, cls, .. } => Template {
                single: vec![item(&cls.0, 0), seq(SequenceId::A, 0), item(&sep.0, 0)],
                pair: Some(vec![
                    item(&cls.0, 0),
                    seq(SequenceId::A, 0),
                    item(&sep.0, 0),
                    item(&sep.0, 0),
                    seq(SequenceId::B, 0),
                    item(&sep.0, 0),
                ]),
                tokens: [special(cls), special(sep)].into_iter().collect(),
            },
            PostProcessor::ByteLevel { .. } | PostProcessor::Sequence { .. } => {
                unreachable!("templating() gives a step that adds tokens")
            }
        };
        for (name, pieces) in [
            ("single", Some(&template.single)),
            ("pair", template.pair.as_ref()),
        ] {
            let Some(pieces) = pieces else { continue };
            for piece in pieces {
                if let TemplatePiece::SpecialToken { id, .. } = piece {
                    if !template.tokens.contains_key(id) {
                        return Err(Error::invalid(format!(
                            "template {name}: special token {id:?} is not among the template's special tokens"
                        )));
                    }
                }
            }
            let count = |which| {
                pieces
                    .iter()
                    .filter(|p| matches!(p, TemplatePiece::Sequence { id, .. } if *id == which))
                    .count()
            };
            let wanted = if name == "single" { (1, 0) } else { (1, 1) };
            if (count(SequenceId::A), count(SequenceId::B)) != wanted {
                return Err(Error::invalid(format!(
                    "template {name}: must hold {} exactly once",
                    if name == "single" {
                        "$A (and no $B)"
                    } else {
                        "$A and $B"
                    }
                )));
            }
        }
        Ok(template)
    }

    /// The ids of the template's special tokens.
    pub fn token_ids(&self) -> impl Iterator<Item = u32> + '_ {
        self.tokens.values().flat_map(|t| t.ids.iter().copied())
    }

    /// The number of tokens the template adds.
    pub fn added_tokens(&self, pair: bool) -> Result<usize> {
        Ok(self
            .parts(pair)?
            .map(|part| match part {
                Part::Tokens { ids, .. } => ids.len(),
                Part::Sequence { .. } => 0,
            })
            .sum())
    }

    /// The single or the pair template, in order: the ids of its special
    /// tokens, and where each text goes.
    pub fn parts(&self, pair: bool) -> Result<impl Iterator<Item = Part<'_>>> {
        let pieces = if pair {
            self.pair.as_deref().ok_or_else(|| {
                Error::invalid(
                    "a pair of texts was given, but the post-processor's template has no pair form",
                )
            })?
        } else {
            &self.single
        };
        Ok(pieces.iter().map(|piece| match piece {
            TemplatePiece::SpecialToken { id, type_id } => Part::Tokens {
                ids: &self.tokens[id].ids,
                type_id: *type_id,
            },
            TemplatePiece::Sequence { id, type_id } => Part::Sequence {
                id: *id,
                type_id: *type_id,
            },
        }))
    }

    /// The template filled with `a` (and `b`).
    pub fn apply(&self, a: &Encoding, b: Option<&Encoding>) -> Result<Encoding> {
        let mut out = Encoding::default();
        out.tokens
            .reserve(a.len() + b.map_or(0, Encoding::len) + self.added_tokens(b.is_some())?);
        for part in self.parts(b.is_some())? {
            match part {
                Part::Tokens { ids, type_id } => out.push_added(ids, type_id),
                Part::Sequence { id, type_id } => {
                    let source = match id {
                        SequenceId::A => a,
                        SequenceId::B => b.expect("a pair template with a pair"),
                    };
                    out.extend_from(source, 0..source.len(), Some(type_id));
                }
            }
        }
        Ok(out)
    }
}

/// One step of a template (see [`Template::parts`]).
pub enum Part<'t> {
    /// Special tokens the template adds.
    Tokens { ids: &'t [u32], type_id: u32 },
    /// Where text `id` goes.
    Sequence { id: SequenceId, type_id: u32 },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Direction {
    Left,
    Right,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum TruncationStrategy {
    LongestFirst,
    OnlyFirst,
    OnlySecond,
}

/// Truncation settings, as saved.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Truncation {
    pub max_length: usize,
    #[serde(default)]
    pub stride: usize,
    #[serde(default = "longest_first")]
    pub strategy: TruncationStrategy,
    #[serde(default = "right")]
    pub direction: Direction,
}

fn longest_first() -> TruncationStrategy {
    TruncationStrategy::LongestFirst
}

fn right() -> Direction {
    Direction::Right
}

impl Truncation {
    /// Checks the settings against the template's added tokens.
    pub fn check(&self, added_single: usize, added_pair: Option<usize>) -> Result<()> {
        if self.max_length == 0 {
            return Err(Error::invalid("truncation max_length must be at least 1"));
        }
        let added = added_pair.unwrap_or(0).max(added_single);
        if self.max_length <= added_single {
            return Err(Error::invalid(format!(
                "truncation max_length {} leaves no room for text: the template adds {added_single} special tokens",
                self.max_length
            )));
        }
        if let Some(pair) = added_pair {
            if self.max_length <= pair {
                return Err(Error::invalid(format!(
                    "truncation max_length {} leaves no room for text in pairs: the pair template adds {pair} special tokens",
                    self.max_length
                )));
            }
        }
        if self.stride >= self.max_length - added {
            return Err(Error::invalid(format!(
                "truncation stride {} must be smaller than max_length {} less the {added} special tokens the template adds",
                self.stride, self.max_length
            )));
        }
        Ok(())
    }

    /// Truncates `a` (and `b`) so that with `added` tokens they fit
    /// `max_length`; what is cut off goes to their `overflowing` windows.
    pub fn apply(&self, a: &mut Encoding, b: Option<&mut Encoding>, added: usize) -> Result<()> {
        let budget = self.max_length.saturating_sub(added);
        let total = a.len() + b.as_ref().map_or(0, |b| b.len());
        if total <= budget {
            return Ok(());
        }
        match (self.strategy, b) {
            (TruncationStrategy::OnlySecond, None) => {
                return Err(Error::invalid(
                    "truncation strategy only_second needs a pair of texts",
                ));
            }
            (TruncationStrategy::OnlySecond, Some(b)) => {
                let keep = budget.checked_sub(a.len()).filter(|&k| k > 0).ok_or_else(|| {
                    Error::invalid(format!(
                        "cannot truncate to {} tokens: the first text alone has {} tokens and the template adds {added}",
                        self.max_length,
                        a.len()
                    ))
                })?;
                self.cut(b, keep)?;
            }
            (TruncationStrategy::LongestFirst, Some(b)) => {
                // The longer text gives up tokens first; if both are still
                // too long, they share the budget (the first gets the
                // smaller half), as Hugging Face's tokenizers do.
                let (mut n1, mut n2) = (a.len(), b.len());
                let swap = n1 > n2;
                if swap {
                    std::mem::swap(&mut n1, &mut n2);
                }
                n2 = if n1 > budget { n1 } else { n1.max(budget - n1) };
                if n1 + n2 > budget {
                    n1 = budget / 2;
                    n2 = n1 + budget % 2;
                }
                if swap {
                    std::mem::swap(&mut n1, &mut n2);
                }
                if n1 == 0 || n2 == 0 {
                    return Err(Error::invalid(format!(
                        "cannot truncate a pair to {} tokens with {added} special tokens",
                        self.max_length
                    )));
                }
                self.cut(a, n1)?;
                self.cut(b, n2)?;
            }
            // One text, or only the first of a pair.
            (_, b) => {
                let other = b.map_or(0, |b| b.len());
                let keep = budget.checked_sub(other).filter(|&k| k > 0).ok_or_else(|| {
                    Error::invalid(format!(
                        "cannot truncate to {} tokens: the second text alone has {other} tokens and the template adds {added}",
                        self.max_length
                    ))
                })?;
                self.cut(a, keep)?;
            }
        }
        Ok(())
    }

    /// Keeps `keep` tokens of `e`, at its start (right truncation) or end;
    /// the rest becomes overflowing windows of `keep` tokens that overlap
    /// by `stride`.
    fn cut(&self, e: &mut Encoding, keep: usize) -> Result<()> {
        let len = e.len();
        if keep >= len {
            return Ok(());
        }
        if self.stride >= keep {
            return Err(Error::invalid(format!(
                "truncation stride {} must be smaller than the {keep} tokens kept of a text of {len} tokens (max_length {})",
                self.stride, self.max_length
            )));
        }
        let step = keep - self.stride;
        let mut windows = Vec::new();
        match self.direction {
            Direction::Right => {
                let mut start = 0;
                loop {
                    let end = (start + keep).min(len);
                    windows.push(start..end);
                    if end == len {
                        break;
                    }
                    start += step;
                }
            }
            Direction::Left => {
                let mut end = len;
                loop {
                    let start = end.saturating_sub(keep);
                    windows.push(start..end);
                    if start == 0 {
                        break;
                    }
                    end -= step;
                }
            }
        }
        let whole = std::mem::take(e);
        let mut parts = windows.into_iter().map(|range| {
            let mut part = Encoding::default();
            part.extend_from(&whole, range, None);
            part
        });
        *e = parts.next().expect("one window at least");
        e.overflowing = parts.collect();
        Ok(())
    }
}

/// How far `Padding` pads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum PaddingStrategy {
    /// To the longest encoding of the batch.
    BatchLongest,
    /// To this length.
    Fixed(usize),
}

/// Padding settings, as saved.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Padding {
    #[serde(default = "batch_longest")]
    pub strategy: PaddingStrategy,
    #[serde(default = "right")]
    pub direction: Direction,
    #[serde(default)]
    pub pad_to_multiple_of: Option<usize>,
    pub pad_id: u32,
    #[serde(default)]
    pub pad_type_id: u32,
    pub pad_token: String,
}

fn batch_longest() -> PaddingStrategy {
    PaddingStrategy::BatchLongest
}

impl Padding {
    pub fn check(&self) -> Result<()> {
        if self.pad_to_multiple_of == Some(0) {
            return Err(Error::invalid("pad_to_multiple_of must be at least 1"));
        }
        if self.strategy == PaddingStrategy::Fixed(0) {
            return Err(Error::invalid("padding length must be at least 1"));
        }
        Ok(())
    }

    /// The length to pad a batch whose longest encoding has `longest`
    /// tokens to.
    pub fn target(&self, longest: usize) -> usize {
        let length = match self.strategy {
            PaddingStrategy::BatchLongest => longest,
            PaddingStrategy::Fixed(n) => n,
        };
        match self.pad_to_multiple_of {
            Some(m) if length % m != 0 => length + m - length % m,
            _ => length,
        }
    }

    /// Pads `e` (and its overflowing windows) to `length` tokens (recorded
    /// in `e.pad`, see `Encoding::padded`).
    pub fn apply(&self, e: &mut Encoding, length: usize) {
        for o in &mut e.overflowing {
            self.apply(o, length);
        }
        let tokens = e.tokens.len();
        e.pad = Pad {
            count: length.saturating_sub(tokens),
            left: self.direction == Direction::Left,
            id: self.pad_id,
            type_id: self.pad_type_id,
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::encoding::Token;

    fn encoding(ids: &[u32]) -> Encoding {
        let mut e = Encoding::default();
        for (i, &id) in ids.iter().enumerate() {
            e.push(Token::new(
                id,
                0,
                false,
                Some(0),
                (i as u32, i as u32 + 1),
                Some(i as u32),
            ));
        }
        e
    }

    fn bert() -> Template {
        Template::new(&PostProcessor::BertProcessing {
            sep: ("[SEP]".into(), 102),
            cls: ("[CLS]".into(), 101),
        })
        .unwrap()
    }

    #[test]
    fn bert_template_with_pair() {
        let t = bert();
        let mut b = encoding(&[7, 8]);
        for t in &mut b.tokens {
            *t = Token::new(t.id, 0, false, Some(1), t.offsets, t.word());
        }
        let e = t.apply(&encoding(&[5]), Some(&b)).unwrap();
        assert_eq!(e.padded_ids(), [101, 5, 102, 7, 8, 102]);
        assert_eq!(e.padded_type_ids(), [0, 0, 0, 1, 1, 1]);
        assert_eq!(e.padded_special_tokens_mask(), [1, 0, 1, 0, 0, 1]);
        assert_eq!(e.padded_offsets()[1], (0, 1));
        assert_eq!(
            e.padded_sequence_ids(),
            [None, Some(0), None, Some(1), Some(1), None]
        );
        assert_eq!(t.added_tokens(true).unwrap(), 3);
    }

    #[test]
    fn truncation_windows_overlap_by_stride() {
        let t = Truncation {
            max_length: 4,
            stride: 1,
            strategy: TruncationStrategy::LongestFirst,
            direction: Direction::Right,
        };
        let mut e = encoding(&[1, 2, 3, 4, 5, 6, 7]);
        t.apply(&mut e, None, 0).unwrap();
        assert_eq!(e.padded_ids(), [1, 2, 3, 4]);
        let windows: Vec<_> = e.overflowing.iter().map(|o| o.padded_ids()).collect();
        assert_eq!(windows, [vec![4, 5, 6, 7]]);
        let left = Truncation {
            direction: Direction::Left,
            stride: 0,
            ..t.clone()
        };
        let mut e = encoding(&[1, 2, 3, 4, 5, 6, 7]);
        left.apply(&mut e, None, 0).unwrap();
        assert_eq!(e.padded_ids(), [4, 5, 6, 7]);
        assert_eq!(e.overflowing[0].padded_ids(), [1, 2, 3]);
        assert!(t.check(3, None).is_err());
        assert!(Truncation { stride: 4, ..t }.check(0, None).is_err());
    }

    #[test]
    fn longest_first_shares_the_budget() {
        let t = Truncation {
            max_length: 6,
            stride: 0,
            strategy: TruncationStrategy::LongestFirst,
            direction: Direction::Right,
        };
        let (mut a, mut b) = (encoding(&[1, 2]), encoding(&[3, 4, 5, 6, 7, 8]));
        t.apply(&mut a, Some(&mut b), 0).unwrap();
        assert_eq!((a.len(), b.len()), (2, 4));
        let (mut a, mut b) = (encoding(&[1; 9]), encoding(&[2; 8]));
        t.apply(&mut a, Some(&mut b), 0).unwrap();
        assert_eq!((a.len(), b.len()), (3, 3));
    }

    #[test]
    fn padding_left_and_to_a_multiple() {
        let p = Padding {
            strategy: PaddingStrategy::BatchLongest,
            direction: Direction::Left,
            pad_to_multiple_of: Some(4),
            pad_id: 0,
            pad_type_id: 0,
            pad_token: "[PAD]".into(),
        };
        let mut e = encoding(&[5, 6]);
        let target = p.target(3);
        assert_eq!(target, 4);
        p.apply(&mut e, target);
        assert_eq!(e.padded_ids(), [0, 0, 5, 6]);
        assert_eq!(e.padded_attention_mask(), [0, 0, 1, 1]);
        assert_eq!(e.padded_offsets()[0], (0, 0));
        assert_eq!(e.len(), 4);
    }

    #[test]
    fn byte_level_adds_no_tokens_and_sequences_hold_one_template() {
        let byte_level = PostProcessor::ByteLevel {
            add_prefix_space: false,
            trim_offsets: true,
            use_regex: true,
        };
        let template = Template::new(&byte_level).unwrap();
        assert_eq!(
            (
                template.added_tokens(false).unwrap(),
                template.added_tokens(true).unwrap()
            ),
            (0, 0)
        );
        assert_eq!(byte_level.trim_offsets(), Some(false));
        let bert = PostProcessor::BertProcessing {
            sep: ("[SEP]".into(), 102),
            cls: ("[CLS]".into(), 101),
        };
        let sequence = PostProcessor::Sequence {
            processors: vec![byte_level.clone(), bert.clone()],
        };
        assert_eq!(
            Template::new(&sequence)
                .unwrap()
                .added_tokens(false)
                .unwrap(),
            2
        );
        assert_eq!(sequence.trim_offsets(), Some(false));
        let two = PostProcessor::Sequence {
            processors: vec![bert.clone(), byte_level, bert],
        };
        let e = Template::new(&two).err().unwrap().to_string();
        assert!(e.contains("more than one"), "{e}");
    }

    #[test]
    fn template_errors_name_the_problem() {
        let bad = PostProcessor::TemplateProcessing {
            single: vec![
                TemplatePiece::SpecialToken {
                    id: "[X]".into(),
                    type_id: 0,
                },
                TemplatePiece::Sequence {
                    id: SequenceId::A,
                    type_id: 0,
                },
            ],
            pair: None,
            special_tokens: BTreeMap::new(),
        };
        assert!(Template::new(&bad).unwrap_err().to_string().contains("[X]"));
        let single = Template::new(&PostProcessor::TemplateProcessing {
            single: vec![TemplatePiece::Sequence {
                id: SequenceId::A,
                type_id: 0,
            }],
            pair: None,
            special_tokens: BTreeMap::new(),
        })
        .unwrap();
        assert!(single
            .apply(&encoding(&[1]), Some(&encoding(&[2])))
            .unwrap_err()
            .to_string()
            .contains("pair"));
    }
}
