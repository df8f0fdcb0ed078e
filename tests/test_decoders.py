"""Decoders give Hugging Face tokenizers' text on tokens of real text, read
and refuse specs clearly, and DecodeStream streams polytok's three
tokenizers into exactly their decoding, without a U+FFFD for a character
cut across tokens."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import polytok
from polytok import _core
from polytok import decoders as d

tokenizers = pytest.importorskip("tokenizers")
hf = tokenizers.decoders

LANGUAGES = (
    "eng_Latn", "fra_Latn", "deu_Latn", "vie_Latn", "rus_Cyrl", "ell_Grek", "zho_Hans", "jpn_Jpan",
    "kor_Hang", "arb_Arab", "heb_Hebr", "hin_Deva", "tam_Taml", "tha_Thai", "amh_Ethi", "mya_Mymr",
)


@pytest.fixture(scope="module")
def lines(flores) -> list[str]:
    return [line for lang in LANGUAGES for line in flores[lang][:40]]


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's stand-in character for each byte (Hugging Face's ByteLevel)."""
    keep = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    chars, n = {}, 0
    for b in range(256):
        if b in keep:
            chars[b] = chr(b)
        else:
            chars[b] = chr(256 + n)
            n += 1
    return chars


def clean_up_tokenization(text: str) -> str:
    """transformers' clean_up_tokenization (BERT's decoding cleanup)."""
    for a, b in ((" .", "."), (" ?", "?"), (" !", "!"), (" ,", ","), (" ' ", "'"), (" n't", "n't"),
                 (" 'm", "'m"), (" do not", " don't"), (" 's", "'s"), (" 've", "'ve"), (" 're", "'re")):
        text = text.replace(a, b)
    return text


# ------------------------------------------------------------- against HF


