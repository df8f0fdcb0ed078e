"""polytok.Tokenizer: the pipeline against Hugging Face tokenizers on the
same settings (ids, offsets, word ids, masks, templates, truncation with
overflowing windows, padding), and the checks of bad settings."""

from __future__ import annotations

import pytest

import polytok
from polytok import pre_tokenizers, processors
from tests.conftest import BERT_REFERENCE

tokenizers = pytest.importorskip("tokenizers")

LANGUAGES = ["eng_Latn", "fra_Latn", "rus_Cyrl", "zho_Hans", "jpn_Jpan", "arb_Arab", "hin_Deva", "tha_Thai"]


@pytest.fixture(scope="module")
def bert_vocab():
    vocab = BERT_REFERENCE / "vocab.txt"
    if not vocab.exists():
        pytest.skip(f"BERT's vocabulary not found at {vocab} (../shared/ is absent)")
    return vocab


def bert_pair(vocab_path):
    """polytok's and tokenizers' BERT pipelines without a normalizer (the
    normalizers are compared on their own)."""
    wordpiece = polytok.WordPieceTokenizer.from_vocab(vocab_path)
    ours = polytok.Tokenizer(
        wordpiece.model,
        pre_tokenizer=pre_tokenizers.BertPreTokenizer(),
        post_processor=processors.BertProcessing(sep=("[SEP]", 102), cls=("[CLS]", 101)),
    )
    theirs = tokenizers.Tokenizer.from_file(str(BERT_REFERENCE / "tokenizer.json"))
    theirs.normalizer = tokenizers.normalizers.Sequence([])
    theirs.no_padding()
    theirs.no_truncation()
    return ours, theirs


def assert_same(ours, theirs, context):
    assert ours.ids == theirs.ids, context
    assert ours.offsets == [tuple(o) for o in theirs.offsets], context
    assert ours.type_ids == theirs.type_ids, context
    assert ours.attention_mask == theirs.attention_mask, context
    assert ours.special_tokens_mask == theirs.special_tokens_mask, context
    assert ours.word_ids == theirs.word_ids, context
    assert ours.sequence_ids == theirs.sequence_ids, context
    assert len(ours.overflowing) == len(theirs.overflowing), context
    for o, t in zip(ours.overflowing, theirs.overflowing):
        assert_same(o, t, context)


def lines(flores, n=60):
    return [line.lower() for language in LANGUAGES for line in flores[language][:n]]


def test_bert_pipeline_equals_tokenizers_on_flores(bert_vocab, flores):
    ours, theirs = bert_pair(bert_vocab)
    texts = lines(flores)
    for text, mine, reference in zip(texts, ours.encode_batch(texts), theirs.encode_batch(texts)):
        assert_same(mine, reference, text)
    for text in texts[::7]:
        assert_same(ours.encode(text), theirs.encode(text), text)
    pairs = list(zip(texts[::2], texts[1::2]))
    for pair, mine, reference in zip(pairs, ours.encode_batch(pairs), theirs.encode_batch(pairs)):
        assert_same(mine, reference, pair)


@pytest.mark.parametrize("strategy", ["longest_first", "only_first", "only_second"])
@pytest.mark.parametrize("direction", ["right", "left"])
def test_truncation_and_overflowing_equal_tokenizers(bert_vocab, flores, strategy, direction):
    ours, theirs = bert_pair(bert_vocab)
    ours.enable_truncation(40, stride=5, strategy=strategy, direction=direction)
    theirs.enable_truncation(40, stride=5, strategy=strategy, direction=direction)
    texts = lines(flores, 20)
    pairs = [(a, b[:60]) for a, b in zip(texts[::2], texts[1::2])]
    if strategy == "only_second":
        pairs = [(a[:40], b + " " + b) for a, b in pairs]
    for pair in pairs:
        try:
            reference = theirs.encode(*pair)
        except BaseException as refused:  # tokenizers panics on some (a PanicException)
            if isinstance(refused, KeyboardInterrupt):
                raise
            with pytest.raises(ValueError):
                ours.encode(*pair)
            continue
        assert_same(ours.encode(*pair), reference, pair)
    if strategy == "longest_first":
        for text in texts:
            assert_same(ours.encode(text), theirs.encode(text), text)


