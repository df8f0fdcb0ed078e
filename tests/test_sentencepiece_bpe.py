"""SentencePiece BPE models (Llama 2's and Mistral's design) give exactly
SentencePiece's ids: Mistral's real `.model` files that `mistral-common`
ships (byte fallback, user-defined and control pieces) on every FLORES-200
line, and models trained here with the `sentencepiece` package (unknown
runs, user-defined pieces, each whitespace setting, unused pieces) on the
shipped corpora and adversarial text; decoding, offsets, files."""

from __future__ import annotations

import json
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import polytok
from conftest import CORPORA, train_sentencepiece

spm = pytest.importorskip("sentencepiece")

try:
    import mistral_common

    MISTRAL = os.path.join(os.path.dirname(mistral_common.__file__), "data")
except ImportError:  # pragma: no cover - a test dependency
    MISTRAL = None
MISTRAL_FILES = [
    "tokenizer.model.v1",
    "mistral_instruct_tokenizer_240216.model.v2",
    "mistral_instruct_tokenizer_240323.model.v3",
    "mistral_instruct_tokenizer_241114.model.v7",
]

CORPUS_LINES = [line for path in sorted(CORPORA.glob("*.txt")) for line in path.read_text().splitlines()]


def mistral(name: str) -> str:
    if MISTRAL is None:
        pytest.skip("mistral-common (a test dependency) ships Mistral's .model files")
    return os.path.join(MISTRAL, name)


def train(directory, name: str, **options) -> str:
    """A SentencePiece BPE model (3000 pieces, identity normalization,
    unless ``options`` say otherwise)."""
    options = {"character_coverage": 0.98, "normalization_rule_name": "identity", "vocab_size": 3000, **options}
    return train_sentencepiece(directory, name, model_type="bpe", **options)


TRAINED = {
    "plain": {},
    "byte_fallback": {"byte_fallback": True},
    "user_defined": {"user_defined_symbols": ["<tool>", "ab", "▁the▁end"]},
    "spaces_kept": {"remove_extra_whitespaces": False, "byte_fallback": True, "allow_whitespace_only_pieces": True},
    "no_dummy_prefix": {"add_dummy_prefix": False},
    "suffix": {"treat_whitespace_as_suffix": True},
    "nmt_nfkc": {"normalization_rule_name": "nmt_nfkc", "user_defined_symbols": ["<tool>"]},
}


@pytest.fixture(scope="module", params=sorted(TRAINED))
def trained(request, tmp_path_factory):
    """(polytok, sentencepiece, path) for one SentencePiece BPE model trained here."""
    path = train(tmp_path_factory.mktemp("spm"), request.param, **TRAINED[request.param])
    return polytok.load(path), spm.SentencePieceProcessor(model_file=path), path


def test_mistral_v1_every_flores_line(flores):
    path = mistral("tokenizer.model.v1")
    ours, theirs = polytok.load(path), spm.SentencePieceProcessor(model_file=path)
    assert isinstance(ours, polytok.SentencePieceBPETokenizer) and ours.vocab_size == 32000
    mismatches = []
    for language, lines in sorted(flores.items()):
        bad = [i for i, (a, b) in enumerate(zip(ours.encode_batch_ids(lines), theirs.encode(lines))) if a != b]
        if bad:
            mismatches.append((language, len(bad), lines[bad[0]]))
    assert not mismatches, mismatches[:5]


@pytest.mark.parametrize("name", MISTRAL_FILES[1:])
def test_mistral_instruct_models(name, flores):
    path = mistral(name)
    ours, theirs = polytok.load(path), spm.SentencePieceProcessor(model_file=path)
    lines = [line for language in sorted(flores)[::7] for line in flores[language][:150]]
    # v3 and v7 have user-defined pieces ([REF], [REFERENCE_DOC_n]): kept whole.
    lines += [f"See [REF]{i}[/REF] and [REFERENCE_DOC_{i % 25}]: {line}" for i, line in enumerate(CORPUS_LINES[::40])]
    assert ours.encode_batch_ids(lines) == theirs.encode(lines)
    ids = ours.encode_batch_ids(lines[:300])
    assert [ours.decode(i) for i in ids] == [theirs.decode(i) for i in ids]