def test_byte_level_as_hugging_face(lines):
    hf_tok = tokenizers.ByteLevelBPETokenizer()
    hf_tok.train_from_iterator(lines, vocab_size=1000, show_progress=False)
    to_byte = {c: b for b, c in bytes_to_unicode().items()}
    ours = d.ByteLevel()
    for line in lines:
        tokens = hf_tok.encode(line).tokens
        raw = [bytes(to_byte[c] for c in t) for t in tokens]
        # Whole lines, and cuts that may fall inside a character.
        for cut in (len(tokens), len(tokens) // 2, len(tokens) // 3 + 1):
            assert ours.decode(raw[:cut]) == hf.ByteLevel().decode(tokens[:cut])


@pytest.fixture(scope="module")
def bert_tokens(lines, bert_reference):
    return [bert_reference.encode(line, add_special_tokens=False) for line in lines]


def test_wordpiece_as_hugging_face_and_bert(bert_tokens, bert):
    plain, clean = d.WordPiece(cleanup=False), d.WordPiece()
    for enc in bert_tokens:
        tokens = enc.tokens
        assert plain.decode(tokens) == hf.WordPiece(cleanup=False).decode(tokens)
        # Hugging Face's step cleans each token; transformers' decode then
        # the whole text, as polytok's WordPiece decoder and tokenizer.
        expected = clean_up_tokenization(hf.WordPiece(cleanup=True).decode(tokens))
        assert clean.decode(tokens) == expected == bert.decode(enc.ids)
    prefixed = d.WordPiece(prefix="@@", cleanup=False)
    tokens = ["un", "@@aff", "@@able", "##x", ","]
    assert prefixed.decode(tokens) == hf.WordPiece(prefix="@@", cleanup=False).decode(tokens)


def test_wordpiece_cleanup_spans_tokens():
    tokens = ["it", "'", "s", "don", "'", "t", "do", "not", "stop", "."]
    assert d.WordPiece().decode(tokens) == "it's don't don't stop."
    assert hf.WordPiece().decode(tokens) == "it ' s don ' t do not stop."


@pytest.fixture(scope="module")
def pieces(lines) -> list[list[str]]:
    """SentencePiece-style tokens (``▁the``) of the lines, from Hugging
    Face's own Unigram tokenizer; pieces with a character beyond Latin-1
    cut into byte tokens ``<0xNN>``, as a byte-fallback model would."""
    hf_tok = tokenizers.SentencePieceUnigramTokenizer()
    hf_tok.train_from_iterator(lines, vocab_size=4000, show_progress=False)
    out = []
    for line in lines:
        tokens = []
        for i, t in enumerate(hf_tok.encode(line).tokens):
            if i % 2 and any(ord(c) > 0xFF for c in t):
                tokens.extend(f"<0x{b:02X}>" for b in t.encode())
            else:
                tokens.append(t)
        out.append(tokens)
    return out


STEPS = [
    (d.Metaspace(), hf.Metaspace()),
    (d.Metaspace(prepend_scheme="first", split=False), hf.Metaspace(prepend_scheme="first", split=False)),
    (d.Metaspace(prepend_scheme="never"), hf.Metaspace(prepend_scheme="never")),
    (d.Metaspace(replacement="a"), hf.Metaspace(replacement="a")),
    (d.ByteFallback(), hf.ByteFallback()),
    (d.Fuse(), hf.Fuse()),
    # (Hugging Face's Strip panics where start and stop overlap, as on "▁"
    # with both 1: polytok's gives "".)
    (d.Strip(content="▁", start=1, stop=0), hf.Strip("▁", 1, 0)),
    (d.Strip(content="a", start=0, stop=1), hf.Strip("a", 0, 1)),
    (d.Strip(content="a", start=2, stop=0), hf.Strip("a", 2, 0)),
    (d.Replace(pattern="▁", content=" "), hf.Replace("▁", " ")),
    (d.Replace(pattern={"Regex": r"[aeiouàé]+"}, content="*"), hf.Replace(tokenizers.Regex(r"[aeiouàé]+"), "*")),
    (d.Replace(pattern={"Regex": r"(?<=\w)▁"}, content="_"), hf.Replace(tokenizers.Regex(r"(?<=\w)▁"), "_")),
    (
        d.Sequence(decoders=[d.Replace(pattern="▁", content=" "), d.ByteFallback(), d.Fuse(), d.Strip(content=" ", start=1, stop=0)]),
        hf.Sequence([hf.Replace("▁", " "), hf.ByteFallback(), hf.Fuse(), hf.Strip(" ", 1, 0)]),
    ),
    (
        d.Sequence(decoders=[d.ByteFallback(), d.Metaspace()]),
        hf.Sequence([hf.ByteFallback(), hf.Metaspace()]),
    ),
]


@pytest.mark.parametrize("ours, theirs", STEPS, ids=[repr(s[0]) for s in STEPS])
def test_steps_as_hugging_face(pieces, ours, theirs):
    assert sum(t.startswith("<0x") for tokens in pieces for t in tokens) > 100
    for tokens in pieces:
        assert ours.decode(tokens) == theirs.decode(tokens)
    # Saved as Hugging Face saves it.
    assert ours.to_dict() == json.loads(theirs.__getstate__())
    assert d.Decoder.from_json(theirs.__getstate__()) == ours


def test_hugging_face_byte_level_and_wordpiece_files():
    for theirs in (hf.ByteLevel(), hf.WordPiece(), hf.WordPiece(prefix="@@", cleanup=False)):
        ours = d.Decoder.from_json(theirs.__getstate__())
        assert ours.to_dict() == json.loads(theirs.__getstate__())


def test_hand_made_tokens():
    llama = d.Sequence(decoders=[d.Replace(pattern="▁", content=" "), d.ByteFallback(), d.Fuse(), d.Strip(content=" ", start=1, stop=0)])
    tokens = ["▁Hello", "▁", "<0xF0>", "<0x9F>", "<0x99>", "<0x82>", "▁世", "界", "<0xE3>", "<0x81>", "<0x82>"]
    assert llama.decode(tokens) == "Hello 🙂 世界あ" == hf.Sequence(
        [hf.Replace("▁", " "), hf.ByteFallback(), hf.Fuse(), hf.Strip(" ", 1, 0)]
    ).decode(tokens)
    # Bytes that are no UTF-8: one U+FFFD each (Hugging Face: each byte of the run).
    assert d.ByteFallback().decode(["<0x61>", "<0xFF>", "b"]) == "a\ufffdb"
    assert d.ByteLevel().decode([b"\xe4\xb8", b"\xad!", "é"]) == "中!é"
    assert d.Fuse().decode([]) == ""


# ------------------------------------------------------------- bad specs


@pytest.mark.parametrize(
    "spec, message",
    [
        ({"type": "CTC"}, "unknown decoder type 'CTC' (polytok knows: ByteFallback, ByteLevel, Fuse"),
        ({"type": "Strip", "content": " ", "begin": 1}, "unknown setting(s) begin"),
        ({"content": " "}, "must be an object with a 'type'"),
        ({"type": "Sequence", "decoders": [{"type": "Fuse"}, {"type": "Nope"}]}, "unknown decoder type 'Nope'"),
        ({"type": "Sequence", "decoders": {"type": "Fuse"}}, "decoders must be a list"),
        ({"type": "Replace", "pattern": {"Regex": "(a"}, "content": ""}, "invalid regex"),
        ({"type": "Metaspace", "prepend_scheme": "sometimes"}, "prepend_scheme must be 'always', 'first' or 'never'"),
        ({"type": "Strip", "content": "ab"}, "content must be one character"),
        ({"type": "Strip", "start": -1}, "start must be at least 0"),
    ],
)
def test_bad_specs_raise_value_error(spec, message):
    with pytest.raises(ValueError) as e:
        d.Decoder.from_dict(spec)
    assert message in str(e.value)


@pytest.mark.parametrize(
    "spec, message",
    [
        ('{"type":"CTC"}', 'unknown decoder type "CTC" (polytok knows: ByteFallback, ByteLevel'),
        ('{"type":"Fuse","x":1}', "decoder Fuse: unknown field `x`"),
        ('{"type":"Sequence","decoders":[{"type":"Strip","content":" ","start":1}]}', "decoders[0] Strip: missing field `stop`"),
        ('{"type":"Replace","pattern":{"Regex":"[a"},"content":""}', "invalid regex"),
        ('{"type":"Replace","pattern":{"Glob":"a"},"content":""}', "Replace: unknown variant `Glob`"),
        ("[", "not valid JSON"),
    ],
)
def test_core_refuses_bad_specs(spec, message):
    with pytest.raises(ValueError) as e:
        _core.decode_tokens(spec, [b"a"])
    assert message in str(e.value)


@pytest.mark.parametrize(
    "make, error",
    [
        (lambda: d.WordPiece(cleanup=1), TypeError),
        (lambda: d.WordPiece(prefix=None), TypeError),
        (lambda: d.Metaspace(replacement="▁▁"), ValueError),
        (lambda: d.Metaspace(prepend_scheme="first ", split=True), ValueError),
        (lambda: d.Strip(content=" ", start="1"), TypeError),
        (lambda: d.Strip(content=" ", start=True), TypeError),
        (lambda: d.Replace(pattern=3, content=""), TypeError),
        (lambda: d.Replace(pattern={"Regex": "("}, content=""), ValueError),
        (lambda: d.Replace(pattern={"Glob": "*"}, content=""), TypeError),
        (lambda: d.Sequence(decoders=[d.Fuse(), "Strip"]), TypeError),
        (lambda: d.Sequence(decoders=d.Fuse()), TypeError),
        (lambda: d.Fuse().decode("abc"), TypeError),
        (lambda: d.Fuse().decode([1, 2]), TypeError),
        (lambda: d.WordPiece("##"), TypeError),
    ],
)
def test_bad_arguments(make, error):
    with pytest.raises(error):
        make()


def test_round_trip_and_equality():
    seq = d.Sequence(decoders=[d.ByteFallback(), d.Strip(content="x", start=1, stop=2), d.Replace(pattern={"Regex": "a|b"}, content="c")])
    assert d.Decoder.from_dict(seq.to_dict()) == seq
    assert d.Decoder.from_json(seq.to_json()) == seq
    assert "Strip(content='x', start=1, stop=2)" in repr(seq)
    assert d.WordPiece().stream_lookahead == 2
    assert seq.stream_lookahead == 0


# ------------------------------------------------------------- streaming


@pytest.fixture(scope="module")
def presets(sample_corpus):
    corpus = sample_corpus[::3]
    return {
        "bpe": polytok.BPETokenizer.train_from_iterator(corpus, vocab_size=600, special_tokens=["<|end|>"]),
        "wordpiece": polytok.WordPieceTokenizer.train_from_iterator(corpus, vocab_size=2000, limit_alphabet=1000),
        "unigram": polytok.UnigramTokenizer.train_from_iterator(
            corpus, vocab_size=1500, byte_fallback=True, character_coverage=0.9
        ),
    }


def stream(tokenizer, ids: list[int]) -> str:
    """Streams ``ids``; checks that all it returns is, at every step, the
    start of the whole decoding, and that with flush it is all of it."""
    whole = tokenizer.decode(ids)
    s = d.DecodeStream(tokenizer)
    got = ""
    for i in ids:
        piece = s.step(i)
        if piece is not None:
            assert piece
            got += piece
            assert whole.startswith(got), (got, whole)
    got += s.flush()
    assert got == whole
    return got


TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=80)
MIXED = st.lists(
    st.sampled_from(["北京", "🙂", "👍🏽", "👨‍👩‍👧", "é", "don't", " ' ", "n't", " . ", "  ", "ꦗꦮ", "ሰላም", "Привет", "a", "\n"]),
    max_size=30,
).map("".join)


