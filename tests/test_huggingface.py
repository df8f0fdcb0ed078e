"""Hugging Face's tokenizer.json, both ways: what polytok writes, `tokenizers`
encodes the same (ids and offsets, on every FLORES-200 line); what
`tokenizers` writes, polytok reads into the same tokenizer; what polytok
cannot express is an error naming it."""

from __future__ import annotations

import json

import pytest

import polytok
from conftest import CORPORA

tokenizers = pytest.importorskip("tokenizers")


def differing_lines(ours, theirs, lines: list[str], decoded: bool = True) -> list[int]:
    """The lines whose ids, offsets or (with ``decoded``) decoded text
    differ between polytok and `tokenizers`."""
    mine = ours.encode_batch(lines, offsets=True)
    reference = theirs.encode_batch(lines)
    texts = ours.decode_batch([e.ids for e in mine]) if decoded else [""] * len(lines)
    their_texts = theirs.decode_batch([e.ids for e in reference], skip_special_tokens=False) if decoded else texts
    return [
        i
        for i, (a, b, text, their_text) in enumerate(zip(mine, reference, texts, their_texts))
        if a.ids != b.ids or a.offsets != b.offsets or text != their_text
    ]


def all_lines(flores) -> list[str]:
    return [line for language in sorted(flores) for line in flores[language]]


@pytest.fixture(scope="module")
def flores_lines(flores) -> list[str]:
    return all_lines(flores)


@pytest.fixture(scope="module")
def some_lines(flores) -> list[str]:
    """Every 7th language: all scripts' kinds, a fraction of the time."""
    return [line for language in sorted(flores)[::7] for line in flores[language]]


def exported(tok) -> tokenizers.Tokenizer:
    return tokenizers.Tokenizer.from_str(tok.to_tokenizer_json())


# ------------------------------------------------------------------ writing


def test_cl100k_exported_encodes_as_tokenizers_on_all_of_flores(cl100k, flores_lines, tmp_path):
    assert differing_lines(cl100k, exported(cl100k), flores_lines) == []
    # Saved by name; loaded back by content, as the preset it is.
    cl100k.save(tmp_path / "tokenizer.json")
    theirs = tokenizers.Tokenizer.from_file(str(tmp_path / "tokenizer.json"))
    again = polytok.load(tmp_path / "tokenizer.json")
    assert isinstance(again, polytok.BPETokenizer) and again.pattern == "cl100k"
    text = "Hello <|endoftext|> world 12345"
    # Added tokens are recognized in every call, as in tokenizers.
    assert again.always_special and again.encode(text).ids == theirs.encode(text).ids
    assert again.encode(text).ids == cl100k.encode(text, allowed_special="all").ids


@pytest.mark.parametrize("pattern", ["gpt2", "o200k"])
def test_trained_bpe_exported(pattern, some_lines):
    tok = polytok.BPETokenizer.train(CORPORA, vocab_size=1500, pattern=pattern, special_tokens=["<|endoftext|>"], progress=False)
    assert differing_lines(tok, exported(tok), some_lines) == []


def test_bert_exported_encodes_as_tokenizers_on_all_of_flores(bert, flores_lines):
    theirs = exported(bert)
    # BERT's preset decodes as `transformers` does, cleaning up the whole
    # text; Hugging Face's WordPiece decoder cleans each token apart.
    assert differing_lines(bert, theirs, flores_lines, decoded=False) == []
    pair = ("A question?", "An answer.")
    assert bert.encode(*pair).type_ids == theirs.encode(*pair).type_ids


@pytest.mark.parametrize("byte_fallback", [False, True])
def test_unigram_exported(byte_fallback, flores_lines, tmp_path):
    """Equal on all of FLORES but where `tokenizers`' Viterbi, which adds
    scores as 64-bit floats, picks another of two nearly equal paths than
    SentencePiece, which adds them as 32-bit floats: polytok agrees with
    SentencePiece there."""
    spm = pytest.importorskip("sentencepiece")
    tok = polytok.UnigramTokenizer.train(CORPORA, vocab_size=5000, byte_fallback=byte_fallback, progress=False)
    # The preset decodes as SentencePiece (the unknown piece as " ⁇ "),
    # the file with the nearest steps of Hugging Face's.
    differing = differing_lines(tok, exported(tok), flores_lines, decoded=False)
    assert len(differing) <= 5, len(differing)
    tok.save(tmp_path / "u.model")
    sentencepiece = spm.SentencePieceProcessor(model_file=str(tmp_path / "u.model"))
    for i in differing:
        assert tok.encode(flores_lines[i]).ids == sentencepiece.encode(flores_lines[i])


