"""File helpers: atomic writes, reading tokenizer files, corpus path expansion."""

from __future__ import annotations

import glob
import os
import re
import tempfile
from collections.abc import Iterable
from pathlib import Path

from polytok import _core

PathLike = str | os.PathLike


#: Temporary files of a save are named ``.NAME.polytok-PID-RANDOM.tmp``:
#: recognizable, and owned by a process that can be checked.
_TEMP_MARK = ".polytok-"


def atomic_write(path: PathLike, data: str | bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file and a rename, so
    an interrupted save never leaves a half-written file (or destroys the
    previous one).

    The file ends up as a plain write would leave it: a new file gets the
    mode the umask allows, an existing one keeps its mode, and a symbolic
    link stays a link (its target is replaced). Temporary files left by an
    earlier save to the same path that was killed are removed."""
    requested = Path(path)
    target = Path(os.path.realpath(requested)) if requested.is_symlink() else requested
    payload = data.encode("utf-8") if isinstance(data, str) else data
    directory = target.parent if str(target.parent) else Path(".")
    if not directory.is_dir():
        raise FileNotFoundError(f"{os.fspath(path)}: cannot write it: the directory {directory} does not exist")
    _remove_stale_temporaries(directory, target.name)
    try:
        mode = os.stat(target).st_mode & 0o7777
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask
    try:
        fd, temp = tempfile.mkstemp(prefix=f".{target.name}{_TEMP_MARK}{os.getpid()}-", suffix=".tmp", dir=directory)
    except OSError as e:
        raise OSError(e.errno, f"{os.fspath(path)}: cannot write it: {e.strerror}") from e
    try:
        with os.fdopen(fd, "wb") as f:
            os.fchmod(f.fileno(), mode)
            f.write(payload)
            f.flush()
            os.fsync(f.fileno())
        os.replace(temp, target)
    except BaseException:
        try:
            os.unlink(temp)
        except FileNotFoundError:
            pass
        raise
    _sync_directory(directory)


def _remove_stale_temporaries(directory: Path, name: str) -> None:
    """Remove the temporary files of saves to ``name`` whose process is
    gone (killed mid-save); another live writer's are left alone."""
    prefix = f".{name}{_TEMP_MARK}"
    try:
        entries = [e for e in os.listdir(directory) if e.startswith(prefix) and e.endswith(".tmp")]
    except OSError:
        return
    for entry in entries:
        pid = entry[len(prefix) :].split("-", 1)[0]
        if pid.isdigit() and not _process_exists(int(pid)):
            try:
                os.unlink(directory / entry)
            except OSError:
                pass


def _process_exists(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # e.g. PermissionError: it exists, as another user's
        return True
    return True


def _sync_directory(directory: Path) -> None:
    """Make the rename durable (POSIX; a no-op where directories cannot be
    opened)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


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
            found = _text_files(path)
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


def _text_files(directory: Path) -> list[Path]:
    """Every ``*.txt`` file below ``directory``, hidden files and
    directories excluded; a directory that cannot be read is an error
    naming it (not a silently smaller corpus)."""

    def refuse(error: OSError) -> None:
        raise OSError(error.errno, f"{error.filename}: cannot read the directory ({error.strerror})") from error

    found = []
    for root, directories, names in os.walk(directory, onerror=refuse):
        directories[:] = sorted(d for d in directories if not d.startswith("."))
        found.extend(Path(root, name) for name in names if name.endswith(".txt") and not name.startswith("."))
    return [p for p in found if p.is_file()]


def read_text(path: PathLike, what: str, encoding: str = "utf-8") -> str:
    """A tokenizer file's text; TokenizerFileError naming the file if it is
    not in ``encoding``."""
    with open(path, encoding=encoding, errors="strict") as f:
        try:
            return f.read()
        except UnicodeDecodeError as e:
            raise _core.TokenizerFileError(f"{os.fspath(path)}: not {what} (not {encoding.upper()})") from e


#: A tiktoken rank file's line: a token in base64, a space, its rank.
_RANK_LINE = re.compile(rb"[A-Za-z0-9+/]*={0,2} [0-9]+\r?\n")


def sniff(path: PathLike) -> tuple[str, str | None]:
    """What a tokenizer file is, by its content: ``"tokenizer.json"``
    (Hugging Face), ``"polytok"`` (polytok JSON), ``"tekken"`` (Mistral's),
    ``"sentencepiece"``,
    ``"tiktoken"`` or ``"vocab"`` (a BERT vocabulary); with the text of a
    polytok or Tekken file (read once; a ``tokenizer.json`` is read by the
    core). The name decides only where the content cannot
    (a ``.polytok`` or ``.json`` file that is damaged goes to its reader,
    which says what is wrong)."""
    name = os.fspath(path)
    with open(path, "rb") as f:
        head = f.read(4096)
    stripped = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    suffix = name.lower().rsplit(".", 1)[-1]
    if suffix == "polytok":
        return "polytok", read_text(path, "a polytok tokenizer file")
    # A .json file that is no JSON is reported by the JSON reader. The
    # kind of a JSON file shows in its first key: polytok's files start
    # with their format, Tekken's with its config.
    if stripped.startswith(b"{") or suffix == "json":
        if re.match(rb'\{\s*"format"\s*:\s*"polytok"', stripped):
            return "polytok", read_text(path, "a polytok tokenizer file")
        if re.match(rb'\{\s*"config"\s*:', stripped):
            return "tekken", read_text(path, "a Tekken file")
        return "tokenizer.json", None
    # SentencePiece's model is a protocol buffer: its first field is a
    # piece (field 1, length-delimited), so the file starts with 0x0A.
    if head[:1] == b"\x0a" and (b"\x00" in head or not _is_text(head)):
        return "sentencepiece", None
    if _RANK_LINE.match(head):
        return "tiktoken", None
    return "vocab", None


def _is_text(data: bytes) -> bool:
    """Whether ``data`` reads as UTF-8 text (a cut last character allowed)."""
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as e:
        return e.start >= len(data) - 3 and e.reason == "unexpected end of data"
    return True
