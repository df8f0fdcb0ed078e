"""Counts as a value: shards add up to the whole, files and pickles keep
them exactly, and every model trains from them the tokenizer it trains
from the corpus, byte for byte."""

from __future__ import annotations

import pickle
import random

import pytest

import polytok
from conftest import CORPORA

SHIPPED = sorted(CORPORA.glob("*.txt"))


def saved(tokenizer, path) -> bytes:
    tokenizer.save(path)
    return path.read_bytes()


@pytest.fixture(scope="module")
def shard_files(flores, tmp_path_factory):
    """Eight FLORES languages, one file each: a corpus in eight shards."""
    directory = tmp_path_factory.mktemp("shards")
    paths = []
    for language in ("eng_Latn", "deu_Latn", "fra_Latn", "rus_Cyrl", "zho_Hans", "jpn_Jpan", "arb_Arab", "hin_Deva"):
        path = directory / f"{language}.txt"
        path.write_text("\n".join(flores[language][:400]) + "\n", encoding="utf-8")
        paths.append(path)
    return paths


MODELS = {
    "bpe": (polytok.Counts.for_bpe, polytok.BPETokenizer, {"vocab_size": 600}),
    "wordpiece": (polytok.Counts.for_wordpiece, polytok.WordPieceTokenizer, {"vocab_size": 3000}),
    "unigram": (polytok.Counts.for_unigram, polytok.UnigramTokenizer, {"vocab_size": 3000}),
    "sentencepiece-bpe": (polytok.Counts.for_unigram, polytok.SentencePieceBPETokenizer, {"vocab_size": 3000}),
}


@pytest.mark.parametrize("model", MODELS)
def test_shards_train_the_tokenizer_of_the_whole_corpus(model, shard_files, tmp_path):
    make, trainer, settings = MODELS[model]
    shards = [make().add_files(path) for path in shard_files]
    whole = make().add_files(shard_files)
    total = sum(shards)
    assert total.to_bytes() == whole.to_bytes()
    assert len(total) == len(whole) and total.text_bytes == whole.text_bytes
    from_files = trainer.train(shard_files, **settings)
    from_counts = trainer.train_from_counts(total, **settings)
    assert saved(from_counts, tmp_path / "a.polytok") == saved(from_files, tmp_path / "b.polytok")
    # Training leaves the counts as they were.
    assert total.to_bytes() == whole.to_bytes()


def test_addition_is_exact_in_any_order():
    texts = [line for path in SHIPPED for line in path.read_text("utf-8").splitlines()]
    random.Random(0).shuffle(texts)
    parts = [polytok.Counts.for_bpe().add_texts(texts[i::5]) for i in range(5)]
    whole = polytok.Counts.for_bpe().add_texts(texts)
    orders = [parts, parts[::-1], parts[2:] + parts[:2]]
    for order in orders:
        assert sum(order).to_bytes() == whole.to_bytes()
    grouped = (parts[0] + parts[1]) + (parts[2] + (parts[3] + parts[4]))
    assert grouped.to_bytes() == whole.to_bytes()
    in_place = parts[0].copy()
    in_place += in_place
    assert in_place.occurrences == 2 * parts[0].occurrences
    tokenizer = polytok.BPETokenizer.train_from_counts(whole, vocab_size=400)
    assert tokenizer.to_json() == polytok.BPETokenizer.train_from_iterator(texts, vocab_size=400).to_json()


