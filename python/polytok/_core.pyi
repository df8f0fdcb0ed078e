"""Type stubs for ``polytok._core``, the compiled PyO3 module (rust/src/python.rs
and rust/src/python/pipeline.rs).

Argument names, defaults and positional/keyword-ness follow the
``#[pyo3(signature = ...)]`` attributes; ``tests/test_stubs.py`` runs
``mypy.stubtest`` against the built module to keep the two in step.

Argument types follow PyO3's conversions: a Rust ``Vec<T>`` accepts any
sequence but ``str`` (hence ``Sequence``), ``&Bound<PyList>`` accepts only
a ``list``, ``&str`` only a ``str`` and ``&[u8]`` only ``bytes``.
"""

import os
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, ClassVar, Literal, SupportsIndex, TypedDict, final, overload

import numpy as np
from typing_extensions import disjoint_base

if sys.version_info >= (3, 12):
    from collections.abc import Buffer as _Buffer
else:
    _Buffer = bytes | bytearray | memoryview

__all__ = [
    "PieceCounter",
    "Bpe",
    "WordPiece",
    "Unigram",
    "pre_tokenize",
    "preset_pipeline",
    "to_tokenizer_json",
    "from_tokenizer_json",
    "read_tokenizer_json",
    "from_tekken_json",
    "readable",
    "Pipeline",
    "TokenizerBase",
    "Encoding",
    "DecodeStream",
    "decode_tokens",
    "decoder_stream_lookahead",
    "pretokenize",
    "pattern_regex",
    "file_model",
    "normalize",
    "scripts",
    "word_counts",
    "PolytokError",
    "CorpusError",
    "TokenizerFileError",
]

#: ``(stage, done, total)``, called from the Rust core during long work,
#: with a fourth argument, a note, where the work says what it serves now
#: (parity-aware training: the costliest language); an exception it raises
#: stops the work and is re-raised.
_Progress = Callable[..., object]

class _ParityArgs(TypedDict, total=False):
    """Parity-aware training's arguments: a development set's counters, one per language (emptied), or target ratios; the variants; the languages' names (required)."""

    dev: Sequence[PieceCounter] | None
    ratios: Sequence[float] | None
    global_merges: int
    window: tuple[int, float] | None
    names: Sequence[str]

class _ParityDone(TypedDict):
    """What parity-aware training did: the language each step was chosen for (None: by counts over all languages), each language's tokens before and after, the distinct pieces over all languages."""

    chosen: list[int | None]
    tokens_before: list[int]
    tokens_after: list[int]
    distinct_pieces: int
#: Which special tokens to recognize in text: none, ``"all"``, or these.
_AllowedSpecial = Literal["all"] | Iterable[str] | None
#: A ``Pipeline`` batch's inputs: texts, or pairs of texts.
_Inputs = list[str] | list[tuple[str, str]] | list[str | tuple[str, str]]

class PolytokError(ValueError):
    """Base class of polytok's errors."""

class CorpusError(PolytokError):
    """The training corpus cannot be used."""

class TokenizerFileError(PolytokError):
    """A tokenizer file is damaged or not understood."""

