"""cl100k encoding throughput and exactness: polytok vs tiktoken, fastokens,
riptoken, tokie and Hugging Face tokenizers.

    python bench/encode.py            # full run (10 MB English, all of bench/multi/)
    python bench/encode.py --quick    # small, fast run
    python bench/encode.py --pattern o200k   # cl100k's ranks, o200k's pattern

``--pattern o200k`` times o200k's pre-tokenization pattern (word splits by
case, contractions after words, ``[\r\n/]*``) with cl100k's ranks, the
only ones available offline: every library gets the same ranks and
tiktoken's published o200k pattern (fastokens its o200k scanner).

Inputs: the first ``--en-mb`` MB of ``en_100MB.txt`` (cut at a line end) and
the multilingual mix (the first ``--multi-mb`` MB of each ``multi/<lang>.txt``,
all of each by default).

* Single thread: each input is cut into whole documents of about
  ``--chunk-mb`` MB (at line ends; the same chunks for every library), each
  encoded with one call. Run in a child process pinned to one CPU, with
  ``RAYON_NUM_THREADS=1`` and ``TOKENIZERS_PARALLELISM=false`` (tokie starts
  helper threads for long texts whatever the environment says; pinned, they
  share the one core).
* Batch on 2 threads: each input is cut into paragraphs (after blank lines)
  and encoded with one batch call: polytok ``encode_batch``, tiktoken
  ``encode_ordinary_batch(num_threads=2)``, tokenizers/tokie ``encode_batch``,
  riptoken ``encode_ordinary_batch``. Child process with
  ``RAYON_NUM_THREADS=2``.

Each of ``--runs`` rounds is a fresh child process that loads every
library, warms each up on other text (the end of ``en_100MB.txt``), then
times one **first pass** over the input for each library and then a **second
pass over the same text**, in an order rotated by round. Each library
encodes its own copies of the input's strings, made before timing: a
string keeps the UTF-8 that CPython makes for it when a library asks
(tiktoken and fastokens do; polytok makes its own), so on shared strings
whichever library came first paid that for the others. Each call in use
gets a string of its own. The first pass is
the headline figure: polytok, tokenizers and tokie keep caches of the pieces
they have seen, so the same text encoded again in the same process is
faster than text never seen (the second pass shows by how much). Every timed
call returns Python lists of ids (``.ids`` of the Encoding objects for
tokenizers and tokie). Figures are medians over rounds; "× tiktoken" ratios
are medians of the per-round ratios. With both polytok and fastokens, a
last table gives polytok's speed over fastokens' the same way.

Exactness: every library's ids are compared with tiktoken's
``encode_ordinary`` document by document. Tokens are aligned by byte offset,
so "differing ids" counts the library's tokens that are not the token
tiktoken put at the same place.

The Hugging Face tokenizer is built from tiktoken's ranks: the byte-level
vocabulary, and merges recovered from the ranks (each multi-byte token's
bytes are merged by BPE with only lower-ranked merges until two parts are
left: they are its merge), a Split pre-tokenizer on ``enc._pat_str``
("isolated") then ByteLevel(add_prefix_space=False, use_regex=False), and a
ByteLevel decoder. It is cached in the data cache directory.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import os
import re
import sys
from collections import Counter
from importlib import metadata
from pathlib import Path

import _data

LIBS = ("tiktoken", "polytok", "fastokens", "riptoken", "tokie", "tokenizers")
INPUTS = _data.ENCODE_INPUTS
PHASES = _data.ENCODE_PHASES
BATCH_THREADS = 2


# ------------------------------------------------------------- the HF model


def recover_merges(ranks: dict[bytes, int]) -> list[tuple[bytes, bytes]]:
    """The merge that makes each multi-byte token, in rank order: BPE on the
    token's bytes with only lower-ranked merges; the last two parts."""
    merges = []
    for token, rank in sorted(ranks.items(), key=lambda item: item[1]):
        if len(token) < 2:
            continue
        parts = [bytes([b]) for b in token]
        while len(parts) > 2:
            best = None
            for i in range(len(parts) - 1):
                r = ranks.get(parts[i] + parts[i + 1])
                if r is not None and r < rank and (best is None or r < best[0]):
                    best = (r, i)
            if best is None:
                break
            i = best[1]
            parts[i : i + 2] = [parts[i] + parts[i + 1]]
        if len(parts) != 2:
            raise ValueError(f"token {token!r} (rank {rank}) cannot be reached by lower-ranked merges")
        merges.append((parts[0], parts[1]))
    return merges


