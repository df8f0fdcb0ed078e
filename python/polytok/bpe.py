"""Byte-level BPE tokenizers: training, encoding, decoding, files."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Literal

from polytok import _core
from polytok._counting import corpus_record, count_files, count_texts
from polytok.counts import Counts, LanguageCounts, trainer_counter
from polytok.parity import ParityTarget, train_languages
from polytok._args import id_error, text_list, whole_numbers
from polytok._files import PathLike, atomic_write, read_text
from polytok._progress import progress_callback, wanted
from polytok.tokenizer import Preset


class BPETokenizer(Preset):
    """A byte-level BPE tokenizer.

    Encoding follows tiktoken exactly: text is cut into pieces by a
    pre-tokenization pattern, then each piece's bytes are merged, lowest rank
    (id) first. Ids ``0..n_ordinary`` are ordinary tokens; special tokens have
    ids of their own and are recognized in text only when allowed.

    As a :class:`polytok.Tokenizer`: the ``Pattern`` pre-tokenizer, the
    model's special tokens, no template, the ``ByteLevel`` decoder.

    Create one with :meth:`train`, :meth:`train_from_iterator`,
    :meth:`train_from_counts`, :meth:`load` or :meth:`from_tiktoken`.
    """

    _core_type = _core.Bpe

    # ----------------------------------------------------------------- training

    @classmethod
    def train(
        cls,
        files: PathLike | Iterable[PathLike],
        *,
        vocab_size: int,
        pattern: str = "cl100k",
        min_frequency: int = 2,
        special_tokens: Sequence[str] = (),
        max_token_bytes: int | None = None,
        errors: Literal["strict", "replace"] = "strict",
        progress: bool | None = None,
    ) -> BPETokenizer:
        """Learn a tokenizer from text files.

        ``files``: paths, directories (every ``.txt`` file below) and glob
        patterns. Files must be UTF-8; ``errors="replace"`` replaces bad bytes
        instead of failing. ``vocab_size`` counts the 256 byte tokens, the
        learned merges and the special tokens. Pairs seen fewer than
        ``min_frequency`` times are not merged. Equally frequent pairs are
        merged in order of (left id, right id), so the same corpus and
        settings always give the same vocabulary. ``progress``: draw progress
        bars on stderr (default: when it is a terminal).
        """
        whole_numbers(vocab_size=vocab_size, max_token_bytes=max_token_bytes)
        whole_numbers(minimum=0, min_frequency=min_frequency)
        counter = _core.PieceCounter(pattern, text_list(special_tokens, "special_tokens"))
        with progress_callback(wanted(progress)) as callback:
            count_files(counter, files, errors, callback)
            return cls._train_counted(
                counter, vocab_size, pattern, min_frequency, special_tokens, max_token_bytes, callback
            )

    @classmethod
    def train_from_iterator(
        cls,
        texts: Iterable[str],
        *,
        vocab_size: int,
        pattern: str = "cl100k",
        min_frequency: int = 2,
        special_tokens: Sequence[str] = (),
        max_token_bytes: int | None = None,
        progress: bool | None = None,
    ) -> BPETokenizer:
        """Learn a tokenizer from strings (any iterable, consumed once).

        Each string is pre-tokenized on its own. Other arguments as in
        :meth:`train`.
        """
        whole_numbers(vocab_size=vocab_size, max_token_bytes=max_token_bytes)
        whole_numbers(minimum=0, min_frequency=min_frequency)
        counter = _core.PieceCounter(pattern, text_list(special_tokens, "special_tokens"))
        count_texts(counter, texts)
        with progress_callback(wanted(progress)) as callback:
            return cls._train_counted(
                counter, vocab_size, pattern, min_frequency, special_tokens, max_token_bytes, callback
            )

    @classmethod
    def train_from_counts(
        cls,
        counts: Counts | LanguageCounts,
        *,
        vocab_size: int,
        min_frequency: int = 2,
        max_token_bytes: int | None = None,
        balance: float | None = None,
        parity: ParityTarget | None = None,
        parity_global_merges: int = 0,
        parity_window: tuple[int, float] | None = None,
        progress: bool | None = None,
    ) -> BPETokenizer:
        """Learn a tokenizer from :class:`polytok.Counts` made for BPE
        (:meth:`polytok.Counts.for_bpe`): byte for byte the tokenizer
        :meth:`train` makes from the corpus they count, however it was split
        and wherever it was counted. The pattern and special tokens are the
        counts'; ``counts`` are left as they are. Other arguments as in
        :meth:`train`.

        From :class:`polytok.LanguageCounts` (counts per language), training
        can weigh the languages:

        - ``balance`` (alpha in ``[0, 1]``): each language weighed to a share
          ``∝ n_l ** alpha`` of the text (see
          :meth:`polytok.LanguageCounts.balanced`); without it, the languages
          count as they are.
        - ``parity``: parity-aware training (Foroutan et al., 2025): each
          merge goes to the language that costs the most tokens now, as the
          most frequent pair of that language, and applies to all. The cost
          is measured on a parallel development set (a directory of
          ``CODE.txt`` files, or a mapping of language to lines; the same
          number of lines in every language, never training text), or,
          without one, as compression of the training text against a target
          ratio per language (a mapping of language to ratio). Every
          training language must have its entry.
          ``parity_global_merges``: the first merges by counts over all
          languages (balanced or not), the hybrid variant.
          ``parity_window=(window, share)``: the moving-window variant, a
          language chosen more than ``share / n_languages`` of the last
          ``window`` merges is passed over for the next worst.
          A language with no pair left counted ``min_frequency`` times is
          passed over from then on.

        The training record (``training``, saved with the tokenizer) holds
        the languages, ``balance`` and, with ``parity``, the target (the
        development set's digest, or the ratios), the variants, the merges
        each language chose and each language's tokens before and after."""
        whole_numbers(vocab_size=vocab_size, max_token_bytes=max_token_bytes)
        whole_numbers(minimum=0, min_frequency=min_frequency)
        if not isinstance(counts, LanguageCounts):
            if balance is not None or parity is not None:
                raise ValueError("balance and parity weigh languages: train from polytok.LanguageCounts")
            counter = trainer_counter(counts, "bpe", cls)
            settings = counts.settings
            with progress_callback(wanted(progress)) as callback:
                return cls._train_counted(
                    counter, vocab_size, settings["pattern"], min_frequency, settings["special_tokens"], max_token_bytes, callback
                )
        settings = {"vocab_size": vocab_size, "min_frequency": min_frequency, "max_token_bytes": max_token_bytes}
        record = cls._record(settings, counts.settings["pattern"], counts.settings["special_tokens"])
        return train_languages(
            cls, "bpe", counts, settings, record, balance=balance, parity=parity,
            global_merges=parity_global_merges, window=parity_window, progress=progress,
        )

    @classmethod
    def _train_counted(
        cls,
        counter: _core.PieceCounter,
        vocab_size: int,
        pattern: str,
        min_frequency: int,
        special_tokens: Sequence[str],
        max_token_bytes: int | None,
        callback,
    ) -> BPETokenizer:
        corpus = corpus_record(counter)
        settings = {"vocab_size": vocab_size, "min_frequency": min_frequency, "max_token_bytes": max_token_bytes}
        core = _core.Bpe.train(counter, settings, callback)
        return cls(core, {**cls._record(settings, pattern, special_tokens), "corpus": corpus})

    @staticmethod
    def _record(settings: dict, pattern: str, special_tokens: Sequence[str]) -> dict:
        """The training record, but for the corpus."""
        return {
            **settings,
            "special_tokens": list(special_tokens),
            "pattern": pattern,
            "tie_rule": "highest count, then smallest (left id, right id)",
        }

    # -------------------------------------------------------------------- files

    @classmethod
    def from_tiktoken(
        cls,
        path: PathLike,
        *,
        pattern: str,
        special_tokens: Mapping[str, int] | None = None,
    ) -> BPETokenizer:
        """Load a tiktoken rank file (``base64-token rank`` per line).

        The file holds neither the pattern nor the special tokens: give them,
        e.g. ``pattern="cl100k"``, ``special_tokens={"<|endoftext|>": 100257}``.
        """
        text = read_text(path, "a tiktoken rank file", encoding="ascii")
        if special_tokens is not None and not isinstance(special_tokens, Mapping):
            raise TypeError("special_tokens must map each token's text to its id, e.g. {'<|endoftext|>': 100257}")
        specials = sorted((special_tokens or {}).items(), key=lambda item: item[1])
        return cls(_core.Bpe.from_tiktoken(text, os.fspath(path), pattern, specials))

    def save_tiktoken(self, path: PathLike) -> None:
        """Save the ordinary tokens as a tiktoken rank file, atomically."""
        atomic_write(path, self._core.to_tiktoken())

    # ----------------------------------------------------------------- encoding

    def clear_cache(self) -> None:
        """Forget the merged pieces that encoding caches (per thread, up to a
        few megabytes each): to free that memory, or to time encoding from a
        cold start. Results never depend on the cache."""
        self._core.clear_cache()

    def decode_bytes(self, ids: Iterable[int]) -> bytes:
        """The bytes of a sequence of ids."""
        ids = list(ids)
        try:
            return self._core.decode_bytes(ids)
        except OverflowError:
            raise id_error(ids, self.vocab_size) from None

    def token_bytes(self, id: int) -> bytes:
        """The bytes of one token."""
        try:
            return self._core.token_bytes(id)
        except OverflowError:
            raise id_error(id, self.vocab_size) from None

    def token_to_id(self, token: str | bytes) -> int | None:
        """The id of a token given by its text or bytes, or ``None``."""
        return self._core.token_id(token.encode("utf-8") if isinstance(token, str) else token)

    # --------------------------------------------------------------- properties

    @property
    def n_ordinary(self) -> int:
        """Number of ordinary tokens (ids ``0..n_ordinary``)."""
        return self._core.n_ordinary

    @property
    def pattern(self) -> str:
        """The pre-tokenization pattern: a preset name, ``none`` or a regex."""
        return self._core.pattern

    @property
    def merges(self) -> list[tuple[int, int]] | None:
        """The pair that made each learned token (trained models only)."""
        return self._core.merges

    def __repr__(self) -> str:
        return f"BPETokenizer(vocab_size={self.vocab_size}, pattern={self.pattern!r})"


#: Token bytes as text, with bytes that do not decode shown as ``<0xNN>``.
readable = _core.readable
