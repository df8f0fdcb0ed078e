"""Files, processes, arguments and messages of the hardening issue: saves
that keep modes and links and clean up after a kill, tokenizers that
pickle, ids and settings refused with a message that names them, and a CLI
that answers every bad argument with one line."""

from __future__ import annotations

import copy
import math
import multiprocessing
import os
import pickle
import signal
import subprocess
import sys
import time

import pytest
from click.testing import CliRunner

import polytok
from polytok.cli import main
from polytok.embedding import TokenEmbedding
from conftest import CORPORA

posix = pytest.mark.skipif(os.name != "posix", reason="modes, links and signals are POSIX")


@pytest.fixture(scope="module")
def tokenizers() -> dict[str, object]:
    return {
        "bpe": polytok.BPETokenizer.train(CORPORA, vocab_size=1000, special_tokens=["<|end|>"], progress=False),
        "wordpiece": polytok.WordPieceTokenizer.train(CORPORA, vocab_size=8000, progress=False),
        "unigram": polytok.UnigramTokenizer.train(CORPORA, vocab_size=8000, byte_fallback=True, progress=False),
    }


TEXTS = ["Tokenizers cut text into pieces.", "東京 😀 naïve", "", "  spaces  "]


# ------------------------------------------------------------------- saves


@posix
def test_saves_keep_modes_and_links(tmp_path, tokenizers):
    tok = tokenizers["bpe"]
    old = os.umask(0o022)
    try:
        tok.save(tmp_path / "new.json")
        assert os.stat(tmp_path / "new.json").st_mode & 0o777 == 0o644
        os.chmod(tmp_path / "new.json", 0o640)
        tok.save(tmp_path / "new.json")
        assert os.stat(tmp_path / "new.json").st_mode & 0o777 == 0o640
        os.symlink("new.json", tmp_path / "link.json")
        tokenizers["bpe"].save_tiktoken(tmp_path / "link.json")
        assert os.path.islink(tmp_path / "link.json")
        assert (tmp_path / "new.json").read_text() == (tmp_path / "link.json").read_text()
        assert (tmp_path / "new.json").read_text().startswith("AA== 0\n")  # the ranks, through the link
        assert os.stat(tmp_path / "new.json").st_mode & 0o777 == 0o640
    finally:
        os.umask(old)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.json", "new.json"]


def test_saves_name_the_requested_path(tmp_path, tokenizers):
    with pytest.raises(FileNotFoundError, match=r"missing/t.json: cannot write it: the directory .*missing does not exist"):
        tokenizers["bpe"].save(tmp_path / "missing" / "t.json")


SAVER = """
import sys, polytok
tok = polytok.BPETokenizer.train(sys.argv[1], vocab_size=2000, progress=False)
print("ready", flush=True)
while True:
    tok.save(sys.argv[2])
"""


@posix
def test_temporary_files_of_a_killed_save_are_removed(tmp_path, tokenizers):
    target = tmp_path / "t.json"
    stale = []
    for _ in range(20):
        child = subprocess.Popen([sys.executable, "-c", SAVER, str(CORPORA), str(target)], stdout=subprocess.PIPE, text=True)
        assert child.stdout.readline().strip() == "ready"
        time.sleep(0.05)
        child.send_signal(signal.SIGKILL)
        child.wait()
        stale = [p.name for p in tmp_path.iterdir() if p.name.startswith(".t.json.polytok-")]
        if stale:
            break
    if not stale:
        pytest.skip("no kill landed in the middle of a save in 20 tries")
    assert all(name.endswith(".tmp") for name in stale)
    # A live writer's temporary file is left alone.
    live = tmp_path / f".t.json.polytok-{os.getpid()}-x.tmp"
    live.write_text("")
    tokenizers["bpe"].save(target)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([live.name, "t.json"])


# ---------------------------------------------------------------- pickling


@pytest.mark.parametrize("model", ["bpe", "wordpiece", "unigram"])
def test_tokenizers_pickle_exactly(tokenizers, model, tmp_path):
    tok = tokenizers[model]
    for again in (pickle.loads(pickle.dumps(tok)), copy.deepcopy(tok)):
        assert type(again) is type(tok) and again.encode_batch(TEXTS) == tok.encode_batch(TEXTS)
        assert again.vocab_size == tok.vocab_size and again.training == tok.training
    # The pickle is the saved file, not an object graph.
    saved = tmp_path / "saved.json"
    tok.save(saved)
    assert len(pickle.dumps(tok)) < saved.stat().st_size + 500


def _encode(args):
    tok, text = args
    return tok.encode(text), tok.encode_batch([text] * 100)