def onig_pattern(pattern: str) -> str:
    """tiktoken's cl100k pattern in a form Oniguruma (tokenizers' regex
    engine) reads as intended: Oniguruma's Ruby syntax has no possessive
    interval, so ``\\p{N}{1,3}+`` means "one or more runs of 1-3 digits",
    i.e. any number of digits. An atomic group is what tiktoken means."""
    fixed = pattern.replace(r"\p{N}{1,3}+", r"(?>\p{N}{1,3})")
    if re.search(r"\{\d+(,\d*)?\}\+", fixed):
        raise ValueError(f"unexpected possessive interval left in {fixed!r}")
    return fixed


def build_hf_cl100k(enc, pattern: str):
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers

    b2u = _data.bytes_to_unicode()

    def chars(b: bytes) -> str:
        return "".join(b2u[x] for x in b)

    ranks = enc._mergeable_ranks
    vocab = {chars(t): r for t, r in ranks.items()}
    merges = [(chars(a), chars(b)) for a, b in recover_merges(ranks)]
    # ignore_merges: a piece that is itself a token is that token, as in tiktoken
    tk = Tokenizer(models.BPE(vocab=vocab, merges=merges, ignore_merges=True))
    tk.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(pattern), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tk.decoder = decoders.ByteLevel()
    return tk


def hf_cl100k_file(enc, ranks_path: str, pattern: str) -> Path:
    """The HF tokenizer.json for cl100k with ``pattern``, built once and
    cached outside the project."""
    import tokenizers

    h = hashlib.sha256(Path(ranks_path).read_bytes())
    h.update(pattern.encode())
    h.update(tokenizers.__version__.encode())
    path = _data.CACHE_DIR / f"cl100k-hf-{h.hexdigest()[:16]}.json"
    if not path.is_file():
        _data.CACHE_DIR.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        build_hf_cl100k(enc, pattern).save(str(tmp))
        tmp.replace(path)
    return path


# ---------------------------------------------------------------- exactness


class Exactness:
    """Ids of one library against tiktoken's, over a list of documents."""

    def __init__(self) -> None:
        self.docs = 0
        self.tokens = 0
        self.ref_tokens = 0
        self.mismatched_docs = 0
        self.differing_ids = 0
        self.bad_roundtrip = 0
        self.labels: Counter[str] = Counter()

    def add(self, enc, lens: list[int], doc: str, ref: list[int], ids: list[int], label: str = "") -> None:
        self.docs += 1
        self.tokens += len(ids)
        self.ref_tokens += len(ref)
        if ids == ref:
            return
        self.mismatched_docs += 1
        self.labels[label] += 1
        ref_at = set(zip(itertools.accumulate((lens[i] for i in ref), initial=0), ref))
        starts = itertools.accumulate((lens[i] if 0 <= i < len(lens) else 0 for i in ids), initial=0)
        self.differing_ids += sum((s, i) not in ref_at for s, i in zip(starts, ids))
        try:
            if enc.decode_bytes(ids) != doc.encode("utf-8"):
                self.bad_roundtrip += 1
        except Exception:
            self.bad_roundtrip += 1

    def as_dict(self) -> dict:
        return {
            "docs": self.docs,
            "tokens": self.tokens,
            "ref_tokens": self.ref_tokens,
            "mismatched_docs": self.mismatched_docs,
            "differing_ids": self.differing_ids,
            "bad_roundtrip": self.bad_roundtrip,
            "labels": dict(self.labels),
        }