@pytest.mark.parametrize("name", ["bpe", "wordpiece", "unigram"])
@settings(max_examples=150, deadline=None)
@given(text=st.one_of(TEXT, MIXED))
def test_stream_is_the_decoding(presets, name, text):
    tokenizer = presets[name]
    stream(tokenizer, tokenizer.encode(text))


@pytest.mark.parametrize("name", ["bpe", "wordpiece", "unigram"])
@settings(max_examples=100, deadline=None)
@given(data=st.data())
def test_stream_of_any_ids(presets, name, data):
    """Ids as a model may generate them: bytes that are no UTF-8 included."""
    tokenizer = presets[name]
    ids = data.draw(st.lists(st.integers(0, tokenizer.vocab_size - 1), max_size=40))
    stream(tokenizer, ids)


def test_stream_of_flores(presets, lines):
    for tokenizer in presets.values():
        ids = [i for line in lines[::10] for i in tokenizer.encode(line)]
        stream(tokenizer, ids)


def test_stream_returns_whole_characters(presets):
    bpe = presets["bpe"]
    ids = bpe.encode("🙂")
    assert len(ids) > 1
    s = d.DecodeStream(bpe)
    assert [s.step(i) for i in ids] == [None] * (len(ids) - 1) + ["🙂"]
    assert s.flush() == ""
    # A real U+FFFD comes out, at the latest with flush.
    ff = next(i for i in range(256) if bpe.token_bytes(i) == b"\xff")
    s = d.DecodeStream(bpe)
    out = [s.step(i) for i in [ff] * 5]
    assert "".join(o for o in out if o) + s.flush() == "\ufffd" * 5
    assert out[3] == "\ufffd"


