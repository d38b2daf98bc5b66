"""A restore deletes every file of each instant it undoes, whatever else shares the instant's
time (its savepoint) and however often it is interrupted: a log file left behind holds
updates the restore took back, which a later compaction or archive brings back."""

from __future__ import annotations

import os

import pyarrow as pa
import pytest

from airflow_lake.core import Table
from tests.conftest import hudi_read, let_time_pass, rows
from tests.crashes import Crash, Dies

FAST = {"hoodie.client.heartbeat.interval_in_ms": 50, "hoodie.write.lock.filesystem.expire": 0.005}
V9 = {"hoodie.write.table.version": 9, "hoodie.metadata.enable": "true"}
COLS = ["id", "ts", "v"]
SAVED = [(f"k{i}", 1, 1.0) for i in range(6)]


def _batch(ids: list[str], ts: int) -> pa.Table:
    return pa.table({"id": ids, "ts": [ts] * len(ids), "part": [f"p{int(i[1:]) % 2}" for i in ids],
                     "v": [float(ts)] * len(ids)})


def _table(path: str, version: int) -> tuple[Table, dict]:
    options = {**FAST, **(V9 if version == 9 else {})}
    t = Table.create(path, name="t", table_type="MERGE_ON_READ", record_key="id", precombine_field="ts",
                     partition_fields="part", options=options)
    t.write(_batch([f"k{i}" for i in range(6)], 1), operation="insert")
    return t, options


def _log_files(path: str) -> list[str]:
    return sorted(f for root, _, names in os.walk(path) if ".hoodie" not in root for f in names if ".log." in f)


@pytest.mark.parametrize("version", [6, 9])
def test_a_restore_undoing_a_savepointed_deltacommit_deletes_its_log_files(tmp_path, version):
    """The undone deltacommit D has a savepoint too (same time): the restore took D's files from
    whichever of the two state files the listing gave first, and from the savepoint's found only
    base files: D's log files stayed."""
    for attempt in range(4):
        path = str(tmp_path / f"t{attempt}")
        t, options = _table(path, version)
        saved = t.timeline.commits().completed().last.time
        t.savepoint(saved)
        t.write(_batch(["k0", "k1", "k2", "k3"], 2))  # log files in both partitions
        t.savepoint(t.timeline.commits().completed().last.time)
        Table.open(path, options=options).restore(saved)
        assert _log_files(path) == [], attempt
        assert rows(Table.open(path).read(), COLS) == SAVED
        assert rows(hudi_read(path), COLS) == SAVED


@pytest.mark.parametrize("version", [6, 9])
def test_a_restore_that_dies_deleting_log_files_deletes_the_rest_when_finished(tmp_path, version):
    """The retry found the undone deltacommit inflight (its completed file removed first) with
    no markers (deleted when it committed): its files were taken to be base files named by its
    instant alone, and the log files not yet deleted stayed, unlisted by the metadata table."""
    for nth in (1, 2):
        path = str(tmp_path / f"t{nth}")
        t, options = _table(path, version)
        saved = t.timeline.commits().completed().last.time
        t.savepoint(saved)
        t.write(_batch(["k0", "k1", "k2", "k3"], 2))
        assert len(_log_files(path)) == 2
        t = Table.open(path, options=options)
        t.storage = Dies(path, nth, ops=("delete",), match=lambda p: ".log." in p and ".hoodie" not in p)
        with pytest.raises(Crash):
            t.restore(saved)
        let_time_pass(path, 60)
        Table.open(path, options=options).restore(saved)  # (the interrupted one finished first)
        assert _log_files(path) == [], nth
        assert rows(Table.open(path).read(), COLS) == SAVED
        assert rows(hudi_read(path), COLS) == SAVED


def test_a_log_file_another_instant_appended_to_is_not_deleted_by_a_restore(tmp_path):
    """Java 0.x appends a deltacommit's block to the slice's log file on HDFS: the file holds a
    savepointed commit's block too. The restore deleted the file whole, and the savepoint's
    update with it; it is refused now, naming the file, and nothing changes."""
    import json

    from airflow_lake.core.errors import UnsupportedFeatureError
    from airflow_lake.core.formats.log.blocks import read_log_file

    path = str(tmp_path / "t")
    t, options = _table(path, 6)
    t.write(_batch(["k0"], 2))  # T1: a log file L
    t1 = t.timeline.commits().completed().last.time
    t.savepoint(t1)
    t.write(_batch(["k2"], 3))  # T2: its own log file, appended to L below as Java would on HDFS
    t2 = t.timeline.commits().completed().last.time
    logs = {os.path.join(root, f): {b.instant for b in read_log_file(open(os.path.join(root, f), "rb").read())}
            for root, _, names in os.walk(path) if ".hoodie" not in root for f in names if ".log." in f}
    [first] = [f for f, instants in logs.items() if instants == {t1}]
    [second] = [f for f, instants in logs.items() if instants == {t2}]
    with open(first, "ab") as out, open(second, "rb") as appended:
        out.write(appended.read())
    os.remove(second)
    commit = os.path.join(path, ".hoodie", f"{t2}.deltacommit")
    meta = json.load(open(commit))
    for stats in meta["partitionToWriteStats"].values():
        for stat in stats:
            if stat["path"].endswith(os.path.basename(second)):
                stat["path"] = stat["path"][: -len(os.path.basename(second))] + os.path.basename(first)
    with open(commit, "w") as f:
        json.dump(meta, f)
    before = rows(Table.open(path).read(), COLS)
    timeline = sorted(os.listdir(os.path.join(path, ".hoodie")))
    with pytest.raises(UnsupportedFeatureError, match=f"undoing {t2}: its log file .*{os.path.basename(first)} also "
                                                      f"holds blocks of \\['{t1}'\\]"):
        Table.open(path, options=options).restore(t1)
    assert rows(Table.open(path).read(), COLS) == before and os.path.exists(first)
    assert sorted(os.listdir(os.path.join(path, ".hoodie"))) == timeline
