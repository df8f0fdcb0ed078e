"""SentencePiece's models, Unigram and BPE: what the two share (pieces
with scores and kinds, byte fallback, SentencePiece's whitespace handling
and decoding, ``.model`` files), and the BPE tokenizer (Llama 2's and
Mistral's design). :class:`polytok.UnigramTokenizer` adds training, n-best
and sampling."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from typing import Literal

from polytok import _core
from polytok._args import id_error, text_list, whole_numbers
from polytok._counting import corpus_record, count_files, count_texts
from polytok._files import PathLike, atomic_write
from polytok._progress import progress_callback, wanted
from polytok.counts import Counts, LanguageCounts, trainer_counter
from polytok.parity import train_languages
from polytok.tokenizer import Preset

#: The control pieces after ``<unk>``, by default (ids 1, 2, 3).
SPECIAL_TOKENS = ("<s>", "</s>", "<pad>")


class SentencePieceTokenizer(Preset):
    """What SentencePiece's Unigram and BPE tokenizers share: the model's
    files, decoding and piece scores."""

    _core_type = _core.Unigram
    #: The core model's segmentation that the class holds.
    _segmentation: str

    def __init__(self, core: _core.Unigram, training: dict | None = None) -> None:
        if core.segmentation != self._segmentation:
            raise TypeError(f"{type(self).__name__} holds a {self._segmentation} model, not a {core.segmentation} one")
        super().__init__(core, training)

    @staticmethod
    def of_class(core: _core.Unigram) -> type[SentencePieceTokenizer]:
        """The class of a SentencePiece model's tokenizer: Unigram or BPE."""
        from polytok.unigram import UnigramTokenizer

        return UnigramTokenizer if core.segmentation == "unigram" else SentencePieceBPETokenizer

    # ----------------------------------------------------------------- training

    #: The trainer's settings among a trainer's arguments, and those of
    #: them that are whole numbers.
    _SETTINGS: tuple[str, ...]
    _WHOLE_NUMBERS: tuple[str, ...]
    #: The counter's settings, recorded with the trainer's.
    _WHITESPACE = ("remove_extra_whitespaces", "add_dummy_prefix")

    @classmethod
    def _settings(cls, arguments: dict) -> dict:
        """The trainer's settings among a trainer's arguments."""
        settings = {name: arguments[name] for name in cls._SETTINGS}
        settings["special_tokens"] = text_list(settings["special_tokens"], "special_tokens")
        whole_numbers(**{name: settings[name] for name in cls._WHOLE_NUMBERS})
        return settings

    @classmethod
    def _train(cls, arguments: dict) -> SentencePieceTokenizer:
        """What ``train`` and ``train_from_iterator`` do with their
        ``arguments`` (their ``locals()``): count the ``files`` or ``texts``
        as SentencePiece words, then train this class's model on them."""
        counts = arguments.get("counts")
        if isinstance(counts, LanguageCounts):
            settings = cls._settings(arguments)
            whitespace = {name: counts.settings[name] for name in cls._WHITESPACE}
            return train_languages(
                cls, "unigram", counts, settings, {**settings, **whitespace},
                balance=arguments["balance"], parity=arguments.get("parity"), progress=arguments["progress"],
            )
        if arguments.get("balance") is not None or arguments.get("parity") is not None:
            raise ValueError("balance and parity weigh languages: train from polytok.LanguageCounts")
        if counts is not None:
            counter = trainer_counter(counts, "unigram", cls)
        else:
            counter = _core.PieceCounter.sentencepiece(arguments["remove_extra_whitespaces"], arguments["add_dummy_prefix"], [])
        settings = cls._settings(arguments)
        if "texts" in arguments:
            count_texts(counter, arguments["texts"])
        with progress_callback(wanted(arguments["progress"])) as callback:
            if "files" in arguments:
                count_files(counter, arguments["files"], arguments["errors"], callback)
            corpus = corpus_record(counter)
            core = _core.Unigram.train(counter, {**settings, "segmentation": cls._segmentation}, callback)
        whitespace = {name: core.whitespace[name] for name in cls._WHITESPACE}
        return cls(core, {**settings, **whitespace, "corpus": corpus})

    # -------------------------------------------------------------------- files

    def save_sentencepiece(self, path: PathLike) -> None:
        """Save as a SentencePiece ``.model`` file (with the normalization
        rules the model was loaded with, else the identity), atomically:
        ``sentencepiece`` loads it and encodes as polytok does."""
        atomic_write(path, self._core.to_sentencepiece())

    @classmethod
    def from_sentencepiece(cls, path: PathLike) -> SentencePieceTokenizer:
        """Load a SentencePiece ``.model`` file (a Unigram or a BPE model,
        which this class must hold unless it is
        :class:`SentencePieceTokenizer` itself), with whatever normalization
        rules (``nmt_nfkc``, the default, ``nfkc``, the case-folding ``_cf``
        ones, custom rules; the pipeline starts with
        :class:`polytok.normalizers.SentencePieceCharsmap`) and whitespace
        settings (``add_dummy_prefix``, ``remove_extra_whitespaces``,
        ``escape_whitespaces``, ``treat_whitespace_as_suffix``), byte
        fallback, user-defined pieces and unknown surface: it encodes and
        decodes as ``sentencepiece`` does.

        Raises :class:`polytok.TokenizerFileError` (a ``ValueError``) naming
        the file for what ``sentencepiece`` refuses (a damaged or truncated
        file, a second ``<unk>`` or none without byte fallback, empty,
        NUL-holding or repeated pieces, non-finite scores, byte pieces
        without byte fallback or missing with it, a damaged charsmap) and
        for what polytok would encode or decode otherwise: a denormalizer,
        word and character models, and user-defined pieces with two spaces
        in a row when extra spaces are removed."""
        source = os.fspath(path)
        with open(path, "rb") as f:
            data = f.read()
        core = _core.Unigram.from_sentencepiece(data, source)
        if cls is not SentencePieceTokenizer and core.segmentation != cls._segmentation:
            raise _core.TokenizerFileError(
                f"{source}: holds a SentencePiece {core.segmentation} model, not a {cls.__name__} (polytok.load reads any)"
            )
        return SentencePieceTokenizer.of_class(core)(core)

    def decode(self, ids: Iterable[int], *, skip_special_tokens: bool = False) -> str:
        """The text of ``ids``, as SentencePiece decodes it: ``▁`` back to
        spaces, the dummy prefix removed, byte pieces joined into UTF-8,
        ``<unk>`` as " ⁇ ", control pieces (``<s>``, ``</s>``) as nothing.
        ``skip_special_tokens``: leave out the template's tokens too."""
        ids = self._kept(ids, skip_special_tokens)
        try:
            return self._core.decode(ids)
        except OverflowError:
            raise id_error(ids, self.vocab_size) from None

    def score(self, id: int) -> float:
        """The score of a piece (a log-probability in a Unigram model; in a
        BPE model, the merge priority: higher merges first)."""
        try:
            return self._core.score(id)
        except OverflowError:
            raise id_error(id, self.vocab_size) from None

    @property
    def byte_fallback(self) -> bool:
        """Whether unknown characters become byte pieces."""
        return self._core.byte_fallback

    @property
    def normalization(self) -> str | None:
        """The name of the model's normalization rules (``"nmt_nfkc"``,
        ...; empty when its file names none), or ``None`` for the identity."""
        return self._core.normalization

    def __repr__(self) -> str:
        return f"{type(self).__name__}(vocab_size={self.vocab_size}, byte_fallback={self.byte_fallback})"


