"""Real Airflow runs: DAGs with InstantSensor under `dag.test()` (the deferrable one through its
trigger), the lake connection, and provider discovery."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import threading
import time
from datetime import timedelta
from importlib.metadata import entry_points
from pathlib import Path

import pytest

from airflow_lake.core.table import Table
from tests.provider.conftest import batch

DAG_TEMPLATE = """
from datetime import datetime

from airflow.sdk import DAG

from airflow_lake.sensors import InstantSensor

with DAG({dag_id!r}, schedule=None, start_date=datetime(2024, 1, 1), catchup=False) as dag:
    InstantSensor(task_id="wait", table_path={table!r}, poke_interval=0.2, timeout=100, {extra})
"""


def load_dag(home: Path, dag_id: str, table: str, extra: str = "", template: str = DAG_TEMPLATE, **fields):
    """Write a DAG file (`template` filled in) into the DAGs folder (dag.test() syncs that
    bundle) and import it."""
    path = home / "dags" / f"{dag_id}.py"
    path.write_text(template.format(dag_id=dag_id, table=table, extra=extra, **fields))
    spec = importlib.util.spec_from_file_location(dag_id, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.dag


def commit_when(table: Table, ready, out: list) -> threading.Thread:
    """Commit to `table` from another thread once `ready()` (a DB query) says the sensor is
    waiting: the commit then provably lands after the sensor's first look."""

    def run():
        deadline = time.monotonic() + 90
        while not ready():
            if time.monotonic() > deadline:
                return  # the sensor never waited: nothing to commit, the run times out and fails
            time.sleep(0.1)
        out.append(table.write(batch([100 + len(out)])).instant)

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def deferred(dag_id: str):
    """True once a task instance of `dag_id` has deferred (its next_method is set)."""
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session
    from sqlalchemy import func, select

    def check() -> bool:
        with create_session() as session:
            return bool(session.scalar(select(func.count()).select_from(TaskInstance).where(
                TaskInstance.dag_id == dag_id, TaskInstance.next_method == "execute_complete")))

    return check


def rescheduled(dag_id: str):
    """True once a task instance of `dag_id` was rescheduled (gave its slot back)."""
    from airflow.models.taskinstance import TaskInstance
    from airflow.models.taskreschedule import TaskReschedule
    from airflow.utils.session import create_session
    from sqlalchemy import func, select

    def check() -> bool:
        with create_session() as session:
            return bool(session.scalar(select(func.count()).select_from(TaskReschedule).join(
                TaskInstance, TaskInstance.id == TaskReschedule.ti_id).where(TaskInstance.dag_id == dag_id)))

    return check


def xcom(dr, task_id: str = "wait"):
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        query = XComModel.get_many(run_id=dr.run_id, dag_ids=dr.dag_id, task_ids=task_id, key="return_value")
        row = session.scalars(query).first()
        value = row.value if row is not None else None
    return json.loads(value) if isinstance(value, str) else value


def test_deferrable_sensor_waits_in_its_trigger_and_keeps_the_watermark(airflow_db, tmp_path):
    path = str(tmp_path / "orders")
    t = Table.create(path, name="orders", record_key="id", precombine_field="ts")
    first = t.write(batch([1])).instant
    dag = load_dag(airflow_db, "lake_deferrable", path, "deferrable=True")

    # first run: no stored watermark, so from the beginning: fires on the existing commit
    dr = dag.test()
    assert dr.state == "success"
    assert xcom(dr)["instants"] == [{"instant": first, "action": "commit"}]

    # second run: the stored watermark is the baseline; nothing new, so it defers and the
    # trigger fires on the commit made meanwhile (and only on it)
    made: list[str] = []
    writer = commit_when(t, deferred("lake_deferrable"), made)
    dr = dag.test()
    writer.join()
    assert dr.state == "success"
    result = xcom(dr)
    assert result["instants"] == [{"instant": made[0], "action": "commit"}]
    assert (result["previous_watermark"], result["watermark"]) == (first, made[0])
    assert result["table"] == path


def test_reschedule_mode_sensor(airflow_db, tmp_path):
    path = str(tmp_path / "events")
    t = Table.create(path, name="events", record_key="id", precombine_field="ts")
    base = t.write(batch([1])).instant
    dag = load_dag(airflow_db, "lake_reschedule", path, f"mode='reschedule', baseline={base!r}")
    made: list[str] = []
    writer = commit_when(t, rescheduled("lake_reschedule"), made)  # once it gave its slot back
    dr = dag.test()
    writer.join()
    assert dr.state == "success"
    assert xcom(dr)["instants"] == [{"instant": made[0], "action": "commit"}]