@pytest.mark.parametrize(
    "padding",
    [{}, {"pad_to_multiple_of": 8}, {"direction": "left"}, {"length": 96}],
    ids=["longest", "multiple", "left", "fixed"],
)
def test_padding_equals_tokenizers(bert_vocab, flores, padding):
    ours, theirs = bert_pair(bert_vocab)
    ours.enable_padding(**padding)
    theirs.enable_padding(pad_id=0, pad_token="[PAD]", **padding)
    texts = lines(flores, 10)
    for text, mine, reference in zip(texts, ours.encode_batch(texts), theirs.encode_batch(texts)):
        assert_same(mine, reference, text)
    arrays = ours.encode_batch_numpy(texts)
    for row, (encoding, length) in enumerate(zip(ours.encode_batch(texts), arrays["lengths"])):
        # Rows longer than a fixed padding length (nothing truncates them)
        # make the matrix wider; the others are padded with the pad id.
        assert length == len(encoding)
        assert arrays["ids"][row, :length].tolist() == encoding.ids
        assert arrays["attention_mask"][row, :length].tolist() == encoding.attention_mask
        assert arrays["type_ids"][row, :length].tolist() == encoding.type_ids
        assert not arrays["ids"][row, length:].any() and not arrays["attention_mask"][row, length:].any()
    assert_same(ours.encode(texts[0]), theirs.encode(texts[0]), texts[0])


def test_byte_level_offsets_cover_the_text(cl100k, flores):
    tok = polytok.Tokenizer(cl100k, pre_tokenizer=pre_tokenizers.Pattern("cl100k"))  # its model
    texts = [line for language in LANGUAGES for line in flores[language][:50]]
    for text, encoding in zip(texts, tok.encode_batch(texts)):
        assert encoding.ids == cl100k.encode(text)
        # In order and without gaps; tokens that split a character each
        # cover it whole (Hugging Face's offsets).
        offsets = encoding.offsets
        assert offsets[0][0] == 0 and offsets[-1][1] == len(text)
        for (s1, e1), (s2, e2) in zip(offsets, offsets[1:]):
            assert s1 <= s2 <= e1 <= e2 and (s2 == e1 or (s2, e1) == (e1 - 1, e1))


def test_encoding_lookups_and_sequence_behaviour(bert_vocab):
    ours, theirs = bert_pair(bert_vocab)
    text = "hello there, general kenobi"
    mine, reference = ours.encode(text), theirs.encode(text)
    for char in range(len(text)):
        assert mine.char_to_token(char) == reference.char_to_token(char)
    for index in range(len(mine)):
        assert mine.token_to_chars(index) == (tuple(reference.token_to_chars(index)) if reference.token_to_chars(index) else None)
    assert mine.tokens == reference.tokens
    assert len(mine) == len(reference.ids) and list(mine) == reference.ids and mine[-1] == 102
    assert mine == reference.ids and mine == ours.encode(text)


def test_special_tokens_are_matched_before_the_pipeline_when_allowed(bert_vocab):
    wordpiece = polytok.WordPieceTokenizer.from_vocab(bert_vocab)
    tok = polytok.Tokenizer(
        wordpiece.model, pre_tokenizer=pre_tokenizers.BertPreTokenizer(), special_tokens={"[MASK]": 103}
    )
    text = "the [MASK] sat"
    assert tok.encode(text, allowed_special="all").ids == [1996, 103, 2938]
    assert 103 not in tok.encode(text).ids
    encoding = tok.encode(text, allowed_special="all")
    assert encoding.offsets[1] == (4, 10) and encoding.special_tokens_mask == [0, 1, 0]
    assert tok.decode(encoding.ids, skip_special_tokens=True) == "thesat"


