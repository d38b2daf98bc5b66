"""A run that changed nothing emits no Asset event and wakes no downstream DAG; a real write
does, and so does an insert_overwrite_table of an empty source, which writes no record yet
empties the table (issue 23, item 19). One real `dag.test()` with five spark-submit runs
(local[1])."""

from __future__ import annotations

import textwrap

from airflow_lake.core.table import Table
from airflow_lake.hooks import table_asset
from tests.conftest import hudi_read
from tests.dags.conftest import unpause
from tests.provider.conftest import batch
from tests.provider.test_operators import SPARK_CONF, load_dag, source, spark_env, states, xcom  # noqa: F401


def queued_and_events(uri: str) -> tuple[list[str], list[tuple[str, dict]]]:
    """The DAGs queued to run on Asset `uri`, and its events (source task, extra)."""
    from airflow.models.asset import AssetDagRunQueue, AssetEvent, AssetModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        asset_id = session.scalar(select(AssetModel.id).where(AssetModel.uri == uri))
        queued = session.scalars(select(AssetDagRunQueue.target_dag_id).where(
            AssetDagRunQueue.asset_id == asset_id)).all()
        events = session.scalars(select(AssetEvent).where(AssetEvent.asset_id == asset_id)
                                 .order_by(AssetEvent.id)).all()
        return list(queued), [(e.source_task_id, dict(e.extra or {})) for e in events]


def test_no_op_runs_emit_no_asset_event_and_a_write_does(airflow_db, spark_env, tmp_path):  # noqa: F811
    cow = Table.create(str(tmp_path / "cow"), name="cow", record_key="id", precombine_field="ts")
    cow.write(batch([1, 2]))
    mor = Table.create(str(tmp_path / "mor"), name="mor", record_key="id", precombine_field="ts",
                       table_type="MERGE_ON_READ")
    mor.write(batch([1, 2]))
    empty = source(tmp_path / "landing", "empty", batch([1]).slice(0, 0))
    one = source(tmp_path / "landing", "one", batch([3], ts=2))
    cow_uri, mor_uri = table_asset(cow.storage.uri).uri, table_asset(mor.storage.uri).uri
    (airflow_db / "dags" / "lake_noop_consumer.py").write_text(textwrap.dedent(f"""
        from datetime import datetime

        from airflow.providers.standard.operators.empty import EmptyOperator
        from airflow.sdk import DAG, Asset

        for name, uri in (("cow", {cow_uri!r}), ("mor", {mor_uri!r})):
            with DAG(f"lake_noop_on_{{name}}", schedule=[Asset(uri=uri, name=uri)],
                     start_date=datetime(2024, 1, 1), catchup=False):
                EmptyOperator(task_id="consume")
    """))
    dag = load_dag(airflow_db, "lake_noop", f"""
        empty = UpsertOperator(task_id="empty", table_path={cow.storage.uri!r}, source={empty!r}, **SPARK)
        clean = CleanOperator(task_id="clean", table_path={cow.storage.uri!r}, **SPARK)
        execute = CompactionExecuteOperator(task_id="execute", table_path={mor.storage.uri!r}, **SPARK)
        real = UpsertOperator(task_id="real", table_path={cow.storage.uri!r}, source={one!r}, **SPARK)
        overwrite = UpsertOperator(task_id="overwrite", table_path={cow.storage.uri!r}, source={empty!r},
                                   operation="insert_overwrite_table", **SPARK)
        empty >> clean >> execute >> real >> overwrite
    """)
    unpause("lake_noop_on_cow")
    unpause("lake_noop_on_mor")
    dr = dag.test()
    assert states(dr) == dict.fromkeys(["empty", "clean", "execute", "real", "overwrite"], "success")
    nothing = xcom(dr, "empty")
    assert (nothing["inserts"], nothing["updates"], nothing["deletes"]) == (0, 0, 0)
    assert xcom(dr, "clean")["instant"] is None and xcom(dr, "execute")["instants"] == []
    written = xcom(dr, "real")
    assert written["inserts"] == 1

    queued, events = queued_and_events(cow_uri)
    emptied = xcom(dr, "overwrite")
    assert (emptied["inserts"], emptied["deletes"], emptied["replaced_file_groups"]) == (0, 0, 1)
    assert hudi_read(cow.storage.uri).num_rows == 0
    assert [(task, extra["instant"]) for task, extra in events] == [("real", written["instant"]),
                                                                     ("overwrite", emptied["instant"])]
    assert events[1][1]["replaced_file_groups"] == 1
    assert queued == ["lake_noop_on_cow"]
    assert queued_and_events(mor_uri) == ([], [])  # the compaction with nothing pending woke nobody
