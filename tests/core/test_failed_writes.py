"""A write that dies at any point is invisible, and the next write rolls it back.

Deterministic crash points come from a storage wrapper that fails on the N-th write; a
real SIGKILL of a writing subprocess covers the rest.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pyarrow as pa
import pytest

from airflow_lake.core import Table
from airflow_lake.core.storage import Storage
from airflow_lake.core.timeline.instant import ROLLBACK
from airflow_lake.core.timeline.metadata import read_avro
from tests.conftest import hudi_read, let_time_pass, rows

FAST = {"hoodie.client.heartbeat.interval_in_ms": 50, "hoodie.write.lock.filesystem.expire": 0.005}
COLS = ["id", "ts", "part", "v"]


class Crash(BaseException):
    """Stands for the process dying: not an Exception, so nothing handles it."""


class CrashingStorage(Storage):
    def __init__(self, uri: str, crash_at: int):
        super().__init__(uri)
        self.crash_at = crash_at
        self.count = 0

    def _tick(self):
        if threading.current_thread().name.startswith("heartbeat-"):
            return  # periodic refreshes depend on timing: not crash points
        self.count += 1
        if self.count == self.crash_at:
            raise Crash(f"crash at write {self.count}")

    def write(self, path, data):
        self._tick()
        super().write(path, data)

    def create(self, path, data=b""):
        self._tick()
        return super().create(path, data)


def base_table(path: str, table_type: str = "COPY_ON_WRITE") -> Table:
    t = Table.create(path, name="t", table_type=table_type, record_key="id", precombine_field="ts",
                     partition_fields="part", options=FAST)
    t.write(pa.table({"id": ["a", "b", "c"], "ts": [1, 1, 1], "part": ["x", "y", "x"], "v": [1.0, 2.0, 3.0]}),
            operation="insert")
    return t


BEFORE = [("a", 1, "x", 1.0), ("b", 1, "y", 2.0), ("c", 1, "x", 3.0)]
UPSERT = pa.table({"id": ["a", "d", "e"], "ts": [2, 2, 2], "part": ["x", "y", "z"], "v": [10.0, 4.0, 5.0]})
AFTER_UPSERT = [("a", 2, "x", 10.0), ("b", 1, "y", 2.0), ("c", 1, "x", 3.0), ("d", 2, "y", 4.0), ("e", 2, "z", 5.0)]
NEXT = pa.table({"id": ["b"], "ts": [5], "part": ["y"], "v": [20.0]})


def count_writes(tmp_path, operation: str, data: pa.Table, table_type: str) -> int:
    path = str(tmp_path / "count")
    base_table(path, table_type)
    counting = CrashingStorage(path, crash_at=-1)
    t = Table.open(path, options=FAST)
    t.storage = counting
    t.write(data, operation=operation)
    return counting.count


@pytest.mark.parametrize(("operation", "table_type"), [
    ("upsert", "COPY_ON_WRITE"), ("insert_overwrite", "COPY_ON_WRITE"),
    ("upsert", "MERGE_ON_READ"), ("delete", "MERGE_ON_READ"),
])
def test_crash_at_every_write_is_invisible_and_repaired(tmp_path, operation, table_type):
    total = count_writes(tmp_path, operation, UPSERT, table_type)
    assert total >= 8
    for n in range(1, total + 1):
        path = str(tmp_path / f"{operation}-{n}")
        base_table(path, table_type)
        crashed, t = crash_then_repair(path, FAST, operation, n, _after(operation))
        timeline = t.timeline
        if crashed and timeline.actions(ROLLBACK).instants:
            rb = timeline.actions(ROLLBACK).instants[-1]
            meta = read_avro(timeline.read_details(rb))
            assert meta["commitsRollback"], meta
        # no data file of a rolled-back instant remains
        committed = set(timeline.commits().completed().times)
        for root, _, files in os.walk(path):
            if ".hoodie" in root:
                continue
            for f in files:
                if f.endswith(".parquet"):
                    assert f.rsplit("_", 1)[1].split(".")[0] in committed, f
                if ".log." in f:
                    stage = f.rsplit("_", 1)[1].split("-")[1]  # our write tokens carry the instant
                    assert any(c.endswith(stage) for c in committed), f


def crash_then_repair(path: str, options: dict, operation: str, n: int, after: list[tuple]) -> tuple[bool, Table]:
    """`UPSERT` with `operation` on the table at `path`, its storage failing at its `n`-th
    write: nothing of a dead write is visible (to us, to hudi-rs); the next write (`NEXT`)
    repairs the table, and both readers agree on the result. Returns whether it crashed and
    the table after the repairing write."""
    t = Table.open(path, options=options)
    t.storage = CrashingStorage(path, crash_at=n)
    crashed = False
    try:
        t.write(UPSERT, operation=operation)
    except Crash:
        crashed = True
    t = Table.open(path, options=options)
    if crashed:
        assert rows(t.read(), COLS) == BEFORE, f"crash at write {n}"
        assert rows(hudi_read(path), COLS) == BEFORE, f"crash at write {n}"
    let_time_pass(path, 60)  # the dead writer's heartbeat and lock expire
    t.write(NEXT, operation="upsert")
    expected = dict((r[0], r) for r in (BEFORE if crashed else after))
    expected["b"] = ("b", 5, "y", 20.0)
    expected = sorted(expected.values())
    assert rows(t.read(), COLS) == expected, f"crash at write {n}"
    assert rows(hudi_read(path), COLS) == expected, f"crash at write {n}"
    assert not t.timeline.pending().instants, f"crash at write {n}: {t.timeline}"
    return crashed, t


def _after(operation: str) -> list[tuple]:
    if operation == "upsert":
        return AFTER_UPSERT
    if operation == "delete":
        return [("b", 1, "y", 2.0), ("c", 1, "x", 3.0)]
    # insert_overwrite replaced partitions x, y, z with the batch
    return [("a", 2, "x", 10.0), ("d", 2, "y", 4.0), ("e", 2, "z", 5.0)]


def test_pending_write_with_live_heartbeat_is_left_alone(table_path):
    t = base_table(table_path)
    t.storage = CrashingStorage(table_path, crash_at=4)  # dies after requested + heartbeat
    with pytest.raises(Crash):
        t.write(UPSERT)
    slow = Table.open(table_path, options={"hoodie.client.heartbeat.interval_in_ms": 60_000})
    # the heartbeat file was removed by the dying writer; recreate a live one
    pending = slow.timeline.pending().instants
    assert len(pending) == 1
    slow.storage.write(f".hoodie/.heartbeat/{pending[0].time}", b"1")
    slow.write(NEXT)
    assert [i.time for i in slow.timeline.pending()] == [pending[0].time]
    assert not slow.timeline.actions(ROLLBACK).instants


def test_interrupted_rollback_is_finished(table_path):
    t = base_table(table_path)
    t.storage = CrashingStorage(table_path, crash_at=6)
    with pytest.raises(Crash):
        t.write(UPSERT)
    let_time_pass(table_path, 60)
    # the rollback itself dies after writing its plan
    t = Table.open(table_path, options=FAST)
    t.storage = CrashingStorage(table_path, crash_at=3)
    with pytest.raises(Crash):
        t.write(NEXT)
    t = Table.open(table_path, options=FAST)
    assert t.timeline.actions(ROLLBACK).pending().instants
    t.write(NEXT)
    assert not t.timeline.pending().instants
    expected = sorted([r for r in BEFORE if r[0] != "b"] + [("b", 5, "y", 20.0)])
    assert rows(t.read(), COLS) == expected
    assert rows(hudi_read(table_path), COLS) == expected


KILLED_WRITER = textwrap.dedent("""
    import sys, pyarrow as pa
    from airflow_lake.core import Table
    t = Table.open(sys.argv[1], options={"hoodie.client.heartbeat.interval_in_ms": 50,
                                          "hoodie.parquet.max.file.size": 200_000})
    n = 200_000
    for i in range(50):
        t.write(pa.table({"id": [f"k{j}" for j in range(i * n, (i + 1) * n)], "ts": [i] * n,
                          "part": [f"p{j % 7}" for j in range(n)], "v": [float(i)] * n}), operation="insert")
        print(i, flush=True)
