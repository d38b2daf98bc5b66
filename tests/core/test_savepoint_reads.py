"""Time travel to a savepoint after a clean and after a restore, and the clean bound a restore
leaves (issue 23, items 7 and 20), judged by hudi-rs."""

from __future__ import annotations

import os

import pyarrow as pa
import pytest

from airflow_lake.core.errors import LakeError
from airflow_lake.core.table import Table
from tests.conftest import hudi_read, rows

COLS = ["id", "v", "p"]
FIRST = pa.table({"id": [1, 2, 3], "ts": [1, 1, 1], "v": ["a", "b", "c"], "p": ["x", "x", "y"]})


def update(i: int) -> pa.Table:
    return pa.table({"id": [1, 10 + i], "ts": [2 + i, 1], "v": [f"u{i}", f"n{i}"], "p": ["x", "y"]})


def cleaned_after_savepoint(path: str, table_type: str) -> tuple[Table, str, list[str]]:
    """Savepoint the first commit, update three times (MOR: then compact and update again), and
    clean keeping one commit: the savepointed file versions are the only old ones left."""
    table = Table.create(path, name="sp", table_type=table_type, record_key="id", precombine_field="ts",
                         partition_fields="p")
    c1 = table.write(FIRST).instant
    table.savepoint(c1)
    later = [table.write(update(i)).instant for i in range(3)]
    if table_type == "MERGE_ON_READ":
        later.append(table.run_compaction(table.schedule_compaction(max_delta_commits=1)).instant)
        later.append(table.write(update(3)).instant)
    assert table.clean(retained=1).total_files > 0
    return table, c1, later


def as_of(path: str, instant: str) -> list[tuple]:
    return rows(hudi_read(path, **{"hoodie.read.as.of.timestamp": instant}), COLS)


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_time_travel_to_a_savepoint_after_a_clean(table_path, table_type):
    table, c1, later = cleaned_after_savepoint(table_path, table_type)
    expected = rows(FIRST, COLS)
    assert as_of(table_path, c1) == expected
    assert rows(table.read(as_of=c1), COLS) == expected
    assert rows(table.read(as_of=c1, columns=COLS), COLS) == expected
    # an instant the cleaner did not keep and no savepoint protects is still refused
    with pytest.raises(LakeError, match=f"time travel to {later[0]} is not possible"):
        table.read(as_of=later[0])


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_time_travel_to_the_savepoint_a_restore_went_back_to(table_path, table_type):
    table, c1, later = cleaned_after_savepoint(table_path, table_type)
    bound = table.timeline.latest_clean_bound()
    assert bound in later
    table.restore(c1)
    expected = rows(FIRST, COLS)
    assert rows(hudi_read(table_path), COLS) == expected == as_of(table_path, c1)
    assert rows(table.read(as_of=c1), COLS) == expected == rows(table.read(), COLS)
    # the clean's bound was undone by the restore: what holds is the savepoint's commit
    assert not table.timeline.contains(bound)
    assert table.timeline.latest_clean_bound() == c1
    after = table.write(update(9)).instant
    assert rows(table.read(as_of=c1), COLS) == as_of(table_path, c1) == expected
    assert rows(table.read(as_of=after), COLS) == as_of(table_path, after)
    assert table.timeline.latest_clean_bound() == c1


def test_a_clean_bound_removed_by_a_rollback_names_the_commit_before_it(table_path):
    """Rolling back the commit a clean retained from leaves the latest completed commit before
    it as the bound: the cleaner kept the file versions a read at that commit sees."""
    table = Table.create(table_path, name="sp", record_key="id", precombine_field="ts", partition_fields="p")
    commits = [table.write(update(i)).instant for i in range(4)]
    assert table.clean(retained=1).earliest_instant_to_retain == commits[-1]
    table.rollback(commits[-1])
    assert table.timeline.latest_clean_bound() == commits[-2]
    assert rows(table.read(as_of=commits[-2]), COLS) == as_of(table_path, commits[-2]) == rows(table.read(), COLS)
    with pytest.raises(LakeError, match=f"time travel to {commits[0]} is not possible"):
        table.read(as_of=commits[0])


