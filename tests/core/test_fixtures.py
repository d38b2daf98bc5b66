"""Tables written by Apache Hudi (tests/fixtures/hudi-tables, expected rows from its INDEX.md): we read
them, append to copies of them, and hudi-rs agrees with us on the result."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from airflow_lake.core import Table
from tests.conftest import hudi_read, rows

COW = [
    "sample_table/cow/v6_nonpartitioned.zip",
    "sample_table/cow/v6_complexkeygen_hivestyle.zip",
    "sample_table/cow/v6_simplekeygen_nonhivestyle.zip",
    "sample_table/cow/v6_simplekeygen_hivestyle_no_metafields.zip",
]
FINAL = [(1, "Alice", False), (2, "Bob", False), (3, "Carol", True), (4, "Diana", True)]
AS_OF_C0 = [(1, "Alice", True), (2, "Bob", False), (3, "Carol", True)]
SAMPLE = ["id", "name", "isActive"]
ALL_COLUMNS_SKIP = {"_hoodie_commit_seqno"}


@pytest.mark.parametrize("archive", COW)
def test_snapshot_matches_expected_rows(archive, unzip_fixture):
    table = Table.open(str(unzip_fixture(archive)))
    assert rows(table.read(), SAMPLE) == FINAL
    assert rows(table.read(columns=SAMPLE), SAMPLE) == FINAL


@pytest.mark.parametrize("archive", [a for a in COW if "no_metafields" not in a])
def test_time_travel_and_incremental(archive, unzip_fixture):
    table = Table.open(str(unzip_fixture(archive)))
    c0, c1 = table.timeline.commits().completed().times
    assert rows(table.read(as_of=c0), SAMPLE) == AS_OF_C0
    assert rows(table.read_incremental(c0, c1), SAMPLE) == [(1, "Alice", False), (4, "Diana", True)]
    assert rows(table.read_incremental("19700101000000000"), SAMPLE) == FINAL


@pytest.mark.parametrize("archive", ["sample_table/cow/v6_complexkeygen_hivestyle.zip",
                                     "sample_table/cow/v6_simplekeygen_nonhivestyle.zip"])
def test_filters_prune_partitions(archive, unzip_fixture):
    table = Table.open(str(unzip_fixture(archive)))
    expected = [(1, "Alice", False), (3, "Carol", True)]
    got = table.read(columns=SAMPLE, filters=[("byteField", "=", 10)])
    assert rows(got, SAMPLE) == expected
    if "complex" in archive:
        got = table.read(columns=SAMPLE, filters=[("byteField", ">=", 10), ("byteField", "<", 20),
                                                  ("shortField", "!=", 100)])
        assert rows(got, SAMPLE) == expected
    # pruning reads fewer files than a full scan
    from airflow_lake.core.read import Reader
    from airflow_lake.core.view import FileSystemView

    view = FileSystemView(table.storage, table.timeline)
    groups = view.file_groups()
    assert len(Reader(table, table.engine)._prune(view, groups, [("byteField", "=", 10)])) < len(groups)


def test_empty_tables_read_empty(unzip_fixture):
    table = Table.open(str(unzip_fixture("sample_table/cow/v6_empty.zip")))
    assert table.read().num_rows == 0
    assert table.read_incremental("19700101000000000").num_rows == 0


def user_rows(table: Table) -> pa.Table:
    current = table.read()
    return current.drop_columns([c for c in current.column_names if c.startswith("_hoodie")])


def newer(data: pa.Table, row_id: int, is_active: bool) -> pa.Table:
    """The row `row_id` with isActive changed and a larger longField (the precombine field)."""
    row = data.filter(pc.equal(data["id"], row_id))
    row = row.set_column(row.schema.get_field_index("isActive"), "isActive", pa.array([is_active]))
    return row.set_column(row.schema.get_field_index("longField"), "longField",
                          pa.array([row["longField"][0].as_py() + 1], pa.int64()))


@pytest.mark.parametrize("archive", COW)
def test_append_to_apache_hudi_table(archive, unzip_fixture):
    path = str(unzip_fixture(archive))
    table = Table.open(path)
    data = user_rows(table)
    alice = newer(data, 1, True)
    eve = data.filter(pc.equal(data["id"], 3))
    eve = eve.set_column(0, "id", pa.array([5], pa.int32())).set_column(1, "name", pa.array(["Eve"]))
    result = table.write(pa.concat_tables([alice, eve]), operation="upsert")
    assert (result.num_updates, result.num_inserts) == (1, 1)
    expected = [(1, "Alice", True), (2, "Bob", False), (3, "Carol", True), (4, "Diana", True), (5, "Eve", True)]
    assert rows(table.read(), SAMPLE) == expected
    assert rows(hudi_read(path), SAMPLE) == expected
    # every column (nested types, decimals, timestamps) equal between hudi-rs and us
    ours, theirs = table.read(), hudi_read(path)
    cols = [c for c in ours.column_names if c not in ALL_COLUMNS_SKIP and c in theirs.column_names]
    assert len(cols) >= 16
    assert rows(ours, cols) == rows(theirs, cols)

    bob = pa.table({"id": pa.array([2], pa.int32()), "name": ["Bob"], "byteField": pa.array([20], pa.int32()),
                    "shortField": pa.array([100], pa.int32())})
    table.write(bob, operation="delete")
    expected.remove((2, "Bob", False))
    assert rows(table.read(), SAMPLE) == expected
    assert rows(hudi_read(path), SAMPLE) == expected
    # the earlier Apache Hudi commits still time-travel
    c0 = table.timeline.commits().completed().times[0]
    if "no_metafields" not in archive:
        assert rows(table.read(as_of=c0), SAMPLE) == AS_OF_C0
        assert rows(hudi_read(path, **{"hoodie.read.as.of.timestamp": c0}), SAMPLE) == AS_OF_C0


MOR = [
    "sample_table/mor/parquet/v6_nonpartitioned.zip",
    "sample_table/mor/parquet/v6_complexkeygen_hivestyle.zip",
    "sample_table/mor/parquet/v6_simplekeygen_nonhivestyle.zip",
    "sample_table/mor/parquet/v6_simplekeygen_hivestyle_no_metafields.zip",
]


@pytest.mark.parametrize("archive", MOR)
def test_mor_snapshot_and_time_travel(archive, unzip_fixture):
    table = Table.open(str(unzip_fixture(archive)))
    assert rows(table.read(), SAMPLE) == FINAL
    times = table.timeline.commits().completed().times
    if len(times) > 1:
        assert rows(table.read(as_of=times[0]), SAMPLE) == AS_OF_C0
        assert rows(table.read_incremental(times[0]), SAMPLE) == [(1, "Alice", False), (4, "Diana", True)]


def test_mor_read_optimized(unzip_fixture):
    table = Table.open(str(unzip_fixture("sample_table/mor/parquet/v6_nonpartitioned.zip")))
    assert rows(table.read(query_type="read_optimized"), SAMPLE) == [
        (1, "Alice", True), (2, "Bob", False), (3, "Carol", True), (4, "Diana", True)]


def test_mor_empty(unzip_fixture):
    table = Table.open(str(unzip_fixture("sample_table/mor/parquet/v6_empty.zip")))
    assert table.read().num_rows == 0


def test_trips_avro_log_blocks(unzip_fixture):
    path = str(unzip_fixture("quickstart_trips_table/mor/avro/v6_trips_8i1u.zip"))
    table = Table.open(path)
    got = {r["uuid"]: r["fare"] for r in table.read(columns=["uuid", "fare"]).to_pylist()}
    assert len(got) == 8 and got["9909a8b1-2d15-4d3d-8ec9-efc48c536a00"] == 25.0
    c0 = table.timeline.commits().completed().times[0]
    old = {r["uuid"]: r["fare"] for r in table.read(as_of=c0, columns=["uuid", "fare"]).to_pylist()}
    assert old["9909a8b1-2d15-4d3d-8ec9-efc48c536a00"] == 33.9
    # append: an update through our log writer, an insert, a delete; hudi-rs agrees
    current = table.read()
    data = current.drop_columns([c for c in current.column_names if c.startswith("_hoodie")])
    rider_a = data.filter(pc.equal(data["rider"], "rider-A"))
    rider_a = rider_a.set_column(rider_a.schema.get_field_index("fare"), "fare", pa.array([99.0]))
    rider_a = rider_a.set_column(rider_a.schema.get_field_index("ts"), "ts",
                                 pa.array([rider_a["ts"][0].as_py() + 1], rider_a.schema.field("ts").type))
    table.write(rider_a)
    table.write(data.filter(pc.equal(data["rider"], "rider-J")), operation="delete")
    ours = rows(table.read(), ["rider", "fare"])
    assert len(ours) == 7 and ("rider-A", 99.0) in ours
    assert rows(hudi_read(path), ["rider", "fare"]) == ours


@pytest.mark.parametrize("archive", [a for a in MOR if "no_metafields" not in a])
def test_append_to_apache_hudi_mor_table(archive, unzip_fixture):
    path = str(unzip_fixture(archive))
    table = Table.open(path)
    table.write(newer(user_rows(table), 3, False))
    expected = [(1, "Alice", False), (2, "Bob", False), (3, "Carol", False), (4, "Diana", True)]
    assert rows(table.read(), SAMPLE) == expected
    assert rows(hudi_read(path), SAMPLE) == expected
    ours, theirs = table.read(), hudi_read(path)
    cols = [c for c in ours.column_names if c not in ALL_COLUMNS_SKIP and c in theirs.column_names]
    assert rows(ours, cols) == rows(theirs, cols)