""")


@pytest.mark.slow  # a writer of 200k-row batches killed three times, the tables read by hudi-rs
@pytest.mark.parametrize("delay", [0.4, 1.1, 1.9])
def test_sigkill_mid_write(table_path, delay):
    base_table(table_path)
    proc = subprocess.Popen([sys.executable, "-c", KILLED_WRITER, table_path], stdout=subprocess.PIPE,
                            text=True, cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    time.sleep(delay)
    proc.send_signal(signal.SIGKILL)
    out, _ = proc.communicate()
    done = len(out.split())
    t = Table.open(table_path, options=FAST)
    committed = len(t.timeline.commits().completed()) - 1
    assert committed in (done, done + 1)  # the last commit may land before its print
    ours = t.read(columns=["id"]).num_rows
    assert ours == 3 + committed * 200_000
    assert hudi_read(table_path).num_rows == ours
    let_time_pass(table_path, 60)  # the killed writer's heartbeat and lock expire
    t.write(NEXT)
    assert not t.timeline.pending().instants
    assert t.read(columns=["id"]).num_rows == ours
    assert hudi_read(table_path).num_rows == ours


@pytest.mark.slow  # some 40 processes killed and recovered
def test_kill_harness_small():
    """Every operation SIGKILLed at sampled storage mutations, then retried (see
    tests/reliability/harness.py; `make reliability` runs every point on bigger tables)."""
    from tests.reliability.harness import run
    from tests.reliability.operations import OPERATIONS

    report = run(list(OPERATIONS), size=1, commits=10, points=4)
    print(report.line())
    assert report.kills >= 40 and report.recoveries == report.kills
    assert not report.mismatches, report.mismatches


@pytest.mark.slow  # processes killed and recovered
def test_kill_harness_on_a_hudi1x_table_with_a_metadata_table():
    """The kill harness on version 9 tables whose metadata table is on: killed between the MDT
    commit and the data commit (and everywhere else sampled), a table hudi-rs (listing files
    through the MDT) and we read alike, repaired by the retry."""
    from tests.reliability.harness import run

    report = run(["upsert_mor", "insert_overwrite", "compaction_execute", "clean", "rollback", "restore"], size=1,
                 commits=6, points=5, table_options={"hoodie.write.table.version": 9, "hoodie.metadata.enable": "true",
                                          "hoodie.metadata.compact.max.delta.commits": 3})
    print(report.line())
    assert report.kills >= 25 and report.recoveries == report.kills
    assert not report.mismatches, report.mismatches