def test_bad_settings_are_refused_with_a_reason(bert_vocab):
    ours, _ = bert_pair(bert_vocab)
    with pytest.raises(ValueError, match="leaves no room"):
        ours.enable_truncation(2)
    with pytest.raises(ValueError, match="stride"):
        ours.enable_truncation(10, stride=8)
    assert ours.truncation is None
    plain = polytok.Tokenizer(polytok.BPETokenizer.train_from_iterator(["ab ab"], vocab_size=260).model)
    with pytest.raises(ValueError, match="pad token"):
        plain.enable_padding()
    with pytest.raises(ValueError, match="not in the vocabulary"):
        ours.enable_padding(pad_token="<nope>")
    single_only = polytok.Tokenizer(
        ours.model,
        post_processor=processors.TemplateProcessing("[CLS] $A [SEP]", special_tokens=[("[CLS]", 101), ("[SEP]", 102)]),
    )
    with pytest.raises(ValueError, match="no pair form"):
        single_only.encode("a", "b")
    with pytest.raises(ValueError, match="not among special_tokens"):
        processors.TemplateProcessing("[BOS] $A", special_tokens=[])
    with pytest.raises(ValueError, match=r"\$A and \$B"):
        processors.TemplateProcessing("$A", pair="$A [SEP]", special_tokens=[("[SEP]", 1)])
    with pytest.raises(TypeError, match="normalizer"):
        polytok.Tokenizer(ours.model, normalizer=pre_tokenizers.Whitespace())


def test_bert_preset_offsets_equal_tokenizers_on_every_flores_line(bert_vocab, bert_reference, flores):
    """The whole BERT pipeline (BertNormalizer with its offsets, the
    pre-tokenizer, WordPiece, [CLS]/[SEP]) on every line of every language."""
    bert = polytok.WordPieceTokenizer.from_vocab(bert_vocab)
    mismatches = []
    for language, lines in sorted(flores.items()):
        ours = bert.encode_batch(lines, offsets=True)
        theirs = bert_reference.encode_batch(lines)
        for line, mine, reference in zip(lines, ours, theirs):
            if (
                mine.ids != reference.ids
                or mine.offsets != [tuple(o) for o in reference.offsets]
                or mine.word_ids != reference.word_ids
            ):
                mismatches.append((language, line))
    assert not mismatches, mismatches[:3]


@pytest.mark.parametrize("preset", ["cl100k", "bert", "unigram"])
def test_offsets_path_gives_the_ids_path_ids(preset, cl100k, bert_vocab, flores, tmp_path):
    """Ids alone come from pieces streamed to the model, offsets from a list
    of pieces with their map to the text: the two give the same tokens."""
    if preset == "cl100k":
        tok = cl100k
    elif preset == "bert":
        tok = polytok.WordPieceTokenizer.from_vocab(bert_vocab)
    else:
        tok = polytok.UnigramTokenizer.train_from_iterator(
            [line for language in LANGUAGES for line in flores[language][:300]], vocab_size=3000, progress=False
        )
    texts = [line for language in LANGUAGES for line in flores[language][300:400]]
    texts += ["  two  spaces  ", "", " ", "\u2581lead", "tail\u2581 ", "tab\there\nnewline", "ｆｕｌｌ　ｗｉｄｔｈ"]
    streamed = tok.encode_batch(texts)
    tracked = tok.encode_batch(texts, offsets=True)
    for text, a, b in zip(texts, streamed, tracked):
        assert a.ids == b.ids, text
        assert len(b.offsets) == len(b.ids) and all(0 <= s <= e <= len(text) for s, e in b.offsets), text
    # Lazily computed offsets agree with those computed at once.
    assert [e.offsets for e in streamed] == [e.offsets for e in tracked]


def composed(model) -> polytok.Tokenizer:
    from polytok import decoders, normalizers

    tok = polytok.Tokenizer(
        model,
        normalizer=normalizers.Sequence(normalizers=[normalizers.NFKC(), normalizers.Lowercase()]),
        pre_tokenizer=pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Punctuation()]),
        post_processor=processors.TemplateProcessing(
            "[CLS] $A [SEP]", "[CLS] $A [SEP] $B:1 [SEP]:1", special_tokens=[("[CLS]", 101), ("[SEP]", 102)]
        ),
        decoder=decoders.WordPiece(),
        special_tokens={"[MASK]": 103},
    )
    tok.enable_truncation(16, stride=2)
    tok.enable_padding(pad_to_multiple_of=8)
    return tok


