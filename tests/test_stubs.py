"""The type stubs of the compiled module (``python/polytok/_core.pyi``) and
the ``py.typed`` marker: stubtest checks the stubs against the built
extension, and mypy type-checks code that uses the public API."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import polytok

pytest.importorskip("mypy", reason="mypy is not installed (pip install '.[test]')")

PACKAGE = Path(polytok.__file__).parent


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    # Outside the repository, so that mypy sees the installed package (as
    # users do), reads no project configuration and writes its cache under
    # tmp_path.
    (cwd / "mypy.ini").write_text("[mypy]\n")
    env = {**os.environ, "MYPY_FORCE_COLOR": "0", "NO_COLOR": "1"}
    env.pop("MYPYPATH", None)
    return subprocess.run(
        [sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )


def test_markers_are_installed() -> None:
    assert (PACKAGE / "py.typed").is_file()
    assert (PACKAGE / "_core.pyi").is_file()


def test_stubtest(tmp_path: Path) -> None:
    """Every class, function, signature and property of ``polytok._core``
    is in the stubs as the extension has it, and nothing more. (No
    allowlist is needed: PyO3 gives every callable a ``__text_signature__``,
    and stubtest skips ``__match_args__``-like internals that are absent.)"""
    result = _run(
        ["-m", "mypy.stubtest", "polytok._core", "--mypy-config-file", "mypy.ini"], tmp_path
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    # Beware: without py.typed, stubtest silently checks nothing and still
    # reports success; test_markers_are_installed guards against that.
    assert "no issues found in 1 module" in output, output


SNIPPET = '''
    import pickle
    from collections.abc import Iterator

    import numpy as np

    import polytok
    from polytok import _core

    tok = polytok.BPETokenizer.train_from_iterator(["a b"] * 4, vocab_size=260)
    enc = tok.encode("a b")
    ids: list[int] = enc.ids
    first: int = enc[0]
    head: list[int] = enc[:2]
    n: int = len(enc)
    it: Iterator[int] = iter(enc)
    same: bool = enc == [1, 2]
    offsets: list[tuple[int, int]] = enc.offsets
    words: list[int | None] = enc.word_ids
    tokens: list[str] = enc.tokens
    where: int | None = enc.char_to_token(0)
    span: tuple[int, int] | None = enc.token_to_chars(0)
    overflow: list[polytok.Encoding] = enc.overflowing
    copy: polytok.Encoding = pickle.loads(pickle.dumps(enc))
    text: str = tok.decode(ids)
    batch: list[polytok.Encoding] = tok.encode_batch(["a", "b"])
    raw: bytes = tok.decode_bytes(ids)
    merges: list[tuple[int, int]] | None = tok.merges
    specials: dict[str, int] = tok.special_tokens
    reveal_type(enc)
    reveal_type(enc[1:])

    model = tok.model
    if isinstance(model, _core.Bpe):
        token_id: int | None = model.token_id(b"a")
    flat: polytok.FlatIds = tok.encode_batch_flat(["a", "b"], add_special_tokens=False)
    first_ids: np.ndarray = flat.ids[flat.offsets[0] : flat.offsets[1]]
    model_pieces: list[str] = tok._pipeline.pieces("a b")

    counter = _core.PieceCounter("cl100k", ["<|endoftext|>"])
    counter.add_texts(["a b", "c"])
    size: int = counter.distinct_pieces
    bpe = _core.Bpe.train(counter, {"vocab_size": 300}, progress=lambda stage, done, total: None)
    saved: str = bpe.to_json()
    loaded, training, pipeline = _core.Bpe.from_json(saved, "<test>")
    reveal_type(loaded)
    pieces: list[str] = _core.pretokenize("a b", "cl100k")
    regex: str | None = _core.pattern_regex("none")
    normalized, char_spans = _core.normalize('{"type": "NFC"}', "a")
    stream = _core.DecodeStream(lookahead=1)
    step: str | None = stream.step(5, lambda ids: "x")

    try:
        polytok.load("missing.json")
    except polytok.TokenizerFileError as e:
        err: polytok.PolytokError = e
        value_error: ValueError = e
'''


def test_public_api_type_checks(tmp_path: Path) -> None:
    """A user's code type-checks under ``mypy --strict``; the stubs are
    what mypy sees (the revealed types come from them)."""
    snippet = tmp_path / "snippet.py"
    snippet.write_text(textwrap.dedent(SNIPPET))
    result = _run(
        ["-m", "mypy", "--strict", "--config-file", "mypy.ini", "--cache-dir", str(tmp_path / "cache"), str(snippet)],
        tmp_path,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert 'Revealed type is "polytok._core.Encoding"' in output, output
    assert re.search(r'Revealed type is "(builtins\.)?list\[(builtins\.)?int\]"', output), output
    assert 'Revealed type is "polytok._core.Bpe"' in output, output


def test_wrong_use_is_caught(tmp_path: Path) -> None:
    """A control: mypy does see the stubs' types (an ``Any`` module would
    accept this)."""
    snippet = tmp_path / "wrong.py"
    snippet.write_text(
        textwrap.dedent(
            """
            import polytok
            from polytok import _core

            enc = polytok.BPETokenizer.train_from_iterator(["a b"], vocab_size=260).encode("a b")
            a: str = enc.ids
            b: str = enc[0]
            c: int = _core.pretokenize("a", "none")
            _core.Pipeline(object(), "{}")
            """
        )
    )
    result = _run(
        ["-m", "mypy", "--strict", "--config-file", "mypy.ini", "--cache-dir", str(tmp_path / "cache"), str(snippet)],
        tmp_path,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 1, output
    for line in (6, 7, 8, 9):
        assert f"wrong.py:{line}: error:" in output, output