class SentencePieceBPETokenizer(SentencePieceTokenizer):
    """A SentencePiece BPE tokenizer (Llama 2's and Mistral's ``.model``
    files): each text starts as its characters (a user-defined piece is
    one, never merged), and neighbours merge pair by pair, the pair that
    spells the best-scoring piece first, the leftmost among equals, as
    ``sentencepiece`` does. Characters no piece covers are ``<unk>`` (one
    per run), or their UTF-8 bytes as ``<0xHH>`` pieces with byte fallback.
    Text is handled and decoded as in :class:`polytok.UnigramTokenizer`.

    Train one with :meth:`train` or :meth:`train_from_iterator`, or load
    one with :meth:`from_sentencepiece` or :func:`polytok.load`.
    """

    _segmentation = "bpe"

    @classmethod
    def train(
        cls,
        files: PathLike | Iterable[PathLike],
        *,
        vocab_size: int = 8000,
        character_coverage: float = 0.9995,
        byte_fallback: bool = False,
        unk_token: str = "<unk>",
        special_tokens: Sequence[str] = SPECIAL_TOKENS,
        max_piece_length: int = 16,
        split_by_script: bool = True,
        split_digits: bool = False,
        min_frequency: int = 2,
        remove_extra_whitespaces: bool = True,
        add_dummy_prefix: bool = True,
        errors: Literal["strict", "replace"] = "strict",
        progress: bool | None = None,
    ) -> SentencePieceBPETokenizer:
        """Learn a SentencePiece BPE model (Llama 2's and Mistral's design)
        from text files with polytok's BPE trainer.

        Each line is one sentence, its spaces handled as SentencePiece does
        (``remove_extra_whitespaces``, ``add_dummy_prefix``) and written
        ``▁``; the words (each from a ``▁`` on) are counted. The characters
        that make ``character_coverage`` of the text are the symbols (the
        rarer ones are ``<unk>``, or their bytes with ``byte_fallback``);
        the most frequent pair of neighbouring symbols merges first (ties:
        the older symbols), never across words, into pieces of at most
        ``max_piece_length`` characters, one Unicode script
        (``split_by_script``) and no digit with anything else
        (``split_digits``), as SentencePiece's rules; pairs seen fewer than
        ``min_frequency`` times never merge. Piece ``i`` of the merges
        scores ``-i``, so encoding replays the merges in training order.

        ``vocab_size`` counts ``unk_token`` (id 0), ``special_tokens``
        (control pieces, next), the 256 ``<0xHH>`` pieces with
        ``byte_fallback``, the merged pieces and the characters (last).
        :meth:`save_sentencepiece` writes a ``.model`` file that
        ``sentencepiece`` loads and encodes the same. ``files``: paths,
        directories (every ``.txt`` below) and glob patterns, UTF-8
        (``errors="replace"`` replaces bad bytes). ``progress``: progress
        bars on stderr (default: when it is a terminal). The same corpus
        and settings give the same model.
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
        special_tokens: Sequence[str] = SPECIAL_TOKENS,
        max_piece_length: int = 16,
        split_by_script: bool = True,
        split_digits: bool = False,
        min_frequency: int = 2,
        remove_extra_whitespaces: bool = True,
        add_dummy_prefix: bool = True,
        progress: bool | None = None,
    ) -> SentencePieceBPETokenizer:
        """Learn a SentencePiece BPE model from strings (any iterable,
        consumed once; each line of each string is a sentence). Arguments as
        in :meth:`train`."""
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
        special_tokens: Sequence[str] = SPECIAL_TOKENS,
        max_piece_length: int = 16,
        split_by_script: bool = True,
        split_digits: bool = False,
        min_frequency: int = 2,
        balance: float | None = None,
        progress: bool | None = None,
    ) -> SentencePieceBPETokenizer:
        """Learn a SentencePiece BPE model from :class:`polytok.Counts` made
        for Unigram (:meth:`polytok.Counts.for_unigram`, SentencePiece's
        words): byte for byte what :meth:`train` learns from the corpus they
        count. The whitespace handling is the counts'; ``counts`` are left as
        they are. Other arguments as in :meth:`train`. From
        :class:`polytok.LanguageCounts`, ``balance`` weighs the languages
        (see :meth:`polytok.LanguageCounts.balanced`)."""
        return cls._train(locals())

    _SETTINGS = (
        "vocab_size", "character_coverage", "byte_fallback", "unk_token", "special_tokens",
        "max_piece_length", "split_by_script", "split_digits", "min_frequency",
    )
    _WHOLE_NUMBERS = ("vocab_size", "max_piece_length", "min_frequency")
