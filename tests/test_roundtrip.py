"""decode(encode(text)) == text for every string, with the identity
normalizer: byte-level BPE, BPE over SentencePiece's ``▁`` (its bytes are
its fallback), and Unigram with ``▁`` and byte fallback. Text holding
``▁`` itself is left out where ``▁`` stands for a space: it decodes as
one, as in SentencePiece."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import polytok
from polytok import decoders, normalizers, pre_tokenizers
from tests.conftest import CORPORA

ANY_TEXT = st.text(st.characters(codec="utf-8"), max_size=60)
# Spaces, runs of them and their neighbours, where ▁ handling goes wrong.
SPACY_TEXT = st.lists(st.sampled_from([" ", "  ", "a", "é", "日", "\t", "\n", "🙂", "\x00"]), max_size=20).map("".join)
NO_METASPACE = (ANY_TEXT | SPACY_TEXT).filter(lambda s: "\u2581" not in s)


def corpus_lines() -> list[str]:
    return [line for path in sorted(CORPORA.glob("*.txt"))[:8] for line in path.read_text().splitlines()]


@pytest.fixture(scope="module")
def metaspace_bpe() -> polytok.Tokenizer:
    """A BPE model trained on text with spaces as ``▁``, in a pipeline that
    writes them so (Llama's design): the dummy ``▁`` in front, pieces cut
    before each ``▁``, and decoding back."""
    prepared = ["\u2581" + line.replace(" ", "\u2581") for line in corpus_lines()]
    model = polytok.BPETokenizer.train_from_iterator(prepared, vocab_size=2000, pattern=r"\u2581?[^\u2581]+|\u2581")
    return polytok.Tokenizer(
        model.model,
        normalizer=normalizers.Sequence(
            normalizers=[normalizers.Prepend(prepend="\u2581"), normalizers.Replace(pattern=" ", content="\u2581")]
        ),
        pre_tokenizer=pre_tokenizers.Metaspace(prepend_scheme="never"),
        decoder=decoders.Sequence(
            decoders=[decoders.Fuse(), decoders.Replace(pattern="\u2581", content=" "), decoders.Strip(content=" ", start=1, stop=0)]
        ),
    )


@pytest.fixture(scope="module")
def fallback_unigram() -> polytok.UnigramTokenizer:
    return polytok.UnigramTokenizer.train_from_iterator(
        corpus_lines(), vocab_size=1500, byte_fallback=True, remove_extra_whitespaces=False, progress=False
    )


@settings(max_examples=400, deadline=None)
@given(text=ANY_TEXT | SPACY_TEXT)
def test_byte_level_bpe(cl100k, text):
    encoding = cl100k.encode(text)
    assert cl100k.decode(encoding) == text
    # Offsets cover the text in order, without gaps; tokens that split a
    # character each cover it whole (as in Hugging Face's tokenizers).
    offsets = encoding.offsets
    if text:
        assert offsets[0][0] == 0 and offsets[-1][1] == len(text)
    for (s1, e1), (s2, e2) in zip(offsets, offsets[1:]):
        assert s1 < e1 and s1 <= s2 and e1 <= e2 and s2 <= e1
        if s2 < e1:  # an overlap is one split character
            assert (s2, e1) == (e1 - 1, e1) and text[e1 - 1].encode("utf-8").__len__() > 1


@pytest.mark.parametrize("which", ["metaspace_bpe", "fallback_unigram"])
@settings(max_examples=400, deadline=None)
@given(text=NO_METASPACE)
def test_metaspace_with_byte_fallback(request, which, text):
    """BPE over ``▁`` (its bytes are its fallback) and Unigram with byte
    fallback."""
    tok = request.getfixturevalue(which)
    encoding = tok.encode(text)
    assert tok.decode(encoding) == text
    assert all(0 <= s <= e <= len(text) for s, e in encoding.offsets)


def test_streaming_gives_the_same_text(cl100k, fallback_unigram):
    text = "Grüße, 世界! 🙂 tokens cut across bytes: ﷽"
    for tok in (cl100k, fallback_unigram):
        stream = tok.decode_stream()
        pieces = [stream.step(i) for i in tok.encode(text).ids]
        pieces.append(stream.flush())
        assert "".join(p for p in pieces if p) == tok.decode(tok.encode(text)) == text
        assert all("\ufffd" not in p for p in pieces if p)


@pytest.fixture(scope="module")
def bert_preset():
    from tests.conftest import BERT_REFERENCE

    if not (BERT_REFERENCE / "vocab.txt").exists():
        pytest.skip(f"BERT's vocabulary not found at {BERT_REFERENCE} (../shared/ is absent)")
    return polytok.WordPieceTokenizer.from_vocab(BERT_REFERENCE / "vocab.txt")


MIXED_TEXT = st.lists(
    st.sampled_from([" ", "  ", "\u2581", "a", "É", "e\u0301", "日本", "\t", "\n", "🙂", "\x00", "\u200b", "ﬁ",
                     "Ｆｕｌｌ", "[CLS]", "<|endoftext|>", "'s", "123", "ـ", "क्षि"]),
    max_size=25,
).map("".join) | ANY_TEXT


@settings(max_examples=300, deadline=None)
@given(text=MIXED_TEXT)
def test_ids_and_offsets_paths_agree_on_any_text(cl100k, bert_preset, fallback_unigram, text):
    """The pipeline's two paths (pieces streamed to the model for ids; a
    list of pieces with their map to the text for offsets) give the same
    tokens on any text, special-token text allowed or not, and offsets stay
    inside the text."""
    for tok in (cl100k, bert_preset, fallback_unigram):
        for allowed in ((), "all"):
            if allowed and not tok.special_tokens:
                continue
            streamed = tok.encode(text, allowed_special=allowed)
            tracked = tok.encode_batch([text], allowed_special=allowed, offsets=True)[0]
            assert streamed.ids == tracked.ids and streamed.offsets == tracked.offsets
            assert all(0 <= s <= e <= len(text) for s, e in tracked.offsets)
