"""Table services from the command line, checked against the timeline and the files they leave."""

from __future__ import annotations

import os

import pyarrow as pa
import pyarrow.compute  # noqa: F401  (pa.compute)

from airflow_lake.core import Table
from airflow_lake.core.timeline.instant import COMPACTION, SAVEPOINT

from ..conftest import hudi_read, rows
from .conftest import invoke, invoke_json

COLS = ["uuid", "rider", "fare", "city"]


def test_compaction_schedule_list_show_run(trips):
    path = trips.storage.uri
    before = rows(trips.read(), COLS)
    not_now = invoke_json("compaction", "schedule", path)
    assert not_now["instant"] is None and not_now["reason"].startswith("trigger NUM_COMMITS not met: 3 delta commits")
    assert "nothing scheduled: trigger NUM_COMMITS not met" in invoke("compaction", "schedule", path).stdout
    planned = invoke_json("compaction", "schedule", path, "--max-delta-commits", "2")
    assert planned["scheduled"] and planned["file_groups"] == 2
    timeline = trips.timeline
    assert timeline.actions(COMPACTION).pending().times == [planned["instant"]]
    listed = invoke_json("compaction", "list", path)["compactions"]
    assert [(c["instant"], c["state"], c["file_groups"]) for c in listed] == [(planned["instant"], "REQUESTED", 2)]
    shown = invoke_json("compaction", "show", path, planned["instant"])
    assert {o["partition"] for o in shown["operations"]} == {"city=san_francisco", "city=sao_paulo"}
    assert all(len(o["log_files"]) == 1 for o in shown["operations"])
    text = invoke("compaction", "show", path, planned["instant"]).stdout
    assert f"compaction {planned['instant']} REQUESTED: 2 file groups, 2 log files" in text
    done = invoke_json("compaction", "run", path)
    assert done["instant"] == planned["instant"] and done["operations"] == 2 and len(done["files"]) == 2
    assert rows(trips.read(), COLS) == before == rows(hudi_read(path), COLS)
    assert rows(hudi_read(path, **{"hoodie.read.use.read_optimized.mode": "true"}), COLS) == before
    assert invoke_json("compaction", "list", path)["compactions"][0]["state"] == "COMPLETED"
    missing = invoke("compaction", "run", path, code=1).stderr
    assert missing == f"airflow-lake: error: table {path}: no pending compaction plan to run\n"


def test_clean_dry_run_then_clean(tmp_path):
    table = Table.create(str(tmp_path / "cow"), name="cow", record_key="k", precombine_field="v")
    for v in range(4):
        table.write(pa.table({"k": ["a", "b"], "v": [v, v]}), operation="upsert")
    path = table.storage.uri
    files = sorted(os.listdir(path))
    planned = invoke_json("clean", path, "--retained", "1", "--dry-run")
    assert planned["instant"] is None and planned["dry_run"] and planned["files_planned"] == 2
    assert sorted(os.listdir(path)) == files  # nothing deleted
    expected = table.clean(retained=1, dry_run=True)
    assert planned["files"] == expected.files and planned["earliest_instant_to_retain"] == \
        expected.earliest_instant_to_retain
    text = invoke("clean", path, "--retained", "1").stdout
    done = table.timeline.actions("clean").completed().last
    assert text.startswith(f"clean {done.time}: deleted 2 files, retaining commits from")
    assert all(name in text for names in expected.files.values() for name in names)
    assert all(not os.path.exists(os.path.join(path, n)) for names in expected.files.values() for n in names)
    assert rows(hudi_read(path), ["k", "v"]) == [("a", 3), ("b", 3)]