def test_arrow_columns_count_as_their_strings():
    pa = pytest.importorskip("pyarrow", reason="PyArrow comes with the ray extra")
    texts = [line for path in SHIPPED for line in path.read_text("utf-8").splitlines()][:3000]
    texts += ["", "déjà vu ½ 🙂", "tab\there"]
    expected = polytok.Counts.for_bpe().add_texts(texts).to_bytes()
    arrays = [
        pa.array(texts, pa.string()),
        pa.array(texts, pa.large_string()),
        pa.array(texts, pa.string_view()),
        pa.chunked_array([pa.array(texts[:1000]), pa.array(texts[1000:])]),
        pa.array(["skipped", *texts, "skipped too"]).slice(1, len(texts)),  # an offset into the buffers
    ]
    for array in arrays:
        for parallel in (True, False):
            assert polytok.Counts.for_bpe().add_arrow(array, parallel=parallel).to_bytes() == expected
    unigram = polytok.Counts.for_unigram().add_arrow(pa.array(texts)).to_bytes()
    assert unigram == polytok.Counts.for_unigram().add_texts(texts).to_bytes()
    with pytest.raises(TypeError, match="row 1001 is null"):
        polytok.Counts.for_bpe().add_arrow(pa.chunked_array([pa.array(texts[:1000]), pa.array(["a", None])]))
    with pytest.raises(TypeError, match="Arrow strings, not int64"):
        polytok.Counts.for_bpe().add_arrow(pa.array([1, 2]))
    with pytest.raises(TypeError, match="pyarrow Array"):
        polytok.Counts.for_bpe().add_arrow(texts)
    # Buffers that are not what they claim (which pyarrow would refuse to
    # make) are named, not read past.
    core = polytok.Counts.for_bpe()._core
    offsets = bytes(memoryview(pa.array([0, 2, 9], pa.int32()).buffers()[1]))
    with pytest.raises(ValueError, match="row 1 of the Arrow array spans bytes 2..9 of a 3-byte data buffer"):
        core.add_arrow_strings(offsets, b"abc", 4, 0, 2)
    with pytest.raises(ValueError, match="row 0 of the Arrow array is not UTF-8"):
        core.add_arrow_strings(offsets, b"\xff\xfeabcdefg", 4, 0, 1)
    with pytest.raises(ValueError, match="too short"):
        core.add_arrow_strings(offsets, b"abcdefghi", 4, 1, 5)
    with pytest.raises(ValueError, match="4 or 8 bytes wide"):
        core.add_arrow_strings(offsets, b"abcdefghi", 2, 0, 1)
    assert core.occurrences == 0


def test_transfer_bytes_add_up_in_one_step_whatever_their_keys():
    """The workers of a Ray job send their tables unsorted: those hashed
    with the driver's key add shard by shard, the others piece by piece."""
    total = polytok.Counts.for_wordpiece().add_texts(["already counted"])
    key = total._core.table_key
    parts = [polytok.Counts(total._core.copy(False, key)).add_files(path) for path in SHIPPED]
    parts.append(polytok.Counts.for_wordpiece().add_files(SHIPPED[0]))
    parts[-1] = polytok.Counts(parts[-1]._core.copy(True, (key + 1) % 2**64))
    assert parts[-1]._core.table_key != key and len(parts[-1]) == len(parts[0])
    expected = polytok.Counts.total([total, *parts])
    total._core.add_transfer_bytes([part._core.to_transfer_bytes() for part in parts], "part")
    assert total.to_bytes() == expected.to_bytes()
    alone = polytok.Counts(polytok._core.PieceCounter.from_transfer_bytes([parts[1]._core.to_transfer_bytes()], "part"))
    assert alone.to_bytes() == parts[1].to_bytes() and alone._core.table_key == key
    with pytest.raises(ValueError, match="counts made with kind"):
        total._core.add_transfer_bytes([polytok.Counts.for_bpe()._core.to_transfer_bytes()], "part")
    with pytest.raises(polytok.TokenizerFileError, match="part 0: not a polytok count transfer"):
        total._core.add_transfer_bytes([b"nonsense"], "part")
    with pytest.raises(polytok.TokenizerFileError, match="part 1: damaged: its checksum"):
        total._core.add_transfer_bytes([parts[0]._core.to_transfer_bytes(), parts[1]._core.to_transfer_bytes()[:-1]], "part")
    assert total.to_bytes() == expected.to_bytes()


def test_files_and_pickles_keep_counts_exactly(tmp_path):
    counts = polytok.Counts.for_bpe(pattern="o200k", special_tokens=["<|endoftext|>"]).add_files(SHIPPED)
    path = tmp_path / "all.counts"
    counts.save(path)
    again = polytok.Counts.load(path)
    assert again.to_bytes() == path.read_bytes() == counts.to_bytes()
    assert again.settings == {"kind": "pattern", "pattern": "o200k", "special_tokens": ["<|endoftext|>"]}
    assert again.most_common(10) == counts.most_common(10)
    assert pickle.loads(pickle.dumps(counts)).to_bytes() == counts.to_bytes()
    # Compact: shared prefixes written once, counts as varints.
    raw = sum(len(piece) + 8 for piece, _ in counts.most_common())
    assert len(path.read_bytes()) < raw


