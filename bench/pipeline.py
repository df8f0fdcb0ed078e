"""The toolkit layer's speed: the whole BERT pipeline returning Encodings
(offsets, padding, truncation) against Hugging Face tokenizers, and the
cost of one call from Python against tiktoken.

    python bench/pipeline.py            # full run (10 MB of English)
    python bench/pipeline.py --quick    # 2 MB, 3 rounds
    python bench/pipeline.py --pattern o200k   # part 2 under o200k's pattern

1. BERT pipeline. bert-base-uncased (``../shared/reference/``), both with
   [CLS]/[SEP], truncation to 512 and padding to the longest of each batch
   of ``--batch`` lines. tokenizers: ``encode_batch`` (its Encodings hold
   offsets, masks and word ids). polytok: ``encode_batch(lines,
   offsets=True)`` (the same, computed at once on all cores), and
   ``encode_batch_numpy`` (ids, masks and type ids as padded arrays, the
   input of a model). Offsets and ids are checked equal on a sample.
2. One call per line, cl100k, the lines of the same text: tiktoken
   ``encode_ordinary(line)``; polytok ``encode_ids(line)`` (a list),
   ``encode(line)`` (an Encoding) and ``encode(line).ids``; fastokens (its preset of the pattern,
   when installed) ``encode(line)`` (an Encoding, its only call on one text) and
   ``encode(line).ids`` (the Encoding and its list of ids); the ids
   checked equal. Ratios against tiktoken and against fastokens's
   ``encode(line).ids``. ``--pattern o200k``: cl100k's ranks under
   tiktoken's published o200k pattern for all three (as in ``encode.py``).

Each round runs every library once, side by side; figures are medians of
``--runs`` rounds, ratios medians of the per-round ratios.
"""

from __future__ import annotations

import argparse
import sys

import _data


def bert_pair(polytok, batch: int):
    import tokenizers

    model = _data.SHARED_DIR / "reference" / "bert-base-uncased"
    if not (model / "vocab.txt").exists():
        _data.skip(f"BERT's reference files are not in {model}")
    ours = polytok.WordPieceTokenizer.from_vocab(model / "vocab.txt")
    ours.enable_truncation(512)
    ours.enable_padding()
    theirs = tokenizers.Tokenizer.from_file(str(model / "tokenizer.json"))
    theirs.enable_truncation(512)
    theirs.enable_padding(pad_id=0, pad_token="[PAD]")
    return ours, theirs


def batches(lines: list[str], size: int) -> list[list[str]]:
    return [lines[i : i + size] for i in range(0, len(lines), size)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mb", type=float, default=10.0, help="MB of English text (default 10)")
    ap.add_argument("--runs", type=int, default=5, help="rounds (default 5)")
    ap.add_argument("--batch", type=int, default=1000, help="lines per batch of the BERT pipeline (default 1000)")
    ap.add_argument("--quick", action="store_true", help="2 MB, 3 rounds")
    ap.add_argument("--markdown", action="store_true", help="print the tables as markdown too")
    ap.add_argument("--pattern", choices=("cl100k", "o200k"), default="cl100k", help="pattern of the calls per line (ranks: cl100k's)")
    args = ap.parse_args()
    if args.quick:
        args.mb, args.runs = 2.0, 3
    polytok = _data.import_polytok()
    text = _data.en_text(args.mb)
    lines = [line for line in text.splitlines() if line.strip()]
    size = _data.utf8_len(lines) / 1e6
    print(f"{_data.polytok_note()}; {_data.machine_note()}; {_data.load_note()}")
    print(f"{len(lines):,} lines, {size:.1f} MB of en_100MB.txt; {args.runs} rounds\n")

    ours, theirs = bert_pair(polytok, args.batch)
    groups = batches(lines, args.batch)
    sample = lines[:: max(1, len(lines) // 300)]
    for mine, reference in zip(ours.encode_batch(sample, offsets=True), theirs.encode_batch(sample)):
        assert mine.ids == reference.ids and mine.offsets == [tuple(o) for o in reference.offsets]
    bert = {
        "tokenizers encode_batch": lambda: [theirs.encode_batch(g) for g in groups],
        "polytok encode_batch(offsets=True)": lambda: [ours.encode_batch(g, offsets=True) for g in groups],
        "polytok encode_batch_numpy": lambda: [ours.encode_batch_numpy(g) for g in groups],
    }

    enc, ranks = _data.tiktoken_cl100k(args.pattern)
    bpe = _data.polytok_cl100k(enc, ranks, args.pattern)
    for line in sample:
        assert bpe.encode_ids(line) == enc.encode_ordinary(line) == bpe.encode(line).ids
    calls = {
        "tiktoken encode_ordinary": lambda: [enc.encode_ordinary(line) for line in lines],
        "polytok encode_ids": lambda: [bpe.encode_ids(line) for line in lines],
        "polytok encode": lambda: [bpe.encode(line) for line in lines],
        "polytok encode(line).ids": lambda: [bpe.encode(line).ids for line in lines],
    }
    try:
        ft = _data.fastokens_cl100k(enc, ranks, args.pattern)
    except ImportError:
        print("(fastokens is not installed: pip install '.[bench]' to compare with it)\n")
    else:
        for line in sample:
            assert ft.encode(line).ids == enc.encode_ordinary(line)
        calls["fastokens encode(line).ids"] = lambda: [ft.encode(line).ids for line in lines]
        calls["fastokens encode"] = lambda: [ft.encode(line) for line in lines]

    times: dict[str, list[float]] = {name: [] for name in (*bert, *calls)}
    for round_ in range(args.runs):
        for group in (bert, calls):
            names = list(group)
            names = names[round_ % len(names) :] + names[: round_ % len(names)]
            for name in names:
                wall, _, _ = _data.timed(group[name])
                times[name].append(wall)
        print(f"round {round_ + 1}/{args.runs} done", file=sys.stderr, flush=True)

    for title, group, references in (
        (
            f"BERT pipeline, Encodings with offsets, truncation 512, padding per batch of {args.batch}",
            bert,
            ["tokenizers encode_batch"],
        ),
        (
            f"One call per line from Python, {args.pattern}" + (" (cl100k's ranks)" if args.pattern != "cl100k" else ""),
            calls,
            [name for name in ("tiktoken encode_ordinary", "fastokens encode(line).ids") if name in calls],
        ),
    ):
        rows = []
        for name in group:
            seconds = _data.median(times[name])
            ratios = [f"{_data.speedup(times[reference], times[name]):.2f}" for reference in references]
            rows.append((name, f"{size / seconds:.1f}", *ratios))
        headers = ("", "MB/s", *(f"× {reference.split()[0]}" for reference in references))
        _data.print_table(title, headers, rows, markdown=args.markdown)
        print()


if __name__ == "__main__":
    main()
