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
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_lake.core.table import Table
from airflow_lake.core.timeline.tokens import entries
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
        value = row.value if row is not None else None
    # what a downstream task pulls: objects come back as JSON text, strings as they are
    return json.loads(value) if isinstance(value, str) and value[:1] in "{[" and value else value


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


def test_ingest_compact_clean_archive_pipeline(airflow_db, spark_env, tmp_path, statsd):
    """upsert (creating a MERGE_ON_READ table) → upsert → schedule → execute (instant by XCom)
    → clean → archive, each a real spark-submit; their outcomes and counts as Airflow metrics."""
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
                   "files_written": up1["files_written"], "replaced_file_groups": 0} and up1["files_written"] >= 1
    assert (up2["inserts"], up2["updates"], up2["deletes"]) == (20, 20, 0) and up2["instant"] > up1["instant"]
    planned = xcom(dr, "schedule")
    assert isinstance(planned, str) and planned > up2["instant"]
    executed = xcom(dr, "execute")
    assert executed["instants"] == [planned] and executed["instant"] == planned and not executed["already_done"]
    # file groups with log files were merged: 40 rows with updates (the 20 new rows' group may have none)
    assert 40 <= executed["records_written"] <= 60 and executed["files_written"] >= 1
    cleaned = xcom(dr, "clean")
    assert cleaned["instant"] and cleaned["files_deleted"] >= 1 and cleaned["policy"] == "KEEP_LATEST_FILE_VERSIONS"
    archived = xcom(dr, "archive")
    assert set(archived) == {"archived", "archived_instants", "blocked_by"}
    assert archived["archived"] == len(archived["archived_instants"]) >= 1
    # the table, read by hudi-rs: every row once, the latest version
    assert hudi_rows(table) == expected(first, second)
    # compacted: the read-optimized view (base files only) already has every update
    assert hudi_rows(table, **{"hoodie.read.use.read_optimized.mode": "true"}) == expected(first, second)
    assert t.timeline.get(planned).action == "commit"
    assert {i.split(".")[0] for i in archived["archived_instants"]} <= {up1["instant"], up2["instant"]}
    # asset events: the writes, each with its instant and counts
    events = asset_events(f"hudi:{table}")
    assert [(e["task_id"], e["extra"].get("instant")) for e in events] == [
        ("first", up1["instant"]), ("second", up2["instant"]), ("execute", planned), ("clean", cleaned["instant"])]
    assert events[1]["extra"]["inserts"] == 20 and events[1]["extra"]["updates"] == 20
    assert events[0]["extra"]["action"] == events[1]["extra"]["action"] == "deltacommit"
    # each job's outcome, duration and counts went to Airflow's metrics (StatsD here)
    for job in ("upsert", "compaction_schedule", "compaction_execute", "clean", "archive"):
        assert statsd.values(f"airflow.lake.{job}.orders.success") == ["1|c"] * (2 if job == "upsert" else 1), job
        assert [v.endswith("|ms") for v in statsd.values(f"airflow.lake.{job}.orders.duration")] == \
            [True] * (2 if job == "upsert" else 1)
    assert statsd.values("airflow.lake.upsert.orders.inserts") == ["40|g", "20|g"]
    assert statsd.values("airflow.lake.compaction_execute.orders.records_written") == \
        [f"{executed['records_written']}|g"]
    assert statsd.values("airflow.lake.clean.orders.files_deleted") == [f"{cleaned['files_deleted']}|g"]
    assert statsd.values("airflow.lake.archive.orders.archived") == [f"{archived['archived']}|g"]


def state_store(dr, task_id: str, key: str = "airflow_lake.job"):
    from airflow.models.task_state_store import TaskStateStoreModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        row = session.scalars(select(TaskStateStoreModel).where(
            TaskStateStoreModel.dag_id == dr.dag_id, TaskStateStoreModel.run_id == dr.run_id,
            TaskStateStoreModel.task_id == task_id, TaskStateStoreModel.key == key)).first()
        return None if row is None else json.loads(row.value)


def try_numbers(dr) -> dict[str, int]:
    from airflow.utils.session import create_session

    with create_session() as session:
        return {ti.task_id: ti.try_number for ti in dr.get_task_instances(session=session)}