@pytest.mark.parametrize("method", multiprocessing.get_all_start_methods())
def test_tokenizers_go_to_process_pools(tokenizers, method):
    # Batches in the parent first: a forked child inherits its thread pool
    # without the threads, and its own batches must not wait for them.
    expected = [(tok.encode(text), tok.encode_batch([text] * 100)) for tok in tokenizers.values() for text in TEXTS]
    context = multiprocessing.get_context(method)
    jobs = [(tok, text) for tok in tokenizers.values() for text in TEXTS]
    with context.Pool(2) as pool:
        assert pool.map(_encode, jobs, chunksize=1) == expected


# ---------------------------------------------------------- ids, arguments


@pytest.mark.parametrize("model", ["bpe", "wordpiece", "unigram"])
def test_ids_out_of_range_are_named(tokenizers, model):
    tok = tokenizers[model]
    for bad in (-1, 2**32, 2**70):
        with pytest.raises(ValueError, match=rf"unknown token id {bad}"):
            tok.decode([5, bad])
        with pytest.raises(ValueError, match=rf"unknown token id {bad}"):
            tok.id_to_token(bad)
    with pytest.raises(ValueError, match=rf"unknown token id {tok.vocab_size + 5}"):
        tok.decode([tok.vocab_size + 5])


def test_sampling_refuses_non_finite_alpha(tokenizers):
    uni = tokenizers["unigram"]
    for alpha in (math.nan, math.inf, -1.0):
        with pytest.raises(ValueError, match="alpha must be a finite number"):
            uni.sample("tokenizers", alpha=alpha)
    # Very large alpha is the limit: the best segmentation.
    for alpha in (1e6, 1e300, sys.float_info.max):
        assert uni.sample("tokenizers are fun", alpha=alpha, seed=3) == uni.encode("tokenizers are fun")


@pytest.mark.parametrize("model", ["bpe", "wordpiece", "unigram"])
def test_a_string_is_not_a_list_of_texts(tokenizers, model):
    with pytest.raises(TypeError, match="texts must be a list of strings, not a single str"):
        tokenizers[model].encode_batch("hello")
    train = type(tokenizers[model]).train_from_iterator
    with pytest.raises(TypeError, match="texts must be a list of strings"):
        train("hello world", vocab_size=3000)
    with pytest.raises(TypeError, match="special_tokens must be a list of strings"):
        train(["hello world"], vocab_size=3000, special_tokens="<a>")


def test_unknown_preset_names_are_refused():
    for spelled in ("nonexistent", "cl100K", "gpt-2"):
        with pytest.raises(ValueError, match=rf'unknown pattern preset "{spelled}".*cl100k'):
            polytok.BPETokenizer.train_from_iterator(["a b"], vocab_size=300, pattern=spelled)
        with pytest.raises(ValueError, match="unknown pattern preset"):
            polytok.pretokenize("a b", spelled)
    # Regular expressions still work, and so do the presets.
    assert polytok.pretokenize("ab cd", r"\w+") == ["ab", " ", "cd"]  # unmatched text stays a piece
    assert polytok.pretokenize("ab cd", "cl100k") == ["ab", " cd"]


def test_embedding_refuses_non_integer_ids(tokenizers):
    table = TokenEmbedding(tokenizers["bpe"], 8)
    for ids in ([[1.5]], [1.5], [[1, 2], [3.0]]):
        with pytest.raises(TypeError, match="token ids must be integers"):
            table.embed(ids)


def test_unreadable_directories_are_named(tmp_path, monkeypatch):
    locked = tmp_path / "corpus" / "locked"
    locked.mkdir(parents=True)
    (locked / "a.txt").write_text("text")
    scandir = os.scandir

    def refuse(path="."):
        if os.fspath(path) == os.fspath(locked):  # as chmod 0 would, even for root
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return scandir(path)

    monkeypatch.setattr(os, "scandir", refuse)
    with pytest.raises(OSError, match=r"locked: cannot read the directory \(Permission denied\)"):
        polytok.BPETokenizer.train(tmp_path / "corpus", vocab_size=300)


@pytest.mark.parametrize(
    "settings, message",
    [
        ({"vocab_size": -5}, "vocab_size must be at least 1"),
        ({"vocab_size": 2**70}, "vocab_size must be at least 1"),
        ({"vocab_size": 300, "min_frequency": -1}, "min_frequency must be at least 0"),
        ({"vocab_size": 300, "max_token_bytes": -1}, "max_token_bytes must be at least 1"),
        ({"vocab_size": "300"}, "vocab_size must be a whole number"),
    ],
)
def test_bpe_settings_are_checked_before_counting(settings, message):
    with pytest.raises((ValueError, TypeError), match=message):
        polytok.BPETokenizer.train_from_iterator(iter(()), **settings)


