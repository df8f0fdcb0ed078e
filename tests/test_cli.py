"""The polytok command line."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time

import pytest
from click.testing import CliRunner

from polytok.cli import main
from conftest import CORPORA


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> str:
    out = tmp_path_factory.mktemp("cli") / "tok.json"
    result = CliRunner().invoke(
        main, ["train", "--vocab-size", "1200", "--special-token", "<|endoftext|>", str(CORPORA), "-o", str(out)]
    )
    assert result.exit_code == 0, result.output
    assert "trained 1200 tokens" in result.output
    # The same tokenizer in polytok JSON.
    again = ["train", "-q", "--vocab-size", "1200", "--special-token", "<|endoftext|>", str(CORPORA)]
    assert CliRunner().invoke(main, [*again, "-o", str(out.with_suffix(".polytok"))]).exit_code == 0
    return str(out)


def test_encode_decode_round_trip(trained):
    runner = CliRunner()
    text = "Tokenizers cut text into pieces. 東京 😀"
    encoded = runner.invoke(main, ["encode", "-t", trained, text])
    assert encoded.exit_code == 0, encoded.output
    ids = encoded.output.split()
    assert all(i.isdigit() for i in ids)
    decoded = runner.invoke(main, ["decode", "-t", trained, *ids])
    assert decoded.output == text + "\n"
    from_stdin = runner.invoke(main, ["decode", "-t", trained], input=encoded.output)
    assert from_stdin.output == text + "\n"


def test_encode_shows_tokens_and_special_tokens(trained):
    runner = CliRunner()
    shown = runner.invoke(main, ["encode", "-t", trained, "--show", "tokens", "hello world"])
    assert shown.exit_code == 0 and "hello" in shown.output
    # In a tokenizer.json special tokens are Hugging Face's added tokens,
    # recognized in every call; polytok JSON keeps them plain text unless
    # allowed.
    for path, always in ((trained, True), (trained.replace(".json", ".polytok"), False)):
        plain = runner.invoke(main, ["encode", "-t", path, "<|endoftext|>"]).output.split()
        allowed = runner.invoke(main, ["encode", "-t", path, "--allow-special", "<|endoftext|>"]).output.split()
        assert allowed == ["1199"] and (plain == allowed) == always


def test_info_and_samples(trained):
    result = CliRunner().invoke(main, ["info", trained, "--sample", str(CORPORA / "en.txt"), "--sample", str(CORPORA / "ja.txt")])
    assert result.exit_code == 0, result.output
    assert "1200 ids" in result.output and "cl100k" in result.output
    assert "en.txt" in result.output and "ja.txt" in result.output


def test_tiktoken_files_need_a_pattern(tmp_path, trained):
    runner = CliRunner()
    ranks = str(tmp_path / "r.tiktoken")
    assert runner.invoke(main, ["train", "--vocab-size", "300", "-q", str(CORPORA / "en.txt"), "-o", ranks]).exit_code == 0
    missing = runner.invoke(main, ["encode", "-t", ranks, "hi"])
    assert missing.exit_code != 0 and "--pattern" in missing.output
    assert runner.invoke(main, ["encode", "-t", ranks, "--pattern", "cl100k", "hi"]).exit_code == 0


def test_quiet_and_piped_training_print_nothing(tmp_path):
    out = tmp_path / "q.json"
    result = subprocess.run(
        [sys.executable, "-m", "polytok", "train", "--vocab-size", "400", "-q", str(CORPORA / "en.txt"), "-o", str(out)],
        capture_output=True, text=True, check=True,
    )
    assert result.stdout == "" and result.stderr == "" and out.exists()


def test_errors_are_one_line_messages(tmp_path):
    runner = CliRunner()
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"ok\n\xff\xfe\n")
    result = runner.invoke(main, ["train", "--vocab-size", "300", str(bad), "-o", str(tmp_path / "x.json")])
    assert result.exit_code == 1
    assert "bad.txt: invalid UTF-8 at byte offset 3 (line 2)" in result.output
    assert "Traceback" not in result.output
    replaced = runner.invoke(main, ["train", "--vocab-size", "300", "-q", "--errors", "replace", str(bad), "-o", str(tmp_path / "x.json")])
    assert replaced.exit_code == 0
    small = runner.invoke(main, ["train", "--vocab-size", "10", str(CORPORA), "-o", str(tmp_path / "y.json")])
    assert small.exit_code == 1 and "vocab_size 10 is too small" in small.output
    damaged = tmp_path / "damaged.json"
    damaged.write_text('{"format": "polytok", "version": 1, "model": "bpe", "tok')
    result = runner.invoke(main, ["decode", "-t", str(damaged), "1"])
    assert result.exit_code == 1 and "damaged.json" in result.output and "truncated" in result.output
    result = runner.invoke(main, ["decode", "-t", str(tmp_path / "y.json"), "1"])
    assert result.exit_code == 1 and "y.json" in result.output


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.parametrize(
    ("model_options", "threads"),
    # BPE on one thread: on every core it can finish before the signal on a
    # fast machine; Unigram trains for many seconds either way.
    [(["--vocab-size", "150000", "--min-frequency", "1"], "1"), (["--model", "unigram", "--vocab-size", "20000"], None)],
    ids=["bpe", "unigram"],
)
def test_ctrl_c_stops_training_promptly(tmp_path, model_options, threads):
    rng = random.Random(7)
    syllables = ["ka", "ri", "to", "mu", "sel", "ven", "dra", "qu", "ix", "lo", "pa", "zen", "or", "y", "th"]
    corpus = tmp_path / "big.txt"
    with corpus.open("w") as f:
        # Large enough that training outlasts the wait below on a fast machine.
        for _ in range(100):
            words = ("".join(rng.choices(syllables, k=rng.randint(1, 6))) for _ in range(40_000))
            f.write(" ".join(words) + "\n")
    out = tmp_path / "never.json"
    process = subprocess.Popen(
        [sys.executable, "-m", "polytok", "train", *model_options, str(corpus), "-o", str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=dict(os.environ, **({"RAYON_NUM_THREADS": threads} if threads else {})),
        # A runner started in the background ignores SIGINT, and its children
        # inherit that: Python then installs no KeyboardInterrupt handler.
        # The child gets the default disposition, as from a terminal.
        preexec_fn=_default_sigint,
    )
    time.sleep(1.5)
    assert process.poll() is None, "training finished before it could be interrupted"
    interrupted_at = time.monotonic()
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=30)
    # Training this corpus takes many seconds; stopping takes a fraction of
    # one, but up to 2.3 s was seen on a loaded 2-core machine.
    assert time.monotonic() - interrupted_at < 4.0
    assert process.returncode == 130, stderr
    assert "interrupted" in stderr
    assert not out.exists()


def test_progress_bars_on_a_terminal_only(tmp_path):
    pty = pytest.importorskip("pty")
    out = tmp_path / "t.json"
    command = [sys.executable, "-m", "polytok", "train", "--vocab-size", "3000", str(CORPORA), "-o", str(out)]
    chunks = []

    def read(fd):
        data = os.read(fd, 65536)
        chunks.append(data)
        return data

    env = dict(os.environ, COLUMNS="100")
    old = os.environ.copy()
    os.environ.update(env)
    try:
        status = pty.spawn(command, read)
    finally:
        os.environ.clear()
        os.environ.update(old)
    screen = b"".join(chunks).decode("utf-8", "replace")
    assert os.waitstatus_to_exitcode(status) == 0, screen
    assert "counting" in screen and "merging" in screen and "2744/2744" in screen


def test_wordpiece_train_encode_decode_info(tmp_path, bert_files):
    runner = CliRunner()
    out = tmp_path / "wp.json"
    trained = runner.invoke(main, ["train", "--model", "wordpiece", "--vocab-size", "6000", str(CORPORA), "-o", str(out)])
    assert trained.exit_code == 0, trained.output
    assert "trained 6000 tokens (wordpiece, uncased)" in trained.output
    ids = runner.invoke(main, ["encode", "-t", str(out), "Hello, World!"]).output.split()
    assert runner.invoke(main, ["decode", "-t", str(out), *ids]).output == "hello, world!\n"
    info = runner.invoke(main, ["info", str(out), "--sample", str(CORPORA / "en.txt")])
    assert info.exit_code == 0 and "WordPiece" in info.output and "6000 ids" in info.output
    vocab = tmp_path / "vocab.txt"
    assert runner.invoke(main, ["train", "--model", "wordpiece", "--vocab-size", "6000", "-q", str(CORPORA), "-o", str(vocab)]).exit_code == 0
    assert runner.invoke(main, ["encode", "-t", str(vocab), "Hello, World!"]).output.split() == ids
    # A released BERT vocabulary, uncased and cased.
    bert = str(bert_files[0])
    shown = runner.invoke(main, ["encode", "-t", bert, "--show", "tokens", "Unaffable"])
    assert "una ##ffa ##ble" in shown.output
    cased = runner.invoke(main, ["encode", "-t", bert, "--cased", "--show", "tokens", "Unaffable"])
    assert "una" not in cased.output.split()
    # Options of the other model are usage errors.
    wrong = runner.invoke(main, ["train", "--model", "wordpiece", "--vocab-size", "6000", "--pattern", "gpt2", str(CORPORA), "-o", str(out)])
    assert wrong.exit_code == 2 and "--pattern is an option of bpe training" in wrong.output


def test_unigram_models(tmp_path):
    spm = pytest.importorskip("sentencepiece")
    prefix = str(tmp_path / "uni")
    spm.SentencePieceTrainer.train(
        input=str(CORPORA / "en.txt"), model_prefix=prefix, vocab_size=800,
        normalization_rule_name="identity", minloglevel=2,
    )
    model = prefix + ".model"
    runner = CliRunner()
    reference = spm.SentencePieceProcessor(model_file=model)
    ids = runner.invoke(main, ["encode", "-t", model, "Hello world"]).output.split()
    assert [int(i) for i in ids] == reference.encode("Hello world")
    assert runner.invoke(main, ["decode", "-t", model, *ids]).output == "Hello world\n"
    best = runner.invoke(main, ["encode", "-t", model, "--nbest", "3", "tokenizers"])
    lines = best.output.splitlines()
    assert best.exit_code == 0 and len(lines) == 3
    assert lines[0].split("\t")[1].split() == [str(i) for i in reference.encode("tokenizers")]
    draw = ["encode", "-t", model, "--sample", "--alpha", "0.1", "--seed", "5", "tokenizers"]
    assert runner.invoke(main, draw).output == runner.invoke(main, draw).output
    info = runner.invoke(main, ["info", model, "--sample", str(CORPORA / "en.txt")])
    assert info.exit_code == 0 and "Unigram" in info.output and "800 pieces" in info.output
    bpe_only = runner.invoke(main, ["encode", "-t", model, "--allow-special", "x"])
    assert bpe_only.exit_code == 2


def test_train_unigram(tmp_path):
    spm = pytest.importorskip("sentencepiece")
    runner = CliRunner()
    out, model = tmp_path / "uni.polytok", tmp_path / "uni.model"
    trained = runner.invoke(main, ["train", "--model", "unigram", "--vocab-size", "6000", "--byte-fallback", str(CORPORA), "-o", str(out)])
    assert trained.exit_code == 0, trained.output
    assert "trained 6000 tokens (unigram, character coverage 0.9995, byte fallback)" in trained.output
    ids = runner.invoke(main, ["encode", "-t", str(out), "Hello, World! ǂ"]).output.split()
    assert runner.invoke(main, ["decode", "-t", str(out), *ids]).output == "Hello, World! ǂ\n"
    info = runner.invoke(main, ["info", str(out)])
    assert info.exit_code == 0 and "6000 pieces" in info.output and "character coverage" in info.output
    # The same model as a SentencePiece file: sentencepiece encodes as polytok.
    assert runner.invoke(main, ["train", "--model", "unigram", "--vocab-size", "6000", "--byte-fallback", "-q", str(CORPORA), "-o", str(model)]).exit_code == 0
    assert spm.SentencePieceProcessor(model_file=str(model)).encode("Hello, World! ǂ") == [int(i) for i in ids]
    # Options of other models, and sizes out of reach, are clear errors.
    wrong = runner.invoke(main, ["train", "--model", "unigram", "--vocab-size", "2000", "--cased", str(CORPORA), "-o", str(out)])
    assert wrong.exit_code == 2 and "--cased is an option of wordpiece training" in wrong.output
    wrong = runner.invoke(main, ["train", "--model", "bpe", "--vocab-size", "6000", "--byte-fallback", str(CORPORA), "-o", str(out)])
    assert wrong.exit_code == 2 and "--byte-fallback is an option of unigram and sentencepiece-bpe training" in wrong.output
    huge = runner.invoke(main, ["train", "--model", "unigram", "--vocab-size", "10000000", "-q", str(CORPORA), "-o", str(out)])
    assert huge.exit_code == 1 and "at most" in huge.output
