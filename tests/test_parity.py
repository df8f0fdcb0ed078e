"""Fairness-aware training: language-balanced counts, and parity-aware
training (Foroutan et al., 2025; BPE and WordPiece; Unigram's pruning)
against classical
training on a skewed FLORES mix, evaluated on held-out parallel lines; the
training record; bad input."""

from __future__ import annotations

import pytest

import polytok

LANGUAGES = ("eng_Latn", "deu_Latn", "fin_Latn", "rus_Cyrl", "hin_Deva", "amh_Ethi", "tam_Taml", "zho_Hans")


def skewed_counts(flores, template: polytok.Counts) -> polytok.LanguageCounts:
    """English with eight times the text of each other language, as real
    corpora are skewed (lines 0..800 of English, 0..100 of the others)."""
    counts = polytok.LanguageCounts(template)
    for language in LANGUAGES:
        counts.add_texts(language, flores[language][: 800 if language == "eng_Latn" else 100])
    return counts


@pytest.fixture(scope="module")
def skewed(flores) -> polytok.LanguageCounts:
    return skewed_counts(flores, polytok.Counts.for_bpe())


def dev(flores) -> dict[str, list[str]]:
    return {language: flores[language][800:900] for language in LANGUAGES}


def held_out_costs(tokenizer, flores) -> dict[str, int]:
    return {language: sum(map(len, tokenizer.encode_batch_ids(flores[language][900:1000]))) for language in LANGUAGES}


def gini(costs) -> float:
    """The parity-aware BPE authors' Gini: sum |c_i - c_j| / (2 n^2 mean)."""
    values = list(costs)
    n, mean = len(values), sum(values) / len(values)
    return sum(abs(a - b) for a in values for b in values) / (2 * n * n * mean)


def assert_fairer(classical, parity, flores) -> tuple[dict[str, int], dict[str, int]]:
    """Each language's held-out cost under ``classical`` and ``parity``,
    whose Gini must be at least a fifth lower."""
    before, after = held_out_costs(classical, flores), held_out_costs(parity, flores)
    assert gini(after.values()) < 0.8 * gini(before.values()), (before, after)
    return before, after


def test_parity_aware_bpe_costs_languages_more_alike(skewed, flores):
    classical = polytok.BPETokenizer.train_from_counts(skewed, vocab_size=3000)
    parity = polytok.BPETokenizer.train_from_counts(skewed, vocab_size=3000, parity=dev(flores))
    before, after = assert_fairer(classical, parity, flores)
    assert after["amh_Ethi"] < before["amh_Ethi"] and after["eng_Latn"] > before["eng_Latn"]
    record = parity.training["parity"]
    assert record["target"] == "dev" and record["dev_lines"] == 100 and len(record["dev_sha256"]) == 64
    assert sum(record["merges_by_language"].values()) == 3000 - 256
    assert set(record["tokens_after"]) == set(LANGUAGES)
    assert all(record["tokens_after"][code] < record["tokens_before"][code] for code in LANGUAGES)
    assert parity.training["languages"]["eng_Latn"]["bytes"] == skewed["eng_Latn"].text_bytes
    assert parity.training["corpus"] == {"bytes": skewed.total().text_bytes, "distinct_pieces": len(skewed.total())}
    # The record survives saving; the same input makes the same file.
    again = polytok.BPETokenizer.train_from_counts(skewed, vocab_size=3000, parity=dev(flores))
    assert again.to_json() == parity.to_json()
    assert polytok.from_json(parity.to_json()).training["parity"] == record


def test_parity_aware_wordpiece(flores):
    counts = skewed_counts(flores, polytok.Counts.for_wordpiece())
    train = lambda **kw: polytok.WordPieceTokenizer.train_from_counts(counts, vocab_size=4000, **kw)  # noqa: E731
    classical, parity = train(), train(parity=dev(flores))
    assert_fairer(classical, parity, flores)
    record = parity.training["parity"]
    assert record["target"] == "dev" and record["merges_by_all_languages"] == 0
    assert parity.training["score"] == classical.training["score"]
    assert train(parity=dev(flores)).to_json() == parity.to_json()
    # Every merge by counts over all languages is classical training.
    hybrid_all = train(parity=dev(flores), parity_global_merges=10**6)
    assert hybrid_all.vocab_size == classical.vocab_size
    assert hybrid_all.encode_batch_ids(flores["deu_Latn"][:50]) == classical.encode_batch_ids(flores["deu_Latn"][:50])
    hybrid = train(parity=dev(flores), parity_global_merges=300, parity_window=(50, 2.0))
    assert hybrid.training["parity"]["merges_by_all_languages"] == 300
    assert hybrid.training["parity"]["window"] == [50, 2.0]
    with pytest.raises(ValueError, match="counts made for wordpiece"):
        polytok.WordPieceTokenizer.train_from_counts(polytok.LanguageCounts(polytok.Counts.for_bpe()), parity=dev(flores))
    with pytest.raises(ValueError, match="variants of parity-aware training: give parity too"):
        train(parity_global_merges=10)


