"""`table create|show`, `timeline`, `commits`, `commit show`, `files` on our tables and Apache Hudi's."""

from __future__ import annotations

import os

from airflow_lake.core import Table
from airflow_lake.core.view import FileSystemView

from .conftest import invoke, invoke_json


def test_table_create_then_show_an_empty_table(tmp_path):
    path = str(tmp_path / "new")
    out = invoke("table", "create", path, "--name", "rides", "--type", "MOR", "--record-key", "id",
                 "--precombine-field", "ts", "--partition-fields", "day", "--hive-style").stdout
    assert f"created MERGE_ON_READ table 'rides' at {path}" in out
    table = Table.open(path)
    assert table.config.table_type == "MERGE_ON_READ" and table.config.partition_fields == ["day"]
    doc = invoke_json("table", "show", path)
    assert doc["properties"] == dict(sorted(table.config.props.items()))
    assert doc["totals"]["file_groups"] == 0 and doc["timeline"]["completed_commits"] == 0
    # a second create at the same place: one line naming the table, exit 1, nothing changed
    again = invoke("table", "create", path, "--name", "rides", "--record-key", "id", code=1)
    assert again.stderr.strip() == f"airflow-lake: error: {path} already holds a Hudi table"
    # --if-missing keeps the table when the settings given agree, and refuses any that differ
    kept = invoke_json("table", "create", path, "--name", "Rides", "--record-key", "id", "--type", "mor",
                       "--partition-fields", "day", "--if-missing")
    assert not kept["created"] and kept["type"] == "MERGE_ON_READ"
    before = sorted(os.listdir(f"{path}/.hoodie"))
    other = invoke("table", "create", path, "--name", "rides", "--record-key", "uuid", "--type", "COW",
                   "--if-missing", code=1)
    assert other.stderr.strip() == (f"airflow-lake: error: table {path}: settings given that contradict the table's "
                                    "own (table_type='COW' but the table has 'MERGE_ON_READ'; record_key='uuid' but "
                                    "the table has 'id'); an existing table keeps the settings it was created with")
    assert sorted(os.listdir(f"{path}/.hoodie")) == before


def test_table_show_counts_rows_files_and_sizes(trips):
    path = trips.storage.uri
    doc = invoke_json("table", "show", path)
    view = FileSystemView(trips.storage, trips.timeline)
    assert doc["name"] == "trips" and doc["type"] == "MERGE_ON_READ" and doc["record_key"] == ["uuid"]
    assert [p["partition"] for p in doc["partitions"]] == view.partitions
    assert doc["totals"]["file_groups"] == len(view.file_groups()) == 3
    assert doc["totals"]["rows_in_base_files"] == 5  # t2 is deleted in a log file: the base still holds it
    assert doc["totals"]["log_files"] == 2 and trips.read().num_rows == 4
    assert [f["name"] for f in doc["schema"]] == trips.schema().names
    assert doc["timeline"]["completed_commits"] == 3 and doc["timeline"]["pending"] == []
    text = invoke("table", "show", path).stdout
    assert "trips (MERGE_ON_READ, version 6)" in text and "city=sao_paulo" in text
    assert "3 file groups, 3 base files, 2 log files, 5 rows in base files" in text


def test_timeline_lists_instants_with_state_times_and_files(trips):
    path = trips.storage.uri
    doc = invoke_json("timeline", path, "--all-states")
    active = trips.timeline
    assert [(i["time"], i["action"], i["state"]) for i in doc["instants"]] == \
        [(i.time, i.action, i.state.name) for i in active]
    first = doc["instants"][0]
    assert first["files"] == active.state_files(first["time"])
    assert set(first["state_times_ms"]) == {"REQUESTED", "INFLIGHT", "COMPLETED"} and doc["state_times_known"]
    times = first["state_times_ms"]
    assert times["REQUESTED"] <= times["INFLIGHT"] <= times["COMPLETED"]
    text = invoke("timeline", path).stdout
    assert "3 instants" in text and all(i.time in text for i in active)
    assert invoke_json("timeline", path, "--limit", "1")["instants"][0]["time"] == active.last.time