def test_trained_models_on_the_corpora(trained):
    ours, theirs, _ = trained
    assert isinstance(ours, polytok.SentencePieceBPETokenizer)
    assert ours.encode_batch_ids(CORPUS_LINES) == theirs.encode(CORPUS_LINES)
    assert [ours.encode(line).ids for line in CORPUS_LINES[::50]] == theirs.encode(CORPUS_LINES[::50])


known = st.characters(exclude_categories=["Cs"])
adversarial = st.lists(
    st.one_of(
        st.sampled_from(
            [" ", "  ", "   ", "\t", "\n", "▁", "▁▁", "800000", "ꙮꙮ", "😀", "中文", "e\u0301", "\u0000",
             "<unk>", "<0x41>", "<tool>", "ab", "the end", "[REF]", "[INST]", "the", " the"]
        ),
        st.text(alphabet=known, max_size=6),
    ),
    max_size=20,
).map("".join)


@settings(max_examples=200, deadline=None)
@given(text=adversarial)
def test_trained_models_on_adversarial_text(trained, text):
    ours, theirs, _ = trained
    ids = ours.encode(text).ids
    assert ids == theirs.encode(text)
    assert ours.decode(ids) == theirs.decode(ids)


@settings(max_examples=200, deadline=None)
@given(text=adversarial)
def test_mistral_on_adversarial_text(text):
    path = mistral("mistral_instruct_tokenizer_241114.model.v7")
    ours, theirs = _loaded(path)
    assert ours.encode(text).ids == theirs.encode(text)


_LOADED: dict[str, tuple] = {}


def _loaded(path: str) -> tuple:
    if path not in _LOADED:
        _LOADED[path] = polytok.load(path), spm.SentencePieceProcessor(model_file=path)
    return _LOADED[path]


def test_offsets_cover_each_token():
    ours, _ = _loaded(mistral("tokenizer.model.v1"))
    text = "Grüße  aus\tKöln 𒀀, naïve 中文"
    encoding = ours.encode(text)
    assert encoding.offsets[0][0] == 0 and encoding.offsets[-1][1] == len(text)
    for (start, end), token in zip(encoding.offsets, encoding.tokens):
        if not token.startswith("<0x"):
            # The dummy prefix's ▁ covers nothing of the text.
            assert text[start:end] == token.replace("▁", " ").removeprefix(" " if start == 0 else "")
    # The four bytes of a character without a piece each cover it.
    unknown = text.index("𒀀")
    assert [span for span in encoding.offsets if span == (unknown, unknown + 1)] == [(unknown, unknown + 1)] * 4


def test_unused_pieces_split_back(tmp_path):
    """SentencePiece splits an unused piece back into the pair that made
    it: a trained model with pieces marked unused, written by polytok as a
    .model file, encodes the same in both."""
    path = train(tmp_path, "base")
    saved = tmp_path / "base.polytok"
    polytok.load(path).save(saved)
    data = json.loads(saved.read_text())
    pieces = data["pieces"]
    marked = [i for i, (text, _, kind) in enumerate(pieces) if kind == "normal" and len(text) > 2][::7]
    for i in marked:
        pieces[i][2] = "unused"
    saved.write_text(json.dumps(data))
    unused = polytok.load(saved)
    model = tmp_path / "unused.model"
    unused.save(model)
    ours, theirs = polytok.load(model), spm.SentencePieceProcessor(model_file=str(model))
    assert ours.encode_batch_ids(CORPUS_LINES) == theirs.encode(CORPUS_LINES)
    assert not set(marked) & {id for ids in ours.encode_batch_ids(CORPUS_LINES) for id in ids}


def test_files_round_trip(trained, tmp_path):
    ours, theirs, _ = trained
    model, saved = tmp_path / "again.model", tmp_path / "again.polytok"
    ours.save(model)
    ours.save(saved)
    again = spm.SentencePieceProcessor(model_file=str(model))
    assert again.encode(CORPUS_LINES[::10]) == theirs.encode(CORPUS_LINES[::10])
    for loaded in (polytok.load(model), polytok.SentencePieceBPETokenizer.load(saved), polytok.load(saved)):
        assert isinstance(loaded, polytok.SentencePieceBPETokenizer)
        assert loaded.encode_batch_ids(CORPUS_LINES[::10]) == theirs.encode(CORPUS_LINES[::10])


