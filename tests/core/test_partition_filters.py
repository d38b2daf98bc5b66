"""Partition pruning keeps every partition that could match: URL-encoded paths, values with
`/`, the default partition (null or ""), several partition levels. Each filtered read equals
the unfiltered read filtered row by row, and hudi-rs where it reads such paths right."""

from __future__ import annotations

import itertools
import random
import re
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_lake.core import LakeError, Table
from airflow_lake.core.keys import parse_partition_path
from airflow_lake.core.read import Reader
from airflow_lake.core.view import FileSystemView

HOSTILE = ["50%off", "k=v", "a/b", "a/b/c", "", None, "plain", "x%2Fy", "__HIVE_DEFAULT_PARTITION__", "p=q",
           "sp ace", "%", "q=1/p=2"]


def hudi_filtered(path: str, filters: list[tuple[str, str, str]]) -> pa.Table:
    from hudi import HudiReadOptions, HudiTableBuilder

    table = HudiTableBuilder.from_base_uri(str(Path(path).resolve())).build()
    batches = table.read(HudiReadOptions().with_filters(filters))
    return pa.Table.from_batches(batches) if batches else pa.table({})


def ids(table: pa.Table) -> list[str]:
    return sorted(table.column("id").to_pylist()) if table.num_columns else []


def expected_ids(full: pa.Table, filters) -> list[str]:
    return ids(full.filter(pq.filters_to_expression(filters)))


def _table(path: str, *, hive: bool, encode: bool, fields: list[str], table_type: str = "COPY_ON_WRITE") -> Table:
    return Table.create(path, name="pf", table_type=table_type, record_key="id", partition_fields=fields,
                        hive_style_partitioning=hive,
                        options={"hoodie.datasource.write.partitionpath.urlencode": str(encode).lower()})


@pytest.mark.parametrize("hive,encode", list(itertools.product([False, True], [False, True])))
def test_equality_filter_on_each_hostile_value(table_path, hive, encode):
    table = _table(table_path, hive=hive, encode=encode, fields=["p"])
    # unencoded, 'a/b/c' would be a folder inside partition 'a/b': refused (partition paths that nest)
    values = HOSTILE if encode else [v for v in HOSTILE if v != "a/b/c"]
    table.write(pa.table({"id": [f"k{i}" for i in range(len(values))], "p": values}), operation="insert")
    full = table.read()
    assert full.num_rows == len(values)
    for value in values:
        if value is None:
            continue
        filters = [("p", "=", value)]
        want = expected_ids(full, filters)
        assert want, value
        assert ids(table.read(filters=filters)) == want, value
        assert ids(table.read(filters=filters, columns=["id"])) == want, value
        # hudi-rs reads URL-encoded paths right; unencoded `/` nests folders it lists
        # differently, and it does not map the default partition back to ""
        if encode and value != "":
            assert ids(hudi_filtered(table_path, filters)) == want, value
    # the empty value is stored as "" in the row and under the default partition path
    empty = table.read(filters=[("p", "=", "")])
    assert empty.column("p").to_pylist() == [""]
    assert empty.column("_hoodie_partition_path").to_pylist()[0].endswith("__HIVE_DEFAULT_PARTITION__")
    # other operators: nothing may be pruned that a row would pass
    for filters in ([("p", "!=", "plain")], [("p", "in", ["a/b", "", "k=v"])], [("p", "not in", ["", "a/b"])],
                    [("p", ">", "a")], [("p", "<=", "")], [[("p", "=", "")], [("p", "=", "50%off")]]):
        assert ids(table.read(filters=filters)) == expected_ids(full, filters), filters


