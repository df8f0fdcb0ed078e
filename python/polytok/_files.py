"""File helpers: atomic writes, reading tokenizer files, corpus path expansion."""

from __future__ import annotations

import glob
import json
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path

from polytok import _core

PathLike = str | os.PathLike


def atomic_write(path: PathLike, data: str | bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file and a rename, so
    an interrupted save never leaves a half-written file (or destroys the
    previous one)."""
    path = Path(path)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    directory = path.parent if str(path.parent) else Path(".")
    fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(payload)
            f.flush()
            os.fsync(f.fileno())
        os.replace(temp, path)
    except BaseException:
        try:
            os.unlink(temp)
        except FileNotFoundError:
            pass
        raise


def corpus_files(specs: PathLike | Iterable[PathLike]) -> list[Path]:
    """Expand files, directories (every ``*.txt`` file below them, hidden
    files excluded) and glob patterns into a sorted list of files."""
    if isinstance(specs, (str, os.PathLike)):
        specs = [specs]
    files: set[Path] = set()
    for spec in specs:
        text = os.fspath(spec)
        path = Path(text)
        if path.is_dir():
            found = [
                p
                for p in path.rglob("*.txt")
                if p.is_file() and not any(part.startswith(".") for part in p.relative_to(path).parts)
            ]
            if not found:
                raise FileNotFoundError(f"{text}: the directory holds no .txt files")
            files.update(found)
        elif path.is_file():
            files.add(path)
        elif glob.has_magic(text):
            matched = [Path(p) for p in glob.glob(text, recursive=True) if Path(p).is_file()]
            if not matched:
                raise FileNotFoundError(f"{text}: the pattern matches no files")
            files.update(matched)
        else:
            raise FileNotFoundError(f"{text}: no such file or directory")
    if not files:
        raise FileNotFoundError("no corpus files given")
    return sorted(files)


def read_text(path: PathLike, what: str, encoding: str = "utf-8") -> str:
    """A tokenizer file's text; TokenizerFileError naming the file if it is
    not in ``encoding``."""
    with open(path, encoding=encoding, errors="strict") as f:
        try:
            return f.read()
        except UnicodeDecodeError as e:
            raise _core.TokenizerFileError(f"{os.fspath(path)}: not {what} (not {encoding.upper()})") from e


def read_tokenizer(path: PathLike, core_type: type, text: str | None = None) -> tuple[object, dict | None]:
    """The Rust model of a polytok JSON tokenizer file (``core_type``:
    ``_core.Bpe``, ``_core.WordPiece`` or ``_core.Unigram``) and its training
    record; ``text``: the file's contents, if already read."""
    if text is None:
        text = read_text(path, "a polytok tokenizer file")
    core, training = core_type.from_json(text, os.fspath(path))
    return core, json.loads(training) if training else None
