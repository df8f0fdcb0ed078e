"""WordPiece training by likelihood score, files and bad input."""

from __future__ import annotations

import random
import re
from collections import Counter
from fractions import Fraction

import pytest

import polytok

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def reference_vocab(texts: list[str], vocab_size: int, min_frequency: int = 1) -> list[str]:
    """WordPiece training by brute force, straight from the definition: at
    every step score every adjacent pair, count(ab) / (count(a) count(b)),
    over all words weighted by frequency, and merge the best (ties: higher
    pair count, then smaller ids). Texts must be lowercase ASCII words."""
    words = Counter(w for t in texts for w in t.split())
    vocab = list(SPECIALS)
    vocab += sorted({w[0] for w in words})
    vocab += sorted({"##" + c for w in words for c in w[1:]})
    ids = {t: i for i, t in enumerate(vocab)}
    segmented = {w: [w[0]] + ["##" + c for c in w[1:]] for w in words}
    while len(vocab) < vocab_size:
        symbols, pairs = Counter(), Counter()
        for w, n in words.items():
            seq = segmented[w]
            for s in seq:
                symbols[s] += n
            for a, b in zip(seq, seq[1:]):
                pairs[a, b] += n
        candidates = [(Fraction(c, symbols[a] * symbols[b]), c, -ids[a], -ids[b], a, b) for (a, b), c in pairs.items() if c >= min_frequency]
        if not candidates:
            break
        *_, a, b = max(candidates)
        merged = a + b[2:]
        if merged not in ids:
            ids[merged] = len(vocab)
            vocab.append(merged)
        for w, seq in segmented.items():
            out, i = [], 0
            while i < len(seq):
                if i + 1 < len(seq) and seq[i] == a and seq[i + 1] == b:
                    out.append(merged)
                    i += 2
                else:
                    out.append(seq[i])
                    i += 1
            segmented[w] = out
    return vocab


def vocab_of(tok: polytok.WordPieceTokenizer) -> list[str]:
    return [tok.id_to_token(i) for i in range(tok.vocab_size)]


@pytest.mark.parametrize("seed", range(40))
def test_each_merge_has_the_best_score(seed):
    rng = random.Random(seed)
    alphabet = "abcdef"[: rng.randint(2, 6)]
    stems = ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 6))) for _ in range(rng.randint(3, 12))]
    texts = [" ".join(rng.choice(stems) for _ in range(rng.randint(1, 8))) for _ in range(30)]
    size = len(SPECIALS) + 2 * len(alphabet) + rng.randint(1, 25)
    min_frequency = rng.choice([1, 2])
    tok = polytok.WordPieceTokenizer.train_from_iterator(
        texts, vocab_size=size, min_frequency=min_frequency, progress=False
    )
    assert vocab_of(tok) == reference_vocab(texts, size, min_frequency)


def test_likelihood_prefers_cohesive_pairs_where_bpe_takes_frequent_ones():
    # "e s" is by far the most frequent pair, but e and s are everywhere;
    # "q u" is rare and never apart: the likelihood score takes it first.
    texts = ["ques es es es es eses sees seas easy ease"]
    words = Counter(texts[0].split())
    pair_counts = Counter()
    for w, n in words.items():
        for a, b in zip(w, w[1:]):
            pair_counts[a + b] += n
    assert pair_counts.most_common(1)[0][0] == "es" and pair_counts["qu"] == 1
    wordpiece = polytok.WordPieceTokenizer.train_from_iterator(texts, vocab_size=14, min_frequency=1, progress=False)
    assert vocab_of(wordpiece)[-1] == "qu"
    bpe = polytok.BPETokenizer.train_from_iterator(texts, vocab_size=257, min_frequency=1, progress=False)
    assert bpe.id_to_token(256) == "es"


def test_training_is_deterministic_and_files_round_trip(tmp_path, sample_corpus):
    a = polytok.WordPieceTokenizer.train_from_iterator(sample_corpus, vocab_size=6000, progress=False)
    b = polytok.WordPieceTokenizer.train_from_iterator(sample_corpus, vocab_size=6000, progress=False)
    a.save(tmp_path / "a.polytok")
    b.save(tmp_path / "b.polytok")
    assert (tmp_path / "a.polytok").read_bytes() == (tmp_path / "b.polytok").read_bytes()
    loaded = polytok.load(tmp_path / "a.polytok")
    assert isinstance(loaded, polytok.WordPieceTokenizer)
    assert loaded.training["score"].startswith("count(ab)")
    a.save_vocab(tmp_path / "vocab.txt")
    from_vocab = polytok.WordPieceTokenizer.from_vocab(tmp_path / "vocab.txt")
    text = " ".join(sample_corpus[::50])
    assert loaded.encode(text) == from_vocab.encode(text) == a.encode(text)
    assert vocab_of(a)[:5] == SPECIALS


