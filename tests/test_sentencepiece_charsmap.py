"""SentencePiece models with normalization rules (a precompiled charsmap):
models trained here with each of SentencePiece's rule sets, with a
user-defined symbol and with custom rules load into polytok and give exactly
`sentencepiece`'s ids, decoded text and sensible offsets, on every
FLORES-200 line and on generated odd Unicode; the same models converted to
tokenizer.json by `transformers`' converter give `tokenizers`' ids and
offsets; polytok's export loads in `tokenizers`; damaged charsmaps are
errors naming the file."""

from __future__ import annotations

import base64
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import polytok
import polytok.normalizers as N
from conftest import train_sentencepiece as train

spm = pytest.importorskip("sentencepiece")
tokenizers = pytest.importorskip("tokenizers")
pytest.importorskip("google.protobuf", reason="protobuf reads .model files for transformers' converter")
from sentencepiece import sentencepiece_model_pb2  # noqa: E402

RULES = ["nmt_nfkc", "nfkc", "nmt_nfkc_cf", "nfkc_cf"]
# Custom rules (SentencePiece's TSV: source and target code points in hex):
# a full-width letter, an ellipsis, a decomposed é, a three-letter rule.
CUSTOM_RULES = "FF21\t41\n2026\t2E 2E 2E\n65 301\tE9\n61 62 63\t58\n3000\t20\n"
USER_DEFINED = ["Ａ", "ﬁ", "...", "<sep>"]
MODELS = [*RULES, "user_defined", "custom_rules"]


def options(name: str, directory) -> dict:
    if name in RULES:
        return {"normalization_rule_name": name}
    if name == "user_defined":
        return {"normalization_rule_name": "nmt_nfkc", "user_defined_symbols": USER_DEFINED}
    tsv = directory / "rules.tsv"
    tsv.write_text(CUSTOM_RULES, encoding="utf-8")
    return {"normalization_rule_tsv": str(tsv)}


@pytest.fixture(scope="module")
def nmt_nfkc_model(tmp_path_factory) -> str:
    """A model with SentencePiece's default rules."""
    return train(tmp_path_factory.mktemp("nmt_nfkc"), "nmt_nfkc", normalization_rule_name="nmt_nfkc")


@pytest.fixture(scope="module", params=MODELS)
def model_name(request) -> str:
    return request.param


@pytest.fixture(scope="module")
def model(model_name, tmp_path_factory) -> str:
    directory = tmp_path_factory.mktemp(model_name)
    return train(directory, model_name, **options(model_name, directory))


@pytest.fixture(scope="module")
def models(model):
    """(polytok, sentencepiece) for one model."""
    return polytok.load(model), spm.SentencePieceProcessor(model_file=model)


def charsmap_of(model: str) -> bytes:
    proto = sentencepiece_model_pb2.ModelProto()
    with open(model, "rb") as f:
        proto.ParseFromString(f.read())
    return proto.normalizer_spec.precompiled_charsmap


def test_loaded_with_its_rules(model_name, model, models, tmp_path):
    ours, _ = models
    assert isinstance(ours, polytok.UnigramTokenizer)
    step = ours.normalizer.normalizers[0]
    assert isinstance(step, N.SentencePieceCharsmap)
    assert step.precompiled_charsmap == charsmap_of(model)
    assert step.kept == (USER_DEFINED if model_name == "user_defined" else [])
    # SentencePiece names rules read from a TSV "user_defined".
    names = {"user_defined": "nmt_nfkc", "custom_rules": "user_defined"}
    assert ours.normalization == names.get(model_name, model_name)
    # Written back, as .model and as polytok JSON, with the same rules.
    for name in ("again.model", "again.polytok"):
        ours.save(tmp_path / name)
        again = polytok.load(tmp_path / name)
        assert again.normalization == ours.normalization
        assert again.normalizer == ours.normalizer
    assert charsmap_of(str(tmp_path / "again.model")) == charsmap_of(model)


def test_flores_every_language(flores, models):
    ours, reference = models
    mismatches = []
    for language, lines in sorted(flores.items()):
        theirs = reference.encode(lines)
        bad = [i for i, (a, b) in enumerate(zip(ours.encode_batch(lines), theirs)) if list(a) != b]
        if bad:
            mismatches.append((language, len(bad), lines[bad[0]]))
    assert not mismatches, mismatches[:5]


