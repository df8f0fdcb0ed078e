"""Training stays linear in the input however the text is cut: one line of
megabytes with pattern "none" (once quadratic: 2 MB took 45 s), with the
same merges as the definition."""

from __future__ import annotations

import random

import polytok
from conftest import CORPORA


def reference_bpe(text: str, merges: int) -> list[bytes]:
    """The definition, on one word: merge the most frequent adjacent pair
    (overlapping occurrences counted), ties to the smaller left id, then the
    smaller right id; occurrences replaced left to right."""
    tokens = [bytes([b]) for b in range(256)]
    word = list(text.encode())
    for _ in range(merges):
        counts: dict[tuple[int, int], int] = {}
        for pair in zip(word, word[1:]):
            counts[pair] = counts.get(pair, 0) + 1
        if not counts:
            break
        (left, right), _ = min(counts.items(), key=lambda kv: (-kv[1], kv[0]))
        new_id = len(tokens)
        tokens.append(tokens[left] + tokens[right])
        merged, i = [], 0
        while i < len(word):
            if i + 1 < len(word) and word[i] == left and word[i + 1] == right:
                merged.append(new_id)
                i += 2
            else:
                merged.append(word[i])
                i += 1
        word = merged
    return tokens


def one_line(n_chars: int) -> str:
    """The shipped corpus run together on one line, repeated to size."""
    text = " ".join(path.read_text("utf-8").replace("\n", " ") for path in sorted(CORPORA.glob("*.txt")))
    return (text * (n_chars // len(text) + 1))[:n_chars]


def test_one_long_line_merges_as_the_definition():
    rng = random.Random(5)
    for text in (one_line(3000), "".join(rng.choice("ab ") for _ in range(4000)), "a" * 500 + "ab" * 300):
        tok = polytok.BPETokenizer.train_from_iterator([text], vocab_size=256 + 60, pattern="none", progress=False)
        learned = [tok.token_bytes(i) for i in range(256, tok.n_ordinary)]
        assert learned == reference_bpe(text, len(learned))[256:]
        assert tok.decode(tok.encode(text)) == text


def test_megabytes_on_one_line_train():
    # Seconds now (time is measured in bench/train_long.py, not here).
    text = one_line(2_000_000)
    tok = polytok.BPETokenizer.train_from_iterator([text], vocab_size=2000, pattern="none", progress=False)
    assert tok.n_ordinary == 2000
    again = polytok.BPETokenizer.train_from_iterator([text], vocab_size=2000, pattern="none", progress=False)
    assert [tok.token_bytes(i) for i in range(2000)] == [again.token_bytes(i) for i in range(2000)]
    # One long word for WordPiece too.
    letters = "".join(c for c in text[:300_000] if c.isalpha())
    wordpiece = polytok.WordPieceTokenizer.train_from_iterator(
        [letters], vocab_size=1500, max_input_chars_per_word=len(letters) + 1, progress=False
    )
    assert wordpiece.vocab_size == 1500


def test_unigram_vocabulary_near_its_floor_finishes():
    """A Unigram vocabulary barely above what its characters need: pruning
    reaches pieces that have no other segmentation and can go no further
    (it once looped for ever there). Training ends with the size asked."""
    lines = [line for path in sorted(CORPORA.glob("*.txt")) for line in path.read_text("utf-8").splitlines()][:500]
    for vocab_size in (360, 400, 450):
        tok = polytok.UnigramTokenizer.train_from_iterator(lines, vocab_size=vocab_size, progress=False)
        assert tok.vocab_size == vocab_size
        ids = tok.encode_ids(lines[0])
        assert ids and max(ids) < vocab_size