def test_deferral_carries_the_sensor_timeout_and_a_serialisable_trigger(tmp_path):
    from airflow.sdk.exceptions import TaskDeferred

    from airflow_lake.sensors import InstantSensor

    path = str(tmp_path / "t")
    t = Table.create(path, name="t", record_key="id", precombine_field="ts")
    last = t.write(batch([1])).instant
    sensor = InstantSensor(task_id="w", table_path=path, baseline=last, deferrable=True, timeout=42,
                           poke_interval=7, track_watermark=False)
    with pytest.raises(TaskDeferred) as deferred:
        sensor.execute({})
    assert deferred.value.timeout == timedelta(seconds=42)
    assert deferred.value.method_name == "execute_complete"
    classpath, kwargs = deferred.value.trigger.serialize()
    assert classpath == "airflow_lake.triggers.instant.LakeInstantTrigger"
    assert kwargs["poll_interval"] == 7 and kwargs["baseline"]["watermark"] == last
    from airflow.sdk.exceptions import AirflowException

    with pytest.raises(AirflowException, match=f"table {path}-gone: FileNotFoundError"):
        sensor.execute_complete({}, {"status": "error", "table": path + "-gone", "message": "FileNotFoundError: x"})


def test_lake_connection_resolves_relative_tables_and_finds_instants_by_token(tmp_path, monkeypatch):
    from airflow_lake.hooks import LakeHook

    base = tmp_path / "lake"
    extra = {"base_path": str(base), "table_options": {"hoodie.parquet.small.file.limit": 0}}
    monkeypatch.setenv("AIRFLOW_CONN_LAKE_TEST", json.dumps({"conn_type": "lake", "extra": extra}))
    t = Table.create(str(base / "sales"), name="sales", record_key="id", precombine_field="ts")
    token = "dag/run/task/-1"
    done = t.write(batch([1, 2]), extra_metadata={"airflow_lake.token": token}).instant
    t.write(batch([3]))
    hook = LakeHook("lake_test")
    assert hook.resolve("sales") == str(base / "sales")
    assert hook.get_table("sales").options == {"hoodie.parquet.small.file.limit": 0}
    found = hook.find_instant("sales", token)
    assert found["instant"] == done and found["num_inserts"] == 2 and found["operation_type"] == "UPSERT"
    assert found["extra_metadata"] == {"airflow_lake.token": token}
    assert hook.find_instant("sales", "other/token") is None
    assert hook.table_asset("sales").uri == f"hudi:{base / 'sales'}"
    assert LakeHook().resolve(str(base / "sales")) == str(base / "sales")
    with pytest.raises(Exception, match="relative and no lake connection"):
        LakeHook().resolve("sales")


def test_provider_info_lists_what_exists():
    from importlib import import_module

    from airflow_lake.provider_info import get_provider_info

    info = get_provider_info()
    assert info["package-name"] == "airflow-lake"
    modules = [m for key in ("hooks", "operators", "sensors", "triggers") for entry in info[key]
               for m in entry["python-modules"]]
    for module in modules:
        import_module(module)
    hook = info["connection-types"][0]
    assert hook["connection-type"] == "lake"
    module, name = hook["hook-class-name"].rsplit(".", 1)
    assert getattr(import_module(module), name).conn_type == "lake"
    assert "hudi" in info["asset-uris"][0]["schemes"]


def test_airflow_providers_list_shows_the_provider(airflow_db):
    """Needs the package installed with its entry point (`make test` reinstalls when
    pyproject.toml changes); fails, not skips, when it is missing."""
    ours = [ep for ep in entry_points(group="apache_airflow_provider") if ep.value.startswith("airflow_lake.")]
    assert ours, "the installed airflow-lake has no apache_airflow_provider entry point: reinstall the package"
    airflow = str(Path(sys.executable).with_name("airflow"))
    proc = subprocess.run([airflow, "providers", "list", "-o", "json"], env={**os.environ},
                          capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-2000:]
    listed = json.loads(proc.stdout[proc.stdout.index("["):])
    assert "airflow-lake" in {p["package_name"] for p in listed}
