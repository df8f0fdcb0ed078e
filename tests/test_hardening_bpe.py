"""BPE on rank files that are not cl100k: exactly tiktoken's ids for every
rank table tiktoken accepts (ranks out of merge order, tokens that merging
cannot make, very long tokens), and no Rust panic on any of them."""

from __future__ import annotations

import base64
import random
from pathlib import Path

import pytest

import polytok

from conftest import CORPORA

tiktoken = pytest.importorskip("tiktoken")

# tiktoken's pattern for "no pre-tokenization": the whole text is one piece.
WHOLE = r"[\s\S]+"


def write_ranks(path: Path, tokens: list[bytes]) -> Path:
    path.write_text("".join(f"{base64.b64encode(t).decode()} {rank}\n" for rank, t in enumerate(tokens)))
    return path


def pair(tmp_path: Path, tokens: list[bytes], pattern: str = "none"):
    """polytok and tiktoken with the same ranks and pattern."""
    ours = polytok.BPETokenizer.from_tiktoken(write_ranks(tmp_path / "v.tiktoken", tokens), pattern=pattern)
    regex = WHOLE if pattern == "none" else polytok.pattern_regex(pattern)
    theirs = tiktoken.Encoding(
        "test", pat_str=regex, mergeable_ranks={t: rank for rank, t in enumerate(tokens)}, special_tokens={}
    )
    return ours, theirs


BYTES = [bytes([b]) for b in range(256)]


def test_ranks_out_of_merge_order_do_not_panic_on_huge_pieces(tmp_path):
    # "aab" is ranked before "aa", which it is made of; pieces of 4 KB and
    # more once made the backtracking encoder panic.
    ours, theirs = pair(tmp_path, BYTES + [b"aab", b"aa", b"bba"], pattern="cl100k")
    for text in ("aba" * 1365, "aba" * 1366, "aba" * 5000 + " bba" * 300):
        assert ours.encode(text) == theirs.encode_ordinary(text)
    assert len(ours.encode("aba" * 1366)) == 1368


def test_tokens_that_merging_cannot_make_come_only_from_whole_pieces(tmp_path):
    ours, theirs = pair(tmp_path, BYTES + [b"bcaac"])
    for text in ("cbbcaaccbacabbbab", "bcaac", "xbcaac", "bcaac" * 1000):
        assert ours.encode(text) == theirs.encode_ordinary(text), text
    assert ours.encode("cbbcaaccbacabbbab") == list(b"cbbcaaccbacabbbab")


@pytest.mark.parametrize("length", [10_000, 200_000])
def test_long_tokens_load_and_encode(tmp_path, length):
    rng = random.Random(length)
    long = bytes(rng.choice(b"abcdefghij") for _ in range(length))
    half = long[: length // 2]
    ours, theirs = pair(tmp_path, BYTES + [half[:2], half, long])
    for text in (long.decode(), long[:-1].decode(), (half + half).decode(), long.decode()[1:]):
        assert ours.encode(text) == theirs.encode_ordinary(text)
    # The same tokens from polytok JSON without merges.
    ours.save(tmp_path / "long.json")
    assert polytok.load(tmp_path / "long.json").encode(long.decode()) == [len(BYTES) + 2]


TEXT_ALPHABET = "ab cé\n"


def random_ranks(rng: random.Random) -> list[bytes]:
    """A rank table tiktoken accepts: the 256 bytes and tokens made by random
    merges over a few bytes of `TEXT_ALPHABET`, every rank then shuffled or
    not, with a few tokens that no merge makes."""
    alphabet = [bytes([c]) for c in rng.sample(TEXT_ALPHABET.encode(), rng.randint(2, 5))]
    learned: list[bytes] = []
    while len(learned) < rng.randint(5, 60):
        parts = alphabet + learned
        token = rng.choice(parts) + rng.choice(parts)
        if len(token) <= 16 and token not in learned:
            learned.append(token)
    for _ in range(rng.randint(0, 3)):
        token = b"".join(rng.choice(alphabet) for _ in range(rng.randint(2, 8)))
        if token not in learned:
            learned.append(token)
    tokens = BYTES + learned
    if rng.random() < 0.7:
        rng.shuffle(tokens)
    return tokens


def test_fuzz_random_rank_tables_against_tiktoken(tmp_path):
    rng = random.Random(2026)
    for table in range(150):
        tokens = random_ranks(rng)
        pattern = rng.choice(["none", "cl100k", "gpt2"])
        ours, theirs = pair(tmp_path, tokens, pattern)
        texts = ["".join(rng.choices(TEXT_ALPHABET, k=rng.choice([1, 2, 5, 20, 200]))) for _ in range(20)]
        texts.append("".join(rng.choices("abé", k=5000)))
        assert ours.encode_batch(texts) == theirs.encode_ordinary_batch(texts), f"table {table}: {tokens[256:]}"
        for text in texts[-3:]:
            assert ours.encode(text) == theirs.encode_ordinary(text), f"table {table}"


@pytest.mark.parametrize("swaps", [200, 20_000])
def test_cl100k_with_ranks_swapped(tmp_path, cl100k_ranks_path, sample_corpus, swaps):
    # cl100k after random rank swaps: merges no longer follow ranks and some
    # tokens become unreachable. Lines, and long pieces without spaces.
    lines = Path(cl100k_ranks_path).read_text().splitlines()
    tokens = [base64.b64decode(line.split()[0]) for line in lines]
    rng = random.Random(swaps)
    for _ in range(swaps):
        i, j = rng.randrange(len(tokens)), rng.randrange(len(tokens))
        tokens[i], tokens[j] = tokens[j], tokens[i]
    ours, theirs = pair(tmp_path, tokens, pattern="cl100k")
    # Huge pieces: the letters of English and Chinese paragraphs, run together.
    english = "".join(c for c in "".join(sample_corpus[:200]) if c.isascii() and c.isalpha())
    chinese = (CORPORA / "zh.txt").read_text("utf-8").replace("\n", "")
    texts = sample_corpus + [english[:20_000], chinese[:8000], "ab" * 5000, "x" * 9000]
    assert ours.encode_batch(texts) == theirs.encode_ordinary_batch(texts)

