"""A metadata-table compaction a crash left pending merges log files of completed
deltacommits. A rollback or restore that then undoes one of those data-table commits deleted
its MDT log files, and the compaction, finished by every later write, could never finish:
each write failed reading a file that was gone. The pending compaction is undone first now,
and one that cannot finish is undone (with a warning) where a table was left so."""

from __future__ import annotations

import logging
import os

import pyarrow as pa
import pytest

from airflow_lake.core import Table
from airflow_lake.core.metadata_writer import MetadataWriter
from tests.conftest import hudi_read, let_time_pass, rows
from tests.crashes import Crash, Dies

FAST = {"hoodie.client.heartbeat.interval_in_ms": 50, "hoodie.write.lock.filesystem.expire": 0.005}
OPTIONS = {**FAST, "hoodie.write.table.version": 9, "hoodie.metadata.enable": "true",
           "hoodie.metadata.compact.max.delta.commits": 3}
COLS = ["id", "ts", "v"]


def _batch(ids: list[str], ts: int) -> pa.Table:
    return pa.table({"id": ids, "ts": [ts] * len(ids), "part": ["p0"] * len(ids), "v": [float(ts)] * len(ids)})


def _crashed_compaction(path: str, table_type: str) -> tuple[str, str]:
    """(the savepointed first commit, the last completed commit W0) of a table whose MDT
    compaction, merging W0's deltacommit, a crash left pending."""
    t = Table.create(path, name="t", table_type=table_type, record_key="id", precombine_field="ts",
                     partition_fields="part", options=OPTIONS)
    t.write(_batch(["k1", "k2"], 1), operation="insert")
    saved = t.timeline.commits().completed().last.time
    t.savepoint(saved)
    t.write(_batch(["k3"], 2))
    w0 = t.timeline.commits().completed().last.time
    crashing = Table.open(path, options=OPTIONS)
    crashing.storage = Dies(path, ops=("write",), match=lambda p: ".hoodie/metadata/files/files-" in p
                            and p.endswith(".hfile"))  # (the MDT files partition's compacted base file)
    with pytest.raises(Crash):
        crashing.write(_batch(["k5"], 4))
    assert [i.action for i in MetadataWriter(t.storage).timeline().pending()] == ["compaction"]
    let_time_pass(path, 60)
    return saved, w0


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
@pytest.mark.parametrize("undo", ["rollback", "restore"])
def test_undoing_a_commit_a_pending_mdt_compaction_merges_leaves_the_table_writable(tmp_path, table_type, undo):
    path = str(tmp_path / "t")
    saved, w0 = _crashed_compaction(path, table_type)
    t = Table.open(path, options=OPTIONS)
    t.rollback(w0) if undo == "rollback" else t.restore(saved)
    for ts in (5, 6, 7, 8):  # (writes enough for the MDT to compact again)
        Table.open(path, options=OPTIONS).write(_batch([f"k{ts + 1}"], ts))
    expected = [("k1", 1, 1.0), ("k2", 1, 1.0)] + [(f"k{ts + 1}", ts, float(ts)) for ts in (5, 6, 7, 8)]
    assert rows(Table.open(path).read(), COLS) == expected
    assert rows(hudi_read(path), COLS) == expected  # (hudi-rs lists the files through the MDT)
    mdt = MetadataWriter(Table.open(path).storage).timeline()
    assert not mdt.pending().instants and "commit" in {i.action for i in mdt.completed()}


def test_a_pending_mdt_compaction_whose_log_files_are_gone_is_undone_with_a_warning(tmp_path, caplog):
    """A table an earlier version left so: W0 rolled back, its MDT log file gone, the MDT
    compaction merging it still pending (its state files put back after today's rollback)."""
    path = str(tmp_path / "t")
    _, w0 = _crashed_compaction(path, "COPY_ON_WRITE")
    timeline = os.path.join(path, ".hoodie", "metadata", ".hoodie", "timeline")
    kept = {n: open(os.path.join(timeline, n), "rb").read() for n in os.listdir(timeline) if ".compaction." in n}
    Table.open(path, options=OPTIONS).rollback(w0)
    for name, data in kept.items():
        with open(os.path.join(timeline, name), "wb") as f:
            f.write(data)
    assert [i.action for i in MetadataWriter(Table.open(path).storage).timeline().pending()] == ["compaction"]
    with caplog.at_level(logging.WARNING):
        Table.open(path, options=OPTIONS).write(_batch(["k6"], 5))
    assert any("pending compaction" in r.getMessage() and "it is undone" in r.getMessage() for r in caplog.records)
    assert not MetadataWriter(Table.open(path).storage).timeline().pending().instants
    expected = [("k1", 1, 1.0), ("k2", 1, 1.0), ("k6", 5, 5.0)]
    assert rows(Table.open(path).read(), COLS) == expected
    assert rows(hudi_read(path), COLS) == expected


def test_a_restore_undoes_a_pending_mdt_compaction_itself(tmp_path, caplog):
    """The pending compaction found by the restore itself (left where no repair undid it, e.g.
    by another engine): undone before the restore deletes the log files it merges, not left to
    fail, then undone with a warning, at the next write."""
    path = str(tmp_path / "t")
    saved, _ = _crashed_compaction(path, "MERGE_ON_READ")
    timeline = os.path.join(path, ".hoodie", "metadata", ".hoodie", "timeline")
    kept = {n: open(os.path.join(timeline, n), "rb").read() for n in os.listdir(timeline) if ".compaction." in n}
    txn = Table.open(path, options=OPTIONS).transaction()
    with txn.lock():
        txn.repair()  # (the killed write rolled back, the compaction with it: put back below)
    for name, data in kept.items():
        with open(os.path.join(timeline, name), "wb") as f:
            f.write(data)
    assert [i.action for i in MetadataWriter(Table.open(path).storage).timeline().pending()] == ["compaction"]
    with caplog.at_level(logging.WARNING):
        Table.open(path, options=OPTIONS).restore(saved)
        Table.open(path, options=OPTIONS).write(_batch(["k6"], 5))
    assert not any("it is undone" in r.getMessage() for r in caplog.records)
    assert not MetadataWriter(Table.open(path).storage).timeline().pending().instants
    expected = [("k1", 1, 1.0), ("k2", 1, 1.0), ("k6", 5, 5.0)]
    assert rows(Table.open(path).read(), COLS) == expected
    assert rows(hudi_read(path), COLS) == expected