@pytest.mark.parametrize("hive,encode", list(itertools.product([False, True], [False, True])))
def test_random_filters_two_partition_levels(tmp_path, hive, encode):
    """Random hostile values on two levels (string and int), random DNF filters."""
    rng = random.Random(f"{hive}{encode}")
    path = str(tmp_path / "t")
    table = _table(path, hive=hive, encode=encode, fields=["p", "n"], table_type="MERGE_ON_READ")
    pool = [v for v in HOSTILE if v is not None] + [None]
    n = 60
    data = pa.table({"id": [f"k{i}" for i in range(n)], "p": [rng.choice(pool) for _ in range(n)],
                     "n": pa.array([rng.choice([1, 2, None, 30]) for _ in range(n)], pa.int32()),
                     "v": list(range(n))})
    table.write(data, operation="insert")
    full = table.read()
    assert full.num_rows == n

    def clause():
        field = rng.choice(["p", "n"])
        values = pool[:-1] if field == "p" else [1, 2, 30, 5]
        op = rng.choice(["=", "!=", "in", "not in", "<", ">="])
        value = rng.sample(values, 2) if op in ("in", "not in") else rng.choice(values)
        return (field, op, value)

    pruned_any = False
    for _ in range(40):
        filters = [[clause() for _ in range(rng.randint(1, 2))] for _ in range(rng.randint(1, 2))]
        assert ids(table.read(filters=filters)) == expected_ids(full, filters), filters
        view = FileSystemView(table.storage, table.timeline)
        groups = view.file_groups()
        pruned_any |= len(Reader(table, table.engine)._prune(view, groups, filters)) < len(groups)
    assert pruned_any  # pruning still happens where the paths are certain


def test_no_pruning_when_segments_cannot_be_mapped(table_path):
    """Unencoded `/` in a value of a two-level non-hive table: keep the partitions."""
    table = _table(table_path, hive=False, encode=False, fields=["p", "q"])
    table.write(pa.table({"id": ["a", "b"], "p": ["x/y", "x"], "q": ["z", "y/z"]}), operation="insert")
    full = table.read()
    for filters in ([("p", "=", "x/y")], [("q", "=", "y/z")], [("p", "=", "x"), ("q", "=", "y/z")]):
        assert ids(table.read(filters=filters)) == expected_ids(full, filters) != []


def test_parse_partition_path_candidates():
    fields = ["p"]
    assert parse_partition_path("p=50%25off", fields, True, True) == {"p": ["50%off"]}
    assert parse_partition_path("p=50%25off", fields, True, False) == {"p": ["50%25off", "50%off"]}
    assert parse_partition_path("p=a/b", fields, True) == {"p": ["a/b"]}
    assert parse_partition_path("a/b", fields, False) == {"p": ["a/b"]}
    assert parse_partition_path("__HIVE_DEFAULT_PARTITION__", fields, False) == {
        "p": ["__HIVE_DEFAULT_PARTITION__", None, ""]}
    assert parse_partition_path("x/y/z", ["p", "q"], False) == {}
    assert parse_partition_path("p=1/q=k%3Dv", ["p", "q"], True, True) == {"p": ["1"], "q": ["k=v"]}
    assert parse_partition_path("p=1/x/q=2", ["p", "q"], True) == {}


