"""Damaged log blocks. A damaged block of a completed instant is logged (file and instant) and
skipped by reads, and stops compaction unless `airflow_lake.compaction.skip.corrupt.blocks`
says to compact without it (then it is recorded in the commit). An undecodable payload inside
intact framing is a `CorruptLogError` naming the file. A torn block of a pending or rolled-back
write stays silent, as in Java."""

from __future__ import annotations

import glob
import json
import logging
import os
import shutil
import struct

import pyarrow as pa
import pytest

from airflow_lake.core import Table
from airflow_lake.core.errors import CorruptLogError
from airflow_lake.core.formats.log import command_block_bytes, data_block_bytes
from airflow_lake.core.formats.log.framing import decode_map
from airflow_lake.core.model import LogFile
from airflow_lake.core.schema import with_meta_fields
from airflow_lake.core.services.compaction import SKIP_CORRUPT, SKIPPED_KEY
from tests.conftest import rows

COLS = ["id", "v"]
BASE = [("a", 1.0), ("b", 2.0), ("c", 3.0)]
UPDATED = [("a", 10.0), ("b", 20.0), ("c", 3.0)]


def _table(path: str, index: str = "BLOOM") -> tuple[Table, str, str]:
    """A MOR table whose second commit wrote one log file (one data block); (table, log, instant)."""
    t = Table.create(path, name="d", table_type="MERGE_ON_READ", record_key="id", precombine_field="ts",
                     partition_fields="part", options={"hoodie.index.type": index})
    t.write(pa.table({"id": ["a", "b", "c"], "ts": [1, 1, 1], "part": ["x"] * 3, "v": [1.0, 2.0, 3.0]}),
            operation="insert")
    t.write(pa.table({"id": ["a", "b"], "ts": [2, 2], "part": ["x", "x"], "v": [10.0, 20.0]}))
    (log,) = glob.glob(f"{path}/x/.*.log.*")
    assert rows(t.read(), COLS) == UPDATED
    return t, log, t.timeline.commits().completed().last.time


def _content_range(data: bytes, pos: int = 0) -> tuple[int, int]:
    """Start and end of the content of the block at `pos`."""
    _, p = decode_map(data, pos + 14 + 8)
    (length,) = struct.unpack_from(">q", data, p)
    return p + 8, p + 8 + length


