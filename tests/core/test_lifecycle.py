"""Clean, archive, rollback, savepoint and restore: no visible row changes, retained time
travel keeps working, timeline files as the spec prescribes."""

from __future__ import annotations

import glob
import io
import os

import fastavro
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from airflow_lake.core import LakeError, Table
from airflow_lake.core.errors import InstantNotFoundError
from airflow_lake.core.formats.log import read_log_file
from airflow_lake.core.timeline.archived import ArchivedTimeline
from tests.conftest import hudi_read, let_time_pass, rows
from tests.core.test_failed_writes import Crash, CrashingStorage

COLS = ["id", "ts", "part", "v", "_hoodie_commit_time"]
FAST = {"hoodie.client.heartbeat.interval_in_ms": 50, "hoodie.write.lock.filesystem.expire": 0.005}


def cow(path: str, commits: int = 8, table_type: str = "COPY_ON_WRITE") -> Table:
    t = Table.create(path, name="c", table_type=table_type, record_key="id", precombine_field="ts",
                     partition_fields="part", options=FAST)
    t.write(pa.table({"id": [f"k{i}" for i in range(12)], "ts": [0] * 12, "part": ["a", "b"] * 6,
                      "v": [0.0] * 12}), operation="insert")
    for j in range(1, commits):
        t.write(pa.table({"id": [f"k{j % 12}", f"k{(j + 5) % 12}"], "ts": [j, j],
                          "part": [["a", "b"][j % 12 % 2], ["a", "b"][(j + 5) % 12 % 2]], "v": [float(j)] * 2}))
    return t


def snapshot_all(t: Table) -> dict[str, list]:
    return {i: rows(t.read(as_of=i), COLS) for i in t.timeline.commits().completed().times}


def parquet_files(path: str) -> set[str]:
    return {os.path.relpath(p, path) for p in glob.glob(f"{path}/*/*.parquet")}


def test_clean_keep_latest_commits(table_path):
    t = cow(table_path)
    history = snapshot_all(t)
    times = sorted(history)
    before_files = parquet_files(table_path)
    dry = t.clean(retained=3, dry_run=True)
    assert dry.instant is None and dry.total_files > 0 and parquet_files(table_path) == before_files
    assert not [f for f in os.listdir(f"{table_path}/.hoodie") if ".clean" in f]
    result = t.clean(retained=3)
    assert result.instant and result.earliest_instant_to_retain == times[-3]
    assert result.files == dry.files
    names = sorted(f for f in os.listdir(f"{table_path}/.hoodie") if f.startswith(result.instant))
    assert names == [f"{result.instant}.clean", f"{result.instant}.clean.inflight", f"{result.instant}.clean.requested"]
    meta = list(fastavro.reader(io.BytesIO(open(f"{table_path}/.hoodie/{result.instant}.clean", "rb").read())))[0]
    assert meta["totalFilesDeleted"] == result.total_files and meta["earliestCommitToRetain"] == times[-3]
    plan = list(fastavro.reader(io.BytesIO(open(f"{table_path}/.hoodie/{result.instant}.clean.requested",
                                                "rb").read())))[0]
    assert plan["policy"] == "KEEP_LATEST_COMMITS" and plan["version"] == 2
    assert len(parquet_files(table_path)) == len(before_files) - result.total_files
    for i in times[-3:]:  # the retained window still time-travels, for us and hudi-rs
        assert rows(t.read(as_of=i), COLS) == history[i]
        assert rows(hudi_read(table_path, **{"hoodie.read.as.of.timestamp": i}), COLS) == history[i]
    assert rows(hudi_read(table_path), COLS) == history[times[-1]]
    with pytest.raises(LakeError, match="cleaner"):
        t.read(as_of=times[0])
    # an incremental read returns its rows as of its end: one from before the window to now
    # reads, as hudi-rs does; one that ends before the window is refused
    assert rows(t.read_incremental(times[0]), COLS) == rows(hudi_read(table_path, **{
        "hoodie.read.query.type": "incremental", "hoodie.read.start.timestamp": times[0]}), COLS)
    with pytest.raises(LakeError, match="cleaner"):
        t.read_incremental(times[0], times[1])
    assert t.clean(retained=3).instant is None  # nothing more to clean


