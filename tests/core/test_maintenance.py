"""The maintenance manager's policies and decisions (`airflow_lake.core.maintenance`): configs read
with every mistake named, and what `plan_maintenance` decides checked against what the table
services then do on real tables."""

from __future__ import annotations

import time
from dataclasses import replace

import pyarrow as pa
import pytest

from airflow_lake.core.errors import InvalidOptionError
from airflow_lake.core.health import table_health
from airflow_lake.core.maintenance import plan_maintenance, policies_from_config, table_policy
from airflow_lake.core.table import Table
from airflow_lake.core.txn.heartbeat import Heartbeat
from tests.core.test_failed_writes import FAST, Crash, CrashingStorage


def _mor(path: str) -> Table:
    return Table.create(path, name="t", table_type="MERGE_ON_READ", record_key="id", precombine_field="ts",
                        partition_fields="p", options=FAST)


def _rows(ts: int) -> pa.Table:
    return pa.table({"id": ["a", "b"], "ts": [ts, ts], "p": ["x", "y"]})


def test_a_config_gives_each_table_its_entry_over_the_defaults():
    config = {"defaults": {"schedule": "@daily", "compaction": {"max_delta_commits": 3, "max_plans": 2},
                           "clean": {"retained": 4}, "thresholds": {"stale_instants": 0}},
              "tables": {"trips": {"path": "/lake/trips", "compaction": {"trigger": "num_or_time"}},
                         "orders": {"path": "s3://b/orders", "clean": False, "schedule": None}}}
    trips, orders = policies_from_config(config)
    assert (trips.name, trips.path, trips.schedule) == ("trips", "/lake/trips", "@daily")
    assert (trips.compaction.trigger, trips.compaction.max_delta_commits, trips.compaction.max_plans) == \
        ("NUM_OR_TIME", 3, 2)
    assert trips.clean.retained == 4 and trips.thresholds == {"stale_instants": 0}
    assert orders.schedule is None and not orders.clean.enabled and orders.compaction.max_delta_commits == 3
    options = trips.service_options()
    assert options["hoodie.compact.inline.trigger.strategy"] == "NUM_OR_TIME"
    assert options["hoodie.cleaner.commits.retained"] == "4" and options["hoodie.keep.max.commits"] == "30"


@pytest.mark.parametrize("config, message", [
    ({"tables": {}}, "'tables' must map"),
    ({"tables": {"t": {"path": "/a"}}, "tabels": 1}, r"unknown key\(s\) \['tabels'\]"),
    ({"tables": {"t": {}}}, r"table 't': 'path' .* is required"),
    ({"tables": {"t": {"path": "/a", "compation": {}}}}, r"table 't': unknown key\(s\) \['compation'\]"),
    ({"tables": {"t": {"path": "/a", "compaction": {"trigger": "SOMETIMES"}}}}, "SOMETIMES"),
    ({"tables": {"t": {"path": "/a", "compaction": {"max_delta_commits": 0}}}}, "max_delta_commits must be"),
    ({"tables": {"t": {"path": "/a", "clean": {"policy": "KEEP_ALL"}}}}, "KEEP_ALL"),
    ({"tables": {"t": {"path": "/a", "archive": {"min_commits": 5, "max_commits": 5}}}}, "below max_commits"),
    ({"tables": {"t": {"path": "/a", "clean": {"retained": 20}}}}, r"min_commits \(20\) must be above clean.retained"),
    ({"tables": {"t": {"path": "/a", "archive": {"min_commits": 8, "max_commits": 12}}}},
     r"min_commits \(8\) must be above clean.retained \(10\)"),
    ({"tables": {"t": {"path": "/a", "thresholds": {"backlog_size": 3}}}}, "'backlog_size' is not a health figure"),
    ({"tables": {"t": {"path": "/a", "thresholds": {"log_files": "many"}}}}, "must be a number"),
    ({"tables": {"t": {"path": "/a"}, "u": {"path": "/a"}}}, "same path /a"),
    # one table however its path is spelled; keys and limits refused when the file is read
    ({"tables": {"t": {"path": "/lake/t"}, "u": {"path": "/lake/./t/"}}}, "same path /lake/./t/"),
    ({"tables": {"t": {"path": "/lake/t"}, "u": {"path": "file:///lake/t"}}}, "same path file:///lake/t"),
    ({"tables": {"t": {"path": "s3://b/lake/t"}, "u": {"path": "S3://b/lake//t/"}}}, "same path S3://b/lake//t/"),
    ({"base_path": "/lake", "tables": {"t": {"path": "/lake/t"}, "u": {"path": "t"}}}, "same path t"),
    ({"tables": {"t": {"path": "/a", "table_options": {"foo": 1}}}}, "table_options key 'foo' is not a hoodie"),
    ({"tables": {"t": {"path": "/a", "storage_options": {"hoodie.x": 1}}}}, "storage_options key 'hoodie.x' is a"),
    ({"tables": {"t": {"path": "/a", "thresholds": {"stale_instants": -1}}}}, "must be a number of at least 0"),
    ({"tables": {"t": {"path": "/a", "schedule": "@hourlyy"}}}, "schedule '@hourlyy' is neither"),
    ({"tables": {"t": {"path": "/a", "schedule": "61 25 * * *"}}}, "schedule '61 25 \\* \\* \\*' is neither"),
    ({"dag_id_prefix": "lake maint", "tables": {"t": {"path": "/a"}}}, "dag_id_prefix 'lake maint' must be"),
    ({"tables": {"t": {"path": "/a", "spark_conf": {"spark.driver": {"memory": "2g"}}}}},
     "spark_conf.spark.driver must be a single value"),
    ({"tables": {"t": {"path": "/a", "schedule": "every hour"}}}, "nor a cron expression"),
    ({"tables": {"bad name": {"path": "/a"}}}, "table name 'bad name'"),
    ({"tables": {"t": {"path": "/a", "rollback_stale": "yes"}}}, "rollback_stale must be true or false"),
    # the file's own keys: a quoted "false" would have made every DAG a dry run
    ({"dry_run": "false", "tables": {"t": {"path": "/a"}}}, "dry_run must be true or false, got 'false'"),
    ({"pool": 4, "tables": {"t": {"path": "/a"}}}, "pool must be a non-empty string, got 4"),
    ({"dag_id_prefix": ["x"], "tables": {"t": {"path": "/a"}}}, "dag_id_prefix must be a non-empty string"),
    ({"tags": {"a": 1}, "tables": {"t": {"path": "/a"}}}, "tags must be a string or a list of strings"),
])
def test_every_mistake_in_a_config_is_named(config, message):
    with pytest.raises(InvalidOptionError, match=message):
        policies_from_config(config, "lake.yaml")


