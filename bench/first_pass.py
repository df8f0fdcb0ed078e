"""One first pass over text, in a process of its own, for profiling: where a
single-thread first pass of polytok or fastokens spends its time.

    python bench/first_pass.py polytok multi          # the whole mix
    python bench/first_pass.py fastokens ru --cpu 1   # one language
    python bench/first_pass.py polytok en --pair fastokens   # both at once
    python bench/first_pass.py polytok en --quick  # two documents only

A profiling aid rather than a benchmark: it prints its lines as it goes,
with no table; ``encode.py`` gives the figures to quote.

The process pins itself to one CPU (``--cpu``), loads the library with
cl100k (fastokens: its cl100k preset), warms up on the last 100 kB of
``en_100MB.txt`` as ``encode.py`` does, then encodes the input in 1 MB
documents once (the first pass: none of its pieces seen before) and
``--passes - 1`` more times (warm), each document to a Python list of ids.
Input: ``en`` (the first 10 MB of ``en_100MB.txt``), ``multi`` (every
``multi/`` file) or one language of the mix (``ru``, ``zh``...).

For each pass it prints the speed, the system time of the process during
the pass and its page faults (on a virtual machine the first touch of fresh
memory is slow and shows as system time), and for the first pass the
``CLOCK_MONOTONIC`` times it began and ended. ``perf record -k
CLOCK_MONOTONIC`` then ``perf report --time BEGIN,END`` attribute that
pass alone, without the loading (which for polytok includes merging every
token once, ``reach.rs``).

``--new-pieces`` encodes instead the input's distinct pieces (cl100k's
pattern) of up to 16 bytes that are no token, each once, joined by line
breaks, in 256 kB documents, and prints what one new piece costs: the
first pass less the fastest warm one, over the number of pieces (the cost
of merging a piece and keeping it, lookups included).

``--pair LIB`` runs this script twice at once, this library on one CPU and
``LIB`` on the other, ``--rounds`` times, the CPUs swapped every round; the
two start timing together, once both have loaded and warmed up. On
a machine whose speed swings from minute to minute, the ratio of two
processes that run side by side moves less than either speed. It prints
each round and the geometric mean of the per-round ratios of first-pass
speeds. ``--pythonpath`` gives this library's process another ``PYTHONPATH``
(another build of polytok, to compare two builds with ``--pair polytok``).
"""

from __future__ import annotations

import argparse
import math
import os
import re
import resource
import subprocess
import sys
import time

import _data

LIBS = ("polytok", "fastokens")


def encoder(lib: str):
    """A function from a text to its list of ids."""
    enc, ranks_path = _data.tiktoken_cl100k()
    if lib == "polytok":
        return _data.polytok_cl100k(enc, ranks_path).encode_ids
    tokenizer = _data.fastokens_cl100k(enc, ranks_path)
    return lambda text: tokenizer.encode(text).ids


def documents(which: str) -> list[str]:
    if which == "en":
        return _data.chunks(_data.en_text(10), 1.0)
    texts = _data.multi_texts(None)
    if which == "multi":
        return [doc for text in texts.values() for doc in _data.chunks(text, 1.0)]
    if which not in texts:
        raise SystemExit(f"unknown input {which!r}: en, multi or one of {', '.join(texts)}")
    return _data.chunks(texts[which], 1.0)


def new_pieces(docs: list[str]) -> tuple[list[str], int]:
    """The distinct pieces of `docs` of up to 16 bytes that are no cl100k
    token, each once and in the order first seen, joined by line breaks,
    in 256 kB documents; and their number."""
    import regex

    enc, _ = _data.tiktoken_cl100k()
    pattern = regex.compile(enc._pat_str)
    tokens = enc._mergeable_ranks
    seen: dict[str, None] = {}
    for doc in docs:
        for piece in pattern.findall(doc):
            raw = piece.encode()
            if len(raw) <= 16 and "\n" not in piece and raw not in tokens:
                seen.setdefault(piece)
    return _data.chunks("\n".join(seen), 0.25), len(seen)


