"""Unigram (Viterbi) encoding of SentencePiece models gives exactly
SentencePiece's ids: models trained here with the `sentencepiece` package
(identity normalization, so that the model alone is compared), with and
without byte fallback, on every FLORES-200 line and on adversarial text."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import polytok
from conftest import CORPORA, train_sentencepiece

spm = pytest.importorskip("sentencepiece")


@pytest.fixture(scope="module", params=["plain", "byte_fallback"])
def models(request, tmp_path_factory):
    """(polytok, sentencepiece) for one SentencePiece model."""
    options = {"byte_fallback": True, "character_coverage": 0.98} if request.param == "byte_fallback" else {}
    path = train_sentencepiece(tmp_path_factory.mktemp("spm"), request.param, normalization_rule_name="identity", **options)
    return polytok.UnigramTokenizer.from_sentencepiece(path), spm.SentencePieceProcessor(model_file=path)


def test_flores_every_language(flores, models):
    ours, reference = models
    mismatches = []
    for language, lines in sorted(flores.items()):
        theirs = reference.encode(lines)
        bad = [i for i, (a, b) in enumerate(zip(ours.encode_batch(lines), theirs)) if a != b]
        if bad:
            mismatches.append((language, len(bad), lines[bad[0]]))
    assert not mismatches, mismatches[:5]


known = st.characters(exclude_categories=["Cs"])
adversarial = st.lists(
    st.one_of(
        st.sampled_from([" ", "  ", "   ", "\t", "\n", "▁", "800000", "ꙮꙮ", "😀", "中文", "e\u0301", "\u0000", "<unk>", "<0x41>"]),
        st.text(alphabet=known, max_size=6),
    ),
    max_size=20,
).map("".join)


@settings(max_examples=800, deadline=None)
@given(text=adversarial)
def test_adversarial_text(models, text):
    ours, reference = models
    ids = ours.encode(text)
    assert ids == reference.encode(text)
    assert ours.decode(ids) == reference.decode(ids)


def test_long_documents(flores, models):
    """Whole documents of ~1 MB: path scores grow past SentencePiece's
    rebasing threshold (±100,000), which changes later roundings."""
    ours, reference = models
    for language in ("eng_Latn", "zho_Hans", "rus_Cyrl"):
        document = " ".join(flores[language] * 5)
        assert len(document.encode()) > 600_000
        assert ours.encode(document) == reference.encode(document), language


def test_spaces_without_a_space_piece(tmp_path, models):
    """A model whose `▁` piece is unused: spaces are unknown, and with byte
    fallback become the bytes of `▁`, as in SentencePiece."""
    ours, _ = models
    ours.save(tmp_path / "m.polytok")
    text = (tmp_path / "m.polytok").read_text(encoding="utf-8")
    assert '["▁",' in text
    edited = text.replace('["▁",', '["▁", -100.0, "unused"], ["▁unused-twin",', 1)
    (tmp_path / "e.polytok").write_text(edited, encoding="utf-8")
    changed = polytok.UnigramTokenizer.load(tmp_path / "e.polytok")
    changed.save_sentencepiece(tmp_path / "e.model")
    reference = spm.SentencePieceProcessor(model_file=str(tmp_path / "e.model"))
    lines = ["a b", "  two  spaces ", "▁ and ▁▁", "x" * 5 + " " + "ꙮ " * 3]
    for line in lines:
        assert changed.encode(line) == reference.encode(line), line
        assert changed.decode(changed.encode(line)) == reference.decode(reference.encode(line))
    # The lone spaces really are unknown: `▁`'s first byte, or <unk>.
    unknown = changed.token_to_id("<0xE2>") if changed.byte_fallback else changed.token_to_id("<unk>")
    assert unknown in changed.encode("▁ and ▁▁")


def test_bad_model_files(tmp_path):
    (tmp_path / "garbage.model").write_bytes(b"\xff\x00 not a protobuf")
    with pytest.raises(polytok.TokenizerFileError, match="garbage.model: not a SentencePiece model"):
        polytok.UnigramTokenizer.from_sentencepiece(tmp_path / "garbage.model")
    bpe = str(tmp_path / "bpe")
    spm.SentencePieceTrainer.train(
        input=str(CORPORA / "en.txt"), model_prefix=bpe, vocab_size=300, model_type="bpe",
        normalization_rule_name="identity", minloglevel=2,
    )
    with pytest.raises(polytok.TokenizerFileError, match="bpe.model: holds a SentencePiece bpe model, not a UnigramTokenizer"):
        polytok.UnigramTokenizer.from_sentencepiece(bpe + ".model")


def test_nbest_equals_sentencepiece(models):
    import math

    ours, reference = models
    # Words and short phrases (SentencePiece's own search is bounded, and
    # gives fewer results on long texts).
    words = sorted(set((CORPORA / "en.txt").read_text("utf-8").split()))[:150]
    lines = words + ["tokenization", "Hello world", "ꙮ x ꙮ", "naïve café"]
    compared = 0
    for line in lines:
        best = ours.nbest(line, 5)
        assert best[0][0] == ours.encode(line)
        scores = [score for _, score in best]
        assert scores == sorted(scores, reverse=True)
        theirs = reference.nbest_encode(line, nbest_size=5)
        if len(theirs) < len(best):
            continue
        # The same scores (equal scores may come in another order, and a
        # tie at the k-th place may be broken the other way).
        if any(reference.is_unknown(i) or reference.is_byte(i) for ids in theirs for i in ids):
            continue
        their_scores = [sum(reference.get_score(i) for i in ids) for ids in theirs]
        expected = sorted(their_scores, reverse=True)
        assert len(scores) == len(expected) and all(
            math.isclose(a, b, abs_tol=1e-3) for a, b in zip(scores, expected)
        ), line
        assert best[0][0] == theirs[0] or math.isclose(scores[0], scores[1], abs_tol=1e-4)
        compared += 1
    assert compared >= 100


def test_sampling_follows_the_model(models):
    """Sampled segmentations of a word occur as often as the model says:
    P(segmentation) = exp(alpha * score) / Z over all of them (from nbest),
    checked with a chi-square test at fixed seeds."""
    import math
    from collections import Counter

    ours, _ = models
    text, alpha, draws = "token", 0.5, 20_000
    every = ours.nbest(text, 10_000)
    weights = {tuple(ids): math.exp(alpha * score) for ids, score in every}
    total = sum(weights.values())
    counts = Counter(tuple(ours.sample(text, alpha=alpha, seed=seed)) for seed in range(draws))
    assert set(counts) <= set(weights)
    expected = {ids: draws * w / total for ids, w in weights.items()}
    cells = [ids for ids, e in expected.items() if e >= 5]
    chi2 = sum((counts[ids] - expected[ids]) ** 2 / expected[ids] for ids in cells)
    critical = {  # chi-square at p = 0.001, by degrees of freedom
        1: 10.83, 2: 13.82, 3: 16.27, 4: 18.47, 5: 20.52, 6: 22.46, 7: 24.32, 8: 26.12, 9: 27.88, 10: 29.59,
        11: 31.26, 12: 32.91, 13: 34.53, 14: 36.12, 15: 37.70, 16: 39.25, 17: 40.79, 18: 42.31, 19: 43.82,
        20: 45.31, 21: 46.80, 22: 48.27, 23: 49.73, 24: 51.18, 25: 52.62, 26: 54.05, 27: 55.48, 28: 56.89,
        29: 58.30, 30: 59.70,
    }
    assert len(cells) - 1 in critical and chi2 < critical[len(cells) - 1]  # p = 0.001
    assert ours.sample(text, alpha=alpha, seed=7) == ours.sample(text, alpha=alpha, seed=7)
    assert ours.sample(text, alpha=1000.0, seed=1) == ours.encode(text)
    with pytest.raises(ValueError, match="alpha"):
        ours.sample(text, alpha=-1.0)
