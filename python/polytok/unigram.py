"""Unigram language-model tokenizers (SentencePiece's model): training by
EM, Viterbi encoding, n-best and sampling; polytok JSON and SentencePiece
``.model`` files."""

from __future__ import annotations

import math
import random
from collections.abc import Iterable, Sequence
from typing import Literal

from polytok._counting import without_surrogates
from polytok._files import PathLike
from polytok.counts import Counts, LanguageCounts
from polytok.parity import ParityTarget
from polytok.sentencepiece import SPECIAL_TOKENS, SentencePieceTokenizer

#: The control pieces after ``<unk>``, by default (ids 1, 2, 3).
UNIGRAM_SPECIAL_TOKENS = SPECIAL_TOKENS


class UnigramTokenizer(SentencePieceTokenizer):
    """A Unigram tokenizer: pieces with log-probabilities, and each text cut
    into the pieces whose scores sum highest (Viterbi).

    Text is handled as SentencePiece does after an identity normalization,
    each step as the model says (by default all of them): extra spaces
    removed, a space put in front (or at the end), spaces written as ``▁``.
    Characters no piece covers are ``<unk>`` (one per run), or their UTF-8
    bytes as ``<0xHH>`` pieces when the model has byte fallback. Decoding
    gives the text back as SentencePiece's does.

    As a :class:`polytok.Tokenizer`: the
    normalizers :class:`~polytok.normalizers.RemoveExtraWhitespaces` and
    :class:`~polytok.normalizers.Prepend` (the dummy ``▁``), then the
    :class:`~polytok.pre_tokenizers.Metaspace` pre-tokenizer, which writes
    spaces as ``▁`` and keeps the whole text one piece (SentencePiece does
    not pre-tokenize); no template.

    Create one with :meth:`train`, :meth:`train_from_iterator`,
    :meth:`load` (polytok JSON) or :meth:`from_sentencepiece`.
    """

    _segmentation = "unigram"

    # ----------------------------------------------------------------- training

    @classmethod
    def train(
        cls,
        files: PathLike | Iterable[PathLike],
        *,
        vocab_size: int = 8000,
        character_coverage: float = 0.9995,
        byte_fallback: bool = False,
        unk_token: str = "<unk>",
        special_tokens: Sequence[str] = UNIGRAM_SPECIAL_TOKENS,
        max_piece_length: int = 16,
        split_by_script: bool = True,
        split_digits: bool = False,
        seed_size: int = 1_000_000,
        shrinking_factor: float = 0.75,
        sub_iterations: int = 2,
        remove_extra_whitespaces: bool = True,
        add_dummy_prefix: bool = True,
        errors: Literal["strict", "replace"] = "strict",
        progress: bool | None = None,
    ) -> UnigramTokenizer:
        """Learn a Unigram model from text files, as SentencePiece does.

        Each line is one sentence: spaces are handled as SentencePiece does
        (``remove_extra_whitespaces``, ``add_dummy_prefix``) and written
        ``▁``; the words (each from a ``▁`` on) are counted. Seeds are every
        character and the ``seed_size`` most frequent substrings (by
        frequency × length); EM with a digamma update re-estimates the
        scores, and pruning removes the pieces whose loss costs the corpus
        least likelihood, ``shrinking_factor`` of the vocabulary at a time
        after ``sub_iterations`` EM steps, until ``vocab_size`` is reached
        exactly.

        ``vocab_size`` counts ``unk_token`` (id 0), ``special_tokens``
        (control pieces, next), the 256 ``<0xHH>`` pieces with
        ``byte_fallback``, and the learned pieces. ``character_coverage``:
        the share of the text's characters the vocabulary must cover; rarer
        characters are ``<unk>``, or their bytes with ``byte_fallback``.
        Pieces have at most ``max_piece_length`` characters, ``▁`` only at
        their start, one Unicode script (``split_by_script``) and no digit
        with anything else (``split_digits``).

        ``files``: paths, directories (every ``.txt`` below) and glob
        patterns, UTF-8 (``errors="replace"`` replaces bad bytes).
        ``progress``: progress bars on stderr (default: when it is a
        terminal). The same corpus and settings give the same model.
        """
        return cls._train(locals())

    @classmethod
    def train_from_iterator(
        cls,
        texts: Iterable[str],
        *,
        vocab_size: int = 8000,
        character_coverage: float = 0.9995,
        byte_fallback: bool = False,
        unk_token: str = "<unk>",
        special_tokens: Sequence[str] = UNIGRAM_SPECIAL_TOKENS,
        max_piece_length: int = 16,
        split_by_script: bool = True,
        split_digits: bool = False,
        seed_size: int = 1_000_000,
        shrinking_factor: float = 0.75,
        sub_iterations: int = 2,
        remove_extra_whitespaces: bool = True,
        add_dummy_prefix: bool = True,
        progress: bool | None = None,
    ) -> UnigramTokenizer:
        """Learn a Unigram model from strings (any iterable, consumed once;
        each line of each string is a sentence). Arguments as in
        :meth:`train`."""
        return cls._train(locals())

    @classmethod
    def train_from_counts(
        cls,
        counts: Counts | LanguageCounts,
        *,
        vocab_size: int = 8000,
        character_coverage: float = 0.9995,
        byte_fallback: bool = False,
        unk_token: str = "<unk>",
        special_tokens: Sequence[str] = UNIGRAM_SPECIAL_TOKENS,
        max_piece_length: int = 16,
        split_by_script: bool = True,
        split_digits: bool = False,
        seed_size: int = 1_000_000,
        shrinking_factor: float = 0.75,
        sub_iterations: int = 2,
        balance: float | None = None,
        parity: ParityTarget | None = None,
        progress: bool | None = None,
    ) -> UnigramTokenizer:
        """Learn a Unigram model from :class:`polytok.Counts` made for
        Unigram (:meth:`polytok.Counts.for_unigram`): byte for byte what
        :meth:`train` learns from the corpus they count. The whitespace
        handling is the counts'; ``counts`` are left as they are. Other
        arguments as in :meth:`train`.

        From :class:`polytok.LanguageCounts`, ``balance`` weighs the
        languages (see :meth:`polytok.LanguageCounts.balanced`), and
        ``parity`` (a development set or target ratios, as in
        :meth:`polytok.BPETokenizer.train_from_counts`) trains
        parity-aware: before each round of EM and pruning, each language's
        words weigh in proportion to a weight that follows its cost (its
        development text's tokens with the vocabulary then), so that the
        pieces the costliest languages rely on are kept
        (``rust/src/unigram/parity.rs``). The training record names the
        costliest language of each round (``rounds_by_language``) and each
        language's tokens before and after."""
        return cls._train(locals())

    _SETTINGS = (
        "vocab_size", "character_coverage", "byte_fallback", "unk_token", "special_tokens",
        "max_piece_length", "split_by_script", "split_digits", "seed_size", "shrinking_factor",
        "sub_iterations",
    )
    _WHOLE_NUMBERS = ("vocab_size", "max_piece_length", "seed_size", "sub_iterations")

    def nbest(self, text: str, k: int) -> list[tuple[list[int], float]]:
        """The ``k`` best segmentations of ``text`` with their scores (sums of
        piece log-probabilities), best first; the first is :meth:`encode`'s."""
        if k < 0:
            raise ValueError(f"k must be at least 0, not {k}")
        pieces = self._pipeline.pieces(without_surrogates(text))
        if len(pieces) > 1:
            raise ValueError(
                f"nbest segments a text that is one piece; this tokenizer's pre-tokenizer cuts it into {len(pieces)}"
            )
        if not pieces:
            return [([], 0.0)] if k else []
        return self._core.nbest(pieces[0], k)

    def sample(self, text: str, *, alpha: float = 1.0, seed: int | None = None) -> list[int]:
        """One segmentation drawn with probability proportional to
        ``exp(alpha * score)`` (subword regularization: alpha near 0 samples
        almost uniformly, large alpha almost always gives :meth:`encode`'s).
        ``seed`` (0 to 2**64 - 1) makes the draw reproducible; by default
        each call draws anew."""
        if not (math.isfinite(alpha) and alpha >= 0):
            raise ValueError(f"alpha must be a finite number of at least 0, not {alpha}")
        if seed is None:
            seed = random.getrandbits(64)
        if not 0 <= seed < 2**64:
            raise ValueError(f"seed must be in 0..2**64, not {seed}")
        # Pieces are independent: each is drawn on its own.
        pieces = self._pipeline.pieces(without_surrogates(text))
        return [id for i, piece in enumerate(pieces) for id in self._core.sample(piece, alpha, (seed + i) % 2**64)]