@final
class PieceCounter:
    """Counts the pieces of a corpus (files or batches of strings), for training."""

    def __new__(cls, pattern: str, special_tokens: Sequence[str] = ...) -> PieceCounter: ...
    @staticmethod
    def bert(
        clean_text: bool,
        handle_chinese_chars: bool,
        strip_accents: bool,
        lowercase: bool,
        special_tokens: Sequence[str],
    ) -> PieceCounter:
        """A counter of BERT words (normalized, cut at white space and punctuation), for WordPiece."""
    @staticmethod
    def sentencepiece(
        remove_extra_whitespaces: bool, add_dummy_prefix: bool, special_tokens: Sequence[str]
    ) -> PieceCounter:
        """A counter of SentencePiece words (spaces handled as SentencePiece does, line by line; a word starts at each ``▁``), for Unigram."""
    def add_texts(self, texts: list[str]) -> None:
        """Counts a batch of texts on all cores (each text on its own: pieces never span two texts; lone surrogates read as U+FFFD)."""
    def add_arrow_strings(
        self, offsets: _Buffer, data: _Buffer, offset_width: int, first: int, rows: int, parallel: bool = True
    ) -> None:
        """Counts rows ``first..first + rows`` of an Arrow string array given as its offsets (``offset_width`` 4 or 8 bytes) and data buffers, without a Python string per row; on all cores, or on this thread (``parallel=False``)."""
    def add_files(
        self,
        paths: Sequence[str | os.PathLike[str]],
        total_bytes: int,
        errors: str = "strict",
        progress: _Progress | None = None,
        max_pieces: int | None = None,
    ) -> None:
        """Counts files (UTF-8; ``errors="replace"`` replaces bad bytes, ``"strict"`` refuses them); with ``max_pieces``, in bounded memory, the whole pruned to ``max_pieces``."""
    @property
    def distinct_pieces(self) -> int:
        """Distinct pieces counted so far."""
    @property
    def text_bytes(self) -> int:
        """Bytes of text counted so far."""
    @property
    def occurrences(self) -> int:
        """Occurrences of the pieces kept."""
    @property
    def dropped(self) -> tuple[int, int]:
        """``(pieces, occurrences)`` left out by pruning."""
    @property
    def description(self) -> str:
        """How this counter cuts text, as JSON."""
    @property
    def table_key(self) -> int:
        """The key this counter's table hashes with (see ``table_key`` of :meth:`copy`)."""
    def copy(self, with_counts: bool = True, table_key: int | None = None) -> PieceCounter:
        """A counter that cuts text as this one does, holding a copy of its counts (``with_counts``) or none, in a table hashing with the same key, or with ``table_key``: the counting workers of one job take the driver's key, so that their tables add into its table shard by shard (:meth:`to_transfer_bytes`)."""
    def add(self, other: PieceCounter) -> None:
        """Adds ``other``'s counts into this one's; a ``ValueError`` names the setting that differs when they cut text differently."""
    def to_transfer_bytes(self) -> bytes:
        """The counts as bytes for another process of this job: unsorted, fast to write and to add, not to be kept."""
    @staticmethod
    def from_transfer_bytes(parts: Sequence[bytes], source: str) -> PieceCounter:
        """The sum of the counts of :meth:`to_transfer_bytes` parts (``source`` names them in errors), as a counter; a ``ValueError`` when they were made differently."""
    def add_transfer_bytes(self, parts: Sequence[bytes], source: str) -> None:
        """Adds the counts of :meth:`to_transfer_bytes` parts (the workers' counts): those hashed with this counter's key shard by shard on all cores. ``source`` names them in errors; a part made another way is a ``ValueError``."""
    def add_scaled(self, other: PieceCounter, factor: float) -> None:
        """Adds ``other``'s counts, each multiplied by ``factor`` (at least 1) and rounded, never below 1 (language-balanced training); a ``ValueError`` when they cut text differently or the factor is below 1."""
    def prune(self, max_pieces: int) -> None:
        """Keeps the ``max_pieces`` most frequent pieces; the others are recorded in ``dropped``."""
    def most_common(self, n: int | None = None) -> list[tuple[bytes, int]]:
        """The ``n`` most frequent pieces (all without ``n``) as ``(bytes, count)``, most frequent first, ties in byte order."""
    def to_bytes(self) -> bytes:
        """The counts as the bytes of a count file."""
    @staticmethod
    def from_bytes(data: bytes, source: str) -> PieceCounter:
        """The counter and counts of a count file's bytes; ``source`` names the file in errors."""

