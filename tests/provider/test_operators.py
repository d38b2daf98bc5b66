"""The operators in real DAGs under `dag.test()`: each task submits its packaged job with the
real `spark-submit` (master local[1], through the Spark provider's `SparkSubmitHook`), the
results are read back with hudi-rs and the XComs, task states and asset events checked.

About 13 spark-submit runs (15-40 s each on a loaded machine); the argument checks at the end
need no Spark."""

from __future__ import annotations

import json
import os
import sys
import textwrap
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_lake.core.table import Table
from tests.conftest import hudi_read
from tests.provider.conftest import batch

REPO = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent


@pytest.fixture
def spark_env(monkeypatch):
    """`spark_default` is local[1]; spark-submit is the venv's; the driver runs this checkout."""
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", json.dumps({"conn_type": "spark", "host": "local[1]"}))
    monkeypatch.setenv("PATH", f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.setenv("SPARK_LOCAL_IP", "127.0.0.1")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep))


SPARK_CONF = {"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2", "spark.log.level": "WARN"}
HEADER = f"""
from datetime import datetime, timedelta

from airflow.sdk import DAG

from airflow_lake.operators import *

SPARK = dict(spark_conf={SPARK_CONF!r})
"""


def load_dag(home: Path, dag_id: str, body: str):
    """Write a DAG file into the DAGs folder (dag.test() syncs that bundle) and import it."""
    import importlib.util

    source = HEADER + f"\nwith DAG({dag_id!r}, schedule=None, start_date=datetime(2024, 1, 1), catchup=False) as dag:\n"
    source += textwrap.indent(textwrap.dedent(body).strip() + "\n", "    ")
    path = home / "dags" / f"{dag_id}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(dag_id, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.dag


def states(dr) -> dict[str, str]:
    from airflow.utils.session import create_session

    with create_session() as session:
        return {ti.task_id: ti.state for ti in dr.get_task_instances(session=session)}


def xcom(dr, task_id: str):
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        query = XComModel.get_many(run_id=dr.run_id, dag_ids=dr.dag_id, task_ids=task_id, key="return_value")
        row = session.scalars(query).first()
        return XComModel.deserialize_value(row) if row is not None else None


def asset_events(uri: str) -> list[dict]:
    from airflow.models.asset import AssetEvent, AssetModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        rows = session.scalars(select(AssetEvent).join(AssetModel, AssetModel.id == AssetEvent.asset_id)
                               .where(AssetModel.uri == uri).order_by(AssetEvent.id)).all()
        return [{"extra": dict(r.extra or {}), "task_id": r.source_task_id} for r in rows]


def hudi_rows(path: str, **options: str) -> list[tuple]:
    """(id, ts, value) rows of the table read by hudi-rs, sorted."""
    table = hudi_read(path, **options)
    if table.num_rows == 0:
        return []
    return sorted(zip(*(table.column(c).to_pylist() for c in ("id", "ts", "value")), strict=True))


def source(folder: Path, name: str, data: pa.Table) -> str:
    folder.mkdir(parents=True, exist_ok=True)
    pq.write_table(data, folder / f"{name}.parquet")
    return str(folder / f"{name}.parquet")


def expected(*batches: pa.Table) -> list[tuple]:
    rows: dict[int, tuple] = {}
    for data in batches:
        for r in data.to_pylist():
            if r.get("_delete"):
                rows.pop(r["id"], None)
            elif r["id"] not in rows or rows[r["id"]][1] <= r["ts"]:
                rows[r["id"]] = (r["id"], r["ts"], r["value"])
    return sorted(rows.values())


def test_ingest_compact_clean_archive_pipeline(airflow_db, spark_env, tmp_path):
    """upsert (creating a MERGE_ON_READ table) → upsert → schedule → execute (instant by XCom)
    → clean → archive, each a real spark-submit."""
    table = str(tmp_path / "orders")
    first, second = batch(list(range(1, 41)), ts=1), batch(list(range(21, 61)), ts=2)
    src1, src2 = source(tmp_path / "landing", "b1", first), source(tmp_path / "landing", "b2", second)
    dag = load_dag(airflow_db, "lake_pipeline", f"""
        first = UpsertOperator(task_id="first", table_path={table!r}, source={src1!r}, create_if_missing=True,
                               record_key="id", precombine_field="ts", table_type="MERGE_ON_READ",
                               table_options={{"hoodie.parquet.small.file.limit": 0}}, **SPARK)
        second = UpsertOperator(task_id="second", table_path={table!r}, source="{{{{ params.src }}}}", **SPARK,
                                params={{"src": {src2!r}}})
        schedule = CompactionScheduleOperator(task_id="schedule", table_path={table!r}, max_delta_commits=1, **SPARK)
        execute = CompactionExecuteOperator(task_id="execute", table_path={table!r},
                                            instant="{{{{ ti.xcom_pull(task_ids='schedule') }}}}", **SPARK)
        clean = CleanOperator(task_id="clean", table_path={table!r}, policy="KEEP_LATEST_FILE_VERSIONS", retained=1,
                              **SPARK)
        archive = ArchiveOperator(task_id="archive", table_path={table!r}, min_commits=1, max_commits=2, **SPARK)
        first >> second >> schedule >> execute >> clean >> archive
    """)
    dr = dag.test()
    assert states(dr) == dict.fromkeys(["first", "second", "schedule", "execute", "clean", "archive"], "success")
    t = Table.open(table)
    assert t.config.table_type == "MERGE_ON_READ"
    up1, up2 = xcom(dr, "first"), xcom(dr, "second")
    assert up1 == {"instant": up1["instant"], "operation": "upsert", "inserts": 40, "updates": 0, "deletes": 0,
                   "files_written": up1["files_written"]} and up1["files_written"] >= 1
    assert (up2["inserts"], up2["updates"], up2["deletes"]) == (20, 20, 0) and up2["instant"] > up1["instant"]
    planned = xcom(dr, "schedule")
    assert isinstance(planned, str) and planned > up2["instant"]
    executed = xcom(dr, "execute")
    assert executed["instants"] == [planned] and executed["instant"] == planned and not executed["already_done"]
    assert executed["records_written"] == 60 and executed["files_written"] >= 1
    cleaned = xcom(dr, "clean")
    assert cleaned["instant"] and cleaned["files_deleted"] >= 1 and cleaned["policy"] == "KEEP_LATEST_FILE_VERSIONS"
    archived = xcom(dr, "archive")
    assert set(archived) == {"archived", "archived_instants", "blocked_by"}
    assert archived["archived"] == len(archived["archived_instants"]) >= 1
    # the table, read by hudi-rs: every row once, the latest version
    assert hudi_rows(table) == expected(first, second)
    timeline = t.timeline
    assert timeline.get(up1["instant"]).action == "deltacommit" and timeline.get(planned).action == "commit"
    # asset events: the writes, each with its instant and counts
    events = asset_events(f"hudi:{table}")
    assert [(e["task_id"], e["extra"].get("instant")) for e in events] == [
        ("first", up1["instant"]), ("second", up2["instant"]), ("execute", planned), ("clean", cleaned["instant"])]
    assert events[1]["extra"]["inserts"] == 20 and events[1]["extra"]["updates"] == 20
    assert events[1]["extra"]["action"] == "deltacommit"