def test_clean_file_versions_savepoints_and_replaced_groups(table_path):
    t = cow(table_path)
    times = t.timeline.commits().completed().times
    t.savepoint(times[2])
    saved = rows(t.read(as_of=times[2]), COLS)
    r = t.write(pa.table({"id": ["z"], "ts": [0], "part": ["b"], "v": [0.0]}), operation="insert_overwrite")
    result = t.clean(policy="KEEP_LATEST_FILE_VERSIONS", retained=1)
    assert result.instant is not None
    # only the latest version of each live group remains, plus the savepointed files
    assert rows(t.read(as_of=times[2]), COLS) == saved
    assert rows(hudi_read(table_path, **{"hoodie.read.as.of.timestamp": times[2]}), COLS) == saved
    live = rows(t.read(), COLS)
    assert rows(hudi_read(table_path), COLS) == live and ("z", 0, "b", 0.0, r.instant) in live


def test_clean_protects_pending_compaction(table_path):
    t = cow(table_path, table_type="MERGE_ON_READ")
    t.run_compaction(t.schedule_compaction(max_delta_commits=1))
    t.write(pa.table({"id": ["k1"], "ts": [50], "part": ["b"], "v": [5.0]}))
    plan = t.schedule_compaction(max_delta_commits=1)
    before = rows(t.read(), COLS)
    t.clean(policy="KEEP_LATEST_FILE_VERSIONS", retained=1)
    t.run_compaction(plan)
    assert rows(t.read(), COLS) == before == rows(hudi_read(table_path), COLS)


def test_half_done_clean_is_finished_not_replanned(table_path):
    t = cow(table_path)
    t.storage = CrashingStorage(table_path, 3)  # lock, plan ... dies before deleting
    with pytest.raises(Crash):
        t.clean(retained=2)
    t = Table.open(table_path, options=FAST)
    pending = t.timeline.actions("clean").pending().instants
    assert len(pending) == 1
    result = t.clean(policy="KEEP_LATEST_FILE_VERSIONS", retained=1)  # the old plan wins
    assert result.instant == pending[0].time and result.policy == "KEEP_LATEST_COMMITS"
    assert rows(hudi_read(table_path), COLS) == rows(t.read(), COLS)


def test_archive_moves_oldest_instants(table_path):
    t = cow(table_path, commits=12)
    t.clean(retained=4)
    latest = rows(t.read(), COLS)
    times = t.timeline.commits().completed().times
    result = t.archive(min_commits=3, max_commits=5, batch=2)
    assert result.archive_file.endswith(".commits_.archive.1_1-0-1")
    assert result.blocked_by and "clean" in result.blocked_by  # the cleaner's window stays active
    active = t.timeline.commits().completed().times
    assert active == times[-4:] and len(result.archived) == len(times) - 4
    archived = ArchivedTimeline(t.storage)
    assert [i.time for i in archived.completed() if i.action == "commit"] == times[:-4]
    blocks = read_log_file(open(f"{table_path}/{result.archive_file}", "rb").read())
    assert all(b.instant is None and b.avro_schema["name"] == "HoodieArchivedMetaEntry" for b in blocks)
    assert max(len(b.avro_records()) for b in blocks) <= 2
    assert rows(t.read(), COLS) == latest == rows(hudi_read(table_path), COLS)
    for i in active:
        assert rows(t.read(as_of=i), COLS) == rows(hudi_read(table_path, **{"hoodie.read.as.of.timestamp": i}),
                                                   COLS)
    with pytest.raises(LakeError, match="archived|cleaner"):
        t.read_incremental(times[0], times[1])
    # to now, through the archived commits: the rows whose latest commit follows the start
    now = t.read()
    later = now.filter(pc.greater(now["_hoodie_commit_time"], times[0]))
    assert rows(t.read_incremental(times[0]), COLS) == rows(later, COLS)
    # a second run has nothing to do below the bound
    assert t.archive(min_commits=3, max_commits=5).archived == []


def test_archive_stops_at_savepoint_and_pending_compaction(table_path):
    t = cow(table_path, commits=10, table_type="MERGE_ON_READ")
    times = t.timeline.commits().completed().times
    t.savepoint(times[3])
    result = t.archive(min_commits=2, max_commits=4)
    assert "savepoint" in (result.blocked_by or "") or "compaction" in (result.blocked_by or "")
    assert all(a.split(".")[0] < times[3] for a in result.archived)
    t2_path = table_path + "-2"
    t2 = cow(t2_path, commits=10, table_type="MERGE_ON_READ")
    t2.run_compaction(t2.schedule_compaction(max_delta_commits=1))
    for j in range(3):
        t2.write(pa.table({"id": ["k1"], "ts": [100 + j], "part": ["b"], "v": [1.0]}))
    plan = t2.schedule_compaction(max_delta_commits=1)
    result = t2.archive(min_commits=2, max_commits=4)
    assert plan and all(a.split(".")[0] < plan for a in result.archived)
    assert rows(hudi_read(t2_path), COLS) == rows(t2.read(), COLS)


