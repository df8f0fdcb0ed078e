"""The count objects with another engine's map and reduce: PySpark on
local[2] counts the shipped corpus into the same counts as one process.
Skipped where PySpark or Java is absent (neither is a test dependency)."""

from __future__ import annotations

import shutil

import pytest

import polytok
from conftest import CORPORA

pyspark = pytest.importorskip("pyspark", reason="PySpark is not installed (pip install pyspark; needs Java 17)")
if shutil.which("java") is None:
    pytest.skip("PySpark needs Java, which is not installed", allow_module_level=True)


def test_spark_counts_equal_one_process():
    from pyspark.sql import SparkSession

    # Defined here so that Spark sends them by value (its workers cannot
    # import this test module).
    def count_partition(rows):
        """A map: the counts of one partition, as the bytes of their file."""
        yield polytok.Counts.for_bpe(pattern="o200k").add_texts(list(rows)).to_bytes()

    def add(a: bytes, b: bytes) -> bytes:
        """A reduce: two partial counts added."""
        return (polytok.Counts.from_bytes(a) + polytok.Counts.from_bytes(b)).to_bytes()

    texts = [line for path in sorted(CORPORA.glob("*.txt")) for line in path.read_text("utf-8").splitlines()]
    spark = SparkSession.builder.master("local[2]").appName("polytok-counts").config("spark.ui.enabled", "false").getOrCreate()
    try:
        rdd = spark.sparkContext.parallelize(texts, 8)
        total = polytok.Counts.from_bytes(rdd.mapPartitions(count_partition).treeReduce(add))
    finally:
        spark.stop()
    assert total.to_bytes() == polytok.Counts.for_bpe(pattern="o200k").add_texts(texts).to_bytes()