@pytest.mark.parametrize("version", [6, 9])
def test_an_incremental_read_after_a_clean_is_judged_by_its_end(table_path, version):
    """An incremental read returns each row's version as of its end, so it needs the file
    versions of its end, not of its start: a consumer's checkpoint before the clean's bound (on
    v9 a completion time, which the bound, a requested time, may follow) reads the commits after
    it, as hudi-rs does; it was refused. A window that ends before the bound is refused."""
    t = Table.create(table_path, name="t", table_type="MERGE_ON_READ", record_key="id", precombine_field="ts",
                     options={"hoodie.write.table.version": version})
    commits = [t.write(pa.table({"id": [f"k{i}" for i in range(10)], "ts": [ts] * 10, "v": [str(ts)] * 10,
                                 "p": ["x"] * 10})).instant for ts in range(1, 6)]
    t.run_compaction(t.schedule_compaction(max_delta_commits=1))
    commits += [t.write(pa.table({"id": ["k0", "k1"], "ts": [ts] * 2, "v": [str(ts)] * 2, "p": ["x"] * 2})).instant
                for ts in range(6, 9)]
    bound = t.clean(retained=2).earliest_instant_to_retain
    timeline = Table.open(table_path).timeline
    before = max(c for c in commits if c < bound)
    start = timeline.completion_time(before) if version == 9 else before  # (the consumer's checkpoint)
    ours = t.read_incremental(start)
    theirs = hudi_read(table_path, **{"hoodie.read.query.type": "incremental", "hoodie.read.start.timestamp": start})
    assert ours.num_rows > 0 and rows(ours, ["id", "v"]) == rows(theirs, ["id", "v"])
    early = commits[1]
    end = timeline.completion_time(early) if version == 9 else early
    with pytest.raises(LakeError, match=f"an incremental read .*{end}.* is not possible: the cleaner kept only"):
        t.read_incremental(commits[0] if version == 6 else timeline.completion_time(commits[0]), end)


@pytest.mark.parametrize("version", [8, 9])
def test_a_savepoint_of_a_compacted_deltacommit_changes_no_read(table_path, version):
    """A v8/v9 savepoint shares its commit's requested time but completes later: the log file of
    the savepointed deltacommit stayed in the slice before a compaction (a deleted key came back
    once it was read after the compaction's base, and a later compaction wrote it in)."""
    table = Table.create(table_path, name="sp", table_type="MERGE_ON_READ", record_key="id",
                         precombine_field="ts", partition_fields="p", options={"hoodie.write.table.version": version})
    table.write(FIRST, operation="insert")
    updated = table.write(pa.table({"id": [1], "ts": [2], "v": ["u"], "p": ["x"]})).instant
    table.write(pa.table({"id": [1], "ts": [3], "v": ["u"], "p": ["x"]}), operation="delete")
    table.run_compaction(table.schedule_compaction(max_delta_commits=1))
    expected = [(2, "b", "x"), (3, "c", "y")]
    table.savepoint(updated)
    assert rows(table.read(), COLS) == expected == rows(hudi_read(table_path), COLS)
    table.write(pa.table({"id": [2], "ts": [5], "v": ["b2"], "p": ["x"]}))
    table.run_compaction(table.schedule_compaction(max_delta_commits=1))
    expected = [(2, "b2", "x"), (3, "c", "y")]
    assert rows(table.read(), COLS) == expected == rows(hudi_read(table_path), COLS)
    assert rows(table.read(as_of=updated), COLS) == [(1, "u", "x"), (2, "b", "x"), (3, "c", "y")]
    table.delete_savepoint(updated)
    assert not table.timeline.actions("savepoint").instants
    assert table.timeline.commits().completed().contains(updated)  # the commit keeps its files
    assert rows(table.read(), COLS) == expected