@final
class Bpe:
    """A byte-level BPE model (the Rust side of ``polytok.BPETokenizer``)."""

    @staticmethod
    def train(
        counter: PieceCounter, settings: dict[str, Any], progress: _Progress | None = None
    ) -> Bpe:
        """Learns a model from a counter's pieces (which it empties), with the counter's pattern and special tokens; ``settings``: the trainer's settings by name, as its Python keyword arguments (not the counter's)."""
    @staticmethod
    def train_parity(
        counters: Sequence[PieceCounter], settings: dict[str, Any], parity: _ParityArgs, progress: _Progress | None = None
    ) -> tuple[Bpe, _ParityDone]:
        """Learns a model parity-aware from one counter per language (read, not emptied), with their pattern and special tokens."""
    @staticmethod
    def from_json(json: str, source: str) -> tuple[Bpe, str | None, str | None]:
        """The model of polytok JSON, with its training record and pipeline as JSON text (or ``None``)."""
    def to_json(self, training: str | None = None, pipeline: str | None = None) -> str:
        """polytok JSON; ``training`` and ``pipeline`` are JSON objects recorded in the file."""
    @staticmethod
    def from_tiktoken(text: str, source: str, pattern: str, special_tokens: Sequence[tuple[str, int]]) -> Bpe:
        """A model from a tiktoken rank file's text, its pattern and its special tokens."""
    def clear_cache(self) -> None:
        """Forgets the pieces cached by encoding (on every thread)."""
    def to_tiktoken(self) -> str:
        """The tiktoken rank file's text."""
    def decode_bytes(self, ids: Sequence[int]) -> bytes:
        """The bytes of ``ids``."""
    def token_bytes(self, id: int) -> bytes:
        """The bytes of token ``id``."""
    def token_id(self, token: bytes) -> int | None:
        """The id of the token with these bytes, or ``None``."""
    @property
    def vocab_size(self) -> int:
        """Ordinary tokens plus special tokens, i.e. one past the largest id."""
    @property
    def n_ordinary(self) -> int:
        """Ordinary (non-special) tokens: ids ``0..n_ordinary``."""
    @property
    def pattern(self) -> str:
        """The pre-tokenization pattern, as given (preset name, regex or "none")."""
    @property
    def special_tokens(self) -> list[tuple[str, int]]:
        """The special tokens' texts and ids."""
    @property
    def merges(self) -> list[tuple[int, int]] | None:
        """The pair that made each merged token, when the model was trained here; else ``None``."""

@final
class WordPiece:
    """A WordPiece model (the Rust side of ``polytok.WordPieceTokenizer``)."""

    @staticmethod
    def train(
        counter: PieceCounter, settings: dict[str, Any], progress: _Progress | None = None
    ) -> WordPiece:
        """Learns a model from a BERT counter's words (which it empties), with the counter's normalization and special tokens; ``settings``: the trainer's settings by name, as its Python keyword arguments (not the counter's)."""
    @staticmethod
    def train_parity(
        counters: Sequence[PieceCounter], settings: dict[str, Any], parity: _ParityArgs, progress: _Progress | None = None
    ) -> tuple[WordPiece, _ParityDone]:
        """Learns a model parity-aware from one BERT counter per language (read, not emptied), with their normalization and special tokens."""
    @staticmethod
    def from_vocab_txt(
        text: str,
        source: str,
        unk_token: str,
        continuing_subword_prefix: str,
        max_input_chars_per_word: int,
        clean_text: bool,
        handle_chinese_chars: bool,
        strip_accents: bool,
        lowercase: bool,
        special_tokens: Sequence[str],
    ) -> WordPiece:
        """A model from a ``vocab.txt``'s text and the settings."""
    @staticmethod
    def from_json(json: str, source: str) -> tuple[WordPiece, str | None, str | None]:
        """The model of polytok JSON, with its training record and pipeline as JSON text (or ``None``)."""
    def to_json(self, training: str | None = None, pipeline: str | None = None) -> str:
        """polytok JSON; ``training`` and ``pipeline`` are JSON objects recorded in the file."""
    def to_vocab_txt(self) -> str:
        """The ``vocab.txt`` text: one token a line, in id order."""
    def decode(self, ids: Sequence[int], cleanup: bool = True) -> str:
        """The text of ``ids``."""
    def token(self, id: int) -> str:
        """The text of token ``id``."""
    def token_id(self, token: str) -> int | None:
        """The id of a token, or ``None``."""
    @property
    def unk_id(self) -> int:
        """The unknown token's id."""
    @property
    def vocab_size(self) -> int:
        """Tokens in the vocabulary."""
    @property
    def settings(self) -> dict[str, Any]:
        """The settings, as keyword arguments of ``from_vocab_txt``."""