def test_pruning_records_what_it_drops(tmp_path):
    counts = polytok.Counts.for_wordpiece().add_files(SHIPPED)
    total, pieces = counts.occurrences, len(counts)
    counts.prune(200)
    assert len(counts) == 200
    assert counts.dropped == {"pieces": pieces - 200, "occurrences": total - counts.occurrences}
    assert [count for _, count in counts.most_common()] == sorted((c for _, c in counts.most_common()), reverse=True)
    path = tmp_path / "pruned.counts"
    counts.save(path)
    assert polytok.Counts.load(path).dropped == counts.dropped
    assert polytok.WordPieceTokenizer.train_from_counts(counts, vocab_size=300).vocab_size <= 300


@pytest.mark.parametrize(
    "a, b, setting",
    [
        (lambda: polytok.Counts.for_bpe(), lambda: polytok.Counts.for_bpe(pattern="gpt2"), "pattern"),
        (lambda: polytok.Counts.for_bpe(), lambda: polytok.Counts.for_bpe(special_tokens=["<s>"]), "special_tokens"),
        (lambda: polytok.Counts.for_wordpiece(), lambda: polytok.Counts.for_wordpiece(lowercase=False), "strip_accents"),
        (lambda: polytok.Counts.for_bpe(), lambda: polytok.Counts.for_unigram(), "kind"),
        (lambda: polytok.Counts.for_unigram(), lambda: polytok.Counts.for_unigram(add_dummy_prefix=False), "add_dummy_prefix"),
    ],
)
def test_counts_made_differently_refuse_to_add(a, b, setting):
    with pytest.raises(ValueError, match=f"counts made with {setting} .* cannot be added"):
        a() + b()


def test_a_trainer_refuses_counts_of_another_model():
    with pytest.raises(ValueError, match="WordPieceTokenizer trains from counts made for wordpiece"):
        polytok.WordPieceTokenizer.train_from_counts(polytok.Counts.for_bpe().add_texts(["a b"]), vocab_size=50)
    with pytest.raises(TypeError, match="polytok.Counts"):
        polytok.BPETokenizer.train_from_counts({"a": 1}, vocab_size=300)
    with pytest.raises(TypeError):
        polytok.Counts.for_bpe() + 1