def test_a_composed_tokenizer_saves_loads_and_pickles(bert_vocab, tmp_path):
    import pickle

    tok = composed(polytok.WordPieceTokenizer.from_vocab(bert_vocab).model)
    text, pair = "Ｈｅｌｌｏ, WORLD! [MASK] a rather longer text that overflows", "and a second one"
    tok.save(tmp_path / "composed.polytok")
    for again in (polytok.load(tmp_path / "composed.polytok"), pickle.loads(pickle.dumps(tok))):
        assert type(again) is polytok.Tokenizer
        assert again.pipeline_dict() == tok.pipeline_dict()
        for args in ((text,), (text, pair)):
            mine, theirs = tok.encode(*args, allowed_special="all"), again.encode(*args, allowed_special="all")
            assert mine == theirs and mine.offsets == theirs.offsets and len(mine.overflowing) == len(theirs.overflowing)
    encoding = tok.encode(text, allowed_special="all")
    assert len(encoding) % 8 == 0 and encoding.ids[:2] == [101, 7592]
    copy = pickle.loads(pickle.dumps(encoding))
    assert copy == encoding and copy.offsets == encoding.offsets and copy.tokens == encoding.tokens
    assert copy.attention_mask == encoding.attention_mask and len(copy.overflowing) == len(encoding.overflowing)
    # The windows come back whole too, tokens included, and pickle again.
    encoding = tok.encode(text * 3, allowed_special="all")
    copy = pickle.loads(pickle.dumps(encoding))
    windows = [(w.ids, w.offsets, w.tokens) for w in encoding.overflowing]
    assert len(windows) >= 2
    assert [(w.ids, w.offsets, w.tokens) for w in copy.overflowing] == windows
    assert [w.tokens for w in pickle.loads(pickle.dumps(copy)).overflowing] == [w[2] for w in windows]
    with pytest.raises(polytok.TokenizerFileError, match="holds a Tokenizer, not a WordPieceTokenizer"):
        polytok.WordPieceTokenizer.load(tmp_path / "composed.polytok")
    # A preset with truncation and padding keeps them through a file.
    bert = polytok.WordPieceTokenizer.from_vocab(bert_vocab)
    bert.enable_truncation(8)
    bert.save(tmp_path / "bert.polytok")
    loaded = polytok.WordPieceTokenizer.load(tmp_path / "bert.polytok")
    assert loaded.truncation == bert.truncation and len(loaded.encode(text)) == 8


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda p: p["normalizer"]["normalizers"].append({"type": "Nmt"}), "unknown normalizer type 'Nmt'"),
        (lambda p: p.update(pre_tokenizer={"type": "ByteLevel"}), "unknown pre_tokenizer type 'ByteLevel'"),
        (lambda p: p.update(post_processor={"type": "TemplateProcessing", "single": "$A", "extra": 1}), "unknown setting"),
        (lambda p: p.update(colour="blue"), "unknown pipeline part"),
        (lambda p: p["normalizer"]["normalizers"].append({"type": "Replace", "pattern": {"Regex": "("}, "content": ""}), "Replace"),
    ],
    ids=["normalizer", "pre_tokenizer", "setting", "part", "regex"],
)
def test_a_file_with_an_unknown_component_is_refused_naming_it(bert_vocab, tmp_path, edit, message):
    import json

    tok = composed(polytok.WordPieceTokenizer.from_vocab(bert_vocab).model)
    tok.save(tmp_path / "t.polytok")
    data = json.loads((tmp_path / "t.polytok").read_text())
    edit(data["pipeline"])
    (tmp_path / "t.polytok").write_text(json.dumps(data))
    with pytest.raises(polytok.TokenizerFileError, match=message):
        polytok.load(tmp_path / "t.polytok")


def test_embedding_takes_encodings_and_numpy_batches(bert_vocab):
    from polytok import embedding

    bert = polytok.WordPieceTokenizer.from_vocab(bert_vocab)
    bert.enable_padding()
    texts = ["a short one", "a somewhat longer sentence than that"]
    table = embedding.TokenEmbedding(bert, 8, seed=0)
    from_arrays, mask_arrays = table.embed(bert.encode_batch_numpy(texts))
    from_encodings, mask_encodings = table.embed(bert.encode_batch(texts))
    from_lists, _ = table.embed([bert.encode_ids(t) for t in texts])
    assert (from_arrays == from_encodings).all() and (mask_arrays == mask_encodings).all()
    assert mask_arrays.sum(axis=1).tolist() == [len(bert.encode_ids(t)) for t in texts]
    assert (from_lists[0, : mask_arrays[0].sum()] == from_arrays[0, : mask_arrays[0].sum()]).all()