def test_commits_and_commit_show_match_the_commit_metadata(trips):
    path = trips.storage.uri
    active = trips.timeline
    doc = invoke_json("commits", path)
    assert [c["instant"] for c in doc["commits"]] == list(reversed(active.commits().completed().times))
    delete, upsert, insert = doc["commits"]
    assert (insert["operation"], insert["inserts"], insert["partitions"], insert["files_added"]) == ("INSERT", 4, 3, 3)
    assert (upsert["operation"], upsert["inserts"], upsert["updates"]) == ("UPSERT", 1, 1)
    assert (delete["operation"], delete["deletes"]) == ("DELETE", 1)
    meta = active.commit_metadata(active.get(upsert["instant"]))
    shown = invoke_json("commit", "show", path, upsert["instant"])
    assert shown["bytes_written"] == sum(s["totalWriteBytes"] for s in meta.write_stats())
    assert {p["partition"]: [f["path"] for f in p["files"]] for p in shown["partitions_detail"]} == \
        {p: [s["path"] for s in stats] for p, stats in meta.partition_to_write_stats.items()}
    text = invoke("commit", "show", path, upsert["instant"]).stdout
    assert f"deltacommit {upsert['instant']}: UPSERT, 3 records written (1 inserts, 1 updates, 0 deletes)" in text
    # an instant that is no commit: exit 1, one line naming the table and the instant
    missing = invoke("commit", "show", path, "20200101000000000", code=1).stderr
    assert missing.count("\n") == 1 and path in missing and "20200101000000000" in missing


def test_files_lists_groups_slices_and_log_files(trips):
    path = trips.storage.uri
    doc = invoke_json("files", path)
    view = FileSystemView(trips.storage, trips.timeline)
    assert {(g["partition"], g["file_id"]) for g in doc["file_groups"]} == \
        {(g.partition, g.file_id) for g in view.file_groups()}
    logs = {lf["name"] for g in doc["file_groups"] for s in g["slices"] for lf in s["log_files"]}
    assert logs == {lf.name for g in view.file_groups() for s in g.slices for lf in s.log_files} and len(logs) == 2
    only = invoke_json("files", path, "--partition", "city=chennai")
    assert {g["partition"] for g in only["file_groups"]} == {"city=chennai"}
    text = invoke("files", path).stdout
    assert "3 file groups" in text and all(name in text for name in logs)


def test_hudi_written_tables(unzip_fixture):
    """Apache Hudi's quickstart MOR table: 8 inserts, then an update in a log file."""
    path = str(unzip_fixture("quickstart_trips_table/mor/avro/v6_trips_8i1u.zip"))
    table = Table.open(path)
    shown = invoke_json("table", "show", path)
    assert shown["totals"]["partitions"] == 3 and shown["totals"]["log_files"] == 1
    assert shown["totals"]["rows_in_base_files"] == 8 and shown["precombine_field"] == "ts"
    commits = invoke_json("commits", path)["commits"]
    assert [(c["operation"], c["records_written"]) for c in commits] == [("UPSERT_PREPPED", 1), ("UPSERT", 8)]
    timeline = invoke_json("timeline", path)
    assert [i["time"] for i in timeline["instants"]] == table.timeline.times
    files = invoke_json("files", path)
    assert sum(len(s["log_files"]) for g in files["file_groups"] for s in g["slices"]) == 1
    detail = invoke_json("commit", "show", path, commits[0]["instant"])
    assert detail["updates"] == 1 and detail["partitions"] == 1


def test_hudi_written_cow_table_with_complex_keys(unzip_fixture):
    path = str(unzip_fixture("sample_table/cow/v6_complexkeygen_hivestyle.zip"))
    shown = invoke_json("table", "show", path)
    assert shown["record_key"] == ["id", "name"] and shown["totals"]["rows_in_base_files"] == 4
    assert {p["partition"] for p in shown["partitions"]} == \
        {"byteField=10/shortField=300", "byteField=20/shortField=100", "byteField=30/shortField=100"}
    assert len(invoke_json("commits", path)["commits"]) == 2
    empty = invoke_json("table", "show", str(unzip_fixture("sample_table/cow/v6_empty.zip")))
    assert empty["totals"]["file_groups"] == 0 and empty["timeline"]["completed_commits"] == 0


def test_not_a_table_is_one_line_and_exit_1(tmp_path):
    result = invoke("table", "show", str(tmp_path), code=1)
    assert result.stderr == f"airflow-lake: error: {tmp_path} is not a Hudi table: no .hoodie folder\n"
    assert invoke("commits", str(tmp_path), "--json", code=1).stdout.strip().startswith('{\n  "error":')


def test_files_as_of_an_instant_the_cleaner_removed_is_refused_as_a_read_is(tmp_path):
    import pyarrow as pa

    path = str(tmp_path / "t")
    table = Table.create(path, name="t", record_key="id", precombine_field="ts", partition_fields="p")
    commits = [table.write(pa.table({"id": ["a", "b"], "ts": [i, i], "p": ["x", "y"]})).instant for i in range(4)]
    assert len(invoke_json("files", path, "--as-of", commits[1])["file_groups"]) == 2
    table.clean(retained=1)
    read = invoke("read", path, "--as-of", commits[1], code=1).stderr
    assert f"time travel to {commits[1]} is not possible" in read
    assert invoke("files", path, "--as-of", commits[1], code=1).stderr == read
    assert len(invoke_json("files", path, "--as-of", commits[-1])["file_groups"]) == 2