def _damage(log: str, how: str) -> None:
    data = bytearray(open(log, "rb").read())
    if how == "flip":  # bytes inside the block's framing: the trailer no longer matches
        data[-3] ^= 0xFF
    elif how == "size":  # the size field lies
        data[6:14] = (len(data) + 100).to_bytes(8, "big")
    elif how == "truncate":  # the block is cut short
        data = data[: len(data) // 2]
    elif how == "payload":  # intact framing, garbage parquet footer inside the content
        start, end = _content_range(bytes(data))
        data[end - 40 : end - 8] = b"\xab" * 32
    open(log, "wb").write(bytes(data))


@pytest.mark.parametrize("how", ["flip", "size", "truncate"])
def test_damaged_committed_block_warns_on_read_and_stops_compaction(table_path, tmp_path, how, caplog):
    t, log, instant = _table(table_path)
    _damage(log, how)
    relative = os.path.relpath(log, table_path)
    with caplog.at_level(logging.WARNING):
        assert rows(t.read(), COLS) == BASE  # the block is skipped (as Java and hudi-rs do)
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(relative in m and instant in m for m in warned), warned

    copy = str(tmp_path / "copy")
    shutil.copytree(table_path, copy)
    plan = t.schedule_compaction(max_delta_commits=1)
    assert plan is not None
    with pytest.raises(CorruptLogError) as err:
        t.run_compaction(plan)
    assert relative in str(err.value) and instant in str(err.value) and SKIP_CORRUPT.key in str(err.value)
    assert rows(t.read(), COLS) == BASE  # nothing was committed

    # with the explicit option: compacted without the block, said in the log and in the commit
    skipping = Table.open(copy, options={SKIP_CORRUPT.key: "true"})
    plan = skipping.schedule_compaction(max_delta_commits=1)
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        skipping.run_compaction(plan)
    assert any(relative in r.getMessage() and "compaction" in r.getMessage() for r in caplog.records)
    meta = skipping.timeline.commit_metadata(skipping.timeline.get(plan))
    skipped = json.loads(meta.extra_metadata[SKIPPED_KEY])
    assert [(s["file"], s["instant"]) for s in skipped] == [(relative, instant)]
    assert rows(skipping.read(), COLS) == BASE


def test_damaged_parquet_payload_is_a_clear_error(table_path, tmp_path):
    t, log, instant = _table(table_path)
    _damage(log, "payload")
    with pytest.raises(CorruptLogError) as err:
        t.read()
    message = str(err.value)
    assert os.path.basename(log) in message and instant in message and "PARQUET_DATA" in message
    assert not isinstance(err.value.__cause__, CorruptLogError)  # the decoder's error is chained

    copy = str(tmp_path / "copy")
    shutil.copytree(table_path, copy)
    plan = t.schedule_compaction(max_delta_commits=1)
    with pytest.raises(CorruptLogError, match=instant):
        t.run_compaction(plan)
    skipping = Table.open(copy, options={SKIP_CORRUPT.key: "true"})
    plan = skipping.schedule_compaction(max_delta_commits=1)
    skipping.run_compaction(plan)
    meta = skipping.timeline.commit_metadata(skipping.timeline.get(plan))
    assert json.loads(meta.extra_metadata[SKIPPED_KEY])[0]["instant"] == instant
    assert rows(skipping.read(), COLS) == BASE


def damaged_delete_block(path: str, index: str = "BLOOM") -> tuple[Table, str, str]:
    """`_table` then a delete of "c" whose delete block's payload is garbage (intact framing);
    (table, delete log, its instant)."""
    t, log, _ = _table(path, index)
    t.write(pa.table({"id": ["c"], "ts": [3], "part": ["x"], "v": [0.0]}), operation="delete")
    instant = t.timeline.commits().completed().last.time
    (delete_log,) = [f for f in glob.glob(f"{path}/x/.*.log.*") if f != log]
    assert rows(t.read(), COLS) == [("a", 10.0), ("b", 20.0)]
    data = bytearray(open(delete_log, "rb").read())
    start, end = _content_range(bytes(data))
    data[start + 8 : end] = b"\xff" * (end - start - 8)
    open(delete_log, "wb").write(bytes(data))
    return t, delete_log, instant


def test_damaged_delete_block_payload_is_a_clear_error(table_path):
    t, delete_log, instant = damaged_delete_block(table_path)
    with pytest.raises(CorruptLogError) as err:
        t.read()
    assert os.path.basename(delete_log) in str(err.value) and instant in str(err.value)


@pytest.mark.parametrize("index", ["BLOOM", "SIMPLE", "GLOBAL_SIMPLE"])
def test_index_lookup_skips_a_damaged_block_with_a_warning(table_path, caplog, index):
    """The key-lookup indexes read a group as reads do: a damaged block is logged and skipped."""
    t, log, instant = _table(table_path, index)
    _damage(log, "truncate")
    with caplog.at_level(logging.WARNING):
        result = t.write(pa.table({"id": ["a", "d"], "ts": [3, 3], "part": ["x", "x"], "v": [30.0, 4.0]}))
    assert (result.num_updates, result.num_inserts) == (1, 1)
    relative = os.path.relpath(log, table_path)
    assert any(relative in r.getMessage() and instant in r.getMessage() for r in caplog.records)
    assert rows(t.read(), COLS) == [("a", 30.0), ("b", 2.0), ("c", 3.0), ("d", 4.0)]


@pytest.mark.parametrize("index", ["BLOOM", "SIMPLE", "GLOBAL_SIMPLE"])
def test_index_lookup_refuses_an_undecodable_block(table_path, index):
    """A lookup past an undecodable delete block would take its deleted keys for live ones."""
    t, delete_log, instant = damaged_delete_block(table_path, index)
    before = t.timeline.commits().completed().times
    with pytest.raises(CorruptLogError) as err:
        t.write(pa.table({"id": ["c"], "ts": [4], "part": ["x"], "v": [5.0]}))
    assert os.path.basename(delete_log) in str(err.value) and instant in str(err.value)
    assert Table.open(table_path).timeline.commits().completed().times == before


def test_torn_block_of_a_failed_write_is_silent(table_path, caplog):
    """A failed writer appended a torn block to a committed file (Java appends), then its
    rollback voided the instant; and a pending write's torn block. Neither is reported."""
    t, log, _ = _table(table_path)
    schema = with_meta_fields(t.schema_avro())
    failed = t.new_instant_time()
    extra = data_block_bytes(failed, schema, t.read().select([f["name"] for f in schema["fields"]]).slice(0, 1))
    with open(log, "ab") as f:  # after the committed bytes: a block cut short
        f.write(extra[: len(extra) // 2])
    lf = LogFile.parse("x", os.path.basename(log))
    rollback_log = LogFile("x", lf.file_id, lf.base_instant, lf.version + 1, "9-0-9")
    open(os.path.join(table_path, rollback_log.path), "wb").write(
        command_block_bytes(t.new_instant_time(), failed))
    # a pending write whose only log file is torn
    pending = t.new_instant_time()
    open(os.path.join(table_path, ".hoodie", f"{pending}.deltacommit.requested"), "wb").close()
    torn = LogFile("x", lf.file_id, lf.base_instant, lf.version + 2, "8-0-8")
    open(os.path.join(table_path, torn.path), "wb").write(
        data_block_bytes(pending, schema, t.read().select([f["name"] for f in schema["fields"]]))[:50])

    with caplog.at_level(logging.WARNING):
        assert rows(t.read(), COLS) == UPDATED
        assert rows(t.read_incremental("19700101000000000"), COLS) == UPDATED
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    os.remove(os.path.join(table_path, ".hoodie", f"{pending}.deltacommit.requested"))
    os.remove(os.path.join(table_path, torn.path))
    plan = t.schedule_compaction(max_delta_commits=1)
    with caplog.at_level(logging.WARNING):
        t.run_compaction(plan)
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert SKIPPED_KEY not in t.timeline.commit_metadata(t.timeline.get(plan)).extra_metadata
    assert rows(t.read(), COLS) == UPDATED


def test_payload_damage_of_a_rolled_back_instant_is_silent(table_path, caplog):
    t, log, _ = _table(table_path)
    schema = with_meta_fields(t.schema_avro())
    failed = t.new_instant_time()
    block = bytearray(data_block_bytes(failed, schema, t.read().select([f["name"] for f in schema["fields"]])))
    start, end = _content_range(bytes(block))
    block[end - 40 : end - 8] = b"\xab" * 32
    with open(log, "ab") as f:
        f.write(bytes(block) + command_block_bytes(t.new_instant_time(), failed))
    with caplog.at_level(logging.WARNING):
        assert rows(t.read(), COLS) == UPDATED
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_damaged_apache_hudi_log_file_names_the_committed_instant(unzip_fixture, caplog):
    """A Java-written log file: the header is unreadable, the deltacommit's write stats say
    which instant wrote the file."""
    path = str(unzip_fixture("quickstart_trips_table/mor/avro/v6_trips_8i1u.zip"))
    table = Table.open(path)
    (log,) = glob.glob(f"{path}/**/.*.log.*", recursive=True)
    writer = table.timeline.commits().completed().last.time
    _damage(log, "size")
    with caplog.at_level(logging.WARNING):
        fares = {r["uuid"]: r["fare"] for r in table.read(columns=["uuid", "fare"]).to_pylist()}
    assert fares["9909a8b1-2d15-4d3d-8ec9-efc48c536a00"] == 33.9  # the update is lost
    assert any(os.path.basename(log) in r.getMessage() and writer in r.getMessage() for r in caplog.records)