def test_timestamp_keygen_paths_are_not_values(table_path):
    """A partition path formatted by another key generator says nothing about the column."""
    table = _table(table_path, hive=False, encode=False, fields=["p"])
    table.write(pa.table({"id": ["a", "b"], "p": ["x", "y"]}), operation="insert")
    table.config.props["hoodie.table.keygenerator.class"] = "org.apache.hudi.keygen.TimestampBasedKeyGenerator"
    table = Table(table.storage, table.config)  # the key generator is the table's
    view = FileSystemView(table.storage, table.timeline)
    groups = view.file_groups()
    assert len(Reader(table, table.engine)._prune(view, groups, [("p", "=", "zz")])) == len(groups)


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_filters_that_cannot_apply_are_errors_naming_the_table_and_the_filter(table_path, table_type):
    """A filter naming no column, with an unknown operator, a value of another type, `in`
    without a list, or not a filter at all: an `InvalidOptionError` naming the table and the
    filter (not pyarrow's error), before any file is read; an expression filters too."""
    import pyarrow.compute as pc

    from airflow_lake.core.errors import InvalidOptionError

    t = Table.create(table_path, name="t", table_type=table_type, record_key="id", precombine_field="ts",
                     partition_fields="part")
    t.write(pa.table({"id": ["a", "b"], "ts": [1, 2], "part": ["x", "y"]}))
    for bad, said in (([("nope", "=", 1)], "names no column"), ([("ts", "~", 5)], "operator '~'"),
                      ([("ts", "=", "x")], "cannot be applied"), ([("part", "=", 5)], "cannot be applied"),
                      ([("ts", "in", 5)], "needs a list"), ([("ts",)], "is not (column, op, value)"),
                      ("ts = 1", "are not [(column, op, value)"), (pc.field("nope") > 1, "cannot be applied")):
        with pytest.raises(InvalidOptionError, match=f"table {t.storage.uri}: .*{re.escape(said)}"):
            t.read(filters=bad)
        if not isinstance(bad, pc.Expression):
            with pytest.raises(InvalidOptionError, match=f"table {t.storage.uri}: .*{re.escape(said)}"):
                t.read_incremental("00000000000000", filters=bad)
    assert t.read(filters=pc.field("ts") > 1).column("id").to_pylist() == ["b"]
    assert t.read(filters=[]).num_rows == 2
    assert t.read(filters=[("ts", "in", [1, 2]), ("ts", ">", 1.5)]).column("id").to_pylist() == ["b"]
    # an empty list matches no row (it failed: "Array type doesn't match type of values set")
    assert t.read(filters=[("part", "in", [])]).num_rows == 0 and t.read(filters=[("ts", "in", [])]).num_rows == 0
    assert t.read(filters=[("part", "not in", [])]).num_rows == 2
    # pyarrow's other forms: terms as lists, a disjunction of conjunctions
    assert t.read(filters=[["part", "=", "y"]], columns=["id"]).column("id").to_pylist() == ["b"]
    assert sorted(t.read(filters=[[("part", "=", "x")], [["ts", "=", 2]]]).column("id").to_pylist()) == ["a", "b"]


def test_a_naive_datetime_against_a_zoned_timestamp_column_is_refused_before_reading(table_path):
    """pyarrow compares no values on an empty table, so the check binds on a row of nulls."""
    import datetime as dt

    from airflow_lake.core.errors import InvalidOptionError

    t = Table.create(table_path, name="t", record_key="id")
    at = dt.datetime(2024, 1, 2, tzinfo=dt.timezone.utc)
    t.write(pa.table({"id": ["a"], "at": pa.array([at], pa.timestamp("us", "UTC"))}))
    with pytest.raises(InvalidOptionError, match="cannot be applied to its columns .*timestamp without timezone"):
        t.read(filters=[("at", ">", dt.datetime(2024, 1, 1))])
    assert t.read(filters=[("at", ">", dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc))]).num_rows == 1


@pytest.mark.parametrize("version", [6, 9])
def test_integers_filter_a_decimal_column_as_pyarrow_filters_it(table_path, version):
    """`in [1250]` was a raw ArrowInvalid from a read task, `= 1250` and `> 100` were refused
    (pyarrow compares an int64 with a decimal(15,2) only at a precision of 21)."""
    import decimal

    amounts = pa.array([decimal.Decimal("1250.00"), decimal.Decimal("99.50")], pa.decimal128(15, 2))
    table = Table.create(table_path, name="d", record_key="id", precombine_field="ts",
                         options={"hoodie.write.table.version": version})
    table.write(pa.table({"id": [1, 2], "ts": [1, 1], "amount": amounts}))
    for filters, ids in (([("amount", "=", 1250)], [1]), ([("amount", ">", 100)], [1]),
                         ([("amount", "in", [1250, 7])], [1]), ([("amount", "not in", [1250])], [2]),
                         ([("amount", "<=", 99)], []), ([("amount", "=", decimal.Decimal("99.5"))], [2])):
        assert sorted(table.read(filters=filters)["id"].to_pylist()) == ids, filters
    with pytest.raises(LakeError, match=r"filters \[\('amount', '=', 10{30}\)\] cannot be applied"):
        table.read(filters=[("amount", "=", 10 ** 30)])
