"""The Spark write keeps rows in the executors: what reaches the Python driver (counts per
partition and per file group, write statistics, one clashing key) does not grow with the batch.

The driver's peak memory under a real spark-submit is a measurement, not a test: `python -m
bench.spark driver-memory` (docs/benchmarks.md)."""

from __future__ import annotations

import pyarrow as pa
import pytest
from pyspark import RDD, SparkContext

from airflow_lake.core import Table
from airflow_lake.spark.write import write
from tests.conftest import hudi_read, rows

PARTS = ["a", "b", "c"]


def batch(first: int, n: int, ts: int) -> pa.Table:
    return pa.table({"id": [f"k{i:06d}" for i in range(first, first + n)], "ts": [ts] * n,
                     "part": [PARTS[i % 3] for i in range(first, first + n)], "v": [float(i) for i in range(n)]})


def count_results(monkeypatch, spark) -> list[int]:
    """Patch every way a result reaches the Python driver; the returned list gets the number of
    rows (or items) of each result."""
    frame = type(spark.range(1))  # the session's DataFrame class (pyspark.sql.classic's)
    sizes: list[int] = []

    def counted(cls, name: str, size) -> None:
        original = getattr(cls, name)

        def call(*args, **kwargs):
            out = original(*args, **kwargs)
            if name == "toLocalIterator":
                out = list(out)
            sizes.append(size(out))
            return out

        monkeypatch.setattr(cls, name, call)

    for cls in (frame, RDD):
        counted(cls, "collect", len)
        counted(cls, "toLocalIterator", len)
    counted(frame, "tail", len)
    counted(frame, "_collect_as_arrow", lambda batches: sum(b.num_rows for b in batches))  # toArrow, toPandas
    counted(SparkContext, "runJob", len)  # RDD.take, first
    return sizes


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_what_the_driver_collects_does_not_grow_with_the_batch(spark, tmp_path, monkeypatch, table_type):
    collected = {}
    for n in (300, 3000):
        path = str(tmp_path / f"t{n}")
        t = Table.create(path, name="t", table_type=table_type, record_key="id", precombine_field="ts",
                         partition_fields="part")
        t.write(batch(0, n, 1), operation="insert")
        upsert = spark.createDataFrame(batch(n // 2, n, 2))  # half updates, half new keys
        with monkeypatch.context() as patched:
            sizes = count_results(patched, spark)
            result = write(t, upsert, "upsert")
        assert (result.num_inserts, result.num_updates) == (n - n // 2, n // 2)
        assert rows(hudi_read(path), ["id", "ts"]) == rows(t.read(), ["id", "ts"])
        assert sizes, "no result reached the driver: the counting patch missed the write's collects"
        collected[n] = sizes
    assert collected[300] == collected[3000]  # ten times the rows, the same metadata
