"""The maintenance manager's DAGs under `dag.test()` on a real MERGE_ON_READ table with a dead
writer and a pending compaction plan: a dry run changes nothing; real runs roll the dead
write back, execute the old plan, schedule and execute a new one, clean and archive, each a
real `spark-submit` (local[1]); the backlog check fails naming the stale write; hudi-rs reads
every row afterwards."""

from __future__ import annotations

import os
import time

import pytest

from airflow_lake.core.errors import InvalidOptionError
from airflow_lake.core.table import Table
from airflow_lake.core.txn.heartbeat import Heartbeat
from tests.core.test_failed_writes import FAST, Crash, CrashingStorage
from tests.provider.conftest import batch
from tests.provider.test_operators import SPARK_CONF, hudi_rows, spark_env, states, xcom  # noqa: F401

STEPS = {"schedule": "schedule_compaction", "clean": "clean", "archive": "archive"}


def _listing(path: str) -> list[str]:
    return sorted(os.path.relpath(os.path.join(root, f), path) for root, _, files in os.walk(path) for f in files
                  if ".heartbeat" not in root)


def _dag(airflow_db, config: dict, tmp_path, name: str = "t"):
    """The table's DAG from a DAG file in the DAGs folder (dag.test() syncs that bundle) that
    builds the DAGs from `config` written as YAML."""
    import importlib.util

    import yaml

    prefix = f"maint_{time.monotonic_ns()}_"
    (tmp_path / "lake.yaml").write_text(yaml.safe_dump(config))
    path = airflow_db / "dags" / f"{prefix}.py"
    path.write_text("from airflow_lake.operators.maintenance import maintenance_dags\n"
                    f"globals().update(maintenance_dags({str(tmp_path / 'lake.yaml')!r}, dag_id_prefix={prefix!r}))\n")
    spec = importlib.util.spec_from_file_location(prefix, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, f"{prefix}{name}")


def test_dry_run_then_real_runs_do_what_the_plan_says(airflow_db, spark_env, tmp_path):  # noqa: F811
    path = str(tmp_path / "t")
    t = Table.create(path, name="t", table_type="MERGE_ON_READ", record_key="id", precombine_field="ts",
                     options=FAST)
    t.write(batch([1, 2, 3]))
    t.write(batch([1], ts=2))
    old_plan = t.schedule_compaction(max_delta_commits=1)
    for ts in (3, 4):
        t.write(batch([2, 4], ts=ts))
    dying = Table.open(path, options=FAST)
    dying.storage = CrashingStorage(path, crash_at=5)
    with pytest.raises(Crash):
        dying.write(batch([9], ts=9))
    [stale] = [i.time for i in t.timeline.pending().instants if i.action == "deltacommit"]
    Heartbeat(t.storage, stale, 50).beat()
    time.sleep(0.3)
    config = {"tables": {"t": {
        "path": path, "schedule": None, "table_options": FAST, "spark_conf": SPARK_CONF,
        "compaction": {"max_delta_commits": 2}, "clean": {"retained": 1},
        "archive": {"min_commits": 2, "max_commits": 3}, "thresholds": {"stale_instants": 0}}}}
    dag = _dag(airflow_db, config, tmp_path)
    before = _listing(path)

    dry = dag.test(run_conf={"dry_run": True})
    plan = xcom(dry, "plan")
    assert plan["dry_run"] and plan["rollback"] == [stale] and plan["execute"] == [old_plan]
    assert _listing(path) == before  # nothing ran
    s = states(dry)
    assert {s[k] for k in ("rollback_stale", "execute_pending_plans", "schedule_compaction", "execute_new_plan",
                           "clean", "archive")} == {"skipped"} and s["check_backlog"] == "failed"

    first = dag.test(run_conf={"dry_run": False})
    plan, s = xcom(first, "plan"), states(first)
    assert plan["rollback"] == [stale] and plan["execute"] == [old_plan] and not plan["dry_run"]
    # the write after the old plan made a file group no plan holds: a new plan is due too
    assert plan["schedule"]["due"] and "1 file slices to compact" in plan["schedule"]["reason"]
    assert s["rollback_stale"] == s["execute_pending_plans"] == s["schedule_compaction"] == s["execute_new_plan"] \
        == "success"
    assert s["check_backlog"] == "failed" and first.state == "failed"  # the stale write was over its threshold
    assert plan["breaches"] and f"stale_instants is 1 ({stale})" in plan["breaches"][0]
    for step, task in STEPS.items():
        assert (s[task] == "success") == plan[step]["due"], (step, s[task], plan[step])
    new_plan = xcom(first, "schedule_compaction")
    assert xcom(first, "execute_new_plan")["instants"] == [new_plan] and new_plan > old_plan
    timeline = Table.open(path).timeline
    assert not timeline.pending().instants
    assert [i.time for i in timeline.actions("commit").completed()] == [old_plan, new_plan]
    assert hudi_rows(path) == [(1, 2, "v1"), (2, 4, "v2"), (3, 1, "v3"), (4, 4, "v4")]

    second = dag.test(run_conf={"dry_run": False})
    plan, s = xcom(second, "plan"), states(second)
    assert s["check_backlog"] == "success" and second.state == "success"
    assert plan["clean"]["due"] and plan["archive"]["due"] and not plan["schedule"]["due"]
    for step, task in STEPS.items():
        assert (s[task] == "success") == plan[step]["due"], (step, s[task], plan[step])
    assert s["rollback_stale"] == s["execute_pending_plans"] == s["execute_new_plan"] == "skipped"
    assert xcom(second, "clean")["files_deleted"] > 0 and xcom(second, "archive")["archived"] > 0
    assert hudi_rows(path) == [(1, 2, "v1"), (2, 4, "v2"), (3, 1, "v3"), (4, 4, "v4")]
    assert not Table.open(path).timeline.pending().instants


