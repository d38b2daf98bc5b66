"""Run tokens (`airflow_lake.token`) and the timeline an operation carries along.

A retry finds its earlier instant however many commits came after it, and after archival;
an attempt that was rolled back or never completed is not done; every action is found.
A write lists `.hoodie/` three times, whatever the timeline's length, and the timeline it
keeps in memory matches a fresh listing.
"""

from __future__ import annotations

import os

import pyarrow as pa

from airflow_lake.core import Table
from airflow_lake.core.storage import Storage
from airflow_lake.core.timeline import tokens
from airflow_lake.core.timeline.active import ActiveTimeline
from airflow_lake.core.timeline.instant import CLEAN, COMMIT, COMPACTION, ROLLBACK, SAVEPOINT, Instant, State
from tests.conftest import hudi_read

KEY = "airflow_lake.token"
FAST = {"hoodie.client.heartbeat.interval_in_ms": 50, "hoodie.write.lock.filesystem.expire": 0.005}


def row(i: int, key: str | None = None) -> pa.Table:
    return pa.table({"id": [key or f"k{i % 7}"], "ts": [i], "part": [f"p{i % 2}"], "v": [float(i)]})


def make(path: str, table_type: str = "COPY_ON_WRITE") -> Table:
    return Table.create(path, name="t", table_type=table_type, record_key="id", precombine_field="ts",
                        partition_fields="part", options=FAST)


class ListingCounter(Storage):
    def __init__(self, uri: str):
        super().__init__(uri)
        self.listings = 0

    def list(self, path, *, recursive=False):
        if path.rstrip("/") == ".hoodie":
            self.listings += 1
        return super().list(path, recursive=recursive)

    def list_names(self, path):
        if path.rstrip("/") == ".hoodie":
            self.listings += 1
            return [(f.name, f.mtime_ms) for f in Storage.list(self, path)]
        return super().list_names(path)


def test_retry_finds_its_commit_after_many_later_commits(table_path):
    t = make(table_path)
    first = t.write(row(0, "a"), extra_metadata={KEY: "dag/run/task/0"})
    for i in range(1, 40):
        t.write(row(i))
    again = t.write(row(99, "a"), extra_metadata={KEY: "dag/run/task/0"})
    assert (again.instant, again.num_writes, again.files) == (first.instant, first.num_writes, first.files)
    assert len(t.timeline.commits().completed()) == 40  # nothing written by the retry
    assert t.timeline.find_by_metadata(KEY, "dag/run/task/0").time == first.instant
    assert t.timeline.find_by_metadata(KEY, "dag/run/task/1") is None


def test_rolled_back_or_never_created_attempts_are_not_done(table_path):
    t = make(table_path)
    t.write(row(0))
    # an attempt that died after noting its token, before creating its instant
    tokens.record(t.storage, "run/a", "20000101000000000", COMMIT)
    first = t.write(row(1, "x"), extra_metadata={KEY: "run/a"})
    assert first.num_inserts == 1
    t.rollback(first.instant)  # the committed attempt is undone: a retry writes again
    assert t.timeline.find_by_metadata(KEY, "run/a") is None
    second = t.write(row(2, "x"), extra_metadata={KEY: "run/a"})
    assert second.instant != first.instant and second.num_inserts == 1
    assert t.timeline.find_by_metadata(KEY, "run/a").time == second.instant
    assert sorted(hudi_read(table_path)["id"].to_pylist()) == ["k0", "x"]


def test_retry_after_archival_returns_the_archived_commit(table_path):
    t = make(table_path)
    first = t.write(row(0, "a"), extra_metadata={KEY: "run/archived"})
    for i in range(1, 12):
        t.write(row(i))
    result = t.archive(min_commits=3, max_commits=5)
    assert f"{first.instant}.commit" in result.archived
    again = t.write(row(50, "a"), extra_metadata={KEY: "run/archived"})
    assert (again.instant, again.num_inserts, again.files) == (first.instant, 1, first.files)
    assert len(t.timeline.commits().completed()) == 3