RETRY_DAG = """
class LostAfterCommit(UpsertOperator):
    '''First try: the job commits, then the worker is lost before Airflow records anything
    (before the task state store is written). Later tries cannot submit at all: their
    spark-submit binary does not exist.'''

    def submit_job(self, context):
        if context["ti"].try_number > 1:
            self.spark_args = {{"spark_binary": "spark3-submit"}}
        result = super().submit_job(context)
        if context["ti"].try_number == 1:
            raise RuntimeError("worker lost after the job committed")
        return result


class LostAfterSubmit(UpsertOperator):
    '''First try: the job commits and the submission is kept in the task state store, then
    the worker is lost. Later tries cannot submit at all.'''

    def execute(self, context):
        if context["ti"].try_number > 1:
            self.spark_args = {{"spark_binary": "spark3-submit"}}
        result = super().execute(context)
        if context["ti"].try_number == 1:
            raise RuntimeError("worker lost after the task state store was written")
        return result


RETRY = dict(retries=1, retry_delay=timedelta(0), create_if_missing=True, record_key="id", precombine_field="ts")
LostAfterCommit(task_id="lost_after_commit", table_path={a!r}, source={src!r}, **RETRY, **SPARK)
LostAfterSubmit(task_id="lost_after_submit", table_path={b!r}, source={src!r}, table_type="MERGE_ON_READ", **RETRY,
                **SPARK)
"""


def test_a_retried_upsert_returns_the_same_instant_and_writes_once(airflow_db, spark_env, tmp_path):
    import shutil

    assert shutil.which("spark3-submit") is None  # what the retries are given: they cannot submit
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    data = batch([1, 2, 3], ts=5)
    src = source(tmp_path / "landing", "b1", data)
    dag = load_dag(airflow_db, "lake_retry", RETRY_DAG.format(a=a, b=b, src=src))
    dr = dag.test()
    assert states(dr) == {"lost_after_commit": "success", "lost_after_submit": "success"}
    assert try_numbers(dr) == {"lost_after_commit": 2, "lost_after_submit": 2}
    for path, task_id, action in ((a, "lost_after_commit", "commit"), (b, "lost_after_submit", "deltacommit")):
        t = Table.open(path)
        commits = t.timeline.commits().completed().instants
        assert [i.action for i in commits] == [action]  # one commit: nothing written twice
        token = f"lake_retry/{dr.run_id}/{task_id}/-1"
        assert entries(t.storage, token) == [(commits[0].time, action)]  # one attempt ever started
        assert xcom(dr, task_id) == {"instant": commits[0].time, "operation": "upsert", "inserts": 3, "updates": 0,
                                     "deletes": 0, "files_written": 1, "replaced_file_groups": 0}
        assert hudi_rows(path) == expected(data)
    # the first try of lost_after_submit kept its finished submission in the task state store
    stored = state_store(dr, "lost_after_submit")
    assert stored["token"].endswith("/lost_after_submit/-1") and stored["result"]["instant"] == xcom(
        dr, "lost_after_submit")["instant"]
    assert state_store(dr, "lost_after_commit") is None  # lost before it was written: the timeline answered


def test_services_savepoint_rollback_restore(airflow_db, spark_env, tmp_path):
    path = str(tmp_path / "ledger")
    t = Table.create(path, name="ledger", record_key="id", precombine_field="ts")
    first, second, third = batch([1, 2], ts=1), batch([2, 3], ts=2), batch([4], ts=3)
    c1, c2, c3 = (t.write(b).instant for b in (first, second, third))
    dag = load_dag(airflow_db, "lake_services", f"""
        savepoint = SavepointOperator(task_id="savepoint", table_path={path!r}, instant={c1!r}, comments="before",
                                      **SPARK)
        rollback = RollbackOperator(task_id="rollback", table_path={path!r}, instant="{{{{ params.last }}}}",
                                    params={{"last": {c3!r}}}, **SPARK)
        restore = RestoreOperator(task_id="restore", table_path={path!r},
                                  instant="{{{{ ti.xcom_pull(task_ids='savepoint')['instant'] }}}}", **SPARK)
        savepoint >> rollback >> restore
    """)
    dr = dag.test()
    assert states(dr) == {"savepoint": "success", "rollback": "success", "restore": "success"}
    assert xcom(dr, "savepoint") == {"instant": c1, "already_done": False}
    rolled = xcom(dr, "rollback")
    assert rolled["rolled_back"] == c3 and rolled["rolled_back_action"] == "commit" and rolled["files_deleted"] >= 1
    restored = xcom(dr, "restore")
    assert restored["savepoint"] == c1 and restored["rolled_back"] == [c2] and restored["instant"] > rolled["instant"]
    assert hudi_rows(path) == expected(first)
    timeline = Table.open(path).timeline
    assert timeline.get(rolled["instant"]).action == "rollback"
    assert timeline.get(restored["instant"]).action == "restore"
    assert [(e["task_id"], e["extra"]["instant"]) for e in asset_events(f"hudi:{path}")] == [
        ("rollback", rolled["instant"]), ("restore", restored["instant"])]


