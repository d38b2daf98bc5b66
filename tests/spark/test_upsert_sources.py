"""CSV and JSON sources (issue 24 item 9): reader options and a schema are the caller's, and a
source written to an existing table takes the table's column types (csv read as text, not
inferred), casting safely: a value that does not cast is refused naming the table, the column
and the value, before the timeline is touched. hudi-rs judges the rows."""

from __future__ import annotations

import json
import os

import pyarrow as pa
import pytest

from airflow_lake.core import Table
from airflow_lake.spark.job import JobError
from tests.conftest import hudi_read, rows
from tests.spark.test_jobs import load

COLS = ["id", "ts", "dt", "n"]


def _file(tmp_path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


@pytest.fixture
def orders(table_path) -> Table:
    table = Table.create(table_path, name="orders", record_key="id", precombine_field="ts", partition_fields="dt")
    table.write(pa.table({"id": ["007"], "ts": pa.array([1], pa.int64()), "dt": ["2024-01-01"],
                          "n": pa.array([1], pa.int32())}))
    return table


def test_csv_and_json_take_the_tables_types_and_the_callers_reader_options(spark, tmp_path, orders, table_path):
    upsert = load("upsert")
    # Spark's inference would make dt a date (refused against the string column) and 007 the number 7
    csv = _file(tmp_path, "a.csv", "id,ts,dt,n\n007,2,2024-01-01,5\n010,2,2024-01-02,6\n")
    result = upsert.main(["--table", table_path, "--source", csv])
    assert (result["inserts"], result["updates"]) == (1, 1)
    # the caller's reader options (a separator, no header) and schema
    semi = _file(tmp_path, "b.txt", "011;3;2024-01-02;7\n")
    upsert.main(["--table", table_path, "--source", semi, "--source-format", "csv", "--source-option", "sep=;",
                 "--source-option", "header=false", "--source-schema", "id STRING, ts LONG, dt STRING, n INT"])
    lines = "".join(json.dumps(r) + "\n" for r in [{"id": "007", "ts": 4, "dt": "2024-01-01", "n": 8}])
    upsert.main(["--table", table_path, "--source", _file(tmp_path, "c.json", lines)])
    expected = [("007", 4, "2024-01-01", 8), ("010", 2, "2024-01-02", 6), ("011", 3, "2024-01-02", 7)]
    assert rows(hudi_read(table_path), COLS) == expected == rows(orders.read(), COLS)
    assert orders.schema().field("dt").type == pa.string() and orders.schema().field("n").type == pa.int32()


@pytest.mark.parametrize(("name", "text", "column", "value"), [
    ("bad.csv", "id,ts,dt,n\n012,soon,2024-01-03,1\n", "ts", "soon"),
    ("big.json", json.dumps({"id": "013", "ts": 5, "dt": "2024-01-03", "n": 2 ** 40}) + "\n", "n", str(2 ** 40)),
])
def test_a_value_that_does_not_cast_is_refused_before_the_timeline_is_touched(spark, tmp_path, orders, table_path,
                                                                               name, text, column, value):
    before = sorted(os.listdir(f"{table_path}/.hoodie"))
    with pytest.raises(JobError) as refused:
        load("upsert").main(["--table", table_path, "--source", _file(tmp_path, name, text)])
    message = str(refused.value)
    assert f"table {orders.storage.uri}" in message and f"column {column!r} value {value!r}" in message, message
    assert "SchemaError" in message and "cannot be cast" in message
    assert sorted(os.listdir(f"{table_path}/.hoodie")) == before
    assert rows(hudi_read(table_path), COLS) == [("007", 1, "2024-01-01", 1)]


def test_a_bad_source_schema_names_it(spark, tmp_path, orders, table_path):
    with pytest.raises(JobError, match="source schema 'id STRNG' is not a Spark DDL schema"):
        load("upsert").main(["--table", table_path, "--source", _file(tmp_path, "d.csv", "id\n1\n"),
                             "--source-schema", "id STRNG"])


def test_files_the_core_reads_take_the_tables_types_too(spark, tmp_path, orders):
    """csv on an object store is read by the core in executors: as text, then cast alike."""
    from airflow_lake.spark.sources import conform_to_table, read_files

    folder = tmp_path / "landing"
    folder.mkdir()
    (folder / "part-0.csv").write_text("id,ts,dt,n\n007,2,2024-01-01,5\n")
    df = conform_to_table(read_files(spark, str(folder), "csv", text=True), orders.schema(), "t")
    assert [tuple(r) for r in df.collect()] == [("007", 2, "2024-01-01", 5)]
    assert [f.dataType.simpleString() for f in df.schema.fields] == ["string", "bigint", "string", "int"]
