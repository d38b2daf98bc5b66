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


def test_csv_quotes_read_alike_wherever_the_file_lives(spark, tmp_path, table_path):
    """A csv file is read as RFC 4180 (a quote inside a quoted value is doubled) by Spark's
    reader (local and HDFS files) as by the core's (object stores): Spark's own default escapes
    with a backslash, and kept the doubled quotes and the outer ones in the value."""
    import pyarrow.csv as pacsv

    from airflow_lake.spark.sources import read_files

    text = 'id,v\n1,"say ""hi"""\n2,"a,b"\n3,plain\n'
    path = _file(tmp_path, "q.csv", text)
    core = [tuple(r) for r in read_files(spark, path, "csv", text=True).collect()]
    assert core == [("1", 'say "hi"'), ("2", "a,b"), ("3", "plain")] == \
        [(str(r["id"]), r["v"]) for r in pacsv.read_csv(path).to_pylist()]
    load("upsert").main(["--table", table_path, "--source", path, "--create-if-missing", "--record-key", "id"])
    assert sorted((str(r["id"]), r["v"]) for r in hudi_read(table_path).to_pylist()) == core


def test_files_the_core_reads_take_the_tables_types_too(spark, tmp_path, orders):
    """csv on an object store is read by the core in executors: as text, then cast alike."""
    from airflow_lake.spark.sources import conform_to_table, read_files

    folder = tmp_path / "landing"
    folder.mkdir()
    (folder / "part-0.csv").write_text("id,ts,dt,n\n007,2,2024-01-01,5\n")
    df = conform_to_table(read_files(spark, str(folder), "csv", text=True), orders.schema(), "t")
    assert [tuple(r) for r in df.collect()] == [("007", 2, "2024-01-01", 5)]
    assert [f.dataType.simpleString() for f in df.schema.fields] == ["string", "bigint", "string", "int"]


def test_the_readers_date_and_timestamp_formats_cast_text_to_the_tables_types(spark, tmp_path, table_path):
    """docs/operators.md's `{"sep": ";", "dateFormat": "dd.MM.yyyy"}` into an existing table:
    csv is read as text, then cast by the reader's formats (a plain cast knows only ISO text)."""
    import datetime as dt

    table = Table.create(table_path, name="people", record_key="pid", precombine_field="ts")
    table.write(pa.table({"pid": ["p1"], "ts": pa.array([1], pa.int64()), "born": [dt.date(2024, 1, 1)],
                          "seen": pa.array([dt.datetime(2024, 1, 1, 8, 0)], pa.timestamp("us", "UTC"))}))
    csv = _file(tmp_path, "people.csv", "pid;ts;born;seen\np2;1;01.02.2020;01.02.2020 10:30\n")
    options = ["--source-option", "sep=;", "--source-option", "dateFormat=dd.MM.yyyy",
               "--source-option", "timestampFormat=dd.MM.yyyy HH:mm"]
    load("upsert").main(["--table", table_path, "--source", csv, *options])
    got = {r["pid"]: (r["born"], r["seen"]) for r in hudi_read(table_path).to_pylist()}
    assert got["p2"][0] == dt.date(2020, 2, 1)
    assert got["p2"][1].replace(tzinfo=None) == dt.datetime(2020, 2, 1, 10, 30)
    bad = _file(tmp_path, "bad.csv", "pid;ts;born;seen\np3;1;2020-13-45;01.02.2020 10:30\n")
    with pytest.raises(JobError, match="column 'born' value '2020-13-45' cannot be cast"):
        load("upsert").main(["--table", table_path, "--source", bad, *options])


def test_an_empty_landing_folder_writes_nothing_into_a_table_or_names_itself(spark, tmp_path, orders, table_path):
    """A day without files: Spark cannot infer a schema from an empty folder. Into an existing
    table the folder is read with the table's columns (no rows, as an empty file); for a table
    still to be created it is refused naming the source."""
    empty = tmp_path / "landing" / "2024-01-02"
    empty.mkdir(parents=True)
    for fmt in ("parquet", "csv", "json"):
        result = load("upsert").main(["--table", table_path, "--source", str(empty), "--source-format", fmt])
        assert (result["records_written"], result["inserts"]) == (0, 0)
    assert rows(hudi_read(table_path), COLS) == [("007", 1, "2024-01-01", 1)]
    new = str(tmp_path / "new")
    with pytest.raises(JobError, match=f"source {empty}: no parquet file there to read"):
        load("upsert").main(["--table", new, "--source", str(empty), "--source-format", "parquet",
                             "--create-if-missing", "--record-key", "id"])
    assert not os.path.exists(new)  # the source is read before a new table is created