def test_presets_are_their_models_steps(cl100k, tiktoken_cl100k, bert_vocab, sample_corpus):
    """A preset is its model with the steps it was trained with (defined
    once, in the core): the same components, and a Tokenizer composed of
    them gives the preset's ids. The models themselves encode pieces."""
    unigram = polytok.UnigramTokenizer.train_from_iterator(sample_corpus[:500], vocab_size=400, progress=False)
    bert = polytok.WordPieceTokenizer.from_vocab(bert_vocab)
    assert cl100k.pre_tokenizer.to_dict() == {"type": "Pattern", "pattern": "cl100k"}
    assert cl100k.special_tokens == tiktoken_cl100k._special_tokens and "<|endoftext|>" in cl100k.special_tokens
    assert bert.normalizer.to_dict()["type"] == "BertNormalizer" and bert.pre_tokenizer.to_dict()["type"] == "BertPreTokenizer"
    assert bert.post_processor.to_dict() == {"type": "BertProcessing", "sep": ["[SEP]", 102], "cls": ["[CLS]", 101]}
    assert unigram.normalizer.to_dict() == {
        "type": "Sequence",
        "normalizers": [{"type": "RemoveExtraWhitespaces", "trailing_metaspace": True}, {"type": "Prepend", "prepend": " "}],
    }
    assert unigram.pre_tokenizer.to_dict() == {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "never", "split": False}
    for preset in (cl100k, bert, unigram):
        composed = polytok.Tokenizer(
            preset.model,
            normalizer=preset.normalizer,
            pre_tokenizer=preset.pre_tokenizer,
            post_processor=preset.post_processor,
            special_tokens=preset.special_tokens,
        )
        assert composed.encode_batch_ids(sample_corpus[:200]) == preset.encode_batch_ids(sample_corpus[:200])
        assert not hasattr(preset.model, "encode")


def test_pieces_nbest_and_sample_go_through_the_pipeline(sample_corpus):
    """Unigram's n-best and sampling segment the text the pipeline makes
    (the preset: one piece); a pipeline that cuts the text into several
    pieces has no n-best of the whole, and says so."""
    unigram = polytok.UnigramTokenizer.train_from_iterator(sample_corpus[:500], vocab_size=400, progress=False)
    assert unigram._pipeline.pieces("  a  b ") == ["\u2581a\u2581b"]
    best = unigram.nbest("  the cat  ", 3)
    assert best[0][0] == unigram.encode_ids("  the cat  ")
    assert unigram.sample("the cat", alpha=1e9, seed=1) == unigram.encode_ids("the cat")
    assert unigram.nbest("", 2) == [([], 0.0)] and unigram.sample("", seed=3) == []
    split = polytok.UnigramTokenizer(unigram.model)
    split._pre_tokenizer = pre_tokenizers.Metaspace(prepend_scheme="never", split=True)
    split._pipeline_cache = None
    assert split._pipeline.pieces(" a b") == ["\u2581a", "\u2581b"]
    with pytest.raises(ValueError, match="cuts it into 2"):
        split.nbest(" a b", 2)
    assert split.sample(" a b", alpha=1e9, seed=1) == split.encode_ids(" a b")


FIELDS = ["type_ids", "special_tokens_mask", "sequence_ids", "attention_mask", "ids", "offsets", "word_ids", "tokens"]