ODD = st.one_of(
    st.sampled_from(list(
        "aZ é\u0301\u0323ﬁ…Ａ１ｶﾞガ\u3000\u00a0\u2003\t\n\r\x00\x01\x7f\u200b\u200d\u200e\ufeff"
        "\u1025\u102e\u0995\u09c7\u09be①㈱ℌ\u2474\u33a1\ufdfa\U0001d400"
    ) + ["<sep>", "...", "abc", "e\u0301", "  ", "\u0ca8\u0cc6\u0cd5"]),
    st.characters(exclude_categories=("Cs",)),
)
ODD_TEXT = st.lists(ODD, max_size=25).map("".join)


@settings(max_examples=300, deadline=None)
@given(text=ODD_TEXT)
def test_odd_unicode(models, text):
    ours, reference = models
    ids = ours.encode(text).ids
    assert ids == reference.encode(text)
    assert ours.decode(ids) == reference.decode(ids)


@settings(max_examples=200, deadline=None)
@given(text=ODD_TEXT)
def test_offsets_are_in_order_and_cover_their_text(models, text):
    """Each token's span is the original text it stands for: in bounds, in
    order, and (for a token of normalized text other than spaces) the
    original text there normalizes, by the model's rules, to text that
    holds the token's text."""
    ours, _ = models
    step = ours.normalizer.normalizers[0]
    encoding = ours.encode(text)
    starts = [start for start, _ in encoding.offsets]
    assert starts == sorted(starts), encoding.offsets
    for token, (start, end) in zip(encoding.tokens, encoding.offsets):
        assert 0 <= start <= end <= len(text)
        surface = token.replace("▁", "").strip()
        if surface and token != "<unk>" and token not in USER_DEFINED:
            covered = step.normalize_str(text[start:end])
            assert surface in covered.replace(" ", ""), (token, text[start:end], covered)


def test_sentencepiece_step_equals_sentencepiece_normalizer(models, model):
    """The step alone is SentencePiece's normalizer without its whitespace
    handling (identity for text it has no rule for)."""
    ours, _ = models
    if "user_defined" in model:
        pytest.skip("SentencePieceNormalizer does not know the model's user-defined pieces")
    normalizer = spm.SentencePieceNormalizer(
        model_file=model, add_dummy_prefix=False, remove_extra_whitespaces=False, escape_whitespaces=False
    )
    step = ours.normalizer.normalizers[0]
    for text in ["ﬁx  y", "\u3000Ａ…", "e\u0301abcd", "\u1025\u102e ①", "\x00\x01\u200b"]:
        assert step.normalize_str(text) == normalizer.normalize(text), text


# ---------------------------------------------------- tokenizer.json, both ways


def converted(model: str) -> tokenizers.Tokenizer:
    """The model as `transformers`' converter makes a tokenizer of it (its
    own settings followed: Precompiled, then the whitespace steps)."""
    converter = pytest.importorskip("transformers.convert_slow_tokenizer", reason="transformers converts the .model")
    proto = sentencepiece_model_pb2.ModelProto()
    with open(model, "rb") as f:
        proto.ParseFromString(f.read())
    vocab = [(p.piece, p.score) for p in proto.pieces]
    return converter.SpmConverter.build_tokenizer_from_spm_proto(proto, vocab)


def near_ties_only(ours, theirs, lines: list[str], differing: list[int]) -> None:
    """Lines on which `tokenizers`' Viterbi (64-bit sums) picks another of two
    nearly equal paths than SentencePiece's (32-bit): polytok is
    SentencePiece's there."""
    scores = [score for _, score in json.loads(theirs.to_str())["model"]["vocab"]]
    for i in differing:
        mine, reference = ours.encode(lines[i]).ids, theirs.encode(lines[i], add_special_tokens=False).ids
        assert abs(sum(scores[t] for t in mine) - sum(scores[t] for t in reference)) < 1e-3, lines[i]