def test_limit_alphabet_leaves_rare_characters_out(sample_corpus):
    full = polytok.WordPieceTokenizer.train_from_iterator(sample_corpus, vocab_size=6000, progress=False)
    limited = polytok.WordPieceTokenizer.train_from_iterator(
        sample_corpus, vocab_size=6000, limit_alphabet=100, progress=False
    )
    chars = lambda tok: {t.removeprefix("##") for t in vocab_of(tok) if len(t.removeprefix("##")) == 1}
    assert len(chars(limited)) <= 100 < len(chars(full))
    assert limited.encode("ꙮ", add_special_tokens=False) == [limited.token_to_id("[UNK]")]


def test_encoding_helpers(bert):
    ids = bert.encode("Hello, world!", add_special_tokens=True)
    assert ids[0] == bert.token_to_id("[CLS]") and ids[-1] == bert.token_to_id("[SEP]")
    assert bert.decode(ids[1:-1]) == "hello, world!"
    assert bert.decode(ids[1:-1], cleanup=False) == "hello , world !"
    assert bert.tokens("unaffable") == ["una", "##ffa", "##ble"]
    assert bert.encode("[MASK]", add_special_tokens=False) != [bert.token_to_id("[MASK]")]
    assert bert.encode("[MASK]", add_special_tokens=False, allowed_special={"[MASK]"}) == [bert.token_to_id("[MASK]")]


# ----------------------------------------------------------------- bad input


def test_bad_vocab_files(tmp_path):
    cases = {
        "dup.txt": ("[UNK]\na\nb\na\n", "line 4: token \"a\" already on line 2"),
        "nounk.txt": ("a\nb\n", "lacks the unknown token \"[UNK]\""),
        "blank.txt": ("[UNK]\n\nb\n", "line 2: empty token"),
        "empty.txt": ("", "no tokens"),
    }
    for name, (text, message) in cases.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
        with pytest.raises(polytok.TokenizerFileError, match=re.escape(message)) as info:
            polytok.WordPieceTokenizer.from_vocab(tmp_path / name)
        assert name in str(info.value)
    (tmp_path / "latin1.txt").write_bytes(b"[UNK]\ncaf\xe9\n")
    with pytest.raises(polytok.TokenizerFileError, match="latin1.txt: not a vocab.txt"):
        polytok.WordPieceTokenizer.from_vocab(tmp_path / "latin1.txt")


def test_bad_json_and_ids(tmp_path, bert):
    bert.save(tmp_path / "bert.json")
    text = (tmp_path / "bert.json").read_text()
    (tmp_path / "cut.polytok").write_text(text[: len(text) // 2])
    with pytest.raises(polytok.TokenizerFileError, match="cut.polytok"):
        polytok.WordPieceTokenizer.load(tmp_path / "cut.polytok")
    with pytest.raises(ValueError, match="unknown token id 40000"):
        bert.decode([1, 40000])


def test_bad_training_input(tmp_path):
    with pytest.raises(polytok.CorpusError, match="empty"):
        polytok.WordPieceTokenizer.train_from_iterator(["", "  "], vocab_size=100, progress=False)
    with pytest.raises(ValueError, match="a special token is empty"):
        polytok.WordPieceTokenizer.train_from_iterator(["hello"], vocab_size=100, special_tokens=["[UNK]", ""])
    with pytest.raises(ValueError, match="vocab_size 10 is too small: .* already take"):
        polytok.WordPieceTokenizer.train_from_iterator(["hello world"], vocab_size=10, progress=False)
    (tmp_path / "bad.txt").write_bytes(b"good line\nbad \xff byte\n")
    with pytest.raises(polytok.CorpusError, match=r"bad.txt.*line 2"):
        polytok.WordPieceTokenizer.train(tmp_path / "bad.txt", vocab_size=100, progress=False)
    tok = polytok.WordPieceTokenizer.train(tmp_path / "bad.txt", vocab_size=100, errors="replace", progress=False)
    assert tok.vocab_size > 5