@pytest.mark.parametrize("template", [True, False])
def test_one_text_encodings_made_from_ids_read_as_batch_ones(sample_corpus, template):
    """``encode`` (and ``encode_batch`` of single texts) with neither
    truncation nor padding keeps the ids alone and makes the token records
    when a field is read; every field, read first or after others, pickled
    or indexed, is that of the path with offsets (which makes the records
    at once), template and special tokens in the text included."""
    import pickle

    bpe = polytok.BPETokenizer.train_from_iterator(sample_corpus[:300], vocab_size=400, progress=False)
    n = bpe.vocab_size
    tok = polytok.Tokenizer(
        bpe.model,
        pre_tokenizer=pre_tokenizers.Pattern("cl100k"),
        post_processor=processors.TemplateProcessing(
            "[CLS]:1 $A:2 [SEP] [SEP]", special_tokens=[("[CLS]", n), ("[SEP]", n + 1)]
        )
        if template
        else None,
        special_tokens={"<m>": n + 2, "[CLS]": n, "[SEP]": n + 1},
    )
    texts = sample_corpus[300:340] + ["", " ", "a<m>b", "<m>", "[CLS] x [SEP]", "x<m><m> y "]
    for add in (True, False):
        batch = tok.encode_batch(texts, add_special_tokens=add, allowed_special="all", offsets=True)
        for first in FIELDS:
            for text, expected in zip(texts, batch):
                one = tok.encode(text, add_special_tokens=add, allowed_special="all")
                context = (text, add, first)
                assert getattr(one, first) == getattr(expected, first), context
                assert {f: getattr(one, f) for f in FIELDS} == {f: getattr(expected, f) for f in FIELDS}, context
        ids_only = tok.encode_batch(texts, add_special_tokens=add, allowed_special="all")
        for text, expected, from_ids in zip(texts, batch, ids_only):
            assert {f: getattr(from_ids, f) for f in FIELDS} == {f: getattr(expected, f) for f in FIELDS}, text
            one = tok.encode(text, add_special_tokens=add, allowed_special="all")
            assert len(one) == len(expected) and list(one) == expected.ids and one == expected
            assert [one[i] for i in range(-len(one), len(one))] == expected.ids + expected.ids
            copy = pickle.loads(pickle.dumps(tok.encode(text, add_special_tokens=add, allowed_special="all")))
            assert {f: getattr(copy, f) for f in FIELDS} == {f: getattr(expected, f) for f in FIELDS}
    special = tok.encode("a<m>b", allowed_special="all")
    assert special.special_tokens_mask[special.ids.index(n + 2)] == 1
    # Encodings can hold no reference cycle: the collector does not track
    # them (it would walk a whole batch at every collection), and they
    # outlive a collection whole.
    import gc

    batch = tok.encode_batch(texts)
    copy = pickle.loads(pickle.dumps(special))
    assert not any(gc.is_tracked(e) for e in [special, copy, *batch])
    tok.enable_truncation(8, stride=1)
    windows = tok.encode(texts[0]).overflowing
    assert windows and not any(gc.is_tracked(w) for w in windows)
    tok.no_truncation()
    gc.collect()
    assert special.ids == tok.encode_ids("a<m>b", allowed_special="all") and batch[0].ids == tok.encode_ids(texts[0])
    assert special.type_ids == ([1] + [2] * (len(special) - 3) + [0, 0] if template else [0] * len(special))


def test_calls_on_one_text_follow_the_settings_and_clean_surrogates():
    """``encode`` and ``encode_ids`` are the compiled base class's: they
    build the pipeline on first use, see a setting changed after it, take
    their options by keyword only, and encode lone surrogates as U+FFFD
    (a surrogate pair as its character), in the text and in the pair."""
    tok = polytok.BPETokenizer.train_from_iterator(["low lower lowest x\ufffdy 😀"] * 10, vocab_size=300)
    plain = tok.encode_ids("lowest low")
    assert plain == tok.encode("lowest low").ids == tok.encode_batch_ids(["lowest low"])[0]
    assert isinstance(tok._pipeline_cache, polytok._core.Pipeline)
    tok.enable_padding(length=8, pad_id=0)
    assert tok.encode("lowest low").ids == plain + [0] * (8 - len(plain))
    assert tok.encode("lowest low").attention_mask == [1] * len(plain) + [0] * (8 - len(plain))
    tok.no_padding()
    assert tok.encode("lowest low").ids == plain
    assert tok.encode_ids("x\udfffy") == tok.encode_ids("x\ufffdy")
    assert tok.encode_ids("\ud83d\ude00") == tok.encode_ids("😀")
    assert tok.encode("x\ud800y", "\udfff").ids == tok.encode("x\ufffdy", "\ufffd").ids
    with pytest.raises(TypeError):
        tok.encode_ids("low", False)  # type: ignore[misc]
    with pytest.raises(TypeError, match="str"):
        tok.encode_ids(b"low")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="allowed_special"):
        tok.encode_ids("low", allowed_special="some")
