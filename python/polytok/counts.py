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
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
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

    def add_arrow(self, values, *, parallel: bool = True) -> Counts:
        """Count the strings of a PyArrow array or chunked array (``string``,
        ``large_string`` or ``string_view``: a column of a Parquet file or
        a Ray or Spark batch), each on its own, straight from Arrow's
        buffers: no Python string is made. On all cores, or with
        ``parallel=False`` on the calling thread (one of many workers that
        each own a core). A null is a ``TypeError`` naming its row, as is
        an array of another type. Returns these counts."""
        import pyarrow as pa

        chunks = values.chunks if isinstance(values, pa.ChunkedArray) else [values]
        row = 0
        for chunk in chunks:
            if not isinstance(chunk, pa.Array):
                raise TypeError(f"values must be a pyarrow Array or ChunkedArray, not {type(chunk).__name__}")
            if pa.types.is_string_view(chunk.type):
                chunk = chunk.cast(pa.large_string())
            if not (pa.types.is_string(chunk.type) or pa.types.is_large_string(chunk.type)):
                raise TypeError(f"values must be Arrow strings, not {chunk.type}")
            if chunk.null_count:
                first_null = row + chunk.is_null().index(True).as_py()
                raise TypeError(f"row {first_null} is null, not a string")
            if len(chunk):
                _, offsets, data = chunk.buffers()
                width = 8 if pa.types.is_large_string(chunk.type) else 4
                self._core.add_arrow_strings(offsets, data if data is not None else b"", width, chunk.offset, len(chunk), parallel)
            row += len(chunk)
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


#: A language code: letters, digits, ``_`` and ``-`` (FLORES's ``eng_Latn``,
#: BCP 47's ``pt-BR``); it names the language's count file.
_LANGUAGE_CODE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*\Z")


def language_code(language: object) -> str:
    """``language`` if it is a valid language code; a ``ValueError`` (a
    ``TypeError`` for a non-string) naming it otherwise."""
    if not isinstance(language, str):
        raise TypeError(f"a language code is a string, not {type(language).__name__}")
    if not _LANGUAGE_CODE.match(language):
        raise ValueError(f"{language!r} is not a language code (letters, digits, '_' and '-', e.g. eng_Latn or pt-BR)")
    return language


