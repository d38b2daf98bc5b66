"""Writer settings given at create time are the table's defaults on every later handle; a
write may not switch the table between indexes that find keys in different places."""

from __future__ import annotations

import os

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from airflow_lake.core import Table, properties
from airflow_lake.core.errors import InvalidOptionError
from airflow_lake.core.view import FileSystemView
from tests.conftest import hudi_read, rows

COLS = ["id", "ts", "part"]


def _batch(ids: list[str], ts: int, part: str) -> pa.Table:
    return pa.table({"id": ids, "ts": [ts] * len(ids), "part": [part] * len(ids)})


def _created(path: str, table_type: str = "COPY_ON_WRITE", **options) -> Table:
    table = Table.create(path, name="d", table_type=table_type, record_key="id", precombine_field="ts",
                         partition_fields="part", options=options)
    table.write(_batch(["a", "b"], 1, "x"))
    return table


def _groups(table: Table, partition: str) -> int:
    return len(FileSystemView(table.storage, table.timeline).file_groups(partition))


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_reopened_table_keeps_the_index_and_file_sizing_it_was_created_with(table_path, table_type):
    _created(table_path, table_type, **{"hoodie.index.type": "GLOBAL_SIMPLE", "hoodie.parquet.small.file.limit": 0})
    again = Table.open(table_path)  # no options: the table's own settings
    again.write(_batch(["a"], 2, "y"))  # a moves partition under the global index
    again.write(_batch(["c"], 2, "x"))  # small-file limit 0: a new file group, not a rewrite of the first
    expected = [("a", 2, "y"), ("b", 1, "x"), ("c", 2, "x")]
    assert rows(again.read(), COLS) == expected == rows(hudi_read(table_path), COLS)
    assert _groups(again, "x") == 2


@pytest.mark.parametrize(("created", "given"), [
    ({"hoodie.index.type": "GLOBAL_SIMPLE"}, {"hoodie.index.type": "BLOOM"}),
    ({"hoodie.index.type": "GLOBAL_BLOOM"}, {"hoodie.index.type": "SIMPLE"}),
    ({}, {"hoodie.index.type": "GLOBAL_BLOOM"}),  # created with the default BLOOM
    ({"hoodie.index.type": "SIMPLE"}, {"hoodie.index.type": "BUCKET"}),
    ({"hoodie.index.type": "BUCKET", "hoodie.bucket.index.num.buckets": 4}, {"hoodie.index.type": "BLOOM"}),
    ({"hoodie.index.type": "BUCKET", "hoodie.bucket.index.num.buckets": 4}, {"hoodie.bucket.index.num.buckets": 8}),
])
def test_switching_where_keys_are_found_is_refused_before_the_timeline_is_touched(table_path, created, given):
    _created(table_path, **created)
    before = sorted(os.listdir(f"{table_path}/.hoodie"))
    reopened = Table.open(table_path, options=given)
    with pytest.raises(InvalidOptionError) as refused:
        reopened.write(_batch(["a"], 2, "y"))
    message = str(refused.value)
    assert table_path in message and "airflow_lake.index.switch.force=true" in message
    assert sorted(os.listdir(f"{table_path}/.hoodie")) == before
    assert rows(hudi_read(table_path), COLS) == [("a", 1, "x"), ("b", 1, "x")]


def test_an_index_with_the_same_placement_is_accepted(table_path):
    _created(table_path, **{"hoodie.index.type": "GLOBAL_SIMPLE"})
    Table.open(table_path, options={"hoodie.index.type": "global_bloom"}).write(_batch(["a"], 2, "y"))
    assert rows(hudi_read(table_path), COLS) == [("a", 2, "y"), ("b", 1, "x")]


def test_a_forced_switch_is_written_with_the_given_index(table_path):
    _created(table_path, **{"hoodie.index.type": "GLOBAL_SIMPLE"})
    forced = Table.open(table_path, options={"hoodie.index.type": "BLOOM", "airflow_lake.index.switch.force": True})
    forced.write(_batch(["a"], 2, "y"))  # per partition: a second `a`, as the user asked
    assert rows(hudi_read(table_path), COLS) == [("a", 1, "x"), ("a", 2, "y"), ("b", 1, "x")]
    assert forced.config.props["hoodie.index.type"] == "GLOBAL_SIMPLE"  # the table's default is unchanged


def test_an_apache_hudi_table_recording_an_index_type_is_written_with_it(unzip_fixture):
    path = str(unzip_fixture("quickstart_trips_table/mor/avro/v6_trips_8i1u.zip"))
    table = Table.open(path)
    table.config.props["hoodie.index.type"] = "GLOBAL_SIMPLE"
    properties.save(table.storage, table.config)
    table = Table.open(path)
    with pytest.raises(InvalidOptionError, match="GLOBAL_SIMPLE"):
        Table.open(path, options={"hoodie.index.type": "BLOOM"}).write(table.read().slice(0, 1))
    current = table.read()
    data = current.drop_columns([c for c in current.column_names if c.startswith("_hoodie")])
    rider = data.filter(pc.equal(data["rider"], "rider-A"))
    moved = rider.set_column(rider.schema.get_field_index("city"), "city", pa.array(["oslo"]))
    moved = moved.set_column(moved.schema.get_field_index("ts"), "ts",
                             pa.array([rider["ts"][0].as_py() + 1], rider.schema.field("ts").type))
    table.write(moved)  # no options: the recorded global index moves rider-A to oslo
    theirs = rows(hudi_read(path), ["rider", "city"])
    assert len(theirs) == 8 and ("rider-A", "oslo") in theirs
    assert [r for r in theirs if r[0] == "rider-A"] == [("rider-A", "oslo")]
    assert rows(table.read(), ["rider", "city"]) == theirs
