"""OpenLineage: every operator gives the datasets it reads and writes (named per the OpenLineage
naming spec), the table's schema and a `hudi` run facet; checked on a real `airflow dags test`
run with the OpenLineage provider's file transport and real spark-submits (local[1])."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from airflow_lake.core.table import Table
from airflow_lake.operators.lineage import dataset_name
from tests.provider.conftest import batch
from tests.provider.test_operators import load_dag, source, spark_env  # noqa: F401


@pytest.mark.parametrize("location, expected", [
    ("/lake/trips/", ("file", "/lake/trips")),
    ("/lake/./x/../trips/", ("file", "/lake/trips")),  # (one table, one dataset: as its Asset URI)
    ("/lake//trips", ("file", "/lake/trips")),
    ("file:///lake//trips/", ("file", "/lake/trips")),
    ("file:///lake/trips", ("file", "/lake/trips")),
    ("s3://bucket/lake/trips/", ("s3://bucket", "lake/trips")),
    ("s3a://bucket/lake/trips", ("s3://bucket", "lake/trips")),
    ("gs://bucket/lake/trips", ("gs://bucket", "lake/trips")),
    ("abfss://box@acct.dfs.core.windows.net/lake/trips", ("abfss://box@acct.dfs.core.windows.net", "lake/trips")),
    ("hdfs://namenode:8020/lake/trips", ("hdfs://namenode:8020", "/lake/trips")),
])
def test_datasets_are_named_per_the_openlineage_naming_spec(location, expected):
    assert dataset_name(location) == expected


def _events(path, count: int, timeout: float = 60) -> list[dict]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        lines = path.read_text().splitlines() if path.exists() else []
        if len(lines) >= count:
            return [json.loads(x) for x in lines]
        time.sleep(0.2)
    raise AssertionError(f"{len(lines)} OpenLineage events of {count} after {timeout} s")


def test_an_upsert_and_a_clean_report_their_lineage(airflow_db, spark_env, tmp_path, monkeypatch):  # noqa: F811
    events_file = tmp_path / "openlineage.jsonl"
    monkeypatch.setenv("AIRFLOW__OPENLINEAGE__TRANSPORT", json.dumps(
        {"type": "file", "log_file_path": str(events_file), "append": True}))
    monkeypatch.setenv("AIRFLOW__OPENLINEAGE__NAMESPACE", "lake-tests")
    # emit from a thread, not a forked child: dag.test() runs tasks inside this multi-threaded
    # pytest process, where a forked child can hang on a lock another thread held (the listener
    # then kills it after its timeout and the START event is lost); a worker's task process forks fine
    monkeypatch.setenv("AIRFLOW__OPENLINEAGE__EXECUTE_IN_THREAD", "True")
    path = str(tmp_path / "t")
    Table.create(path, name="t", record_key="id", precombine_field="ts").write(batch([1, 2]))
    data = source(tmp_path / "landing", "b1", batch([2, 3], ts=2))
    dag = load_dag(airflow_db, "lake_lineage", f"""
        up = UpsertOperator(task_id="upsert", table_path={path!r}, source={data!r}, **SPARK)
        clean = CleanOperator(task_id="clean", table_path={path!r}, **SPARK)
        up >> clean
    """)
    # in its own process, as a worker runs it: Airflow registers the OpenLineage listener when its
    # plugins load (once per process), reading [openlineage] then: this process loaded them long ago
    assert dag.dag_id == "lake_lineage"
    proc = subprocess.run([str(Path(sys.executable).with_name("airflow")), "dags", "test", "lake_lineage"],
                          env={**os.environ}, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    instant = Table.open(path).timeline.commits().completed().last.time
    events = [e for e in _events(events_file, 4) if e.get("job", {}).get("name", "").startswith("lake_lineage.")]
    by = {(e["job"]["name"].split(".", 1)[1], e["eventType"]): e for e in events}
    assert {"START", "COMPLETE"} <= {t for _, t in by}

    start, done = by[("upsert", "START")], by[("upsert", "COMPLETE")]
    for event in (start, done):
        assert [(d["namespace"], d["name"]) for d in event["inputs"]] == [("file", data)]
        assert [(d["namespace"], d["name"]) for d in event["outputs"]] == [("file", path)]
    [table] = done["outputs"]
    assert [f["name"] for f in table["facets"]["schema"]["fields"]] == ["id", "ts", "value"]
    # (a copy-on-write upsert rewrites the file group: 3 records written, 1 insert, 1 update)
    assert table["outputFacets"]["outputStatistics"]["rowCount"] == 3
    hudi = done["run"]["facets"]["hudi"]
    assert (hudi["table"], hudi["job"], hudi["instant"], hudi["operation"]) == (path, "upsert", instant, "upsert")
    assert hudi["tableType"] == "COPY_ON_WRITE" and hudi["tableVersion"] == 6
    assert (hudi["counts"]["records_written"], hudi["counts"]["inserts"], hudi["counts"]["updates"]) == (3, 1, 1)

    clean = by[("clean", "COMPLETE")]
    assert [(d["namespace"], d["name"]) for d in clean["inputs"]] == [("file", path)]
    assert clean["run"]["facets"]["hudi"]["job"] == "clean"


def test_timeline_readers_give_the_table_as_their_input(tmp_path):
    from airflow_lake.core.maintenance import table_policy
    from airflow_lake.operators import TableHealthOperator
    from airflow_lake.operators.maintenance import MaintenancePlanOperator
    from airflow_lake.sensors import InstantSensor

    path = str(tmp_path / "t")
    for op in (TableHealthOperator(task_id="health", table_path=path),
               InstantSensor(task_id="wait", table_path=path),
               MaintenancePlanOperator(task_id="plan", policy=table_policy("t", {"path": path}))):
        for lineage in (op.get_openlineage_facets_on_start(), op.get_openlineage_facets_on_complete(None),
                        op.get_openlineage_facets_on_failure(None)):
            assert [(d.namespace, d.name) for d in lineage.inputs] == [("file", path)] and not lineage.outputs


def test_a_dry_run_clean_writes_no_dataset(tmp_path):
    from airflow_lake.operators import CleanOperator

    path = str(tmp_path / "t")
    dry = CleanOperator(task_id="dry", table_path=path, dry_run=True).get_openlineage_facets_on_start()
    real = CleanOperator(task_id="real", table_path=path).get_openlineage_facets_on_start()
    assert dry.outputs == [] and [(d.namespace, d.name) for d in real.outputs] == [("file", path)]


def test_a_query_a_catalog_table_or_a_relative_path_is_no_file_input(tmp_path):
    from airflow_lake.operators import UpsertOperator

    path = str(tmp_path / "t")
    for given, fmt in (("SELECT * FROM landing", "sql"), ("landing.orders", "table"), ("landing/orders", None)):
        op = UpsertOperator(task_id="u", table_path=path, source=given, source_format=fmt)
        assert op.get_openlineage_facets_on_start().inputs == [], given
    files = UpsertOperator(task_id="u", table_path=path, source=str(tmp_path / "landing"))
    assert [(d.namespace, d.name) for d in files.get_openlineage_facets_on_start().inputs] == \
        [("file", str(tmp_path / "landing"))]


def test_a_task_that_changed_nothing_reports_no_output_on_completion(tmp_path):
    """As for its asset event: a skipped task, a clean with nothing to delete, no compaction due."""
    from airflow_lake.operators import CleanOperator, CompactionScheduleOperator

    path = str(tmp_path / "t")
    clean = CleanOperator(task_id="clean", table_path=path)
    assert clean.get_openlineage_facets_on_complete(None).outputs == []  # skipped: no result
    clean._outcome = {"instant": None, "files_deleted": 0}
    assert clean.get_openlineage_facets_on_complete(None).outputs == []
    clean._outcome = {"instant": "20240101000000000", "files_deleted": 3}
    assert [(d.namespace, d.name) for d in clean.get_openlineage_facets_on_complete(None).outputs] == \
        [("file", path)]
    schedule = CompactionScheduleOperator(task_id="plan", table_path=path)
    schedule._outcome = {"instant": None}
    assert schedule.get_openlineage_facets_on_complete(None).outputs == []


def test_lineage_of_an_absolute_table_path_looks_up_no_connection(tmp_path, monkeypatch):
    """The OpenLineage listener calls these in a forked process, where a connection lookup
    hangs until the listener kills it (`airflow dags test`): an absolute path needs none."""
    from airflow.sdk import BaseHook

    from airflow_lake.operators import CleanOperator, TableHealthOperator, UpsertOperator

    looked_up = []
    monkeypatch.setattr(BaseHook, "get_connection", classmethod(lambda cls, conn_id: looked_up.append(conn_id)))
    path = str(tmp_path / "t")
    for op in (TableHealthOperator(task_id="health", table_path=path),
               CleanOperator(task_id="clean", table_path=path),
               UpsertOperator(task_id="upsert", table_path=path, source=str(tmp_path / "landing"))):
        lineage = op.get_openlineage_facets_on_start()
        assert ("file", path) in [(d.namespace, d.name) for d in [*lineage.inputs, *lineage.outputs]], op.task_id
    assert looked_up == []