def test_archive_merges_small_files_and_survives_a_crash(table_path):
    t = Table.open(cow(table_path, commits=20).storage.uri,
                   options={**FAST, "hoodie.archive.merge.enable": "true", "hoodie.archive.merge.files.batch.size": 3})
    for keep in (17, 14, 11):
        t.archive(min_commits=keep, max_commits=keep + 1)
    files = sorted(os.listdir(f"{table_path}/.hoodie/archived"))
    assert len(files) == 1 and files[0].startswith(".commits_.archive.4_")  # three merged into one
    assert len(ArchivedTimeline(t.storage).completed()) == 9
    # a crash after the merged file was written, before the candidates went
    crash = Table.open(table_path, options={**FAST, "hoodie.archive.merge.enable": "true",
                                            "hoodie.archive.merge.files.batch.size": 2})
    crash.archive(min_commits=9, max_commits=10)
    crash.storage = CrashingStorage(table_path, 4)
    with pytest.raises(Crash):
        crash.archive(min_commits=7, max_commits=8)
    recovered = Table.open(table_path, options=FAST)
    recovered.archive(min_commits=7, max_commits=8)
    assert not os.path.exists(f"{table_path}/.hoodie/archived/mergeArchivePlan")
    instants = ArchivedTimeline(recovered.storage).completed()
    assert len(instants) == len({(i.time, i.action) for i in instants}) >= 11
    assert rows(hudi_read(table_path), COLS) == rows(recovered.read(), COLS)


def test_rollback_latest_completed_write(table_path):
    t = cow(table_path, commits=3, table_type="MERGE_ON_READ")
    times = t.timeline.commits().completed().times
    previous = rows(t.read(as_of=times[-2]), COLS)
    with pytest.raises(LakeError, match="latest"):
        t.rollback(times[0])
    with pytest.raises(InstantNotFoundError):
        t.rollback("20200101000000000")
    result = t.rollback(times[-1])
    assert result.rolled_back == times[-1] and result.files_deleted
    assert not [f for f in os.listdir(f"{table_path}/.hoodie") if f.startswith(times[-1])]
    assert rows(t.read(), COLS) == previous == rows(hudi_read(table_path), COLS)
    assert os.path.exists(f"{table_path}/.hoodie/{result.instant}.rollback")
    nxt = t.write(pa.table({"id": ["k3"], "ts": [9], "part": ["b"], "v": [9.0]}))
    assert nxt.instant > result.instant  # instants are never reused


def test_savepoint_and_restore(table_path):
    t = cow(table_path, commits=6, table_type="MERGE_ON_READ")
    times = t.timeline.commits().completed().times
    saved = rows(t.read(as_of=times[2]), COLS)
    assert t.savepoint(times[2]) == times[2]
    assert os.path.exists(f"{table_path}/.hoodie/{times[2]}.savepoint")
    meta = list(fastavro.reader(io.BytesIO(open(f"{table_path}/.hoodie/{times[2]}.savepoint", "rb").read())))[0]
    assert meta["partitionMetadata"]["a"]["savepointDataFile"]
    t.schedule_compaction(max_delta_commits=1)
    t.write(pa.table({"id": ["k1"], "ts": [70], "part": ["b"], "v": [7.0]}))
    with pytest.raises(InstantNotFoundError):
        t.restore(times[3])
    result = t.restore(times[2])
    assert set(result.rolled_back) >= set(times[3:])
    assert t.timeline.commits().completed().times == times[:3]
    assert not t.timeline.actions("compaction").instants  # restore removes plans too
    assert rows(t.read(), COLS) == saved == rows(hudi_read(table_path), COLS)
    let_time_pass(table_path, 60)
    t.write(pa.table({"id": ["k2"], "ts": [80], "part": ["a"], "v": [8.0]}))
    assert rows(hudi_read(table_path), COLS) == rows(t.read(), COLS)


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_a_savepointed_commit_is_not_rolled_back(table_path, table_type):
    """Rolling back the commit a savepoint protects is refused, naming it, and changes
    nothing (it deleted the commit and the savepoint with it, and a restore to the savepoint
    then failed), as Apache Hudi refuses it; the restore to it still works."""
    t = cow(table_path, commits=3, table_type=table_type)
    latest = t.timeline.commits().completed().last.time
    expected = rows(t.read(), COLS)
    t.savepoint(latest)
    before = sorted(os.listdir(f"{table_path}/.hoodie"))
    with pytest.raises(LakeError, match=f"table {table_path}: .*{latest} is savepointed.*savepoint delete "
                                        f"{table_path} {latest}\\). Nothing was changed"):
        t.rollback(latest)
    assert sorted(os.listdir(f"{table_path}/.hoodie")) == before
    t.write(pa.table({"id": ["k1"], "ts": [50], "part": ["b"], "v": [5.0]}))
    t.restore(latest)
    assert rows(t.read(), COLS) == expected == rows(hudi_read(table_path), COLS)
    t.delete_savepoint(latest)  # then it can be rolled back, as the latest write
    assert t.rollback(latest).rolled_back == latest and latest not in t.timeline.times


