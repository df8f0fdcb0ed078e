"""Encoding, decoding, files and errors of BPETokenizer."""

from __future__ import annotations

import json
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import polytok
from conftest import CORPORA


@pytest.fixture(scope="module")
def small() -> polytok.BPETokenizer:
    return polytok.BPETokenizer.train(CORPORA, vocab_size=2000, special_tokens=["<|endoftext|>"], progress=False)


@settings(max_examples=500, deadline=None)
@given(st.text())
def test_decode_inverts_encode(small, text):
    assert small.decode(small.encode(text)) == text
    assert small.decode_bytes(small.encode(text)) == text.encode("utf-8")


@settings(max_examples=100, deadline=None)
@given(st.text(), st.sampled_from(["gpt2", "o200k", "none", r"\p{L}+"]))
def test_decode_inverts_encode_for_every_pattern(text, pattern):
    tok = polytok.BPETokenizer.train_from_iterator(["some text to learn from, 123"], vocab_size=270, pattern=pattern)
    assert tok.decode(tok.encode(text)) == text


def test_batch_equals_single(small, sample_corpus):
    assert small.encode_batch(sample_corpus) == [small.encode(line) for line in sample_corpus]
    assert small.encode_batch([]) == []
    # Any iterable of texts; a text that is not a string is named.
    assert small.encode_batch(iter(sample_corpus[:3])) == small.encode_batch(sample_corpus[:3])
    with pytest.raises(TypeError, match=r"texts\[1\] is bytes, not str"):
        small.encode_batch(["a", b"b"])


def test_cache_never_changes_results(small, sample_corpus):
    # Two models on the same threads must not see each other's cached pieces.
    other = polytok.BPETokenizer.train_from_iterator(sample_corpus[::3], vocab_size=700)
    for _ in range(2):
        expected_small = small.encode_batch(sample_corpus)
        expected_other = other.encode_batch(sample_corpus)
        small.clear_cache()
        assert [small.encode(line) for line in sample_corpus] == expected_small
        assert other.encode_batch(sample_corpus) == expected_other


def test_token_strings(small):
    ids = small.encode("Hello 日本")
    assert "".join(small.tokens("Hello 日本")).replace("<0x", "").startswith("Hello")
    for i in ids:
        assert small.token_to_id(small.token_bytes(i)) == i
    assert small.token_to_id("<|endoftext|>") == small.special_tokens["<|endoftext|>"]
    assert small.token_to_id("no such token at all") is None
    assert polytok.bpe.readable(b"\xe6\x97") == "<0xE6><0x97>"
    assert polytok.bpe.readable(b"a\xe6b") == "a<0xE6>b"


def test_save_and_load(small, tmp_path):
    path = tmp_path / "tok.polytok"
    small.save(path)
    loaded = polytok.load(path)
    text = (CORPORA / "fr.txt").read_text("utf-8")
    assert loaded.encode(text) == small.encode(text)
    assert loaded.special_tokens == small.special_tokens
    assert loaded.merges == small.merges
    assert loaded.training == small.training
    saved = json.loads(path.read_text("utf-8"))
    assert saved["format"] == "polytok" and saved["version"] == 1 and saved["model"] == "bpe"
    assert saved["pattern"]["preset"] == "cl100k"


def test_tiktoken_files_round_trip(small, tmp_path):
    path = tmp_path / "tok.tiktoken"
    small.save_tiktoken(path)
    loaded = polytok.BPETokenizer.from_tiktoken(path, pattern="cl100k", special_tokens=small.special_tokens)
    text = (CORPORA / "ko.txt").read_text("utf-8")
    assert loaded.encode(text) == small.encode(text)


def test_tiktoken_reads_our_rank_files(small, tmp_path):
    tiktoken = pytest.importorskip("tiktoken")
    from tiktoken.load import load_tiktoken_bpe

    path = tmp_path / "tok.tiktoken"
    small.save_tiktoken(path)
    encoding = tiktoken.Encoding(
        name="polytok-test",
        pat_str=polytok.pattern_regex("cl100k"),
        mergeable_ranks=load_tiktoken_bpe(str(path)),
        special_tokens={},
    )
    text = (CORPORA / "de.txt").read_text("utf-8")
    assert encoding.encode_ordinary(text) == small.encode(text)


