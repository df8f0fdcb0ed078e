"""Normalizers: the steps that rewrite text before it is cut into pieces,
each keeping track of where every character came from.

Steps with Hugging Face ``tokenizers``' names and settings (the text they
make is the same as theirs, and they are saved in the same form):

- :class:`NFC`, :class:`NFD`, :class:`NFKC`, :class:`NFKD`: the Unicode
  normalization forms;
- :class:`Lowercase`: full lowercase mapping of each character;
- :class:`StripAccents`: removes combining marks (category M) without
  decomposing (put :class:`NFD` or :class:`NFKD` before it);
- :class:`Strip`: white space at the start and/or the end;
- :class:`Replace`: every match of a string or regular expression becomes
  ``content``;
- :class:`Prepend`: a prefix before non-empty text;
- :class:`BertNormalizer`: BERT's cleaning, CJK spacing, accent stripping
  and lowercasing;
- :class:`Precompiled`: a SentencePiece model's compiled normalization
  rules (its ``precompiled_charsmap``), applied as Hugging Face does;

polytok's own:

- :class:`HalfWidth`: full-width ASCII forms to ASCII, full-width katakana
  to half-width;
- :class:`FullWidth`: ASCII to full-width forms, half-width katakana to
  full-width (sound marks composed);
- :class:`Whitespace`: strip, collapse and unify white space;
- :class:`RemoveExtraWhitespaces`: SentencePiece's space clean-up;
- :class:`RemoveControl`: drop control and format characters;
- :class:`SentencePieceCharsmap`: a SentencePiece model's compiled rules,
  applied as SentencePiece does (the first step of a ``.model``'s
  pipeline);
- :class:`Sequence`: several steps in order.

Each step has ``normalize_str(text)``, the normalized text, and
``normalize(text)``, which also gives for each normalized character the
``(start, end)`` offsets of the characters of ``text`` it stands for: an
expanded character (``ﬁ`` → ``fi``) gives each part its whole span, merged
characters (NFC, a replaced match) the union of theirs, and an inserted
character (a prefix, BERT's spaces around ideographs) the empty span at its
place.

>>> NFKC().normalize("ﬁ")
('fi', [(0, 1), (0, 1)])
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from polytok import _core
from polytok._component import Component, build_steps, check_bool, check_steps, check_str

__all__ = [
    "BertNormalizer",
    "FullWidth",
    "HalfWidth",
    "Lowercase",
    "NFC",
    "NFD",
    "NFKC",
    "NFKD",
    "Normalizer",
    "Precompiled",
    "Prepend",
    "RemoveControl",
    "RemoveExtraWhitespaces",
    "Replace",
    "SentencePieceCharsmap",
    "Sequence",
    "Strip",
    "StripAccents",
    "Whitespace",
]


class Normalizer(Component):
    """A normalization step (the base class; see the module's list)."""

    kind = "normalizer"

    def normalize_str(self, text: str) -> str:
        """``text`` normalized."""
        return self.normalize(text)[0]

    def normalize(self, text: str) -> tuple[str, list[tuple[int, int]]]:
        """``text`` normalized, and for each of its characters the
        ``(start, end)`` offsets in ``text`` of what it stands for."""
        check_str(type(self).__name__, "text", text)
        return _core.normalize(json.dumps(self.to_dict()), text)


class _NoSettings(Normalizer):
    kind = "normalizer"  # not registered: a base for the steps without settings

    def __init__(self) -> None:
        pass


class NFC(_NoSettings):
    """Unicode canonical composition (NFC)."""


class NFD(_NoSettings):
    """Unicode canonical decomposition (NFD)."""


class NFKC(_NoSettings):
    """Unicode compatibility composition (NFKC): ``ﬁ`` → ``fi``, ``Ａ`` → ``A``."""


class NFKD(_NoSettings):
    """Unicode compatibility decomposition (NFKD)."""


class Lowercase(_NoSettings):
    """Each character's full lowercase mapping (``İ`` → ``i̇``)."""


class StripAccents(_NoSettings):
    """Removes combining marks (category M: nonspacing, spacing and
    enclosing, so Indic vowel signs too), as Hugging Face's
    ``StripAccents``. It does not decompose: after :class:`NFD` it turns
    ``é`` into ``e``, alone it leaves a precomposed ``é`` as it is."""


class Strip(Normalizer):
    """Removes white space (Unicode White_Space) at the start
    (``strip_left``) and/or the end (``strip_right``)."""

    _fields = ("strip_left", "strip_right")

    def __init__(self, *, strip_left: bool = True, strip_right: bool = True) -> None:
        self.strip_left = check_bool("Strip", "strip_left", strip_left)
        self.strip_right = check_bool("Strip", "strip_right", strip_right)


class Replace(Normalizer):
    """Replaces every match of ``pattern`` by ``content`` (taken literally).

    ``pattern`` is a plain string, or ``{"Regex": r}`` for a regular
    expression (Rust ``fancy_regex`` syntax: ``\\p{L}`` classes, look-around),
    or ``{"String": s}``; it is saved in the latter forms.
    """

    _fields = ("pattern", "content")

    def __init__(self, *, pattern: str | dict[str, str], content: str) -> None:
        if isinstance(pattern, str):
            pattern = {"String": pattern}
        if (
            not isinstance(pattern, dict)
            or len(pattern) != 1
            or next(iter(pattern)) not in ("String", "Regex")
        ):
            raise ValueError(f'Replace: pattern must be a str, {{"String": s}} or {{"Regex": r}}, not {pattern!r}')
        check_str("Replace", "pattern", next(iter(pattern.values())))
        self.pattern = dict(pattern)
        self.content = check_str("Replace", "content", content)
        # Checked now (an invalid regular expression raises ValueError).
        _core.normalize(json.dumps(self.to_dict()), "")


class Prepend(Normalizer):
    """Puts ``prepend`` before the text, unless the text is empty."""

    _fields = ("prepend",)

    def __init__(self, *, prepend: str) -> None:
        self.prepend = check_str("Prepend", "prepend", prepend)


class BertNormalizer(Normalizer):
    """BERT's normalization: ``clean_text`` drops control characters and
    makes white space a space, ``handle_chinese_chars`` puts spaces around
    CJK ideographs, ``strip_accents`` removes accents after NFD (``None``:
    when ``lowercase``), ``lowercase`` lowercases."""

    _fields = ("clean_text", "handle_chinese_chars", "strip_accents", "lowercase")

    def __init__(
        self,
        *,
        clean_text: bool = True,
        handle_chinese_chars: bool = True,
        strip_accents: bool | None = None,
        lowercase: bool = True,
    ) -> None:
        self.clean_text = check_bool("BertNormalizer", "clean_text", clean_text)
        self.handle_chinese_chars = check_bool("BertNormalizer", "handle_chinese_chars", handle_chinese_chars)
        if strip_accents is not None:
            check_bool("BertNormalizer", "strip_accents", strip_accents)
        self.strip_accents = strip_accents
        self.lowercase = check_bool("BertNormalizer", "lowercase", lowercase)


class _Charsmap(Normalizer):
    kind = "normalizer"  # not registered: the base of Precompiled and SentencePieceCharsmap
    _fields: tuple[str, ...] = ("precompiled_charsmap",)
    precompiled_charsmap: bytes

    def _set_charsmap(self, precompiled_charsmap: bytes) -> None:
        name = type(self).__name__
        if not isinstance(precompiled_charsmap, (bytes, bytearray)):
            raise TypeError(f"{name}: precompiled_charsmap must be bytes, not {type(precompiled_charsmap).__name__}")
        self.precompiled_charsmap = bytes(precompiled_charsmap)

    def _check(self) -> None:
        # Checked now: a damaged charsmap raises ValueError naming the problem.
        _core.normalize(json.dumps(self.to_dict()), "")

    def to_dict(self) -> dict[str, Any]:
        """The step as saved in tokenizer files, the charsmap in standard base64."""
        out = super().to_dict()
        out["precompiled_charsmap"] = base64.b64encode(self.precompiled_charsmap).decode("ascii")
        return out

    @classmethod
    def _from_settings(cls, settings: dict[str, Any]) -> Normalizer:
        encoded = settings.get("precompiled_charsmap")
        if not isinstance(encoded, str):
            raise ValueError(f"{cls.__name__}: precompiled_charsmap must be a base64 string, not {encoded!r}")
        try:
            blob = base64.b64decode(encoded, validate=True)
        except binascii.Error as e:
            raise ValueError(f"{cls.__name__}: precompiled_charsmap is not base64: {e}") from None
        return cls(**{**settings, "precompiled_charsmap": blob})

    def __repr__(self) -> str:
        others = "".join(f", {f}={getattr(self, f)!r}" for f in self._fields[1:])
        return f"{type(self).__name__}(precompiled_charsmap=<{len(self.precompiled_charsmap)} bytes>{others})"


class Precompiled(_Charsmap):
    """A SentencePiece model's compiled normalization rules (the
    ``precompiled_charsmap`` of its ``.model``), applied as Hugging Face's
    ``Precompiled`` does: the text is cut into grapheme clusters; a cluster
    shorter than 6 bytes that some rule is a prefix of becomes the
    replacement of the shortest such rule, whole; the characters of longer
    clusters are looked up one by one. SentencePiece itself applies the
    longest rule at each position (:class:`SentencePieceCharsmap`); the two
    differ on rare text (a character with combining marks after it)."""

    def __init__(self, *, precompiled_charsmap: bytes) -> None:
        self._set_charsmap(precompiled_charsmap)
        self._check()


class SentencePieceCharsmap(_Charsmap):
    """A SentencePiece model's compiled normalization rules, applied as
    SentencePiece does: at each position, the longest of the ``kept`` texts
    (the model's user-defined pieces) that starts there is kept as it is,
    else the longest rule that starts there replaces what it matches, else a
    character is copied. SentencePiece's whitespace handling is not part of
    it (:class:`RemoveExtraWhitespaces` and the like follow it in a
    ``.model``'s pipeline)."""

    _fields = ("precompiled_charsmap", "kept")

    def __init__(self, *, precompiled_charsmap: bytes, kept: list[str] | tuple[str, ...] = ()) -> None:
        self._set_charsmap(precompiled_charsmap)
        if isinstance(kept, str) or not isinstance(kept, (list, tuple)):
            raise TypeError(f"SentencePieceCharsmap: kept must be a list of str, not {type(kept).__name__}")
        self.kept = [check_str("SentencePieceCharsmap", f"kept[{i}]", piece) for i, piece in enumerate(kept)]
        self._check()


class _Widths(Normalizer):
    kind = "normalizer"  # not registered: the base of HalfWidth and FullWidth
    _fields = ("ascii", "katakana")

    def __init__(self, *, ascii: bool = True, katakana: bool = True) -> None:
        name = type(self).__name__
        self.ascii = check_bool(name, "ascii", ascii)
        self.katakana = check_bool(name, "katakana", katakana)


class HalfWidth(_Widths):
    """Makes characters half-width: with ``ascii``, full-width ASCII forms
    (U+FF01–U+FF5E) become ASCII and the ideographic space U+3000 a space;
    with ``katakana``, full-width katakana and the CJK punctuation that has
    half-width forms (``。「」、・ー``) become half-width forms, a voiced kana
    two of them (``ガ`` → ``ｶﾞ``).

    The usual folding of Japanese text is ``HalfWidth(katakana=False)``
    followed by ``FullWidth(ascii=False)``."""


class FullWidth(_Widths):
    """Makes characters full-width: with ``ascii``, printable ASCII becomes
    the full-width forms and the space U+3000; with ``katakana``, half-width
    katakana (U+FF61–U+FF9F) become full-width, a sound mark ``ﾞ``/``ﾟ``
    composed with the kana before it where Unicode has the composed kana
    (``ｶﾞ`` → ``ガ``), otherwise the spacing mark ``゛``/``゜``."""


class Whitespace(Normalizer):
    """Cleans up white space. White space is ASCII's (space, tab, LF, VT,
    FF, CR) and, with ``unicode_spaces``, every Unicode White_Space
    character (no-break space, ideographic space, ...), each of which then
    becomes a space. ``strip`` removes white space at both ends;
    ``collapse`` makes each run of it one space (a newline too)."""

    _fields = ("strip", "collapse", "unicode_spaces")

    def __init__(self, *, strip: bool = True, collapse: bool = True, unicode_spaces: bool = True) -> None:
        self.strip = check_bool("Whitespace", "strip", strip)
        self.collapse = check_bool("Whitespace", "collapse", collapse)
        self.unicode_spaces = check_bool("Whitespace", "unicode_spaces", unicode_spaces)


class RemoveExtraWhitespaces(Normalizer):
    """SentencePiece's ``remove_extra_whitespaces``: spaces (U+0020 only)
    are dropped at the start and the end, and each run of them inside
    becomes one. With ``trailing_metaspace`` (the default), ``▁`` at the
    end is dropped with the spaces there, as SentencePiece does (it trims
    the end after writing spaces as ``▁``)."""

    _fields = ("trailing_metaspace",)

    def __init__(self, *, trailing_metaspace: bool = True) -> None:
        self.trailing_metaspace = check_bool("RemoveExtraWhitespaces", "trailing_metaspace", trailing_metaspace)


class RemoveControl(Normalizer):
    """Removes control and format characters (categories Cc and Cf) except
    tab, LF and CR; with ``keep_joiners`` (the default) the zero-width
    non-joiner and joiner (U+200C, U+200D) stay, as they spell words in
    Indic and Arabic scripts and join emoji."""

    _fields = ("keep_joiners",)

    def __init__(self, *, keep_joiners: bool = True) -> None:
        self.keep_joiners = check_bool("RemoveControl", "keep_joiners", keep_joiners)


class Sequence(Normalizer):
    """Several normalizers, applied in order."""

    _fields = ("normalizers",)

    def __init__(self, *, normalizers: list[Normalizer]) -> None:
        self.normalizers = check_steps("Sequence", "normalizers", normalizers, Normalizer)

    @classmethod
    def _from_settings(cls, settings: dict[str, Any]) -> Sequence:
        return cls(normalizers=build_steps("Sequence", "normalizers", settings, "normalizer"))
