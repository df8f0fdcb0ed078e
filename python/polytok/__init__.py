"""polytok: fast, exact tokenizers with a Rust core.

>>> import polytok
>>> tok = polytok.BPETokenizer.train_from_iterator(["low lower lowest"] * 10, vocab_size=300)
>>> tok.decode(tok.encode("lowest"))
'lowest'
"""

from polytok import _core
from polytok._core import CorpusError, PolytokError, TokenizerFileError
from polytok._files import read_text, read_tokenizer

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
    text = read_text(path, "a polytok tokenizer file")
    # Not a polytok file: the loader of BPE files reports what is wrong.
    kind, core = {
        "wordpiece": (WordPieceTokenizer, _core.WordPiece),
        "unigram": (UnigramTokenizer, _core.Unigram),
    }.get(_core.file_model(text), (BPETokenizer, _core.Bpe))
    return kind(*read_tokenizer(path, core, text))