def test_a_plan_says_what_is_due_and_the_services_agree(tmp_path):
    path = str(tmp_path / "t")
    t = _mor(path)
    for ts in range(3):
        t.write(_rows(ts))
    policy = table_policy("t", {"path": path, "table_options": FAST,
                                "compaction": {"max_delta_commits": 5}, "clean": {"retained": 1},
                                "archive": {"min_commits": 2, "max_commits": 3},
                                "thresholds": {"stale_instants": 0, "delta_commits_since_compaction": 10}})
    opened = Table.open(path, options=policy.service_options())
    plan = plan_maintenance(table_health(opened), policy)
    assert not plan.schedule.due and "does not hold: 3 delta commits" in plan.schedule.reason
    assert not plan.archive.due and plan.rollback == plan.execute == [] and plan.breaches == []
    assert opened.schedule_compaction() is None  # the service agrees

    # a dead writer, two more delta commits: the trigger holds, the stale write is named
    for ts in (3, 4):
        t.write(_rows(ts))
    dying = Table.open(path, options=FAST)
    dying.storage = CrashingStorage(path, crash_at=5)
    with pytest.raises(Crash):
        dying.write(_rows(9))
    opened = Table.open(path, options=policy.service_options())
    [stale] = opened.timeline.pending().instants
    Heartbeat(opened.storage, stale.time, 50).beat()
    time.sleep(0.3)
    plan = plan_maintenance(table_health(opened), policy, dry_run=True)
    assert plan.rollback == [stale.time] and plan.schedule.due and "holds: 5 delta commits" in plan.schedule.reason
    assert plan.dry_run and any(line.endswith(f"would roll back stale write {stale.time}") for line in plan.lines())
    assert len(plan.breaches) == 1 and "stale_instants is 1" in plan.breaches[0]

    opened.rollback(stale.time)
    made = opened.schedule_compaction()
    assert made is not None  # as decided
    plan = plan_maintenance(table_health(Table.open(path, options=policy.service_options())), policy)
    assert plan.execute == [made] and plan.rollback == [] and not plan.schedule.due  # (0 deltas since the request)
    opened.run_compaction(made)
    t.write(_rows(10))  # (the compacted slices are retained until a commit follows the compaction)
    plan = plan_maintenance(table_health(Table.open(path, options=policy.service_options())), policy)
    assert plan.clean.due and plan.archive.due and plan.execute == []
    assert "5 instants can move, 5 of 7 active commits among them (keep 2-3)" in plan.archive.reason
    cleaned = opened.clean()
    assert cleaned.total_files > 0
    archived = opened.archive(min_commits=2, max_commits=3)
    assert archived.archived
    plan = plan_maintenance(table_health(Table.open(path, options=policy.service_options())), policy)
    assert not plan.clean.due and not plan.archive.due


