"""The Spark write applies the core's rule on partition paths that nest, on the batch's
distinct partitions, before the timeline is touched."""

from __future__ import annotations

import pytest

from airflow_lake.core import Table
from airflow_lake.core.errors import PartitionPathError
from airflow_lake.spark.write import write
from tests.conftest import hudi_read, rows
from tests.core.test_errors import tree
from tests.core.test_partition_nesting import COLS, _rows, _table, race_nesting_writes


def test_spark_write_refuses_nesting_partitions_and_writes_the_rest(spark, table_path):
    table = _table(table_path, table_type="MERGE_ON_READ")
    write(table, spark.createDataFrame(_rows(["2024/01/01", "2024/01/02", "x/y"])))
    expected = [("k0", 1, "2024/01/01"), ("k1", 1, "2024/01/02"), ("k2", 1, "x/y")]
    assert rows(hudi_read(table_path), COLS) == expected
    before = tree(table_path)
    for batch, pair in ((["a", "a/b"], "'a' (in this batch) would be a folder holding partition 'a/b'"),
                        (["x"], "'x' (in this batch) would be a folder holding partition 'x/y' (already in")):
        with pytest.raises(PartitionPathError, match=pair.replace("(", r"\(").replace(")", r"\)")):
            write(table, spark.createDataFrame(_rows(batch, 10)))
        assert tree(table_path) == before
    write(table, spark.createDataFrame(_rows(["2024/02/01", "x/z"], 20)))
    assert rows(hudi_read(table_path), COLS) == rows(table.read(), COLS) == sorted(
        expected + [("k20", 1, "2024/02/01"), ("k21", 1, "x/z")])


def test_spark_write_refuses_a_partition_nesting_with_a_pending_write(spark, table_path, monkeypatch):
    """A Spark write of `x/y` passes its early check, then a local write of `x` begins (claiming
    `x`) and is held; the Spark write's begin, under the lock, refuses: only `x` commits."""
    race_nesting_writes(table_path, monkeypatch, "x", "x/y", lambda part, start: write(
        Table.open(table_path), spark.createDataFrame(_rows([part], start)), operation="insert"))