def test_parity_aware_unigram(flores):
    counts = skewed_counts(flores, polytok.Counts.for_unigram())
    train = lambda **kw: polytok.UnigramTokenizer.train_from_counts(counts, vocab_size=3000, **kw)  # noqa: E731
    classical, parity = train(), train(parity=dev(flores))
    assert_fairer(classical, parity, flores)
    record = parity.training["parity"]
    assert record["target"] == "dev" and sum(record["rounds_by_language"].values()) > 0
    def dev_tokens(tokenizer):
        return {code: sum(map(len, tokenizer.encode_batch_ids(lines))) for code, lines in dev(flores).items()}

    # The costs training measured are the model's tokens: rare characters
    # in a row one <unk>, or with byte fallback each its UTF-8 bytes.
    assert record["tokens_after"] == dev_tokens(parity)
    fallback = train(parity=dev(flores), byte_fallback=True, character_coverage=0.99)
    assert fallback.training["parity"]["tokens_after"] == dev_tokens(fallback)
    # With ratios, the costs are of each language's training text.
    by_ratio = train(parity={code: 1.0 for code in LANGUAGES}, byte_fallback=True, character_coverage=0.99)
    trained_on = {code: flores[code][: 800 if code == "eng_Latn" else 100] for code in LANGUAGES}
    assert by_ratio.training["parity"]["tokens_after"] == {
        code: sum(map(len, by_ratio.encode_batch_ids(lines))) for code, lines in trained_on.items()
    }
    assert parity.training["add_dummy_prefix"] is True and parity.training["vocab_size"] == 3000
    assert train(parity=dev(flores)).to_json() == parity.to_json()
    balanced = train(balance=0.0)
    assert balanced.training["balance"] == 0.0 and "parity" not in balanced.training


def test_progress_names_the_costliest_language(skewed, flores):
    from polytok import _core

    notes = []
    counters = [skewed[code]._core for code in LANGUAGES]
    dev_counters = [polytok.Counts.for_bpe().add_texts(lines)._core for lines in dev(flores).values()]
    _core.Bpe.train_parity(
        counters, {"vocab_size": 600}, {"dev": dev_counters, "names": list(LANGUAGES)},
        progress=lambda stage, done, total, note=None: notes.append((stage, done, total, note)),
    )
    assert notes[-1][:3] == ("merging", 344, 344)
    assert [len(skewed[code]) for code in LANGUAGES] == [len(c.most_common()) for c in counters]  # read, not emptied
    assert notes[-1][3].startswith("costliest: ") and notes[-1][3].split()[1].rstrip(",") in LANGUAGES


@pytest.mark.parametrize(("make", "trainer", "stage"), [
    (polytok.Counts.for_wordpiece, polytok.WordPieceTokenizer, "merging"),
    (polytok.Counts.for_unigram, polytok.UnigramTokenizer, "EM rounds"),
])
def test_every_model_names_the_costliest_language_and_bad_input(flores, make, trainer, stage):
    from polytok import _core

    counts = skewed_counts(flores, make())
    notes = []
    core_class = {"merging": _core.WordPiece, "EM rounds": _core.Unigram}[stage]
    dev_counters = [make().add_texts(lines)._core for lines in dev(flores).values()]
    core_class.train_parity(
        [counts[code]._core for code in LANGUAGES], {"vocab_size": 3000}, {"dev": dev_counters, "names": list(LANGUAGES)},
        progress=lambda stage, done, total, note=None: notes.append((stage, note)),
    )
    noted = [note for s, note in notes if s == stage and note]
    assert noted and noted[-1].startswith("costliest: ") and noted[-1].split()[1].rstrip(",") in LANGUAGES
    lines = dev(flores)
    train = lambda **kw: trainer.train_from_counts(counts, vocab_size=3000, **kw)  # noqa: E731
    with pytest.raises(ValueError, match="parallel .*: deu_Latn has 99 lines where the others have 100"):
        train(parity={**lines, "deu_Latn": lines["deu_Latn"][:99]})
    with pytest.raises(ValueError, match="nothing for language\\(s\\) 'zho_Hans'"):
        train(parity={code: v for code, v in lines.items() if code != "zho_Hans"})
    with pytest.raises(ValueError, match="balance \\(alpha\\) must be a number in \\[0, 1\\]"):
        train(balance=1.5)
    empty = polytok.LanguageCounts(make()).add_texts("en", ["hello there"]).add_texts("de", [])
    with pytest.raises(ValueError, match="language 'de' has no text to learn from"):
        trainer.train_from_counts(empty, vocab_size=300, parity={"en": 1.0, "de": 1.0})
    with pytest.raises(ValueError, match="train from polytok.LanguageCounts"):
        trainer.train_from_counts(counts.total(), vocab_size=3000, parity=lines)