def token_lengths(enc) -> list[int]:
    """Byte length of every ordinary cl100k id (0 for ids that are not)."""
    lens = []
    for i in range(enc.max_token_value + 1):
        try:
            lens.append(len(enc.decode_single_token_bytes(i)))
        except KeyError:
            lens.append(0)
    return lens


def compare(enc, lens, docs, labels, ref_out, out) -> Exactness:
    ex = Exactness()
    for doc, label, ref, ids in zip(docs, labels, ref_out, out):
        ex.add(enc, lens, doc, ref, ids, label)
    return ex


# ------------------------------------------------------------------- inputs


def input_docs(args, which: str, phase: str) -> tuple[list[str], list[str]]:
    """(documents, label of each) for an input and phase."""
    cut = (lambda t: _data.chunks(t, args.chunk_mb)) if phase == "single" else _data.paragraphs
    if which == "en":
        docs = cut(_data.en_text(args.en_mb))
        return docs, ["en"] * len(docs)
    docs, labels = [], []
    for lang, text in _data.multi_texts(args.multi_mb).items():
        part = cut(text)
        docs += part
        labels += [lang] * len(part)
    return docs, labels


def describe_inputs(args) -> str:
    multi = "all of each" if args.multi_mb is None else f"first {args.multi_mb:g} MB of each"
    return (
        f"en = first {args.en_mb:g} MB of en_100MB.txt; multi = {multi} of "
        f"{', '.join(_data.LANGS)}; single thread: ~{args.chunk_mb:g} MB chunks; batch: paragraphs"
    )


# -------------------------------------------------------------- child phase


def load_encoders(libs, phase: str, enc, ranks_path: str, pattern: str) -> dict:
    """``{name: function}``: one document -> ids (single) or a list of
    documents -> list of ids (batch)."""
    funcs = {}
    single = phase == "single"
    for name in libs:
        if name == "tiktoken":
            funcs[name] = (
                enc.encode_ordinary if single else (lambda docs: enc.encode_ordinary_batch(docs, num_threads=BATCH_THREADS))
            )
        elif name == "polytok":
            tok = _data.polytok_cl100k(enc, ranks_path, pattern)
            funcs[name] = tok.encode_ids if single else tok.encode_batch_ids
        elif name == "riptoken":
            import riptoken

            rt = riptoken.CoreBPE(enc._mergeable_ranks, enc._special_tokens, enc._pat_str)
            funcs[name] = rt.encode_ordinary if single else rt.encode_ordinary_batch
        elif name == "fastokens":
            ft = _data.fastokens_cl100k(enc, ranks_path, pattern)
            if single:
                funcs[name] = lambda doc, ft=ft: ft.encode(doc).ids
            else:
                funcs[name] = lambda docs, ft=ft: [e.ids for e in ft.encode_batch(docs)]
        elif name in ("tokie", "tokenizers"):
            path = str(hf_cl100k_file(enc, ranks_path, onig_pattern(enc._pat_str)))
            if name == "tokie":
                import tokie

                tk = tokie.Tokenizer.from_json(path)
            else:
                from tokenizers import Tokenizer

                tk = Tokenizer.from_file(path)
            if single:
                funcs[name] = lambda doc, tk=tk: tk.encode(doc, add_special_tokens=False).ids
            else:
                funcs[name] = lambda docs, tk=tk: [e.ids for e in tk.encode_batch(docs, add_special_tokens=False)]
        else:
            raise ValueError(f"unknown library {name}")
    return funcs


def warmup_docs(phase: str) -> list[str]:
    """Text for the untimed warm-up of every library (first-call set-up,
    thread pools): the last ~100 kB of ``en_100MB.txt``, which no input
    contains (``_data.warm_up_text``)."""
    text = _data.warm_up_text()
    return _data.chunks(text, 0.05) if phase == "single" else _data.paragraphs(text)