@final
class Unigram:
    """A SentencePiece model, Unigram or BPE (the Rust side of ``polytok.UnigramTokenizer`` and ``polytok.SentencePieceBPETokenizer``)."""

    @staticmethod
    def train(
        counter: PieceCounter, settings: dict[str, Any], progress: _Progress | None = None
    ) -> Unigram:
        """Learns a model from a SentencePiece counter's words (which it empties), with the counter's whitespace handling; ``settings``: the trainer's settings by name, as its Python keyword arguments (not the counter's)."""
    @staticmethod
    def train_parity(
        counters: Sequence[PieceCounter], settings: dict[str, Any], parity: _ParityArgs, progress: _Progress | None = None
    ) -> tuple[Unigram, _ParityDone]:
        """Learns a model parity-aware from one SentencePiece counter per language (read, not emptied), with their whitespace handling; ``chosen``: the costliest language of each pruning round."""
    @staticmethod
    def from_sentencepiece(data: bytes, source: str) -> Unigram:
        """A model from a SentencePiece ``.model`` file's bytes."""
    @staticmethod
    def from_json(json: str, source: str) -> tuple[Unigram, str | None, str | None]:
        """The model of polytok JSON, with its training record and pipeline as JSON text (or ``None``)."""
    def to_json(self, training: str | None = None, pipeline: str | None = None) -> str:
        """polytok JSON; ``training`` and ``pipeline`` are JSON objects recorded in the file."""
    def to_sentencepiece(self) -> bytes:
        """A SentencePiece ``.model`` file's bytes."""
    def score(self, id: int) -> float:
        """The score (log probability) of piece ``id``."""
    def piece_id(self, piece: str) -> int | None:
        """The id of a piece, or ``None``."""
    def decode(self, ids: Sequence[int]) -> str:
        """The text of ``ids``."""
    def nbest(self, piece: str, k: int) -> list[tuple[list[int], float]]:
        """The ``k`` best segmentations of a piece with their scores, best first."""
    def sample(self, piece: str, alpha: float, seed: int) -> list[int]:
        """One segmentation of a piece drawn with probability proportional to exp(alpha × score)."""
    def piece(self, id: int) -> str:
        """The text of piece ``id``."""
    @property
    def vocab_size(self) -> int:
        """Pieces in the model."""
    @property
    def byte_fallback(self) -> bool:
        """Whether characters outside the pieces are encoded as byte pieces."""
    @property
    def segmentation(self) -> Literal["unigram", "bpe"]:
        """How the model segments text (SentencePiece's model type)."""
    @property
    def whitespace(self) -> dict[str, bool]:
        """SentencePiece's whitespace settings: ``remove_extra_whitespaces``, ``add_dummy_prefix``, ``escape_whitespaces``, ``treat_whitespace_as_suffix``."""
    @property
    def normalization(self) -> str | None:
        """The name of the model's normalization rules (SentencePiece's ``nmt_nfkc``, ...; empty when the file names none); ``None`` for the identity."""
    @property
    def unk_id(self) -> int | None:
        """The unknown piece's id; ``None`` for a model without one (byte fallback covers every text)."""

@disjoint_base
class TokenizerBase:
    """The base class of ``polytok.Tokenizer``: its calls on one text, in Rust (no Python frame per call)."""

    _pipeline_cache: Pipeline | None
    def __new__(cls, *_args: Any, **_kwargs: Any) -> TokenizerBase: ...
    def encode(
        self,
        text: str,
        pair: str | None = None,
        *,
        add_special_tokens: bool = True,
        allowed_special: _AllowedSpecial = None,
    ) -> Encoding:
        """The ``Encoding`` of ``text`` (and ``pair``): ids, type ids, masks, offsets (character offsets into the texts given), word ids; ``allowed_special``: the special tokens recognized in the text (``"all"`` or a collection)."""
    def encode_ids(
        self,
        text: str,
        *,
        add_special_tokens: bool = True,
        allowed_special: _AllowedSpecial = None,
    ) -> list[int]:
        """The ids of ``text`` alone, as a list: the fastest way to them (no offsets, no ``Encoding``)."""