def test_json_structs_land_by_field_name_at_every_depth(spark, tmp_path, table_path):
    """Spark's JSON reader orders a struct's fields by name and Spark casts structs by position:
    the table's `s` (zeta, alpha) had its fields swapped. A JSON object of a map column is read
    as a struct: it becomes the map (it was a raw analysis error); a value Spark cannot even
    try to cast is a SchemaError naming the column."""
    struct = pa.struct([("zeta", pa.string()), ("alpha", pa.string()), ("n", pa.int32())])
    schema = pa.schema([("id", pa.string()), ("ts", pa.int64()), ("s", struct), ("l", pa.list_(struct)),
                        ("m", pa.map_(pa.string(), pa.string())), ("mi", pa.map_(pa.string(), pa.int32())),
                        ("li", pa.list_(pa.int32())), ("ml", pa.map_(pa.string(), pa.list_(pa.int32())))])
    first = {"zeta": "Z0", "alpha": "A0", "n": 0}
    table = Table.create(table_path, name="t", record_key="id", precombine_field="ts")
    table.write(pa.table({"id": ["a", "b"], "ts": [1, 1], "s": [first, None], "l": [[first], []],
                          "m": [[("k", "v")], None], "mi": [None, None], "li": [[1], None],
                          "ml": [None, None]}, schema=schema))
    new = {"zeta": "Z1", "alpha": "A1", "n": 1}
    lines = json.dumps({"id": "a", "ts": 2, "s": new, "l": [new, {"alpha": "A2"}], "m": {"k": "v2", "j": "w"},
                        "mi": {"k": 1}, "li": [2, None, 3], "ml": {"k": [4, None]}}) + "\n" \
        + json.dumps({"id": "b", "ts": 2, "s": None, "m": {"j": "x"}}) + "\n"
    load("upsert").main(["--table", table_path, "--source", _file(tmp_path, "s.json", lines)])
    got = {r["id"]: r for r in hudi_read(table_path).to_pylist()}
    assert got["a"]["s"] == new and got["b"]["s"] is None
    assert got["a"]["l"] == [new, {"zeta": None, "alpha": "A2", "n": None}]
    assert sorted(got["a"]["m"]) == [("j", "w"), ("k", "v2")] and got["b"]["m"] == [("j", "x")]
    assert got["a"]["mi"] == [("k", 1)] and got["b"]["mi"] is None
    assert got["a"]["li"] == [2, None, 3] and got["a"]["ml"] == [("k", [4, None])]  # (nulls given stay)
    assert rows(hudi_read(table_path), ["id", "s"]) == rows(table.read(), ["id", "s"])
    before = sorted(os.listdir(f"{table_path}/.hoodie"))
    # a value that does not cast, in a struct's field or a map's entry: refused, not nulled
    for line, column in (({"id": "c", "ts": 3, "s": {"n": "many"}}, "s"),
                         ({"id": "c", "ts": 3, "mi": {"k": "x"}}, "mi"),
                         ({"id": "c", "ts": 3, "l": [{"n": 2}, {"n": "many"}]}, "l"),
                         ({"id": "c", "ts": 3, "li": [1, "x"]}, "li"),
                         ({"id": "c", "ts": 3, "ml": {"k": [1, "x"]}}, "ml")):
        every = dict.fromkeys(schema.names) | line  # (every column given: only the cast can refuse it)
        refused = _file(tmp_path, "r.json", json.dumps(every) + "\n")
        with pytest.raises(JobError, match=f"column '{column}' value .*cannot be cast"):
            load("upsert").main(["--table", table_path, "--source", refused])
    bad = json.dumps({"id": "c", "ts": 3, "s": [1], "l": None, "m": None}) + "\n"
    with pytest.raises(JobError, match="column 's' cannot be cast from array<bigint> to the table's "
                                       "struct<zeta:string,alpha:string,n:int>"):
        load("upsert").main(["--table", table_path, "--source", _file(tmp_path, "m.json", bad)])
    assert sorted(os.listdir(f"{table_path}/.hoodie")) == before


@pytest.mark.parametrize("keyed_by", ["record_key", "partition"])
def test_a_timestamp_millis_key_or_partition_is_keyed_as_the_core_keys_it(spark, tmp_path, table_path, keyed_by):
    """Spark hands timestamps over in microseconds: the key generator was given them so, and
    a timestamp-millis column keyed 1704164645123000 where the core (and Java) key
    1704164645123: every upsert of existing keys added new rows (or a second partition)."""
    import datetime as dt

    import pyarrow.parquet as pq

    at = [dt.datetime(2024, 1, 2, 3, 4, 5, 123000), dt.datetime(2024, 1, 3, 4, 5, 6, 7000)]
    schema = pa.schema([("id", pa.string()), ("at", pa.timestamp("ms")), ("ts", pa.int64()), ("v", pa.string())])
    key, parts = ("at", None) if keyed_by == "record_key" else ("id", "at")
    table = Table.create(table_path, name="t", record_key=key, precombine_field="ts", partition_fields=parts)
    table.write(pa.table({"id": ["a", "b"], "at": at, "ts": [1, 1], "v": ["old", "old"]}, schema=schema))
    source = tmp_path / "landing"
    source.mkdir()
    pq.write_table(pa.table({"id": ["a", "b"], "at": at, "ts": [2, 2], "v": ["new", "new"]}, schema=schema),
                   source / "b.parquet")
    result = load("upsert").main(["--table", table_path, "--source", str(source)])
    assert (result["inserts"], result["updates"]) == (0, 2)
    assert rows(hudi_read(table_path), ["id", "v"]) == [("a", "new"), ("b", "new")] == rows(table.read(), ["id", "v"])