def test_composed_steps_export(some_lines):
    tok = polytok.Tokenizer(
        polytok.WordPieceTokenizer.train(CORPORA, vocab_size=5000, progress=False),
        normalizer=polytok.normalizers.Sequence(
            normalizers=[polytok.normalizers.NFKC(), polytok.normalizers.Lowercase(), polytok.normalizers.Replace(pattern="’", content="'")]
        ),
        pre_tokenizer=polytok.pre_tokenizers.Sequence(
            pretokenizers=[polytok.pre_tokenizers.WhitespaceSplit(), polytok.pre_tokenizers.Punctuation(), polytok.pre_tokenizers.Digits(individual_digits=True)]
        ),
        post_processor=polytok.processors.TemplateProcessing(single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1", special_tokens=[("[CLS]", 2), ("[SEP]", 3)]),
        special_tokens={"[CLS]": 2, "[SEP]": 3},
    )
    tok.enable_truncation(40, stride=5)
    tok.enable_padding(pad_to_multiple_of=8)
    theirs = exported(tok)
    assert differing_lines(tok, theirs, some_lines[:2000]) == []
    again = polytok.from_tokenizer_json(tok.to_tokenizer_json())
    # Without a decoder polytok joins the tokens, Hugging Face would put
    # spaces between them: the file has Fuse.
    assert again.pipeline_dict() == {**tok.pipeline_dict(), "always_special": True, "decoder": {"type": "Fuse"}}


def test_what_tokenizer_json_cannot_hold_is_refused_by_name(tmp_path):
    bpe = polytok.BPETokenizer.train_from_iterator(["low lower lowest"] * 10, vocab_size=270, progress=False)
    tok = polytok.Tokenizer(bpe, normalizer=polytok.normalizers.HalfWidth(), pre_tokenizer=polytok.pre_tokenizers.Pattern("gpt2"))
    with pytest.raises(ValueError, match="normalizer: the normalizer HalfWidth has no counterpart"):
        tok.save(tmp_path / "t.json")
    assert not (tmp_path / "t.json").exists()
    tok.save(tmp_path / "t.polytok")  # polytok JSON holds it all
    assert polytok.load(tmp_path / "t.polytok").pipeline_dict() == tok.pipeline_dict()
    with pytest.raises(ValueError, match=r"says no format: use \.json"):
        tok.save(tmp_path / "t.yaml")
    with pytest.raises(ValueError, match="model alone"):
        tok.save(tmp_path / "t.tiktoken")


# ------------------------------------------------------------------ reading


def test_berts_tokenizer_json(bert_files, flores, bert):
    """The real file, padding and truncation to 128 included."""
    ours = polytok.load(bert_files[1])
    theirs = tokenizers.Tokenizer.from_file(str(bert_files[1]))
    assert ours.padding["strategy"] == {"Fixed": 128} and ours.truncation["max_length"] == 128
    lines = [line for language in sorted(flores)[::5] for line in flores[language][:200]]
    assert differing_lines(ours, theirs, lines) == []
    assert ours.decode(ours.encode("Hello, [MASK] world!").ids, skip_special_tokens=True) == theirs.decode(theirs.encode("Hello, [MASK] world!").ids)
    assert ours.encode("a [MASK] b").ids == theirs.encode("a [MASK] b").ids  # added tokens in every call
    # Hugging Face's WordPiece decoder cleans each token apart ("don ' t").
    english = flores["eng_Latn"] + ["I don't know, it's fine."]
    for line in english:
        ids = theirs.encode(line).ids
        assert ours.decode(ids, skip_special_tokens=True) == theirs.decode(ids), line
    assert "don ' t" in ours.decode(ours.encode("I don't").ids) and "don't" in bert.decode(bert.encode("I don't").ids)


def train_reference(model, trainer, pre_tokenizer, decoder) -> tokenizers.Tokenizer:
    tok = tokenizers.Tokenizer(model)
    tok.pre_tokenizer = pre_tokenizer
    tok.decoder = decoder
    tok.train([str(p) for p in sorted(CORPORA.glob("*.txt"))], trainer)
    return tok


def byte_level_bpe(split: bool) -> tokenizers.Tokenizer:
    from tokenizers import decoders, models, pre_tokenizers, trainers

    trainer = trainers.BpeTrainer(
        vocab_size=3000, special_tokens=["<|endoftext|>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False
    )
    if split:  # Llama 3's steps: its regex, then bytes
        regex = polytok.pattern_regex("cl100k").replace("{1,3}+", "{1,3}")
        pre = pre_tokenizers.Sequence(
            [pre_tokenizers.Split(tokenizers.Regex(regex), behavior="isolated"), pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]
        )
    else:  # GPT-2's
        pre = pre_tokenizers.ByteLevel(add_prefix_space=False)
    return train_reference(models.BPE(), trainer, pre, decoders.ByteLevel())


@pytest.mark.parametrize("split", [False, True], ids=["gpt2", "llama3"])
def test_byte_level_bpe_trained_by_tokenizers(split, flores_lines, tmp_path):
    theirs = byte_level_bpe(split)
    theirs.save(str(tmp_path / "tokenizer.json"))
    ours = polytok.load(tmp_path / "tokenizer.json")
    assert isinstance(ours.model, polytok._core.Bpe)
    assert differing_lines(ours, theirs, flores_lines) == []
    text = "Ünïcode <|endoftext|> 12345 ✓"
    assert ours.decode(ours.encode(text).ids) == theirs.decode(theirs.encode(text).ids, skip_special_tokens=False)
    # Written back, tokenizers reads the same tokenizer.
    assert differing_lines(ours, exported(ours), flores_lines[::10]) == []


@pytest.mark.parametrize("add_prefix_space", [False, True])
def test_roberta_processing_trims_offsets(add_prefix_space, some_lines, tmp_path):
    """RoBERTa's files: RobertaProcessing with trim_offsets (offsets leave
    out a token's spaces)."""
    from tokenizers import processors

    theirs = byte_level_bpe(False)
    eos, bos = theirs.token_to_id("<|endoftext|>"), theirs.token_to_id("<|endoftext|>")
    theirs.post_processor = processors.RobertaProcessing(("<|endoftext|>", eos), ("<|endoftext|>", bos), trim_offsets=True, add_prefix_space=add_prefix_space)
    # RoBERTa's <mask> takes the space before it; a token that takes both.
    theirs.add_special_tokens([tokenizers.AddedToken("<mask>", lstrip=True), tokenizers.AddedToken("<both>", lstrip=True, rstrip=True)])
    theirs.save(str(tmp_path / "tokenizer.json"))
    ours = polytok.load(tmp_path / "tokenizer.json")
    mine = ours.encode_batch(some_lines, offsets=True)
    reference = theirs.encode_batch(some_lines)
    assert [(m.ids, m.offsets) for m in mine] == [(r.ids, r.offsets) for r in reference]
    pair = (" two  spaces ", "  and more  ")
    assert ours.encode(*pair).offsets == theirs.encode(*pair).offsets
    for text in ["The <mask> sat.", "  <mask><mask>  x", "a <both>  b", "<both> <mask> \u3000<mask>", "x<both>"]:
        mine, reference = ours.encode(text), theirs.encode(text)
        assert (mine.ids, mine.offsets) == (reference.ids, reference.offsets), text
    # Written back, the flags are kept.
    again = tokenizers.Tokenizer.from_str(ours.to_tokenizer_json())
    assert again.encode("a <both>  b").ids == theirs.encode("a <both>  b").ids


@pytest.mark.parametrize("add_prefix_space", [False, True])
def test_byte_level_post_processor_trims_offsets(add_prefix_space, some_lines, tmp_path):
    """GPT-NeoX's and Pythia's files: the ByteLevel post-processor with
    trim_offsets; and Llama 3's Sequence of ByteLevel and a template."""
    from tokenizers import processors

    theirs = byte_level_bpe(False)
    theirs.post_processor = processors.ByteLevel(trim_offsets=True, add_prefix_space=add_prefix_space)
    theirs.save(str(tmp_path / "tokenizer.json"))
    ours = polytok.load(tmp_path / "tokenizer.json")
    assert differing_lines(ours, theirs, some_lines) == []
    pair = (" two  spaces ", "  and more  ")
    assert (ours.encode(*pair).offsets, ours.encode(*pair).type_ids) == (theirs.encode(*pair).offsets, theirs.encode(*pair).type_ids)
    eos = theirs.token_to_id("<|endoftext|>")
    theirs.post_processor = processors.Sequence(
        [processors.ByteLevel(trim_offsets=True), processors.TemplateProcessing(single="<|endoftext|> $A", special_tokens=[("<|endoftext|>", eos)])]
    )
    theirs.save(str(tmp_path / "tokenizer.json"))
    ours = polytok.load(tmp_path / "tokenizer.json")
    mine = ours.encode_batch(some_lines[:500], offsets=True)
    reference = theirs.encode_batch(some_lines[:500])
    assert [(m.ids, m.offsets, m.special_tokens_mask) for m in mine] == [(r.ids, [tuple(o) for o in r.offsets], r.special_tokens_mask) for r in reference]
    steps = ours.post_processor.processors
    assert isinstance(steps[0], polytok.processors.ByteLevel) and isinstance(steps[1], polytok.processors.TemplateProcessing)
    # Written back as it was read.
    again = tokenizers.Tokenizer.from_str(ours.to_tokenizer_json())
    assert json.loads(again.to_str())["post_processor"] == json.loads(theirs.to_str())["post_processor"]
    assert differing_lines(ours, again, some_lines[:500]) == []


def test_unigram_trained_by_tokenizers(some_lines, tmp_path):
    from tokenizers import decoders, models, pre_tokenizers, trainers

    trainer = trainers.UnigramTrainer(vocab_size=6000, special_tokens=["<unk>", "<s>"], unk_token="<unk>", show_progress=False)
    theirs = train_reference(models.Unigram(), trainer, pre_tokenizers.Metaspace(), decoders.Metaspace())
    theirs.save(str(tmp_path / "tokenizer.json"))
    ours = polytok.load(tmp_path / "tokenizer.json")
    # The file's scores, added in 64 bits as tokenizers adds them: near
    # ties go its way, on every line.
    assert differing_lines(ours, theirs, some_lines) == []
    # Kept so in polytok's own file, and written back as they were.
    again = polytok.from_json(ours.to_json())
    assert differing_lines(again, theirs, some_lines[::3]) == []
    assert json.loads(ours.to_tokenizer_json())["model"]["vocab"] == json.loads(theirs.to_str())["model"]["vocab"]
    text = "Hello wörld, ∰ unknown"
    assert ours.decode(ours.encode(text).ids) == theirs.decode(theirs.encode(text).ids, skip_special_tokens=False)


# ---------------------------------------------------------------- bad files


def damaged(tmp_path, document: dict | str, name: str = "tokenizer.json"):
    path = tmp_path / name
    path.write_text(document if isinstance(document, str) else json.dumps(document), encoding="utf-8")
    with pytest.raises(polytok.TokenizerFileError) as info:
        polytok.load(path)
    assert name in str(info.value)
    return str(info.value)


@pytest.fixture(scope="module")
def bert_document(bert_files) -> dict:
    return json.loads(bert_files[1].read_text("utf-8"))


def test_malformed_json_names_line_and_column(tmp_path):
    assert "truncated (EOF while parsing an object at line 3" in damaged(tmp_path, '{"version": "1.0",\n"model": {\n')
    assert "not valid JSON (expected `:` at line 2 column 19)" in damaged(tmp_path, '{"version": "1.0",\n "model": {"type" "BPE"}}')
    assert "not a Hugging Face tokenizer.json (invalid type: integer `1`, expected the model object" in damaged(tmp_path, '{"model": 1}')


def test_unsupported_components_are_named_with_their_place(tmp_path, bert_document):
    def with_(**changes) -> str:
        return damaged(tmp_path, {**bert_document, **changes})

    assert 'normalizer.normalizers[1]: the normalizer "Nmt" is not supported' in with_(
        normalizer={"type": "Sequence", "normalizers": [{"type": "NFC"}, {"type": "Nmt"}]}
    )
    assert 'pre_tokenizer: the pre-tokenizer "UnicodeScripts" is not supported' in with_(pre_tokenizer={"type": "UnicodeScripts"})
    assert 'decoder: the decoder "CTC" is not supported' in with_(decoder={"type": "CTC", "pad_token": "<pad>", "word_delimiter_token": "|", "cleanup": True})
    assert 'model: the model "WordLevel" is not supported' in with_(model={"type": "WordLevel", "vocab": {"a": 0}, "unk_token": "a"})
    added = [dict(bert_document["added_tokens"][0], extra=1)] + bert_document["added_tokens"][1:]
    assert "added_tokens[0]: unknown field `extra`" in with_(added_tokens=added)
    assert "unknown field `extra`" in with_(model={**bert_document["model"], "extra": 1})
    assert "not a Hugging Face tokenizer.json" in damaged(tmp_path, {"version": "1.0"})


def test_bpe_merges_that_polytok_would_apply_differently_are_refused(tmp_path):
    theirs = byte_level_bpe(False)
    document = json.loads(theirs.to_str())
    merges = document["model"]["merges"]
    document["model"]["merges"] = [merges[1], merges[0], *merges[2:]]
    assert "model.merges[0]" in damaged(tmp_path, document)
    document["model"]["merges"] = merges[:-1]
    assert "no merge makes the token" in damaged(tmp_path, document)
    document["model"]["merges"] = merges
    document["model"]["dropout"] = 0.1
    assert "dropout" in damaged(tmp_path, document)


def test_tekken_is_named(tmp_path):
    assert "Tekken" in damaged(tmp_path, {"config": {"pattern": "a"}, "vocab": []}, "tekken.json")