def run_phase(args) -> None:
    """One round, in a fresh process: every library warms up on other text,
    then encodes the input once (first pass: none of its pieces seen before)
    and once more (second pass: the same text again, so piece caches are
    warm), in an order rotated by round. Round 0 also checks exactness."""
    if args.phase == "single":
        # One core for everyone: tokie spawns helper threads for long texts
        # whatever RAYON_NUM_THREADS says; pinned, they share the same core.
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    enc, ranks_path = _data.tiktoken_cl100k(args.pattern)
    docs, labels = input_docs(args, args.input, args.phase)
    encoders = load_encoders(args.libs, args.phase, enc, ranks_path, args.pattern)
    if args.phase == "single":
        calls = {name: (lambda ds, f=f: [f(d) for d in ds]) for name, f in encoders.items()}
    else:
        calls = encoders
    shift = args.round % len(calls)
    order = list(calls)[shift:] + list(calls)[:shift]
    # Each library its own strings (see the module docstring): a copy made
    # by joining characters is a new object with no UTF-8 kept.
    inputs = {name: [d[:1] + d[1:] for d in docs] for name in order}
    warm = warmup_docs(args.phase)
    for name in order:
        calls[name](warm)
    load0 = os.getloadavg()[0]
    timings: dict[str, dict[str, dict[str, float]]] = {"first": {}, "again": {}}
    for kind in ("first", "again"):
        for name in order:
            wall, cpu, out = _data.timed(lambda call=calls[name], own=inputs[name]: call(own))
            del out
            timings[kind][name] = {"wall": wall, "cpu": cpu}
    load1 = os.getloadavg()[0]
    exact = None
    if args.exact:
        lens = token_lengths(enc)
        ref = [enc.encode_ordinary(d) for d in docs]
        exact = {
            name: compare(enc, lens, docs, labels, ref, call(docs)).as_dict()
            for name, call in calls.items()
            if name != "tiktoken"
        }
    _data.emit(
        {
            "bytes": _data.utf8_len(docs),
            "docs": len(docs),
            "load": [load0, load1],
            "polytok": _data.polytok_note() if "polytok" in encoders else None,
            "timings": timings,
            "exact": exact,
        }
    )


# --------------------------------------------------------------- the parent


def hf_check(args, enc, ranks_path) -> list[list]:
    """The HF model against tiktoken on a sample, with tiktoken's pattern as
    is and with the Oniguruma-safe form."""
    from tokenizers import Tokenizer

    mb = 0.2 if args.quick else 1.0
    docs = _data.chunks(_data.en_text(mb), 0.25) + [
        t for lang, text in _data.multi_texts(mb / 5).items() for t in _data.chunks(text, 0.25)
    ]
    labels = ["sample"] * len(docs)
    ref = [enc.encode_ordinary(d) for d in docs]
    lens = token_lengths(enc)
    rows = []
    for what, pattern in (("enc._pat_str as is", enc._pat_str), ("Oniguruma-safe (used)", onig_pattern(enc._pat_str))):
        tk = Tokenizer.from_file(str(hf_cl100k_file(enc, ranks_path, pattern)))
        out = [tk.encode(d, add_special_tokens=False).ids for d in docs]
        ex = compare(enc, lens, docs, labels, ref, out)
        rows.append([what, _data.utf8_len(docs), ex.ref_tokens, ex.tokens, ex.differing_ids, f"{ex.mismatched_docs}/{ex.docs}"])
    return rows


def versions(libs) -> str:
    dists = {"tiktoken": "tiktoken", "polytok": "polytok", "fastokens": "fastokens", "riptoken": "riptoken", "tokie": "tokie", "tokenizers": "tokenizers"}
    out = []
    for name in libs:
        if name == "polytok":
            out.append(_data.polytok_note())
            continue
        try:
            out.append(f"{name} {metadata.version(dists[name])}")
        except metadata.PackageNotFoundError:
            out.append(f"{name} ?")
    return ", ".join(out)


