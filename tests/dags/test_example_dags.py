"""Every example DAG of `dags/` under `dag.test()` on real tables: task states, XComs, and the
resulting table read by hudi-rs. The lake tasks run real `spark-submit` jobs on `local[2]`."""

from __future__ import annotations

import os

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from airflow_lake.core import Table
from airflow_lake.demo import expected_trips, land_trips, trips_batch
from tests.conftest import hudi_read
from tests.dags.conftest import load_example, states, unpause, xcom


def trips_table(path: str, batches: int) -> Table:
    """The `trips` table as the ingestion DAG makes it, written by the core: one delta commit per batch."""
    table = Table.create(path, name="trips", table_type="MERGE_ON_READ", record_key="uuid", precombine_field="ts",
                         partition_fields=["city"])
    for b in range(1, batches + 1):
        table.write(trips_batch(b))
    return table


def fares(table: pa.Table) -> dict[str, float]:
    return dict(zip(table["uuid"].to_pylist(), table["fare"].to_pylist(), strict=True))


def asset_records(uri: str) -> tuple[list[dict], list[str]]:
    """Extras of the events on the Asset `uri`, and the DAGs queued to run on them."""
    from airflow.models.asset import AssetDagRunQueue, AssetEvent, AssetModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        asset_id = session.scalar(select(AssetModel.id).where(AssetModel.uri == uri))
        extras = session.scalars(select(AssetEvent.extra).where(AssetEvent.asset_id == asset_id)).all()
        queued = session.scalars(select(AssetDagRunQueue.target_dag_id).where(
            AssetDagRunQueue.asset_id == asset_id)).all()
    return list(extras), list(queued)


def test_ingest_dag_upserts_the_landed_files_and_emits_an_asset_event(lake):
    landing = lake / "landing" / "trips"
    land_trips(str(landing), batches=2)  # 60 keys; 20 of batch 1 updated by batch 2
    unpause("lake_on_new_data")
    dag = load_example("lake_ingest")
    run = dag.test()
    assert run.state == "success", states(run)
    assert states(run) == {"wait_for_files": "success", "claim": "success", "upsert": "success"}
    claimed = xcom(run, "claim")
    assert sorted(os.listdir(claimed)) == ["batch_1.parquet", "batch_2.parquet"] and os.listdir(landing) == []

    path = str(lake / "trips")
    result = xcom(run, "upsert")
    table = Table.open(path)
    assert table.config.table_type == "MERGE_ON_READ" and table.config.partition_fields == ["city"]
    [commit] = table.timeline.commits().completed()
    assert (commit.time, commit.action) == (result["instant"], "deltacommit")
    expected = expected_trips(2)  # both files in one commit: combined by ts, the later batch wins
    assert (result["operation"], result["inserts"], result["updates"], result["deletes"]) == ("upsert", 60, 0, 0)
    assert fares(hudi_read(path)) == expected
    assert fares(table.read()) == expected

    extras, queued = asset_records(f"hudi:{path}")
    assert [e["instant"] for e in extras] == [result["instant"]] and extras[0]["inserts"] == 60
    assert queued == ["lake_on_new_data"]  # the data-aware DAG is due


def test_compaction_dag_executes_the_plan_it_scheduled(lake):
    path = str(lake / "trips")
    table = trips_table(path, 3)  # batches 2 and 3 update keys: log files
    run = load_example("lake_compaction").test()
    assert run.state == "success", states(run)
    assert states(run) == {"schedule": "success", "execute": "success"}
    plan = str(xcom(run, "schedule"))  # a bare instant time; Airflow's XCom JSON reads it back as a number
    executed = xcom(run, "execute")
    assert executed["instants"] == [plan] and executed["instant"] == plan
    completed = table.timeline.commits().completed()
    assert (completed.last.time, completed.last.action) == (plan, "commit")
    expected = expected_trips(3)
    assert fares(hudi_read(path)) == expected
    # every slice was compacted: base files alone hold the latest values
    assert fares(hudi_read(path, **{"hoodie.read.use.read_optimized.mode": "true"})) == expected