def test_nothing_to_compact_skips_and_a_busy_plan_fails_the_second_executor(airflow_db, spark_env, tmp_path, capfd):
    from airflow_lake.core.timeline.instant import COMPACTION, Instant, State
    from airflow_lake.core.txn.heartbeat import Heartbeat

    quiet = Table.create(str(tmp_path / "quiet"), name="quiet", record_key="id", precombine_field="ts",
                         table_type="MERGE_ON_READ")
    quiet.write(batch([1, 2]))  # base files only: nothing to compact
    busy = Table.create(str(tmp_path / "busy"), name="busy", record_key="id", precombine_field="ts",
                        table_type="MERGE_ON_READ")
    busy.write(batch([1, 2]))
    busy.write(batch([2], ts=2))
    plan = busy.plan_compaction(max_delta_commits=1).instant
    assert plan
    # another executor runs the plan: inflight, heartbeat alive for the whole test
    busy.timeline.transition(Instant(plan, COMPACTION, State.REQUESTED), State.INFLIGHT)
    beat = Heartbeat(busy.storage, plan, 1000).start()
    dag = load_dag(airflow_db, "lake_guards", f"""
        schedule = CompactionScheduleOperator(task_id="schedule", table_path={quiet.storage.uri!r}, **SPARK)
        execute = CompactionExecuteOperator(task_id="execute", table_path={quiet.storage.uri!r},
                                            instant="{{{{ ti.xcom_pull(task_ids='schedule') }}}}", **SPARK)
        schedule >> execute
        CompactionExecuteOperator(task_id="second_executor", table_path={busy.storage.uri!r}, instant={plan!r},
                                  **SPARK)
    """)
    try:
        dr = dag.test()
    finally:
        beat.stop()
    assert states(dr) == {"schedule": "skipped", "execute": "skipped", "second_executor": "failed"}
    out = capfd.readouterr()
    assert f"compaction {plan} is being executed by another task" in out.out + out.err
    timeline = Table.open(busy.storage.uri).timeline
    assert timeline.actions(COMPACTION).pending().instants == [Instant(plan, COMPACTION, State.INFLIGHT)]
    assert quiet.timeline.actions(COMPACTION).instants == []


# -- arguments, and what is submitted (no Spark) --------------------------------------------
def test_bad_arguments_fail_at_parse_time_naming_the_value(tmp_path):
    from airflow_lake.core.errors import InvalidOptionError
    from airflow_lake.operators import (
        ArchiveOperator,
        CleanOperator,
        CompactionExecuteOperator,
        CompactionScheduleOperator,
        UpsertOperator,
    )

    path = str(tmp_path / "t")
    cases = [
        (lambda: UpsertOperator(task_id="u", table_path=path, source="s", operation="merge"), "operation.*'merge'"),
        (lambda: UpsertOperator(task_id="u", table_path=path, source="s", table_type="cows"), "table_type.*'cows'"),
        (lambda: UpsertOperator(task_id="u", table_path=path, source="s", source_format="xls"), "source_format"),
        (lambda: UpsertOperator(task_id="u", table_path=path, source="s", create_if_missing=True), "needs record_key"),
        (lambda: CompactionScheduleOperator(task_id="s", table_path=path, strategy="SOMETIMES"), "strategy"),
        (lambda: CompactionExecuteOperator(task_id="e", table_path=path, order="RANDOM"), "order.*'RANDOM'"),
        (lambda: CompactionExecuteOperator(task_id="e", table_path=path, max_plans=0), "max_plans.*at least 1"),
        (lambda: CleanOperator(task_id="c", table_path=path, policy="KEEP_ALL"), "policy.*'KEEP_ALL'"),
        (lambda: ArchiveOperator(task_id="a", table_path=path, min_commits=5, max_commits=3), "greater than"),
        (lambda: UpsertOperator(task_id="u", table_path="rel/t", source="s"), "relative or templated"),
        (lambda: UpsertOperator(task_id="u", table_path="{{ params.t }}", source="s"), "relative or templated"),
    ]
    for make, message in cases:
        with pytest.raises(InvalidOptionError, match=message):
            make()
    # named explicitly, or none: a relative or templated table is fine
    assert UpsertOperator(task_id="u", table_path="rel/t", source="s", asset=False).outlets == []
    assert CleanOperator(task_id="c", table_path=path).outlets[0].uri == f"hudi:{path}"
    assert ArchiveOperator(task_id="a", table_path=path).outlets == []  # no data changes: no event by default
    assert CleanOperator(task_id="c", table_path=path, dry_run=True).outlets == []


