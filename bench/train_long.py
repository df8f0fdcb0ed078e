"""BPE training on one line of megabytes (pattern "none", 2,000 tokens):
time against size, to show it grows linearly. The line is the start of the
benchmark corpus (``../shared/corpora/bench.tar.xz``) with its newlines
turned into spaces. Each size is trained ``--runs`` times in this process;
the figure is the median, and the ratio column compares each size with the
one before (2.0 per doubling is linear).

Before the fix (pair lists per word, each merge rescanning the whole line):
0.25 MB 2.1 s, 0.5 MB 6.2 s; the issue measured 1 MB 12.4 s, 2 MB 45 s and
20 MB unfinished after 400 s.

Usage: python bench/train_long.py [--sizes 0.25 0.5 1 2 4 20] [--runs 3]
"""

from __future__ import annotations

import argparse
import statistics
import time

import _data

import polytok


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=float, nargs="+", default=[0.25, 0.5, 1, 2, 4, 20], help="MB of text")
    parser.add_argument("--runs", type=int, default=3, help="runs per size (default 3)")
    args = parser.parse_args()
    text = _data.read_prefix(_data.data_dir() / "en_100MB.txt", max(args.sizes) * 1.01).replace("\n", " ")
    print(f"{'MB':>6} {'seconds':>9} {'vs previous':>12}")
    previous = None
    for mb in args.sizes:
        line = text[: int(mb * _data.MB)]
        times = []
        for _ in range(args.runs):
            start = time.perf_counter()
            polytok.BPETokenizer.train_from_iterator([line], vocab_size=2000, pattern="none", progress=False)
            times.append(time.perf_counter() - start)
        median = statistics.median(times)
        ratio = f"{median / previous[1]:.2f} ({mb / previous[0]:g}x size)" if previous else ""
        print(f"{mb:>6g} {median:>9.2f} {ratio:>12}", flush=True)
        previous = (mb, median)


if __name__ == "__main__":
    main()
