"""Compaction: plan, execute, resume; no visible row changes; writers keep writing."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import fastavro
import pyarrow as pa
import pytest

from airflow_lake.core import Table
from airflow_lake.core.errors import InvalidOptionError, WriteConflictError
from tests.conftest import hudi_read, let_time_pass, rows
from tests.core.test_failed_writes import Crash, CrashingStorage

COLS = ["id", "ts", "part", "v", "_hoodie_commit_time"]
FAST = {"hoodie.client.heartbeat.interval_in_ms": 50, "hoodie.write.lock.filesystem.expire": 0.005}


def mor(path: str, upserts: int = 5, **options) -> Table:
    t = Table.create(path, name="m", table_type="MERGE_ON_READ", record_key="id", precombine_field="ts",
                     partition_fields="part", options={**FAST, **options})
    t.write(pa.table({"id": [f"k{i:02d}" for i in range(30)], "ts": [0] * 30, "part": ["a", "b", "c"] * 10,
                      "v": [0.0] * 30}), operation="insert")
    for j in range(1, upserts + 1):
        ids = list(range(j, 30, 4))
        t.write(pa.table({"id": [f"k{i:02d}" for i in ids], "ts": [j] * len(ids),
                          "part": [["a", "b", "c"][i % 3] for i in ids], "v": [float(j)] * len(ids)}))
    t.write(pa.table({"id": ["k29"], "part": ["c"]}), operation="delete")
    return t


def test_schedule_triggers(table_path):
    t = mor(table_path, upserts=2)
    decision = t.plan_compaction()
    assert decision.instant is None and "NUM_COMMITS not met" in decision.reason
    assert "elapsed" not in decision.reason  # (what the trigger judges by, only: time does not count here)
    timed = t.plan_compaction(strategy="TIME_ELAPSED", max_delta_seconds=7 * 86400)
    assert timed.instant is None and timed.reason.endswith("elapsed (need 7.0 d)")
    assert "delta commits" not in timed.reason
    assert t.schedule_compaction(strategy="TIME_ELAPSED", max_delta_seconds=3600) is None
    assert t.schedule_compaction(strategy="NUM_OR_TIME", max_delta_commits=99, max_delta_seconds=0) is not None
    assert t.schedule_compaction(strategy="NUM_COMMITS_AFTER_LAST_REQUEST", max_delta_commits=1) is None


def test_plan_execute_keeps_rows_and_time_travel(table_path):
    t = mor(table_path)
    before = rows(t.read(), COLS)
    assert rows(hudi_read(table_path), COLS) == before
    history = {i: rows(t.read(as_of=i), COLS) for i in t.timeline.commits().completed().times}
    instant = t.schedule_compaction()
    assert instant is not None
    plan = list(fastavro.reader(io.BytesIO(open(f"{table_path}/.hoodie/{instant}.compaction.requested",
                                                "rb").read())))[0]
    assert plan["version"] == 2 and plan["preserveHoodieMetadata"] is True
    assert {op["partitionPath"] for op in plan["operations"]} == {"a", "b", "c"}
    assert all(op["deltaFilePaths"] and op["dataFilePath"] for op in plan["operations"])
    result = t.run_compaction()
    assert result.instant == instant and result.operations == 3
    names = sorted(f for f in os.listdir(f"{table_path}/.hoodie") if f.startswith(instant))
    assert names == [f"{instant}.commit", f"{instant}.compaction.inflight", f"{instant}.compaction.requested"]
    meta = json.load(open(f"{table_path}/.hoodie/{instant}.commit"))
    assert meta["compacted"] is True and meta["operationType"] == "COMPACT" and meta["extraMetadata"]["schema"]
    after = rows(t.read(), COLS)
    assert after == before  # commit times preserved: compaction is not new data
    assert rows(hudi_read(table_path), COLS) == before
    assert rows(t.read(query_type="read_optimized"), COLS) == before
    for i, expected in history.items():
        assert rows(t.read(as_of=i), COLS) == expected
        assert rows(hudi_read(table_path, **{"hoodie.read.as.of.timestamp": i}), COLS) == expected
    assert t.read_incremental(t.timeline.commits().completed().times[-2], instant).num_rows == 0
    again = t.run_compaction(instant)
    assert again.already_done and again.instant == instant


def test_writes_during_pending_compaction_start_a_new_slice(table_path):
    t = mor(table_path)
    instant = t.schedule_compaction()
    t.write(pa.table({"id": ["k01", "new"], "ts": [99, 99], "part": ["b", "a"], "v": [1.5, 2.5]}))
    logs = [f for f in os.listdir(f"{table_path}/b") if f.startswith(".") and f"_{instant}.log." in f]
    assert logs  # the update went to the slice based at the plan's instant
    expected = rows(t.read(), COLS)
    assert ("k01", 99, "b", 1.5) in [r[:4] for r in expected]
    t.run_compaction(instant)
    assert rows(t.read(), COLS) == expected
    assert rows(hudi_read(table_path), COLS) == expected
    # and the next plan compacts the new slice
    t.write(pa.table({"id": ["k02"], "ts": [100], "part": ["c"], "v": [3.5]}))
    nxt = t.schedule_compaction(max_delta_commits=1)
    assert nxt is not None
    t.run_compaction(nxt)
    assert rows(hudi_read(table_path), COLS) == rows(t.read(), COLS)


def test_scheduling_waits_for_writes_in_flight(table_path):
    t = mor(table_path)
    pending = t.new_instant_time()
    open(f"{table_path}/.hoodie/{pending}.deltacommit.requested", "w").close()
    slow = Table.open(table_path, options={"hoodie.client.heartbeat.interval_in_ms": 60_000})
    slow.storage.write(f".hoodie/.heartbeat/{pending}", b"1")
    decision = slow.plan_compaction()
    assert decision.instant is None and pending in decision.reason
    let_time_pass(table_path, 60)
    assert t.schedule_compaction() is not None  # the dead write is rolled back first


def test_crashed_execution_is_rolled_back_and_rerun(tmp_path):
    for crash_at in (2, 3, 5):
        path = str(tmp_path / f"crash{crash_at}")
        t = mor(path)
        before = rows(t.read(), COLS)
        instant = t.schedule_compaction()
        t.storage = CrashingStorage(path, crash_at)
        with pytest.raises(Crash):
            t.run_compaction()
        t = Table.open(path, options=FAST)
        assert rows(t.read(), COLS) == before
        assert rows(hudi_read(path), COLS) == before
        let_time_pass(path, 60)
        result = t.run_compaction()
        assert result.instant == instant
        assert rows(t.read(), COLS) == before
        assert rows(hudi_read(path), COLS) == before
        assert os.path.exists(f"{path}/.hoodie/{instant}.compaction.requested")
        committed = set(t.timeline.commits().completed().times)
        for part in ("a", "b", "c"):
            bases = [n for n in os.listdir(f"{path}/{part}") if n.endswith(".parquet")]
            assert len(bases) == 2 and all(n.rsplit("_", 1)[1][:17] in committed for n in bases), bases
        assert not t.timeline.pending().instants


def test_two_executors_exactly_one_wins(table_path):
    t = mor(table_path)
    instant = t.schedule_compaction()
    slow = Table.open(table_path, options={"hoodie.client.heartbeat.interval_in_ms": 60_000})
    slow.storage = CrashingStorage(table_path, 5)  # dies after marking the plan inflight
    with pytest.raises(Crash):
        slow.run_compaction(instant)
    slow.storage.write(f".hoodie/.heartbeat/{instant}", b"1")  # as if it were still running
    other = Table.open(table_path, options={"hoodie.client.heartbeat.interval_in_ms": 60_000})
    with pytest.raises(WriteConflictError, match=instant):
        other.run_compaction(instant)


def test_compaction_of_apache_hudi_tables(unzip_fixture):
    for archive in ["sample_table/mor/parquet/v6_nonpartitioned.zip",
                    "quickstart_trips_table/mor/avro/v6_trips_8i1u.zip"]:
        path = str(unzip_fixture(archive))
        t = Table.open(path)
        cols = [c for c in t.read().column_names if c != "_hoodie_file_name"]
        before = rows(t.read(), cols)
        instant = t.schedule_compaction(max_delta_commits=1)
        assert instant is not None
        t.run_compaction(instant)
        assert rows(t.read(), cols) == before
        assert rows(hudi_read(path), cols) == before


def test_compacted_files_keep_base_order_and_a_java_identical_bloom(table_path):
    import pyarrow.parquet as pq

    from airflow_lake.core.formats.bloom import BloomFilter
    from airflow_lake.core.formats.parquet import BLOOM_KEY

    t = mor(table_path)
    result = t.run_compaction(t.schedule_compaction())
    for path in result.files:
        full = os.path.join(table_path, path)
        keys = pq.read_table(full, columns=["_hoodie_record_key"]).column(0)
        assert pq.read_metadata(full).metadata[BLOOM_KEY.encode()].decode() == BloomFilter.build(keys).to_base64()


def test_compaction_of_a_copy_on_write_table_is_refused_and_changes_nothing(table_path):
    """A COPY_ON_WRITE table has no log files: scheduling or running compaction on it is a
    misconfiguration (Apache Hudi refuses it alike), not a "nothing due" answer."""
    from tests.core.test_lifecycle import cow

    t = cow(table_path, commits=3)
    before = sorted(p.relative_to(table_path).as_posix() for p in Path(table_path).rglob("*"))
    for call in (lambda: t.plan_compaction(max_delta_commits=1), lambda: t.run_compaction()):
        with pytest.raises(InvalidOptionError) as refused:
            call()
        assert f"table {t.storage.uri}: is a COPY_ON_WRITE table" in str(refused.value)
    after = sorted(p.relative_to(table_path).as_posix() for p in Path(table_path).rglob("*"))
    assert after == before
