"""polytok: fast, exact tokenizers with a Rust core.

>>> import polytok
>>> tok = polytok.BPETokenizer.train_from_iterator(["low lower lowest"] * 10, vocab_size=300)
>>> tok.decode(tok.encode("lowest"))
'lowest'
"""

from polytok._core import CorpusError, PolytokError, TokenizerFileError
import json

from polytok.bpe import BPETokenizer
from polytok.pretokenize import PRESETS, pattern_regex, pretokenize
from polytok.unigram import UnigramTokenizer
from polytok.wordpiece import WordPieceTokenizer

__all__ = [
    "BPETokenizer",
    "CorpusError",
    "PRESETS",
    "PolytokError",
    "TokenizerFileError",
    "UnigramTokenizer",
    "WordPieceTokenizer",
    "load",
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


def load(path: str) -> BPETokenizer | WordPieceTokenizer | UnigramTokenizer:
    """Load a tokenizer saved by polytok (``.json``), whatever its model."""
    with open(path, "rb") as f:
        try:
            model = json.loads(f.read()).get("model")
        except (ValueError, AttributeError):
            model = None  # The loader of BPE files reports what is wrong.
    if model == "wordpiece":
        return WordPieceTokenizer.load(path)
    if model == "unigram":
        return UnigramTokenizer.load(path)
    return BPETokenizer.load(path)
