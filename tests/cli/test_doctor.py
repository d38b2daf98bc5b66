"""`doctor`: findings on a healthy table, a stuck one, an orphan file and a damaged config."""

from __future__ import annotations

import json
import os
import shutil
import time

import pyarrow as pa
import pytest

from airflow_lake.core import Table
from airflow_lake.core.timeline.instant import Instant, State
from airflow_lake.core.txn.heartbeat import Heartbeat
from airflow_lake.core.view import unreferenced_files
from tests.crashes import Crash, Dies

from .conftest import invoke, invoke_json


def by_check(doc: dict) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for f in doc["findings"]:
        out.setdefault(f["check"], []).append(f)
    return out


def test_healthy_table(trips):
    path = trips.storage.uri
    doc = invoke_json("doctor", path)
    assert doc["healthy"] and {f["level"] for f in doc["findings"]} <= {"ok", "info"}
    found = by_check(doc)
    assert found["properties"][0]["message"] == \
        f"hoodie.properties checksum {trips.config.props['hoodie.table.checksum']} matches"
    assert found["pending"][0]["message"] == "no pending instants"
    assert found["files"][0]["message"].startswith("every data file (6) is referenced")
    first = trips.timeline.commits().first.time
    assert found["archival"][0]["message"] == ("3 active commits (archival starts above 30); would stop at: "
                                               f"deltacommit {first} is needed by compaction scheduling")
    text = invoke("doctor", path).stdout
    assert text.splitlines()[-1] == "healthy" and "OK    properties" in text


def test_a_second_copy_of_a_log_file_is_unreferenced(trips):
    """A log file whose blocks name a completed instant that does not list it (a retried
    task's leftover): found by its header."""
    path = trips.storage.uri
    name = next(f for f in os.listdir(f"{path}/city=sao_paulo") if ".log." in f)
    copy = name.rsplit("_", 1)[0] + "_9-9-9"
    shutil.copy(f"{path}/city=sao_paulo/{name}", f"{path}/city=sao_paulo/{copy}")
    writer = trips.timeline.commits().completed().times[1]
    (found,) = unreferenced_files(trips.storage, trips.timeline)
    assert (found.path, found.instant) == (f"city=sao_paulo/{copy}", writer)
    assert found.reason == f"written by {writer}, whose commit does not list it"
    files = by_check(invoke_json("doctor", path, code=3))["files"]
    assert [f["instant"] for f in files] == [writer] and files[0]["level"] == "warn"


def test_stuck_table_dead_writer_waiting_plan_orphan_stale_lock(trips):
    path = trips.storage.uri
    commits = trips.timeline.commits().completed().times
    plan = trips.schedule_compaction(max_delta_commits=2)
    timeline = trips.timeline
    dead = trips.new_instant_time(timeline)
    timeline.create(Instant(dead, "deltacommit", State.REQUESTED))
    timeline.transition(Instant(dead, "deltacommit", State.REQUESTED), State.INFLIGHT)
    alive = trips.new_instant_time(timeline)
    timeline.create(Instant(alive, "deltacommit", State.REQUESTED))
    Heartbeat(trips.storage, alive, 60_000).beat()
    # a base file of an instant on no timeline (a write that died and was never rolled back)
    base = next(f for f in os.listdir(f"{path}/city=chennai") if f.endswith(".parquet"))
    ghost = str(int(commits[1]) - 1)
    orphan = f"city=chennai/{base.rsplit('_', 1)[0]}_{ghost}.parquet"
    shutil.copy(f"{path}/city=chennai/{base}", f"{path}/{orphan}")
    with open(f"{path}/.hoodie/lock", "w") as f:
        f.write('{"owner": "host:1:2:dead"}')
    old = time.time() - 600
    os.utime(f"{path}/.hoodie/lock", (old, old))

    result = invoke("doctor", path, "--json", code=3)
    doc = json.loads(result.stdout)
    assert not doc["healthy"]
    found = by_check(doc)
    pending = {f["instant"]: f for f in found["pending"]}
    assert pending[dead]["level"] == "warn" and "its writer is dead (no heartbeat)" in pending[dead]["message"]
    assert pending[dead]["advice"].endswith(f"airflow-lake rollback {path} {dead}")
    assert pending[alive]["level"] == "info" and "its writer is alive (last heartbeat" in pending[alive]["message"]
    (waiting,) = found["compaction"]
    assert waiting["instant"] == plan and f"compaction plan {plan} of 2 file groups is waiting" in waiting["message"]
    assert waiting["advice"] == f"airflow-lake compaction run {path} --instant {plan}"
    (ghost_file,) = found["files"]
    assert ghost_file["level"] == "warn" and ghost_file["message"].startswith(f"{orphan} (")
    assert f"written by {ghost}, which is on no timeline" in ghost_file["message"]
    assert [o.path for o in unreferenced_files(trips.storage, trips.timeline)] == [orphan]
    assert found["lock"][0]["level"] == "warn" and "host:1:2:dead" in found["lock"][0]["message"]
    cleaning = " ".join(f["message"] for f in found["cleaning"])
    assert f"pending compaction {plan} keeps the slices" in cleaning
    assert f"pending deltacommit {dead} holds the retained window back" in cleaning
    assert "needs attention" in invoke("doctor", path, code=3).stdout