def one_process(args) -> None:
    os.sched_setaffinity(0, {args.cpu})
    os.environ["RAYON_NUM_THREADS"] = "1"
    encode = encoder(args.lib)
    docs = documents(args.input)[: 2 if args.quick else None]
    if args.new_pieces:
        docs, n_pieces = new_pieces(docs)
    size = _data.utf8_len(docs)
    for doc in _data.chunks(_data.warm_up_text(), 0.05):
        encode(doc)
    if args.wait:
        # Side by side (`--pair`): both processes start timing together.
        print("ready", flush=True)
        sys.stdin.readline()
    speeds, walls = [], []
    for n in range(args.passes):
        before = resource.getrusage(resource.RUSAGE_SELF)
        begin = time.clock_gettime(time.CLOCK_MONOTONIC)
        wall, _, ids = _data.timed(lambda: [encode(doc) for doc in docs])
        end = time.clock_gettime(time.CLOCK_MONOTONIC)
        after = resource.getrusage(resource.RUSAGE_SELF)
        del ids
        walls.append(wall)
        speeds.append(size / _data.MB / wall)
        print(
            f"{'first' if n == 0 else 'warm'}: {speeds[-1]:.1f} MB/s, "
            f"system {1e3 * (after.ru_stime - before.ru_stime):.0f} ms, "
            f"{after.ru_minflt - before.ru_minflt} page faults"
            + (f", window {begin:.6f},{end:.6f}" if n == 0 else ""),
            flush=True,
        )
    if args.new_pieces and len(walls) > 1:
        cost = (walls[0] - min(walls[1:])) / n_pieces
        print(f"one new piece: {1e9 * cost:.0f} ns ({n_pieces:,} pieces)", flush=True)


def paired(args) -> None:
    """This library and `args.pair` side by side, `args.rounds` times."""
    script = os.path.abspath(__file__)
    ratios = []
    for round_ in range(args.rounds):
        runs = [(args.lib, args.pythonpath), (args.pair, None)]
        procs = []
        for cpu, (lib, pythonpath) in zip((round_ % 2, 1 - round_ % 2), runs):
            env = dict(os.environ)
            if pythonpath:
                env["PYTHONPATH"] = pythonpath
            cmd = [sys.executable, script, lib, args.input, "--cpu", str(cpu), "--passes", str(args.passes)]
            cmd += ["--wait"] + (["--quick"] if args.quick else []) + (["--new-pieces"] if args.new_pieces else [])
            procs.append(subprocess.Popen(cmd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True))
        # Both loaded and warmed up (their loading times differ), then both go.
        if not all(proc.stdout.readline() == "ready\n" for proc in procs):
            raise SystemExit("a child failed before timing")
        for proc in procs:
            proc.stdin.write("go\n")
            proc.stdin.flush()
        outs = [proc.communicate()[0] for proc in procs]
        if any(proc.returncode for proc in procs):
            raise SystemExit("a child failed")
        firsts = [float(re.search(r"first: ([\d.]+) MB/s", out).group(1)) for out in outs]
        ratios.append(firsts[0] / firsts[1])
        for (lib, _), out in zip(runs, outs):
            print(f"round {round_} {lib}: " + " | ".join(out.strip().splitlines()), flush=True)
    mean = math.exp(sum(map(math.log, ratios)) / len(ratios))
    print(f"{args.lib} over {args.pair}, first pass: " + " ".join(f"{r:.2f}" for r in ratios) + f"; geometric mean {mean:.2f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("lib", choices=LIBS)
    ap.add_argument("input", help="en, multi, or a language of the mix")
    ap.add_argument("--cpu", type=int, default=min(os.sched_getaffinity(0)))
    ap.add_argument("--passes", type=int, default=3)
    ap.add_argument("--pair", choices=LIBS, help="run beside this library, CPUs swapped each round")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--pythonpath", help="PYTHONPATH of this library's process (with --pair)")
    ap.add_argument("--quick", action="store_true", help="the first two documents only")
    ap.add_argument("--new-pieces", action="store_true", help="the input's distinct non-token pieces, each once")
    ap.add_argument("--wait", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.pair:
        if len(os.sched_getaffinity(0)) < 2:
            raise SystemExit("--pair needs two CPUs")
        paired(args)
    else:
        one_process(args)


if __name__ == "__main__":
    main()