class LanguageCounts(Mapping[str, Counts]):
    """Piece counts per language: a :class:`Counts` for each language code,
    all made the same way, for training that weighs languages (balanced
    sampling, parity-aware vocabularies) and for counting a labelled corpus
    on a cluster (``polytok.ray.count(..., language_column=...)``).

    A mapping from language code to :class:`Counts` (in code order). Made
    empty from counts that show how to cut text, e.g.
    ``LanguageCounts(Counts.for_bpe())``, and filled language by language
    (:meth:`add_texts`, :meth:`add_files`, :meth:`add_arrow`) or from a
    directory with a file or folder per language (:meth:`add_directory`).
    Added language by language (``a + b``), summed over languages
    (:meth:`total`), pickled, and saved as a directory of count files, one
    per language (:meth:`save`).

    >>> import polytok
    >>> by_language = polytok.LanguageCounts(polytok.Counts.for_bpe())
    >>> by_language.add_texts("en", ["the cat"]).add_texts("de", ["die Katze"])  # doctest: +ELLIPSIS
    LanguageCounts(model='bpe', languages=['de', 'en'], ...)
    >>> len(by_language["de"]), by_language.total().occurrences
    (2, 4)
    """

    def __init__(self, template: Counts) -> None:
        if not isinstance(template, Counts):
            raise TypeError(f"LanguageCounts needs polytok.Counts to show how text is cut, not {type(template).__name__}")
        self._template = template.empty()
        self._languages: dict[str, Counts] = {}

    def counts_of(self, language: str) -> Counts:
        """The counts of ``language``, made (empty) if it has none yet."""
        counts = self._languages.get(language)
        if counts is None:
            counts = self._languages[language_code(language)] = self._template.empty()
        return counts

    # ------------------------------------------------------------ making them

    def add_texts(self, language: str, texts: Iterable[str]) -> LanguageCounts:
        """Count strings as ``language``'s (see :meth:`Counts.add_texts`).
        Returns these counts."""
        self.counts_of(language).add_texts(texts)
        return self

    def add_files(
        self,
        language: str,
        files: PathLike | Iterable[PathLike],
        *,
        errors: Literal["strict", "replace"] = "strict",
        max_pieces: int | None = None,
        progress: bool | None = None,
    ) -> LanguageCounts:
        """Count files as ``language``'s (see :meth:`Counts.add_files`).
        Returns these counts."""
        self.counts_of(language).add_files(files, errors=errors, max_pieces=max_pieces, progress=progress)
        return self

    def add_arrow(self, language: str, values, *, parallel: bool = True) -> LanguageCounts:
        """Count a PyArrow string array as ``language``'s (see
        :meth:`Counts.add_arrow`). Returns these counts."""
        self.counts_of(language).add_arrow(values, parallel=parallel)
        return self

    def add_directory(
        self,
        directory: PathLike,
        *,
        errors: Literal["strict", "replace"] = "strict",
        max_pieces: int | None = None,
        progress: bool | None = None,
    ) -> LanguageCounts:
        """Count a corpus labelled by language: each ``CODE.txt`` file of
        ``directory`` as language ``CODE``'s, and each folder ``CODE/``
        (its ``.txt`` files, at any depth) too. A name that is not a
        language code, a language given twice (``de.txt`` and ``de/``) and
        a directory with no language are errors naming them.
        ``max_pieces`` bounds each language's counts (as in
        :meth:`Counts.add_files`). Returns these counts."""
        for language, files in language_files(directory).items():
            self.add_files(language, files, errors=errors, max_pieces=max_pieces, progress=progress)
        return self

    # ------------------------------------------------------------- reading

    def __getitem__(self, language: str) -> Counts:
        return self._languages[language]

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._languages))

    def __len__(self) -> int:
        return len(self._languages)

    @property
    def settings(self) -> dict:
        """How the text was cut (see :attr:`Counts.settings`)."""
        return self._template.settings

    @property
    def model(self) -> str:
        """The model these counts train (see :attr:`Counts.model`)."""
        return self._template.model

    def total(self) -> Counts:
        """The counts of every language added up: what counting the whole
        corpus without labels gives."""
        total = self._template.empty()
        for counts in self._languages.values():
            total += counts
        return total

    def balance_factors(self, alpha: float) -> dict[str, float]:
        """What :meth:`balanced` multiplies each language's counts by."""
        if not isinstance(alpha, (int, float)) or isinstance(alpha, bool) or not 0 <= alpha <= 1:
            raise ValueError(f"balance (alpha) must be a number in [0, 1], not {alpha!r}")
        if not self._languages:
            raise ValueError("there are no languages to balance")
        sizes = {language: counts.text_bytes for language, counts in self._languages.items()}
        for language, size in sorted(sizes.items()):
            if size == 0:
                raise ValueError(f"language {language!r} has no text")
        total = sum(sizes.values())
        powered = {language: size**alpha for language, size in sizes.items()}
        norm = sum(powered.values())
        factors = {language: (powered[language] / norm) / (size / total) for language, size in sizes.items()}
        smallest = min(factors.values())
        return {language: factor / smallest for language, factor in factors.items()}

    def weighed(self, alpha: float) -> LanguageCounts:
        """Each language's counts multiplied by its factor of
        :meth:`balanced` (rounded, never below 1), kept apart: for training
        that needs the languages apart and weighed."""
        factors = self.balance_factors(alpha)
        weighed = LanguageCounts(self._template)
        for language, counts in self._languages.items():
            weighed.counts_of(language)._core.add_scaled(counts._core, factors[language])
        return weighed

    def balanced(self, alpha: float) -> Counts:
        """The counts of every language added up, each language weighed so
        that it has a share ``q_l ∝ n_l ** alpha`` of the text (``n_l``: its
        bytes of text): ``alpha=1`` leaves the languages as they are, ``0``
        gives each the same share, values between flatten the mix (XLM-R
        and mT5 sample with 0.3 to 0.7). Applied to the counts, so no text is
        copied: each language's counts are multiplied by ``q_l / p_l`` (``p_l``
        its share now), scaled so that the smallest factor is 1 (languages are
        weighed up, never down: no piece is lost to rounding) and rounded.
        ``alpha`` outside ``[0, 1]`` and a language with no text are
        errors (``ValueError``) naming them."""
        factors = self.balance_factors(alpha)
        total = self._template.empty()
        for language in sorted(self._languages):
            total._core.add_scaled(self._languages[language]._core, factors[language])
        return total

    def __repr__(self) -> str:
        return (
            f"LanguageCounts(model={self.model!r}, languages={list(self)}, "
            f"pieces={{{', '.join(f'{code!r}: {len(self[code])}' for code in self)}}})"
        )

    # ------------------------------------------------------------ combining

    def copy(self) -> LanguageCounts:
        """Counts of their own with the same languages and pieces."""
        copy = LanguageCounts(self._template)
        copy._languages = {language: counts.copy() for language, counts in self._languages.items()}
        return copy

    def __iadd__(self, other: LanguageCounts) -> LanguageCounts:
        if not isinstance(other, LanguageCounts):
            return NotImplemented
        self._template + other._template  # a ValueError names the setting that differs
        for language in other:
            self.counts_of(language).__iadd__(other[language])
        return self

    def __add__(self, other: LanguageCounts) -> LanguageCounts:
        if not isinstance(other, LanguageCounts):
            return NotImplemented
        total = self.copy()
        total += other
        return total

    # -------------------------------------------------------------- files

    def save(self, directory: PathLike) -> None:
        """Write a directory of count files, ``CODE.counts`` per language
        (each written atomically, as :meth:`Counts.save`). A directory that
        already holds count files of other languages is refused: loading
        it would mix them in."""
        if not self._languages:
            raise ValueError("there are no languages to save")
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        others = sorted(p.name for p in directory.glob("*.counts") if p.stem not in self._languages)
        if others:
            raise ValueError(f"{directory} holds count files of other languages ({', '.join(others)}); save into a new directory")
        for language, counts in self._languages.items():
            counts.save(directory / f"{language}.counts")

    @classmethod
    def load(cls, directory: PathLike) -> LanguageCounts:
        """Read a directory written by :meth:`save`: every ``CODE.counts``
        file, as language ``CODE``'s. Files made with other settings, names
        that are not language codes and a directory without count files
        are errors naming them."""
        directory = Path(directory)
        if not directory.is_dir():
            raise FileNotFoundError(f"{directory}: no such directory")
        paths = sorted(directory.glob("*.counts"))
        if not paths:
            raise FileNotFoundError(f"{directory}: the directory holds no .counts files")
        loaded = [(language_code(path.stem), Counts.load(path)) for path in paths]
        result = cls(loaded[0][1])
        for (language, counts), path in zip(loaded, paths):
            if counts.settings != result.settings:
                raise ValueError(f"{path}: counts made with {counts.settings}, not {result.settings} as {paths[0].name}")
            result._languages[language] = counts
        return result


def language_files(directory: PathLike) -> dict[str, list[Path]]:
    """The files of each language of a corpus labelled by language (see
    :meth:`LanguageCounts.add_directory`), by language code."""
    from polytok._files import corpus_files

    directory = Path(directory)
    if not directory.is_dir():
        raise FileNotFoundError(f"{directory}: no such directory")
    languages: dict[str, list[Path]] = {}
    for entry in sorted(directory.iterdir()):
        if entry.name.startswith("."):
            continue
        if entry.is_dir():
            language, files = entry.name, corpus_files(entry)
        elif entry.suffix == ".txt":
            language, files = entry.stem, [entry]
        else:
            continue
        try:
            language_code(language)
        except ValueError:
            raise ValueError(f"{entry}: {language!r} is not a language code (name files CODE.txt or folders CODE/)") from None
        if language in languages:
            raise ValueError(f"{directory}: language {language!r} is given twice ({language}.txt and {language}/)")
        languages[language] = files
    if not languages:
        raise FileNotFoundError(f"{directory}: no language files (CODE.txt) or folders (CODE/) in it")
    return languages


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
