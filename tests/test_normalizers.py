"""polytok.normalizers: the text of every step that Hugging Face
``tokenizers`` has is the same as theirs (FLORES-200 lines of many scripts,
generated text), and so are the offsets of each normalized character, but
for the places where polytok's map is documented to differ (a merged
character spans all it stands for, an inserted one is empty at its place);
polytok's own steps on examples; bad settings refused by name."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import polytok.normalizers as N
from polytok import _core

tokenizers = pytest.importorskip("tokenizers")
from tokenizers import Regex  # noqa: E402
from tokenizers import normalizers as H  # noqa: E402

LANGUAGES = [
    "eng_Latn", "fra_Latn", "vie_Latn", "tur_Latn", "yor_Latn", "zho_Hans", "jpn_Jpan",
    "kor_Hang", "hin_Deva", "ben_Beng", "tam_Taml", "arb_Arab", "pes_Arab", "heb_Hebr",
    "rus_Cyrl", "ell_Grek", "amh_Ethi", "tha_Thai", "mya_Mymr", "khm_Khmr", "bod_Tibt", "kat_Geor",
]  # fmt: skip

# (name, Hugging Face's step, polytok's): text and offsets equal.
STEPS = [
    ("NFC", lambda: H.NFC(), N.NFC()),
    ("NFD", lambda: H.NFD(), N.NFD()),
    ("NFKC", lambda: H.NFKC(), N.NFKC()),
    ("NFKD", lambda: H.NFKD(), N.NFKD()),
    ("Lowercase", lambda: H.Lowercase(), N.Lowercase()),
    ("StripAccents", lambda: H.StripAccents(), N.StripAccents()),
    ("Strip", lambda: H.Strip(left=True, right=True), N.Strip()),
    ("Strip-left", lambda: H.Strip(left=True, right=False), N.Strip(strip_right=False)),
    ("Strip-right", lambda: H.Strip(left=False, right=True), N.Strip(strip_left=False)),
    ("Replace-string", lambda: H.Replace(" ", "▁"), N.Replace(pattern=" ", content="▁")),
    ("Replace-delete", lambda: H.Replace(Regex(r"\p{P}"), ""), N.Replace(pattern={"Regex": r"\p{P}"}, content="")),
    ("Replace-regex", lambda: H.Replace(Regex(r"\s+"), " "), N.Replace(pattern={"Regex": r"\s+"}, content=" ")),
    ("Replace-expand", lambda: H.Replace(Regex(r"[\p{Han}\p{Thai}]"), "<x>"),
     N.Replace(pattern={"Regex": r"[\p{Han}\p{Thai}]"}, content="<x>")),
    ("Prepend", lambda: H.Prepend("▁"), N.Prepend(prepend="▁")),
    ("Bert", lambda: H.BertNormalizer(), N.BertNormalizer()),
    ("Bert-cased", lambda: H.BertNormalizer(lowercase=False), N.BertNormalizer(lowercase=False)),
    ("Bert-accents-no-cjk", lambda: H.BertNormalizer(handle_chinese_chars=False, strip_accents=True, lowercase=False),
     N.BertNormalizer(handle_chinese_chars=False, strip_accents=True, lowercase=False)),
    ("Bert-raw", lambda: H.BertNormalizer(clean_text=False, handle_chinese_chars=False, strip_accents=False, lowercase=False),
     N.BertNormalizer(clean_text=False, handle_chinese_chars=False, strip_accents=False, lowercase=False)),
    ("Sequence", lambda: H.Sequence([H.NFKD(), H.StripAccents(), H.Lowercase(), H.Prepend("▁")]),
     N.Sequence(normalizers=[N.NFKD(), N.StripAccents(), N.Lowercase(), N.Prepend(prepend="▁")])),
]  # fmt: skip
IDS = [s[0] for s in STEPS]


def hf_char_offsets(normalizer, texts: list[str]) -> list[list[tuple[int, int]]]:
    """Hugging Face's original offsets of each normalized character: a
    tokenizer that makes every character a token."""
    tok = tokenizers.Tokenizer(tokenizers.models.WordLevel({"[UNK]": 0}, unk_token="[UNK]"))
    tok.normalizer = normalizer
    tok.pre_tokenizer = tokenizers.pre_tokenizers.Split(Regex(r"[\s\S]"), "isolated")
    return [[tuple(o) for o in enc.offsets] for enc in tok.encode_batch(texts, add_special_tokens=False)]


def check_offsets(ours: list[tuple[int, int]], theirs: list[tuple[int, int]], context) -> None:
    """Exactly Hugging Face's offsets: polytok's map is its map (a composed
    character stands for its first source, a replacement for the last
    character it replaces, an insertion for the character before it)."""
    assert ours == theirs, context


@pytest.fixture(scope="module")
def flores_sample(flores):
    missing = [lang for lang in LANGUAGES if lang not in flores]
    assert not missing, f"FLORES-200 lacks {missing}"
    return {lang: flores[lang] for lang in LANGUAGES}


@pytest.mark.parametrize(("name", "hf", "ours"), STEPS, ids=IDS)
def test_flores_text_and_offsets_equal_hugging_face(flores_sample, name, hf, ours):
    reference = hf()
    for lang, lines in flores_sample.items():
        results = [ours.normalize(line) for line in lines]
        for line, (text, _) in zip(lines, results):
            assert text == reference.normalize_str(line), (name, lang, line)
        for line, (text, offsets), theirs in zip(lines, results, hf_char_offsets(reference, lines)):
            check_offsets(offsets, theirs, (name, lang, line))


def test_maps_of_merges_and_insertions():
    """Where a step merges or inserts characters, the map is Hugging
    Face's, however partial (a composed character leaves out its second
    source)."""
    # NFC: Myanmar ဦ, composed of U+1025 U+102E, stands for the first, as
    # in Hugging Face (a token of it then leaves out U+102E).
    assert N.NFC().normalize("\u1025\u102e") == ("\u1026", [(0, 1)])
    assert hf_char_offsets(H.NFC(), ["\u1025\u102e"]) == [[(0, 1)]]
    # Prepend gives its characters the first character's span, as Hugging
    # Face does (a token of the prefix alone then covers text).
    assert N.Prepend(prepend="▁").normalize("ab") == ("▁ab", [(0, 1), (0, 1), (1, 2)])
    assert hf_char_offsets(H.Prepend("▁"), ["ab"]) == [[(0, 1), (0, 1), (1, 2)]]
    # Replace: the replacement stands for the last character it replaces.
    assert N.Replace(pattern={"Regex": r"\s+"}, content=" ").normalize("a \t b") == ("a b", [(0, 1), (3, 4), (4, 5)])
    assert hf_char_offsets(H.Replace(Regex(r"\s+"), " "), ["a \t b"]) == [[(0, 1), (3, 4), (4, 5)]]


# Text of many scripts, with combining marks, controls, odd spaces, CJK,
# ligatures, full-width forms and characters whose case mapping expands.
ALPHABET = st.one_of(
    st.sampled_from(list("aZ é\u0301\u0323\u0308\u093e\u0f72İßǅﬁＡ１　中文ｶﾞガ\u00a0\u2003\t\n\r\x00\x7f\u200b\u200d\ufeff\u1026\u1025\u102e")),
    st.characters(exclude_categories=("Cs", "Cn", "Co")),
)
TEXT = st.text(ALPHABET, max_size=40)


@settings(max_examples=300, deadline=None)
@given(text=TEXT)
def test_generated_text_equals_hugging_face(text):
    for name, hf, ours in STEPS:
        reference = hf()
        normalized, offsets = ours.normalize(text)
        assert normalized == reference.normalize_str(text), name
        check_offsets(offsets, hf_char_offsets(reference, [text])[0], name)


@pytest.mark.parametrize("pattern", [r"\d+", r"(?<=a)b", r"\p{Lu}", r"a|", r"x*", r"^", r"$", r"\b"])
@settings(max_examples=100, deadline=None)
@given(text=st.text(st.sampled_from(list("aAbx1 é中")), max_size=12))
def test_replace_regex_equals_hugging_face(pattern, text):
    ours = N.Replace(pattern={"Regex": pattern}, content="_")
    assert ours.normalize_str(text) == H.Replace(Regex(pattern), "_").normalize_str(text)


def test_bert_normalizer_equals_the_wordpiece_path():
    """BertNormalizer is the normalization of polytok's WordPiece (tested
    there against BERT's tokenizer); here its text against Hugging Face's on
    the hard cases of that normalization."""
    text = "Héllo, WORLD!\x00\tnaïve 中文x\u200by e\u0301\x00\u0323 \uf900 Ⅻ ǅ İ ß ﬁ \U0001d165\u302e"
    for lowercase in (True, False):
        for strip_accents in (None, True, False):
            ours = N.BertNormalizer(lowercase=lowercase, strip_accents=strip_accents)
            theirs = H.BertNormalizer(lowercase=lowercase, strip_accents=strip_accents)
            assert ours.normalize_str(text) == theirs.normalize_str(text)


def test_unicode_forms_map_each_character():
    assert N.NFD().normalize("xé") == ("xe\u0301", [(0, 1), (1, 2), (1, 2)])
    assert N.NFC().normalize("xe\u0301y") == ("xéy", [(0, 1), (1, 2), (3, 4)])
    assert N.NFKC().normalize("ﬁ") == ("fi", [(0, 1), (0, 1)])
    assert N.Lowercase().normalize("İ") == ("i\u0307", [(0, 1), (0, 1)])


def test_half_width():
    assert N.HalfWidth().normalize_str("Ｈｅｌｌｏ，　ＷＯＲＬＤ！ガパア。") == "Hello, WORLD!ｶﾞﾊﾟｱ｡"
    assert N.HalfWidth(katakana=False).normalize_str("ＡＢ　ガ") == "AB ガ"
    assert N.HalfWidth(ascii=False).normalize("Ａガ") == ("Ａｶﾞ", [(0, 1), (1, 2), (1, 2)])
    # Katakana without a half-width form stay.
    assert N.HalfWidth().normalize_str("ヰヵ") == "ヰヵ"


def test_full_width():
    assert N.FullWidth().normalize_str("Hi 1!ｶﾞﾊﾟｱ｡") == "Ｈｉ\u3000１！ガパア。"
    # A sound mark composes with the kana before it where Unicode has the
    # composed kana, and is the spacing mark otherwise.
    assert N.FullWidth(ascii=False).normalize("ｶﾞｱﾞﾞa") == ("ガア゛゛a", [(0, 2), (2, 3), (3, 4), (4, 5), (5, 6)])
    every = "".join(map(chr, range(0xFF61, 0xFFA0)))
    assert N.HalfWidth().normalize_str(N.FullWidth().normalize_str(every)) == every


def test_japanese_folding():
    fold = N.Sequence(normalizers=[N.HalfWidth(katakana=False), N.FullWidth(ascii=False)])
    assert fold.normalize_str("ＰＣでｶﾞｲﾄﾞを読む　ＯＫ") == "PCでガイドを読む OK"


def test_whitespace():
    assert N.Whitespace().normalize(" a \t\u00a0 b\u3000") == ("a b", [(1, 2), (2, 6), (6, 7)])
    assert N.Whitespace().normalize_str("\n \n") == ""
    assert N.Whitespace(unicode_spaces=False).normalize_str("\u00a0a  \n b\u00a0") == "\u00a0a b\u00a0"
    assert N.Whitespace(strip=False).normalize_str("  a\n\nb  ") == " a b "
    assert N.Whitespace(strip=False, collapse=False).normalize_str("a\u2003\t b ") == "a \t b "
    assert N.Whitespace(collapse=False).normalize_str(" a  b\u3000") == "a  b"


def test_remove_control():
    text = "a\x00\tb\u200d\ufeffc\r\n\x7f\u200e"
    assert N.RemoveControl().normalize(text) == ("a\tb\u200dc\r\n", [(0, 1), (2, 3), (3, 4), (4, 5), (6, 7), (7, 8), (8, 9)])
    assert N.RemoveControl(keep_joiners=False).normalize_str(text) == "a\tbc\r\n"


def test_settings_round_trip_and_equality():
    steps = [ours for _, _, ours in STEPS] + [
        N.HalfWidth(), N.FullWidth(ascii=False), N.Whitespace(collapse=False), N.RemoveControl(),
        N.Sequence(normalizers=[N.NFC(), N.Sequence(normalizers=[N.Lowercase()])]),
    ]  # fmt: skip
    for step in steps:
        data = step.to_dict()
        assert N.Normalizer.from_dict(json.loads(json.dumps(data))) == step
        assert data["type"] == step.type_name


def test_files_exchange_with_hugging_face():
    """A shared step is saved as Hugging Face saves it, and read back from
    Hugging Face's form."""
    for name, hf, ours in STEPS:
        tok = tokenizers.Tokenizer(tokenizers.models.WordLevel({"a": 0}, unk_token="a"))
        tok.normalizer = hf()
        theirs = json.loads(tok.to_str())["normalizer"]
        assert ours.to_dict() == theirs, name
        assert N.Normalizer.from_dict(theirs) == ours, name
        assert ours.normalize_str("Ａb É") == _core.normalize(json.dumps(theirs), "Ａb É")[0]


