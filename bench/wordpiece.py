"""BERT (WordPiece) encoding throughput and exactness: polytok vs Hugging Face
tokenizers (the reference) and tokie, with bert-base-uncased's vocabulary.

    python bench/wordpiece.py            # full run (10 MB English, all of bench/multi/)
    python bench/wordpiece.py --quick    # small, fast run

The vocabulary and ``tokenizer.json`` are bert-base-uncased's, from
``../shared/reference/bert-base-uncased/``. Every library gets the
same normalization (BERT uncased) and returns plain ids: tokenizers and tokie
with ``add_special_tokens=False`` and truncation and padding off, polytok with
``allowed_special="all"`` (tokenizers finds ``[CLS]`` and the like in text).

Inputs, phases and rounds are those of ``encode.py``: the first ``--en-mb``
MB of ``en_100MB.txt`` and the multilingual mix; single thread on ~1 MB
documents (pinned to one CPU), and batches of paragraphs on 2 threads; each
of ``--runs`` rounds a fresh process that warms every library up on other
text and then times a first pass over the input, library after library in
an order rotated by round. Ratios are "× tokenizers", medians of the
per-round ratios. Exactness: ids equal to tokenizers', document by document.
"""

from __future__ import annotations

import argparse
import sys
from importlib import metadata
from pathlib import Path

import _data

LIBS = ("tokenizers", "polytok", "tokie")


def bert_files() -> tuple[Path, Path]:
    """bert-base-uncased's vocab.txt and tokenizer.json, from ../shared/reference/."""
    model = _data.SHARED_DIR / "reference" / "bert-base-uncased"
    if not (model / "vocab.txt").exists():
        _data.skip(f"BERT's reference files are not in {model}")
    return model / "vocab.txt", model / "tokenizer.json"


def load_encoders(libs, single: bool) -> dict:
    """``{name: function}``: one document -> ids (single) or a list of
    documents -> list of ids (batch)."""
    vocab, tokenizer_json = bert_files()
    funcs = {}
    for name in libs:
        if name == "polytok":
            tok = _data.import_polytok().WordPieceTokenizer.from_vocab(vocab)
            if single:
                funcs[name] = lambda doc, tok=tok: tok.encode_ids(doc, add_special_tokens=False, allowed_special="all")
            else:
                funcs[name] = lambda docs, tok=tok: tok.encode_batch_ids(docs, add_special_tokens=False, allowed_special="all")
            continue
        if name == "tokie":
            import tokie

            tk = tokie.Tokenizer.from_json(str(tokenizer_json))
        else:
            from tokenizers import Tokenizer

            tk = Tokenizer.from_file(str(tokenizer_json))
            tk.no_truncation()
            tk.no_padding()
        if single:
            funcs[name] = lambda doc, tk=tk: tk.encode(doc, add_special_tokens=False).ids
        else:
            funcs[name] = lambda docs, tk=tk: [e.ids for e in tk.encode_batch(docs, add_special_tokens=False)]
    return funcs


def run_phase(args) -> None:
    """One round in a fresh process (see the module docstring)."""
    _data.run_encode_phase(args, lambda single: load_encoders(args.libs, single), "tokenizers")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    _data.add_encode_options(ap, LIBS)
    args = ap.parse_args()
    _data.finish_encode_options(args, "tokenizers")
    if args.phase:
        run_phase(args)
        return

    _data.data_dir()
    bert_files()
    libs = []
    for name in args.libs:
        try:
            _data.import_polytok() if name == "polytok" else __import__(name)
            libs.append(name)
        except ImportError as e:
            print(f"[wordpiece] {name} is not installed ({e}); left out", file=sys.stderr)
    versions = ", ".join(f"{n} {metadata.version(n)}" for n in libs if n != "polytok")
    print(f"BERT WordPiece encoding benchmark — {_data.machine_note()}")
    print(f"versions: {versions}, {_data.polytok_note()}")
    print(f"{args.runs} rounds per phase and input, each a fresh process; MB = 10^6 bytes\n")

    results = _data.encode_rounds(__file__, args, libs, "wordpiece")

    _data.print_encode_results(results, libs, "tokenizers", args, "BERT uncased encode, first pass")
    long_words(args.runs)


def long_words(runs: int) -> None:
    """One word of pseudo-random letters, with the word-length limit lifted:
    polytok's matcher reads each byte once (O(n)); tokenizers' loop tries
    every shorter substring after each token (O(n²) lookups of O(n) bytes)."""
    import random
    import statistics
    import time

    from tokenizers import Tokenizer

    vocab, tokenizer_json = bert_files()
    tok = _data.import_polytok().WordPieceTokenizer.from_vocab(vocab, max_input_chars_per_word=10**9)
    reference = Tokenizer.from_file(str(tokenizer_json))
    reference.no_truncation()
    reference.no_padding()
    reference.model.max_input_chars_per_word = 10**9
    rng = random.Random(0)
    letters = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(2_000_000))

    def best(f, word: str) -> float:
        times = []
        for _ in range(runs):
            t = time.perf_counter()
            f(word)
            times.append(time.perf_counter() - t)
        return statistics.median(times)

    rows = []
    for name, f, sizes in (
        ("polytok", lambda w: tok.encode_ids(w, add_special_tokens=False), (1_000_000, 2_000_000)),
        ("tokenizers", lambda w: reference.encode(w, add_special_tokens=False).ids, (2_000, 4_000)),
    ):
        small, large = (best(f, letters[:n]) for n in sizes)
        if name == "polytok":
            assert tok.encode_ids(letters[:4000], add_special_tokens=False) == reference.encode(letters[:4000], add_special_tokens=False).ids
        rows.append([name, f"{sizes[0]:,}", f"{small:.4f}", f"{sizes[1]:,}", f"{large:.4f}", f"{large / small:.2f}"])
    _data.print_table(
        f"One long word of random letters (word-length limit lifted), seconds, median of {runs}: "
        "time(2n) / time(n) is 2 for linear time, 4 for quadratic",
        ["library", "n chars", "time(n) s", "2n chars", "time(2n) s", "ratio"],
        rows,
        markdown=True,
    )


if __name__ == "__main__":
    main()