def test_the_wrong_class_is_named():
    path = mistral("tokenizer.model.v1")
    with pytest.raises(polytok.TokenizerFileError, match="tokenizer.model.v1.*bpe model, not a UnigramTokenizer"):
        polytok.UnigramTokenizer.from_sentencepiece(path)
    with pytest.raises(polytok.TokenizerFileError, match="not a UnigramTokenizer"):
        polytok.UnigramTokenizer.load(path)
    assert not hasattr(polytok.SentencePieceBPETokenizer, "nbest")


def test_word_and_character_models_are_refused(tmp_path):
    for kind in ("word", "char"):
        prefix = str(tmp_path / kind)
        spm.SentencePieceTrainer.train(
            input=str(CORPORA / "en.txt"), model_prefix=prefix, model_type=kind, vocab_size=300,
            normalization_rule_name="identity", minloglevel=2, use_all_vocab=True,
        )
        with pytest.raises(polytok.TokenizerFileError, match=f"{kind}.model.*(word|character) model, which polytok does not support"):
            polytok.load(prefix + ".model")


def test_written_as_tokenizer_json(flores, tmp_path):
    """A .model-loaded BPE model written as Hugging Face's BPE (merges
    ranked by piece score, as transformers' converter ranks them):
    `tokenizers` gives polytok's ids and offsets on every FLORES-200 line."""
    tokenizers = pytest.importorskip("tokenizers")
    ours, _ = _loaded(mistral("tokenizer.model.v1"))
    ours.save(tmp_path / "tokenizer.json")
    theirs = tokenizers.Tokenizer.from_file(str(tmp_path / "tokenizer.json"))
    lines = [line for language in sorted(flores) for line in flores[language]]
    mine = ours.encode_batch(lines)
    encodings = theirs.encode_batch(lines)
    assert [i for i, (a, b) in enumerate(zip(mine, encodings)) if a.ids != b.ids] == []
    assert [i for i, (a, b) in enumerate(zip(mine, encodings)) if a.offsets != b.offsets][:5] == []
    assert [theirs.decode(e.ids) for e in encodings[::500]] == [ours.decode(m.ids) for m in mine[::500]]
    # User-defined pieces have no place in Hugging Face's BPE: named.
    with pytest.raises(ValueError, match="user-defined: Hugging Face's BPE has no such pieces"):
        polytok.load(mistral("mistral_instruct_tokenizer_241114.model.v7")).save(tmp_path / "v7.json")


def test_cli_names_the_model():
    from click.testing import CliRunner

    from polytok.cli import main

    path = mistral("tokenizer.model.v1")
    result = CliRunner().invoke(main, ["info", path])
    assert result.exit_code == 0 and "SentencePiece BPE" in result.output and "32000 pieces" in result.output
    assert "identity" in result.output
    result = CliRunner().invoke(main, ["encode", "-t", path, "--nbest", "2", "hello"])
    assert result.exit_code == 2 and "need a Unigram model" in result.output
    result = CliRunner().invoke(main, ["encode", "-t", path, "Hello world"])
    assert result.exit_code == 0 and result.output.split() == [str(i) for i in _loaded(path)[1].encode("Hello world")]


# ------------------------------------------- Hugging Face's character-level BPE


def converted(path: str, directory) -> str:
    """Mistral's .model as `transformers`' converter makes a tokenizer.json
    of it (BPE merges by rank, byte fallback, Metaspace)."""
    pytest.importorskip("google.protobuf", reason="protobuf reads .model files for transformers' converter")
    pytest.importorskip("transformers.convert_slow_tokenizer", reason="transformers converts the .model")
    import sys

    from sentencepiece import sentencepiece_model_pb2

    converter = sys.modules["transformers.convert_slow_tokenizer"]
    proto = sentencepiece_model_pb2.ModelProto()
    with open(path, "rb") as f:
        proto.ParseFromString(f.read())
    vocab = {p.piece: i for i, p in enumerate(proto.pieces)}
    out = str(directory / (os.path.basename(path) + ".json"))
    converter.SpmConverter.build_tokenizer_from_spm_proto(proto, vocab).save(out)
    return out