def test_every_action_is_found_by_its_token(table_path):
    t = make(table_path, "MERGE_ON_READ")
    t.write(pa.table({"id": ["a", "b"], "ts": [0, 0], "part": ["p0", "p1"], "v": [0.0, 0.0]}), operation="insert")
    for i in range(1, 4):
        t.write(row(i, "a"), extra_metadata={KEY: f"write/{i}"})

    def found(key: str, value: str) -> Instant | None:
        return t.timeline.find_by_metadata(key, value)  # a fresh listing each time

    assert found(KEY, "write/2").action == "deltacommit"

    plan = t.plan_compaction(max_delta_commits=1, extra_metadata={KEY: "schedule"})
    assert plan.instant
    assert t.plan_compaction(max_delta_commits=1, extra_metadata={KEY: "schedule"}).instant == plan.instant
    assert t.timeline.find_token("schedule", pending=True) == Instant(plan.instant, COMPACTION, State.REQUESTED)
    assert found(KEY, "schedule") is None  # scheduled, not done

    done = t.run_compaction(extra_metadata={KEY: "run"})
    assert found(KEY, "run") == Instant(plan.instant, COMMIT, State.COMPLETED) == found(KEY, "schedule")
    assert t.run_compaction(extra_metadata={KEY: "run"}).already_done and done.instant == plan.instant

    assert t.savepoint(plan.instant, extra_metadata={KEY: "savepoint"}) == plan.instant
    assert found(KEY, "savepoint") == Instant(plan.instant, SAVEPOINT, State.COMPLETED)

    t.write(row(5, "b"))
    cleaned = t.clean(retained=1, extra_metadata={KEY: "clean"})
    assert cleaned.instant and found(KEY, "clean") == Instant(cleaned.instant, CLEAN, State.COMPLETED)
    again = t.clean(retained=1, extra_metadata={KEY: "clean"})
    assert (again.instant, again.files) == (cleaned.instant, cleaned.files)

    target = t.timeline.commits().completed().last.time
    rb = t.rollback(target, extra_metadata={KEY: "rollback"})
    assert found(KEY, "rollback") == Instant(rb.instant, ROLLBACK, State.COMPLETED)
    assert t.rollback(target, extra_metadata={KEY: "rollback"}).instant == rb.instant


def test_a_write_lists_the_timeline_twice_whatever_its_length(table_path):
    t = make(table_path)
    counts = []
    for i in range(30):
        t.storage = ListingCounter(table_path)
        t.write(row(i), extra_metadata={KEY: f"run/{i}"})
        counts.append(t.storage.listings)
    assert set(counts) == {2}  # under the lock: at begin (schema checked there too) and at commit


def test_the_timeline_kept_in_memory_matches_a_fresh_listing(table_path):
    t = make(table_path, "MERGE_ON_READ")
    for i in range(4):
        t.write(row(i))
    timeline = t.timeline
    r = Instant("29990101000000000", COMMIT, State.REQUESTED)
    timeline.create(r)
    timeline.transition(r, State.INFLIGHT, b"{}")
    assert timeline.state_files(r.time) == [f"{r.time}.commit.requested", f"{r.time}.inflight"]
    assert [str(i) for i in timeline] == [str(i) for i in ActiveTimeline(t.storage)]
    timeline.delete_instant_files(r.time)
    assert timeline.state_files(r.time) == []
    assert [str(i) for i in timeline] == [str(i) for i in ActiveTimeline(t.storage)]
    reloaded = timeline.reload()
    assert [str(i) for i in reloaded] == [str(i) for i in timeline]


# -- every service: the same run token twice -> the first call's result, nothing written ----
def hoodie_files(path: str) -> list[str]:
    """Every file under `.hoodie` (timeline, archive, token index), heartbeats and lock aside."""
    root = os.path.join(path, ".hoodie")
    found = []
    for folder, _, names in os.walk(root):
        rel = os.path.relpath(folder, root)
        if rel.split(os.sep)[0] in (".heartbeat", ".temp") or "lock" in rel:
            continue
        found += [os.path.join(rel, n) for n in names if "lock" not in n]
    return sorted(found)


def test_clean_token(table_path):
    t = make(table_path)
    for i in range(6):
        t.write(row(i))
    first = t.clean(retained=2, extra_metadata={KEY: "svc/clean"})
    assert first.instant and first.total_files
    for i in range(6, 10):
        t.write(row(i))  # a second clean would have files to delete
    before = hoodie_files(table_path)
    again = t.clean(retained=2, extra_metadata={KEY: "svc/clean"})
    assert (again.instant, again.files, again.earliest_instant_to_retain) == \
        (first.instant, first.files, first.earliest_instant_to_retain)
    assert hoodie_files(table_path) == before
    assert t.clean(retained=2).total_files > 0  # without the token it would have cleaned