def test_damaged_count_files_are_named(tmp_path):
    path = tmp_path / "x.counts"
    polytok.Counts.for_bpe().add_files(SHIPPED).save(path)
    data = path.read_bytes()
    cases = {
        b"just some text": "not a polytok count file",
        data[:15] + b"\x02" + data[16:]: "version 2",
        data[: len(data) // 2]: "checksum",
        data[:100] + bytes([data[100] ^ 1]) + data[101:]: "checksum",
        data[:18]: "truncated",
    }
    for damaged, what in cases.items():
        path.write_bytes(damaged)
        with pytest.raises(polytok.TokenizerFileError, match=what) as error:
            polytok.Counts.load(path)
        assert str(path) in str(error.value)


def test_the_command_line_counts_merges_and_trains_from_counts(tmp_path):
    from click.testing import CliRunner

    from polytok.cli import main

    run = lambda *args: CliRunner().invoke(main, [str(a) for a in args])  # noqa: E731
    files = [str(p) for p in SHIPPED]
    half = len(files) // 2
    assert run("count", *files[:half], "-o", tmp_path / "a.counts", "-q").exit_code == 0
    assert run("count", *files[half:], "-o", tmp_path / "b.counts", "-q").exit_code == 0
    merged = run("count", "--merge", tmp_path / "a.counts", tmp_path / "b.counts", "-o", tmp_path / "all.counts")
    assert merged.exit_code == 0 and "added" in merged.output
    assert run("count", *files, "-o", tmp_path / "whole.counts", "-q").exit_code == 0
    assert (tmp_path / "all.counts").read_bytes() == (tmp_path / "whole.counts").read_bytes()
    for model in ("bpe", "wordpiece", "unigram"):
        vocab = "500" if model == "bpe" else "4000"
        assert run("count", "--model", model, *files, "-o", tmp_path / f"{model}.counts", "-q").exit_code == 0
        from_counts = run("train", "--model", model, "--from-counts", tmp_path / f"{model}.counts", "--vocab-size", vocab, "-o", tmp_path / "c.polytok", "-q")
        from_files = run("train", "--model", model, *files, "--vocab-size", vocab, "-o", tmp_path / "f.polytok", "-q")
        assert from_counts.exit_code == from_files.exit_code == 0, from_counts.output + from_files.output
        assert (tmp_path / "c.polytok").read_bytes() == (tmp_path / "f.polytok").read_bytes(), model
    # By language: a directory in, a directory of count files out; they
    # merge language by language and train as their sum.
    assert run("count", "--by-language", CORPORA, "-o", tmp_path / "by_language", "-q").exit_code == 0
    assert sorted(p.stem for p in (tmp_path / "by_language").iterdir()) == sorted(p.stem for p in SHIPPED)
    assert (tmp_path / "by_language" / "de.counts").read_bytes() == polytok.Counts.for_bpe().add_files(CORPORA / "de.txt").to_bytes()
    merged = run("count", "--merge", "--by-language", tmp_path / "by_language", tmp_path / "by_language", "-o", tmp_path / "twice")
    assert merged.exit_code == 0 and f"added {len(SHIPPED)} languages" in merged.output, merged.output
    assert polytok.LanguageCounts.load(tmp_path / "twice")["de"].occurrences == 2 * polytok.Counts.load(tmp_path / "by_language" / "de.counts").occurrences
    assert run("train", "--from-counts", tmp_path / "by_language", "--vocab-size", "500", "-o", tmp_path / "l.polytok", "-q").exit_code == 0
    assert run("train", *files, "--vocab-size", "500", "-o", tmp_path / "f.polytok", "-q").exit_code == 0
    by_language, whole = polytok.load(tmp_path / "l.polytok"), polytok.load(tmp_path / "f.polytok")
    assert by_language.training.pop("languages")["de"] == {"bytes": (CORPORA / "de.txt").stat().st_size}
    assert by_language.training.pop("balance") is None
    assert by_language.to_json() == whole.to_json()  # the same tokenizer; its record also names the languages
    refused = {
        ("count", "--by-language", CORPORA, CORPORA, "-o", tmp_path / "x"): "one directory",
        ("count", "--by-language", CORPORA, "-o", tmp_path / "x.tsv"): "not a .tsv file",
        ("train", "--from-counts", tmp_path / "all.counts", "--pattern", "gpt2", "--vocab-size", "300", "-o", tmp_path / "x.json"): "the counts' own",
        ("train", "--from-counts", tmp_path / "all.counts", *files[:1], "--vocab-size", "300", "-o", tmp_path / "x.json"): "one of them",
        ("train", "--model", "wordpiece", "--from-counts", tmp_path / "all.counts", "--vocab-size", "300", "-o", tmp_path / "x.json"): "made for wordpiece",
        ("count", "--merge", tmp_path / "all.counts", tmp_path / "wordpiece.counts", "-o", tmp_path / "x.counts"): 'kind "bert" cannot be added',
        ("count", "--merge", tmp_path / "all.counts", files[0], "-o", tmp_path / "x.counts"): "not a polytok count file",
    }
    for args, message in refused.items():
        result = run(*args)
        assert result.exit_code != 0 and message in result.output, (args, result.output)


def test_sentencepiece_trains_from_the_tsv_of_counts(tmp_path):
    spm = pytest.importorskip("sentencepiece")
    counts = polytok.Counts.for_unigram().add_files(CORPORA / "en.txt")
    counts.save_tsv(tmp_path / "en.tsv")
    lines = (tmp_path / "en.tsv").read_text("utf-8").splitlines()
    assert lines[0] == "the\t357" and len(lines) == len(counts)
    common = dict(model_type="unigram", vocab_size=800, normalization_rule_name="identity", minloglevel=2, num_threads=1)
    spm.SentencePieceTrainer.train(input=str(tmp_path / "en.tsv"), input_format="tsv", model_prefix=str(tmp_path / "tsv"), **common)
    spm.SentencePieceTrainer.train(input=str(CORPORA / "en.txt"), model_prefix=str(tmp_path / "raw"), **common)
    pieces = [
        {model.id_to_piece(i) for i in range(model.get_piece_size())}
        for model in (spm.SentencePieceProcessor(model_file=str(tmp_path / f"{name}.model")) for name in ("tsv", "raw"))
    ]
    assert len(pieces[0] & pieces[1]) >= 0.99 * 800
    with pytest.raises(ValueError, match="Counts.for_unigram"):
        polytok.Counts.for_bpe().save_tsv(tmp_path / "x.tsv")


def test_language_counts_add_save_and_sum_to_the_unlabelled_counts(flores, tmp_path):
    languages = {"eng_Latn": flores["eng_Latn"][:200], "deu_Latn": flores["deu_Latn"][:200], "zho_Hans": flores["zho_Hans"][:200]}
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "eng_Latn.txt").write_text("\n".join(languages["eng_Latn"]) + "\n", encoding="utf-8")
    (corpus / "deu_Latn").mkdir()  # a folder per language too
    (corpus / "deu_Latn" / "a.txt").write_text("\n".join(languages["deu_Latn"][:100]) + "\n", encoding="utf-8")
    (corpus / "deu_Latn" / "b.txt").write_text("\n".join(languages["deu_Latn"][100:]) + "\n", encoding="utf-8")
    (corpus / "zho_Hans.txt").write_text("\n".join(languages["zho_Hans"]) + "\n", encoding="utf-8")
    (corpus / "README.md").write_text("not a language")
    by_language = polytok.LanguageCounts(polytok.Counts.for_unigram()).add_directory(corpus)
    assert list(by_language) == ["deu_Latn", "eng_Latn", "zho_Hans"]
    for code, lines in languages.items():
        assert by_language[code].occurrences == polytok.Counts.for_unigram().add_texts(lines).occurrences
    whole = polytok.Counts.for_unigram().add_files(sorted(corpus.rglob("*.txt")))
    assert by_language.total().to_bytes() == whole.to_bytes()
    # Added language by language; saved as a directory; pickled.
    doubled = by_language + by_language
    assert doubled["eng_Latn"].occurrences == 2 * by_language["eng_Latn"].occurrences
    by_language.save(tmp_path / "saved")
    assert sorted(p.name for p in (tmp_path / "saved").iterdir()) == ["deu_Latn.counts", "eng_Latn.counts", "zho_Hans.counts"]
    loaded = polytok.LanguageCounts.load(tmp_path / "saved")
    assert {code: loaded[code].to_bytes() for code in loaded} == {code: by_language[code].to_bytes() for code in by_language}
    assert pickle.loads(pickle.dumps(by_language)).total().to_bytes() == whole.to_bytes()
    assert polytok.UnigramTokenizer.train_from_counts(loaded.total(), vocab_size=2000).to_json() == (
        polytok.UnigramTokenizer.train_from_counts(whole, vocab_size=2000).to_json()
    )