@pytest.mark.parametrize("rule", ["nmt_nfkc", "nfkc_cf"])
def test_converted_tokenizer_json(rule, flores, tmp_path):
    """polytok reads the converter's tokenizer.json into `tokenizers`' ids and
    offsets on every FLORES line: it adds the file's scores as `tokenizers`
    does (64-bit), so near ties (mostly "000" as "00" + "0" or "0" + "00")
    go the same way; the `.model` itself, read by polytok, adds as
    SentencePiece (32-bit) and goes SentencePiece's way there (see
    `test_exported_model_loads_in_tokenizers`)."""
    model = train(tmp_path, rule, normalization_rule_name=rule)
    theirs = converted(model)
    assert "Precompiled" in theirs.to_str()
    theirs.save(str(tmp_path / "tokenizer.json"))
    ours = polytok.load(tmp_path / "tokenizer.json")
    lines = [line for language in sorted(flores) for line in flores[language]]
    mine = ours.encode_batch(lines, offsets=True)
    reference = theirs.encode_batch(lines, add_special_tokens=False)
    assert [i for i, (a, b) in enumerate(zip(mine, reference)) if (a.ids, a.offsets) != (b.ids, [tuple(o) for o in b.offsets])] == []


def test_exported_model_loads_in_tokenizers(flores, nmt_nfkc_model):
    """polytok's export of a `.model` tokenizer writes the rules as
    `Precompiled` (as transformers' converters do): `tokenizers` encodes
    FLORES as polytok does but for near ties and the rare lines where Hugging
    Face's rules make other text than SentencePiece's (a grapheme of 6 bytes
    or more with a two-character rule inside: Indic two-part vowel signs)."""
    ours = polytok.load(nmt_nfkc_model)
    document = ours.to_tokenizer_json()
    assert json.loads(document)["normalizer"]["normalizers"][0]["type"] == "Precompiled"
    theirs = tokenizers.Tokenizer.from_str(document)
    step = ours.normalizer.normalizers[0]
    hugging_face_rules = N.Precompiled(precompiled_charsmap=step.precompiled_charsmap)
    lines = [line for language in sorted(flores) for line in flores[language]]
    reference = theirs.encode_batch(lines, add_special_tokens=False)
    differing = [i for i, (a, b) in enumerate(zip(ours.encode_batch(lines), reference)) if list(a) != b.ids]
    assert len(differing) < 0.005 * len(lines), len(differing)
    other_text = [i for i in differing if hugging_face_rules.normalize_str(lines[i]) != step.normalize_str(lines[i])]
    assert other_text, "the lines where the two semantics differ"
    near_ties_only(ours, theirs, lines, [i for i in differing if i not in other_text])


def test_hugging_face_and_sentencepiece_semantics_differ_where_documented(nmt_nfkc_charsmap):
    blob = nmt_nfkc_charsmap
    theirs = tokenizers.normalizers.Precompiled(blob)
    hf = N.Precompiled(precompiled_charsmap=blob)
    sp = N.SentencePieceCharsmap(precompiled_charsmap=blob)
    # Bengali ো written as its two parts, after a consonant: one grapheme of
    # 9 bytes, so Hugging Face looks up each part alone (no rule);
    # SentencePiece's longest rule composes the pair.
    text = "\u09b6\u09c7\u09be"
    assert hf.normalize_str(text) == theirs.normalize_str(text) == text
    assert sp.normalize_str(text) == "\u09b6\u09cb"
    # A full-width letter with an accent: one grapheme of 5 bytes, which
    # Hugging Face replaces whole by its first rule's (`Ａ` → `A`, the
    # accent lost); SentencePiece composes the pair (NFKC: `Á`).
    text = "Ａ\u0301"
    assert hf.normalize_str(text) == theirs.normalize_str(text) == "A"
    assert sp.normalize_str(text) == "Á"


# ------------------------------------------------------------- bad files


