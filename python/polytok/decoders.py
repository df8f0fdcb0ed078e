"""Decoders: the last step of a tokenizer, from tokens back to text.

Each step has Hugging Face ``tokenizers``' name and settings (and is saved
as its ``tokenizer.json`` saves it), and maps a list of tokens to a list of
tokens; :meth:`Decoder.decode` joins the last list into text. A token is
bytes (a byte-level BPE token's raw bytes) or text (``"##ing"``, ``"▁the"``,
``"<0xE3>"``), which stands for its UTF-8 bytes.

:class:`DecodeStream` turns ids that come one at a time, as a model
generates them, into text that comes in whole characters.
"""

from __future__ import annotations

import json
from collections.abc import Sequence as Seq
from typing import Any, ClassVar, Literal, Protocol

from polytok import _core
from polytok._component import Component, build_steps, check_bool, check_char, check_count, check_steps, check_str

PrependScheme = Literal["always", "first", "never"]


class Decoder(Component):
    """A decoding step (see the module's documentation)."""

    kind: ClassVar[str] = "decoder"

    def to_json(self) -> str:
        """The step as JSON, as tokenizer files hold it."""
        return json.dumps(self.to_dict(), ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str) -> Decoder:
        """The step that :meth:`to_json` (or Hugging Face) wrote."""
        return cls.from_dict(json.loads(text))  # type: ignore[return-value]

    def decode(self, tokens: Seq[str | bytes]) -> str:
        """The text of ``tokens`` (bytes that are not UTF-8 become U+FFFD)."""
        if isinstance(tokens, (str, bytes)):
            raise TypeError(f"tokens must be a list of str or bytes, not {type(tokens).__name__}")
        data = []
        for token in tokens:
            if isinstance(token, str):
                data.append(token.encode("utf-8", "surrogatepass"))
            elif isinstance(token, (bytes, bytearray, memoryview)):
                data.append(bytes(token))
            else:
                raise TypeError(f"each token must be str or bytes, not {token!r}")
        return _core.decode_tokens(self.to_json(), data)

    @property
    def stream_lookahead(self) -> int:
        """How many tokens a :class:`DecodeStream` waits before it returns a
        token's text with this decoder (0 unless a step changes the text
        before a token, as WordPiece's cleanup)."""
        return _core.decoder_stream_lookahead(self.to_json())


class ByteLevel(Decoder):
    """Joins the tokens' bytes. The settings are those of Hugging Face's
    ByteLevel (which is a pre-tokenizer too), kept for its files: they do
    not change decoding."""

    _fields = ("add_prefix_space", "trim_offsets", "use_regex")

    def __init__(self, *, add_prefix_space: bool = True, trim_offsets: bool = True, use_regex: bool = True) -> None:
        self.add_prefix_space = check_bool("ByteLevel", "add_prefix_space", add_prefix_space)
        self.trim_offsets = check_bool("ByteLevel", "trim_offsets", trim_offsets)
        self.use_regex = check_bool("ByteLevel", "use_regex", use_regex)


class WordPiece(Decoder):
    """WordPiece's decoder: a token that starts with ``prefix`` joins the
    one before it without the prefix; any other token after the first comes
    after a space. ``cleanup`` then removes the space before punctuation and
    in English contractions, on the whole text, as BERT (``transformers``)
    and :meth:`polytok.WordPieceTokenizer.decode` do; with ``each_token``,
    on each token apart, as Hugging Face's decoder step (``"don", "'",
    "t"`` give "don ' t" there, "don't" here; tokenizers read from
    ``tokenizer.json`` files decode so)."""

    _fields = ("prefix", "cleanup", "each_token")

    def __init__(self, *, prefix: str = "##", cleanup: bool = True, each_token: bool = False) -> None:
        self.prefix = check_str("WordPiece", "prefix", prefix)
        self.cleanup = check_bool("WordPiece", "cleanup", cleanup)
        self.each_token = check_bool("WordPiece", "each_token", each_token)

    def to_dict(self) -> dict[str, Any]:
        # Without each_token when it is off: the files of earlier versions.
        out = super().to_dict()
        if not self.each_token:
            del out["each_token"]
        return out


class Metaspace(Decoder):
    """``replacement`` (``▁``) back to spaces. When the pre-tokenizer puts
    one in front of the text (``prepend_scheme`` "always" or "first"), the
    first token loses its replacement characters instead, as in Hugging
    Face. ``split`` matters to the pre-tokenizer only."""

    _fields = ("replacement", "prepend_scheme", "split")

    def __init__(self, *, replacement: str = "▁", prepend_scheme: PrependScheme = "always", split: bool = True) -> None:
        self.replacement = check_char("Metaspace", "replacement", replacement)
        check_str("Metaspace", "prepend_scheme", prepend_scheme)
        if prepend_scheme not in ("always", "first", "never"):
            raise ValueError(
                f"Metaspace: prepend_scheme must be 'always', 'first' or 'never', not {prepend_scheme!r}"
            )
        self.prepend_scheme = prepend_scheme
        self.split = check_bool("Metaspace", "split", split)


class ByteFallback(Decoder):
    """Tokens ``<0xNN>`` become the byte 0xNN. Each run of them becomes
    text, each byte that is not part of a valid UTF-8 character U+FFFD (as
    SentencePiece; Hugging Face makes every byte of such a run U+FFFD, so
    the two agree on runs of whole characters)."""

    def __init__(self) -> None:
        pass


class Fuse(Decoder):
    """All tokens into one."""

    def __init__(self) -> None:
        pass


