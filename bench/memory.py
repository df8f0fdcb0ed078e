"""Memory on distinct text: the peak RSS of a process that encodes ``--gb``
GB (default 1) of text it never repeats, with cl100k.

    python bench/memory.py            # 1 GB: batches of lines and 1 MB documents
    python bench/memory.py --gb 0.1

The text is made 8 MB at a time from a seeded generator: words of random
letters from several scripts (Latin, Cyrillic, Greek, Han, Devanagari),
digits and punctuation, so that almost every piece is new and the per-thread
piece caches keep filling. Half of the text goes through
``encode_batch_flat`` as lines, half through ``encode_ids`` as 1 MB
documents (cut among the threads); nothing is kept. The peak RSS
(``ru_maxrss``) is printed after every 10% and at the end, beside the RSS
after loading the tokenizer: what encoding adds must stay flat however much
text goes through.
"""

from __future__ import annotations

import argparse
import resource
import time

import numpy as np

import _data

ALPHABETS = [
    "abcdefghijklmnopqrstuvwxyz",
    "абвгдежзийклмнопрстуфхцчшщэюя",
    "αβγδεζηθικλμνξοπρστυφχψω",
    "的一是不了人我在有他这中大来上国个到说们为子和你地出道也时年",
    "कखगघचछजझटठडढणतथदधनपफबभमयरलवशसह",
    "0123456789",
]
# Mostly spaces, then punctuation and line breaks.
SEPARATORS = " " * 20 + ".,;:!?\"'()-" + "\n" * 2


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / _data.MB


def distinct_text(rng: np.random.Generator, size: int) -> str:
    """About ``size`` bytes of words that repeat rarely (made with NumPy:
    one code point array, decoded once)."""
    n = size // 2  # about 2 bytes a character
    separator = rng.random(n) < 0.15
    word = np.cumsum(separator)
    script = rng.integers(len(ALPHABETS), size=int(word[-1]) + 1)[word]
    points = np.empty(n, dtype="<u4")
    for i, alphabet in enumerate(ALPHABETS):
        table = np.array([ord(c) for c in alphabet], dtype="<u4")
        mask = (script == i) & ~separator
        points[mask] = table[rng.integers(len(table), size=int(mask.sum()))]
    table = np.array([ord(c) for c in SEPARATORS], dtype="<u4")
    points[separator] = table[rng.integers(len(table), size=int(separator.sum()))]
    return points.tobytes().decode("utf-32-le")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gb", type=float, default=1.0)
    args = ap.parse_args()
    enc, ranks = _data.tiktoken_cl100k()
    tok = _data.polytok_cl100k(enc, ranks)
    tok.encode_ids("warm up")
    loaded = peak_mb()
    print(f"{_data.machine_note()}; {_data.polytok_note()}; {_data.load_note()}")
    print(f"after loading cl100k: peak RSS {loaded:,.0f} MB", flush=True)
    rng = np.random.default_rng(7)
    target = int(args.gb * 1e9)
    done = tokens = 0
    next_report = target / 10
    start = time.perf_counter()
    lines_turn = True
    while done < target:
        text = distinct_text(rng, 8 << 20)
        if lines_turn:
            ids, _ = tok.encode_batch_flat(text.splitlines(keepends=True))
            tokens += len(ids)
        else:
            for document in _data.chunks(text, 1.0):
                tokens += len(tok.encode_ids(document))
        lines_turn = not lines_turn
        done += len(text.encode("utf-8"))
        if done >= next_report:
            print(f"{done / 1e9:.2f} GB, {tokens:,} tokens: peak RSS {peak_mb():,.0f} MB", flush=True)
            next_report += target / 10
    seconds = time.perf_counter() - start
    print(
        f"encoded {done / 1e9:.2f} GB of distinct text ({tokens:,} tokens) in {seconds:.0f} s "
        f"(text generation included); peak RSS {peak_mb():,.0f} MB, {peak_mb() - loaded:,.0f} MB over the loaded tokenizer"
    )


if __name__ == "__main__":
    main()
