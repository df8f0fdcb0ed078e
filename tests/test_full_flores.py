"""Mistral's real files on every FLORES-200 line (205,820 lines): what the
other tests check on samples, in full (about a minute and a half on two
cores)."""

from __future__ import annotations

from pathlib import Path

import pytest

import polytok

mistral_common = pytest.importorskip("mistral_common")
DATA = Path(mistral_common.__file__).parent / "data"
MODELS = [
    "tokenizer.model.v1",
    "mistral_instruct_tokenizer_240216.model.v2",
    "mistral_instruct_tokenizer_240323.model.v3",
    "mistral_instruct_tokenizer_241114.model.v7",
]


@pytest.fixture(scope="module")
def lines(flores) -> list[str]:
    return [line for language in sorted(flores) for line in flores[language]]


@pytest.mark.parametrize("name", MODELS)
def test_model_files_equal_sentencepiece(name, lines):
    spm = pytest.importorskip("sentencepiece")
    reference = spm.SentencePieceProcessor(model_file=str(DATA / name))
    ours = polytok.load(DATA / name)
    theirs = reference.encode(lines)
    mine = [list(e) for e in ours.encode_batch(lines)]
    assert [i for i, (a, b) in enumerate(zip(mine, theirs)) if a != b] == []
    assert all(ours.decode(a) == reference.decode(b) for a, b in zip(mine[::25], theirs[::25]))


@pytest.mark.parametrize("name", [MODELS[0], MODELS[2], MODELS[3]])
def test_converted_files_equal_tokenizers(name, lines, tmp_path):
    tokenizers = pytest.importorskip("tokenizers")
    from test_sentencepiece_bpe import converted

    path = converted(str(DATA / name), tmp_path)
    theirs = tokenizers.Tokenizer.from_file(path)
    ours = polytok.load(path)
    reference = theirs.encode_batch(lines, add_special_tokens=False)
    mine = ours.encode_batch(lines, offsets=True, add_special_tokens=False)
    differing = [i for i, (a, b) in enumerate(zip(mine, reference)) if (a.ids, a.offsets) != (b.ids, [tuple(o) for o in b.offsets])]
    assert differing == []


@pytest.mark.parametrize("name", ["tekken_240718.json", "tekken_240911.json"])
def test_tekken_equals_mistral_common(name, lines):
    from mistral_common.tokens.tokenizers.tekken import Tekkenizer

    reference = Tekkenizer.from_file(str(DATA / name))
    ours = polytok.load(DATA / name)
    mine = [list(e) for e in ours.encode_batch(lines, add_special_tokens=False)]
    assert [i for i, (a, line) in enumerate(zip(mine, lines)) if a != reference.encode(line, bos=False, eos=False)] == []
