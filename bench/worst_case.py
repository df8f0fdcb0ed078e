"""Pathological inputs for cl100k: polytok vs tiktoken.

    python bench/worst_case.py            # full run
    python bench/worst_case.py --quick    # small, fast run

Cases (MB = 10^6 bytes):

* ``a``: one repeated letter, ``"a" * 1_000_000`` and ``"a" * 2_000_000``;
  the cl100k pattern makes the whole text one piece, so BPE runs on a piece
  of 1 MB (tiktoken's BPE is quadratic in the piece length);
* ``cjk``: Chinese text without whitespace: ``multi/zh.txt`` with all
  whitespace removed, cut to 1 MB (and 2 MB) at a character boundary;
* ``spaces`` (only with ``--cases``): one run of spaces, one piece;
* ``letters`` (only with ``--cases``): pseudo-random lowercase letters
  (fixed seed), one piece whose BPE makes many different merges.

``--cases all`` runs every case.

Each library runs in a child process with a time limit (``--timeout``);
"> N s" means the limit was reached before one encode finished. polytok's
child times the 1 MB and 2 MB inputs interleaved, ``--runs`` times, and the
doubling ratio time(2 MB) / time(1 MB) is the median of the per-round
ratios (goal: under 2.2, i.e. close to linear). tiktoken runs as many of
``--runs`` runs as fit in the limit. Where tiktoken finishes, the ids of
both are compared.
"""

from __future__ import annotations

import argparse
import hashlib
import random
import re
import string
import sys
import time

import _data

CASES = ("a", "cjk", "spaces", "letters")
DEFAULT_CASES = ("a", "cjk")
GOAL = 2.2


def case_text(case: str, size: int) -> str:
    """The input of a case, exactly ``size`` bytes (CJK: at most, cut at a
    character boundary)."""
    if case == "a":
        return "a" * size
    if case == "spaces":
        return " " * size
    if case == "letters":
        return "".join(random.Random(0).choices(string.ascii_lowercase, k=size))
    if case == "cjk":
        zh = re.sub(r"\s+", "", _data.read_prefix(_data.data_dir() / "multi" / "zh.txt", None))
        data = zh.encode("utf-8")
        if len(data) < size:
            raise SystemExit(f"zh.txt has only {len(data):,} bytes without whitespace; {size:,} asked")
        return data[:size].decode("utf-8", errors="ignore")  # drops a cut character at the end
    raise ValueError(case)


def digest(ids: list[int]) -> str:
    return hashlib.sha256(",".join(map(str, ids)).encode()).hexdigest()[:16]


def run_child_mode(args) -> None:
    """In the child: load one library, encode the inputs, report after every
    run (so a run cut by the time limit still reports the finished ones)."""
    enc, ranks = _data.tiktoken_cl100k()
    if args.child == "polytok":
        encode = _data.polytok_cl100k(enc, ranks).encode
    else:
        encode = enc.encode_ordinary
    encode("warm up: load everything lazily loaded")
    sizes = [int(s) for s in args.sizes.split(",")]
    texts = {size: case_text(args.case, size) for size in sizes}
    result = {"times": {str(s): [] for s in sizes}, "tokens": {}, "digest": {}, "bytes": {}}
    if args.child == "polytok":
        result["polytok"] = _data.polytok_note()
    for _ in range(args.runs):
        for size, text in texts.items():
            t0 = time.perf_counter()
            ids = encode(text)
            result["times"][str(size)].append(time.perf_counter() - t0)
            result["tokens"][str(size)] = len(ids)
            result["digest"][str(size)] = digest(ids)
            result["bytes"][str(size)] = len(text.encode("utf-8"))
            del ids
            _data.emit(result)