def test_variants_hybrid_window_and_ratios(skewed, flores):
    classical = polytok.BPETokenizer.train_from_counts(skewed, vocab_size=1500)
    # Every merge by counts over all languages is classical training.
    hybrid_all = polytok.BPETokenizer.train_from_counts(skewed, vocab_size=1500, parity=dev(flores), parity_global_merges=10**6)
    assert hybrid_all.encode_batch_ids(flores["deu_Latn"][:50]) == classical.encode_batch_ids(flores["deu_Latn"][:50])
    hybrid = polytok.BPETokenizer.train_from_counts(skewed, vocab_size=1500, parity=dev(flores), parity_global_merges=400)
    assert hybrid.training["parity"]["merges_by_all_languages"] == 400
    window = polytok.BPETokenizer.train_from_counts(skewed, vocab_size=1500, parity=dev(flores), parity_window=(100, 2.0))
    assert window.training["parity"]["window"] == [100, 2.0]
    ratios = polytok.BPETokenizer.train_from_counts(skewed, vocab_size=1500, parity={code: 1.0 for code in LANGUAGES})
    # Ratios equalize compression of each language's own training text
    # (not tokens per parallel line): every language shrinks by a similar
    # factor.
    record = ratios.training["parity"]
    assert record["target"] == "ratios" and record["ratios"]["eng_Latn"] == 1.0
    shrink = [record["tokens_before"][code] / record["tokens_after"][code] for code in LANGUAGES]
    assert max(shrink) / min(shrink) < 1.25, shrink


def test_balanced_counts(skewed):
    assert skewed.balanced(1).to_bytes() == skewed.total().to_bytes()
    factors = skewed.balance_factors(0)
    shares = {code: skewed[code].text_bytes * factors[code] for code in skewed}
    assert max(shares.values()) / min(shares.values()) == pytest.approx(1, rel=1e-9)
    assert min(factors.values()) == 1 and factors["eng_Latn"] == 1
    uniform = skewed.balanced(0)
    assert len(uniform) == len(skewed.total())  # nothing lost to rounding
    assert uniform.occurrences > skewed.total().occurrences
    half = polytok.BPETokenizer.train_from_counts(skewed, vocab_size=800, balance=0.5)
    assert half.training["balance"] == 0.5


def test_bad_input_is_named(skewed, flores, tmp_path):
    train = lambda **kw: polytok.BPETokenizer.train_from_counts(skewed, vocab_size=500, **kw)  # noqa: E731
    lines = dev(flores)
    with pytest.raises(ValueError, match="nothing for language\\(s\\) 'zho_Hans'"):
        train(parity={code: v for code, v in lines.items() if code != "zho_Hans"})
    with pytest.raises(ValueError, match="'xho_Latn', which the training text lacks"):
        train(parity={**lines, "xho_Latn": lines["eng_Latn"]})
    with pytest.raises(ValueError, match="parallel .*: deu_Latn has 99 lines where the others have 100"):
        train(parity={**lines, "deu_Latn": lines["deu_Latn"][:99]})
    with pytest.raises(ValueError, match="development set of 'fin_Latn' is empty"):
        train(parity={code: ([] if code == "fin_Latn" else v) for code, v in lines.items()})
    with pytest.raises(ValueError, match="target ratio of 'eng_Latn' must be positive"):
        train(parity={code: (0.0 if code == "eng_Latn" else 1.0) for code in LANGUAGES})
    for alpha in (-0.1, 1.5, "0.5"):
        with pytest.raises(ValueError, match="balance \\(alpha\\) must be a number in \\[0, 1\\]"):
            train(balance=alpha)
    with pytest.raises(ValueError, match="train from polytok.LanguageCounts"):
        polytok.BPETokenizer.train_from_counts(skewed.total(), vocab_size=500, parity=lines)
    with pytest.raises(FileNotFoundError, match="no such directory"):
        train(parity=tmp_path / "missing")
    empty = polytok.LanguageCounts(polytok.Counts.for_bpe()).add_texts("en", ["hello there"]).add_texts("de", [])
    with pytest.raises(ValueError, match="language 'de' has no text"):
        empty.balanced(0.3)
    with pytest.raises(ValueError, match="language 'de' has no text to learn from"):
        polytok.BPETokenizer.train_from_counts(empty, vocab_size=300, parity={"en": 1.0, "de": 1.0})
    one = polytok.LanguageCounts(polytok.Counts.for_bpe()).add_texts("en", ["hello there"])
    with pytest.raises(ValueError, match="needs two or more, not 1"):
        polytok.BPETokenizer.train_from_counts(one, vocab_size=300, parity={"en": 1.0})
    (tmp_path / "dev").mkdir()
    for code, v in lines.items():
        (tmp_path / "dev" / f"{code}.txt").write_text("\n".join(v) + "\n", encoding="utf-8")
    from_directory = train(parity=tmp_path / "dev")
    assert from_directory.training["parity"]["dev_sha256"] == train(parity=lines).training["parity"]["dev_sha256"]


