"""Spark writes use the writer settings a table was created with, and the same index-switch
rule as the local engine."""

from __future__ import annotations

import os

import pyarrow as pa
import pytest

from airflow_lake.core import Table
from airflow_lake.core.errors import InvalidOptionError
from airflow_lake.spark.write import write
from tests.conftest import hudi_read, rows
from tests.core.test_table_write_defaults import COLS, _batch, _created, _groups


def test_spark_write_keeps_the_created_index_and_file_sizing(spark, table_path):
    _created(table_path, **{"hoodie.index.type": "GLOBAL_SIMPLE", "hoodie.parquet.small.file.limit": 0})
    table = Table.open(table_path)  # no options: the table's own settings
    write(table, spark.createDataFrame(pa.concat_tables([_batch(["a"], 2, "y"), _batch(["c"], 2, "x")])))
    expected = [("a", 2, "y"), ("b", 1, "x"), ("c", 2, "x")]
    assert rows(table.read(), COLS) == expected == rows(hudi_read(table_path), COLS)
    assert _groups(table, "x") == 2  # small-file limit 0: c opened a new file group

    before = sorted(os.listdir(f"{table_path}/.hoodie"))
    switched = Table.open(table_path, options={"hoodie.index.type": "BLOOM"})
    with pytest.raises(InvalidOptionError, match="airflow_lake.index.switch.force"):
        write(switched, spark.createDataFrame(_batch(["b"], 3, "y")))
    assert sorted(os.listdir(f"{table_path}/.hoodie")) == before
