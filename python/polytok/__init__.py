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
from polytok.pre_tokenizers import PRESETS, pattern_regex, pretokenize
from polytok.tokenizer import Encoding, Tokenizer, load_json
from polytok.report import Report, report
from polytok.unigram import UnigramTokenizer
from polytok.wordpiece import WordPieceTokenizer

__all__ = [
    "BPETokenizer",
    "CorpusError",
    "Encoding",
    "Tokenizer",
    "decoders",
    "normalizers",
    "pre_tokenizers",
    "processors",
    "PRESETS",
    "PolytokError",
    "Report",
    "TokenizerFileError",
    "UnigramTokenizer",
    "WordPieceTokenizer",
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


def load(
    path: str | os.PathLike, *, pattern: str | None = None, cased: bool = False
) -> Tokenizer:
    """Load a tokenizer file, whatever its model: polytok JSON (``.json``,
    saved by polytok: a preset, or a composed :class:`Tokenizer`), a tiktoken rank file (``.tiktoken``: BPE, with the
    pre-tokenization ``pattern`` it holds no trace of), a BERT vocabulary
    (``.txt``: WordPiece, uncased unless ``cased``) or a SentencePiece model
    (``.model``: Unigram)."""
    suffix = os.fspath(path).lower().rsplit(".", 1)[-1]
    if suffix == "model":
        return UnigramTokenizer.from_sentencepiece(path)
    if suffix == "tiktoken":
        if pattern is None:
            raise ValueError(f"{os.fspath(path)}: a .tiktoken rank file holds no pattern: give one (e.g. pattern='cl100k')")
        return BPETokenizer.from_tiktoken(path, pattern=pattern)
    if suffix == "txt":
        return WordPieceTokenizer.from_vocab(path, lowercase=not cased)
    return load_json(path)
