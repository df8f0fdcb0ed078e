"""Mistral's Tekken files, as `mistral-common` ships and reads them: the
same ids on FLORES-200 and on generated text, and damaged files named."""

from __future__ import annotations

import json
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import polytok

mistral_common = pytest.importorskip("mistral_common", reason="mistral-common ships the Tekken files")
from mistral_common.tokens.tokenizers.tekken import Tekkenizer  # noqa: E402

DATA = os.path.join(os.path.dirname(mistral_common.__file__), "data")
FILES = ["tekken_240718.json", "tekken_240911.json"]


@pytest.fixture(scope="module", params=FILES)
def pair(request) -> tuple[polytok.Tokenizer, Tekkenizer]:
    path = os.path.join(DATA, request.param)
    return polytok.load(path), Tekkenizer.from_file(path)


def test_ids_equal_mistral_common_on_flores(pair, flores):
    ours, theirs = pair
    lines = [line for language in sorted(flores) for line in flores[language]]
    mine = ours.encode_batch_ids(lines)
    assert [i for i, (line, ids) in enumerate(zip(lines, mine)) if theirs.encode(line, bos=False, eos=False) != ids] == []


@settings(max_examples=300, deadline=None)
@given(text=st.text(st.characters(exclude_categories=("Cs",)), max_size=60))
def test_ids_equal_mistral_common_on_any_text(pair, text):
    ours, theirs = pair
    assert ours.encode(text).ids == theirs.encode(text, bos=False, eos=False)


def test_ids_special_tokens_and_decoding(pair):
    ours, theirs = pair
    assert ours.vocab_size == theirs.n_words == 131072
    assert ours.token_to_id("[INST]") == 3 and ours.token_to_id("<SPECIAL_999>") == 999
    text = "[INST] Grüße, 世界! 🙂 [/INST]"
    ids = ours.encode(text).ids
    assert ids == theirs.encode(text, bos=False, eos=False) and min(ids) >= 1000  # special text stays text...
    assert ours.encode(text, allowed_special="all").ids[0] == 3  # ...unless allowed
    assert ours.decode(ids) == theirs.decode(ids) == text


def test_written_as_tokenizer_json(pair, flores):
    tokenizers = pytest.importorskip("tokenizers")
    ours, _ = pair
    exported = tokenizers.Tokenizer.from_str(ours.to_tokenizer_json())
    lines = [line for language in sorted(flores)[::9] for line in flores[language][:100]]
    assert [e.ids for e in exported.encode_batch(lines)] == ours.encode_batch_ids(lines)
    assert exported.token_to_id("[INST]") == 3


def test_damaged_files_are_named(tmp_path):
    document = json.loads(open(os.path.join(DATA, FILES[0]), encoding="utf-8").read())
    document["vocab"] = document["vocab"][:2000]
    document["config"]["default_vocab_size"] = 2500

    def message(edit) -> str:
        broken = json.loads(json.dumps(document))
        edit(broken)
        path = tmp_path / "tekken.json"
        path.write_text(json.dumps(broken), encoding="utf-8")
        with pytest.raises(polytok.TokenizerFileError) as info:
            polytok.load(path)
        assert "tekken.json" in str(info.value)
        return str(info.value)

    def duplicate(d):
        d["vocab"][7]["rank"] = 6

    def missing(d):
        del d["vocab"][7]

    def bad_bytes(d):
        d["vocab"][9]["token_bytes"] = "not base64!"

    def too_big(d):
        d["config"]["default_vocab_size"] = 5000

    def special_clash(d):
        d["special_tokens"] = [{"rank": 0, "token_str": "<s>", "is_control": True}, {"rank": 0, "token_str": "</s>", "is_control": True}]

    assert "vocab[7]: rank 6 is given twice" in message(duplicate)
    assert "vocab[7]: rank 8 is out of order (rank 7 expected)" in message(missing)
    assert "vocab[9]: token_bytes is not base64" in message(bad_bytes)
    assert "default_vocab_size 5000" in message(too_big)
    assert 'special tokens "<s>" and "</s>" have the same rank 0' in message(special_clash)