def test_stream_arguments(presets):
    s = d.DecodeStream(presets["wordpiece"])
    assert s.lookahead == 2
    assert d.DecodeStream(presets["bpe"]).lookahead == 0
    assert d.DecodeStream(presets["bpe"], lookahead=3).lookahead == 3
    with pytest.raises(TypeError):
        d.DecodeStream(object())
    with pytest.raises(TypeError):
        s.step("1")
    with pytest.raises(ValueError):
        s.step(-1)
    with pytest.raises(ValueError, match="unknown token id"):
        s.step(10**6)
    # A refused id leaves the stream as it was.
    bpe = presets["bpe"]
    s = d.DecodeStream(bpe)
    ids = bpe.encode("Hello, world")
    assert s.step(ids[0]) == bpe.decode(ids[:1])
    with pytest.raises(ValueError, match="unknown token id"):
        s.step(bpe.vocab_size + 7)
    rest = "".join(s.step(i) or "" for i in ids[1:]) + s.flush()
    assert bpe.decode(ids[:1]) + rest == "Hello, world"


def test_stream_passes_skip_special_tokens():
    class Tok:
        def decode(self, ids, skip_special_tokens=False):
            return "".join("" if skip_special_tokens and i == 0 else chr(ord("a") + i) for i in ids)

    s = d.DecodeStream(Tok(), skip_special_tokens=True)
    assert [s.step(i) for i in (0, 1, 0, 2)] == [None, "b", None, "c"]