def test_bad_rendered_arguments_fail_before_submitting(airflow_db, tmp_path, monkeypatch, capfd, statsd):
    """Checked once templates are rendered, before any spark-submit (none is on PATH here)."""
    monkeypatch.setenv("PATH", "/nonexistent")
    path = str(tmp_path / "t")
    t = Table.create(path, name="t", record_key="id", precombine_field="ts")
    t.write(batch([1]))
    dag = load_dag(airflow_db, "lake_bad_args", f"""
        RollbackOperator(task_id="rollback", table_path={path!r}, instant="{{{{ 'yesterday' }}}}")
        UpsertOperator(task_id="missing", table_path={str(tmp_path / 'nothing')!r}, source={path!r})
        UpsertOperator(task_id="other_type", table_path={path!r}, source={path!r}, table_type="MERGE_ON_READ")
        UpsertOperator(task_id="other_keys", table_path={path!r}, source={path!r}, create_if_missing=True,
                       record_key=["uuid"], precombine_field="ts", partition_fields=["day"])
        CompactionExecuteOperator(task_id="plans", table_path={path!r}, max_plans="{{{{ 'many' }}}}")
    """)
    dr = dag.test()
    assert set(states(dr).values()) == {"failed"}
    out = capfd.readouterr()
    text = out.out + out.err
    assert f"RollbackOperator rollback: table {path}: instant 'yesterday' is not an instant time" in text
    assert f"table {tmp_path / 'nothing'} does not exist; pass create_if_missing=True" in text
    assert f"table {path}: settings given that contradict the table's own (table_type='MERGE_ON_READ' but the " \
           "table has 'COPY_ON_WRITE')" in text
    assert "(record_key='uuid' but the table has 'id'; partition_fields='day' but the table has 'none')" in text
    assert "max_plans must be a whole number of at least 1, got 'many'" in text
    assert len(t.timeline.instants) == 1 and not (tmp_path / "nothing").exists()
    # each failure counted in Airflow's metrics
    assert statsd.values("airflow.lake.upsert.t.failure") == ["1|c", "1|c"]
    assert statsd.values("airflow.lake.upsert.nothing.failure") == ["1|c"]
    assert statsd.values("airflow.lake.rollback.t.failure") == ["1|c"]


def test_the_submitted_command_and_its_options(tmp_path, monkeypatch):
    from airflow_lake.hooks import LakeHook
    from airflow_lake.hooks.submit import LakeJobError
    from airflow_lake.spark import job_path, package_zip

    extra = {"base_path": str(tmp_path), "storage_options": {"region": "eu-west-1", "access_key": "0123"},
             "table_options": {"hoodie.cleaner.commits.retained": 3, "hoodie.metadata.enable": False}}
    monkeypatch.setenv("AIRFLOW_CONN_LAKE_CMD", json.dumps({"conn_type": "lake", "extra": extra}))
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_CMD", json.dumps({"conn_type": "spark", "host": "local[3]",
                                                             "extra": {"deploy-mode": "client"}}))
    monkeypatch.delenv("PYSPARK_PYTHON", raising=False)
    monkeypatch.delenv("PYSPARK_DRIVER_PYTHON", raising=False)
    submission = LakeHook("lake_cmd").submission(
        "clean", "sales", ["--retained", "2"], token="d/r/t/-1", spark_conn_id="spark_cmd",
        spark_conf={"spark.executor.memory": "1g"}, spark_args={"num_executors": 2, "py_files": "extra.zip"},
        table_options={"hoodie.cleaner.commits.retained": 4})
    command = submission.spark_hook()._build_spark_submit_command(str(job_path("clean")))
    text = " ".join(command)
    assert command[:3] == ["spark-submit", "--master", "local[3]"]
    assert "--conf spark.executor.memory=1g" in text and "--num-executors 2" in text and "--deploy-mode client" in text
    assert f"--py-files {package_zip()},extra.zip" in text
    assert command[command.index(str(job_path("clean"))) + 1:] == [
        "--table", str(tmp_path / "sales"), "--option", "hoodie.cleaner.commits.retained=4",
        "--option", "hoodie.metadata.enable=false", "--option", 'region="eu-west-1"',
        "--run-token", "d/r/t/-1", "--retained", "2",
        "--result-file", str(submission.result_file)]  # the access key travels in the environment
    # spark-submit's environment (client mode): this Python and the secret options, not on the command line
    assert submission.env == {"PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
                              "AIRFLOW_LAKE_SECRET_OPTIONS": json.dumps({"access_key": '"0123"'})}
    assert "env_vars" not in submission.arguments and "0123" not in text
    assert not submission.tracks_driver()
    with pytest.raises(ValueError, match="no spark job 'vacuum'"):
        LakeHook("lake_cmd").submission("vacuum", "sales", spark_conn_id="spark_cmd")
    # a standalone cluster-mode driver outlives spark-submit: only the operators track it
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_CLUSTER", json.dumps({"conn_type": "spark", "host": "spark://127.0.0.1",
                                                                 "port": 7077, "extra": {"deploy-mode": "cluster"}}))
    cluster = LakeHook("lake_cmd").submission("clean", "sales", spark_conn_id="spark_cluster")
    assert cluster.tracks_driver() and cluster.env == {} and cluster.result_file is None  # no worker Python forced
    assert cluster.arguments["env_vars"] is None
    with pytest.raises(LakeJobError, match="tracked cluster-mode driver"):
        LakeHook("lake_cmd").submit_job("clean", "sales", spark_conn_id="spark_cluster")