class Join(Decoder):
    """All tokens into one, with ``separator`` between each two: what
    Hugging Face does without a decoder (``" "``), so that its files with
    none decode as there. polytok's own step (written as no decoder)."""

    _fields = ("separator",)

    def __init__(self, *, separator: str = " ") -> None:
        self.separator = check_str("Join", "separator", separator)


class Strip(Decoder):
    """Removes up to ``start`` copies of ``content`` from the start of each
    token, and up to ``stop`` from its end."""

    _fields = ("content", "start", "stop")

    def __init__(self, *, content: str = " ", start: int = 0, stop: int = 0) -> None:
        self.content = check_char("Strip", "content", content)
        self.start = check_count("Strip", "start", start)
        self.stop = check_count("Strip", "stop", stop)


class Replace(Decoder):
    """Replaces each match of ``pattern`` in each token by ``content``.

    ``pattern`` is text to find (``"▁"``), or ``{"Regex": r"..."}`` for a
    regular expression (Rust's ``fancy_regex``: look-around and
    back-references allowed), or ``{"String": "..."}`` as files save text.
    """

    _fields = ("pattern", "content")

    def __init__(self, *, pattern: str | dict[str, str], content: str) -> None:
        if isinstance(pattern, str):
            pattern = {"String": pattern}
        if (
            not isinstance(pattern, dict)
            or len(pattern) != 1
            or next(iter(pattern)) not in ("String", "Regex")
            or not isinstance(next(iter(pattern.values())), str)
        ):
            raise TypeError(f"Replace: pattern must be a string or {{'Regex': str}}, not {pattern!r}")
        self.pattern = dict(pattern)
        self.content = check_str("Replace", "content", content)
        _core.decoder_stream_lookahead(self.to_json())  # a regex that does not compile: ValueError


class Sequence(Decoder):
    """The steps one after another, each on the tokens of the one before."""

    _fields = ("decoders",)

    def __init__(self, *, decoders: Seq[Decoder]) -> None:
        self.decoders = check_steps("Sequence", "decoders", decoders, Decoder)

    @classmethod
    def _from_settings(cls, settings: dict[str, Any]) -> Decoder:
        return cls(decoders=build_steps("Sequence", "decoders", settings, "decoder"))


class _Decodes(Protocol):
    def decode(self, ids: list[int], **kwargs: Any) -> str: ...


class DecodeStream:
    """Text for ids that come one at a time, as a model generates them.

    ``tokenizer`` is anything with ``decode(ids, ...) -> str`` (polytok's
    tokenizers; ``skip_special_tokens``, when given, is passed on to it).
    :meth:`step` takes the next id and returns the text that is now final,
    or ``None``: a character cut across tokens comes out once whole (never
    as U+FFFD), and everything returned, then :meth:`flush`, is
    ``tokenizer.decode(all_ids)``.

    Each step decodes a short window of the last ids (the last few already
    shown, as context, then the new ones) and returns what goes beyond the
    text already returned, as Hugging Face's ``DecodeStream``; so decoders
    that treat the first token apart (Metaspace's prefix, WordPiece's
    spaces) stream right. Decoders that change text before a token
    (WordPiece's cleanup: ``"' s"`` becomes ``"'s"``) need ``lookahead``
    tokens more before a token's text is final: by default 2 for a
    :class:`polytok.WordPieceTokenizer` decoding with cleanup, a tokenizer's
    ``decoder``'s :attr:`Decoder.stream_lookahead`, and 0 otherwise. A
    U+FFFD of bytes that are not UTF-8 comes out once 3 more tokens have
    come, or at :meth:`flush`.

    The algorithm is the Rust core's (``decoders.rs``).
    """

    def __init__(
        self,
        tokenizer: _Decodes,
        *,
        skip_special_tokens: bool | None = None,
        lookahead: int | None = None,
    ) -> None:
        if not callable(getattr(tokenizer, "decode", None)):
            raise TypeError(f"tokenizer must have a decode(ids) method, not {tokenizer!r}")
        if skip_special_tokens is not None:
            check_bool("DecodeStream", "skip_special_tokens", skip_special_tokens)
        if lookahead is None:
            lookahead = _default_lookahead(tokenizer)
        check_count("DecodeStream", "lookahead", lookahead)
        self.tokenizer = tokenizer
        self.skip_special_tokens = skip_special_tokens
        self._core = _core.DecodeStream(lookahead)

    @property
    def lookahead(self) -> int:
        return self._core.lookahead

    def _decode(self, ids: list[int]) -> str:
        if self.skip_special_tokens is None:
            return self.tokenizer.decode(ids)
        return self.tokenizer.decode(ids, skip_special_tokens=self.skip_special_tokens)

    def step(self, id: int) -> str | None:
        """Takes the next id; returns the text it makes final, or ``None``."""
        if not isinstance(id, int) or isinstance(id, bool):
            raise TypeError(f"a token id must be an int, not {id!r}")
        if not 0 <= id < 2**32:
            raise ValueError(f"unknown token id {id}")
        return self._core.step(id, self._decode)

    def flush(self) -> str:
        """The rest of the text (at the end of generation); the stream then
        starts afresh."""
        return self._core.flush(self._decode)

    def __repr__(self) -> str:
        return f"DecodeStream({self.tokenizer!r}, lookahead={self.lookahead})"


def _default_lookahead(tokenizer: object) -> int:
    decoder = getattr(tokenizer, "decoder", None)
    if isinstance(decoder, Decoder):
        return decoder.stream_lookahead
    from polytok.wordpiece import WordPieceTokenizer

    if isinstance(tokenizer, WordPieceTokenizer):
        return 2  # decode() cleans up by default: see Decoder.stream_lookahead
    return 0