def test_archive_token(table_path):
    t = make(table_path)
    for i in range(12):
        t.write(row(i))
    first = t.archive(min_commits=3, max_commits=5, extra_metadata={KEY: "svc/archive"})
    assert first.archived and first.archive_file and not first.already_done
    assert t.timeline.find_token("svc/archive").action == tokens.ARCHIVE  # found, though it has no instant
    for i in range(12, 20):
        t.write(row(i))
    before = hoodie_files(table_path)
    again = t.archive(min_commits=3, max_commits=5, extra_metadata={KEY: "svc/archive"})
    assert again.already_done
    assert (again.archived, again.archive_file, again.blocked_by, again.merged_files) == \
        (first.archived, first.archive_file, first.blocked_by, first.merged_files)
    assert hoodie_files(table_path) == before
    assert t.archive(min_commits=3, max_commits=5).archived  # without the token it would have archived


def test_savepoint_token(table_path):
    t = make(table_path)
    for i in range(4):
        t.write(row(i))
    times = t.timeline.commits().completed().times
    assert t.savepoint(times[1], extra_metadata={KEY: "svc/savepoint"}) == times[1]
    before = hoodie_files(table_path)
    assert t.savepoint(times[2], extra_metadata={KEY: "svc/savepoint"}) == times[1]
    assert hoodie_files(table_path) == before
    assert t.timeline.actions(SAVEPOINT).completed().times == [times[1]]


def test_compaction_execute_token(table_path):
    t = make(table_path, "MERGE_ON_READ")
    t.write(pa.table({"id": [f"k{i}" for i in range(7)], "ts": [0] * 7, "part": ["p0", "p1"] * 3 + ["p0"],
                      "v": [0.0] * 7}), operation="insert")
    t.write(row(1))
    first_plan = t.schedule_compaction(max_delta_commits=1)
    first = t.run_compaction(extra_metadata={KEY: "svc/compact"})
    assert first.instant == first_plan and not first.already_done and first.log_records
    t.write(row(2))
    second_plan = t.schedule_compaction(max_delta_commits=1)
    before = hoodie_files(table_path)
    again = t.run_compaction(extra_metadata={KEY: "svc/compact"})
    assert again.already_done
    assert (again.instant, again.operations, again.records_written, again.log_records, sorted(again.files)) == \
        (first.instant, first.operations, first.records_written, first.log_records, sorted(first.files))
    assert hoodie_files(table_path) == before  # the second plan is still pending
    assert t.timeline.actions(COMPACTION).pending().times == [second_plan]


def test_rollback_token(table_path):
    t = make(table_path)
    for i in range(3):
        t.write(row(i))
    target = t.timeline.commits().completed().last.time
    first = t.rollback(target, extra_metadata={KEY: "svc/rollback"})
    assert first.rolled_back == target and first.action == COMMIT and first.files_deleted
    later = t.write(row(7)).instant
    before = hoodie_files(table_path)
    again = t.rollback(later, extra_metadata={KEY: "svc/rollback"})
    assert again.already_done and not first.already_done
    assert (again.instant, again.rolled_back, again.action, again.files_deleted) == \
        (first.instant, first.rolled_back, first.action, first.files_deleted)
    assert hoodie_files(table_path) == before
    assert t.timeline.commits().completed().last.time == later  # not rolled back


def test_restore_token(table_path):
    t = make(table_path)
    for i in range(3):
        t.write(row(i))
    saved = t.timeline.commits().completed().times[1]
    t.savepoint(saved)
    t.write(row(4))
    first = t.restore(saved, extra_metadata={KEY: "svc/restore"})
    assert first.rolled_back
    later = t.write(row(5)).instant
    before = hoodie_files(table_path)
    again = t.restore(saved, extra_metadata={KEY: "svc/restore"})
    assert (again.instant, again.savepoint, again.rolled_back) == (first.instant, first.savepoint, first.rolled_back)
    assert hoodie_files(table_path) == before
    assert t.timeline.commits().completed().last.time == later  # not undone again
