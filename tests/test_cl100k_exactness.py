"""polytok with the cl100k_base ranks gives exactly tiktoken's ids (and, with
the gpt2 and o200k patterns, exactly what tiktoken gives with them)."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

import polytok


def test_every_flores_line_of_every_language(cl100k, tiktoken_cl100k, flores):
    assert len(flores) >= 200
    for language, lines in sorted(flores.items()):
        ours = cl100k.encode_batch(lines)
        theirs = tiktoken_cl100k.encode_ordinary_batch(lines, num_threads=2)
        for line, a, b in zip(lines, ours, theirs):
            assert a == b, f"{language}: {line!r}"


def test_flores_as_whole_documents(cl100k, tiktoken_cl100k, flores):
    # Newlines between sentences exercise the newline rules of the pattern.
    for language in ("eng_Latn", "zho_Hans", "jpn_Jpan", "arb_Arab", "hin_Deva", "mya_Mymr", "amh_Ethi"):
        document = "\n".join(flores[language]) + "\n\n  \n"
        assert cl100k.encode(document) == tiktoken_cl100k.encode_ordinary(document), language


def test_shipped_corpus(cl100k, tiktoken_cl100k, sample_corpus):
    assert cl100k.encode_batch(sample_corpus) == tiktoken_cl100k.encode_ordinary_batch(sample_corpus)


ADVERSARIAL_PIECES = [
    " ", "  ", "\t", "\n", "\r\n", "\u00a0", "\u3000", "\u2028", "\u0085", "\x0b", "\x1c",
    "0", "12", "123", "1234567", "٣٤٥", "½", "²",
    "中文", "日本語", "한국어", "ไทย", "😀", "👩‍👩‍👧", "🇫🇷", "\u0301", "e\u0301", "\u200d", "\ufe0f",
    "'s", "'S", "'ll", "'LL", "'ve", "'re", "'d", "'m", "'t", "ſ", "'ſ", "’s",
    "Hello", "WORLD", "ǅ", "ʰ", "ß", "Ω", "!", "?!", "...", "/", "//", "__", "$", "(", ")", "<|endoftext|>",
]


@settings(max_examples=500, deadline=None)
@given(st.lists(st.sampled_from(ADVERSARIAL_PIECES), max_size=40).map("".join))
def test_adversarial_mixtures(cl100k, tiktoken_cl100k, text):
    assert cl100k.encode(text) == tiktoken_cl100k.encode_ordinary(text)


@settings(max_examples=1000, deadline=None)
@given(st.text(max_size=60))
def test_arbitrary_unicode(cl100k, tiktoken_cl100k, text):
    assert cl100k.encode(text) == tiktoken_cl100k.encode_ordinary(text)


@settings(max_examples=200, deadline=None)
@given(
    st.text(alphabet=st.characters(categories=["Lo", "Mn", "Mc", "Nd", "So", "Zs"]), max_size=200),
)
def test_scripts_marks_and_symbols(cl100k, tiktoken_cl100k, text):
    assert cl100k.encode(text) == tiktoken_cl100k.encode_ordinary(text)


def test_long_runs(cl100k, tiktoken_cl100k):
    cases = [
        " " * 5000 + "x",
        "\n" * 3000,
        " \n" * 2000 + "  ",
        "9" * 10_001,
        "a" * 20_000,
        "語" * 10_000,
        "😀" * 3000,
        "\u0301" * 5000,
        "!@#$%^&*" * 1000,
        ("word " * 1000) + "   \t\n",
    ]
    for text in cases:
        assert cl100k.encode(text) == tiktoken_cl100k.encode_ordinary(text), text[:20]


def test_special_tokens_follow_tiktoken(cl100k, tiktoken_cl100k):
    text = "a<|endoftext|>b<|fim_prefix|>c"
    # By default special-token text is ordinary text (tiktoken's encode_ordinary).
    assert cl100k.encode(text) == tiktoken_cl100k.encode_ordinary(text)
    assert cl100k.encode(text, allowed_special="all") == tiktoken_cl100k.encode(text, allowed_special="all")
    only = {"<|endoftext|>"}
    assert cl100k.encode(text, allowed_special=only) == tiktoken_cl100k.encode(
        text, allowed_special=only, disallowed_special=()
    )


@settings(max_examples=60, deadline=None)
@given(
    st.sampled_from(["abcdefghij", "aab", "xyzXYZ", "éèêàâ", "中文字語", "あいうカキ", "кот", "'!?/.-"]),
    st.integers(min_value=4096, max_value=20_000),
    st.integers(min_value=0),
)
def test_long_pieces_use_the_linear_encoder_exactly(cl100k, tiktoken_cl100k, alphabet, length, seed):
    # One piece of several KB: the backtracking encoder's domain.
    rng = random.Random(seed)
    text = "".join(rng.choice(alphabet) for _ in range(length))
    assert cl100k.encode(text) == tiktoken_cl100k.encode_ordinary(text)


def test_other_presets_on_flores(other_pattern, flores):
    ours, reference = other_pattern
    for language in sorted(flores)[::5]:
        lines = flores[language]
        assert ours.encode_batch(lines) == reference.encode_ordinary_batch(lines), language
    # Whole documents: the windows of o200k's block scanner cross lines.
    for language in ("eng_Latn", "deu_Latn", "zho_Hans", "jpn_Jpan", "arb_Arab", "hin_Deva", "mya_Mymr"):
        document = "\n".join(flores[language]) + "\n\n  \n"
        assert ours.encode(document) == reference.encode_ordinary(document), language


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(ADVERSARIAL_PIECES), max_size=40).map("".join) | st.text(max_size=60))
def test_other_presets_on_adversarial_text(other_pattern, text):
    ours, reference = other_pattern
    assert ours.encode(text) == reference.encode_ordinary(text)


def test_lone_surrogates_become_replacement_characters(cl100k, tiktoken_cl100k):
    text = "a\udfffb\ud800"
    assert cl100k.encode(text) == tiktoken_cl100k.encode_ordinary(text)
    assert cl100k.encode_batch(["ok", text]) == [cl100k.encode("ok"), cl100k.encode(text)]
    tok = polytok.BPETokenizer.train_from_iterator(["x\udfffy"] * 5, vocab_size=260)
    assert tok.decode(tok.encode("x\udfffy")) == "x\ufffdy"
