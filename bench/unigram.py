"""SentencePiece Unigram encoding throughput and exactness: polytok vs the
``sentencepiece`` package (the reference), on one Unigram model.

    python bench/unigram.py            # full run (10 MB English, all of bench/multi/)
    python bench/unigram.py --quick    # small, fast run

The model: 32,000 pieces, trained by sentencepiece
(``model_type="unigram"``, ``normalization_rule_name="identity"``,
``character_coverage=0.9995``, every line of the corpus used) on the first
10 MB of ``en_100MB.txt``; it is cached in the benchmark data directory and
trained only once. polytok loads it with
``UnigramTokenizer.from_sentencepiece``, sentencepiece with
``SentencePieceProcessor(model_file=...)``.

Inputs, phases and rounds are those of ``encode.py``: the first ``--en-mb``
MB of ``en_100MB.txt`` and the multilingual mix; single thread on ~1 MB
documents (pinned to one CPU), one ``encode(doc)`` call per document; and
batches of paragraphs on 2 threads: polytok ``encode_batch(docs)``,
sentencepiece ``encode(docs, num_threads=2)``. Each of ``--runs`` rounds is
a fresh process that warms both libraries up on other text and then times
one pass over the input, library after library in an order rotated by
round. Ratios are "× sentencepiece", medians of the per-round ratios.
Exactness: ids equal to sentencepiece's, document by document.
"""

from __future__ import annotations

import argparse
import os
import sys
from importlib import metadata
from pathlib import Path

import _data

LIBS = ("sentencepiece", "polytok")
INPUTS = _data.ENCODE_INPUTS
PHASES = _data.ENCODE_PHASES
THREADS = 2
VOCAB = 32_000


def model_path() -> Path:
    """The benchmark's SentencePiece model, trained on first use."""
    path = _data.CACHE_DIR / f"unigram-{VOCAB}-identity-en10MB.model"
    if path.is_file():
        return path
    import sentencepiece as spm

    corpus = _data.en_prefix_file(10)
    with open(corpus, "rb") as f:
        lines = f.read().split(b"\n")
    print(f"[unigram] training the {VOCAB:,}-piece sentencepiece model on {corpus} (once) ...", file=sys.stderr, flush=True)
    prefix = path.with_suffix(f".tmp{os.getpid()}")
    spm.SentencePieceTrainer.train(
        input=str(corpus),
        model_prefix=str(prefix),
        model_type="unigram",
        vocab_size=VOCAB,
        normalization_rule_name="identity",
        character_coverage=0.9995,
        input_sentence_size=len(lines) + 1,
        max_sentence_length=max(map(len, lines)) + 1,
        num_threads=THREADS,
        minloglevel=2,
    )
    os.replace(f"{prefix}.model", path)
    os.remove(f"{prefix}.vocab")
    return path


def load_encoders(libs, model: Path, single: bool) -> dict:
    """``{name: function}``: one document -> ids (single) or a list of
    documents -> list of ids (batch)."""
    funcs = {}
    for name in libs:
        if name == "polytok":
            tok = _data.import_polytok().UnigramTokenizer.from_sentencepiece(model)
            funcs[name] = tok.encode if single else tok.encode_batch
        else:
            import sentencepiece as spm

            sp = spm.SentencePieceProcessor(model_file=str(model))
            funcs[name] = sp.encode if single else (lambda docs, sp=sp: sp.encode(docs, num_threads=THREADS))
    return funcs


def run_phase(args) -> None:
    """One round in a fresh process (see the module docstring)."""
    _data.run_encode_phase(args, lambda single: load_encoders(args.libs, model_path(), single), "sentencepiece")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    _data.add_encode_options(ap, LIBS)
    args = ap.parse_args()
    _data.finish_encode_options(args, "sentencepiece")
    if args.phase:
        run_phase(args)
        return

    _data.data_dir()
    try:
        import sentencepiece  # noqa: F401
    except ImportError:
        _data.skip("sentencepiece is not installed")
    model = model_path()
    libs = [name for name in args.libs if name in LIBS]
    print(f"SentencePiece Unigram encoding benchmark — {_data.machine_note()}")
    print(f"versions: sentencepiece {metadata.version('sentencepiece')}, {_data.polytok_note()}")
    print(f"model: {model} ({VOCAB:,} pieces)")
    print(f"{args.runs} rounds per phase and input, each a fresh process; MB = 10^6 bytes\n")

    results = _data.encode_rounds(__file__, args, libs, "unigram")

    def cell(phase: str, which: str, name: str) -> str:
        rounds = results[phase, which]
        walls = [r["walls"][name] for r in rounds]
        mbps = rounds[0]["bytes"] / _data.MB / _data.median(walls)
        ratio = _data.speedup([r["walls"]["sentencepiece"] for r in rounds], walls)
        return f"{mbps:.1f} ({ratio:.2f}×)"

    rows = []
    for name in libs:
        row = [name] + [cell(phase, which, name) for phase in PHASES for which in INPUTS]
        if name == "sentencepiece":
            row.append("reference")
        else:
            bad = [results[k][0]["exact"][name] for k in results]
            ids, docs = sum(b["ids"] for b in bad), sum(b["docs"] for b in bad)
            row.append("yes" if not ids and not docs else f"no: {ids:,} ids in {docs:,} docs")
        rows.append(row)
    multi = "all of each" if args.multi_mb is None else f"first {args.multi_mb:g} MB of each"
    _data.print_table(
        f"Unigram encode ({VOCAB:,} pieces), MB/s (× sentencepiece) — en = first {args.en_mb:g} MB of "
        f"en_100MB.txt; multi = {multi} of {', '.join(_data.LANGS)}; median of {args.runs} rounds",
        ["library", "en, 1 thread", "multi, 1 thread", "en, batch 2 threads", "multi, batch 2 threads", "ids equal sentencepiece's"],
        rows,
        markdown=True,
    )


if __name__ == "__main__":
    main()
