"""Scaling with threads: batches, long documents and training, polytok and
the references side by side in the same run.

    python bench/scaling.py                          # 1, 2, 4, 8, 16 threads (as many as the machine has)
    python bench/scaling.py --threads 1,2 --quick
    python bench/scaling.py --only batch,document --runs 5

Every (workload, library, thread count) runs in a fresh child process with
``RAYON_NUM_THREADS=n`` (polytok, tokenizers) and ``num_threads=n`` where a
library takes it (tiktoken's batch, sentencepiece's trainer); each child
times ``--runs`` calls after one warm-up call (training: no warm-up) and
reports the median. Workloads:

* ``batch``: the lines of the first ``--batch-mb`` MB of ``en_100MB.txt``
  (default 30), cl100k, in one call: polytok ``encode_batch_ids`` (Python
  lists) and ``encode_batch_flat`` (two NumPy arrays, built without the
  GIL), tiktoken ``encode_ordinary_batch(num_threads=n)`` (lists), and
  tokenizers ``encode_batch_fast`` on polytok's cl100k ``tokenizer.json``
  (``Encoding`` objects). Ids are checked against tiktoken's once.
* ``document``: the first ``--doc-mb`` MB (default 8) cut into 1 MB
  documents, each encoded alone: polytok ``encode_ids`` (which cuts a long
  document where the pattern's pieces are sure to end and shares it among
  the threads) and tiktoken ``encode_ordinary`` (one thread whatever n).
* ``train-bpe``: 32,000 tokens on the first ``--bpe-mb`` MB (default 100),
  gpt2 pattern, ``min_frequency=2``: polytok ``BPETokenizer.train`` and
  tokenizers' ``BpeTrainer`` (as ``bench/train.py``).
* ``train-unigram``: 32,000 pieces on the first ``--unigram-mb`` MB (default
  20): polytok ``UnigramTokenizer.train`` and sentencepiece (as
  ``bench/train.py --model unigram``).

The references' training is slow on one thread (tokenizers about 50 s at
100 MB, sentencepiece about 80 s at 20 MB): ``--ref-threads`` (default: the
fewest and the most threads) says at which thread counts they train, once
each (no median), and tiktoken's documents, which use one thread whatever
n, run there too; given, it applies to every reference (tiktoken's batch
runs at about 1 MB/s on one thread), with ``--ref-runs`` timed calls. ``--libs`` keeps some libraries only.
Throughput is MB/s of UTF-8 input (10^6 bytes); training is seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

import _data
import train

WORKLOADS = ("batch", "document", "train-bpe", "train-unigram")
LIBS = {
    "batch": ("polytok lists", "polytok numpy", "tiktoken", "tokenizers"),
    "document": ("polytok", "tiktoken"),
    "train-bpe": ("polytok", "tokenizers"),
    "train-unigram": ("polytok", "sentencepiece"),
}
REFERENCES = {"tiktoken", "tokenizers", "sentencepiece"}


# ------------------------------------------------------------------ children


def batch_call(lib: str, threads: int, lines: list[str]):
    enc, ranks = _data.tiktoken_cl100k()
    if lib == "tiktoken":
        return lambda: enc.encode_ordinary_batch(lines, num_threads=threads)
    polytok_tok = _data.polytok_cl100k(enc, ranks)
    if lib == "polytok lists":
        return lambda: polytok_tok.encode_batch_ids(lines)
    if lib == "polytok numpy":
        return lambda: polytok_tok.encode_batch_flat(lines)
    from tokenizers import Tokenizer

    hf = Tokenizer.from_str(polytok_tok.to_tokenizer_json())
    return lambda: hf.encode_batch_fast(lines, add_special_tokens=False)


def as_lists(lib: str, result) -> list[list[int]]:
    if lib == "polytok numpy":
        ids, offsets = result
        return [ids[offsets[i] : offsets[i + 1]].tolist() for i in range(len(offsets) - 1)]
    if lib == "tokenizers":
        return [e.ids for e in result]
    return result


def run_child_mode(args) -> None:
    scratch = Path(args.scratch)
    threads = args.threads_child
    if args.workload in ("batch", "document"):
        text = _data.en_text(args.batch_mb if args.workload == "batch" else args.doc_mb)
        if args.workload == "batch":
            inputs = text.splitlines(keepends=True)
            call = batch_call(args.lib, threads, inputs)
        else:
            inputs = _data.chunks(text, 1.0)
            enc, ranks = _data.tiktoken_cl100k()
            one = enc.encode_ordinary if args.lib == "tiktoken" else _data.polytok_cl100k(enc, ranks).encode_ids
            call = lambda: [one(d) for d in inputs]  # noqa: E731
        result = call()  # warm-up
        exact = None
        if args.check:
            enc, _ = _data.tiktoken_cl100k()
            theirs = [enc.encode_ordinary(text) for text in inputs]
            exact = as_lists(args.lib, result) == theirs
        times = [_data.timed(call)[0] for _ in range(args.runs)]
        _data.emit({"seconds": _data.median(times), "mb": _data.utf8_len(inputs) / _data.MB, "exact": exact})
        return
    model = "bpe" if args.workload == "train-bpe" else "unigram"
    path = _data.en_prefix_file(args.bpe_mb if model == "bpe" else args.unigram_mb)
    train.THREADS = threads  # sentencepiece's num_threads
    trainer = train.TRAINERS[model][args.lib]
    times = []
    for run in range(args.runs):
        out = scratch / f"run{run}"
        out.mkdir(exist_ok=True)
        times.append(_data.timed(lambda: trainer(path, 32000, out))[0])
    _data.emit({"seconds": _data.median(times)})


# -------------------------------------------------------------------- parent


def measure(args, workload: str, lib: str, threads: int, check: bool, runs: int) -> dict | None:
    with tempfile.TemporaryDirectory(prefix="polytok-scaling-") as scratch:
        cmd = [
            sys.executable, __file__, "--child", "--workload", workload, "--lib", lib,
            "--threads-child", str(threads), "--runs", str(runs), "--scratch", scratch,
            "--batch-mb", str(args.batch_mb), "--doc-mb", str(args.doc_mb),
            "--bpe-mb", str(args.bpe_mb), "--unigram-mb", str(args.unigram_mb),
        ] + (["--check"] if check else [])
        env = {"RAYON_NUM_THREADS": str(threads), "TOKENIZERS_PARALLELISM": "true" if threads > 1 else "false"}
        child = _data.run_child(cmd, timeout=args.timeout, env=env)
    if child.returncode != 0:
        print(f"[{workload} {lib} {threads}] failed: {child.stderr[-1500:]}", file=sys.stderr, flush=True)
        return None
    result = child.json()
    result["rss_mb"] = child.max_rss_mb
    print(f"[{workload} {lib} {threads} threads] {json.dumps(result)}", file=sys.stderr, flush=True)
    return result


def report(args, workload: str, results: dict) -> None:
    training = workload.startswith("train")
    unit = "s" if training else "MB/s"
    headers = ["library"] + [f"{n} thr" for n in args.threads] + [f"{args.threads[-1]} vs 1"]
    rows = []
    ran = [lib for lib in LIBS[workload] if any((lib, n) in results for n in args.threads)]
    for lib in ran:
        cells = []
        for n in args.threads:
            r = results.get((lib, n))
            cells.append(None if r is None else (r["seconds"] if training else r["mb"] / r["seconds"]))
        first, last = cells[0], cells[-1]
        gain = None if first is None or last is None else (first / last if training else last / first)
        rows.append([lib] + cells + [None if gain is None else f"{gain:.2f}x"])
    # polytok against each reference, thread count by thread count.
    mine = [lib for lib in ran if lib.startswith("polytok")]
    for ref in (lib for lib in ran if lib in REFERENCES):
        for lib in mine:
            ratio = []
            for n in args.threads:
                a, b = results.get((lib, n)), results.get((ref, n))
                ratio.append(None if a is None or b is None else f"{b['seconds'] / a['seconds']:.2f}x")
            rows.append([f"{lib} / {ref}"] + ratio + [None])
    _data.print_table(f"{workload} ({unit}; ratios: times faster than the reference)", headers, rows, markdown=args.markdown)
    exact = {lib: r["exact"] for (lib, _), r in results.items() if r.get("exact") is not None}
    if exact:
        print("ids equal tiktoken's: " + ", ".join(f"{lib} {'yes' if ok else 'NO'}" for lib, ok in exact.items()))
    rss = {lib: max(r["rss_mb"] for (other, _), r in results.items() if other == lib) for lib in ran}
    print("peak RSS, MB: " + ", ".join(f"{lib} {v:,.0f}" for lib, v in rss.items()) + "\n", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", help="thread counts (default 1,2,4,8,16, up to the machine's CPUs)")
    ap.add_argument("--ref-threads", help="thread counts at which the references train (default: the first and the last)")
    ap.add_argument("--only", default=",".join(WORKLOADS), help=f"comma-separated subset of {','.join(WORKLOADS)}")
    ap.add_argument("--libs", help="comma-separated libraries to run, as the tables name them (default: all)")
    ap.add_argument("--runs", type=int, default=3, help="timed calls per child (median)")
    ap.add_argument("--ref-runs", type=int, help="timed calls per child for the references (default: --runs; training: 1)")
    ap.add_argument("--batch-mb", type=float, default=30.0)
    ap.add_argument("--doc-mb", type=float, default=8.0)
    ap.add_argument("--bpe-mb", type=float, default=100.0)
    ap.add_argument("--unigram-mb", type=float, default=20.0)
    ap.add_argument("--quick", action="store_true", help="small inputs (3 MB batches, 2 MB documents, 5 MB training), 2 runs")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per child")
    ap.add_argument("--markdown", action="store_true", help="tables in markdown")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--workload", choices=WORKLOADS, help=argparse.SUPPRESS)
    ap.add_argument("--lib", help=argparse.SUPPRESS)
    ap.add_argument("--threads-child", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--scratch", help=argparse.SUPPRESS)
    ap.add_argument("--check", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.quick:
        args.batch_mb, args.doc_mb, args.bpe_mb, args.unigram_mb, args.runs = 3.0, 2.0, 5.0, 5.0, 2
    if args.child:
        run_child_mode(args)
        return
    if args.ref_runs is None:
        args.ref_runs = args.runs
    cpus = len(os.sched_getaffinity(0))
    if args.threads:
        args.threads = [int(n) for n in args.threads.split(",")]
    else:
        args.threads = [n for n in (1, 2, 4, 8, 16) if n <= cpus]
    ref_threads = {int(n) for n in args.ref_threads.split(",")} if args.ref_threads else {args.threads[0], args.threads[-1]}
    workloads = [w for w in args.only.split(",") if w]
    for w in workloads:
        if w not in WORKLOADS:
            ap.error(f"unknown workload {w!r}: choose from {', '.join(WORKLOADS)}")
    _data.data_dir()
    print(f"{_data.machine_note()}; {_data.polytok_note()}; {_data.load_note()}", flush=True)
    chosen = set(args.libs.split(",")) if args.libs else None
    for workload in workloads:
        results = {}
        training = workload.startswith("train")
        for n in args.threads:
            for lib in LIBS[workload]:
                if chosen is not None and lib not in chosen:
                    continue
                # References whose time does not depend on n here, or which
                # take long, run at the --ref-threads counts only (all of
                # them, when --ref-threads is given).
                fixed = (training or workload == "document" or args.ref_threads) and lib in REFERENCES
                if fixed and n not in ref_threads:
                    continue
                check = n == args.threads[0] and not training and lib != "tiktoken"
                runs = (1 if training else args.ref_runs) if lib in REFERENCES else args.runs
                result = measure(args, workload, lib, n, check, runs)
                if result is not None:
                    results[(lib, n)] = result
        report(args, workload, results)


if __name__ == "__main__":
    main()
