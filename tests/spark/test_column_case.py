"""Column names that differ only in case through the Spark write path: the core's rule
(`schema.resolve_names`), the same rows as the local engine, judged by hudi-rs."""

from __future__ import annotations

import pyarrow as pa
import pytest

from airflow_lake.core.errors import SchemaError
from airflow_lake.core.table import Table
from airflow_lake.spark.write import write
from tests.conftest import hudi_read, rows
from tests.core.test_column_case import COLS, make
from tests.core.test_errors import tree


def test_spark_resolves_names_ignoring_case_like_the_local_engine(spark, tmp_path):
    batches = [pa.table({"ID": [1, 3], "Ts": [2, 1], "V": ["A", "C"], "P": ["x", "y"]}),
               pa.table({"id": [2], "ts": [4], "V": ["B"], "p": ["x"], "Extra": [5]})]
    results = {}
    for engine in ("local", "spark"):
        path = str(tmp_path / engine)
        table = make(path, "MERGE_ON_READ")
        for batch in batches:
            table.write(batch) if engine == "local" else write(table, spark.createDataFrame(batch), "upsert")
        table = Table.open(path)
        assert table.schema().names == COLS + ["Extra"]
        results[engine] = rows(table.read(), COLS + ["Extra"])
        assert rows(hudi_read(path), COLS + ["Extra"]) == results[engine]
        before = tree(path)
        twins = spark.createDataFrame(pa.table({"id": [1], "ts": [9], "v": ["a"], "V": ["b"], "p": ["x"]}))
        with pytest.raises(SchemaError, match="columns 'v' and 'V' of the data differ only in case"):
            table.write(twins.toArrow()) if engine == "local" else write(table, twins, "upsert")
        assert tree(path) == before
    assert results["local"] == results["spark"] == [(1, 2, "A", "x", None), (2, 4, "B", "x", 5),
                                                     (3, 1, "C", "y", None)]