def test_the_command_line_trains_by_language(flores, tmp_path):
    from click.testing import CliRunner

    from polytok.cli import main

    run = lambda *args: CliRunner().invoke(main, [str(a) for a in args])  # noqa: E731
    for name, lines in (("train", slice(0, 300)), ("dev", slice(300, 400))):
        (tmp_path / name).mkdir()
        for code in LANGUAGES[:4]:
            (tmp_path / name / f"{code}.txt").write_text("\n".join(flores[code][lines]) + "\n", encoding="utf-8")
    out = tmp_path / "tok.polytok"
    result = run("train", "--languages", tmp_path / "train", "--parity", f"dev={tmp_path / 'dev'}", "--parity-global-merges", "50",
                 "--parity-window", "40", "--balance", "0.5", "--vocab-size", "900", "-o", out)
    assert result.exit_code == 0 and "4 languages, balance 0.5, parity-aware (costliest now:" in result.output, result.output
    training = polytok.load(out).training
    assert training["balance"] == 0.5 and training["parity"]["global_merges"] == 50 and training["parity"]["window"] == [40, 2.0]
    ratios = ",".join(f"{code}:1" for code in LANGUAGES[:4])
    assert run("train", "--languages", tmp_path / "train", "--parity", f"ratios={ratios}", "--vocab-size", "600", "-o", out, "-q").exit_code == 0
    assert polytok.load(out).training["parity"]["target"] == "ratios"
    # Balanced WordPiece; counts per language trained from.
    assert run("train", "--model", "wordpiece", "--languages", tmp_path / "train", "--balance", "0", "--vocab-size", "800", "-o", out, "-q").exit_code == 0
    assert polytok.load(out).training["balance"] == 0
    assert run("train", "--model", "wordpiece", "--languages", tmp_path / "train", "--parity", f"dev={tmp_path / 'dev'}", "--vocab-size", "800", "-o", out, "-q").exit_code == 0
    assert polytok.load(out).training["parity"]["target"] == "dev"
    assert run("train", "--model", "unigram", "--languages", tmp_path / "train", "--parity", f"dev={tmp_path / 'dev'}", "--vocab-size", "800", "-o", out, "-q").exit_code == 0
    assert sum(polytok.load(out).training["parity"]["rounds_by_language"].values()) > 0
    assert run("train", "--model", "sentencepiece-bpe", "--languages", tmp_path / "train", "--balance", "0.5", "--vocab-size", "800", "-o", out, "-q").exit_code == 0
    assert run("count", "--by-language", tmp_path / "train", "-o", tmp_path / "counts", "-q").exit_code == 0
    assert run("train", "--from-counts", tmp_path / "counts", "--parity", f"dev={tmp_path / 'dev'}", "--vocab-size", "600", "-o", out, "-q").exit_code == 0
    refused = {
        ("train", *[tmp_path / "train" / f"{c}.txt" for c in LANGUAGES[:2]], "--balance", "0.5", "--vocab-size", "600", "-o", out): "weighs languages",
        ("train", "--languages", tmp_path / "train", "--model", "sentencepiece-bpe", "--parity", f"dev={tmp_path / 'dev'}", "--vocab-size", "600", "-o", out): "not yet for sentencepiece-bpe",
        ("train", "--languages", tmp_path / "train", "--model", "unigram", "--parity", f"dev={tmp_path / 'dev'}", "--parity-window", "10", "--vocab-size", "600", "-o", out): "not of unigram",
        ("train", "--languages", tmp_path / "train", "--parity", "nonsense", "--vocab-size", "600", "-o", out): "dev=DIR or ratios=",
        ("train", "--languages", tmp_path / "train", "--parity-window", "10", "--vocab-size", "600", "-o", out): "variants of --parity",
        ("train", "--languages", tmp_path / "train", "--balance", "2", "--vocab-size", "600", "-o", out): "2",
    }
    for args, message in refused.items():
        result = run(*args)
        assert result.exit_code != 0 and message in result.output, (args, result.output)
