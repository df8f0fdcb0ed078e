"""Training: polytok vs Hugging Face tokenizers vs SentencePiece (BPE),
polytok vs tokenizers (WordPiece), and polytok vs SentencePiece (Unigram).

    python bench/train.py                 # BPE, full run: 100 MB, 3 runs per library
    python bench/train.py --model wordpiece
    python bench/train.py --model unigram               # 10 MB, 8,000 pieces
    python bench/train.py --model unigram --vocab 32000
    python bench/train.py --mb 20 --runs 1
    python bench/train.py --quick         # 2 MB, 2 runs

Trains a 32,000-token vocabulary on the first ``--mb`` MB of
``en_100MB.txt`` (cut at a line end; written once into the data cache
directory):

* polytok: ``BPETokenizer.train([file], vocab_size=32000, pattern="gpt2",
  min_frequency=2)``;
* tokenizers: ``models.BPE()``, ``pre_tokenizers.ByteLevel(add_prefix_space=False)``
  (the GPT-2 pattern), ``BpeTrainer(vocab_size=32000, min_frequency=2,
  show_progress=False, initial_alphabet=ByteLevel.alphabet())``;
* sentencepiece: ``model_type="bpe"``, ``vocab_size=32000``,
  ``num_threads=2``, ``input_sentence_size`` larger than the corpus's line
  count and ``max_sentence_length`` longer than its longest line (every line
  is used), no shuffling; ``--sp-extremely-large`` adds
  ``train_extremely_large_corpus=True`` (not needed at 100 MB).

With ``--model wordpiece``, a 30,000-token vocabulary (``--vocab``), both
with BERT's uncased normalization and pre-tokenizer and ``min_frequency=2``:

* polytok: ``WordPieceTokenizer.train([file], vocab_size=30000)``, which
  merges by likelihood score;
* tokenizers: ``models.WordPiece(unk_token="[UNK]")``, ``BertNormalizer()``,
  ``BertPreTokenizer()``, ``WordPieceTrainer(vocab_size=30000,
  min_frequency=2, special_tokens=[PAD, UNK, CLS, SEP, MASK])``, which merges
  by pair frequency (BPE with ``##``).

With ``--model unigram``, 8,000 pieces (``--vocab``) on the first 10 MB
(``--mb``), both with identity normalization, SentencePiece's whitespace
handling, ``character_coverage=0.9995`` and the pieces ``<unk> <s> </s>
<pad>``:

* polytok: ``UnigramTokenizer.train([file], vocab_size=8000)``;
* sentencepiece: ``model_type="unigram"``, ``normalization_rule_name="identity"``,
  ``pad_id=3``, ``num_threads=2``, every line used (as for BPE).

Quality: both models, as ``.model`` files, are loaded into sentencepiece
and encode every line of the training text; the table gives the total
log-likelihood of those segmentations (the sum of their pieces' scores) and
the tokens per byte, with polytok's ratio to sentencepiece's.

Every run is a fresh child process (``RAYON_NUM_THREADS=2``), so its peak
RSS (``ru_maxrss`` of that child, read with ``wait4``) covers one training
only. "train s" is the training call timed inside the child; "wall s" is
the whole child, interpreter start-up and imports included. Runs are
interleaved round-robin between libraries; figures are medians of ``--runs``.
The learned vocabularies of polytok and tokenizers (same pattern, same
byte-level alphabet) are compared as sets of byte strings.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import _data

LIBS = ("polytok", "tokenizers", "sentencepiece")
THREADS = 2


def line_stats(path: Path) -> tuple[int, int]:
    """(number of lines, length in bytes of the longest)."""
    n = longest = 0
    with open(path, "rb") as f:
        for line in f:
            n += 1
            longest = max(longest, len(line))
    return n, longest


# ------------------------------------------------------------------ children


def train_polytok(path: Path, vocab: int, out: Path, extremely_large: bool = False) -> list[bytes]:
    polytok = _data.import_polytok()
    tok = polytok.BPETokenizer.train([str(path)], vocab_size=vocab, pattern="gpt2", min_frequency=2, progress=False)
    return [tok.token_bytes(i) for i in range(tok.n_ordinary)]


def train_tokenizers(path: Path, vocab: int, out: Path, extremely_large: bool = False) -> list[bytes]:
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tk = Tokenizer(models.BPE())
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab,
        min_frequency=2,
        show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tk.train([str(path)], trainer)
    u2b = {c: b for b, c in _data.bytes_to_unicode().items()}
    return [bytes(u2b[c] for c in token) for token in tk.get_vocab()]


def sentencepiece_trainer(path: Path, vocab: int, model: Path, extremely_large: bool, **options) -> list[bytes]:
    """Trains sentencepiece on every line of ``path`` into ``model``.model;
    its pieces."""
    import sentencepiece as spm

    lines, longest = line_stats(path)
    spm.SentencePieceTrainer.train(
        input=str(path),
        model_prefix=str(model),
        vocab_size=vocab,
        num_threads=THREADS,
        input_sentence_size=max(lines * 2, 1_000_000),  # larger than the corpus: every line is used
        max_sentence_length=max(longest + 1, 4192),  # and none is skipped as too long
        shuffle_input_sentence=False,
        train_extremely_large_corpus=extremely_large,
        minloglevel=1,
        **options,
    )
    sp = spm.SentencePieceProcessor(model_file=f"{model}.model")
    return [sp.id_to_piece(i).encode("utf-8") for i in range(sp.get_piece_size())]


def train_sentencepiece(path: Path, vocab: int, out: Path, extremely_large: bool = False) -> list[bytes]:
    return sentencepiece_trainer(path, vocab, out / "sp", extremely_large, model_type="bpe")


BERT_SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def train_polytok_wordpiece(path: Path, vocab: int, out: Path, extremely_large: bool = False) -> list[bytes]:
    polytok = _data.import_polytok()
    tok = polytok.WordPieceTokenizer.train([str(path)], vocab_size=vocab, min_frequency=2, progress=False)
    return [tok.id_to_token(i).encode("utf-8") for i in range(tok.vocab_size)]


def train_tokenizers_wordpiece(path: Path, vocab: int, out: Path, extremely_large: bool = False) -> list[bytes]:
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers

    tk = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tk.normalizer = normalizers.BertNormalizer()
    tk.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    trainer = trainers.WordPieceTrainer(
        vocab_size=vocab, min_frequency=2, show_progress=False, special_tokens=BERT_SPECIALS
    )
    tk.train([str(path)], trainer)
    return [token.encode("utf-8") for token in tk.get_vocab()]


def train_polytok_unigram(path: Path, vocab: int, out: Path, extremely_large: bool = False) -> list[bytes]:
    polytok = _data.import_polytok()
    tok = polytok.UnigramTokenizer.train([str(path)], vocab_size=vocab, progress=False)
    tok.save_sentencepiece(out / "model.model")
    return [tok.id_to_token(i).encode("utf-8") for i in range(tok.vocab_size)]


def train_sentencepiece_unigram(path: Path, vocab: int, out: Path, extremely_large: bool = False) -> list[bytes]:
    return sentencepiece_trainer(
        path, vocab, out / "model", extremely_large,
        model_type="unigram", normalization_rule_name="identity", character_coverage=0.9995, pad_id=3,
    )


TRAINERS = {
    "bpe": {"polytok": train_polytok, "tokenizers": train_tokenizers, "sentencepiece": train_sentencepiece},
    "wordpiece": {"polytok": train_polytok_wordpiece, "tokenizers": train_tokenizers_wordpiece},
    "unigram": {"polytok": train_polytok_unigram, "sentencepiece": train_sentencepiece_unigram},
}
DEFAULT_VOCAB = {"bpe": 32000, "wordpiece": 30000, "unigram": 8000}
DEFAULT_MB = {"bpe": 100.0, "wordpiece": 100.0, "unigram": 10.0}
DESCRIPTION = {
    "bpe": "gpt2 pattern / byte level",
    "wordpiece": "BERT uncased normalization and words",
    "unigram": "identity normalization, character coverage 0.9995",
}


def unigram_quality(model: Path, path: Path) -> tuple[float, int, int]:
    """(log-likelihood, tokens, bytes) of a .model's best segmentations of
    every line of ``path``, encoded by sentencepiece."""
    import sentencepiece as spm

    sp = spm.SentencePieceProcessor(model_file=str(model))
    scores = [sp.get_score(i) for i in range(sp.get_piece_size())]
    lines = path.read_text(encoding="utf-8").splitlines()
    log_likelihood, tokens = 0.0, 0
    for ids in sp.encode(lines, num_threads=THREADS):
        log_likelihood += sum(scores[i] for i in ids)
        tokens += len(ids)
    return log_likelihood, tokens, sum(len(line.encode("utf-8")) for line in lines)


def run_child_mode(args) -> None:
    path = Path(args.file)
    out = Path(args.out)
    rss0 = _data.self_rss_mb()
    t0 = time.perf_counter()
    vocab = TRAINERS[args.model][args.child](path, args.vocab, out, args.sp_extremely_large)
    elapsed = time.perf_counter() - t0
    (out / f"{args.child}.vocab").write_text("\n".join(v.hex() for v in vocab))
    note = _data.polytok_note() if args.child == "polytok" else None
    _data.emit({"train_s": elapsed, "rss_before_mb": rss0, "vocab": len(vocab), "polytok": note})


# -------------------------------------------------------------------- parent


def versions(libs) -> str:
    from importlib import metadata

    out = []
    for name in libs:
        if name == "polytok":
            out.append(_data.polytok_note())
        else:
            try:
                out.append(f"{name} {metadata.version(name)}")
            except metadata.PackageNotFoundError:
                out.append(f"{name} (not installed)")
    return ", ".join(out)


def print_unigram_quality(quality: dict[str, tuple[float, int, int]], vocabs: dict[str, set[bytes]]) -> None:
    """Log-likelihood and tokens per byte of each model on the training text."""
    reference = quality.get("sentencepiece")
    rows = []
    for name, (log_likelihood, tokens, size) in quality.items():
        rows.append(
            [
                name,
                f"{log_likelihood:,.0f}",
                f"{log_likelihood / reference[0]:.4f}" if reference else "—",
                f"{tokens / size:.4f}",
                f"{tokens / reference[1]:.4f}" if reference else "—",
            ]
        )
    headers = ["library", "log-likelihood", "÷ sentencepiece", "tokens/byte", "÷ sentencepiece"]
    _data.print_table("Quality on the training text (segmented by sentencepiece)", headers, rows)
    if "polytok" in vocabs and "sentencepiece" in vocabs:
        a, b = vocabs["polytok"], vocabs["sentencepiece"]
        print(f"pieces in both vocabularies: {len(a & b):,} of {len(b):,}\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="2 MB, 2 runs")
    ap.add_argument("--mb", type=float, help="MB of en_100MB.txt to train on (default 100, Unigram 10; quick 2)")
    ap.add_argument("--runs", type=int, help="runs per library (default 3, quick 2)")
    ap.add_argument("--model", choices=TRAINERS, default="bpe", help="bpe (default), wordpiece or unigram")
    ap.add_argument("--vocab", type=int, help="vocabulary size (default 32000 for BPE, 30000 for WordPiece, 8000 for Unigram)")
    ap.add_argument("--timeout", type=float, default=3600.0, help="time limit per training run, s (default 3600)")
    ap.add_argument(
        "--sp-extremely-large",
        action="store_true",
        help="pass train_extremely_large_corpus=True to SentencePiece (not needed for 100 MB)",
    )
    ap.add_argument("--libs", help=f"comma-separated subset of {','.join(LIBS)} (default: all the model has)")
    ap.add_argument("--child", choices=LIBS, help=argparse.SUPPRESS)
    ap.add_argument("--file", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    args = ap.parse_args()
    args.mb = args.mb or (2.0 if args.quick else DEFAULT_MB[args.model])
    args.runs = args.runs or (2 if args.quick else 3)
    args.vocab = args.vocab or DEFAULT_VOCAB[args.model]

    if args.child:
        run_child_mode(args)
        return

    libs = [x.strip() for x in (args.libs or ",".join(TRAINERS[args.model])).split(",") if x.strip()]
    for name in libs:
        if name not in TRAINERS[args.model]:
            ap.error(f"no {args.model} trainer for library {name!r}")
    path = _data.en_prefix_file(args.mb)
    size = path.stat().st_size
    lines, longest = line_stats(path)
    print(f"{args.model} training benchmark — {_data.machine_note()}; {versions(libs)}")
    print(
        f"corpus: {path} ({size / _data.MB:.1f} MB, {lines:,} lines, longest {longest:,} bytes); vocab {args.vocab:,}; "
        f"{DESCRIPTION[args.model]}; {args.runs} run(s) per library, interleaved, each in a fresh process; "
        f"RAYON_NUM_THREADS={THREADS}; {_data.load_note()}\n"
    )

    runs: dict[str, list[dict]] = {name: [] for name in libs}
    vocabs: dict[str, set[bytes]] = {}
    quality: dict[str, tuple[float, int, int]] = {}
    failed: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="polytok-train-bench-") as tmp:
        for r in range(args.runs):
            for name in libs:
                if name in failed:
                    continue
                out = Path(tmp) / f"{name}-{r}"
                out.mkdir()
                print(f"[train] run {r + 1}/{args.runs}: {name} ...", file=sys.stderr, flush=True)
                res = _data.run_child(
                    [
                        sys.executable,
                        __file__,
                        f"--child={name}",
                        f"--file={path}",
                        f"--out={out}",
                        f"--vocab={args.vocab}",
                        f"--model={args.model}",
                    ]
                    + (["--sp-extremely-large"] if args.sp_extremely_large else []),
                    timeout=args.timeout,
                    env={"RAYON_NUM_THREADS": str(THREADS), "TOKENIZERS_PARALLELISM": "true"},
                )
                if res.timed_out or res.returncode != 0:
                    failed[name] = f"> {args.timeout:g} s" if res.timed_out else f"exit {res.returncode}"
                    print(f"[train] {name} failed ({failed[name]}):\n{res.stderr[-3000:]}", file=sys.stderr)
                    continue
                data = res.json()
                data.update(wall_s=res.wall, rss_mb=res.max_rss_mb)
                runs[name].append(data)
                print(
                    f"[train]   train {data['train_s']:.1f} s, wall {res.wall:.1f} s, peak RSS {res.max_rss_mb:,.0f} MB; {_data.load_note()}",
                    file=sys.stderr,
                    flush=True,
                )
                if r == 0:
                    text = (out / f"{name}.vocab").read_text()
                    vocabs[name] = {bytes.fromhex(h) for h in text.split("\n") if h}
                    if args.model == "unigram":
                        quality[name] = unigram_quality(out / "model.model", path)

    builds = {d["polytok"] for d in runs.get("polytok", [])}
    if len(builds) > 1:
        print(f"WARNING: polytok was reinstalled during the run: {sorted(builds)}\n")

    def med(name: str, key: str) -> float | None:
        return _data.median([d[key] for d in runs[name]]) if runs[name] else None

    rows = []
    p_trains = [d["train_s"] for d in runs.get("polytok", [])]  # round by round: ratios of the same round
    p_rss = med("polytok", "rss_mb") if runs.get("polytok") else None
    for name in libs:
        if not runs[name]:
            rows.append([name, failed.get(name, "—"), None, None, None, None, None, None, None])
            continue
        train, wall, rss = med(name, "train_s"), med(name, "wall_s"), med(name, "rss_mb")
        rows.append(
            [
                name,
                f"{train:.2f}",
                f"{wall:.2f}",
                f"{rss:,.0f}",
                f"{size / _data.MB / train:.2f}",
                f"{_data.speedup([d['train_s'] for d in runs[name]], p_trains):.2f}×" if p_trains and name != "polytok" else "—",
                f"{p_rss / rss:.2f}" if p_rss and name != "polytok" else "—",
                runs[name][0]["vocab"],
                f"{len(runs[name])}" + (f" ({failed[name]})" if name in failed else ""),
            ]
        )
    headers = ["library", "train s", "wall s", "peak RSS MB", "MB/s", "polytok × faster", "polytok RSS / theirs", "vocab", "runs"]
    title = f"Training {args.vocab:,} tokens on {size / _data.MB:.1f} MB (median of {args.runs})"
    print(f"at the end: {_data.load_note()}\n")
    _data.print_table(title, headers, rows)

    if quality:
        print_unigram_quality(quality, vocabs)
    if "polytok" in vocabs and "tokenizers" in vocabs:
        a, b = vocabs["polytok"], vocabs["tokenizers"]
        print(
            f"vocabulary overlap polytok / tokenizers: {len(a & b):,} tokens in both; "
            f"{len(a - b):,} only in polytok, {len(b - a):,} only in tokenizers "
            f"(sizes {len(a):,} / {len(b):,})\n"
        )
    print("Markdown:\n")
    _data.print_table(title, headers, rows, markdown=True)


if __name__ == "__main__":
    main()
