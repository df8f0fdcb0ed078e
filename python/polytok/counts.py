"""Piece counts as a value: count a corpus anywhere (shards, processes,
machines), add the counts up, save them, and train any model from them.

Training cost that grows with the corpus is counting; the merges of BPE and
WordPiece and the EM of Unigram run on the table of counted pieces, which
grows far more slowly. So a corpus can be counted in parts, the parts added
(exactly: addition is associative and commutative), and the model trained
on one machine from the sum, byte for byte the model that training on the
whole corpus makes.

>>> import polytok
>>> a = polytok.Counts.for_bpe().add_texts(["low lower lowest"])
>>> b = polytok.Counts.for_bpe().add_texts(["low lowest newest"])
>>> total = a + b
>>> len(total), total.most_common(2)
(4, [(b' lowest', 2), (b'low', 2)])
>>> tokenizer = polytok.BPETokenizer.train_from_counts(total, vocab_size=270)
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from typing import Literal

from polytok import _core
from polytok._args import text_list, whole_numbers
from polytok._counting import count_files, count_texts
from polytok._files import PathLike, atomic_write
from polytok._progress import progress_callback, wanted

#: The model each way of counting serves.
_MODEL_OF_KIND = {"pattern": "bpe", "bert": "wordpiece", "sentencepiece": "unigram"}


class Counts:
    """How often each piece of a corpus occurs, with how the text was cut
    (the pre-tokenization of one model, and its special tokens).

    Make empty counts for a model with :meth:`for_bpe`,
    :meth:`for_wordpiece` or :meth:`for_unigram`, then fill them with
    :meth:`add_files` and :meth:`add_texts`; or read them with
    :meth:`load`. Counts made the same way add up: ``a + b`` (and
    ``sum([...])``), exact whatever the order; counts made differently
    refuse to, naming the setting that differs. They pickle (as the bytes
    of their file: cheap to send to and from workers), save to a compact
    file (:meth:`save`), and train a model with
    ``BPETokenizer.train_from_counts``, ``WordPieceTokenizer.train_from_counts``
    or ``UnigramTokenizer.train_from_counts`` (and SentencePiece BPE's).

    A text is counted on its own: no piece spans two texts (or two files).
    Counts of a corpus split into parts at text or file boundaries add up
    to the counts of the whole.
    """

    def __init__(self, core: _core.PieceCounter) -> None:
        self._core = core

    # ------------------------------------------------------------ making them

    @classmethod
    def for_bpe(cls, *, pattern: str = "cl100k", special_tokens: Sequence[str] = ()) -> Counts:
        """Empty counts of byte-level BPE pieces: text cut by ``pattern``
        (a preset name, ``none`` or a regular expression) around
        ``special_tokens``, as :meth:`polytok.BPETokenizer.train` counts."""
        return cls(_core.PieceCounter(pattern, text_list(special_tokens, "special_tokens")))

    @classmethod
    def for_wordpiece(
        cls,
        *,
        lowercase: bool = True,
        strip_accents: bool | None = None,
        clean_text: bool = True,
        handle_chinese_chars: bool = True,
        special_tokens: Sequence[str] | None = None,
    ) -> Counts:
        """Empty counts of BERT words (normalized, cut at white space and
        punctuation), as :meth:`polytok.WordPieceTokenizer.train` counts;
        ``special_tokens`` defaults to BERT's five."""
        from polytok.wordpiece import BERT_SPECIAL_TOKENS, WordPieceTokenizer

        tokens = BERT_SPECIAL_TOKENS if special_tokens is None else special_tokens
        return cls(WordPieceTokenizer._counter(lowercase, strip_accents, clean_text, handle_chinese_chars, tokens))

    @classmethod
    def for_unigram(cls, *, remove_extra_whitespaces: bool = True, add_dummy_prefix: bool = True) -> Counts:
        """Empty counts of SentencePiece words (each line a sentence, spaces
        handled as SentencePiece does, a word from each ``▁``), as
        :meth:`polytok.UnigramTokenizer.train` and SentencePiece BPE
        training count."""
        return cls(_core.PieceCounter.sentencepiece(remove_extra_whitespaces, add_dummy_prefix, []))

    def add_files(
        self,
        files: PathLike | Iterable[PathLike],
        *,
        errors: Literal["strict", "replace"] = "strict",
        max_pieces: int | None = None,
        progress: bool | None = None,
    ) -> Counts:
        """Count files (paths, directories of ``.txt`` files, globs; UTF-8,
        ``errors="replace"`` replaces bad bytes), on all cores, reading them
        in chunks: memory grows with the distinct pieces, not the corpus.
        ``max_pieces`` bounds it: the files are counted 64 MB of text at a
        time, the total pruned to ``max_pieces`` (as :meth:`prune`) whenever
        it holds twice as many, and at the end; the pieces dropped are
        recorded, and depend only on the corpus (not on the machine).
        Returns these counts."""
        if max_pieces is not None:
            whole_numbers(minimum=0, max_pieces=max_pieces)
        with progress_callback(wanted(progress)) as callback:
            count_files(self._core, files, errors, callback, max_pieces)
        return self

    def add_texts(self, texts: Iterable[str]) -> Counts:
        """Count strings (any iterable, consumed once), each on its own.
        Returns these counts."""
        count_texts(self._core, texts)
        return self

    # ------------------------------------------------------------- reading

    @property
    def model(self) -> str:
        """The model these counts train: ``bpe``, ``wordpiece`` or
        ``unigram`` (which SentencePiece BPE also trains from)."""
        return _MODEL_OF_KIND[self.settings["kind"]]

    @property
    def settings(self) -> dict:
        """How the text was cut: ``kind`` (``pattern``, ``bert`` or
        ``sentencepiece``), its options and ``special_tokens``."""
        return json.loads(self._core.description)

    @property
    def text_bytes(self) -> int:
        """Bytes of text counted (UTF-8)."""
        return self._core.text_bytes

    @property
    def occurrences(self) -> int:
        """Occurrences of the pieces held."""
        return self._core.occurrences

    @property
    def dropped(self) -> dict:
        """What :meth:`prune` left out: ``{"pieces": n, "occurrences": m}``
        (a piece pruned in several rounds of a bounded count, see
        :meth:`add_files`, counts once per round)."""
        pieces, occurrences = self._core.dropped
        return {"pieces": pieces, "occurrences": occurrences}

    def __len__(self) -> int:
        """Distinct pieces held."""
        return self._core.distinct_pieces

    def most_common(self, n: int | None = None) -> list[tuple[bytes, int]]:
        """The ``n`` most frequent pieces (all without ``n``) as ``(bytes,
        count)``, most frequent first, ties in byte order."""
        if n is not None:
            whole_numbers(minimum=0, n=n)
        return self._core.most_common(n)

    def __repr__(self) -> str:
        return f"Counts(model={self.model!r}, pieces={len(self)}, occurrences={self.occurrences}, text_bytes={self.text_bytes})"

    # ------------------------------------------------------------ combining

    def copy(self) -> Counts:
        """Counts of their own with the same pieces."""
        return Counts(self._core.copy())

    def empty(self) -> Counts:
        """Empty counts made the same way (to count another part of a
        corpus)."""
        return Counts(self._core.copy(False))

    def __iadd__(self, other: Counts) -> Counts:
        if not isinstance(other, Counts):
            return NotImplemented
        self._core.add(other._core)
        return self

    def __add__(self, other: Counts) -> Counts:
        if not isinstance(other, Counts):
            return NotImplemented
        total = self.copy()
        total += other
        return total

    @staticmethod
    def total(parts: Iterable[Counts]) -> Counts:
        """The sum of many counts made the same way, added into one copy of
        the first (``sum(parts)`` copies its running total at each step)."""
        iterator = iter(parts)
        try:
            total = next(iterator).copy()
        except StopIteration:
            raise ValueError("Counts.total needs at least one Counts") from None
        for part in iterator:
            total += part
        return total

    def __radd__(self, other: object) -> Counts:
        # ``sum(counts)`` starts from 0.
        if isinstance(other, int) and other == 0:
            return self.copy()
        return NotImplemented

    def prune(self, max_pieces: int) -> Counts:
        """Keep the ``max_pieces`` most frequent pieces (ties: the smaller
        bytes) to bound memory; the others are recorded in :attr:`dropped`
        (and in the file). Training on pruned counts trains on a corpus
        without its rarest pieces: what only they would have supported (a
        rare merge, a rare piece's score) is lost, everything else is counted
        exactly; keep pieces in the millions for a vocabulary in the tens of
        thousands. Pruning then adding is not adding then pruning. Returns
        these counts."""
        whole_numbers(minimum=0, max_pieces=max_pieces)
        self._core.prune(max_pieces)
        return self

    # -------------------------------------------------------------- files

    def to_bytes(self) -> bytes:
        """The bytes of the count file (see :meth:`save`)."""
        return self._core.to_bytes()

    @classmethod
    def from_bytes(cls, data: bytes, source: str = "counts") -> Counts:
        """Counts from the bytes of a count file; ``source`` names it in
        errors."""
        return cls(_core.PieceCounter.from_bytes(bytes(data), source))

    def save(self, path: PathLike) -> None:
        """Write a count file, atomically: pieces in byte order with their
        counts (shared prefixes written once), the way text was cut, the
        bytes of text counted and what pruning dropped, with a checksum. The
        same counts always make the same file."""
        atomic_write(path, self.to_bytes())

    @classmethod
    def load(cls, path: PathLike) -> Counts:
        """Read a count file. A file that is not one, of another version,
        truncated or altered raises :class:`polytok.TokenizerFileError`
        naming it and what is wrong."""
        with open(path, "rb") as f:
            data = f.read()
        return cls.from_bytes(data, os.fspath(path))

    def save_tsv(self, path: PathLike) -> None:
        """Write the counts as SentencePiece reads them with
        ``--input_format=tsv`` (a word, a tab, its count, per line; most
        frequent first), atomically: polytok's distributed counts can train
        ``sentencepiece`` too. Counts made for Unigram with
        ``add_dummy_prefix`` (SentencePiece's default) only: each word is
        written without its leading ``▁``, which SentencePiece puts back.
        Train with ``normalization_rule_name="identity"``: polytok counts
        text as it is (with SentencePiece's NFKC rules it would normalize
        the words again). SentencePiece learns from the words about what it
        learns from the text, not exactly (796 of 800 pieces alike on the
        shipped English corpus): it draws its seed substrings from whole
        sentences. polytok's own trainers learn exactly the same from
        counts as from text."""
        settings = self.settings
        if settings["kind"] != "sentencepiece" or not settings["add_dummy_prefix"]:
            raise ValueError("SentencePiece's TSV input holds counts made for Unigram with add_dummy_prefix (Counts.for_unigram())")
        lines = []
        for piece, count in self.most_common():
            word = piece.decode("utf-8").removeprefix("▁")
            if "\t" in word or "\n" in word or "\r" in word:
                raise ValueError(f"the word {word!r} holds a tab or a line break, which SentencePiece's TSV input cannot")
            if word:
                lines.append(f"{word}\t{count}\n")
        atomic_write(path, "".join(lines).encode("utf-8"))

    def __reduce__(self):
        return (Counts.from_bytes, (self.to_bytes(),))


def trainer_counter(counts: Counts, model: str, trainer: type) -> _core.PieceCounter:
    """A copy of the core counter of ``counts`` for training ``model``
    (training empties the counter it is given, and ``counts`` stay as they
    are); a ``ValueError`` if they serve another model."""
    if not isinstance(counts, Counts):
        raise TypeError(f"counts must be polytok.Counts, not {type(counts).__name__}")
    if counts.model != model:
        raise ValueError(
            f"{trainer.__name__} trains from counts made for {model} (Counts.for_{model}), not for {counts.model}"
        )
    return counts._core.copy()