def test_a_run_that_executes_pending_plans_schedules_again_when_the_trigger_holds(tmp_path):
    """Delta commits pile up behind a pending plan (every slice with log files is in it): the
    run executes the plan, then schedules, and the schedule service makes a plan then."""
    path = str(tmp_path / "t")
    t = _mor(path)
    t.write(_rows(0))
    t.write(_rows(1))
    first = t.schedule_compaction(max_delta_commits=1)
    for ts in range(2, 6):
        t.write(_rows(ts))
    policy = table_policy("t", {"path": path, "table_options": FAST, "compaction": {"max_delta_commits": 3}})
    opened = Table.open(path, options=policy.service_options())
    health = table_health(opened)
    assert health.compactable_slices == 0 and not health.compaction_due
    plan = plan_maintenance(health, policy)
    assert plan.execute == [first] and plan.schedule.due and "4 delta commits made after them" in plan.schedule.reason
    assert opened.schedule_compaction() is None  # not before the pending plan runs
    opened.run_compaction(first)
    assert Table.open(path, options=policy.service_options()).schedule_compaction() is not None  # after it: as planned



def test_scheduling_after_pending_plans_needs_them_all_run_and_delta_commits_after_them(tmp_path):
    path = str(tmp_path / "t")
    t = _mor(path)
    t.write(_rows(0))
    t.write(pa.table({"id": ["a"], "ts": [1], "p": ["x"]}))
    first = t.schedule_compaction(max_delta_commits=1)  # partition x's group
    t.write(pa.table({"id": ["b"], "ts": [2], "p": ["y"]}))
    second = t.schedule_compaction(max_delta_commits=1)  # partition y's
    for ts in range(3, 7):
        t.write(_rows(ts))
    policy = table_policy("t", {"path": path, "table_options": FAST, "compaction": {"max_delta_commits": 3}})
    health = table_health(Table.open(path, options=policy.service_options()))
    assert first and second and health.compactable_slices == 0 and health.delta_commits_since_request == 4
    plan = plan_maintenance(health, policy)
    assert plan.execute == [first, second] and plan.schedule.due
    # a run that leaves a plan behind (max_plans) would schedule before it: not due
    plan = plan_maintenance(health, replace(policy, compaction=replace(policy.compaction, max_plans=1)))
    assert plan.execute == [first] and not plan.schedule.due

    # no delta commit after the newest plan: a time trigger holds, yet nothing would be compacted
    other = str(tmp_path / "u")
    u = _mor(other)
    u.write(_rows(0))
    u.write(_rows(1))
    plan_u = u.schedule_compaction(max_delta_commits=1)
    timed = table_policy("u", {"path": other, "table_options": FAST,
                                "compaction": {"trigger": "TIME_ELAPSED", "max_delta_seconds": 0}})
    health = table_health(Table.open(other, options=timed.service_options()))
    assert health.delta_commits_since_request == 0
    plan = plan_maintenance(health, timed)
    assert plan.execute == [plan_u] and not plan.schedule.due
    u.write(_rows(2))  # one after it: then due
    plan = plan_maintenance(table_health(Table.open(other, options=timed.service_options())), timed)
    assert plan.execute == [plan_u] and plan.schedule.due


@pytest.mark.parametrize("trigger", ["NUM_COMMITS", "NUM_COMMITS_AFTER_LAST_REQUEST", "TIME_ELAPSED",
                                     "NUM_AND_TIME", "NUM_OR_TIME"])
def test_health_says_a_compaction_is_due_exactly_when_scheduling_makes_one(tmp_path, trigger):
    """One rule: the trigger `compaction_due` judges is the one the schedule service applies."""
    path = str(tmp_path / "t")
    t = _mor(path)
    t.write(_rows(0))
    for n in range(1, 7):
        t.write(_rows(n))
        options = {**FAST, "hoodie.compact.inline.trigger.strategy": trigger,
                   "hoodie.compact.inline.max.delta.commits": "3", "hoodie.compact.inline.max.delta.seconds": "0"
                   if n % 2 else "3600"}
        opened = Table.open(path, options=options)
        due = table_health(opened).compaction_due
        made = opened.schedule_compaction()
        assert due == (made is not None), (trigger, n, due, made)
        if made and n % 3 == 0:
            opened.run_compaction(made)


def test_threshold_figures_are_the_numbers_and_lists_of_a_health():
    from airflow_lake.core.health import FIGURES, TableHealth

    fields = TableHealth.__dataclass_fields__
    assert FIGURES <= set(fields)
    assert {f for f in fields if f not in FIGURES} == {
        "table", "table_type", "table_version", "metadata_table_version", "metadata_partitions", "checked_at_ms",
        "latest_commit", "latest_compaction", "compaction_trigger", "compaction_due", "archival_blocked_by",
        "clean_policy", "backlog"}
