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

Every encode runs in a fresh child process with a time limit
(``--timeout``), after a warm-up on other text, so no cache of pieces seen
before helps and the first-call set-up is not timed; "> N s" means the limit
was reached. ``--runs`` rounds of (polytok 1 MB, 2 MB, tiktoken 1 MB, 2 MB)
per case; polytok's doubling ratio time(2 MB) / time(1 MB) is the median of
the per-round ratios (goal: under 2.2, i.e. close to linear). A tiktoken
encode that hits the limit is not tried again. Where tiktoken finishes, the
ids of both are compared.
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


WARMUP = "z" * 200_000  # one long piece: sets up what long pieces need, once per process


def run_child_mode(args) -> None:
    """In the child: load one library, warm it up on other text, encode the
    input once (text the process has never seen, so no cache helps)."""
    enc, ranks = _data.tiktoken_cl100k()
    encode = _data.polytok_cl100k(enc, ranks).encode_ids if args.child == "polytok" else enc.encode_ordinary
    encode("Warm-up: 12 words, some punctuation; and 日本語のテキスト.")
    encode(WARMUP)
    text = case_text(args.case, args.size)
    t0 = time.perf_counter()
    ids = encode(text)
    elapsed = time.perf_counter() - t0
    _data.emit(
        {
            "time": elapsed,
            "tokens": len(ids),
            "digest": digest(ids),
            "bytes": len(text.encode("utf-8")),
            "polytok": _data.polytok_note() if args.child == "polytok" else None,
        }
    )


def measure(args, lib: str, case: str, size: int) -> tuple[dict | None, _data.ChildResult]:
    """One encode in a fresh child process, with the time limit."""
    res = _data.run_child(
        [sys.executable, __file__, f"--child={lib}", f"--case={case}", f"--size={size}"],
        timeout=args.timeout,
        env={"RAYON_NUM_THREADS": "1"},
    )
    if res.timed_out:
        return None, res
    try:
        return res.json(), res
    except RuntimeError:
        print(f"[worst_case] {lib} {case} {size:,} B failed (exit {res.returncode}):\n{res.stderr[-3000:]}", file=sys.stderr)
        return None, res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="0.25 MB and 0.5 MB inputs, 3 runs, 20 s limit")
    ap.add_argument("--runs", type=int, help="runs per library and input (default 5, quick 3)")
    ap.add_argument("--timeout", type=float, help="time limit per encode (child process), s (default 120, quick 20)")
    ap.add_argument("--mb", type=float, help="the smaller size in MB; the larger is twice it (default 1, quick 0.25)")
    ap.add_argument("--cases", default=",".join(DEFAULT_CASES), help=f"comma-separated subset of {','.join(CASES)}, or all (default {','.join(DEFAULT_CASES)})")
    ap.add_argument("--child", choices=("polytok", "tiktoken"), help=argparse.SUPPRESS)
    ap.add_argument("--case", choices=CASES, help=argparse.SUPPRESS)
    ap.add_argument("--size", type=int, help=argparse.SUPPRESS)
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
    print(
        f"every encode in a fresh process after a warm-up on other text; {args.runs} rounds of "
        f"(polytok {sizes[0] / _data.MB:g} MB, {sizes[1] / _data.MB:g} MB, tiktoken the same) per case; "
        f"tiktoken's rounds stop at the first encode over {args.timeout:g} s; {_data.load_note()}\n"
    )

    # times[lib][case][size]: list over rounds (None where the limit was hit)
    times = {lib: {c: {s: [] for s in sizes} for c in cases} for lib in ("polytok", "tiktoken")}
    info: dict[tuple[str, str, int], dict] = {}
    builds = set()
    for case in cases:
        for r in range(args.runs):
            print(f"[worst_case] {case}, round {r + 1}/{args.runs}", file=sys.stderr, flush=True)
            for lib in ("polytok", "tiktoken"):
                for size in sizes:
                    done = times[lib][case][size]
                    if done and done[-1] is None:  # timed out before: it would again
                        continue
                    data, _ = measure(args, lib, case, size)
                    done.append(data["time"] if data else None)
                    if data:
                        info[lib, case, size] = data
                        if data["polytok"]:
                            builds.add(data["polytok"])
    print(f"at the end: {_data.load_note()}\n")
    if len(builds) > 1:
        print(f"WARNING: polytok was reinstalled during the run: {sorted(builds)}\n")

    def shown(ts: list) -> str:
        ok = [t for t in ts if t is not None]
        if ok:
            return f"{_data.median(ok):.4f}" + ("" if len(ok) > 1 else " (1 run)")
        return f"> {args.timeout:g} s" if ts else "failed"

    rows, doubling = [], []
    for case in cases:
        for size in sizes:
            p_ts = [t for t in times["polytok"][case][size] if t is not None]
            t_all = times["tiktoken"][case][size]
            t_ts = [t for t in t_all if t is not None]
            p_med = _data.median(p_ts) if p_ts else None
            t_med = _data.median(t_ts) if t_ts else None
            if p_med and t_med:
                faster = f"{t_med / p_med:,.1f}×"
            elif p_med and t_all and t_all[-1] is None:
                faster = f"> {args.timeout / p_med:,.0f}×"
            else:
                faster = None
            p_info, t_info = info.get(("polytok", case, size)), info.get(("tiktoken", case, size))
            same = ("yes" if p_info["digest"] == t_info["digest"] else "NO") if p_info and t_info else "—"
            rows.append(
                [
                    case,
                    f"{size / _data.MB:g} MB",
                    shown(times["polytok"][case][size]),
                    size / _data.MB / p_med if p_med else None,
                    shown(t_all),
                    faster,
                    p_info["tokens"] if p_info else None,
                    same,
                ]
            )
        small_ts, big_ts = times["polytok"][case][sizes[0]], times["polytok"][case][sizes[1]]
        pairs = [(a, b) for a, b in zip(small_ts, big_ts) if a is not None and b is not None]
        if pairs:
            ratio = _data.median([b / a for a, b in pairs])  # per round: time(2x) / time(1x)
            doubling.append(
                [
                    case,
                    f"{_data.median([a for a, _ in pairs]):.4f}",
                    f"{_data.median([b for _, b in pairs]):.4f}",
                    f"{ratio:.2f}",
                    "ok" if ratio < GOAL else "ABOVE GOAL",
                ]
            )
        else:
            doubling.append([case, None, None, "—", "polytok did not finish"])

    small_s, big_s = f"{sizes[0] / _data.MB:g} MB", f"{sizes[1] / _data.MB:g} MB"
    _data.print_table(
        "Seconds per encode (median over rounds)",
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
        f"cl100k worst cases (median of {args.runs} rounds, each encode in a fresh process; tiktoken limit {args.timeout:g} s)",
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