def available(libs) -> list[str]:
    out = []
    for name in libs:
        try:
            if name == "polytok":
                _data.import_polytok()
            else:
                __import__(name)
            out.append(name)
        except ImportError as e:
            print(f"[encode] {name} is not installed ({e}); left out", file=sys.stderr)
    if "tiktoken" not in out:
        _data.skip("tiktoken (the reference) is not installed")
    return out


def merge_rounds(rounds: list[dict]) -> dict:
    """The rounds of one phase and input: per library and pass, the lists of
    wall and CPU seconds (round i at index i)."""
    timings = {
        kind: {
            name: {key: [r["timings"][kind][name][key] for r in rounds] for key in ("wall", "cpu")}
            for name in rounds[0]["timings"][kind]
        }
        for kind in ("first", "again")
    }
    loads = [x for r in rounds for x in r["load"]]
    return {
        "bytes": rounds[0]["bytes"],
        "docs": rounds[0]["docs"],
        "load": [min(loads), max(loads)],
        "polytok": sorted({r["polytok"] for r in rounds if r["polytok"]}),
        "timings": timings,
        "exact": rounds[0]["exact"],
    }


def ratio_cell(res: dict, name: str, kind: str = "first") -> tuple[float, float]:
    """(MB/s, × tiktoken) of a library for a pass; × is against tiktoken's
    same pass, median of the per-round ratios."""
    t = res["timings"][kind]
    mbps = res["bytes"] / _data.MB / _data.median(t[name]["wall"])
    return mbps, _data.speedup(t["tiktoken"]["wall"], t[name]["wall"])


def cell(res: dict, name: str, kind: str = "first") -> str:
    mbps, x = ratio_cell(res, name, kind)
    return f"{mbps:.1f} ({x:.2f}×)"


