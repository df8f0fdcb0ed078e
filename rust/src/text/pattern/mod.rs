//! Pre-tokenization: cutting text into the pieces that BPE then encodes one by
//! one (a piece is never merged with its neighbours).
//!
//! The presets split text exactly as tiktoken's patterns of the same names.
//! Those patterns contain one lookahead, `\s+(?!\S)` ("a run of white space,
//! less its last character if a non-space follows"), which a finite-automaton
//! engine cannot express. We match `\s+` instead and give the last character
//! back afterwards ([`TrimRule`]): that is exact, because `\s+` is greedy and
//! the alternatives before it already took every other case (see the comments
//! on each preset). Patterns given by the user go to the `regex` engine when
//! they can and to `fancy-regex` (backtracking) when they use look-around.
//!
//! Text that a user pattern does not match is kept as a piece of its own, so
//! that encoding never drops text (tiktoken drops it).

mod blocks;
mod scanner;

use regex_automata::{meta, Anchored, Input};

use crate::error::{Error, Result};

/// tiktoken's `gpt2` / `r50k_base` pattern, as published.
pub const GPT2_PATTERN: &str =
    r"'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s";
/// tiktoken's `cl100k_base` pattern, as published.
pub const CL100K_PATTERN: &str = r"'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s";
/// tiktoken's `o200k_base` pattern, as published.
pub const O200K_PATTERN: &str = concat!(
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    r"|\p{N}{1,3}",
    r"| ?[^\s\p{L}\p{N}]+[\r\n/]*",
    r"|\s*[\r\n]+",
    r"|\s+(?!\S)",
    r"|\s+",
);

// The same patterns for a finite-automaton engine: possessive quantifiers
// made greedy (no alternative can backtrack into them, so the matches are the
// same) and `\s+(?!\S)` replaced by `\s+` plus a `TrimRule`.
const GPT2_AUTOMATON: &str = r"'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+$|\s+";
const CL100K_AUTOMATON: &str = r"'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s+$|\s*[\r\n]|\s+";
const O200K_AUTOMATON: &str = concat!(
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    r"|\p{N}{1,3}",
    r"| ?[^\s\p{L}\p{N}]+[\r\n/]*",
    r"|\s*[\r\n]+",
    r"|\s+",
);

/// How text is cut into pieces.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Pattern {
    Gpt2,
    Cl100k,
    O200k,
    /// A user-supplied regular expression.
    Regex(String),
    /// No pre-tokenization: the whole text is one piece (training counts
    /// each line, with its line break, as a piece).
    Whole,
}

impl Pattern {
    /// `gpt2`, `cl100k`, `o200k`, `none`, or else a regular expression. A
    /// name that is no preset (letters, digits, `_` and `-` only) is an
    /// error, not a regular expression that would match itself: a typo
    /// (`cl100K`) must not silently turn off pre-tokenization.
    pub fn parse(spec: &str) -> Result<Pattern> {
        Ok(match spec {
            "gpt2" | "r50k" => Pattern::Gpt2,
            "cl100k" => Pattern::Cl100k,
            "o200k" => Pattern::O200k,
            "none" => Pattern::Whole,
            name if name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-') => {
                return Err(Error::invalid(format!(
                    "unknown pattern preset {name:?}: the presets are gpt2, cl100k, o200k and none (or give a regular expression)"
                )))
            }
            regex => Pattern::Regex(regex.to_owned()),
        })
    }

    /// The name of a preset, or the regular expression, or `none`.
    pub fn spec(&self) -> &str {
        match self {
            Pattern::Gpt2 => "gpt2",
            Pattern::Cl100k => "cl100k",
            Pattern::O200k => "o200k",
            Pattern::Regex(re) => re,
            Pattern::Whole => "none",
        }
    }

    /// The regular expression itself (for a preset, tiktoken's), if any.
    pub fn regex(&self) -> Option<&str> {
        match self {
            Pattern::Gpt2 => Some(GPT2_PATTERN),
            Pattern::Cl100k => Some(CL100K_PATTERN),
            Pattern::O200k => Some(O200K_PATTERN),
            Pattern::Regex(re) => Some(re),
            Pattern::Whole => None,
        }
    }
}

/// When a `\s+` match has to give its last character back (emulating
/// `\s+(?!\S)`): it ends in white space, more text follows, and it is longer
/// than one character (a single space before a non-space is what the `\s`
/// alternative matches anyway).
#[derive(Clone, Copy, Debug)]
enum TrimRule {
    /// No lookahead to emulate.
    Never,
    /// Any trailing white space (gpt2: no newline rule precedes `\s+`).
    AnySpace,
    /// Trailing white space other than `\r` and `\n`: matches that end in a
    /// newline come from the `\s*[\r\n]` alternative (cl100k, o200k), which
    /// precedes `\s+` and so takes every run that contains a newline.
    SpaceExceptNewline,
}

enum Engine {
    /// The hand-written scanner of a preset (the fast path).
    Scanner(scanner::Preset),
    Automaton {
        regex: meta::Regex,
        trim: TrimRule,
    },
    Backtracking(fancy_regex::Regex),
    Whole,
}

/// Cuts text into pieces according to a [`Pattern`].
pub struct PreTokenizer {
    pattern: Pattern,
    engine: Engine,
}

impl PreTokenizer {
    pub fn new(pattern: Pattern) -> Result<Self> {
        let engine = match &pattern {
            Pattern::Gpt2 => Engine::Scanner(scanner::Preset::Gpt2),
            Pattern::Cl100k => Engine::Scanner(scanner::Preset::Cl100k),
            Pattern::O200k => Engine::Scanner(scanner::Preset::O200k),
            Pattern::Regex(re) => compile_user_regex(re)?,
            Pattern::Whole => Engine::Whole,
        };
        Ok(PreTokenizer { pattern, engine })
    }