def test_maintenance_dag_cleans_then_archives(lake):
    path = str(lake / "trips")
    table = trips_table(path, 3)
    table.run_compaction(table.schedule_compaction(max_delta_commits=1))
    expected = expected_trips(3)
    for b in range(4, 34):  # 30 small commits: slices before the compaction fall out of the retained 10
        batch = trips_batch(b, rows=6)
        table.write(batch)
        expected.update(fares(batch))
    active_before = [i.time for i in table.timeline]

    run = load_example("lake_maintenance").test()
    assert run.state == "success", states(run)
    assert states(run) == {"clean": "success", "archive": "success"}
    cleaned, archived = xcom(run, "clean"), xcom(run, "archive")
    clean = table.timeline.actions("clean").completed().last
    assert cleaned["instant"] == clean.time and cleaned["files_deleted"] == cleaned["files_planned"] > 0
    assert archived["archived"] == len(archived["archived_instants"]) > 0
    assert [f"{i.time}.{i.action}" for i in table.archived_timeline.completed()] == archived["archived_instants"]
    assert [i.time for i in table.timeline][:1] != active_before[:1]
    assert fares(hudi_read(path)) == expected


def test_maintenance_manager_example_plans_each_table_of_its_yaml(lake):
    """`dags/lake_maintenance_manager.py` with `dags/lake_tables.yaml`: one DAG per table, under
    `$AIRFLOW_LAKE_BASE`; a dry run of `trips` (3 delta commits, trigger at 2) decides a
    compaction and runs nothing."""
    path = str(lake / "trips")
    table = trips_table(path, 3)
    before = [f"{i.time}.{i.action}.{i.state.name}" for i in table.timeline]
    dag = load_example("lake_maintenance__trips", "lake_maintenance_manager")
    assert load_example("lake_maintenance__trips_daily", "lake_maintenance_manager").schedule == "@daily"
    run = dag.test(run_conf={"dry_run": True})
    plan = xcom(run, "plan")
    assert plan["table"] == path and plan["dry_run"] and plan["schedule"]["due"]
    assert "trigger NUM_COMMITS holds: 3 delta commits" in plan["schedule"]["reason"]
    assert states(run)["schedule_compaction"] == "skipped" and states(run)["check_backlog"] == "success"
    assert [f"{i.time}.{i.action}.{i.state.name}" for i in Table.open(path).timeline] == before


def test_on_new_data_dag_reports_each_commit_once(lake):
    table = trips_table(str(lake / "trips"), 2)
    dag = load_example("lake_on_new_data")
    assert [a.uri for a in dag.timetable.asset_condition.objects] == [f"hudi:{lake / 'trips'}"]

    first = dag.test()
    assert first.state == "success", states(first)
    report = xcom(first, "summarize")
    commits = [i.time for i in table.timeline.commits().completed()]
    assert (report["start"], report["end"], report["rows"]) == (None, commits[-1], 60)
    summary = pq.read_table(report["report"])
    theirs = hudi_read(str(lake / "trips"))
    for row in summary.to_pylist():
        mine = theirs.filter(pc.equal(theirs["city"], row["city"]))
        assert row["fare_count"] == mine.num_rows and abs(row["fare_sum"] - pc.sum(mine["fare"]).as_py()) < 1e-6

    third = table.write(trips_batch(3)).instant
    second = dag.test()
    assert second.state == "success", states(second)
    report = xcom(second, "summarize")
    assert (report["start"], report["end"], report["rows"]) == (commits[-1], third, 40)  # only batch 3's rows
    assert pc.sum(pq.read_table(report["report"])["fare_count"]).as_py() == 40

    # an event that brought no data commit (a compaction's, a clean's): the run is skipped when
    # the sensor times out (half a minute in the DAG; a second here: no test waits for time)
    table.run_compaction(table.schedule_compaction(max_delta_commits=1))
    sensor = dag.get_task("new_commits")
    sensor.timeout, sensor.poke_interval = 1, 0.2
    idle = dag.test()
    assert idle.state == "success" and states(idle) == {"new_commits": "skipped", "summarize": "skipped"}
