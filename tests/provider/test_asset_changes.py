"""Which runs change the table, by the operators' rule (`changed_table`) applied to real
results: the upsert job's result line (`airflow_lake.spark.services.write_counts`) and the hook's
summary of a token's instant read back from the timeline (issue 23, item 19). An
insert_overwrite_table of an empty source writes no record yet empties the table: a change.
No Spark, no Airflow process."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from airflow_lake.core.table import Table
from airflow_lake.core.timeline.tokens import TOKEN_KEY
from tests.conftest import hudi_read

TOKEN = "d/r/write/-1"


def rows(ids: list[int], part: str = "a") -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "ts": pa.array([1] * len(ids), pa.int64()),
                     "part": pa.array([part] * len(ids))})


@pytest.fixture
def lake_conn(monkeypatch, tmp_path):
    monkeypatch.setenv("AIRFLOW_CONN_LAKE_CHANGES", json.dumps({"conn_type": "lake",
                                                                "extra": {"base_path": str(tmp_path)}}))
    monkeypatch.setenv("PATH", "/nonexistent")  # nothing may be submitted
    return "lake_changes"


def two_partitions(path: str) -> Table:
    t = Table.create(path, name="t", record_key="id", precombine_field="ts", partition_fields=["part"])
    t.write(rows([1, 2], "a"))
    t.write(rows([3], "b"))
    return t


@pytest.mark.parametrize("operation, replaced", [("insert_overwrite_table", 2), ("insert_overwrite", 0),
                                                 ("upsert", 0)])
def test_an_overwrite_by_an_empty_source_is_a_change_when_it_replaced_file_groups(
        tmp_path, lake_conn, operation, replaced):
    from airflow_lake.hooks import LakeHook
    from airflow_lake.operators import UpsertOperator
    from airflow_lake.spark.services import write_counts

    t = two_partitions(str(tmp_path / "t"))
    result = t.write(rows([]), operation=operation, extra_metadata={TOKEN_KEY: TOKEN})
    line = write_counts(result)
    summary = LakeHook(lake_conn).find_result("t", TOKEN)
    assert (line["records_written"], line["deletes"]) == (0, 0)
    assert line["replaced_file_groups"] == summary["replaced_file_groups"] == replaced
    assert UpsertOperator.changed_table(line) is UpsertOperator.changed_table(summary) is bool(replaced)
    assert hudi_read(t.storage.uri).num_rows == (0 if replaced else 3)


def test_rollback_restore_savepoint_and_archive_emit_only_when_they_did_something(tmp_path, lake_conn):
    from airflow_lake.operators import ArchiveOperator, RestoreOperator, RollbackOperator, SavepointOperator

    t = two_partitions(str(tmp_path / "t"))
    saved = t.write(rows([5], "b")).instant
    t.savepoint(saved)
    emptied = t.write(rows([]), operation="insert_overwrite_table")
    undone = t.rollback(emptied.instant)  # deletes no file, yet brings the rows back
    assert (undone.files_deleted, hudi_read(t.storage.uri).num_rows) == ([], 4)
    assert RollbackOperator.changed_table({"instant": undone.instant, "files_deleted": 0})

    again = t.timeline.actions("savepoint").completed().contains(saved)
    assert not SavepointOperator.changed_table({"instant": saved, "already_done": again})
    assert SavepointOperator.changed_table({"instant": saved, "already_done": False})

    t.write(rows([4], "b"))
    restored = t.restore(saved)
    assert RestoreOperator.changed_table({"instant": restored.instant, "rolled_back": restored.rolled_back})
    nothing = t.restore(saved)  # the table is at the savepoint already
    assert not RestoreOperator.changed_table({"instant": nothing.instant, "rolled_back": nothing.rolled_back})

    assert ArchiveOperator.changed_table({"instant": None, "archived": 2})
    assert not ArchiveOperator.changed_table({"instant": None, "archived": 0})


@pytest.mark.parametrize("version", ["6", "9"])
def test_a_retry_finds_its_result_after_its_commit_was_archived(tmp_path, lake_conn, version):
    """A cleared task of an old run whose commit the maintenance DAG archived since: its result
    is read from the archived timeline (the commit file is gone from the active one)."""
    from airflow_lake.hooks import LakeHook

    t = Table.create(str(tmp_path / "t"), name="t", record_key="id", precombine_field="ts",
                     partition_fields=["part"], options={"hoodie.write.table.version": version})
    t.write(rows([1, 2]), extra_metadata={TOKEN_KEY: TOKEN})
    t.write(rows([3, 4], "b"), operation="insert_overwrite", extra_metadata={TOKEN_KEY: TOKEN + "x"})
    for i in range(5, 11):
        t.write(rows([i]))
    first = LakeHook(lake_conn).find_result("t", TOKEN)
    overwrite = LakeHook(lake_conn).find_result("t", TOKEN + "x")
    assert t.archive(min_commits=2, max_commits=3).archived
    assert first["instant"] not in {i.time for i in t.timeline.instants}
    hook = LakeHook(lake_conn)
    assert hook.find_result("t", TOKEN) == first and first["inserts"] == 2
    assert hook.find_result("t", TOKEN + "x") == overwrite and overwrite["operation"] == "insert_overwrite"


def test_executing_a_plan_another_run_completed_changes_nothing(tmp_path, lake_conn):
    from airflow_lake.hooks import LakeHook
    from airflow_lake.operators import CompactionExecuteOperator

    t = Table.create(str(tmp_path / "t"), name="t", record_key="id", precombine_field="ts",
                     table_type="MERGE_ON_READ")
    t.write(rows([1, 2]))
    t.write(rows([1]))
    plan = t.plan_compaction(max_delta_commits=1).instant
    done = t.run_compaction(plan, extra_metadata={TOKEN_KEY: "maintenance/run/execute/-1"})
    assert not done.already_done and not done.completed_elsewhere
    again = t.run_compaction(plan, extra_metadata={TOKEN_KEY: "mine/run/execute/-1"})
    assert again.already_done and again.completed_elsewhere and again.records_written == done.records_written
    # a retry's counts (from the timeline) are the first try's (from the job)
    summary = LakeHook(lake_conn).find_result("t", "maintenance/run/execute/-1")
    assert (summary["updates"], summary["log_records"]) == (0, done.log_records) == (0, again.log_records) == (0, 1)
    line = {"instant": plan, "records_written": again.records_written, "already_done": True,
            "completed_elsewhere": again.completed_elsewhere}
    assert not CompactionExecuteOperator.changed_table(line)
    assert CompactionExecuteOperator.changed_table({**line, "completed_elsewhere": False})  # a retry of its own
