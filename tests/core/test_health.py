"""`TableHealth`: a table's backlog, pending work and what services would do, from its timeline
and file listing; its figures checked against counts taken straight from the files."""

from __future__ import annotations

import os
import time

import pyarrow as pa
import pytest

from airflow_lake.core.health import breaches, table_health
from airflow_lake.core.table import Table
from airflow_lake.core.txn.heartbeat import Heartbeat, last_beat_ms
from tests.core.test_failed_writes import FAST, Crash, CrashingStorage


def _logs_on_disk(path: str) -> dict[str, int]:
    """file id -> log files on storage (outside .hoodie)."""
    out: dict[str, int] = {}
    for root, _, files in os.walk(path):
        if ".hoodie" in root:
            continue
        for f in files:
            if f.startswith(".") and ".log." in f:
                out[f[1:].split("_")[0]] = out.get(f[1:].split("_")[0], 0) + 1
    return out


def _mor(path: str, **options) -> Table:
    return Table.create(path, name="t", table_type="MERGE_ON_READ", record_key="id", precombine_field="ts",
                        partition_fields="p", options={**FAST, **options})


def test_a_mor_backlog_is_counted_per_slice_and_cleared_by_compaction(tmp_path):
    path = str(tmp_path / "t")
    t = _mor(path)
    t.write(pa.table({"id": ["a", "b", "c"], "ts": [0, 0, 0], "p": ["x", "y", "x"]}))
    for ts in range(1, 5):
        t.write(pa.table({"id": ["a", "b"], "ts": [ts, ts], "p": ["x", "y"]}))
    h = table_health(t)
    on_disk = _logs_on_disk(path)
    assert (h.table_type, h.table_version, h.metadata_table_version) == ("MERGE_ON_READ", 6, None)
    assert h.delta_commits_since_compaction == 5 and h.latest_compaction is None
    assert h.slices_with_logs == len(on_disk) == 2 and h.log_files == sum(on_disk.values())
    assert {b.file_id: b.log_files for b in h.backlog} == on_disk
    assert h.max_delta_commits_per_slice == 4  # the 4 updates (the first write made the base files)
    assert h.latest_commit == t.timeline.commits().completed().last.time and 0 <= h.latest_commit_age_s < 60
    assert h.active_commits == 5 and h.archivable_commits == 0 and not h.stale_instants

    plan = t.schedule_compaction(max_delta_commits=1)
    h = table_health(t, clock=lambda: time.time() + 7200)
    assert [p.instant for p in h.pending_compactions] == [plan] and h.pending_compactions[0].file_groups == 2
    assert h.pending_compactions[0].heartbeat_expired is None  # a plan waiting: nothing beats for it
    assert h.oldest_pending_compaction_age_s >= 7200
    lines = breaches(h, {"oldest_pending_compaction_age_s": 3600, "max_log_files_per_slice": 100})
    assert len(lines) == 1 and path in lines[0] and "oldest_pending_compaction_age_s" in lines[0] \
        and "CompactionExecuteOperator" in lines[0]

    t.run_compaction(plan)
    h = table_health(t)
    assert (h.latest_compaction, h.delta_commits_since_compaction, h.slices_with_logs, h.log_files) == (plan, 0, 0, 0)
    assert not h.pending_compactions and breaches(h, {"log_files": 0, "stale_instants": 0}) == []


def test_a_dead_writer_is_a_stale_instant(tmp_path):
    path = str(tmp_path / "t")
    t = _mor(path)
    t.write(pa.table({"id": ["a"], "ts": [0], "p": ["x"]}))
    dying = Table.open(path, options=FAST)
    dying.storage = CrashingStorage(path, crash_at=5)
    with pytest.raises(Crash):
        dying.write(pa.table({"id": ["a"], "ts": [1], "p": ["x"]}))
    t = Table.open(path, options=FAST)
    [pending] = t.timeline.pending().instants
    Heartbeat(t.storage, pending.time, 50).beat()  # its last beat, as a killed process leaves it
    beat_s = last_beat_ms(t.storage, pending.time) / 1000
    alive = table_health(t, clock=lambda: beat_s)  # (judged at the beat: alive)
    assert [p.instant for p in alive.pending] == [pending.time] and alive.stale_instants == []
    dead = table_health(t, clock=lambda: time.time() + 60)
    assert dead.stale_instants == [pending.time] and dead.pending[0].heartbeat_expired
    [line] = breaches(dead, {"stale_instants": 0})
    assert f"stale_instants is 1 ({pending.time})" in line and "rolls them back" in line


def test_the_metadata_table_and_what_a_clean_and_archive_would_do(tmp_path):
    path = str(tmp_path / "t")
    t = Table.create(path, name="t", record_key="id", precombine_field="ts",
                     options={"hoodie.write.table.version": 9, "hoodie.metadata.enable": "true",
                              "hoodie.cleaner.commits.retained": 1, "hoodie.keep.min.commits": 2,
                              "hoodie.keep.max.commits": 3})
    for ts in range(5):
        t.write(pa.table({"id": ["a"], "ts": [ts]}))
    h = table_health(t)
    assert (h.table_version, h.metadata_table_version, h.metadata_partitions) == (9, 9, ["files"])
    assert h.clean_would_delete == t.clean(dry_run=True).total_files > 0
    assert h.active_commits == 5 and h.archivable_commits == 0 and "metadata table" in h.archival_blocked_by
    t.clean()
    assert table_health(t).clean_would_delete == 0
    with pytest.raises(ValueError, match="is not a health figure"):
        breaches(h, {"no_such_figure": 1})


def test_a_damaged_latest_commit_makes_the_table_unhealthy_not_ok(tmp_path):
    """Every read starts from the latest commit's metadata: damaged, the health (the provider's
    table page, the maintenance plan) says so instead of 'ok'."""
    from airflow_lake.core.errors import InvalidTableError

    path = str(tmp_path / "t")
    table = Table.create(path, name="t", record_key="id", precombine_field="ts")
    done = table.write(pa.table({"id": [1], "ts": [1]})).instant
    with open(os.path.join(path, ".hoodie", f"{done}.commit"), "r+b") as f:
        f.seek(10)
        f.write(b"\xff\xfe")
    with pytest.raises(InvalidTableError, match=f"{done}.commit: commit metadata"):
        table_health(Table.open(path))
