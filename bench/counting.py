"""Counting at scale: time, peak RSS and the distinct-piece table of
counting 100 MB, 300 MB and 1 GB; counting throughput per core; Ray on two
local workers against one process.

    python bench/counting.py                 # sizes 0.1, 0.3, 1 GB, then Ray (~9 min)
    python bench/counting.py --quick         # 30 and 100 MB, Ray on 30 MB
    python bench/counting.py --sizes 0.1,1 --no-ray

Corpora: the benchmark corpus (``en_100MB.txt``) and the multilingual one
(``multi/*.txt``), cut into documents (at blank lines) and shuffled, so that
every size holds the same mix; corpora larger than the 130 MB of documents
are made by shuffling them again with another seed, never by repeating
identical text in order. They are written once into the data
cache (``$POLYTOK_BENCH_DATA``), never into the project.

* **Scale**: each size counted by ``Counts.for_bpe().add_files`` (cl100k) in
  a fresh child process, on all cores, without and with a memory budget
  (``max_pieces``), three times; median wall time, peak RSS (``wait4``)
  and distinct pieces.
  Counting time must grow linearly: time(1 GB) <= 10.5 x time(100 MB).
* **Per core**: the 100 MB corpus counted with 1 and 2 threads
  (``RAYON_NUM_THREADS``).
* **Ray**: the 300 MB and 1 GB corpora read by ``ray.data.read_text`` (a
  row per line, 16 blocks), counted by ``polytok.ray.count`` on two local
  workers (each counting on one core) against one process counting the
  same lines as Arrow (``Counts.add_arrow``) on one thread, and on all;
  five rounds of the three after Ray has started, medians (each ratio the
  median of the rounds'). Ray's start-up (``ray.init``, reading the file
  into the object store, a first count, which starts the workers) is
  timed apart.
  The counts are checked to be identical.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import random
import statistics
import sys
import time
from pathlib import Path

import _data

BUDGET = 200_000
#: Runs of each count (fresh processes), whose median time is reported.
RUNS = 3
#: Rounds of one process, one thread / all threads / Ray (in one process).
RAY_ROUNDS = 5


def documents() -> list[str]:
    """The benchmark documents: English and the multilingual mix, cut at
    blank lines."""
    docs = _data.paragraphs(_data.en_text(None))
    for text in _data.multi_texts(None).values():
        docs.extend(_data.paragraphs(text))
    return docs


def corpus_file(gb: float) -> Path:
    """A corpus of about ``gb`` GB in the data cache: the documents
    shuffled with seed 1, then again with seed 2, ... until the size is
    reached (so every size holds the same mix of languages)."""
    path = _data.CACHE_DIR / f"counting-mix-{gb:g}GB.txt"
    if path.is_file():
        return path
    target = int(gb * 1e9)
    docs = documents()
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    written, seed = 0, 1
    with open(tmp, "w", encoding="utf-8") as out:
        while written < target:
            order = random.Random(seed).sample(docs, len(docs))
            for doc in order:
                if written >= target:
                    break
                out.write(doc)
                out.write("\n\n")
                written += len(doc.encode("utf-8")) + 2
            seed += 1
    tmp.replace(path)
    return path


def child_count(args) -> None:
    """One counting run in this (child) process."""
    polytok = _data.import_polytok()
    t0 = time.perf_counter()
    counts = polytok.Counts.for_bpe().add_files(args.file, max_pieces=args.budget or None, progress=False)
    wall = time.perf_counter() - t0
    _data.emit({"wall": wall, "pieces": len(counts), "bytes": counts.text_bytes, "dropped": counts.dropped["pieces"]})


def child_ray(args) -> None:
    """Ray on two local workers against one process, on the same rows:
    Ray started first, then rounds of the three, so that each ratio is
    taken between runs made minutes, not seconds, apart on a machine whose
    speed drifts."""
    polytok = _data.import_polytok()
    import polytok.ray  # noqa: F401  (the module, beside the package)
    import pyarrow as pa
    import ray

    t0 = time.perf_counter()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    ds = ray.data.read_text(args.file).repartition(16).materialize()  # a row per line, as the local count's
    polytok.ray.count(ray.data.from_items([{"text": "warm up"}]), polytok.Counts.for_bpe())
    startup = time.perf_counter() - t0
    with open(args.file, encoding="utf-8") as f:
        rows = pa.array(f.read().splitlines(), pa.large_string())
    alone, threads, walls = [], [], []
    for _ in range(RAY_ROUNDS):
        t0 = time.perf_counter()
        local = polytok.Counts.for_bpe().add_arrow(rows, parallel=False)
        alone.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        polytok.Counts.for_bpe().add_arrow(rows)
        threads.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        counted = polytok.ray.count(ds, polytok.Counts.for_bpe())
        walls.append(time.perf_counter() - t0)
    ray.shutdown()
    _data.emit({
        "bytes": local.text_bytes, "pieces": len(local), "one_process": statistics.median(alone),
        "all_threads": statistics.median(threads), "ray": statistics.median(walls), "startup": startup,
        "ratio": statistics.median(a / w for a, w in zip(alone, walls)),
        "threads_ratio": statistics.median(a / t for a, t in zip(alone, threads)),
        "equal": counted.to_bytes() == local.to_bytes(),
    })


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="0.1,0.3,1", help="corpus sizes in GB (default 0.1,0.3,1)")
    ap.add_argument("--quick", action="store_true", help="sizes 0.03,0.1 and Ray on 30 MB")
    ap.add_argument("--no-ray", action="store_true")
    ap.add_argument("--markdown", action="store_true", help="also print markdown tables")
    ap.add_argument("--child", choices=["count", "ray"], help=argparse.SUPPRESS)
    ap.add_argument("--file", help=argparse.SUPPRESS)
    ap.add_argument("--budget", type=int, default=0, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child == "count":
        return child_count(args)
    if args.child == "ray":
        return child_ray(args)
    _data.data_dir()
    sizes = [0.03, 0.1] if args.quick else [float(s) for s in args.sizes.split(",")]
    print(_data.machine_note())
    me = [sys.executable, str(Path(__file__).resolve())]

    rows, walls = [], {}
    for gb in sizes:
        path = corpus_file(gb)
        for budget in (0, BUDGET):
            runs = [
                _data.run_child([*me, "--child", "count", "--file", str(path), "--budget", str(budget)], timeout=3600)
                for _ in range(RUNS)
            ]
            report = runs[0].json()
            wall = walls[(gb, budget)] = statistics.median(run.json()["wall"] for run in runs)
            rows.append([
                f"{report['bytes'] / 1e6:,.0f}", f"{budget:,}" if budget else "none", f"{wall:.2f}",
                f"{report['bytes'] / 1e6 / wall:.0f}", f"{max(run.max_rss_mb for run in runs):,.0f}",
                f"{report['pieces']:,}", f"{report['dropped']:,}",
            ])
    headers = ["MB counted", "max pieces", "seconds (median)", "MB/s", "peak RSS MB", "distinct pieces", "dropped"]
    _data.print_table(f"Counting with cl100k (Counts.for_bpe().add_files), all cores; {RUNS} runs each", headers, rows, args.markdown)
    if len(sizes) > 1:
        first, last = sizes[0], sizes[-1]
        print(f"time({last:g} GB) / time({first:g} GB) = {walls[(last, 0)] / walls[(first, 0)]:.2f} "
              f"for {last / first:.1f}x the text (linear: <= {1.05 * last / first:.1f})")

    per_core = []
    path = corpus_file(sizes[min(1, len(sizes) - 1)])
    for threads in (1, 2):
        reports = [
            _data.run_child([*me, "--child", "count", "--file", str(path)], timeout=3600,
                            env={"RAYON_NUM_THREADS": str(threads)}).json()
            for _ in range(RUNS)
        ]
        wall = statistics.median(report["wall"] for report in reports)
        per_core.append([threads, f"{wall:.2f}", f"{reports[0]['bytes'] / 1e6 / wall:.0f}"])
    _data.print_table(f"Counting {path.name} by threads; medians of {RUNS}", ["threads", "seconds", "MB/s"], per_core, args.markdown)

    if not args.no_ray:
        if importlib.util.find_spec("ray") is None:
            print('Ray: SKIPPED (pip install "polytok[ray]")')
            return
        rows = []
        for gb in [0.03] if args.quick else [0.3, 1]:
            result = _data.run_child([*me, "--child", "ray", "--file", str(corpus_file(gb))], timeout=3600)
            report = result.json()
            rows.append([
                f"{report['bytes'] / 1e6:,.0f}", f"{report['pieces']:,}", f"{report['one_process']:.2f}",
                f"{report['all_threads']:.2f}", f"{report['ray']:.2f}", f"{report['threads_ratio']:.2f}",
                f"{report['ratio']:.2f}", f"{report['startup']:.1f}", "yes" if report["equal"] else "NO",
            ])
        _data.print_table(
            f"Ray on 2 local workers: a row per line (ray.data.read_text, 16 blocks); {RAY_ROUNDS} rounds of the three, "
            "medians (ratios: the median of each round's)",
            ["MB", "distinct pieces", "one process, 1 thread (s)", "one process, all threads (s)", "Ray, 2 workers (s)",
             "all threads / 1 thread", "Ray / 1 thread", "Ray start-up (s)", "counts equal"],
            rows, args.markdown,
        )


if __name__ == "__main__":
    main()
