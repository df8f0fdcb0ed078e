"""Counting and tokenizing Ray datasets: corpora of any size, on a laptop or
a cluster (``pip install "polytok[ray]"``).

- :func:`count`: the piece counts of a text column, counted by one worker
  per CPU, each into one table, and the tables added in a tree (a few at a
  time, so no worker, nor the driver, ever holds more than a few); train
  on the result with ``train_from_counts``.
- :func:`tokenize`: a column of ids (Arrow lists of ``uint32``, built from
  NumPy arrays without a Python object per id), encoded on the workers.

Workers receive counts and tokenizers as the bytes of their files
(:class:`polytok.Counts` and every tokenizer pickle that way), never as a
graph of Python objects. Counting workers send their tables back unsorted,
hashed with the driver's key, so that the driver adds them shard by shard
on all cores (``PieceCounter.to_transfer_bytes``).

>>> import ray, polytok, polytok.ray                       # doctest: +SKIP
>>> ds = ray.data.read_text("s3://bucket/corpus/")        # doctest: +SKIP
>>> counts = polytok.ray.count(ds, polytok.Counts.for_bpe(), column="text")  # doctest: +SKIP
>>> tok = polytok.BPETokenizer.train_from_counts(counts, vocab_size=64_000)  # doctest: +SKIP
>>> ids = polytok.ray.tokenize(ds, tok, column="text")  # doctest: +SKIP
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

from polytok._core import PieceCounter
from polytok.counts import Counts, LanguageCounts, language_code

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


class _BlockCounter:
    """A counting worker (a Ray actor): counts the blocks it is sent, on
    its core, into one table per language (one in all without a language
    column), straight from Arrow."""

    def start(self, template: bytes, table_key: int, column: str, language_column: str | None) -> None:
        # Tables hashed with the driver's key add into its table shard by shard.
        self.template = Counts(Counts.from_bytes(template)._core.copy(False, table_key))
        self.column, self.language_column = column, language_column
        self.counts: dict[str | None, Counts] = {}

    def add(self, block) -> None:
        from ray.data.block import BlockAccessor

        table = BlockAccessor.for_block(block).to_arrow()
        texts = table.column(self.column)
        parts = [(None, texts)] if self.language_column is None else _by_language(texts, table.column(self.language_column))
        for language, rows in parts:
            counts = self.counts.get(language)
            if counts is None:
                counts = self.counts[language] = self.template.empty()
            counts.add_arrow(rows, parallel=False)

    def result(self) -> dict[str | None, bytes]:
        data = {language: counts._core.to_transfer_bytes() for language, counts in self.counts.items()}
        self.counts = {}
        return data


def _by_language(texts, languages) -> list[tuple[str, object]]:
    """The rows of ``texts`` of each language of ``languages`` (a column of
    language codes): sorted by language once, then cut into runs."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if not (pa.types.is_string(languages.type) or pa.types.is_large_string(languages.type)) or languages.null_count:
        raise TypeError("the language column holds a value that is not a string")
    distinct = pc.unique(languages).to_pylist()
    if len(distinct) == 1:
        return [(language_code(distinct[0]), texts)]
    order = pc.sort_indices(languages)
    texts, languages = texts.take(order), languages.take(order)
    runs = pc.run_end_encode(languages.combine_chunks() if isinstance(languages, pa.ChunkedArray) else languages)
    parts, start = [], 0
    for end, language in zip(runs.run_ends.to_pylist(), runs.values.to_pylist()):
        parts.append((language_code(language), texts.slice(start, end - start)))
        start = end
    return parts


#: The counting workers of this driver, kept from one call of :func:`count`
#: to the next (starting an actor starts a process, about half a second):
#: the Ray job and nodes they were made for, and the actors. They ask Ray
#: for no CPU, hold no counts between calls, and end with the job.
_pool: dict = {}


