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
            funcs[name] = tok.encode_ids if single else tok.encode_batch_ids
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

    _data.print_encode_results(results, libs, "sentencepiece", args, f"Unigram encode ({VOCAB:,} pieces)")


if __name__ == "__main__":
    main()