def test_bad_language_input_is_named(tmp_path):
    by_language = polytok.LanguageCounts(polytok.Counts.for_bpe())
    with pytest.raises(ValueError, match="'../x' is not a language code"):
        by_language.add_texts("../x", ["a"])
    with pytest.raises(TypeError, match="a language code is a string"):
        by_language.add_texts(7, ["a"])
    with pytest.raises(ValueError, match="no languages to save"):
        by_language.save(tmp_path / "empty")
    with pytest.raises(ValueError, match="counts made with pattern"):
        by_language + polytok.LanguageCounts(polytok.Counts.for_bpe(pattern="gpt2"))
    twice = tmp_path / "twice"
    (twice / "de").mkdir(parents=True)
    (twice / "de" / "a.txt").write_text("a")
    (twice / "de.txt").write_text("b")
    with pytest.raises(ValueError, match="language 'de' is given twice"):
        by_language.add_directory(twice)
    bad_name = tmp_path / "bad"
    bad_name.mkdir()
    (bad_name / "my file.txt").write_text("a")
    with pytest.raises(ValueError, match="'my file' is not a language code"):
        by_language.add_directory(bad_name)
    with pytest.raises(FileNotFoundError, match="no language files"):
        by_language.add_directory(tmp_path / "empty_corpus" if (tmp_path / "empty_corpus").mkdir() is None else None)
    saved = tmp_path / "saved"
    by_language.add_texts("en", ["hello"]).save(saved)
    with pytest.raises(ValueError, match="holds count files of other languages \\(en.counts\\)"):
        polytok.LanguageCounts(polytok.Counts.for_bpe()).add_texts("de", ["hallo"]).save(saved)
    polytok.Counts.for_bpe(pattern="gpt2").add_texts(["x"]).save(saved / "fr.counts")
    with pytest.raises(ValueError, match="fr.counts: counts made with"):
        polytok.LanguageCounts.load(saved)
