"""polytok: fast, exact tokenizers with a Rust core.

>>> import polytok
>>> tok = polytok.BPETokenizer.train_from_iterator(["low lower lowest"] * 10, vocab_size=300)
>>> tok.decode(tok.encode("lowest"))
'lowest'
"""

import os

from polytok._core import CorpusError, PolytokError, TokenizerFileError

# The component modules first: they register the components that saved
# pipelines name.
from polytok import decoders, normalizers, pre_tokenizers, processors
from polytok.bpe import BPETokenizer
from polytok.counts import Counts, LanguageCounts
from polytok.pre_tokenizers import PRESETS, pattern_regex, pretokenize
from polytok.tokenizer import Encoding, FlatIds, Tokenizer, from_json, from_tekken, from_tokenizer_json, read_tokenizer_json
from polytok.report import Report, report
from polytok.sentencepiece import SentencePieceBPETokenizer, SentencePieceTokenizer
from polytok.unigram import UnigramTokenizer
from polytok.wordpiece import WordPieceTokenizer

__all__ = [
    "BPETokenizer",
    "CorpusError",
    "Counts",
    "Encoding",
    "FlatIds",
    "LanguageCounts",
    "Tokenizer",
    "decoders",
    "normalizers",
    "pre_tokenizers",
    "processors",
    "PRESETS",
    "PolytokError",
    "Report",
    "SentencePieceBPETokenizer",
    "SentencePieceTokenizer",
    "TokenizerFileError",
    "UnigramTokenizer",
    "WordPieceTokenizer",
    "from_tekken",
    "from_tokenizer_json",
    "load",
    "report",
    # The embedding stage (polytok.embedding, NumPy), imported on first use:
    "ALiBi",
    "LearnedPositions",
    "RoPE",
    "SinusoidalPositions",
    "TokenEmbedding",
    "rope_base_lower_bound",
    "pattern_regex",
    "pretokenize",
]

__version__ = "0.1.0"

_EMBEDDING_NAMES = {"ALiBi", "LearnedPositions", "RoPE", "SinusoidalPositions", "TokenEmbedding", "rope_base_lower_bound"}


def __getattr__(name: str) -> object:
    """The embedding stage's names, from ``polytok.embedding``, so that
    ``import polytok`` does not import NumPy until they are used."""
    if name in _EMBEDDING_NAMES:
        from polytok import embedding

        return getattr(embedding, name)
    raise AttributeError(f"module 'polytok' has no attribute {name!r}")


def load(path: str | os.PathLike, *, pattern: str | None = None, cased: bool = False) -> Tokenizer:
    """Load a tokenizer file, whatever its format, recognized by its
    content (not its name):

    - Hugging Face ``tokenizer.json``: a preset (:class:`BPETokenizer`, ...)
      when its steps are the preset's, else a :class:`Tokenizer`;
    - polytok JSON (``.polytok``, or ``.json`` from earlier polytok
      versions): a preset or a composed :class:`Tokenizer`, as saved;
    - Mistral's Tekken (``tekken_*.json``): a :class:`Tokenizer` with the
      same ids as ``mistral-common`` (special tokens 0-999, recognized in
      text only when allowed);
    - a SentencePiece model (``.model``): a :class:`UnigramTokenizer` or a
      :class:`SentencePieceBPETokenizer`, as the model is;
    - a tiktoken rank file (``.tiktoken``: BPE, with the pre-tokenization
      ``pattern`` it holds no trace of, e.g. ``"cl100k"``);
    - a BERT vocabulary (``vocab.txt``: WordPiece, uncased unless
      ``cased``).
    """
    from polytok import _files

    kind, text = _files.sniff(path)
    name = os.fspath(path)
    if kind == "sentencepiece":
        return SentencePieceTokenizer.from_sentencepiece(path)
    if kind == "polytok":
        return from_json(text, name)
    if kind == "tokenizer.json":
        return read_tokenizer_json(path)
    if kind == "tekken":
        return from_tekken(text, name)
    if kind == "tiktoken":
        if pattern is None:
            raise ValueError(f"{name}: a tiktoken rank file holds no pattern: give one (e.g. pattern='cl100k')")
        return BPETokenizer.from_tiktoken(path, pattern=pattern)
    return WordPieceTokenizer.from_vocab(path, lowercase=not cased)
