"""`TableHealthOperator` in real Airflow runs (`dag.test()`, SQLite): the health as XCom, and a
figure above its threshold failing the task with what to do, the health still pushed."""

from __future__ import annotations

import pyarrow as pa

from airflow_lake.core.table import Table
from tests.provider.test_airflow_runs import load_dag, xcom

DAG = """
from datetime import datetime

from airflow.sdk import DAG

from airflow_lake.operators import TableHealthOperator

with DAG({dag_id!r}, schedule=None, start_date=datetime(2024, 1, 1), catchup=False) as dag:
    TableHealthOperator(task_id="health", table_path={table!r}, thresholds={thresholds!r}, retries=0)
"""


def _dag(home, dag_id: str, table: str, thresholds: dict):
    return load_dag(home, dag_id, table, template=DAG, thresholds=thresholds)


def test_health_as_xcom_and_a_backlog_over_its_threshold_fails_the_task(airflow_db, tmp_path, capfd, statsd):
    path = str(tmp_path / "orders")
    t = Table.create(path, name="orders", table_type="MERGE_ON_READ", record_key="id", precombine_field="ts")
    for ts in range(4):
        t.write(pa.table({"id": [1, 2], "ts": [ts, ts]}))

    dr = _dag(airflow_db, "lake_health_ok", path, {"delta_commits_since_compaction": 10}).test()
    assert dr.state == "success"
    health = xcom(dr, "health")
    assert health["table"] == path and health["delta_commits_since_compaction"] == 4
    assert health["max_log_files_per_slice"] >= 1 and health["pending_compactions"] == []
    # the figures as gauges, through Airflow's metrics (StatsD here)
    assert statsd.values("airflow.lake.health.orders.delta_commits_since_compaction") == ["4|g"]
    assert statsd.values("airflow.lake.health.orders.pending_compactions") == ["0|g"]

    dr = _dag(airflow_db, "lake_health_behind", path, {"delta_commits_since_compaction": 2}).test()
    assert dr.state == "failed"
    assert xcom(dr, "health")["delta_commits_since_compaction"] == 4
    out = "".join(capfd.readouterr())  # (the task's log, as dag.test() prints it)
    assert f"table {path}: delta_commits_since_compaction is 4, above 2: schedule and run a compaction " \
           "(CompactionScheduleOperator" in out
