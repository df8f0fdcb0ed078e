"""polytok: fast, exact tokenizers with a Rust core.

>>> import polytok
>>> tok = polytok.BPETokenizer.train_from_iterator(["low lower lowest"] * 10, vocab_size=300)
>>> tok.decode(tok.encode("lowest"))
'lowest'
"""

from polytok._core import CorpusError, PolytokError, TokenizerFileError
from polytok.bpe import BPETokenizer
from polytok.pretokenize import PRESETS, pattern_regex, pretokenize

__all__ = [
    "BPETokenizer",
    "CorpusError",
    "PRESETS",
    "PolytokError",
    "TokenizerFileError",
    "load",
    "pattern_regex",
    "pretokenize",
]

__version__ = "0.1.0"


def load(path: str) -> BPETokenizer:
    """Load a tokenizer saved by polytok (``.json``)."""
    return BPETokenizer.load(path)