def cpu_wall(res: dict, name: str) -> float:
    t = res["timings"]["first"][name]
    return _data.median(t["cpu"]) / _data.median(t["wall"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    _data.add_encode_options(ap, LIBS)
    ap.add_argument("--pattern", choices=("cl100k", "o200k"), default="cl100k", help="pre-tokenization pattern (ranks: cl100k's)")
    args = ap.parse_args()
    _data.finish_encode_options(args, "tiktoken")

    if args.phase:
        run_phase(args)
        return

    _data.data_dir()  # skip early if the corpus is absent; unpack once
    libs = available(args.libs)
    enc, ranks_path = _data.tiktoken_cl100k(args.pattern)
    what = "cl100k" if args.pattern == "cl100k" else "cl100k ranks, o200k pattern:"
    print(f"{what} encoding benchmark — {_data.machine_note()}")
    print(f"versions: {versions(libs)}")
    print(f"inputs: {describe_inputs(args)}")
    print(
        f"{args.runs} rounds per phase and input, each in a fresh process: every library warms up on other text, "
        "then encodes the input twice (first pass, then the same text again); MB = 10^6 bytes\n"
    )

    if "tokenizers" in libs or "tokie" in libs:
        _data.print_table(
            "Hugging Face cl100k (built from tiktoken's ranks) vs tiktoken on a sample",
            ["pre-tokenizer pattern", "bytes", "tiktoken tokens", "HF tokens", "differing ids", "mismatching docs"],
            hf_check(args, enc, ranks_path),
        )

    results = {key: merge_rounds(rounds) for key, rounds in _data.encode_rounds(__file__, args, libs, "encode", [f"--pattern={args.pattern}"]).items()}

    builds = {b for r in results.values() for b in r["polytok"]}
    if len(builds) > 1:
        print(f"WARNING: polytok was reinstalled during the run: {sorted(builds)}\n")
    for phase, title in (
        ("single", "Single thread, whole documents (encode one ~chunk at a time)"),
        ("batch", f"Batch on {BATCH_THREADS} threads, paragraphs"),
    ):
        en, multi = results[phase, "en"], results[phase, "multi"]
        rows = [
            [
                name,
                cell(en, name),
                cell(multi, name),
                cell(en, name, "again"),
                cell(multi, name, "again"),
                f"{cpu_wall(en, name):.2f} / {cpu_wall(multi, name):.2f}",
            ]
            for name in libs
        ]
        sub = f" (en: {en['docs']:,} docs, {en['bytes'] / _data.MB:.1f} MB; multi: {multi['docs']:,} docs, {multi['bytes'] / _data.MB:.1f} MB)"
        loads = [x for r in (en, multi) for x in r["load"]]
        sub += f"; load average {min(loads):.2f}-{max(loads):.2f} on {os.cpu_count()} CPUs"
        _data.print_table(
            title + sub + "\nMB/s (× tiktoken), medians of rounds",
            ["library", "en, first pass", "multi, first pass", "en, same text again", "multi, same text again", "CPU/wall en / multi"],
            rows,
        )

    rows = []
    inexact = Counter()
    for (phase, which), res in results.items():
        for name in libs:
            if name == "tiktoken":
                continue
            ex = res["exact"][name]
            inexact[name] += ex["differing_ids"] + ex["mismatched_docs"] + ex["bad_roundtrip"]
            langs = ", ".join(f"{k}:{v}" for k, v in sorted(ex["labels"].items())) if which == "multi" else ""
            rows.append(
                [
                    name,
                    which,
                    f"~{args.chunk_mb:g} MB chunks" if phase == "single" else "paragraphs",
                    ex["ref_tokens"],
                    ex["tokens"],
                    ex["differing_ids"],
                    f"{ex['mismatched_docs']:,}/{ex['docs']:,}",
                    ex["bad_roundtrip"],
                    langs,
                ]
            )
    _data.print_table(
        "Exactness against tiktoken encode_ordinary",
        ["library", "input", "documents", "tiktoken tokens", "tokens", "differing ids", "mismatching docs", "decode != text", "mismatching docs by language"],
        rows,
    )

    summary, again = [], []
    for name in libs:
        cells = [name] + [cell(results[phase, which], name) for phase in PHASES for which in INPUTS]
        again.append([name] + [cell(results[phase, which], name, "again") for phase in PHASES for which in INPUTS])
        if name == "tiktoken":
            cells.append("reference")
        else:
            diff = sum(results[k]["exact"][name]["differing_ids"] for k in results)
            docs = sum(results[k]["exact"][name]["mismatched_docs"] for k in results)
            cells.append("yes" if not inexact[name] else f"no: {diff:,} ids in {docs:,} docs")
        summary.append(cells)
    print("Markdown summary (MB/s, × tiktoken in the same round):\n")
    headers = ["library", "en, 1 thread", "multi, 1 thread", f"en, batch {BATCH_THREADS} threads", f"multi, batch {BATCH_THREADS} threads"]
    _data.print_table(
        f"{what} encode, first pass over the text, MB/s (× tiktoken) — {describe_inputs(args)}; median of {args.runs} rounds",
        headers + ["exact vs tiktoken"],
        summary,
        markdown=True,
    )
    _data.print_table(
        "The same text encoded again in the same process (piece caches warm), MB/s (× tiktoken)",
        headers,
        again,
        markdown=True,
    )
    if "polytok" in libs and "fastokens" in libs:
        rows = [
            [label]
            + [
                f"{_data.speedup(results[phase, which]['timings'][kind]['fastokens']['wall'], results[phase, which]['timings'][kind]['polytok']['wall']):.2f}×"
                for phase in PHASES
                for which in INPUTS
            ]
            for kind, label in (("first", "first pass"), ("again", "same text again"))
        ]
        _data.print_table(
            "polytok against fastokens: median of the per-round ratios of their speeds (above 1: polytok is faster)",
            ["pass"] + headers[1:],
            rows,
            markdown=True,
        )


if __name__ == "__main__":
    main()