BAD_SPECS = [
    ('{"type": "Nope"}', r"unknown normalizer type \"Nope\".*StripAccents"),
    ('{"type": "Strip", "strip_left": true, "strip_right": true, "x": 1}', r"^Strip: unknown field `x`"),
    ('{"type": "NFC", "x": 1}', r"^NFC: unknown field `x`"),
    ('{"type": "Replace", "pattern": {"Regex": "("}, "content": ""}', r"^Replace: invalid regular expression '\(':"),
    ('{"type": "Sequence", "normalizers": [{"type": "NFC"}, {"type": "Prepend"}]}',
     r"^Sequence: step 1: Prepend: missing field `prepend`"),
    ('{"type": "Whitespace", "strip": 1, "collapse": true, "unicode_spaces": true}', r"Whitespace: invalid type"),
    ("{", "invalid JSON"),
]  # fmt: skip


@pytest.mark.parametrize(("spec", "message"), BAD_SPECS)
def test_bad_specs_raise_value_error(spec, message):
    with pytest.raises(ValueError, match=message):
        _core.normalize(spec, "a")


def test_bad_settings_in_python():
    # The Python classes.
    with pytest.raises(ValueError, match=r"invalid regular expression '\['"):
        N.Replace(pattern={"Regex": "["}, content="")
    with pytest.raises(ValueError, match="pattern must be"):
        N.Replace(pattern={"Glob": "*"}, content="")
    with pytest.raises(TypeError, match="strip_left must be a bool"):
        N.Strip(strip_left="yes")
    with pytest.raises(TypeError, match="content must be a str"):
        N.Replace(pattern="a", content=None)
    with pytest.raises(TypeError, match=r"normalizers\[1\] must be a Normalizer"):
        N.Sequence(normalizers=[N.NFC(), "NFD"])
    with pytest.raises(TypeError):
        N.Strip(True, True)  # keyword-only
    with pytest.raises(ValueError, match="unknown normalizer type 'Nope'"):
        N.Normalizer.from_dict({"type": "Nope"})
    with pytest.raises(ValueError, match="unknown setting"):
        N.Normalizer.from_dict({"type": "Prepend", "prepend": "x", "append": "y"})
    with pytest.raises(TypeError, match="text must be a str"):
        N.NFC().normalize(b"abc")


def test_empty_and_offsets_are_python_indices():
    for _, _, ours in STEPS:
        assert ours.normalize("") == ("", [])
    text = "𝒳é中 a"  # a character outside the BMP: one Python index
    normalized, offsets = N.NFD().normalize(text)
    assert [text[a:b] for a, b in offsets] == ["𝒳", "é", "é", "中", " ", "a"]
    assert normalized == "𝒳e\u0301中 a"
