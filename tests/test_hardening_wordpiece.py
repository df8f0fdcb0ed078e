"""Loading a WordPiece vocabulary with a very long token takes memory linear
in its length (a flat copy of the matcher's failure pops per trie node took
memory quadratic in it: 441 MB for 10,000 characters), and words that walk
deep into such tokens still encode exactly as Hugging Face tokenizers'
WordPiece.

Each load runs in a child process whose address space is capped, so a
loader that is quadratic again fails this test instead of exhausting the
machine; the child reports its peak RSS and the ids of the test words.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

import polytok

LONG_CHARS = 200_000
#: A generous bound on the memory a character of a long token may take
#: (about 40 bytes are measured), plus slack for the allocator.
BYTES_PER_CHAR = 200
SLACK_MB = 20
#: The child's address-space cap.
CAP_BYTES = 4 << 30
MAX_CHARS = 10**7

CHILD = f"""
import json, resource, sys
resource.setrlimit(resource.RLIMIT_AS, ({CAP_BYTES}, {CAP_BYTES}))
import polytok

def peak_kb():
    # Not ru_maxrss: Linux carries that over from before exec, when this
    # child still counted the memory of the test process that forked it.
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))

path, how = sys.argv[1], sys.argv[2]
words = json.loads(sys.stdin.read())
if how == "vocab":
    tok = polytok.WordPieceTokenizer.from_vocab(path, max_input_chars_per_word={MAX_CHARS})
else:
    tok = polytok.load(path)
print(json.dumps({{"peak_kb": peak_kb(), "ids": [tok.encode_ids(w, add_special_tokens=False) for w in words]}}))
"""

ALPHABET = "abcd"


def vocabulary(with_long: bool) -> list[str]:
    """Special tokens, every letter alone and as a continuation, short
    random pieces over a small alphabet (so failures commit several
    tokens), and, ``with_long``, a word-initial and a continuation token of
    ``LONG_CHARS`` random letters, none of whose long prefixes is a token."""
    rng = random.Random(17)
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    letters = "abcdefghijklmnopqrstuvwxyz"
    tokens += [*letters, *(f"##{c}" for c in letters)]
    pieces = {"".join(rng.choices(ALPHABET, k=rng.randint(2, 5))) for _ in range(150)}
    tokens += sorted(pieces)
    tokens += sorted(f"##{p}" for p in {"".join(rng.choices(ALPHABET, k=rng.randint(2, 5))) for _ in range(150)})
    if with_long:
        tokens += [long_token(1), "##" + long_token(2)]
    return tokens


def long_token(seed: int) -> str:
    return "".join(random.Random(seed).choices(ALPHABET, k=LONG_CHARS))


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[tuple[str, bool], Path]:
    """``(how, with_long)`` -> a vocab.txt or a polytok JSON file."""
    tmp = tmp_path_factory.mktemp("long-tokens")
    out = {}
    saved = tmp / "saved.polytok"
    polytok.WordPieceTokenizer.from_vocab(_write_vocab(tmp / "base.txt", vocabulary(False))).save(saved)
    for with_long in (False, True):
        tokens = vocabulary(with_long)
        out["vocab", with_long] = _write_vocab(tmp / f"vocab-{with_long}.txt", tokens)
        # The JSON file is written directly, not saved from a tokenizer with
        # the long tokens: this process never loads them.
        data = json.loads(saved.read_text(encoding="utf-8"))
        data["tokens"] = tokens
        data["max_input_chars_per_word"] = MAX_CHARS
        out["json", with_long] = tmp / f"tokenizer-{with_long}.polytok"
        out["json", with_long].write_text(json.dumps(data), encoding="utf-8")
    return out


def _write_vocab(path: Path, tokens: list[str]) -> Path:
    path.write_text("\n".join(tokens) + "\n", encoding="utf-8")
    return path


def load_in_child(path: Path, how: str, words: list[str]) -> dict:
    """Load ``path`` in a capped child; its peak RSS in MB after loading,
    and the ids of ``words``."""
    if not Path("/proc/self/status").exists():
        pytest.skip("peak memory is read from /proc/self/status (Linux)")
    result = subprocess.run(
        [sys.executable, "-c", CHILD, str(path), how],
        input=json.dumps(words),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, f"loading {path.name} failed (memory capped at 4 GB):\n{result.stderr[-2000:]}"
    report = json.loads(result.stdout)
    report["peak_mb"] = report["peak_kb"] / 1024
    return report


def words_into_long_tokens() -> list[str]:
    """Words whose matching walks deep into the long tokens, then leaves
    them, so that a failure commits the many tokens read on the way."""
    rng = random.Random(5)
    long, continuation = long_token(1), long_token(2)
    # (Longer words that are not one token and a short rest would take
    # tokenizers minutes: its loop tries every shorter piece, longest first.)
    words = [long, long + "b"]
    for depth in (1, 2, 3, 6, 10, 50, 300, 1000):
        for other in ALPHABET:
            words.append(long[:depth] + other)
            words.append("x" + continuation[:depth] + other + "c")
        start = rng.randrange(LONG_CHARS - depth)
        words.append(long[start : start + depth])
        words.append(long[:depth] + continuation[:depth])
    words += ["".join(rng.choices(ALPHABET, k=rng.randint(1, 40))) for _ in range(200)]
    return words


@pytest.mark.parametrize("how", ["vocab", "json"])
def test_a_long_token_loads_in_linear_memory(files, how):
    base = load_in_child(files[how, False], how, [])
    long = load_in_child(files[how, True], how, [])
    extra_mb = long["peak_mb"] - base["peak_mb"]
    long_chars = 2 * LONG_CHARS
    bound_mb = BYTES_PER_CHAR * long_chars / 2**20 + SLACK_MB
    assert extra_mb <= bound_mb, f"{long_chars:,} characters of long tokens took {extra_mb:.0f} MB (bound {bound_mb:.0f})"


@pytest.mark.parametrize("how", ["vocab", "json"])
def test_words_into_long_tokens_match_tokenizers(files, how):
    tokenizers = pytest.importorskip("tokenizers")
    from tokenizers import normalizers, pre_tokenizers
    from tokenizers.models import WordPiece

    reference = tokenizers.Tokenizer(
        WordPiece.from_file(str(files["vocab", True]), unk_token="[UNK]", max_input_chars_per_word=MAX_CHARS)
    )
    reference.normalizer = normalizers.BertNormalizer(lowercase=True)
    reference.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    words = words_into_long_tokens()
    expected = [e.ids for e in reference.encode_batch(words, add_special_tokens=False)]
    got = load_in_child(files[how, True], how, words)["ids"]
    mismatches = [(len(w), w[:30], a[:10], b[:10]) for w, a, b in zip(words, got, expected) if a != b]
    assert not mismatches, mismatches[:5]
    # The words did walk into the long tokens: the long token itself is one token.
    assert got[0] == [len(vocabulary(True)) - 2]
