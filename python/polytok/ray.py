"""Counting and tokenizing Ray datasets: corpora of any size, on a laptop or
a cluster (``pip install "polytok[ray]"``).

- :func:`count`: the piece counts of a text column, counted block by block
  on Ray's workers and added in a tree (a few partial counts per step, so
  no worker, nor the driver, ever holds more than a few tables); train on
  the result with ``train_from_counts``.
- :func:`tokenize`: a column of ids (Arrow lists of ``uint32``, built from
  NumPy arrays without a Python object per id), encoded on the workers.

Workers receive counts and tokenizers as the bytes of their files
(:class:`polytok.Counts` and every tokenizer pickle that way), never as a
graph of Python objects.

>>> import ray, polytok, polytok.ray                       # doctest: +SKIP
>>> ds = ray.data.read_text("s3://bucket/corpus/")        # doctest: +SKIP
>>> counts = polytok.ray.count(ds, polytok.Counts.for_bpe(), column="text")  # doctest: +SKIP
>>> tok = polytok.BPETokenizer.train_from_counts(counts, vocab_size=64_000)  # doctest: +SKIP
>>> ids = polytok.ray.tokenize(ds, tok, column="text")  # doctest: +SKIP
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

from polytok.counts import Counts

if TYPE_CHECKING:
    import ray.data

    from polytok.tokenizer import Tokenizer

#: Partial counts added at a time in each step of the tree.
FAN_IN = 8


def _texts(batch, column: str) -> list[str]:
    """The strings of ``column`` of a PyArrow batch; a ``TypeError`` names
    the column and the first value (in the batch) that is not a string."""
    values = batch.column(column).to_pylist()
    for i, value in enumerate(values):
        if not isinstance(value, str):
            raise TypeError(f"column {column!r}: row {i} of a block holds {type(value).__name__}, not a string")
    return values


class _CountBlock:
    """Counts one batch of texts into counts like ``template``; one row out,
    the bytes of the counts."""

    def __init__(self, template: bytes, column: str) -> None:
        self.template, self.column = template, column

    def __call__(self, batch):
        import pyarrow as pa

        counts = Counts.from_bytes(self.template).add_texts(_texts(batch, self.column))
        return pa.table({"counts": pa.array([counts.to_bytes()], pa.large_binary())})


def _add_counts(batch):
    """Adds the partial counts of a batch of rows into one row."""
    import pyarrow as pa

    parts = (Counts.from_bytes(data) for data in batch.column("counts").to_pylist())
    return pa.table({"counts": pa.array([Counts.total(parts).to_bytes()], pa.large_binary())})


def _check_column(dataset: ray.data.Dataset, column: str) -> None:
    """A ``ValueError`` naming ``column`` when the dataset lacks it."""
    schema = dataset.schema()
    names = list(schema.names) if schema is not None else []
    if column not in names:
        raise ValueError(f"the dataset has no column {column!r} (its columns: {', '.join(map(repr, names)) or 'none'})")


def _first_bad_row(dataset: ray.data.Dataset, column: str) -> str:
    """Where the first value of ``column`` that is not a string is, found
    on the driver (only after a worker met one)."""
    for i, row in enumerate(dataset.iter_rows()):
        value = row[column]
        if not isinstance(value, str):
            return f"column {column!r}: row {i} holds {type(value).__name__} ({value!r:.60}), not a string"
    return f"column {column!r} holds a value that is not a string"


def count(dataset: ray.data.Dataset, counts: Counts, *, column: str = "text", batch_size: int | None = None) -> Counts:
    """The piece counts of ``column`` of ``dataset`` (each row a text), made
    the way ``counts`` (empty, or not: they are included) are made, e.g.
    ``Counts.for_bpe(pattern="o200k")``. Batches of ``batch_size`` rows are
    counted on the workers, and the partial counts added ``FAN_IN`` at a
    time until one is left: the result equals counting every row in one
    process (``Counts.add_texts``), exactly. By default a block is one
    batch: fewer partial counts to send and add. A missing column is a
    ``ValueError``; a value that is not a string, a ``TypeError`` naming
    the column and the first such row."""
    if not isinstance(counts, Counts):
        raise TypeError(f"counts must be polytok.Counts, not {type(counts).__name__}")
    _check_column(dataset, column)
    template = counts.empty().to_bytes()  # the settings alone travel to the workers
    partial = dataset.select_columns([column]).map_batches(
        _CountBlock(template, column), batch_size=batch_size, batch_format="pyarrow"
    )
    try:
        partial = partial.materialize()
        while partial.count() > 1:
            partial = partial.map_batches(_add_counts, batch_size=FAN_IN, batch_format="pyarrow").materialize()
    except Exception as e:  # a worker's TypeError arrives wrapped in Ray's error
        if "not a string" in str(e):
            raise TypeError(_first_bad_row(dataset, column)) from None
        raise
    rows = partial.take_all()
    total = counts.copy()
    if rows:
        total += Counts.from_bytes(rows[0]["counts"])
    return total


#: Tokenizers loaded in this (worker) process, by the digest of their JSON:
#: Ray reuses worker processes, so each loads a tokenizer once.
_LOADED: dict[str, Tokenizer] = {}


class _EncodeBlock:
    """Encodes one batch of texts with a tokenizer shipped as its polytok
    JSON; adds the ids as an Arrow column of ``uint32`` lists."""

    def __init__(self, tokenizer_json: str, column: str, output_column: str, add_special_tokens: bool) -> None:
        self.digest = hashlib.sha256(tokenizer_json.encode()).hexdigest()
        self.tokenizer_json, self.column, self.output_column = tokenizer_json, column, output_column
        self.add_special_tokens = add_special_tokens

    def __call__(self, batch):
        import pyarrow as pa

        from polytok.tokenizer import from_json

        tokenizer = _LOADED.get(self.digest)
        if tokenizer is None:
            tokenizer = _LOADED[self.digest] = from_json(self.tokenizer_json, "<tokenizer sent to a Ray worker>")
        flat = tokenizer.encode_batch_flat(_texts(batch, self.column), add_special_tokens=self.add_special_tokens)
        ids = pa.LargeListArray.from_arrays(pa.array(flat.offsets), pa.array(flat.ids, pa.uint32()))
        return batch.append_column(self.output_column, ids)


def tokenize(
    dataset: ray.data.Dataset,
    tokenizer: Tokenizer,
    *,
    column: str = "text",
    output_column: str = "ids",
    add_special_tokens: bool = True,
    batch_size: int = 1024,
) -> ray.data.Dataset:
    """``dataset`` with ``output_column`` added: the ids of each row's text
    (``column``) as an Arrow list of ``uint32``, what
    ``tokenizer.encode_batch_ids`` gives, encoded on the workers a batch of
    ``batch_size`` rows at a time (lazily, as Ray datasets run). The
    tokenizer travels as its polytok JSON and is loaded once per worker
    process. A missing column is a ``ValueError`` here; a value that is
    not a string fails the dataset when it runs (Ray's error holds the
    worker's ``TypeError``, naming the column and the row in its block)."""
    from polytok.tokenizer import Tokenizer

    if not isinstance(tokenizer, Tokenizer):
        raise TypeError(f"tokenizer must be a polytok tokenizer, not {type(tokenizer).__name__}")
    _check_column(dataset, column)
    encode = _EncodeBlock(tokenizer.to_json(), column, output_column, add_special_tokens)
    return dataset.map_batches(encode, batch_size=batch_size, batch_format="pyarrow")