def test_save_is_atomic(small, tmp_path, monkeypatch):
    path = tmp_path / "tok.polytok"
    path.write_text("previous contents")

    def interrupted(src, dst):
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        small.save(path)
    assert path.read_text() == "previous contents"
    assert [p.name for p in tmp_path.iterdir()] == ["tok.polytok"]


def test_cl100k_specials_and_unknown_ids(cl100k):
    assert cl100k.vocab_size == 100277
    assert cl100k.decode([100257]) == "<|endoftext|>"
    with pytest.raises(ValueError, match="unknown token id 100261"):
        cl100k.decode([100261])
    with pytest.raises(ValueError, match="unknown token id 4294967295"):
        cl100k.decode([2**32 - 1])
    with pytest.raises(ValueError, match="unknown token id -1"):
        cl100k.decode([-1])
    with pytest.raises(ValueError, match="not a special token"):
        cl100k.encode("x", allowed_special={"<|nope|>"})
    with pytest.raises(ValueError, match='"all"'):
        cl100k.encode("x", allowed_special="everything")


# ------------------------------------------------------------------ bad input


def test_long_id_lists_with_ids_past_the_vocabulary(cl100k, tiktoken_cl100k, sample_corpus):
    # Lists are built with the ints of ids further on fetched ahead (up to
    # 128 ids, across the texts of a batch): special ids, which have no
    # int made in advance, at the start, the middle and the end of long
    # texts and of short ones.
    special = "<|endoftext|>"
    body = " ".join(sample_corpus[:40])
    texts = [special + body + special + body + special, special, "a" + special, body[:300] + special]
    for text in texts:
        expected = tiktoken_cl100k.encode(text, allowed_special="all")
        assert cl100k.encode_ids(text, allowed_special="all") == expected
        assert cl100k.encode(text, allowed_special="all").ids == expected
    expected = [tiktoken_cl100k.encode(text, allowed_special="all") for text in texts]
    assert cl100k.encode_batch_ids(texts, allowed_special="all") == expected
    assert cl100k.encode_batch_ids(texts * 500, allowed_special="all") == expected * 500