@pytest.fixture(scope="module")
def mistral_json(tmp_path_factory) -> tuple[polytok.Tokenizer, object, str]:
    tokenizers = pytest.importorskip("tokenizers")
    path = converted(mistral("tokenizer.model.v1"), tmp_path_factory.mktemp("hf"))
    return polytok.load(path), tokenizers.Tokenizer.from_file(path), path


def test_converted_tokenizer_json_equals_tokenizers(mistral_json, flores):
    ours, theirs, _ = mistral_json
    assert "SentencePiece BPE" in repr(ours)
    lines = [line for language in sorted(flores)[::3] for line in flores[language]]
    encodings = theirs.encode_batch(lines, add_special_tokens=False)
    mine = ours.encode_batch(lines, add_special_tokens=False)
    assert [i for i, (a, b) in enumerate(zip(mine, encodings)) if a.ids != b.ids] == []
    sample = range(0, len(lines), 11)
    assert [i for i in sample if mine[i].offsets != encodings[i].offsets] == []
    assert [ours.decode(mine[i].ids) for i in sample] == [theirs.decode(encodings[i].ids) for i in sample]
    # And sentencepiece's, since the converter ranks merges by piece score.
    reference = spm.SentencePieceProcessor(model_file=mistral("tokenizer.model.v1"))
    assert [m.ids for m in mine[::5]] == reference.encode(lines[::5])


@settings(max_examples=200, deadline=None)
@given(text=adversarial)
def test_converted_tokenizer_json_on_adversarial_text(mistral_json, text):
    ours, theirs, _ = mistral_json
    mine, reference = ours.encode(text), theirs.encode(text, add_special_tokens=False)
    assert (mine.ids, mine.offsets) == (reference.ids, reference.offsets)


def test_trained_by_tokenizers_unknown_runs(tmp_path):
    """A character-level BPE trained by `tokenizers` without byte fallback:
    unknown characters, fused into one <unk> or not as the file says."""
    tokenizers = pytest.importorskip("tokenizers")
    from tokenizers.implementations import SentencePieceBPETokenizer

    lines = CORPUS_LINES[::3]
    rare = "𒀀𒀁 ꙮ 🧩"
    for fuse in (True, False):
        trained = SentencePieceBPETokenizer(unk_token="<unk>", fuse_unk=fuse)
        trained.train_from_iterator(lines, vocab_size=2000, special_tokens=["<unk>"], limit_alphabet=300, show_progress=False)
        path = tmp_path / f"fuse_{fuse}.json"
        trained.save(str(path))
        ours, theirs = polytok.load(path), tokenizers.Tokenizer.from_file(str(path))
        texts = CORPUS_LINES[1::7] + [rare, f"a{rare}b  {rare}"]
        assert ours.encode_batch_ids(texts) == [e.ids for e in theirs.encode_batch(texts)]
        assert [ours.encode(t).offsets for t in texts[-2:]] == [theirs.encode(t).offsets for t in texts[-2:]]
        unk = theirs.token_to_id("<unk>")
        # 𒀀𒀁 is one <unk> or two; ꙮ and 🧩 one each.
        assert ours.encode(rare).ids.count(unk) == (3 if fuse else 4)


def test_files_of_the_converted_tokenizer(mistral_json, tmp_path):
    tokenizers = pytest.importorskip("tokenizers")
    ours, theirs, _ = mistral_json
    lines = CORPUS_LINES[::9]
    expected = [e.ids for e in theirs.encode_batch(lines, add_special_tokens=False)]
    ours.save(tmp_path / "again.json")
    again = tokenizers.Tokenizer.from_file(str(tmp_path / "again.json"))
    assert [e.ids for e in again.encode_batch(lines, add_special_tokens=False)] == expected
    ours.save(tmp_path / "again.polytok")
    assert polytok.load(tmp_path / "again.polytok").encode_batch_ids(lines) == expected
    with pytest.raises(ValueError, match="again.model: a .model file holds .* not this Tokenizer: use .json or .polytok"):
        ours.save(tmp_path / "again.model")
    # The model itself: SentencePiece merges by piece score, not by rank.
    with pytest.raises(ValueError, match="merges by rank.*no SentencePiece .model form"):
        ours.model.to_sentencepiece()