def test_hook_returns_a_committed_token_and_waits_for_a_live_attempt(tmp_path, monkeypatch):
    """`LakeHook.submit_job` submits nothing for a token already committed (no spark-submit is
    on PATH here), and waits while an attempt with the token has a live heartbeat instead of
    submitting (or rolling it back); once the heartbeat is gone the caller may submit."""
    import threading

    from airflow_lake.core.timeline.instant import Instant, State
    from airflow_lake.core.txn.heartbeat import FOLDER, Heartbeat
    from airflow_lake.hooks import LakeHook
    from airflow_lake.hooks.submit import LakeJobError

    monkeypatch.setenv("PATH", "/nonexistent")
    path = str(tmp_path / "t")
    t = Table.create(path, name="t", record_key="id", precombine_field="ts")
    done = t.write(batch([1, 2]), extra_metadata={"airflow_lake.token": "d/r/up/-1"}).instant
    hook = LakeHook()
    result = hook.submit_job("upsert", path, ["--source", "x"], token="d/r/up/-1")
    assert (result["instant"], result["action"], result["inserts"], result["already_done"]) == (
        done, "commit", 2, True)

    # another try's job still runs with the token: pending, heartbeat alive
    with t.lock():
        timeline = t.timeline
        running = t.new_instant_time(timeline)
        timeline.create(Instant(running, "commit", State.REQUESTED), token="d/r/up2/-1")
        timeline.transition(Instant(running, "commit", State.REQUESTED), State.INFLIGHT)
    beat = Heartbeat(t.storage, running, 200).start()
    assert hook.live_attempt(path, "d/r/up2/-1") == running
    waited = threading.Event()

    def stop_later():
        while not waited.is_set():  # until the hook has looked at least twice
            time.sleep(0.05)
        beat.stop()

    polls = []
    original = hook.live_attempt

    def counting(*args, **kwargs):
        polls.append(original(*args, **kwargs))
        if len(polls) >= 2:
            waited.set()
        return polls[-1]

    hook.live_attempt = counting
    stopper = threading.Thread(target=stop_later)
    stopper.start()
    assert hook.await_attempt(path, "d/r/up2/-1", poll=0.1) is None  # the attempt died: the caller submits
    stopper.join()
    assert polls[0] == running and polls[-1] is None
    assert not t.storage.exists(f"{FOLDER}/{running}")
    assert t.timeline.get(running).state == State.INFLIGHT  # left for the job's own repair, not rolled back here
    hook.live_attempt = original
    beat = Heartbeat(t.storage, running, 200).start()  # alive again, for longer than the caller waits
    try:
        with pytest.raises(LakeJobError, match=f"instant {running} of run token d/r/up2/-1 is still running"):
            hook.await_attempt(path, "d/r/up2/-1", poll=0.1, timeout=0.3)
    finally:
        beat.stop()
