//! Added tokens: text the pipeline matches as one token before the model
//! sees it, as Hugging Face's added vocabulary does.
//!
//! Two kinds. Special tokens (`<|endoftext|>`, `[CLS]`) are matched when
//! the caller allows them (always, for tokenizers read from Hugging Face's
//! files) and left out by decoding with `skip_special`. Plain added tokens
//! (Qwen's `<tool_call>`, a code model's runs of spaces) are matched in
//! every call and decoded as text.
//!
//! Hugging Face's flags ([`AddedTokenFlags`]) say how a token is matched:
//! - `lstrip`/`rstrip`: it takes the white space on its left/right (that
//!   space is then part of its span, as in Hugging Face);
//! - `single_word`: only where no word character (`\w`) touches it;
//! - `normalized`: it is looked for in the normalized text, under its own
//!   normalized form (a lowercasing pipeline matches `FOO` as `foo`).
//!
//! Matching is leftmost-longest (aho-corasick), in two passes as Hugging
//! Face's: first the tokens matched in the text as given, then, in each
//! stretch between those once normalized, the `normalized` ones. Without a
//! normalizer, when every token is `normalized`, the two passes are one on
//! the text as given.

use std::borrow::Cow;
use std::ops::Range;

use aho_corasick::{AhoCorasick, MatchKind};
use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::text::normalizers::Normalizer;
use crate::text::Normalized;
use crate::vocab::AllowedSpecial;

/// How an added token is matched beyond its text (Hugging Face's flags of
/// that name); a token without flags has them all off.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AddedTokenFlags {
    pub token: String,
    #[serde(default, skip_serializing_if = "crate::serde_defaults::is_false")]
    pub lstrip: bool,
    #[serde(default, skip_serializing_if = "crate::serde_defaults::is_false")]
    pub rstrip: bool,
    #[serde(default, skip_serializing_if = "crate::serde_defaults::is_false")]
    pub single_word: bool,
    #[serde(default, skip_serializing_if = "crate::serde_defaults::is_false")]
    pub normalized: bool,
}

impl AddedTokenFlags {
    fn any(&self) -> bool {
        self.lstrip || self.rstrip || self.single_word || self.normalized
    }
}

struct Entry {
    id: u32,
    special: bool,
    /// What is matched and decoded: the content, or under `normalized`
    /// its normalized form (as Hugging Face decodes it).
    text: String,
    /// Its flags, and (`token`) the token as given.
    flags: AddedTokenFlags,
}

/// An automaton over some of the tokens: pattern `i` is entry
/// `entries[i]`.
#[derive(Clone)]
pub struct Matcher {
    automaton: AhoCorasick,
    entries: Vec<u32>,
}

impl Matcher {
    fn new(table: &[Entry], entries: impl Iterator<Item = usize>) -> Result<Option<Self>> {
        let entries: Vec<u32> = entries.map(|i| i as u32).collect();
        if entries.is_empty() {
            return Ok(None);
        }
        let automaton = AhoCorasick::builder()
            .match_kind(MatchKind::LeftmostLongest)
            .build(entries.iter().map(|&i| table[i as usize].text.as_str()))
            .map_err(|e| Error::invalid(format!("added tokens: {e}")))?;
        Ok(Some(Matcher { automaton, entries }))
    }
}

/// A part of a text cut at its added tokens.
pub enum Segment<'t> {
    Text(&'t str),
    /// An added token; `span`: its bytes in the text cut, with the white
    /// space it strips.
    Added {
        id: u32,
        span: Range<usize>,
    },
}

/// The pipeline's added tokens, special and plain, and their matchers.
#[derive(Default)]
pub struct AddedTokens {
    entries: Vec<Entry>,
    by_content: FxHashMap<String, usize>,
    by_id: FxHashMap<u32, usize>,
    /// Every token matched in the text as given, and the plain ones alone
    /// (when no special token is allowed).
    raw: Option<Matcher>,
    raw_plain: Option<Matcher>,
    /// The tokens matched in normalized text.
    normalized: Option<Matcher>,
}