@pytest.mark.parametrize("name", MISTRAL_FILES[2:])
def test_converted_with_user_defined_pieces(name, flores, tmp_path):
    """The converter writes user-defined pieces ([REF], ...) as a Split
    pre-tokenizer and ignore_merges (a piece that is a token is taken
    whole): polytok reads both into `tokenizers`' ids and offsets."""
    tokenizers = pytest.importorskip("tokenizers")
    path = converted(mistral(name), tmp_path)
    ours, theirs = polytok.load(path), tokenizers.Tokenizer.from_file(path)
    lines = [line for language in sorted(flores)[::9] for line in flores[language][:200]]
    lines += [f"See [REF]{i}[/REF] and [REFERENCE_DOC_{i % 25}]: {line}" for i, line in enumerate(CORPUS_LINES[::40])]
    lines += ["and", "▁and", "the", " the", "[REF]", "[REF][REF]"]
    encodings = theirs.encode_batch(lines, add_special_tokens=False)
    mine = ours.encode_batch(lines, add_special_tokens=False)
    assert [i for i, (a, b) in enumerate(zip(mine, encodings)) if a.ids != b.ids] == []
    assert [i for i, (a, b) in enumerate(zip(mine, encodings)) if a.offsets != b.offsets] == []
    ours.save(tmp_path / "again.polytok")
    assert polytok.load(tmp_path / "again.polytok").encode_batch_ids(lines) == [e.ids for e in encodings]


def test_refused_settings_are_named(mistral_json, tmp_path):
    _, _, path = mistral_json
    document = json.loads(open(path, encoding="utf-8").read())
    edited = tmp_path / "bad.json"
    document["model"]["merges"].append(["▁the", "zzz"])
    edited.write_text(json.dumps(document))
    with pytest.raises(polytok.TokenizerFileError, match="merges.*\"zzz\", which is not in the vocabulary"):
        polytok.load(edited)


def test_trained_models_written_as_tokenizer_json(trained, tmp_path):
    tokenizers = pytest.importorskip("tokenizers")
    ours, reference, path = trained
    if "user_defined" in path or "nmt_nfkc" in path:
        # User-defined pieces have no place in Hugging Face's BPE (nor
        # unnormalized in its Precompiled step, which comes first).
        refusal = "keeps pieces unnormalized" if "nmt_nfkc" in path else "is user-defined: Hugging Face's BPE has no such pieces"
        with pytest.raises(ValueError, match=refusal):
            ours.save(tmp_path / "t.json")
        assert not (tmp_path / "t.json").exists()
        return
    ours.save(tmp_path / "t.json")
    theirs = tokenizers.Tokenizer.from_file(str(tmp_path / "t.json"))
    texts = CORPUS_LINES[::3] + ["  two  spaces  ", "tab\there", "𒀀 unknown", "▁x", "", "one  \n  two \n"]
    assert [e.ids for e in theirs.encode_batch(texts)] == ours.encode_batch_ids(texts)


# ------------------------------------------------ training with polytok's BPE


POLYTOK_TRAINED = {
    "byte_fallback": {"byte_fallback": True},
    "unknown": {"character_coverage": 0.98},
    "digits_no_prefix": {"split_digits": True, "add_dummy_prefix": False, "max_piece_length": 6},
}


@pytest.fixture(scope="module", params=sorted(POLYTOK_TRAINED))
def polytok_trained(request, tmp_path_factory):
    """(polytok, sentencepiece) for a model trained by polytok and written as .model."""
    tok = polytok.SentencePieceBPETokenizer.train(CORPORA, vocab_size=6000, progress=False, **POLYTOK_TRAINED[request.param])
    path = tmp_path_factory.mktemp("trained") / f"{request.param}.model"
    tok.save_sentencepiece(path)
    return tok, spm.SentencePieceProcessor(model_file=str(path)), request.param


