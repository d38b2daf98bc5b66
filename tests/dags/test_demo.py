"""`make demo`'s entry point: the real run (a subprocess, as `make demo` starts it) and its
verdict on a failed task (`dag.test()` does not raise by itself)."""

from __future__ import annotations

import os
import subprocess
import sys

from airflow_lake.demo import expected_trips, failed_tasks
from tests.conftest import REPO, hudi_read
from tests.dags.conftest import DAGS_FOLDER, load_example

FAILING_DAG = '''
from datetime import datetime

from airflow.sdk import DAG, task

with DAG("demo_verdict", schedule=None, start_date=datetime(2025, 1, 1), catchup=False) as dag:
    @task
    def fine():
        return 1

    @task
    def boom(_):
        raise RuntimeError("boom")

    @task
    def after(_):
        return 2

    after(boom(fine()))
'''


def test_a_failed_task_fails_the_demo(airflow_db):
    (DAGS_FOLDER / "demo_verdict.py").write_text(FAILING_DAG)
    dag_run = load_example("demo_verdict").test()
    assert failed_tasks(dag_run) == ["boom", "after"]  # failed, then upstream_failed


def test_make_demo_runs_the_pipeline_end_to_end(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "PYSPARK", "SPARK"))}
    env.update({k: os.environ[k] for k in ("SPARK_HOME",) if k in os.environ})  # the run's (tests/spark_home.py)
    proc = subprocess.run([sys.executable, "-m", "airflow_lake.demo", "--base", str(tmp_path), "--master", "local[2]"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=3600)
    out = proc.stdout
    assert proc.returncode == 0, out[-5000:] + proc.stderr[-5000:]
    summary = out[out.index("\nDAG run "):]
    for task_id in ("land", "upsert_1", "upsert_2", "upsert_3", "wait_for_commits", "schedule_compaction",
                    "execute_compaction", "clean", "archive"):
        assert f"  {task_id} " in summary and summary.split(f"  {task_id} ")[1].split()[0] == "success", summary
    expected = expected_trips(3)
    assert f"rows: {len(expected)}" in summary and f"rows read by hudi-rs: {len(expected)}" in summary, summary
    assert "all tasks succeeded" in summary
    theirs = hudi_read(str(tmp_path / "lake" / "demo" / "trips"))
    assert dict(zip(theirs["uuid"].to_pylist(), theirs["fare"].to_pylist(), strict=True)) == expected