impl AddedTokens {
    /// Checks the tokens (non-empty, distinct texts and ids, ids below
    /// 2^31, flags naming a token) and builds the matchers; `normalized`
    /// tokens take their form under `normalizer`. `always`: special tokens
    /// are matched in every call; without it a special token cannot be
    /// `normalized` (it would be matched after the caller's choice).
    pub fn new(
        special: &[(String, u32)],
        plain: &[(String, u32)],
        flags: &[AddedTokenFlags],
        normalizer: Option<&Normalizer>,
        always: bool,
    ) -> Result<Self> {
        let mut table = AddedTokens::default();
        let tokens = special
            .iter()
            .map(|t| (t, true))
            .chain(plain.iter().map(|t| (t, false)));
        for ((content, id), is_special) in tokens {
            let kind = if is_special {
                "special token"
            } else {
                "added token"
            };
            if content.is_empty() {
                return Err(Error::invalid(format!("an {kind} is empty")));
            }
            if *id >= 1 << 31 {
                return Err(Error::invalid(format!(
                    "{kind} {content:?} has id {id}: ids must be below 2^31"
                )));
            }
            if table.by_content.contains_key(content) {
                return Err(Error::invalid(format!("{kind} {content:?} is given twice")));
            }
            if let Some(&other) = table.by_id.get(id) {
                return Err(Error::invalid(format!(
                    "added tokens {:?} and {content:?} have the same id {id}",
                    table.entries[other].flags.token
                )));
            }
            let index = table.entries.len();
            table.by_content.insert(content.clone(), index);
            table.by_id.insert(*id, index);
            table.entries.push(Entry {
                id: *id,
                special: is_special,
                text: content.clone(),
                flags: AddedTokenFlags {
                    token: content.clone(),
                    ..AddedTokenFlags::default()
                },
            });
        }
        for f in flags {
            let Some(&index) = table.by_content.get(&f.token) else {
                return Err(Error::invalid(format!(
                    "added-token flags name {:?}, which is no special or added token",
                    f.token
                )));
            };
            let entry = &mut table.entries[index];
            if f.normalized && entry.special && !always {
                return Err(Error::invalid(format!(
                    "special token {:?} is normalized, which only tokenizers that match their special tokens in every call (always_special) can have",
                    f.token
                )));
            }
            entry.flags = f.clone();
        }
        // Without a normalizer, tokens all matched in normalized text are
        // all matched in the text as given: one pass.
        let two_passes = normalizer.is_some() || table.entries.iter().any(|e| !e.flags.normalized);
        if let Some(normalizer) = normalizer {
            let mut normalized = Normalized::default();
            for entry in table.entries.iter_mut().filter(|e| e.flags.normalized) {
                normalizer.normalize_untracked(&entry.flags.token, &mut normalized)?;
                if normalized.as_str().is_empty() {
                    return Err(Error::invalid(format!(
                        "added token {:?} is normalized to nothing",
                        entry.flags.token
                    )));
                }
                entry.text = normalized.as_str().to_owned();
            }
        }
        let in_normalized = |e: &Entry| two_passes && e.flags.normalized;
        let build = |keep: &dyn Fn(&Entry) -> bool| {
            let chosen = (0..table.entries.len()).filter(|&i| keep(&table.entries[i]));
            Matcher::new(&table.entries, chosen)
        };
        let raw = build(&|e| !in_normalized(e))?;
        let raw_plain = build(&|e| !in_normalized(e) && !e.special)?;
        let normalized = build(&in_normalized)?;
        (table.raw, table.raw_plain, table.normalized) = (raw, raw_plain, normalized);
        Ok(table)
    }

    /// The id of the token `content`.
    pub fn id(&self, content: &str) -> Option<u32> {
        self.by_content.get(content).map(|&i| self.entries[i].id)
    }

    /// The text of token `id` (its normalized form for a `normalized` one).
    pub fn text(&self, id: u32) -> Option<&str> {
        self.by_id.get(&id).map(|&i| self.entries[i].text.as_str())
    }

    /// The special tokens' ids.
    pub fn special_ids(&self) -> impl Iterator<Item = u32> + '_ {
        self.entries.iter().filter(|e| e.special).map(|e| e.id)
    }

    /// One past the largest id, or 0.
    pub fn end_id(&self) -> u32 {
        self.entries.iter().map(|e| e.id + 1).max().unwrap_or(0)
    }

    /// Whether some token is matched in normalized text.
    pub fn has_normalized(&self) -> bool {
        self.normalized.is_some()
    }

    /// The matcher of the text as given: every token when `always`, else
    /// the plain ones and the special tokens `allowed`.
    pub fn raw_matcher(
        &self,
        allowed: &AllowedSpecial,
        always: bool,
    ) -> Result<Option<Cow<'_, Matcher>>> {
        if always {
            return Ok(self.raw.as_ref().map(Cow::Borrowed));
        }
        Ok(match allowed {
            AllowedSpecial::None => self.raw_plain.as_ref().map(Cow::Borrowed),
            AllowedSpecial::All => self.raw.as_ref().map(Cow::Borrowed),
            AllowedSpecial::Only(texts) => {
                let mut chosen = Vec::with_capacity(texts.len());
                for text in texts {
                    match self.by_content.get(text.as_str()) {
                        Some(&i) if self.entries[i].special => chosen.push(i),
                        _ => {
                            return Err(Error::invalid(format!(
                                "{text:?} is not a special token of this model"
                            )))
                        }
                    }
                }
                let raw = self.raw.as_ref().map_or(&[][..], |m| &m.entries[..]);
                let plain = raw
                    .iter()
                    .map(|&i| i as usize)
                    .filter(|&i| !self.entries[i].special);
                Matcher::new(&self.entries, chosen.into_iter().chain(plain))?.map(Cow::Owned)
            }
        })
    }

    /// The matcher of normalized text.
    pub fn normalized_matcher(&self) -> Option<&Matcher> {
        self.normalized.as_ref()
    }

    /// Cuts `text` at the tokens `matcher` finds, in text order (text
    /// segments may be empty), applying each token's flags as Hugging Face
    /// does: a `single_word` match touching a word character is passed
    /// over (its text stays in the text around it), a token takes the
    /// white space its `lstrip`/`rstrip` asks for, unless a token before
    /// took it.
    pub fn split<'t, E>(
        &self,
        text: &'t str,
        matcher: Option<&Matcher>,
        mut f: impl FnMut(Segment<'t>) -> std::result::Result<(), E>,
    ) -> std::result::Result<(), E> {
        let mut start = 0;
        if let Some(matcher) = matcher {
            for found in matcher.automaton.find_iter(text) {
                if found.start() < start {
                    continue; // inside the space a token before took
                }
                let entry = &self.entries[matcher.entries[found.pattern().as_usize()] as usize];
                let (mut from, mut to) = (found.start(), found.end());
                let flags = &entry.flags;
                if flags.any() {
                    if flags.single_word && !single_word(text, from, to) {
                        continue;
                    }
                    if flags.lstrip {
                        from = start + text[start..from].trim_end().len();
                    }
                    if flags.rstrip {
                        to = text.len() - text[to..].trim_start().len();
                    }
                }
                f(Segment::Text(&text[start..from]))?;
                f(Segment::Added {
                    id: entry.id,
                    span: from..to,
                })?;
                start = to;
            }
        }
        f(Segment::Text(&text[start..]))
    }
}

