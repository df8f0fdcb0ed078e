"""Fairness-aware training against classical training, at equal vocabulary
size, on a skewed mix like real corpora, evaluated on held-out parallel
text.

    python bench/fairness.py                    # BPE, WordPiece, Unigram at 16,000 and 32,000 (~6 min)
    python bench/fairness.py --models bpe --repeat 1
    python bench/fairness.py --quick            # 8,000 only, 20 MB of English not all of it
    python bench/fairness.py --html out/        # also one report page per size, every run side by side

Training text: the English benchmark corpus (``en_100MB.txt``) plus FLORES-200
lines 1-600 of each of 32 languages (English included); development set
(parity-aware training's measure): lines 601-800, left out of both runs'
training; evaluation: lines 801-1004, seen by neither. Counting is done
once per model (``polytok.LanguageCounts``); each model is trained from
the counts, and timed, classically and parity-aware (the base variant, and
for BPE and WordPiece the hybrid with half the merges global).

Reported per model and size: the Gini coefficient of per-language token
cost (tokens per line, each language weighed alike: sum_i sum_j |c_i - c_j|
/ (2 n^2 mean), as Foroutan et al. define it), the total tokens over all
evaluated languages, the costliest language's premium over English, and the
training time. Goals (issue 15): BPE's Gini down by at least 60%, total
tokens up by at most 2%; WordPiece's and Unigram's Gini down by at least
40%, total tokens up by at most 3%; training at most 1.5x classical.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import _data

#: 32 FLORES-200 languages over 17 scripts: high- and low-resource, Latin
#: and not.
LANGUAGES = (
    "eng_Latn", "deu_Latn", "fra_Latn", "spa_Latn", "por_Latn", "ita_Latn", "nld_Latn", "pol_Latn",
    "tur_Latn", "vie_Latn", "ind_Latn", "swh_Latn", "yor_Latn", "fin_Latn", "hun_Latn", "zul_Latn",
    "rus_Cyrl", "ukr_Cyrl", "ell_Grek", "heb_Hebr", "arb_Arab", "pes_Arab", "hin_Deva", "ben_Beng",
    "tam_Taml", "tel_Telu", "tha_Thai", "kat_Geor", "amh_Ethi", "zho_Hans", "jpn_Jpan", "kor_Hang",
)
TRAIN, DEV, EVAL = slice(0, 600), slice(600, 800), slice(800, 1004)


def flores() -> dict[str, list[str]]:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    from conftest import FLORES, flores_languages

    if not FLORES.exists():
        _data.skip(f"FLORES-200 not found at {FLORES}")
    languages = flores_languages()
    return {code: languages[code] for code in LANGUAGES}


def gini(costs) -> float:
    values = list(costs)
    n, mean = len(values), sum(values) / len(values)
    return sum(abs(a - b) for a in values for b in values) / (2 * n * n * mean)


def evaluate(tokenizer, lines: dict[str, list[str]]) -> dict[str, float]:
    """Tokens per held-out line, by language."""
    return {code: sum(map(len, tokenizer.encode_batch_ids(lines[code][EVAL]))) / len(lines[code][EVAL]) for code in LANGUAGES}


#: Each model: its counts (a ``Counts`` constructor and its arguments), its
#: tokenizer class, its training settings, and whether it has the hybrid
#: variant (global merges first). BPE counts every pair (min_frequency 1):
#: at 32,000 the languages with 600 lines otherwise run out of pairs seen
#: twice. WordPiece keeps its default of 2: its score ranks a pair seen once,
#: of symbols seen once, highest, and such merges help no other text.
#: Unigram falls back to bytes (as the SentencePiece models of Llama and
#: Gemma): without, the characters past its coverage of a corpus that is
#: mostly English (Chinese, Japanese, Korean ones) are one cheap ``<unk>``.
#: WordPiece is uncased by default, as BERT (``--cased``: as multilingual
#: BERT; lowercasing strips accents, and with them the vowel signs of
#: Indic scripts).
MODELS = {
    "bpe": (("for_bpe", {}), "BPETokenizer", {"min_frequency": 1}, True),
    "wordpiece": (("for_wordpiece", {}), "WordPieceTokenizer", {"min_frequency": 2}, True),
    "unigram": (("for_unigram", {}), "UnigramTokenizer", {"byte_fallback": True}, False),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="16000,32000", help="vocabulary sizes (default 16000,32000)")
    ap.add_argument("--quick", action="store_true", help="8,000 only, on 20 MB of English")
    ap.add_argument("--html", type=Path, default=None, help="write each size's report (every model, classical and parity-aware, side by side) here as HTML")
    ap.add_argument("--models", default=",".join(MODELS), help=f"models to compare (default {','.join(MODELS)})")
    ap.add_argument("--repeat", type=int, default=3, help="training runs per setting, the median timed (default 3)")
    ap.add_argument("--min-frequency", type=int, default=None, help="min_frequency of BPE and WordPiece runs (default: BPE 1, WordPiece 2)")
    ap.add_argument("--cased", action="store_true", help="WordPiece cased (default: uncased, as BERT)")
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args()
    polytok = _data.import_polytok()
    _data.data_dir()
    print(_data.machine_note())
    lines = flores()
    english = _data.en_text(20 if args.quick else None).splitlines()
    models = args.models.split(",")
    unknown = sorted(set(models) - set(MODELS))
    if unknown:
        ap.error(f"unknown model(s) {', '.join(unknown)}; known: {', '.join(MODELS)}")
    dev = {code: lines[code][DEV] for code in LANGUAGES}
    sizes = [8000] if args.quick else [int(s) for s in args.sizes.split(",")]
    # Every model's runs at each size, for one page per size.
    pages: dict[int, list] = {size: [] for size in sizes}
    for model in models:
        (make_counts, counting), class_name, settings, hybrid = MODELS[model]
        if args.min_frequency is not None and "min_frequency" in settings:
            settings = {**settings, "min_frequency": args.min_frequency}
        if model == "wordpiece" and args.cased:
            counting = {"lowercase": False}
        t0 = time.perf_counter()
        counts = polytok.LanguageCounts(getattr(polytok.Counts, make_counts)(**counting))
        for code in LANGUAGES:
            counts.add_texts(code, lines[code][TRAIN] + (english if code == "eng_Latn" else []))
        print(f"{model}: counted {len(LANGUAGES)} languages, {counts.total().text_bytes / 1e6:.0f} MB "
              f"({counts['eng_Latn'].text_bytes / counts.total().text_bytes:.1%} English) in {time.perf_counter() - t0:.1f} s")
        trainer = getattr(polytok, class_name)
        rows = []
        for size in sizes:
            runs = {"classical": {}, "parity-aware": {"parity": dev}}
            if hybrid:
                runs["hybrid (half global)"] = {"parity": dev, "parity_global_merges": size // 2}
            results = {}
            for name, options in runs.items():
                walls = []
                for _ in range(args.repeat):
                    t0 = time.perf_counter()
                    tokenizer = trainer.train_from_counts(counts, vocab_size=size, **settings, **options)
                    walls.append(time.perf_counter() - t0)
                costs = evaluate(tokenizer, lines)
                results[name] = (tokenizer, costs, _data.median(walls))
            base_costs, base_wall = results["classical"][1], results["classical"][2]
            base_gini, base_total = gini(base_costs.values()), sum(base_costs.values())
            for name, (tokenizer, costs, wall) in results.items():
                worst = max(costs, key=costs.get)
                g, total = gini(costs.values()), sum(costs.values())
                rows.append([
                    f"{size:,}", name, f"{g:.4f}", f"{(g - base_gini) / base_gini:+.0%}",
                    f"{total * len(lines['eng_Latn'][EVAL]):,.0f}", f"{(total - base_total) / base_total:+.1%}",
                    f"{worst} {costs[worst] / costs['eng_Latn']:.2f}", f"{wall:.2f}", f"{wall / base_wall:.2f}",
                ])
            pages[size] += [(f"{model} {name}", tokenizer) for name, (tokenizer, _, _) in results.items()]
        _data.print_table(
            f"{model}, classical against parity-aware"
            + "".join(f", {name} {value}" for name, value in {**counting, **settings}.items())
            + " (FLORES-200 lines 801-1004; development set 601-800)",
            ["vocab", "training", "Gini", "vs classical", "total tokens", "vs classical",
             "costliest (premium over eng)", f"train s (median of {args.repeat})", "time vs classical"],
            rows, args.markdown,
        )
    if args.html:
        for size, runs in pages.items():
            write_report(polytok, args.html / f"fairness-{size}.html", runs, lines)


def write_report(polytok, path: Path, runs: list, lines: dict[str, list[str]]) -> None:
    """The report of ``runs`` (name, tokenizer) on the held-out lines, side by side."""
    path.parent.mkdir(parents=True, exist_ok=True)
    corpus_dir = _data.CACHE_DIR / "fairness-eval"
    corpus_dir.mkdir(exist_ok=True)
    for code in LANGUAGES:
        (corpus_dir / f"{code}.txt").write_text("\n".join(lines[code][EVAL]) + "\n", encoding="utf-8")
    report = polytok.report(corpus_dir, runs, pivot="eng_Latn")
    report.save(path)

if __name__ == "__main__":
    main()