def test_the_only_commit_archiving_left_is_not_rolled_back(table_path):
    """Rolling back the one commit left on the active timeline, the ones before it archived,
    is refused, changing nothing: readers (Java's, hudi-rs, ours) count an archived commit's
    files as committed only before the first active commit, so the table would read empty."""
    t = Table.create(table_path, name="t", record_key="id", precombine_field="ts")
    for i in range(6):
        t.write(pa.table({"id": [f"k{i}"], "ts": [1]}), operation="insert")
    t.archive(min_commits=1, max_commits=2)
    t = Table.open(table_path)
    (last,) = t.timeline.commits().completed().times
    before = sorted(os.listdir(f"{table_path}/.hoodie"))
    with pytest.raises(LakeError, match=f"table {table_path}: commit {last} is the only commit left.*Nothing was "):
        t.rollback(last)
    assert sorted(os.listdir(f"{table_path}/.hoodie")) == before
    assert len(rows(hudi_read(table_path), ["id"])) == t.read().num_rows == 6


def test_rollback_refuses_a_write_a_pending_compaction_reads(table_path):
    t = cow(table_path, commits=3, table_type="MERGE_ON_READ")
    latest = t.timeline.commits().completed().last.time
    plan = t.schedule_compaction(max_delta_commits=1)
    assert plan is not None
    before = sorted(os.listdir(f"{table_path}/.hoodie"))
    with pytest.raises(LakeError, match=f"pending compaction {plan} includes its file") as err:
        t.rollback(latest)
    assert latest in str(err.value) and table_path in str(err.value)
    assert sorted(os.listdir(f"{table_path}/.hoodie")) == before  # nothing touched
    expected = rows(t.read(), COLS)
    assert t.run_compaction(plan).operations >= 1  # the plan's files are all still there
    assert rows(t.read(), COLS) == expected == rows(hudi_read(table_path), COLS)
    # a write after the plan's instant goes to the new slice: it can be rolled back
    after = t.write(pa.table({"id": ["k1"], "ts": [50], "part": ["b"], "v": [5.0]}))
    t.rollback(after.instant)
    assert rows(t.read(), COLS) == expected == rows(hudi_read(table_path), COLS)


def test_rollback_refuses_while_a_later_write_runs(table_path):
    """A write started after the commit may have merged its files into new ones (a COW
    rewrite): rolled back meanwhile, the commit's rows came back when that write completed.
    Refused, as Apache Hudi refuses ("found in-flight commits after time ..."); once the later
    write is dead (its heartbeat expired) the rollback goes ahead."""
    from airflow_lake.core.txn.heartbeat import Heartbeat

    t = cow(table_path)
    latest = t.timeline.commits().completed().last.time
    running = Table.open(table_path)
    running.storage = CrashingStorage(table_path, 6)  # stops after its inflight
    with pytest.raises(Crash):
        running.write(pa.table({"id": ["k1"], "ts": [50], "part": ["a"], "v": [5.0]}))
    later = t.timeline.commits().pending().last
    Heartbeat(t.storage, later.time, 60_000).beat()  # (as if it were still running)
    assert later is not None and later.time > latest
    before = sorted(os.listdir(f"{table_path}/.hoodie"))
    with pytest.raises(LakeError, match=f"{latest} cannot be rolled back while commit {later.time}"):
        Table.open(table_path).rollback(latest)
    assert sorted(os.listdir(f"{table_path}/.hoodie")) == before
    let_time_pass(table_path, 3600)
    assert Table.open(table_path).rollback(latest).instant
