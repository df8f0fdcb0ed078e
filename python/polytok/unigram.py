"""Unigram language-model tokenizers (SentencePiece's model): Viterbi
encoding of SentencePiece ``.model`` files."""

from __future__ import annotations

import os
import random
from collections.abc import Iterable, Sequence

from polytok import _core
from polytok._counting import without_surrogates
from polytok._files import PathLike


class UnigramTokenizer:
    """A Unigram tokenizer: pieces with log-probabilities, and each text cut
    into the pieces whose scores sum highest (Viterbi).

    Text is handled as SentencePiece does after an identity normalization:
    extra spaces removed, a space put in front, spaces written as ``▁``.
    Characters no piece covers are ``<unk>`` (one per run), or their UTF-8
    bytes as ``<0xHH>`` pieces when the model has byte fallback.

    Create one with :meth:`from_sentencepiece`.
    """

    def __init__(self, core: _core.Unigram) -> None:
        self._core = core

    @classmethod
    def from_sentencepiece(cls, path: PathLike) -> UnigramTokenizer:
        """Load a SentencePiece ``.model`` file of a Unigram model trained with
        ``normalization_rule_name="identity"`` (other normalizations are
        refused: polytok would encode other text than SentencePiece does)."""
        with open(path, "rb") as f:
            data = f.read()
        return cls(_core.Unigram.from_sentencepiece(data, os.fspath(path)))

    def encode(self, text: str) -> list[int]:
        """The ids of the best segmentation of ``text``."""
        try:
            return self._core.encode(text)
        except UnicodeEncodeError:
            return self._core.encode(without_surrogates(text))

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        """The ids of many texts, encoded on all cores."""
        texts = list(texts)
        try:
            return self._core.encode_batch(texts)
        except UnicodeEncodeError:
            return self._core.encode_batch([without_surrogates(t) for t in texts])

    def decode(self, ids: Iterable[int]) -> str:
        """The text of ``ids`` (``▁`` back to spaces, the leading one removed,
        byte pieces joined into UTF-8)."""
        return self._core.decode(list(ids))

    def nbest(self, text: str, k: int) -> list[tuple[list[int], float]]:
        """The ``k`` best segmentations of ``text`` with their scores (sums of
        piece log-probabilities), best first; the first is :meth:`encode`'s."""
        if k < 0:
            raise ValueError(f"k must be at least 0, not {k}")
        return self._core.nbest(without_surrogates(text), k)

    def sample(self, text: str, *, alpha: float = 1.0, seed: int | None = None) -> list[int]:
        """One segmentation drawn with probability proportional to
        ``exp(alpha * score)`` (subword regularization: alpha near 0 samples
        almost uniformly, large alpha almost always gives :meth:`encode`'s).
        ``seed`` (0 to 2**64 - 1) makes the draw reproducible; by default
        each call draws anew."""
        if alpha < 0:
            raise ValueError(f"alpha must be at least 0, not {alpha}")
        if seed is None:
            seed = random.getrandbits(64)
        if not 0 <= seed < 2**64:
            raise ValueError(f"seed must be in 0..2**64, not {seed}")
        return self._core.sample(without_surrogates(text), alpha, seed)

    def tokens(self, text: str) -> list[str]:
        """The pieces of ``text`` as strings."""
        return [self._core.piece(i) for i in self.encode(text)]

    def id_to_token(self, id: int) -> str:
        """The piece of an id."""
        return self._core.piece(id)

    @property
    def vocab_size(self) -> int:
        """The number of pieces."""
        return self._core.vocab_size

    @property
    def byte_fallback(self) -> bool:
        """Whether unknown characters become byte pieces."""
        return self._core.byte_fallback

    def __repr__(self) -> str:
        return f"UnigramTokenizer(vocab_size={self.vocab_size}, byte_fallback={self.byte_fallback})"