def _counting_workers(nodes: list[str]) -> list:
    """An actor per entry of ``nodes`` (a node id), placed there."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    key = (ray.get_runtime_context().get_job_id(), tuple(nodes))
    if _pool.get("key") != key:
        _drop_counting_workers(same_job=_pool.get("key", (None,))[0] == key[0])
        counter = ray.remote(num_cpus=0)(_BlockCounter)
        _pool["actors"] = [
            counter.options(scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=True)).remote() for node in nodes
        ]
        _pool["key"] = key
    return _pool["actors"]


def _drop_counting_workers(same_job: bool = True) -> None:
    """Forgets the kept workers, ending them if they belong to this job
    (those of an earlier job ended with it)."""
    import ray

    actors = _pool.pop("actors", [])
    _pool.pop("key", None)
    if same_job:
        for actor in actors:
            ray.kill(actor)


#: How errors name the workers' counts.
_PARTS = "counts from a Ray worker"


def _added(total: Counts, parts: list[bytes]) -> Counts:
    """``total`` with the workers' counts (``to_transfer_bytes``) added,
    shard by shard on all cores."""
    total._core.add_transfer_bytes(parts, _PARTS)
    return total


def _by_language_parts(parts: tuple[dict[str | None, bytes], ...] | list) -> dict[str | None, list[bytes]]:
    """Workers' counts (transfer bytes by language; ``None``: no language
    column) regrouped: each language's parts."""
    grouped: dict[str | None, list[bytes]] = {}
    for part in parts:
        for language, data in part.items():
            grouped.setdefault(language, []).append(data)
    return grouped


def _add_counts(*parts: dict[str | None, bytes]) -> dict[str | None, bytes]:
    """The sum, language by language, of workers' counts."""
    return {
        language: PieceCounter.from_transfer_bytes(data, _PARTS).to_transfer_bytes()
        for language, data in _by_language_parts(parts).items()
    }