def test_texts_of_every_width_before_and_after_python_has_their_utf8(cl100k, tiktoken_cl100k, sample_corpus):
    # ``encode_ids`` reads a string's characters where CPython keeps them
    # (Latin-1, UCS-2 or UCS-4) and makes their UTF-8 itself, unless the
    # string already has it (ASCII, or asked for before: tiktoken's call
    # asks). Short texts, and long ones that are cut across the pool; lone
    # surrogates become U+FFFD, a pair its character.
    body = " ".join(sample_corpus[:200])
    ascii_part = "".join(c for c in body if c < "\x80")
    widths = {
        "latin-1": ascii_part + " caf\xe9 na\xefve",
        "ucs-2": ascii_part + " \u4e2d\u6587 \u0440\u0443\u0441",
        "ucs-4": ascii_part + " \U0001f600 \u4e2d",
        "surrogates": ascii_part + " \U0001f600 x\udfffy \ud83d\ude00 \ud800",
    }
    for name, part in widths.items():
        for text in (part[-300:], part * (300_000 // len(part) + 1)):
            # A copy made here: a string no one has asked for UTF-8 yet.
            text = "".join(list(text))
            fresh = cl100k.encode_ids(text)
            cleaned = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
            expected = tiktoken_cl100k.encode_ordinary(cleaned if name == "surrogates" else text)
            assert fresh == expected, (name, len(text))
            assert cl100k.encode(text).ids == expected, (name, len(text))
            assert cl100k.encode_ids(text) == expected, (name, len(text))
    # An encoding made without offsets keeps the text as given; its offsets,
    # made when first read, are those of the text with U+FFFD in place.
    text = "x\udfffy \ud83d\ude00 z\ud800"
    cleaned = "x\ufffdy \U0001f600 z\ufffd"
    encoding = cl100k.encode(text)
    assert encoding.ids == cl100k.encode_ids(cleaned)
    assert encoding.offsets == cl100k.encode(cleaned).offsets
    assert encoding.tokens == cl100k.encode(cleaned).tokens


def test_non_utf8_corpus_names_file_and_offset(tmp_path):
    path = tmp_path / "latin1.txt"
    path.write_bytes("first line\nsecond line caf\xe9\n".encode("latin-1"))
    with pytest.raises(polytok.CorpusError, match=r"latin1\.txt: invalid UTF-8 at byte offset 26 \(line 2\)"):
        polytok.BPETokenizer.train(path, vocab_size=300, progress=False)
    tok = polytok.BPETokenizer.train(path, vocab_size=300, errors="replace", progress=False)
    assert tok.training["corpus"]["bytes"] > 0


def test_empty_corpus(tmp_path):
    (tmp_path / "empty.txt").write_text("")
    with pytest.raises(polytok.CorpusError, match="empty"):
        polytok.BPETokenizer.train(tmp_path, vocab_size=300, progress=False)
    with pytest.raises(polytok.CorpusError, match="empty"):
        polytok.BPETokenizer.train_from_iterator([], vocab_size=300)


def test_bad_settings(tmp_path):
    with pytest.raises(ValueError, match=r"at least 256 .* plus 2 special token\(s\) = 258"):
        polytok.BPETokenizer.train_from_iterator(["abc"], vocab_size=257, special_tokens=["<a>", "<b>"])
    with pytest.raises(ValueError, match="max_token_bytes"):
        polytok.BPETokenizer.train_from_iterator(["abc"], vocab_size=300, max_token_bytes=1)
    with pytest.raises(FileNotFoundError, match="no such file"):
        polytok.BPETokenizer.train(tmp_path / "missing.txt", vocab_size=300)
    with pytest.raises(FileNotFoundError, match="matches no files"):
        polytok.BPETokenizer.train(str(tmp_path / "*.nothing"), vocab_size=300)
    with pytest.raises(TypeError, match="strings"):
        polytok.BPETokenizer.train_from_iterator([b"bytes"], vocab_size=300)
    with pytest.raises(ValueError, match="errors must be"):
        polytok.BPETokenizer.train(CORPORA, vocab_size=300, errors="ignore", progress=False)


def test_damaged_tokenizer_files(small, tmp_path):
    good = tmp_path / "good.polytok"
    small.save(good)
    text = good.read_text("utf-8")
    cases = {
        "truncated.polytok": (text[: len(text) // 2], "truncated"),
        "garbage.polytok": ("not json at all", "not a valid polytok tokenizer file"),
        "other.polytok": (json.dumps({"hello": 1}), "not a valid polytok tokenizer file"),
        "version.polytok": (text.replace('"version":1', '"version":99'), "version 99 is not supported"),
        "token.polytok": (text.replace('"tokens":["', '"tokens":["☃'), "not in the byte-level alphabet"),
    }
    for name, (contents, message) in cases.items():
        path = tmp_path / name
        path.write_text(contents, encoding="utf-8")
        with pytest.raises(polytok.TokenizerFileError, match=message) as info:
            polytok.load(path)
        assert name in str(info.value)
    binary = tmp_path / "binary.polytok"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(polytok.TokenizerFileError, match="binary.polytok"):
        polytok.load(binary)


def test_damaged_rank_files(tmp_path):
    cases = {
        "no-rank.tiktoken": ("YQ==\n", "line 1"),
        "bad-base64.tiktoken": ("@@@ 0\n", "not valid base64"),
        "gap.tiktoken": ("".join(f"{__import__('base64').b64encode(bytes([b])).decode()} {b}\n" for b in range(256) if b != 7), "rank 7 is missing"),
        "empty.tiktoken": ("", "holds no tokens"),
    }
    for name, (contents, message) in cases.items():
        path = tmp_path / name
        path.write_text(contents)
        with pytest.raises(polytok.TokenizerFileError, match=message):
            polytok.BPETokenizer.from_tiktoken(path, pattern="cl100k")


def test_linear_time_inputs_round_trip(cl100k):
    # Megabyte pieces with no whitespace go through the heap-based merge.
    for text in ("a" * 1_000_000, "語" * 300_000, "\u0301" * 200_000):
        ids = cl100k.encode(text)
        assert cl100k.decode(ids) == text


def test_special_ids_far_beyond_the_vocabulary(cl100k_ranks_path):
    far = polytok.BPETokenizer.from_tiktoken(cl100k_ranks_path, pattern="cl100k", special_tokens={"<|x|>": 2_000_000_000})
    assert far.encode("a<|x|>", allowed_special="all") == [64, 2_000_000_000]
    assert far.vocab_size == 2_000_000_001
    with pytest.raises(ValueError, match="below 2"):
        polytok.BPETokenizer.from_tiktoken(cl100k_ranks_path, pattern="cl100k", special_tokens={"<|x|>": 2**32 - 1})
