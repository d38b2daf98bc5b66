"""DAGs that are wrong must say so at once (issue 24, items 4, 5, 7, 8), under real Airflow:
`dag.test()` and `airflow dags test` on SQLite, no Spark (nothing may be submitted: no
spark-submit is on PATH in the first test)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from airflow_lake.core.errors import InvalidOptionError
from airflow_lake.core.table import Table
from tests.provider.conftest import batch
from tests.provider.test_operators import load_dag, states


def test_a_cow_compaction_and_a_missing_spark_connection_fail_before_submitting(airflow_db, tmp_path,
                                                                               monkeypatch, capfd):
    monkeypatch.setenv("PATH", "/nonexistent")  # a submission would fail otherwise, and differently
    for name in ("AIRFLOW_CONN_SPARK_DEFAULT", "HADOOP_CONF_DIR", "YARN_CONF_DIR"):
        monkeypatch.delenv(name, raising=False)
    cow = Table.create(str(tmp_path / "cow"), name="cow", record_key="id", precombine_field="ts")
    cow.write(batch([1, 2]))
    mor = Table.create(str(tmp_path / "mor"), name="mor", record_key="id", precombine_field="ts",
                       table_type="MERGE_ON_READ")
    mor.write(batch([1, 2]))
    dag = load_dag(airflow_db, "lake_misconfigured", f"""
        CompactionScheduleOperator(task_id="schedule_cow", table_path={cow.storage.uri!r})
        CompactionExecuteOperator(task_id="execute_cow", table_path={cow.storage.uri!r})
        CleanOperator(task_id="clean", table_path={mor.storage.uri!r})
    """)
    dr = dag.test()
    assert states(dr) == {"schedule_cow": "failed", "execute_cow": "failed", "clean": "failed"}
    out = capfd.readouterr()
    text = out.out + out.err
    assert (f"CompactionScheduleOperator schedule_cow: table {cow.storage.uri}: is a COPY_ON_WRITE table: "
            "compaction applies to MERGE_ON_READ tables only") in text
    assert (f"CompactionExecuteOperator execute_cow: table {cow.storage.uri}: is a COPY_ON_WRITE table: "
            "compaction applies to MERGE_ON_READ tables only") in text  # (it submitted a job that did nothing)
    assert (f"CleanOperator clean: table {mor.storage.uri}: the Spark connection 'spark_default' is not defined, "
            "so the Spark provider would submit to YARN") in text
    assert "AIRFLOW_CONN_SPARK_DEFAULT=" in text
    assert "Spark-Submit cmd" not in text  # nothing was submitted
    assert len(Table.open(cow.storage.uri).timeline.instants) == 1
    assert len(Table.open(mor.storage.uri).timeline.instants) == 1


def test_lake_default_is_the_default_connection_and_may_be_undefined(tmp_path, monkeypatch):
    from airflow.sdk.exceptions import AirflowNotFoundException

    from airflow_lake.hooks import LakeHook
    from airflow_lake.operators import UpsertOperator
    from airflow_lake.sensors import InstantSensor
    from airflow_lake.triggers.instant import LakeInstantTrigger

    monkeypatch.delenv("AIRFLOW_CONN_LAKE_DEFAULT", raising=False)
    path = str(tmp_path / "t")
    Table.create(path, name="t", record_key="id", precombine_field="ts").write(batch([1]))
    assert LakeHook().lake_conn_id == "lake_default"
    assert LakeHook().get_table(path).storage.uri == path  # undefined: absolute paths need none
    with pytest.raises(InvalidOptionError, match="relative and no lake connection with a base_path"):
        LakeHook().resolve("t")
    with pytest.raises(AirflowNotFoundException):  # a connection named otherwise must exist
        LakeHook("lake_sales").resolve(path)
    monkeypatch.setenv("AIRFLOW_CONN_LAKE_DEFAULT", json.dumps({"conn_type": "lake",
                                                                "extra": {"base_path": str(tmp_path)}}))
    assert LakeHook().resolve("t") == path
    op = UpsertOperator(task_id="u", table_path="t", source="s", asset=False)
    assert op.lake_conn_id == "lake_default" and op.hook.resolve(op.table_path) == path
    sensor = InstantSensor(task_id="w", table_path="t", track_watermark=False)
    assert sensor.lake_conn_id == "lake_default" and sensor.hook.resolve("t") == path
    assert LakeInstantTrigger(table_path="t").serialize()[1]["lake_conn_id"] == "lake_default"


def test_a_relative_or_templated_table_path_says_why_it_needs_an_asset(tmp_path):
    from airflow_lake.operators import CleanOperator
    from airflow_lake.sensors import InstantSensor

    for table_path in ("sales/orders", "{{ params.table }}"):
        with pytest.raises(InvalidOptionError) as e:
            CleanOperator(task_id="c", table_path=table_path)
        message = str(e.value)
        assert f"CleanOperator c: table_path {table_path!r} is relative or templated" in message
        assert "joined to the lake connection's base_path only when the task runs" in message
        assert "asset=table_asset('<the table's absolute path or URI>') from airflow_lake.hooks" in message
        assert "asset=False" in message and "docs/operators.md" in message
        with pytest.raises(InvalidOptionError, match="joined to the lake connection's base_path only when the task "
                                                     "runs"):
            InstantSensor(task_id="w", table_path=table_path)
    assert "### Relative or templated table paths" in (Path(__file__).parents[2] / "docs/operators.md").read_text()


DEFERRED_DAG = """
from datetime import datetime

from airflow.sdk import DAG

from airflow_lake.sensors import InstantSensor

with DAG({dag_id!r}, schedule=None, start_date=datetime(2024, 1, 1), catchup=False) as dag:
    InstantSensor(task_id="wait", table_path={table!r}, baseline={baseline!r}, track_watermark=False,
                  deferrable=True, poke_interval=0.2, timeout=1)
"""


def test_the_deferrable_sensors_timeout_holds_under_airflow_dags_test(airflow_db, tmp_path):
    """`airflow dags test` runs the trigger in-process, where no triggerer enforces the
    deferral's timeout: the trigger's own deadline ends the wait (nothing new ever lands)."""
    path = str(tmp_path / "quiet")
    last = Table.create(path, name="quiet", record_key="id", precombine_field="ts").write(batch([1])).instant
    dag_id = "lake_deferred_timeout"
    (airflow_db / "dags" / f"{dag_id}.py").write_text(DEFERRED_DAG.format(dag_id=dag_id, table=path, baseline=last))
    airflow = str(Path(sys.executable).with_name("airflow"))
    proc = subprocess.run([airflow, "dags", "test", dag_id], env={**os.environ}, capture_output=True, text=True,
                          timeout=300)
    text = proc.stdout + proc.stderr
    assert proc.returncode == 1, text[-3000:]
    assert f"InstantSensor wait: table {path}: the sensor's timeout passed at" in text, text[-3000:]
    assert "with 0 of 1 new instant(s)" in text
    assert "AirflowSensorTimeout" in text