def test_damaged_properties_and_a_hudi_table(trips, unzip_fixture):
    path = trips.storage.uri
    props = f"{path}/.hoodie/hoodie.properties"
    with open(props) as f:
        text = f.read()
    with open(props, "w") as f:
        f.write(text.replace("hoodie.table.name=trips", "hoodie.table.name=rides"))
    doc = invoke_json("doctor", path, code=3)
    found = by_check(doc)
    assert found["properties"][0]["level"] == "error"
    assert found["properties"][0]["message"].startswith("hoodie.table.checksum is ") and "default.rides" in \
        found["properties"][0]["message"]
    assert found["open"][0]["level"] == "error" and "invalid table config" in found["open"][0]["message"]
    hudi = str(unzip_fixture("sample_table/mor/parquet/v6_nonpartitioned.zip"))
    healthy = invoke_json("doctor", hudi)
    assert healthy["healthy"] and by_check(healthy)["files"][0]["level"] == "ok"


def test_archival_due_and_held_by_a_pending_plan(tmp_path):
    """31 delta commits, then a compaction plan nobody runs: archival is due and held back."""
    table = Table.create(str(tmp_path / "mor"), name="mor", table_type="MERGE_ON_READ", record_key="k",
                         precombine_field="v")
    for v in range(31):
        table.write(pa.table({"k": ["a"], "v": [v]}), operation="upsert")
    plan = table.schedule_compaction(max_delta_commits=1)
    path = table.storage.uri
    (archival,) = by_check(invoke_json("doctor", path, code=3))["archival"]
    first = table.timeline.commits().first.time
    assert archival["level"] == "warn" and archival["instant"] == first
    assert archival["message"] == (f"31 active commits, 11 of the 11 due for archival are held by: deltacommit {first} "
                                   "is needed by compaction scheduling")
    assert archival["advice"] == f"run the plan: airflow-lake compaction run {path} --instant {plan}"


def test_after_a_restore_the_retained_bound_is_an_instant_that_exists(trips):
    """The docs' session: compact, savepoint, write, clean keeping one commit (it retains from
    that write), restore the savepoint (the write is undone): `doctor` and `timeline` name the
    bound that holds, the savepoint's commit, not the removed write."""
    path = trips.storage.uri
    compaction = trips.run_compaction(trips.schedule_compaction(max_delta_commits=1)).instant
    trips.savepoint(compaction)
    write = trips.write(pa.table({"uuid": ["t1"], "ts": [5], "rider": ["Z"], "fare": [1.0],
                                  "city": ["san_francisco"]})).instant
    assert trips.clean(retained=1).earliest_instant_to_retain == write
    assert f"retains from {write}" in " ".join(f["message"] for f in by_check(invoke_json("doctor", path))["cleaning"])
    trips.restore(compaction)
    found = by_check(invoke_json("doctor", path))
    cleaning = " ".join(f["message"] for f in found["cleaning"])
    assert f"the latest clean retains from {compaction}" in cleaning and write not in cleaning
    assert f"the latest clean retains commits from {compaction}" in found["archival"][0]["message"]
    assert invoke_json("timeline", path)["clean_retains_from"] == compaction