def test_damaged_charsmaps_are_named(nmt_nfkc_model, tmp_path):
    model = nmt_nfkc_model
    proto = sentencepiece_model_pb2.ModelProto()
    proto.ParseFromString(open(model, "rb").read())
    blob = proto.normalizer_spec.precompiled_charsmap
    size = int.from_bytes(blob[:4], "little")
    damaged = {
        "short": (blob[:3], "too few"),
        "trie past the end": (blob[: size // 2], "trie size"),
        "strings not UTF-8": (blob[: 4 + size] + b"\xff\xfe\0", "not UTF-8"),
        "no replacements": (blob[: 4 + size], "NUL-terminated"),
    }
    for name, (broken, problem) in damaged.items():
        proto.normalizer_spec.precompiled_charsmap = broken
        path = tmp_path / f"{name.replace(' ', '_')}.model"
        path.write_bytes(proto.SerializeToString())
        with pytest.raises(polytok.TokenizerFileError, match=problem) as error:
            polytok.load(path)
        assert str(path) in str(error.value), name
    # In a tokenizer.json: the place and the problem.
    theirs = converted(model)
    document = json.loads(theirs.to_str())
    document["normalizer"]["normalizers"][0]["precompiled_charsmap"] = base64.b64encode(blob[:100]).decode()
    (tmp_path / "tokenizer.json").write_text(json.dumps(document))
    with pytest.raises(polytok.TokenizerFileError, match=r"normalizer\.normalizers\[0\].*trie size"):
        polytok.load(tmp_path / "tokenizer.json")
    # An empty charsmap: tokenizers refuses it, and so does polytok.
    document["normalizer"]["normalizers"][0]["precompiled_charsmap"] = ""
    (tmp_path / "tokenizer.json").write_text(json.dumps(document))
    with pytest.raises(polytok.TokenizerFileError, match="too few"):
        polytok.load(tmp_path / "tokenizer.json")


def test_rules_with_two_spaces_are_refused(tmp_path):
    """SentencePiece keeps two spaces that a rule writes (tab → two spaces),
    which the pipeline's space clean-up would merge: refused by name."""
    tsv = tmp_path / "spaced.tsv"
    tsv.write_text("9\t20 20\n", encoding="utf-8")
    model = train(tmp_path, "spaced", normalization_rule_tsv=str(tsv))
    assert spm.SentencePieceProcessor(model_file=model).encode("a\tb", out_type=str).count("▁") >= 1
    with pytest.raises(polytok.TokenizerFileError, match="two spaces in a row"):
        polytok.load(model)


# ------------------------------------------------- the step against tokenizers'


@pytest.fixture(scope="module")
def nmt_nfkc_charsmap(nmt_nfkc_model) -> bytes:
    return charsmap_of(nmt_nfkc_model)


def hf_char_offsets(normalizer, text: str) -> list[tuple[int, int]]:
    """`tokenizers`' original offsets of each normalized character."""
    tok = tokenizers.Tokenizer(tokenizers.models.WordLevel({"[UNK]": 0}, unk_token="[UNK]"))
    tok.normalizer = normalizer
    tok.pre_tokenizer = tokenizers.pre_tokenizers.Split(tokenizers.Regex(r"[\s\S]"), "isolated")
    return [tuple(o) for o in tok.encode(text, add_special_tokens=False).offsets]


def test_precompiled_text_equals_tokenizers_on_flores(flores, nmt_nfkc_charsmap):
    ours = N.Precompiled(precompiled_charsmap=nmt_nfkc_charsmap)
    theirs = tokenizers.normalizers.Precompiled(nmt_nfkc_charsmap)
    for language, lines in sorted(flores.items()):
        # One call per language: NUL has no rule and ends every grapheme.
        mine = ours.normalize_str("\0".join(lines)).split("\0")
        assert mine == [theirs.normalize_str(line) for line in lines], language


@settings(max_examples=300, deadline=None)
@given(text=ODD_TEXT)
def test_precompiled_equals_tokenizers_on_odd_unicode(nmt_nfkc_charsmap, text):
    """The same text; the same offsets but for merges, which span all they
    stand for where `tokenizers` gives the first character's span, and
    where a rule removes characters, after which `tokenizers`' spans drift
    (`\\x1fa` → `a`, which it gives the span of the removed `\\x1f`)."""
    theirs = tokenizers.normalizers.Precompiled(nmt_nfkc_charsmap)
    normalized, offsets = N.Precompiled(precompiled_charsmap=nmt_nfkc_charsmap).normalize(text)
    assert normalized == theirs.normalize_str(text)
    if any(theirs.normalize_str(c) == "" for c in text):
        return
    reference = hf_char_offsets(theirs, text)
    assert len(offsets) == len(reference)
    for (a, b), (c, d) in zip(offsets, reference):
        assert a <= c and d <= b, (text, offsets, reference)
