"""Training: the learned merges equal those of a plain reference trainer."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import polytok
from conftest import CORPORA


def reference_merges(texts: list[str], pattern: str, n_merges: int, min_frequency: int = 2) -> list[tuple[int, int]]:
    """The textbook algorithm, recounting every pair at every step.

    Ties between equally frequent pairs go to the smaller (left id, right id),
    polytok's documented rule."""
    pieces = Counter(piece.encode("utf-8") for text in texts for piece in polytok.pretokenize(text, pattern))
    words = [(list(piece), count) for piece, count in pieces.items()]
    merges = []
    next_id = 256
    for _ in range(n_merges):
        pairs = Counter()
        for word, count in words:
            for pair in zip(word, word[1:]):
                pairs[pair] += count
        if not pairs:
            break
        best = min(pairs, key=lambda pair: (-pairs[pair], pair))
        if pairs[best] < min_frequency:
            break
        merges.append(best)
        for word, _ in words:
            i = 0
            while i < len(word) - 1:
                if (word[i], word[i + 1]) == best:
                    word[i : i + 2] = [next_id]
                i += 1
        next_id += 1
    return merges


def test_low_lower_lowest():
    corpus = ["low"] * 5 + ["lower"] * 2 + ["newest"] * 6 + ["widest"] * 3
    tok = polytok.BPETokenizer.train_from_iterator(corpus, vocab_size=256 + 10, pattern="none", min_frequency=1)
    learned = [tok.token_bytes(i).decode() for i in range(256, tok.n_ordinary)]
    # "es" and "est" (9 each) first, then "lo"/"low" (7): the classic result.
    assert learned[:4] == ["es", "est", "lo", "low"]
    # "ne" and "ew" tie at 6: (e, w) has the smaller left id.
    assert learned[4:6] == ["ew", "new"]
    assert tok.tokens("lowest") == ["low", "est"]
    assert tok.tokens("newer") == ["new", "e", "r"]


@pytest.mark.parametrize("language", ["en", "de", "zh", "hi"])
@pytest.mark.parametrize("pattern", ["gpt2", "cl100k"])
def test_merges_equal_the_reference_trainer(language, pattern):
    lines = (CORPORA / f"{language}.txt").read_text("utf-8").splitlines()[:40]
    tok = polytok.BPETokenizer.train_from_iterator(lines, vocab_size=256 + 150, pattern=pattern)
    assert tok.merges == reference_merges(lines, pattern, 150)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(alphabet="abcab ,.\n'é語", min_size=1, max_size=30), min_size=1, max_size=15))
def test_merges_equal_the_reference_on_random_corpora(texts):
    tok = polytok.BPETokenizer.train_from_iterator(texts, vocab_size=256 + 40, pattern="cl100k", min_frequency=1)
    assert tok.merges == reference_merges(texts, "cl100k", 40, min_frequency=1)


def test_same_corpus_same_file_bytes(tmp_path):
    paths = []
    for run in range(2):
        tok = polytok.BPETokenizer.train(CORPORA, vocab_size=1500, progress=False)
        paths.append(tmp_path / f"run{run}.polytok")
        tok.save(paths[-1])
    assert paths[0].read_bytes() == paths[1].read_bytes()


def test_files_and_iterator_agree(tmp_path):
    texts = [(CORPORA / f"{lang}.txt").read_text("utf-8") for lang in ("en", "ru", "ja")]
    from_iterator = polytok.BPETokenizer.train_from_iterator(texts, vocab_size=1000)
    for i, text in enumerate(texts):
        (tmp_path / f"{i}.txt").write_text(text, encoding="utf-8")
    from_files = polytok.BPETokenizer.train(tmp_path, vocab_size=1000, progress=False)
    assert from_files.merges == from_iterator.merges


def test_special_tokens_are_reserved_and_never_merged():
    texts = ["<|end|>hello world<|end|>hello"] * 50
    tok = polytok.BPETokenizer.train_from_iterator(texts, vocab_size=300, special_tokens=["<|end|>", "<pad>"])
    assert tok.special_tokens == {"<|end|>": tok.n_ordinary, "<pad>": tok.n_ordinary + 1}
    assert all(b"<|" not in tok.token_bytes(i) and b"|>" not in tok.token_bytes(i) for i in range(tok.n_ordinary))
    ids = tok.encode("hello<|end|>", allowed_special="all")
    assert ids[-1] == tok.special_tokens["<|end|>"]
    assert tok.decode(ids) == "hello<|end|>"
    assert tok.encode("<|end|>") != [tok.special_tokens["<|end|>"]]


def test_limits():
    texts = ["aaaaaaaaaaaaaaaa bbbbbbbbbbbbbbbbbbbb"] * 20
    tok = polytok.BPETokenizer.train_from_iterator(texts, vocab_size=400, max_token_bytes=4)
    assert max(len(tok.token_bytes(i)) for i in range(tok.n_ordinary)) == 4
    rare = polytok.BPETokenizer.train_from_iterator(["xy"] + ["ab"] * 3, vocab_size=400, min_frequency=3)
    assert [tok for tok in map(rare.token_bytes, range(256, rare.n_ordinary))] == [b"ab"]


def test_no_pretokenization_trains_on_lines(tmp_path):
    (tmp_path / "c.txt").write_text("low lower\nlowest low\n" * 20)
    tok = polytok.BPETokenizer.train(tmp_path, vocab_size=300, pattern="none", progress=False)
    assert tok.training["corpus"]["distinct_pieces"] == 2
    text = "low lower\nlowest low\n"
    assert tok.decode(tok.encode(text)) == text