def test_hudi1x_tables_say_their_version_and_whether_they_are_written(tmp_path):
    """A v9 table we write (no metadata table) and one Apache Hudi wrote with a metadata table:
    both healthy, the version finding says which is written; `timeline` shows completion times."""
    from tests.core.test_hudi1x_read import TABLES, unpack

    ours = Table.create(str(tmp_path / "ours"), name="ours", record_key="id",
                        options={"hoodie.write.table.version": 9})
    written = ours.write(pa.table({"id": ["a"]}), operation="insert")
    doc = invoke_json("doctor", ours.storage.uri)
    assert doc["healthy"]
    assert by_check(doc)["version"][0]["message"] == \
        "table version 9 (timeline layout 2, Hudi 1.x): read and written; no metadata table"
    completion = ours.timeline.completed().last.completion
    line = next(x for x in invoke("timeline", ours.storage.uri).stdout.splitlines() if x.startswith(written.instant))
    assert f"completed {completion[8:10]}:{completion[10:12]}:{completion[12:14]}.{completion[14:]}Z" in line
    hudi = unpack(TABLES["v9_cow_meta"], tmp_path / "hudi")
    doc = invoke_json("doctor", str(hudi))
    assert doc["healthy"]
    [version] = by_check(doc)["version"]
    assert version["level"] == "ok" and version["message"].endswith("read and written; metadata table: "
                                                                     "column_stats,files,partition_stats,record_index,"
                                                                     "secondary_index_merchant_idx,"
                                                                     "secondary_index_txn_date_idx")
    lance_path = str(unpack(TABLES["v9_lance"], tmp_path / "lance"))
    lance = invoke_json("doctor", lance_path)
    [version] = by_check(lance)["version"]
    assert version["level"] == "info" and "writes parquet only" in version["advice"]
    shown = invoke_json("table", "show", lance_path)  # rows counted from the Lance files' metadata
    assert sum(p["rows_in_base_files"] for p in shown["partitions"]) == Table.open(lance_path).read().num_rows == 9
    # every partition is kept current: none is switched off; the indexes hold what a scan implies
    listing, record_index, *secondary = by_check(doc)["metadata"]
    assert listing["level"] == "ok" and listing["message"].endswith("lists the 17 data files on storage")
    assert record_index["level"] == "ok" and "locates each of the 12 live keys" in record_index["message"]
    assert [(f["level"], f["message"]) for f in secondary] == [
        ("ok", "secondary index secondary_index_merchant_idx holds the 12 cells of the live records' merchant_name "
               "values"),
        ("ok", "secondary index secondary_index_txn_date_idx holds the 12 cells of the live records' txn_date values")]
    assert doc["health"]["metadata_table_version"] == 9 and doc["health"]["table_version"] == 9
    # a file the metadata table does not list is one Hudi 1.x readers never read: said
    (hudi / "region=us" / "stray.parquet").write_bytes(b"x")
    doc = invoke_json("doctor", str(hudi), code=3)
    listing, *_ = by_check(doc)["metadata"]
    assert listing["level"] == "warn" and "misses 1 data files on storage (region=us/stray.parquet)" in \
        listing["message"]


def test_an_archived_table_without_an_active_commit_reads_empty_and_says_so(tmp_path):
    """Archived commits whose active successors were all rolled back (a Java writer can; ours
    refuses the last one): every reader counts an archived commit's files as committed only
    before the first active commit, so the table reads empty. `doctor` says so (it said
    healthy) and how it heals: the next write, after which hudi-rs reads the rows again."""
    from tests.conftest import hudi_read

    path = str(tmp_path / "t")
    t = Table.create(path, name="t", record_key="id", precombine_field="ts")
    for i in range(6):
        t.write(pa.table({"id": [f"k{i}"], "ts": [1]}), operation="insert")
    t.archive(min_commits=1, max_commits=2)
    txn = Table.open(path).transaction()
    with txn.lock():  # (the transaction's own rollback: no service check stands in its way)
        timeline = txn.timeline
        txn.rollback(timeline, timeline.commits().completed().last)
    assert Table.open(path).read().num_rows == 0 and hudi_read(path).num_rows == 0
    doc = invoke_json("doctor", path, code=3)
    (finding,) = by_check(doc)["archive"]
    assert finding["level"] == "error" and "none is left on the active timeline" in finding["message"]
    assert "any write brings them back" in finding["advice"]
    Table.open(path).write(pa.table({"id": ["new"], "ts": [1]}), operation="insert")
    assert len(hudi_read(path)) == Table.open(path).read().num_rows == 6  # k0-k4 back, k5 rolled back, new
    assert invoke_json("doctor", path)["healthy"]


