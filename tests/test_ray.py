"""polytok.ray on a local Ray (two CPUs): counts over many blocks equal a
single-process count and train the same tokenizer byte for byte; tokenizing
a dataset gives encode_batch's ids; bad columns are named."""

from __future__ import annotations

import pickle

import pytest

import polytok

ray = pytest.importorskip("ray", reason='Ray is an optional extra: pip install "polytok[ray]"')
import polytok.ray  # noqa: E402  (after the skip)
import pyarrow as pa  # noqa: E402  (Ray's own dependency)


@pytest.fixture(scope="module")
def local_ray():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def texts(flores) -> list[str]:
    languages = ("eng_Latn", "deu_Latn", "rus_Cyrl", "zho_Hans", "arb_Arab", "hin_Deva", "jpn_Jpan", "fra_Latn")
    return [line for language in languages for line in flores[language][:300]]


def dataset(texts, blocks: int = 8):
    return ray.data.from_items([{"text": t, "n": i} for i, t in enumerate(texts)]).repartition(blocks)


@pytest.mark.parametrize("make", [polytok.Counts.for_bpe, polytok.Counts.for_wordpiece, polytok.Counts.for_unigram])
def test_counts_of_eight_blocks_equal_one_process(local_ray, texts, make):
    expected = make().add_texts(texts).to_bytes()
    for workers in (None, 1, 3):  # one per CPU, one, more than the CPUs
        assert polytok.ray.count(dataset(texts), make(), workers=workers).to_bytes() == expected
    # Counts given are included; more workers than FAN_IN add in a tree.
    start = make().add_texts(texts[:10])
    counted = polytok.ray.count(dataset(texts), start, workers=polytok.ray.FAN_IN + 3)
    assert counted.to_bytes() == (make().add_texts(texts[:10]) + make().add_texts(texts)).to_bytes()
    assert len(start) > 0 and start.text_bytes == make().add_texts(texts[:10]).text_bytes  # left as they were


def test_counts_by_language_equal_one_process(local_ray, flores):
    languages = ("eng_Latn", "deu_Latn", "rus_Cyrl", "zho_Hans")
    rows = [{"text": line, "lang": code} for code in languages for line in flores[code][:200]]
    rows = rows[::2] + rows[1::2]  # languages mixed within blocks
    ds = ray.data.from_items(rows).repartition(6)
    counted = polytok.ray.count(ds, polytok.Counts.for_bpe(), language_column="lang")
    assert isinstance(counted, polytok.LanguageCounts) and list(counted) == sorted(languages)
    for code in languages:
        assert counted[code].to_bytes() == polytok.Counts.for_bpe().add_texts(flores[code][:200]).to_bytes()
    # LanguageCounts given are included, language by language.
    start = polytok.LanguageCounts(polytok.Counts.for_bpe()).add_texts("eng_Latn", ["extra"]).add_texts("fra_Latn", ["en plus"])
    again = polytok.ray.count(ds, start, language_column="lang")
    assert list(again) == sorted([*languages, "fra_Latn"])
    assert again["eng_Latn"].to_bytes() == (counted["eng_Latn"] + start["eng_Latn"]).to_bytes()
    with pytest.raises(TypeError, match="column 'lang': row 1 holds NoneType"):
        polytok.ray.count(ray.data.from_items([{"text": "a", "lang": "en"}, {"text": "b", "lang": None}]),
                          polytok.Counts.for_bpe(), language_column="lang")
    with pytest.raises(ValueError, match="'en gb' is not a language code"):
        polytok.ray.count(ray.data.from_items([{"text": "a", "lang": "en gb"}]), polytok.Counts.for_bpe(), language_column="lang")
    with pytest.raises(ValueError, match="with a language_column"):
        polytok.ray.count(ds, start)


def test_the_tokenizer_trained_from_ray_counts_is_byte_identical(local_ray, texts, tmp_path):
    counts = polytok.ray.count(dataset(texts), polytok.Counts.for_bpe(pattern="o200k"))
    from_ray = polytok.BPETokenizer.train_from_counts(counts, vocab_size=2000)
    local = polytok.BPETokenizer.train_from_iterator(texts, vocab_size=2000, pattern="o200k")
    assert from_ray.to_json() == local.to_json()


def test_tokenizing_a_dataset_gives_encode_batch_ids(local_ray, texts, cl100k, bert):
    for tokenizer in (cl100k, bert):
        tokenized = polytok.ray.tokenize(dataset(texts, 4), tokenizer, batch_size=64)
        batches = list(tokenized.iter_batches(batch_format="pyarrow", batch_size=None))
        assert all(batch.schema.field("ids").type == pa.large_list(pa.uint32()) for batch in batches)
        rows = sorted((row for batch in batches for row in batch.to_pylist()), key=lambda row: row["n"])
        assert [row["text"] for row in rows] == texts
        assert [row["ids"] for row in rows] == tokenizer.encode_batch_ids(texts)


def test_tokenizers_travel_as_their_json(cl100k):
    data = pickle.dumps(cl100k)
    assert len(data) < 1.2 * len(cl100k.to_json().encode())
    assert pickle.loads(data).encode_ids("Hello, Ray!") == cl100k.encode_ids("Hello, Ray!")


def test_bad_columns_are_named(local_ray):
    ds = ray.data.from_items([{"text": "fine"}, {"text": "also fine"}, {"text": None}])
    with pytest.raises(ValueError, match="no column 'body'"):
        polytok.ray.count(ds, polytok.Counts.for_bpe(), column="body")
    with pytest.raises(ValueError, match="no column 'body'"):
        polytok.ray.tokenize(ds, polytok.BPETokenizer.train_from_iterator(["a"], vocab_size=256), column="body")
    with pytest.raises(TypeError, match="column 'text': row 2 holds NoneType"):
        polytok.ray.count(ds, polytok.Counts.for_bpe())
    numbers = ray.data.from_items([{"text": 7}, {"text": 8}])
    with pytest.raises(TypeError, match="column 'text': row 0 holds int"):
        polytok.ray.count(numbers, polytok.Counts.for_bpe())
    with pytest.raises(ValueError, match="workers must be a positive integer"):
        polytok.ray.count(ds, polytok.Counts.for_bpe(), workers=0)
    # Tokenizing is lazy: the worker's TypeError arrives in Ray's error.
    with pytest.raises(Exception, match="column 'text': row 0 of a block holds int, not a string"):
        polytok.ray.tokenize(numbers, polytok.BPETokenizer.train_from_iterator(["a"], vocab_size=256)).take_all()