def child(args, lib: str, case: str, sizes: list[int], runs: int) -> tuple[dict | None, _data.ChildResult]:
    res = _data.run_child(
        [
            sys.executable,
            __file__,
            f"--child={lib}",
            f"--case={case}",
            f"--sizes={','.join(map(str, sizes))}",
            f"--runs={runs}",
        ],
        timeout=args.timeout,
        env={"RAYON_NUM_THREADS": "1"},
    )
    try:
        data = res.json()
    except RuntimeError:
        data = None
    if data is None and not res.timed_out:
        print(f"[worst_case] {lib} {case} failed (exit {res.returncode}):\n{res.stderr[-3000:]}", file=sys.stderr)
    return data, res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="0.25 MB and 0.5 MB inputs, 3 runs, 20 s limit")
    ap.add_argument("--runs", type=int, help="runs per input (default 5, quick 3)")
    ap.add_argument("--timeout", type=float, help="time limit per child process, s (default 120, quick 20)")
    ap.add_argument("--mb", type=float, help="the smaller size in MB; the larger is twice it (default 1, quick 0.25)")
    ap.add_argument("--cases", default=",".join(DEFAULT_CASES), help=f"comma-separated subset of {','.join(CASES)}, or all (default {','.join(DEFAULT_CASES)})")
    ap.add_argument("--child", choices=("polytok", "tiktoken"), help=argparse.SUPPRESS)
    ap.add_argument("--case", choices=CASES, help=argparse.SUPPRESS)
    ap.add_argument("--sizes", help=argparse.SUPPRESS)
    args = ap.parse_args()
    args.runs = args.runs or (3 if args.quick else 5)
    args.timeout = args.timeout or (20.0 if args.quick else 120.0)
    args.mb = args.mb or (0.25 if args.quick else 1.0)

    if args.child:
        run_child_mode(args)
        return

    _data.data_dir()
    cases = list(CASES) if args.cases == "all" else [c.strip() for c in args.cases.split(",") if c.strip()]
    for c in cases:
        if c not in CASES:
            ap.error(f"unknown case {c!r}")
    small = int(args.mb * _data.MB)
    sizes = [small, 2 * small]
    import tiktoken

    print(f"cl100k worst cases — {_data.machine_note()}; {_data.polytok_note()}, tiktoken {tiktoken.__version__}")
    print(f"polytok: median of {args.runs} runs; tiktoken: as many of {args.runs} runs as fit in {args.timeout:g} s; one child process per library and case; {_data.load_note()}\n")

    rows, doubling = [], []
    builds = set()
    for case in cases:
        print(f"[worst_case] {case}: polytok ...", file=sys.stderr, flush=True)
        p_data, p_res = child(args, "polytok", case, sizes, args.runs)
        if p_data:
            builds.add(p_data.get("polytok"))
        t_data = {}
        for size in sizes:
            print(f"[worst_case] {case} {size / _data.MB:g} MB: tiktoken ...", file=sys.stderr, flush=True)
            t_data[size] = child(args, "tiktoken", case, [size], args.runs)
        for size in sizes:
            key = str(size)
            p_times = (p_data or {}).get("times", {}).get(key) or []
            t_d, t_res = t_data[size]
            t_times = (t_d or {}).get("times", {}).get(key) or []
            p_med = _data.median(p_times) if p_times else None
            t_med = _data.median(t_times) if t_times else None
            nbytes = (p_data or t_d or {}).get("bytes", {}).get(key, size)

            def shown(med, res, n):
                if med is not None:
                    return f"{med:.4f}" + ("" if n > 1 else " (1 run)")
                return f"> {args.timeout:g} s" if res.timed_out else f"failed ({res.returncode})"

            same = None
            if p_data and t_d:
                same = "yes" if p_data["digest"][key] == t_d["digest"][key] else "NO"
            rows.append(
                [
                    case,
                    f"{size / _data.MB:g} MB",
                    shown(p_med, p_res, len(p_times)),
                    nbytes / _data.MB / p_med if p_med else None,
                    shown(t_med, t_res, len(t_times)),
                    (f"{t_med / p_med:,.1f}×" if t_med and p_med else (f"> {args.timeout / p_med:,.0f}×" if p_med and t_res.timed_out else None)),
                    (p_data or {}).get("tokens", {}).get(key),
                    same or "—",
                ]
            )
        p_small = (p_data or {}).get("times", {}).get(str(sizes[0])) or []
        p_big = (p_data or {}).get("times", {}).get(str(sizes[1])) or []
        if p_small and p_big:
            ratio = _data.speedup(p_big, p_small)  # median of per-round time(2x) / time(1x)
            doubling.append([case, f"{_data.median(p_small):.4f}", f"{_data.median(p_big):.4f}", f"{ratio:.2f}", "ok" if ratio < GOAL else "ABOVE GOAL"])
        else:
            doubling.append([case, None, None, "—", "polytok did not finish"])

    print(f"at the end: {_data.load_note()}\n")
    if len(builds) > 1:
        print(f"WARNING: polytok was reinstalled during the run: {sorted(builds)}\n")
    small_s, big_s = f"{sizes[0] / _data.MB:g} MB", f"{sizes[1] / _data.MB:g} MB"
    _data.print_table(
        "Seconds per encode (median)",
        ["case", "size", "polytok s", "polytok MB/s", "tiktoken s", "polytok × faster", "tokens", "same ids"],
        rows,
    )
    _data.print_table(
        f"polytok doubling ratio, time({big_s}) / time({small_s}) (median of per-round ratios; goal < {GOAL})",
        ["case", f"{small_s} s", f"{big_s} s", "ratio", "verdict"],
        doubling,
    )
    print("Markdown:\n")
    _data.print_table(
        f"cl100k worst cases (median of {args.runs}; tiktoken limit {args.timeout:g} s)",
        ["case", "size", "polytok s", "tiktoken s", "polytok × faster", "same ids"],
        [[r[0], r[1], r[2], r[4], r[5], r[7]] for r in rows],
        markdown=True,
    )
    _data.print_table(
        f"polytok doubling ratio (goal < {GOAL})",
        ["case", f"{small_s} s", f"{big_s} s", "ratio", "verdict"],
        doubling,
        markdown=True,
    )


if __name__ == "__main__":
    main()