@pytest.mark.parametrize("version", [6, 9])
def test_archiving_beyond_a_savepoint_keeps_it_and_its_commit(table_path, version):
    """`hoodie.archive.beyond.savepoint`: the commits before and after a savepointed commit are
    archived, the commit and its savepoint stay (Java skips them); the timeline then starts at
    the first commit that is not savepointed, so the archived later commits stay visible."""
    table = Table.create(table_path, name="sp", table_type="COPY_ON_WRITE", record_key="id", precombine_field="ts",
                         partition_fields="p", options={"hoodie.write.table.version": version})
    commits = [table.write(update(i)).instant for i in range(3)]
    table.savepoint(commits[1])
    # a partition only a commit after the savepoint wrote, archived below: still read
    commits.append(table.write(pa.table({"id": [100], "ts": [1], "v": ["z"], "p": ["z"]})).instant)
    commits += [table.write(update(i)).instant for i in range(3, 8)]
    expected = rows(table.read(), COLS)
    at_savepoint = [(1, "u1", "x"), (10, "n0", "y"), (11, "n1", "y")]
    assert rows(table.read(as_of=commits[1]), COLS) == at_savepoint
    beyond = Table.open(table_path, options={"hoodie.archive.beyond.savepoint": "true"})
    archived = beyond.archive(min_commits=2, max_commits=3).archived
    assert [a.split(".")[0] for a in archived] == commits[:1] + commits[2:7]
    timeline = Table.open(table_path).timeline
    assert timeline.actions("savepoint").completed().times == [commits[1]]
    assert timeline.commits().completed().times == [commits[1], *commits[7:]]
    assert (100, "z", "z") in expected
    assert rows(table.read(), COLS) == expected
    # hudi-rs starts the timeline at its first commit, savepointed or not: it misses the files
    # of archived commits after it (docs/core.md, differences with hudi-rs)
    assert rows(hudi_read(table_path), COLS) == [r for r in expected if r[2] != "z"]
    assert rows(table.read(as_of=commits[1]), COLS) == at_savepoint
    # the savepointed commit now starts the timeline for the archived commits after it: neither
    # deleting its savepoint (their files would no longer count) nor a restore to it (it would
    # leave their files, counted again after the next write) is done
    before = sorted(os.listdir(f"{table_path}/.hoodie"))
    with pytest.raises(LakeError, match=f"savepoint {commits[1]} cannot be deleted: commits after it were archived"):
        table.delete_savepoint(commits[1])
    with pytest.raises(LakeError, match=f"cannot restore to savepoint {commits[1]}: commits after it were archived"):
        table.restore(commits[1])
    assert sorted(os.listdir(f"{table_path}/.hoodie")) == before
    assert rows(table.read(), COLS) == expected


@pytest.mark.parametrize("version", [6, 9])
def test_a_savepointed_only_active_commit_still_starts_the_timeline(table_path, version):
    """Every active write savepointed: the timeline starts at the first of them (files of the
    archived commits before it stay visible)."""
    table = Table.create(table_path, name="sp", table_type="COPY_ON_WRITE", record_key="id", precombine_field="ts",
                         partition_fields="p", options={"hoodie.write.table.version": version})
    table.write(pa.table({"id": [100], "ts": [1], "v": ["z"], "p": ["z"]}))  # a partition written once
    commits = [table.write(update(i)).instant for i in range(3)]
    table.savepoint(commits[-1])
    expected = rows(table.read(), COLS)
    archived = table.archive(min_commits=1, max_commits=2).archived
    assert len(archived) == 3 and Table.open(table_path).timeline.commits().completed().times == commits[-1:]
    assert rows(Table.open(table_path).read(), COLS) == expected == rows(hudi_read(table_path), COLS)


def test_archiving_beyond_a_savepoint_with_the_metadata_table(table_path):
    """A savepoint completed after the metadata table's latest compaction bears its commit's
    older time: it held archival at the savepointed commit, as if that commit had completed
    after the compaction."""
    options = {"hoodie.write.table.version": 9, "hoodie.metadata.enable": "true"}
    table = Table.create(table_path, name="sp", table_type="COPY_ON_WRITE", record_key="id", precombine_field="ts",
                         partition_fields="p", options=options)
    commits = [table.write(pa.table({"id": [i % 3], "ts": [i], "v": ["a"], "p": ["x"]})).instant for i in range(12)]
    table.savepoint(commits[1])
    beyond = Table.open(table_path, options={**options, "hoodie.archive.beyond.savepoint": "true"})
    archived = [a.split(".")[0] for a in beyond.archive(min_commits=2, max_commits=3).archived]
    assert commits[0] in archived and commits[2] in archived and commits[1] not in archived
    assert rows(Table.open(table_path).read(), ["id", "v"]) == rows(hudi_read(table_path), ["id", "v"])
