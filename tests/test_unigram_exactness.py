"""Unigram (Viterbi) encoding of SentencePiece models gives exactly
SentencePiece's ids: models trained here with the `sentencepiece` package
(identity normalization, so that the model alone is compared), with and
without byte fallback, on every FLORES-200 line and on adversarial text."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import polytok
from conftest import CORPORA

spm = pytest.importorskip("sentencepiece")


def train(directory, name: str, **options) -> str:
    prefix = str(directory / name)
    spm.SentencePieceTrainer.train(
        input=",".join(str(p) for p in sorted(CORPORA.glob("*.txt"))),
        model_prefix=prefix,
        model_type="unigram",
        vocab_size=4000,
        normalization_rule_name="identity",
        minloglevel=2,
        **options,
    )
    return prefix + ".model"


@pytest.fixture(scope="module", params=["plain", "byte_fallback"])
def models(request, tmp_path_factory):
    """(polytok, sentencepiece) for one SentencePiece model."""
    options = {"byte_fallback": True, "character_coverage": 0.98} if request.param == "byte_fallback" else {}
    path = train(tmp_path_factory.mktemp("spm"), request.param, **options)
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


def test_bad_model_files(tmp_path):
    (tmp_path / "garbage.model").write_bytes(b"\xff\x00 not a protobuf")
    with pytest.raises(polytok.TokenizerFileError, match="garbage.model: not a SentencePiece model"):
        polytok.UnigramTokenizer.from_sentencepiece(tmp_path / "garbage.model")
    nfkc = str(tmp_path / "nfkc")
    spm.SentencePieceTrainer.train(
        input=str(CORPORA / "en.txt"), model_prefix=nfkc, vocab_size=300, minloglevel=2
    )
    with pytest.raises(polytok.TokenizerFileError, match="nmt_nfkc.*is not the identity"):
        polytok.UnigramTokenizer.from_sentencepiece(nfkc + ".model")
    bpe = str(tmp_path / "bpe")
    spm.SentencePieceTrainer.train(
        input=str(CORPORA / "en.txt"), model_prefix=bpe, vocab_size=300, model_type="bpe",
        normalization_rule_name="identity", minloglevel=2,
    )
    with pytest.raises(polytok.TokenizerFileError, match="not a Unigram model"):
        polytok.UnigramTokenizer.from_sentencepiece(bpe + ".model")