def test_a_bad_config_fails_when_the_dags_are_built_naming_the_table(tmp_path):
    from airflow_lake.operators.maintenance import maintenance_dags

    bad = tmp_path / "lake.yaml"
    bad.write_text("tables:\n  trips:\n    path: /lake/trips\n    clean: {retain: 3}\n")
    with pytest.raises(InvalidOptionError, match=rf"maintenance config {bad}: table 'trips': clean: unknown key"):
        maintenance_dags(bad)
    bad.write_text("tables: [oops\n")
    with pytest.raises(InvalidOptionError, match="cannot be read: ParserError"):
        maintenance_dags(bad)
    # a table pasted twice under one name: YAML keys are unique, the first table would have no DAG
    bad.write_text("tables:\n  orders: {path: /lake/orders}\n  orders: {path: /lake/orders_eu}\n")
    with pytest.raises(InvalidOptionError, match="key 'orders' is given twice in one mapping"):
        maintenance_dags(bad)
    good = tmp_path / "good.yaml"
    good.write_text("tables:\n  orders: {path: /lake/orders}\n")
    with pytest.raises(InvalidOptionError, match="pool must be a pool's name, got 4"):
        maintenance_dags(good, pool=4)
    with pytest.raises(InvalidOptionError, match="dry_run must be True or False, got 'false'"):
        maintenance_dags(good, dry_run="false")


def test_every_spark_job_runs_in_the_lake_pool_and_a_table_compacts_one_plan_at_a_time(tmp_path):
    from airflow_lake.operators.base import LakeJobOperator
    from airflow_lake.operators.maintenance import maintenance_dags

    dags = maintenance_dags({"pool": "lake_spark", "base_path": str(tmp_path),
                             "tables": {"a": {"path": "a"}, "b": {"path": "s3://bucket/b", "schedule": "@daily"}}})
    assert sorted(dags) == ["lake_maintenance__a", "lake_maintenance__b"]
    for dag in dags.values():
        assert dag.max_active_runs == 1 and dag.params["dry_run"] is False
        spark = [t for t in dag.tasks if isinstance(t, LakeJobOperator) or t.task_id in (
            "rollback_stale", "execute_pending_plans")]
        assert len(spark) == 6 and {t.pool for t in spark} == {"lake_spark"}
        assert {t.pool for t in dag.tasks if t not in spark} == {"default_pool"}  # reads, no Spark
        for task_id in ("execute_pending_plans", "schedule_compaction", "execute_new_plan"):
            assert dag.get_task(task_id).max_active_tis_per_dag == 1
    assert dags["lake_maintenance__a"].get_task("clean").table_path == str(tmp_path / "a")
    assert dags["lake_maintenance__b"].schedule == "@daily"
