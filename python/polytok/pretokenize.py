"""Pre-tokenization: how text is cut into pieces before BPE."""

from __future__ import annotations

from polytok import _core

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
