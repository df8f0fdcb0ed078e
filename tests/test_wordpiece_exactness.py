"""WordPiece with bert-base-uncased's vocabulary gives exactly the ids of
Hugging Face tokenizers' BERT tokenizer (normalizer, pre-tokenizer and
model), on every FLORES-200 line and on adversarial text."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st


def reference_ids(reference, texts: list[str]) -> list[list[int]]:
    """tokenizers' ids, with BERT's [CLS] ... [SEP] as polytok's by default."""
    return [e.ids for e in reference.encode_batch(texts)]


def test_flores_every_language(flores, bert, bert_reference):
    mismatches = []
    for language, lines in sorted(flores.items()):
        ours = bert.encode_batch(lines, allowed_special="all")
        theirs = reference_ids(bert_reference, lines)
        bad = [i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b]
        if bad:
            mismatches.append((language, len(bad), lines[bad[0]]))
    assert not mismatches, mismatches[:5]


def test_whole_documents(flores, bert, bert_reference):
    docs = ["\n".join(lines) for _, lines in sorted(flores.items())[::10]]
    for doc in docs:
        assert bert.encode(doc, allowed_special="all") == reference_ids(bert_reference, [doc])[0]


# Characters Python knows (both libraries' tables may be other Unicode
# versions for unassigned code points), no surrogates (not UTF-8).
known = st.characters(exclude_categories=["Cn", "Cs"])
pieces = st.one_of(
    st.sampled_from(
        [
            " ", "\t", "\n", "\r\n", "\u00a0", "\u3000", "\x00", "\x07", "\x0b", "\x1c", "\u200b", "\u200d",
            "\ufeff", "\ufffd", "\u0301", "\u0308\u0323", "é", "É", "ǅ", "İ", "ß", "ﬁ", "Σ", "ς", "中文", "豈",
            "日本語", "한국어", "ไทย", "👩\u200d💻", "🇫🇷", "[CLS]", "[UNK]", "##", "##ing", "unaffable",
            "a" * 101, "é" * 100, "x" * 99, "don't", "...", "½", "Ⅻ", "①", "ℌ",
        ]
    ),
    st.text(alphabet=known, max_size=8),
)
adversarial = st.lists(pieces, max_size=25).map("".join)


@settings(max_examples=1500, deadline=None)
@given(text=adversarial)
def test_adversarial_text(bert, bert_reference, text):
    assert bert.encode(text, allowed_special="all") == reference_ids(bert_reference, [text])[0]


@settings(max_examples=500, deadline=None)
@given(text=st.text(alphabet=known, max_size=60))
def test_arbitrary_text(bert, bert_reference, text):
    assert bert.encode(text, allowed_special="all") == reference_ids(bert_reference, [text])[0]


def cased_pair(bert_files):
    """The vocabulary read as a cased model, by polytok and by tokenizers
    (BertNormalizer with lowercase=False, and so no accent stripping)."""
    import tokenizers

    import polytok

    reference = tokenizers.Tokenizer.from_file(str(bert_files[1]))
    reference.normalizer = tokenizers.normalizers.BertNormalizer(lowercase=False)
    reference.no_truncation()
    reference.no_padding()
    return polytok.WordPieceTokenizer.from_vocab(bert_files[0], lowercase=False), reference


def test_cased_model(bert_files):
    cased, reference = cased_pair(bert_files)
    texts = ["Héllo WORLD, naïve Ünïcödé!", "Straße İstanbul ΣΊΣΥΦΟΣ", "日本語のテキスト 中文"]
    assert cased.encode_batch(texts, allowed_special="all") == reference_ids(reference, texts)


def test_cased_model_on_flores(flores, bert_files):
    cased, reference = cased_pair(bert_files)
    for language, lines in sorted(flores.items())[::4]:
        assert cased.encode_batch(lines, allowed_special="all") == reference_ids(reference, lines), language