def _worker_nodes(workers: int | None) -> list[str]:
    """The node of each counting worker: one per CPU of each live node, the
    nodes taken in turn, the first ``workers`` of them."""
    import ray

    cpus = {node["NodeID"]: int(node["Resources"].get("CPU", 0)) for node in ray.nodes() if node["Alive"]}
    nodes = []
    for turn in range(max(cpus.values(), default=0)):
        nodes.extend(node for node, n in cpus.items() if n > turn)
    if workers is not None:
        nodes = (nodes * (workers // max(len(nodes), 1) + 1))[:workers]
    return nodes or [ray.get_runtime_context().get_node_id()]


def _check_column(dataset: ray.data.Dataset, column: str) -> None:
    """A ``ValueError`` naming ``column`` when the dataset lacks it."""
    schema = dataset.schema()
    names = list(schema.names) if schema is not None else []
    if column not in names:
        raise ValueError(f"the dataset has no column {column!r} (its columns: {', '.join(map(repr, names)) or 'none'})")


def _first_bad_row(dataset: ray.data.Dataset, columns: list[str]) -> str:
    """Where the first value of ``columns`` that is not a string is, found
    on the driver (only after a worker met one)."""
    for i, row in enumerate(dataset.iter_rows()):
        for column in columns:
            value = row[column]
            if not isinstance(value, str):
                return f"column {column!r}: row {i} holds {type(value).__name__} ({value!r:.60}), not a string"
    return f"column {' or '.join(map(repr, columns))} holds a value that is not a string"


def count(
    dataset: ray.data.Dataset,
    counts: Counts | LanguageCounts,
    *,
    column: str = "text",
    language_column: str | None = None,
    workers: int | None = None,
) -> Counts | LanguageCounts:
    """The piece counts of ``column`` of ``dataset`` (each row a text), made
    the way ``counts`` (empty, or not: they are included) are made, e.g.
    ``Counts.for_bpe(pattern="o200k")``; exactly what counting every row in
    one process (``Counts.add_texts``) gives. With ``language_column`` (a
    column of language codes), the counts of each language, as
    :class:`polytok.LanguageCounts` (``counts`` may then be either; Counts
    given must be empty, as they hold no language).

    The blocks of the dataset are streamed, as Ray makes them, to
    ``workers`` counting workers (Ray actors; by default one per CPU of the
    cluster, placed on the nodes in proportion), each sent the next block
    when it has fewer than two waiting. A worker counts its blocks on its
    core, straight from Arrow (no Python string per row), into one table
    (per language), so it sends one table however many blocks it counted;
    the tables are added ``FAN_IN`` at a time until a few are left, and
    those here. The workers ask Ray for no CPU, so the tasks that read the
    dataset (which do) run beside them rather than wait for them; they are
    kept for the next call (starting one costs about half a second), empty.
    Read only the columns to count (``read_parquet(..., columns=[...])``):
    blocks travel whole to the workers.

    A missing column is a ``ValueError``; a value that is not a string, a
    ``TypeError`` naming the column and the first such row; a language
    that is not a code (letters, digits, ``_``, ``-``), a ``ValueError``."""
    import ray

    if not isinstance(counts, (Counts, LanguageCounts)):
        raise TypeError(f"counts must be polytok.Counts or polytok.LanguageCounts, not {type(counts).__name__}")
    if language_column is None and isinstance(counts, LanguageCounts):
        raise ValueError("LanguageCounts are counted from a dataset with a language_column")
    if language_column is not None and isinstance(counts, Counts) and len(counts):
        raise ValueError("Counts given with a language_column must be empty: they hold no language")
    if workers is not None and (not isinstance(workers, int) or workers < 1):
        raise ValueError(f"workers must be a positive integer, not {workers!r}")
    columns = [column] if language_column is None else [column, language_column]
    for name in columns:
        _check_column(dataset, name)
    template = counts._template if isinstance(counts, LanguageCounts) else counts.empty()
    actors = _counting_workers(_worker_nodes(workers))
    try:
        ray.get([
            actor.start.remote(template.to_bytes(), template._core.table_key, column, language_column)
            for actor in actors
        ])
        counting = _send_blocks(dataset, actors)
        # Each worker sends its table once its last block is counted (an
        # actor runs its calls in order), and the tables are added here as
        # they come: the first while the last worker is still counting.
        tables = [actor.result.remote() for actor in actors]
        add = ray.remote(num_cpus=1)(_add_counts)
        while len(tables) > FAN_IN:
            tables = [add.remote(*tables[i : i + FAN_IN]) for i in range(0, len(tables), FAN_IN)]
        if language_column is None:
            total = counts.copy()
        else:
            total = counts.copy() if isinstance(counts, LanguageCounts) else LanguageCounts(counts)
        while tables:
            (done,), tables = ray.wait(tables, num_returns=1)
            for language, data in ray.get(done).items():
                _added(total if language is None else total.counts_of(language), [data])
        ray.get(counting)  # a worker's error, if one had any
    except BaseException as e:
        _drop_counting_workers()  # they may hold part of these counts, or have died
        if isinstance(e, TypeError):  # a worker's, which Ray raises as an instance of its class
            raise TypeError(_first_bad_row(dataset, columns)) from None
        raise
    return total


#: Blocks queued per counting worker: one counting, one waiting.
_QUEUED = 2


def _send_blocks(dataset: ray.data.Dataset, actors: list) -> list:
    """Streams the blocks of ``dataset`` (as Ray makes them) to the least
    busy of ``actors``, at most ``_QUEUED`` waiting on each; the
    acknowledgements of the blocks still being counted. A worker's error
    met on the way is raised here."""
    import ray

    busy: dict = {}  # a block's acknowledgement -> its actor's index
    load = [0] * len(actors)

    def finish_one() -> None:
        (done,), _ = ray.wait(list(busy), num_returns=1)
        load[busy.pop(done)] -= 1
        ray.get(done)

    for bundle in dataset.iter_internal_ref_bundles():
        for block in bundle.block_refs:
            while min(load) >= _QUEUED:
                finish_one()
            i = load.index(min(load))
            busy[actors[i].add.remote(block)] = i
            load[i] += 1
    return list(busy)


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