    /// The same pattern matched by the `regex` engine instead of the
    /// hand-written scanner: the reference the scanner is tested against.
    pub fn automaton(pattern: Pattern) -> Result<Self> {
        let (source, trim) = match &pattern {
            Pattern::Gpt2 => (GPT2_AUTOMATON, TrimRule::AnySpace),
            Pattern::Cl100k => (CL100K_AUTOMATON, TrimRule::SpaceExceptNewline),
            Pattern::O200k => (O200K_AUTOMATON, TrimRule::SpaceExceptNewline),
            _ => return PreTokenizer::new(pattern),
        };
        let regex = meta::Regex::new(source).expect("preset patterns compile");
        Ok(PreTokenizer {
            pattern,
            engine: Engine::Automaton { regex, trim },
        })
    }

    pub fn pattern(&self) -> &Pattern {
        &self.pattern
    }

    /// Calls `f` with each piece of `text`, in order; the pieces concatenate
    /// to `text`.
    pub fn for_each_piece<'t>(&self, text: &'t str, mut f: impl FnMut(&'t str)) -> Result<()> {
        match &self.engine {
            Engine::Scanner(preset) => {
                scanner::for_each_piece(*preset, text, f);
                Ok(())
            }
            Engine::Automaton { regex, trim } => {
                automaton_pieces(regex, *trim, text, f);
                Ok(())
            }
            Engine::Backtracking(regex) => backtracking_pieces(regex, text, f),
            Engine::Whole => {
                if !text.is_empty() {
                    f(text);
                }
                Ok(())
            }
        }
    }

    /// Byte positions of `text`, at least `every` bytes apart, where the
    /// pieces are sure to end: the parts of the text cut there split into
    /// the pieces of the whole (see `scanner::cuts`). None for a pattern
    /// that makes no such promise (a user's regular expression).
    pub fn cuts(&self, text: &str, every: usize) -> Vec<usize> {
        match &self.engine {
            Engine::Scanner(_) => scanner::cuts(text, every),
            _ => Vec::new(),
        }
    }

    /// The pieces of `text` as a vector (for tests and inspection).
    pub fn split<'t>(&self, text: &'t str) -> Result<Vec<&'t str>> {
        let mut pieces = Vec::new();
        self.for_each_piece(text, |p| pieces.push(p))?;
        Ok(pieces)
    }
}

fn compile_user_regex(source: &str) -> Result<Engine> {
    match meta::Regex::new(source) {
        Ok(regex) => Ok(Engine::Automaton {
            regex,
            trim: TrimRule::Never,
        }),
        // Look-around and back-references need a backtracking engine.
        Err(_) => fancy_regex::Regex::new(source)
            .map(Engine::Backtracking)
            .map_err(|e| {
                Error::invalid(format!("invalid pre-tokenization pattern {source:?}: {e}"))
            }),
    }
}

fn automaton_pieces<'t>(
    regex: &meta::Regex,
    trim: TrimRule,
    text: &'t str,
    mut f: impl FnMut(&'t str),
) {
    let mut pos = 0;
    while pos < text.len() {
        let anchored = Input::new(text).range(pos..).anchored(Anchored::Yes);
        let end = match regex.search(&anchored) {
            Some(m) if m.end() > pos => trimmed_end(text, pos, m.end(), trim),
            _ => {
                // Nothing (or only the empty string) matches here: the text up
                // to the next non-empty match is a piece of its own.
                let unanchored = Input::new(text).range(pos..);
                let next = regex
                    .find_iter(unanchored)
                    .find(|m| m.end() > m.start())
                    .map_or(text.len(), |m| m.start());
                next.max(next_char_boundary(text, pos))
            }
        };
        f(&text[pos..end]);
        pos = end;
    }
}

fn trimmed_end(text: &str, start: usize, end: usize, trim: TrimRule) -> usize {
    if end == text.len() {
        return end;
    }
    let Some(last) = text[start..end].chars().next_back() else {
        return end;
    };
    let last_start = end - last.len_utf8();
    let gives_back = match trim {
        TrimRule::Never => false,
        TrimRule::AnySpace => last.is_whitespace(),
        TrimRule::SpaceExceptNewline => last.is_whitespace() && last != '\r' && last != '\n',
    };
    if gives_back && last_start > start {
        last_start
    } else {
        end
    }
}

fn backtracking_pieces<'t>(
    regex: &fancy_regex::Regex,
    text: &'t str,
    mut f: impl FnMut(&'t str),
) -> Result<()> {
    let mut pos = 0;
    while pos < text.len() {
        let found = regex
            .find_from_pos(text, pos)
            .map_err(|e| Error::invalid(format!("pre-tokenization pattern failed: {e}")))?;
        let (start, end) = match found {
            Some(m) if m.end() > m.start() => (m.start(), m.end()),
            // An empty match: step over one character and look again.
            Some(m) if m.start() < text.len() => {
                let step = next_char_boundary(text, m.start());
                (m.start().max(pos), step)
            }
            _ => (text.len(), text.len()),
        };
        if start > pos {
            f(&text[pos..start]);
        }
        if end > start {
            f(&text[start..end]);
        }
        pos = end.max(start);
    }
    Ok(())
}

fn next_char_boundary(text: &str, pos: usize) -> usize {
    let mut next = pos + 1;
    while next < text.len() && !text.is_char_boundary(next) {
        next += 1;
    }
    next.min(text.len())
}

#[cfg(test)]
mod tests;