def test_polytok_trained_model_in_sentencepiece(polytok_trained, flores):
    ours, theirs, name = polytok_trained
    assert ours.vocab_size == theirs.get_piece_size() == 6000
    lines = CORPUS_LINES + [line for language in sorted(flores)[::20] for line in flores[language][:100]]
    assert ours.encode_batch_ids(lines) == theirs.encode(lines)
    ids = ours.encode_batch_ids(lines[::25])
    assert [ours.decode(i) for i in ids] == [theirs.decode(i) for i in ids]
    pieces = [ours.id_to_token(i) for i in range(ours.vocab_size)]
    if name == "digits_no_prefix":
        assert not [p for p in pieces if len(p) > 1 and any(c.isdigit() for c in p)]
        assert max(len(p) for p in pieces if not p.startswith("<")) <= 6
    # One script per piece (SentencePiece's split_by_unicode_script).
    assert "es." not in pieces and ".▁" not in pieces


@settings(max_examples=100, deadline=None)
@given(text=adversarial)
def test_polytok_trained_model_on_adversarial_text(polytok_trained, text):
    ours, theirs, _ = polytok_trained
    assert ours.encode(text).ids == theirs.encode(text)


def test_polytok_training_compresses_as_sentencepiece_does(tmp_path):
    """polytok's BPE trainer against SentencePiece's, same corpus and size:
    within 1% of its token count on the corpora, and the same file twice."""
    ours = polytok.SentencePieceBPETokenizer.train(CORPORA, vocab_size=8000, byte_fallback=True, progress=False)
    reference = spm.SentencePieceProcessor(
        model_file=train(tmp_path, "sp8k", vocab_size=8000, byte_fallback=True, character_coverage=0.9995)
    )
    mine = sum(map(len, ours.encode_batch_ids(CORPUS_LINES)))
    theirs = sum(map(len, reference.encode(CORPUS_LINES)))
    assert abs(mine - theirs) <= 0.01 * theirs, (mine, theirs)
    again = polytok.SentencePieceBPETokenizer.train_from_iterator(
        (path.read_text() for path in sorted(CORPORA.glob("*.txt"))), vocab_size=8000, byte_fallback=True, progress=False
    )
    ours.save_sentencepiece(tmp_path / "a.model")
    again.save_sentencepiece(tmp_path / "b.model")
    assert (tmp_path / "a.model").read_bytes() == (tmp_path / "b.model").read_bytes()


def test_polytok_training_limits_are_named():
    with pytest.raises(ValueError, match="vocab_size 300 is too small"):
        polytok.SentencePieceBPETokenizer.train(CORPORA, vocab_size=300, byte_fallback=True, progress=False)
    with pytest.raises(ValueError, match="vocab_size 500000 is more than this corpus can give"):
        polytok.SentencePieceBPETokenizer.train_from_iterator(["a small text, a small text"], vocab_size=500_000, progress=False)
    with pytest.raises(ValueError, match="min_frequency"):
        polytok.SentencePieceBPETokenizer.train(CORPORA, vocab_size=6000, min_frequency=-1, progress=False)


def test_cli_trains_one(tmp_path):
    from click.testing import CliRunner

    from polytok.cli import main

    out = tmp_path / "cli.model"
    result = CliRunner().invoke(main, ["train", "--model", "sentencepiece-bpe", "--vocab-size", "4000", "--byte-fallback", "-q", str(CORPORA), "-o", str(out)])
    assert result.exit_code == 0, result.output
    ours, theirs = polytok.load(out), spm.SentencePieceProcessor(model_file=str(out))
    assert isinstance(ours, polytok.SentencePieceBPETokenizer) and ours.vocab_size == 4000
    assert ours.encode_batch_ids(CORPUS_LINES[::5]) == theirs.encode(CORPUS_LINES[::5])
    result = CliRunner().invoke(main, ["train", "--model", "sentencepiece-bpe", "--vocab-size", "4000", "--pattern", "gpt2", str(CORPORA), "-o", str(out)])
    assert result.exit_code == 2 and "--pattern is an option of bpe training" in result.output
