"""Feeding a corpus to a Rust piece counter: files (with progress) or any
iterable of strings. Shared by the trainers of every model."""

from __future__ import annotations

import os
from collections.abc import Iterable
from itertools import islice

from polytok import _core
from polytok._args import refuse_single_string
from polytok._files import PathLike, corpus_files

#: Strings handed to the Rust counter at a time by ``count_texts``.
_BATCH = 4096


def count_files(
    counter: _core.PieceCounter, files: PathLike | Iterable[PathLike], errors: str, callback, max_pieces: int | None = None
) -> None:
    """Count every file of ``files`` (paths, directories, globs); with
    ``max_pieces``, in bounded memory (rare pieces dropped as it goes)."""
    paths = corpus_files(files)
    total = sum(os.path.getsize(p) for p in paths)
    counter.add_files([os.fspath(p) for p in paths], total, errors, callback, max_pieces)


def count_texts(counter: _core.PieceCounter, texts: Iterable[str]) -> None:
    """Count strings (any iterable, consumed once), each on its own."""
    refuse_single_string(texts)
    iterator = iter(texts)
    while batch := list(islice(iterator, _BATCH)):
        for i, text in enumerate(batch):
            if not isinstance(text, str):
                raise TypeError(f"texts must be strings; item {i} of a batch is {type(text).__name__}")
        counter.add_texts(batch)  # lone surrogates become U+FFFD there


def without_surrogates(text: str) -> str:
    """``text`` with lone surrogates replaced by U+FFFD (tiktoken's rule)."""
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def corpus_record(counter: _core.PieceCounter) -> dict:
    """What a training record says of the corpus."""
    return {"bytes": counter.text_bytes, "distinct_pieces": counter.distinct_pieces}