@final
class Pipeline:
    """A model with its normalizer, pre-tokenizer, special tokens, post-processor, truncation and padding."""

    def __new__(cls, model: Bpe | WordPiece | Unigram, spec: str) -> Pipeline: ...
    def encode(
        self,
        text: str,
        pair: str | None = None,
        add_special_tokens: bool = True,
        allowed_special: _AllowedSpecial = None,
        offsets: bool = False,
    ) -> Encoding:
        """The encoding of ``text`` (and ``pair``); offsets computed at once with ``offsets``, else on first use."""
    def encode_batch(
        self,
        inputs: _Inputs,
        add_special_tokens: bool = True,
        allowed_special: _AllowedSpecial = None,
        offsets: bool = False,
    ) -> list[Encoding]:
        """The encoding of each input (a text or a pair of texts), on all cores."""
    def encode_ids(
        self,
        text: str,
        pair: str | None = None,
        add_special_tokens: bool = True,
        allowed_special: _AllowedSpecial = None,
    ) -> list[int]:
        """The ids of ``text`` (and ``pair``) alone, as a list."""
    def encode_batch_ids(
        self,
        texts: list[str],
        add_special_tokens: bool = True,
        allowed_special: _AllowedSpecial = None,
    ) -> list[list[int]]:
        """The ids of many texts, as lists, encoded on all cores (lone surrogates read as U+FFFD)."""
    def encode_batch_arrays(
        self,
        inputs: _Inputs,
        pad_id: int,
        add_special_tokens: bool = True,
        allowed_special: _AllowedSpecial = None,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """A batch as NumPy ``uint32`` arrays, built without the GIL: ``(ids, attention_mask, type_ids, lengths)``, the first three ``len(inputs) x width``."""
    @property
    def vocab_size(self) -> int:
        """The number of ids: the model's, and added tokens' past them."""
    def id_to_token(self, id: int) -> str:
        """A token's text (bytes that are not UTF-8 shown as ``<0xNN>``)."""
    def token_to_id(self, token: str) -> int | None:
        """The id of a token given by its text: an added or special token of the pipeline, or of the model's vocabulary."""
    def decode(self, ids: Sequence[int], skip_special_tokens: bool = False) -> str:
        """The text of ``ids`` (see ``Tokenizer::decode``)."""
    def encode_batch_flat(
        self,
        texts: list[str],
        add_special_tokens: bool = True,
        allowed_special: _AllowedSpecial = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Every id of a batch (``uint32``) and the ``n + 1`` offsets where each text's start (``int64``), encoded on all cores without the GIL: the tokens of each whole text, never truncated nor padded (lone surrogates read as U+FFFD)."""
    def pieces(self, text: str) -> list[str]:
        """The pieces the model gets for ``text``: normalized and pre-tokenized (no special tokens looked for)."""
    def without_special(self, ids: Sequence[int]) -> list[int]:
        """``ids`` without the special tokens of the pipeline and its template."""

@final
class Encoding:
    """One encoded input (see ``polytok.Encoding``)."""

    # Defines __eq__ and no __hash__: unhashable.
    __hash__: ClassVar[None]  # type: ignore[assignment]
    @property
    def ids(self) -> list[int]:
        """The token ids."""
    @property
    def type_ids(self) -> list[int]:
        """Each token's type id (segment: 0 for the first text, 1 for the pair)."""
    @property
    def attention_mask(self) -> list[int]:
        """0 for padding, else 1."""
    @property
    def special_tokens_mask(self) -> list[int]:
        """1 for special tokens (added by the template, or special-token text), else 0."""
    @property
    def sequence_ids(self) -> list[int | None]:
        """Which input each token comes from (0 or 1), ``None`` for added tokens."""
    @property
    def offsets(self) -> list[tuple[int, int]]:
        """Character ``(start, end)`` of each token in its own text."""
    @property
    def word_ids(self) -> list[int | None]:
        """The pre-tokenized piece (word) each token belongs to, within its sequence; ``None`` for added tokens."""
    @property
    def tokens(self) -> list[str]:
        """Each token's text, as the model has it."""
    @property
    def overflowing(self) -> list[Encoding]:
        """The windows cut off by truncation, each a full encoding."""
    def char_to_token(self, char: int, sequence_index: int = 0) -> int | None:
        """The index of the token holding character ``char`` of input ``sequence_index``, or ``None``."""
    def token_to_chars(self, index: int) -> tuple[int, int] | None:
        """The character span of token ``index`` in its input, or ``None`` for added tokens."""
    def __len__(self) -> int: ...
    @overload
    def __getitem__(self, index: SupportsIndex, /) -> int:
        """An id, or a list of ids for a slice."""
    @overload
    def __getitem__(self, index: slice, /) -> list[int]: ...
    def __iter__(self) -> Iterator[int]:
        """Its ids, one after another."""
    def __eq__(self, other: object, /) -> bool:
        """Equal to another encoding or a sequence of ids with the same ids."""
    def __reduce__(self) -> tuple[Callable[[dict[str, Any]], Encoding], tuple[dict[str, Any]]]:
        """Pickles with everything (offsets and tokens computed first); the copy does not need the tokenizer."""
    @staticmethod
    def _restore(state: dict[str, Any]) -> Encoding:
        """An encoding from ``__reduce__``'s state (for unpickling)."""

@final
class DecodeStream:
    """``decoders::DecodeStream``, with a Python callable (a list of ids to its text) as the tokenizer's decode."""

    def __new__(cls, lookahead: int = 0) -> DecodeStream: ...
    @property
    def lookahead(self) -> int:
        """How many tokens the stream waits for before it returns text."""
    def step(self, id: int, decode: Callable[[list[int]], str]) -> str | None:
        """The text that ``id`` completes, if any."""
    def flush(self, decode: Callable[[list[int]], str]) -> str:
        """The rest of the text; the stream starts afresh."""

def pretokenize(text: str, pattern: str) -> list[str]:
    """The pieces of ``text`` under a pattern (preset name, regex or "none")."""

def pattern_regex(pattern: str) -> str | None:
    """The regular expression of a preset (tiktoken's), or ``None`` for "none"; a user regex is returned as given."""

def scripts(texts: Sequence[str]) -> list[str]:
    """The ISO 15924 code of the dominant script of each text (see ``text_stats.rs``)."""

def word_counts(texts: Sequence[Sequence[str]]) -> list[tuple[list[str], list[int]]]:
    """For each list of texts, its distinct words and their counts, in first-seen order; the lists on all cores."""

def normalize(spec_json: str, text: str) -> tuple[str, list[tuple[int, int]]]:
    """``text`` under the normalizer ``spec_json``, and for each character of the result the ``(start, end)`` character offsets in ``text`` that it stands for."""

def file_model(json: str) -> str | None:
    """The model of a polytok JSON file's text, or ``None`` (see ``model_file::model_of``)."""

def decode_tokens(spec_json: str, tokens: Sequence[bytes]) -> str:
    """The text of ``tokens`` (each token's bytes) through the decoder that ``spec_json`` describes."""

def decoder_stream_lookahead(spec_json: str) -> int:
    """How many tokens a decode stream waits for with the decoder ``spec_json``."""

def readable(bytes: bytes) -> str:
    """Token bytes as text, with bytes that do not decode shown as ``<0xNN>``."""

def preset_pipeline(model: Bpe | WordPiece | Unigram) -> str:
    """The pipeline of a model's preset (the steps it was trained with), as JSON."""

def to_tokenizer_json(model: Bpe | WordPiece | Unigram, spec_json: str) -> str:
    """``model`` with the pipeline ``spec_json`` as Hugging Face's ``tokenizer.json`` text."""

def from_tokenizer_json(text: str, source: str) -> tuple[Bpe | WordPiece | Unigram, str]:
    """The model and the pipeline (JSON) of a ``tokenizer.json`` text; errors name ``source``."""

def read_tokenizer_json(path: str | os.PathLike[str]) -> tuple[Bpe | WordPiece | Unigram, str]:
    """As :func:`from_tokenizer_json`, reading the file at ``path`` itself."""

def from_tekken_json(text: str, source: str) -> tuple[Bpe, str]:
    """The model and the pipeline (JSON) of a Tekken file's text; errors name ``source``."""

def pre_tokenize(spec: str, text: str) -> list[tuple[str, tuple[int, int]]]:
    """The pieces of ``text`` under the pre-tokenizer ``spec`` (JSON), each with its character span in ``text``."""