@pytest.mark.parametrize(
    "settings, message",
    [
        ({"sub_iterations": 10**6}, r"sub_iterations must be in 1..=100"),
        ({"shrinking_factor": 0.999999}, r"shrinking_factor must be in \(0, 0.99\]"),
        ({"seed_size": 10**12}, r"seed_size must be in 1..=100000000"),
        ({"max_piece_length": 10**6}, r"max_piece_length must be in 1..=255"),
        ({"character_coverage": math.nan}, r"character_coverage must be in \(0, 1\]"),
    ],
)
def test_unigram_settings_have_sensible_ranges(settings, message):
    with pytest.raises(ValueError, match=message):
        polytok.UnigramTokenizer.train_from_iterator(["a b c"] * 10, vocab_size=50, progress=False, **settings)


@pytest.mark.parametrize(
    "settings, message",
    [
        ({"vocab_size": 300, "min_frequncy": 2}, "unknown training setting 'min_frequncy'"),
        ({"vocab_size": 300, "pattern": "cl100k"}, "unknown training setting 'pattern'"),
        ({"min_frequency": 2}, "training setting vocab_size is missing"),
        ({"vocab_size": "300"}, "training setting vocab_size: TypeError"),
    ],
)
def test_core_training_settings_are_named(settings, message):
    counter = polytok._core.PieceCounter("cl100k", [])
    counter.add_texts(["a b c"])
    with pytest.raises(ValueError, match=message):
        polytok._core.Bpe.train(counter, settings)


def test_rope_base_bound_refuses_absurd_contexts():
    with pytest.raises(ValueError, match="context_length must be at most 1,048,576"):
        polytok.rope_base_lower_bound(2**40, 128)


# --------------------------------------------------------------------- CLI


@pytest.fixture(scope="module")
def files(tmp_path_factory, tokenizers) -> dict[str, str]:
    directory = tmp_path_factory.mktemp("cli-hardening")
    tokenizers["bpe"].save(directory / "t.json")
    tokenizers["unigram"].save_sentencepiece(directory / "u.model")
    return {"bpe": str(directory / "t.json"), "unigram": str(directory / "u.model"), "dir": str(directory)}


@pytest.mark.parametrize(
    "arguments, message",
    [
        (["decode", "-t", "{bpe}", "--", "-5"], "unknown token id -5"),
        (["decode", "-t", "{bpe}", "4294967296"], "unknown token id 4294967296"),
        (["encode", "-t", "{unigram}", "--nbest", "99999999999999999999", "hi"], "--nbest"),
        (["encode", "-t", "{unigram}", "--sample", "--alpha", "nan", "hi"], "alpha must be a finite number"),
        (["encode", "-t", "{unigram}", "--sample", "--seed", "-1", "hi"], "--seed"),
        (["train", str(CORPORA), "--vocab-size", "-5", "-o", "{dir}/x.json"], "--vocab-size"),
        (["train", str(CORPORA), "--vocab-size", "300", "--min-frequency", "-1", "-o", "{dir}/x.json"], "--min-frequency"),
        (["train", str(CORPORA), "--vocab-size", "300", "-o", "{dir}/missing/x.json"], "missing/x.json: cannot write it"),
        (["train", str(CORPORA), "--vocab-size", "300", "--pattern", "cl100K", "-o", "{dir}/x.json"], "unknown pattern preset"),
        (["embed", "-t", "{bpe}", "hi", "--dim", "-4"], "--dim"),
        (["info", "{bpe}", "--longest", "-1"], "--longest"),
    ],
)
def test_cli_errors_are_one_line(files, arguments, message):
    result = CliRunner().invoke(main, [a.format(**files) for a in arguments])
    assert result.exit_code != 0, result.output
    assert message in result.output and "Traceback" not in result.output, result.output
    assert not isinstance(result.exception, (OverflowError, AssertionError)), result.exception


def test_cli_standard_input_must_be_utf8(files):
    runner = CliRunner()
    result = runner.invoke(main, ["encode", "-t", files["bpe"]], input=b"caf\xe9 ok")
    assert result.exit_code != 0 and "invalid UTF-8 at byte offset 3 (line 1)" in result.output
    replaced = runner.invoke(main, ["encode", "-t", files["bpe"], "--errors", "replace"], input=b"caf\xe9 ok")
    assert replaced.exit_code == 0 and replaced.output.split()