/// Whether bytes `from..to` of `text` stand as a whole word: no word
/// character (`\w`, Unicode) just before or just after.
fn single_word(text: &str, from: usize, to: usize) -> bool {
    let word = |c: Option<char>| c.is_some_and(regex_syntax::is_word_character);
    !word(text[..from].chars().next_back()) && !word(text[to..].chars().next())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(plain: &[(&str, u32)], flags: &[AddedTokenFlags]) -> AddedTokens {
        let plain: Vec<(String, u32)> = plain.iter().map(|&(t, i)| (t.to_owned(), i)).collect();
        AddedTokens::new(&[("<s>".to_owned(), 1)], &plain, flags, None, false).unwrap()
    }

    fn cut(table: &AddedTokens, text: &str, allowed: AllowedSpecial) -> Vec<String> {
        let matcher = table.raw_matcher(&allowed, false).unwrap();
        let mut out = Vec::new();
        table
            .split(text, matcher.as_deref(), |segment| -> Result<()> {
                out.push(match segment {
                    Segment::Text(t) => t.to_owned(),
                    Segment::Added { id, span } => format!("[{id}:{}]", &text[span]),
                });
                Ok(())
            })
            .unwrap();
        out
    }

    #[test]
    fn plain_tokens_are_matched_whatever_the_caller_allows() {
        let t = table(&[("foo", 7)], &[]);
        assert_eq!(
            cut(&t, "a foo<s>", AllowedSpecial::None),
            ["a ", "[7:foo]", "<s>"]
        );
        assert_eq!(
            cut(&t, "a foo<s>", AllowedSpecial::All),
            ["a ", "[7:foo]", "", "[1:<s>]", ""]
        );
        assert_eq!(
            cut(&t, "<s>foo", AllowedSpecial::Only(vec!["<s>".into()])),
            ["", "[1:<s>]", "", "[7:foo]", ""]
        );
        let matcher = t.raw_matcher(&AllowedSpecial::Only(vec!["foo".into()]), false);
        assert!(
            matcher.is_err(),
            "a plain token is not a special one to allow"
        );
    }

    #[test]
    fn single_word_tokens_stand_alone_and_strips_take_white_space() {
        let flags = [
            AddedTokenFlags {
                token: "bar".into(),
                single_word: true,
                ..Default::default()
            },
            AddedTokenFlags {
                token: "<m>".into(),
                lstrip: true,
                rstrip: true,
                ..Default::default()
            },
        ];
        let t = table(&[("bar", 7), ("<m>", 8)], &flags);
        let all = || AllowedSpecial::None;
        assert_eq!(
            cut(&t, "xbar bar. bar_", all()),
            ["xbar ", "[7:bar]", ". bar_"]
        );
        assert_eq!(cut(&t, "é bar", all()), ["é ", "[7:bar]", ""]);
        assert_eq!(cut(&t, "a  <m>  b", all()), ["a", "[8:  <m>  ]", "b"]);
    }

    #[test]
    fn bad_tokens_are_named() {
        let twice = AddedTokens::new(&[("<s>".into(), 1)], &[("<s>".into(), 2)], &[], None, false);
        assert!(twice.err().unwrap().to_string().contains("given twice"));
        let same_id = AddedTokens::new(&[("<s>".into(), 1)], &[("a".into(), 1)], &[], None, false);
        assert!(same_id.err().unwrap().to_string().contains("same id 1"));
        let flags = [AddedTokenFlags {
            token: "zz".into(),
            ..Default::default()
        }];
        let unknown = AddedTokens::new(&[], &[], &flags, None, false);
        assert!(unknown.err().unwrap().to_string().contains("\"zz\""));
    }
}