def test_a_damaged_plan_is_named_and_doctor_reports_it(tmp_path):
    """A pending plan holding garbage: every command's error names the file (it was fastavro's
    "cannot read header" alone), and doctor reports it among its findings (exit 3) instead of
    failing."""
    for version in (6, 9):
        path = str(tmp_path / f"v{version}")
        t = Table.create(path, name="t", table_type="MERGE_ON_READ", record_key="k", precombine_field="ts",
                         options={"hoodie.write.table.version": version})
        t.write(pa.table({"k": ["a", "b"], "ts": [1, 1]}), operation="insert")
        t.write(pa.table({"k": ["a"], "ts": [2]}))
        plan = t.schedule_compaction(max_delta_commits=1)
        name = f"{t.timeline.folder}/{Instant(plan, 'compaction', State.REQUESTED).file_name}"
        with open(os.path.join(path, name), "wb") as f:
            f.write(b"garbage")
        for args in (["compaction", "list", path], ["files", path], ["clean", path, "--dry-run"]):
            assert f"{name} is not a readable Avro file" in invoke(*args, code=1).stderr, args
        doc = invoke_json("doctor", path, code=3)
        assert any(name in f["message"] and f["level"] == "error" for f in doc["findings"])
        assert by_check(doc)["properties"]  # the other checks were made


def test_an_emptied_commit_file_is_reported_and_its_files_are_not_called_orphans(tmp_path):
    """Queries read the files of a completed commit whose file is empty; doctor said "no query
    reads" them and advised deleting them (the previous values came back)."""
    path = str(tmp_path / "t")
    t = Table.create(path, name="t", record_key="k", precombine_field="ts")
    t.write(pa.table({"k": ["a"], "ts": [1], "v": ["old"]}))
    latest = t.write(pa.table({"k": ["a"], "ts": [2], "v": ["new"]})).instant
    name = f"{t.timeline.folder}/{t.timeline.get(latest).file_name}"
    open(os.path.join(path, name), "wb").close()
    doc = invoke_json("doctor", path, code=3)
    files = by_check(doc)["files"]
    assert [f["level"] for f in files] == ["error"] and f"the commit file of {latest} is empty" in files[0]["message"]


def test_a_pending_writes_files_are_not_taken_for_a_stale_metadata_table(tmp_path):
    """A write that died after its data files (its commit not completed): the metadata table
    does not list them, as it should not yet. doctor warned that the listing misses them; it
    now says they are a pending instant's, and that the next writer rolls them back."""
    path = str(tmp_path / "t")
    options = {"hoodie.write.table.version": 9, "hoodie.metadata.enable": "true"}
    t = Table.create(path, name="t", record_key="id", partition_fields="p", options=options)
    t.write(pa.table({"id": ["a"], "p": ["x"]}))
    dying = Table.open(path, options=options)
    dying.storage = Dies(path, ops=("create",), match=lambda p: p.endswith(".commit") and "/metadata/" not in p)
    with pytest.raises(Crash):  # (before its commit completes)
        dying.write(pa.table({"id": ["b"], "p": ["y"]}))
    doc = invoke_json("doctor", path, code=3)  # (the dead writer's pending commit: its own warning)
    assert [f["level"] for f in by_check(doc)["pending"]] == ["warn"]
    levels = [(f["level"], f["message"]) for f in by_check(doc)["metadata"]]
    assert ("info", "1 data files of pending instants are not listed yet (listed when their instant completes; a "
                    "dead writer's are rolled back by the next writer or service)") in levels
    assert not [m for level, m in levels if level in ("warn", "error")], levels


def test_a_pending_cleans_deleted_files_are_not_taken_for_a_stale_metadata_table(tmp_path):
    """A clean killed after deleting its files, before completing: the metadata table still
    lists them until the next clean finishes it. doctor warned of a stale listing; it now
    counts them apart (the pending clean is its own warning)."""
    path = str(tmp_path / "t")
    options = {"hoodie.write.table.version": 9, "hoodie.metadata.enable": "true"}
    t = Table.create(path, name="t", record_key="id", partition_fields="p", options=options)
    for v in range(4):
        t.write(pa.table({"id": ["a", "b"], "p": ["x", "y"], "v": [v, v]}))
    dying = Table.open(path, options=options)
    dying.storage = Dies(path, ops=("create",), match=lambda p: p.endswith(".clean") and "/metadata/" not in p)
    with pytest.raises(Crash):  # (after deleting its files, before completing)
        dying.clean(retained=1)
    doc = invoke_json("doctor", path, code=3)
    assert [f["level"] for f in by_check(doc)["pending"]] == ["warn"]
    levels = [(f["level"], f["message"]) for f in by_check(doc)["metadata"]]
    assert any(level == "info" and "a pending clean deleted are still listed" in m for level, m in levels), levels
    assert not [m for level, m in levels if level in ("warn", "error")], levels
