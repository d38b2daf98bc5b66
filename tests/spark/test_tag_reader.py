"""The Spark tagger reads each file group with the core's file-group reader, as the local index
does: the table's merge (under OverwriteWithLatestAvroPayload log records still merge by the
ordering field: the tagger used to merge them without it), and the reads' damage policy (a
damaged log block is skipped, same rows as the local engine; an undecodable one fails the
write with the local engine's error: the tagger used to skip it silently and take the keys it
deleted for live ones)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from airflow_lake.core import Table
from airflow_lake.core.config import OVERWRITE_PAYLOAD
from airflow_lake.core.errors import CorruptLogError
from airflow_lake.spark import SparkEngine
from tests.conftest import hudi_read, rows
from tests.core.test_damaged_logs import COLS, _damage, _table, damaged_delete_block

UPSERT = {"id": ["a", "c", "d"], "ts": [3, 4, 3], "part": ["x"] * 3, "v": [30.0, 5.0, 4.0]}


@pytest.mark.parametrize("index", ["BLOOM", "GLOBAL_SIMPLE"])
def test_tagger_refuses_an_undecodable_block_as_the_local_index_does(spark, tmp_path, index):
    errors = {}
    for how in ("local", "frame"):
        path = str(tmp_path / how)
        _, delete_log, instant = damaged_delete_block(path, index)
        t = Table.open(path, engine=SparkEngine(spark) if how == "frame" else None)
        with pytest.raises(CorruptLogError) as err:
            t.write(spark.createDataFrame(pa.table(UPSERT)) if how == "frame" else pa.table(UPSERT))
        assert delete_log.rsplit("/", 1)[-1] in str(err.value) and instant in str(err.value)
        errors[how] = type(err.value)
    assert errors["frame"] == errors["local"]


@pytest.mark.parametrize("index", ["BLOOM"])
def test_tagger_skips_a_damaged_block_as_the_local_index_does(spark, tmp_path, index):
    found = {}
    for how in ("local", "frame"):
        path = str(tmp_path / how)
        _, log, _ = _table(path, index)
        _damage(log, "truncate")
        t = Table.open(path, engine=SparkEngine(spark) if how == "frame" else None)
        result = t.write(spark.createDataFrame(pa.table(UPSERT)) if how == "frame" else pa.table(UPSERT))
        found[how] = ((result.num_updates, result.num_inserts), rows(Table.open(path).read(), COLS))
    assert found["frame"] == found["local"] == ((2, 1), [("a", 30.0), ("b", 2.0), ("c", 5.0), ("d", 4.0)])


def test_tagger_merges_log_records_by_ordering_under_overwrite_payload(spark, tmp_path):
    """A soft delete older than the logged record it targets does not delete it (spec §7.4):
    the key stays live in its group and a later upsert updates it there."""
    found = {}
    for how in ("local", "frame"):
        path = str(tmp_path / how)
        t = Table.create(path, name="o", table_type="MERGE_ON_READ", record_key="id", precombine_field="ts",
                         partition_fields="part", options={"hoodie.index.type": "SIMPLE",
                                                           "hoodie.compaction.payload.class": OVERWRITE_PAYLOAD})
        t.write(pa.table({"id": ["k", "m"], "ts": [1, 1], "part": ["x", "x"]}), operation="insert")
        t.write(pa.table({"id": ["k"], "ts": [5], "part": ["x"]}))
        t.write(pa.table({"id": ["k"], "ts": [3], "part": ["x"], "_hoodie_is_deleted": [True]}))
        t = Table.open(path, engine=SparkEngine(spark) if how == "frame" else None)
        upsert = pa.table({"id": ["k"], "ts": [7], "part": ["x"]})
        result = t.write(spark.createDataFrame(upsert) if how == "frame" else upsert)
        found[how] = ((result.num_updates, result.num_inserts), rows(Table.open(path).read(), ["id", "ts"]))
        assert found[how][1] == rows(hudi_read(path), ["id", "ts"])
    assert found["frame"] == found["local"] == ((1, 0), [("k", 7), ("m", 1)])
