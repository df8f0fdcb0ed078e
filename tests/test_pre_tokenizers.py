"""Pre-tokenizers: pieces and offsets equal to Hugging Face tokenizers'
on every FLORES-200 line (a sample of languages) and on generated text."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from polytok import pre_tokenizers as ours

hf = pytest.importorskip("tokenizers.pre_tokenizers")

PAIRS = [
    (ours.BertPreTokenizer(), lambda: hf.BertPreTokenizer()),
    (ours.Whitespace(), lambda: hf.Whitespace()),
    (ours.WhitespaceSplit(), lambda: hf.WhitespaceSplit()),
    (ours.Digits(individual_digits=True), lambda: hf.Digits(individual_digits=True)),
    (ours.Digits(), lambda: hf.Digits()),
    (ours.Metaspace(prepend_scheme="first"), lambda: hf.Metaspace(prepend_scheme="first")),
    (ours.Metaspace(prepend_scheme="always", split=False), lambda: hf.Metaspace(prepend_scheme="always", split=False)),
    (ours.Metaspace(prepend_scheme="never"), lambda: hf.Metaspace(prepend_scheme="never")),
    (
        ours.Sequence([ours.WhitespaceSplit(), ours.Digits(individual_digits=True)]),
        lambda: hf.Sequence([hf.WhitespaceSplit(), hf.Digits(individual_digits=True)]),
    ),
]
IDS = ["bert", "whitespace", "whitespace_split", "digits_each", "digits_runs", "metaspace_first", "metaspace_nosplit", "metaspace_never", "sequence"]

LANGUAGES = ["eng_Latn", "fra_Latn", "deu_Latn", "rus_Cyrl", "zho_Hans", "jpn_Jpan", "kor_Hang", "arb_Arab",
             "hin_Deva", "tha_Thai", "amh_Ethi", "ell_Grek", "heb_Hebr", "vie_Latn", "tam_Taml", "mya_Mymr"]


@pytest.mark.parametrize(("pre", "reference"), PAIRS, ids=IDS)
def test_same_pieces_and_offsets_as_tokenizers_on_flores(pre, reference, flores):
    reference = reference()
    checked = 0
    for language in LANGUAGES:
        for line in flores.get(language, [])[:200]:
            assert pre.pre_tokenize_str(line) == reference.pre_tokenize_str(line), (language, line)
            checked += 1
    assert checked > 1000


@pytest.mark.parametrize(("pre", "reference"), PAIRS, ids=IDS)
@settings(max_examples=300, deadline=None)
@given(text=st.text(st.characters(codec="utf-8"), max_size=40) | st.text(" a1.,\u00e9\u2581\t\n!?", max_size=20))
def test_same_as_tokenizers_on_generated_text(pre, reference, text):
    assert pre.pre_tokenize_str(text) == reference().pre_tokenize_str(text)


def test_pattern_pieces_cover_the_text_with_offsets():
    text = "Hello  wörld's 12345 日本語\n\n"
    pieces = ours.Pattern("cl100k").pre_tokenize_str(text)
    assert "".join(p for p, _ in pieces) == text
    assert all(text[s:e] == p for p, (s, e) in pieces)


def test_components_round_trip_and_refuse_bad_settings():
    seq = ours.Sequence([ours.Metaspace(prepend_scheme="first", split=False), ours.Digits(individual_digits=True)])
    assert ours.PreTokenizer.from_dict(seq.to_dict()) == seq
    with pytest.raises(ValueError, match="unknown pre_tokenizer type 'Nope'"):
        ours.PreTokenizer.from_dict({"type": "Nope"})
    with pytest.raises(ValueError, match="unknown setting"):
        ours.PreTokenizer.from_dict({"type": "Digits", "individual": True})
    with pytest.raises(ValueError, match="prepend_scheme"):
        ours.Metaspace(prepend_scheme="sometimes")
    with pytest.raises(ValueError, match="cl100K"):
        ours.Pattern("cl100K")
    with pytest.raises(ValueError, match="pattern"):
        ours.Pattern("(unclosed")
