"""Added tokens as Hugging Face has them: special and plain (``special:
false``), matched in the text as given or after normalization
(``normalized``), as whole words only (``single_word``), taking the white
space around them (``lstrip``/``rstrip``), with ids inside or past the
model's vocabulary. A tokenizer.json with any of them reads into a polytok
tokenizer that gives `tokenizers`' ids, offsets, word ids, special-token
mask and decoded text, and writes back to the same file."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

import polytok
from conftest import CORPORA
from polytok.cli import main

tokenizers = pytest.importorskip("tokenizers")
from tokenizers import AddedToken, decoders, models, normalizers, pre_tokenizers, trainers  # noqa: E402

SPECIAL = [AddedToken("<M>", normalized=False, lstrip=True), AddedToken("<|im_start|>", normalized=False)]
PLAIN = [
    AddedToken("FOO", normalized=True, lstrip=True, rstrip=True),
    AddedToken("Bar", normalized=False, single_word=True),
    AddedToken("<tool_call>", normalized=False),
    AddedToken("Baz qux", normalized=True),
    AddedToken("    ", normalized=False),  # a code model's run of spaces
]
#: Texts around the tokens' edges: case, words touching them, white space.
TEXTS = [
    "a  FOO  b",
    "FOOb xfoo foo",
    "a  <M> b<M>",
    "qFOO Foo",
    "xBar Bar. Bar_ éBar Bar1 (Bar) Bar",
    "<M>Bar<M>",
    "baz QUX baz qux Baz  qux",
    "<|im_start|>user\n<tool_call>{}</tool_call>",
    "def f():\n        return 1",
    " <M>",
    "",
]


def as_file(reference, tmp_path) -> polytok.Tokenizer:
    path = tmp_path / "tokenizer.json"
    reference.save(str(path))
    return polytok.load(path)


def assert_same(ours, theirs, texts) -> None:
    mine = ours.encode_batch(texts, offsets=True, add_special_tokens=False)
    reference = theirs.encode_batch(texts, add_special_tokens=False)
    for text, m, r in zip(texts, mine, reference):
        assert (m.ids, m.offsets, m.word_ids) == (r.ids, r.offsets, r.word_ids), text
        assert m.special_tokens_mask == r.special_tokens_mask, text
        for skip in (False, True):
            assert ours.decode(m.ids, skip_special_tokens=skip) == theirs.decode(r.ids, skip_special_tokens=skip), (text, skip)


def wordpiece_reference(normalizer, pre_tokenizer, decoder) -> tokenizers.Tokenizer:
    trainer = trainers.WordPieceTrainer(vocab_size=3000, special_tokens=["[UNK]"], show_progress=False)
    reference = tokenizers.Tokenizer(models.WordPiece(unk_token="[UNK]"))
    reference.pre_tokenizer = pre_tokenizers.Whitespace()
    reference.train([str(p) for p in sorted(CORPORA.glob("*.txt"))], trainer)
    reference.pre_tokenizer = pre_tokenizer
    reference.normalizer = normalizer
    reference.decoder = decoder
    # Ids past the model's vocabulary, but "Bar" is in it (an added token
    # may be, and keeps its id).
    reference.add_special_tokens(SPECIAL)
    reference.add_tokens(PLAIN)
    return reference


PIPELINES = {
    "metaspace-first": (None, pre_tokenizers.Metaspace(prepend_scheme="first"), decoders.Metaspace(prepend_scheme="first")),
    "metaspace-always+lowercase": (
        normalizers.Sequence([normalizers.Lowercase(), normalizers.Replace("q", "kw")]),
        pre_tokenizers.Metaspace(prepend_scheme="always"),
        decoders.Metaspace(prepend_scheme="always"),
    ),
    "bert": (normalizers.BertNormalizer(), pre_tokenizers.BertPreTokenizer(), decoders.WordPiece()),
    "whitespace+nfkc, no decoder": (normalizers.NFKC(), pre_tokenizers.Whitespace(), None),
}


@pytest.fixture(scope="module", params=list(PIPELINES))
def wordpiece_pair(request, tmp_path_factory):
    reference = wordpiece_reference(*PIPELINES[request.param])
    return as_file(reference, tmp_path_factory.mktemp("added")), reference


def test_added_tokens_match_as_in_tokenizers(wordpiece_pair, flores):
    ours, theirs = wordpiece_pair
    assert ours.vocab_size == theirs.get_vocab_size() > ours.model.vocab_size
    assert ours.added_tokens == {t.content: theirs.token_to_id(t.content) for t in PLAIN}
    assert set(ours.special_tokens) == {"[UNK]"} | {t.content for t in SPECIAL}
    assert_same(ours, theirs, TEXTS)
    lines = [line for language in sorted(flores)[::9] for line in flores[language][:100]]
    assert_same(ours, theirs, lines)
    # Written back, the file is the same tokenizer.
    again = tokenizers.Tokenizer.from_str(ours.to_tokenizer_json())
    assert_same(ours, again, TEXTS)
    assert json.loads(again.to_str())["added_tokens"] == json.loads(theirs.to_str())["added_tokens"]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.sampled_from(["FOO", "foo", "Bar", "bar", "<M>", "<tool_call>", "    ", " ", "  ", "x", "_", "é", "baz qux", "BAZ QUX", "\n", "<|im_start|>"]),
            st.text(max_size=4),
        ),
        max_size=12,
    ).map("".join)
)
def test_hypothesis_text_around_added_tokens(wordpiece_pair, text):
    ours, theirs = wordpiece_pair
    assert_same(ours, theirs, [text])


def test_qwen_style_byte_level_bpe(tmp_path, flores):
    """Qwen2's design: NFC, a Split regex and ByteLevel, special chat tokens
    and plain ones (`<tool_call>`) past the vocabulary."""
    regex = polytok.pattern_regex("cl100k").replace("{1,3}+", "{1,3}")
    reference = tokenizers.Tokenizer(models.BPE())
    reference.normalizer = normalizers.NFC()
    reference.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Split(tokenizers.Regex(regex), behavior="isolated"), pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]
    )
    reference.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=2000, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    reference.train([str(p) for p in sorted(CORPORA.glob("*.txt"))], trainer)
    reference.add_special_tokens([AddedToken("<|endoftext|>", normalized=False), AddedToken("<|im_start|>", normalized=False)])
    reference.add_tokens([AddedToken("<tool_call>", normalized=False), AddedToken("</tool_call>", normalized=False)])
    ours = as_file(reference, tmp_path)
    assert isinstance(ours.model, polytok._core.Bpe)
    lines = [line for language in sorted(flores)[::5] for line in flores[language][:60]]
    assert_same(ours, reference, TEXTS + lines)
    assert ours.decode(ours.encode("<tool_call>x").ids, skip_special_tokens=True) == "<tool_call>x"
    info = CliRunner().invoke(main, ["info", str(tmp_path / "tokenizer.json")])
    assert info.exit_code == 0 and f"'<tool_call>' = {reference.token_to_id('<tool_call>')}" in info.output


@pytest.fixture(scope="module")
def wordpiece() -> polytok.WordPieceTokenizer:
    return polytok.WordPieceTokenizer.train(CORPORA, vocab_size=5000, progress=False)


def test_plain_added_tokens_in_the_api(wordpiece):
    n = wordpiece.vocab_size
    tok = polytok.Tokenizer(
        wordpiece,
        pre_tokenizer=polytok.pre_tokenizers.BertPreTokenizer(),
        decoder=polytok.decoders.WordPiece(),
        special_tokens={"[MASK]": n},
        added_tokens={"<tool_call>": n + 1},
    )
    assert tok.vocab_size == n + 2 and tok.added_tokens == {"<tool_call>": n + 1}
    assert tok.token_to_id("<tool_call>") == n + 1 and tok.id_to_token(n + 1) == "<tool_call>"
    text = "call <tool_call> [MASK] now"
    # Plain added tokens are found in every call; special ones when allowed.
    plain = tok.encode(text)
    assert n + 1 in plain.ids and n not in plain.ids
    both = tok.encode(text, allowed_special="all")
    assert n + 1 in both.ids and n in both.ids
    assert both.special_tokens_mask[both.ids.index(n + 1)] == 0
    assert both.special_tokens_mask[both.ids.index(n)] == 1
    assert tok.encode(text, allowed_special={"[MASK]"}).ids == both.ids
    with pytest.raises(ValueError, match="not a special token"):
        tok.encode(text, allowed_special={"<tool_call>"})
    # Decoding leaves special tokens out when asked, never plain ones.
    assert "<tool_call>" in tok.decode(both.ids, skip_special_tokens=True)
    assert "[MASK]" not in tok.decode(both.ids, skip_special_tokens=True)
    # Saved and pickled with the rest.
    again = polytok.from_json(tok.to_json())
    assert again.added_tokens == tok.added_tokens and again.encode(text).ids == plain.ids
    assert json.loads(tok.to_tokenizer_json())["added_tokens"][-1] == {
        "id": n + 1, "content": "<tool_call>", "single_word": False, "lstrip": False, "rstrip": False, "normalized": False, "special": False
    }


def test_bad_added_tokens_are_refused_by_name(wordpiece):
    n = wordpiece.vocab_size
    with pytest.raises(ValueError, match='"x" is given twice'):
        polytok.Tokenizer(wordpiece, special_tokens={"x": n}, added_tokens={"x": n + 1}).encode("x")
    with pytest.raises(ValueError, match="same id"):
        polytok.Tokenizer(wordpiece, special_tokens={"x": n}, added_tokens={"y": n}).encode("x")
    with pytest.raises(ValueError, match="is empty"):
        polytok.Tokenizer(wordpiece, added_tokens={"": n}).encode("x")
    with pytest.raises(TypeError, match="added_tokens must map"):
        polytok.Tokenizer(wordpiece, added_tokens=["x"])  # type: ignore[arg-type]
    # A special token matched after normalization would be matched whatever
    # the caller allows: only where special tokens are found in every call.
    document = json.loads(polytok.Tokenizer(wordpiece, special_tokens={"<x>": n}).to_json())
    document["pipeline"]["added_token_flags"] = [{"token": "<x>", "normalized": True}]
    with pytest.raises(polytok.TokenizerFileError, match='special token "<x>" is normalized'):
        polytok.from_json(json.dumps(document))
    document["pipeline"]["always_special"] = True
    assert polytok.from_json(json.dumps(document)).encode("a <x>").ids[-1] == n


def test_old_files_flags_name_still_reads(wordpiece):
    """polytok files saved before plain added tokens named the flags
    `special_token_strip`."""
    n = wordpiece.vocab_size
    tok = polytok.Tokenizer(wordpiece, pre_tokenizer=polytok.pre_tokenizers.BertPreTokenizer(), special_tokens={"<m>": n}, always_special=True)
    document = json.loads(tok.to_json())
    document["pipeline"]["special_token_strip"] = [{"token": "<m>", "lstrip": True}]
    again = polytok.from_json(json.dumps(document))
    assert again.encode("a  <m>").offsets[-1] == (1, 6)
