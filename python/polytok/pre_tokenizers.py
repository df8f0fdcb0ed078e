"""Pre-tokenizers: how normalized text is cut into the pieces a model
encodes one by one.

Components (compose them with :class:`Sequence`):

- :class:`Pattern`: the matches of a pattern and the text between them:
  tiktoken's presets ``gpt2``, ``cl100k``, ``o200k`` (exactly as tiktoken
  splits), ``none``, or a regular expression (byte-level BPE's step);
- :class:`BertPreTokenizer`: split at white space (dropped) and around
  every punctuation character, as BERT;
- :class:`Whitespace`: runs of word characters and runs of other visible
  characters (``\\w+|[^\\w\\s]+``); :class:`WhitespaceSplit`: split at white
  space; :class:`Punctuation`: each punctuation character alone;
  :class:`Digits`: digits apart, one by one or in runs;
- :class:`Metaspace`: SentencePiece's ``▁`` (U+2581): spaces become ``▁``,
  a ``▁`` is put in front (always, on the first piece, or never), and the
  text is cut before each ``▁`` (or not at all, as SentencePiece).

The work runs in Rust; :meth:`PreTokenizer.pre_tokenize_str` shows the
pieces of a text with their character offsets.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from polytok import _core
from polytok._component import Component, build_steps, check_bool, check_char, check_steps

#: Preset patterns, split exactly as tiktoken's patterns of the same names.
PRESETS = ("gpt2", "cl100k", "o200k")


def pretokenize(text: str, pattern: str = "cl100k") -> list[str]:
    """Cut ``text`` into pieces.

    ``pattern`` is a preset (``gpt2``, ``cl100k``, ``o200k``), ``none`` (the
    whole text is one piece; training then counts each line as a piece) or
    a regular expression. Text a regular expression does not match is kept
    as pieces of its own, so the pieces always join back to ``text``.
    """
    return _core.pretokenize(text, pattern)


def pattern_regex(pattern: str) -> str | None:
    """The regular expression behind a pattern (tiktoken's for a preset)."""
    return _core.pattern_regex(pattern)


class PreTokenizer(Component):
    """A pre-tokenization step."""

    kind = "pre_tokenizer"

    def pre_tokenize_str(self, text: str) -> list[tuple[str, tuple[int, int]]]:
        """The pieces of ``text``, each with its character ``(start, end)``
        in ``text``."""
        return _core.pre_tokenize(json.dumps(self.to_dict()), text)


class Pattern(PreTokenizer):
    """Pieces are the matches of ``pattern`` and the text between them: a
    preset (``gpt2``, ``cl100k``, ``o200k``), ``none`` or a regular
    expression (``\\p{...}`` classes and look-around work)."""

    _fields = ("pattern",)

    def __init__(self, pattern: str = "cl100k") -> None:
        if not isinstance(pattern, str):
            raise TypeError(f"pattern must be a str, not {type(pattern).__name__}")
        _core.pretokenize("", pattern)  # a bad pattern fails here, named
        self.pattern = pattern


class BertPreTokenizer(PreTokenizer):
    """BERT's: split at white space (dropped) and around each punctuation
    character (ASCII punctuation and Unicode's P* categories)."""


class Whitespace(PreTokenizer):
    """Runs of word characters and runs of other non-space characters
    (``\\w+|[^\\w\\s]+``); white space is dropped."""


class WhitespaceSplit(PreTokenizer):
    """Split at white space, which is dropped."""


class Punctuation(PreTokenizer):
    """Each punctuation character is a piece of its own."""


class Digits(PreTokenizer):
    """Digits (Unicode numeric characters) apart from the rest: each digit alone
    (``individual_digits``) or runs of digits."""

    _fields = ("individual_digits",)

    def __init__(self, individual_digits: bool = False) -> None:
        self.individual_digits = check_bool("Digits", "individual_digits", individual_digits)


PrependScheme = Literal["always", "first", "never"]


class Metaspace(PreTokenizer):
    """SentencePiece's whitespace: spaces become ``replacement`` (``▁``,
    U+2581); a ``replacement`` is put in front of a piece that lacks one,
    as ``prepend_scheme`` says (``"always"``: every text between special
    tokens; ``"first"``: the start of the text only, SentencePiece's dummy
    prefix; ``"never"``); with ``split``, pieces are cut before each
    ``replacement`` (SentencePiece does not cut: ``split=False``)."""

    _fields = ("replacement", "prepend_scheme", "split")

    def __init__(self, replacement: str = "\u2581", prepend_scheme: PrependScheme = "always", split: bool = True) -> None:
        check_char("Metaspace", "replacement", replacement)
        if prepend_scheme not in ("always", "first", "never"):
            raise ValueError(f"prepend_scheme must be 'always', 'first' or 'never', not {prepend_scheme!r}")
        self.replacement = replacement
        self.prepend_scheme = prepend_scheme
        self.split = check_bool("Metaspace", "split", split)


class Sequence(PreTokenizer):
    """Steps applied one after another, each to the pieces of the last."""

    _fields = ("pretokenizers",)

    def __init__(self, pretokenizers: list[PreTokenizer]) -> None:
        self.pretokenizers = check_steps("Sequence", "pretokenizers", pretokenizers, PreTokenizer)

    @classmethod
    def _from_settings(cls, settings: dict[str, Any]) -> Sequence:
        return cls(build_steps("Sequence", "pretokenizers", settings, "pre_tokenizer"))