def test_archive_savepoint_rollback_restore(tmp_path):
    table = Table.create(str(tmp_path / "cow"), name="cow", record_key="k", precombine_field="v")
    for v in range(6):
        table.write(pa.table({"k": ["a", "b"], "v": [v, v]}), operation="upsert")
    path = table.storage.uri
    commits = table.timeline.commits().completed().times
    assert invoke_json("savepoint", "create", path, commits[3])["instant"] == commits[3]
    listed = invoke_json("savepoint", "list", path)["savepoints"]
    assert [(s["instant"], s["state"], s["files"]) for s in listed] == [(commits[3], "COMPLETED", 1)]
    assert table.timeline.actions(SAVEPOINT).completed().times == [commits[3]]
    archived = invoke_json("archive", path, "--min-commits", "1", "--max-commits", "2")
    assert archived["archived_instants"] == [f"{t}.commit" for t in commits[:3]]
    assert archived["blocked_by"] == f"savepoint {commits[3]}"
    assert "; stopped by savepoint" in invoke("archive", path, "--min-commits", "1", "--max-commits", "2").stdout
    assert table.timeline.commits().completed().times == commits[3:]
    rolled = invoke_json("rollback", path, commits[-1])
    assert rolled["rolled_back"] == commits[-1] and rolled["files_deleted"] == 1
    assert table.timeline.commits().completed().times == commits[3:-1]
    not_latest = invoke("rollback", path, commits[3], code=1).stderr
    assert not_latest.startswith(f"airflow-lake: error: table {path}: {commits[3]} is not the latest completed write")
    restored = invoke_json("restore", path, commits[3])
    assert restored["savepoint"] == commits[3] and restored["rolled_back"] == commits[4:-1]
    assert rows(hudi_read(path), ["k", "v"]) == [("a", 3), ("b", 3)]
    assert "is not a savepoint" in invoke("restore", path, commits[4], code=1).stderr
    # deleted, the savepoint no longer stops the archive; the commit it protected stays
    assert invoke("savepoint", "delete", path, commits[3]).stdout.strip() == f"savepoint {commits[3]} deleted"
    assert invoke_json("savepoint", "list", path)["savepoints"] == []
    assert "is not a savepoint" in invoke("savepoint", "delete", path, commits[3], code=1).stderr
    assert table.timeline.commits().completed().times == commits[3:4]
    assert invoke_json("archive", path, "--min-commits", "1", "--max-commits", "2")["blocked_by"] is None


def test_services_on_a_hudi_written_table(unzip_fixture):
    """Apache Hudi's MOR table: schedule and run a compaction, savepoint, clean."""
    path = str(unzip_fixture("quickstart_trips_table/mor/avro/v6_trips_8i1u.zip"))
    before = rows(hudi_read(path), ["uuid", "rider", "fare"])
    planned = invoke_json("compaction", "schedule", path, "--max-delta-commits", "1")
    assert planned["file_groups"] == 1
    (op,) = invoke_json("compaction", "show", path, planned["instant"])["operations"]
    done = invoke_json("compaction", "run", path, "--instant", planned["instant"])
    in_partition = hudi_read(path).filter(pa.compute.equal(pa.compute.field("_hoodie_partition_path"),
                                                           op["partition"])).num_rows
    assert done["records_written"] == in_partition == 4 and done["log_records"] == 1
    assert rows(hudi_read(path), ["uuid", "rider", "fare"]) == before
    assert invoke_json("savepoint", "create", path, done["instant"])["instant"] == done["instant"]
    assert invoke_json("clean", path, "--retained", "1")["files_deleted"] == 0  # the savepoint keeps them


def test_archive_bounds_default_to_the_tables_keep_options(tmp_path):
    table = Table.create(str(tmp_path / "cow"), name="cow", record_key="k", precombine_field="v")
    for v in range(5):
        table.write(pa.table({"k": ["a"], "v": [v]}))
    path = table.storage.uri
    commits = table.timeline.commits().completed().times
    assert invoke_json("archive", path)["archived"] == 0  # 20 / 30 unless the table says otherwise
    keep = ["-o", "hoodie.keep.min.commits=1", "-o", "hoodie.keep.max.commits=2"]
    doctor = [f["message"] for f in invoke_json("doctor", path, *keep)["findings"] if f["check"] == "archival"]
    assert doctor == ["5 active commits: archival would move 4"]  # (as archive takes the options)
    assert invoke_json("archive", path, *keep, "--min-commits", "3", "--max-commits", "4")["archived_instants"] == \
        [f"{t}.commit" for t in commits[:2]]  # flags win over the options
    assert invoke_json("archive", path, *keep)["archived_instants"] == [f"{t}.commit" for t in commits[2:4]]
    assert Table.open(path, options={"hoodie.keep.min.commits": "1", "hoodie.keep.max.commits": "2"}) \
        .timeline.commits().completed().times == commits[4:]
