"""The maintenance manager: one DAG per table, built from policies (`airflow_lake.core.maintenance`)
given in Python or a YAML file (docs/maintenance.md).

Each table's DAG, on the table's schedule:

    plan ──> check_backlog
      ├──> stale_writes ──> rollback_stale[] ──┐
      └──> pending_plans ─────────────────────> execute_pending_plans[] ─> schedule_compaction
           ─> execute_new_plan ─> clean ─> archive

- `plan` reads the table's health (timeline and listing only, judged by the policy's trigger,
  clean policy and archival bounds) and decides what is due (`plan_maintenance`); its XCom is
  the decision with the reason for each step, and the health figures go to the metrics;
- `check_backlog` fails, naming each figure above its threshold and what to do, while the
  services still run;
- `rollback_stale` and `execute_pending_plans` are mapped over the plan's stale writes and
  pending plans (oldest first; `stale_writes` and `pending_plans` give the lists); the
  services not due skip, saying why;
- every service is one `spark-submit` job (the operators of `airflow_lake.operators`) in the
  lake's pool (`pool`: at most that pool's slots of Spark jobs in the whole lake), and a table
  runs one compaction at a time (`max_active_runs=1`, one compaction task instance at a time).

A run with the param `dry_run` (or `dry_run=True` here) logs the decisions and runs nothing.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml
from airflow.sdk import DAG, BaseOperator, Param
from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException

from airflow_lake.core.errors import InvalidOptionError, TableNotFoundError
from airflow_lake.core.health import table_health
from airflow_lake.core.maintenance import TablePolicy, check_config, plan_maintenance, policies_from_config
from airflow_lake.hooks.lake import LakeHook
from airflow_lake.location import LakeSettings, is_absolute
from airflow_lake.operators.base import TimelineReadLineage, none_if_empty
from airflow_lake.operators.compaction import CompactionExecuteOperator, CompactionScheduleOperator
from airflow_lake.operators.metrics import emit_health
from airflow_lake.operators.services import ArchiveOperator, CleanOperator, RollbackOperator

if TYPE_CHECKING:
    from airflow.sdk import Context

PLAN_TASK = "plan"
DEFAULT_PREFIX = "lake_maintenance__"
DEFAULT_START = datetime(2025, 1, 1, tzinfo=timezone.utc)


class MaintenancePlanOperator(TimelineReadLineage, BaseOperator):
    """Reads a table's health with its policy's options and decides what is due; XCom: the
    `MaintenancePlan` as a dict (and the health under the key `health`). A path that holds no
    table yet skips the run, saying so."""

    ui_color = "#e8f0d8"

    def __init__(self, *, policy: TablePolicy, dry_run: bool = False, **kwargs) -> None:
        super().__init__(**kwargs)
        self.policy = policy
        self.dry_run = dry_run
        self.table_path = policy.path
        self.lake_conn_id = policy.lake_conn_id
        self.storage_options = policy.storage_options

    def execute(self, context: Context) -> dict[str, Any]:
        policy = self.policy
        dry_run = bool((context.get("params") or {}).get("dry_run", self.dry_run))
        hook = LakeHook(lake_conn_id=policy.lake_conn_id, storage_options=policy.storage_options)
        try:
            table = hook.get_table(policy.path, policy.service_options())
        except TableNotFoundError as e:
            raise AirflowSkipException(f"table {policy.name}: nothing to maintain yet: {e}") from None
        health = table_health(table)
        emit_health(policy.path, health.as_dict())
        plan = plan_maintenance(health, policy, dry_run=dry_run)
        for line in plan.lines():
            self.log.info("%s", line)
        context["ti"].xcom_push(key="health", value=health.as_dict())
        return plan.as_dict()


class PlanItemsOperator(BaseOperator):
    """One list of the plan (`rollback`: stale writes, `execute`: pending plans) as its XCom, for
    the services mapped over it (empty in a dry run)."""

    ui_color = "#e8f0d8"

    def __init__(self, *, key: str, plan_task_id: str = PLAN_TASK, **kwargs) -> None:
        super().__init__(**kwargs)
        self.key = key
        self.plan_task_id = plan_task_id

    def execute(self, context: Context) -> list[str]:
        plan = context["ti"].xcom_pull(task_ids=self.plan_task_id) or {}
        return [] if plan.get("dry_run") else list(plan.get(self.key) or [])


class BacklogCheckOperator(BaseOperator):
    """Fails (no retry) when the plan found health figures above the policy's thresholds; its
    log says, per figure, what is behind and what to do."""

    ui_color = "#f0d8d8"

    def __init__(self, *, table_path: str, plan_task_id: str = PLAN_TASK, **kwargs) -> None:
        super().__init__(**kwargs)
        self.table_path = table_path
        self.plan_task_id = plan_task_id

    def execute(self, context: Context) -> list[str]:
        plan = context["ti"].xcom_pull(task_ids=self.plan_task_id) or {}
        problems = plan.get("breaches") or []
        if problems:
            for line in problems:
                self.log.error("%s", line)
            raise AirflowFailException(f"table {self.table_path}: {len(problems)} health figure(s) above their "
                                       "thresholds: " + "; ".join(problems))
        self.log.info("table %s: every health figure is within its threshold", self.table_path)
        return []


class _WhenDue:
    """Runs the service only when the plan says it is due (and not in a dry run); skips saying why."""

    step: str

    def execute(self, context: Context) -> Any:
        plan = context["ti"].xcom_pull(task_ids=PLAN_TASK) or {}
        decided = plan.get(self.step) or {}
        if plan.get("dry_run"):
            raise AirflowSkipException(f"table {self.table_path}: dry run: {self.step} "
                                       f"{'would run' if decided.get('due') else 'not due'}: {decided.get('reason')}")
        if not decided.get("due"):
            raise AirflowSkipException(f"table {self.table_path}: {self.step} not due: "
                                       f"{decided.get('reason') or 'no plan'}")
        return super().execute(context)  # type: ignore[misc]


class DueCompactionScheduleOperator(_WhenDue, CompactionScheduleOperator):
    step = "schedule"


class DueCleanOperator(_WhenDue, CleanOperator):
    step = "clean"


class DueArchiveOperator(_WhenDue, ArchiveOperator):
    step = "archive"


class NewPlanExecuteOperator(CompactionExecuteOperator):
    """Executes the plan `schedule_compaction` made; skips when it made none."""

    def execute(self, context: Context) -> Any:
        if none_if_empty(self.instant) is None:
            raise AirflowSkipException(f"table {self.table_path}: no new compaction plan to execute")
        return super().execute(context)


class _UniqueKeyLoader(yaml.SafeLoader):
    """YAML's safe loader refusing a key given twice in one mapping (YAML requires unique keys;
    the plain loader keeps the last, so a table written twice would lose its first policy)."""

    def construct_mapping(self, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if not isinstance(key, (str, int, float, bool)):
                continue  # (an unhashable key: the loader's own error)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"key {key!r} is given twice in one mapping", key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep)


def load_config(source: str | os.PathLike | Mapping[str, Any]) -> tuple[Mapping[str, Any], str]:
    """A maintenance config and where it came from (for messages): a mapping as given, or a
    YAML file read."""
    if isinstance(source, Mapping):
        return source, "maintenance config"
    path = Path(source)
    try:
        doc = yaml.load(path.read_text(), Loader=_UniqueKeyLoader)  # noqa: S506 (a SafeLoader)
    except (OSError, yaml.YAMLError) as e:
        raise InvalidOptionError(f"maintenance config {path}: cannot be read: {type(e).__name__}: {e}") from None
    return doc, f"maintenance config {path}"


@dataclass(frozen=True)
class ManagedTable:
    """A table of a maintenance config: its maintenance DAG's id and its policy (its path
    joined to the config's base path)."""

    dag_id: str
    policy: TablePolicy


def managed_tables(config: str | os.PathLike | Mapping[str, Any], *, base_path: str | None = None,
                   dag_id_prefix: str | None = None) -> tuple[list[ManagedTable], Mapping[str, Any], str]:
    """The tables of `config` (see `maintenance_dags`), the config and where it came from. A
    relative table path is joined to `base_path`, else the config's `base_path` (else it stays
    relative: the lake connection's base path applies when it is used)."""
    doc, where = load_config(config)
    check_config(doc, where)
    base = base_path if base_path is not None else doc.get("base_path")
    prefix = dag_id_prefix if dag_id_prefix is not None else doc.get("dag_id_prefix", DEFAULT_PREFIX)
    tables = [ManagedTable(f"{prefix}{p.name}", p if base is None or is_absolute(p.path) else replace(
        p, path=LakeSettings(base_path=base).resolve(p.path))) for p in policies_from_config(doc, where)]
    return tables, doc, where


def maintenance_dags(config: str | os.PathLike | Mapping[str, Any], *, base_path: str | None = None,
                     dag_id_prefix: str | None = None, pool: str | None = None, dry_run: bool | None = None,
                     start_date: datetime | None = None, tags: list[str] | None = None) -> dict[str, DAG]:
    """One maintenance DAG per table of `config` (a YAML file or its mapping: `tables`, `defaults`,
    and optionally `base_path`, `pool`, `dag_id_prefix`, `dry_run`, `start_date`, `tags`; the
    keyword arguments win over the file's), by DAG id. A relative table path is joined to
    `base_path` (so its Asset is named), else to the lake connection's when the task runs. Put
    them in a DAG file's globals: `globals().update(maintenance_dags("lake_tables.yaml"))`.
    Every mistake in the config is an `InvalidOptionError` naming the file, the table and the
    key (a DAG import error in the UI). The Airflow UI's "Lake tables" page lists the tables of
    the config named by `[lake] maintenance_config` (docs/run-a-lake.md)."""
    tables, doc, where = managed_tables(config, base_path=base_path, dag_id_prefix=dag_id_prefix)
    pool = pool if pool is not None else doc.get("pool")
    if pool is not None and (not isinstance(pool, str) or not pool.strip()):
        raise InvalidOptionError(f"{where}: pool must be a pool's name, got {pool!r}")
    dry_run = dry_run if dry_run is not None else bool(doc.get("dry_run"))  # (checked: True, False or none)
    if not isinstance(dry_run, bool):
        raise InvalidOptionError(f"{where}: dry_run must be True or False, got {dry_run!r}")
    start = start_date or _start_date(doc.get("start_date"), where)
    tags = tags if tags is not None else doc.get("tags") or ["airflow-lake", "maintenance"]
    tags = [tags] if isinstance(tags, str) else [str(t) for t in tags]
    return {t.dag_id: table_dag(t.policy, dag_id=t.dag_id, pool=pool, dry_run=dry_run, start_date=start, tags=tags)
            for t in tables}


def _start_date(value: Any, where: str) -> datetime:
    if value is None:
        return DEFAULT_START
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=timezone.utc)
    try:
        moment = datetime.fromisoformat(str(value))
    except ValueError:
        raise InvalidOptionError(f"{where}: start_date {value!r} is not an ISO date") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)


def table_dag(policy: TablePolicy, *, dag_id: str, pool: str | None = None, dry_run: bool = False,
              start_date: datetime = DEFAULT_START, tags: list[str] | None = None) -> DAG:
    """The maintenance DAG of one table (see the module's docstring)."""
    job: dict[str, Any] = {
        "table_path": policy.path, "lake_conn_id": policy.lake_conn_id, "storage_options": policy.storage_options,
        "table_options": policy.service_options(), "spark_conn_id": policy.spark_conn_id,
        "spark_conf": policy.spark_conf, "spark_args": policy.spark_args,
        # a relative path names its Asset only when the task runs: no Asset then
        "asset": None if is_absolute(policy.path) else False,
    }
    if pool:
        job["pool"] = pool
    c, k, a = policy.compaction, policy.clean, policy.archive
    with DAG(dag_id, schedule=policy.schedule, start_date=start_date, catchup=False, max_active_runs=1,
             tags=tags or [], params={"dry_run": Param(dry_run, type="boolean",
                                                        description="log the decisions, run nothing")},
             doc_md=f"Maintenance of table `{policy.name}` at `{policy.path}` (airflow-lake maintenance manager: "
                    "plan, then the services that are due).") as dag:
        plan = MaintenancePlanOperator(task_id=PLAN_TASK, policy=policy, dry_run=dry_run)
        check = BacklogCheckOperator(task_id="check_backlog", table_path=policy.path)
        stale = PlanItemsOperator(task_id="stale_writes", key="rollback")
        pending = PlanItemsOperator(task_id="pending_plans", key="execute")
        rollback = RollbackOperator.partial(task_id="rollback_stale", **job).expand(instant=stale.output)
        execute = CompactionExecuteOperator.partial(task_id="execute_pending_plans", max_active_tis_per_dag=1,
                                                    trigger_rule="none_failed", **job).expand(
            instant=pending.output)
        schedule = DueCompactionScheduleOperator(
            task_id="schedule_compaction", strategy=c.trigger, max_delta_commits=c.max_delta_commits,
            max_delta_seconds=c.max_delta_seconds, target_io_mb=c.target_io_mb, trigger_rule="none_failed",
            max_active_tis_per_dag=1, **job)
        new_plan = NewPlanExecuteOperator(
            task_id="execute_new_plan", instant="{{ ti.xcom_pull(task_ids='schedule_compaction') }}",
            trigger_rule="none_failed", max_active_tis_per_dag=1, **job)
        # cleaning and archival run whatever became of the compaction
        clean = DueCleanOperator(task_id="clean", policy=k.policy, retained=k.retained, trigger_rule="all_done",
                                 **job)
        archive = DueArchiveOperator(task_id="archive", min_commits=a.min_commits, max_commits=a.max_commits,
                                     trigger_rule="all_done", **job)
        plan >> check
        plan >> [stale, pending]
        stale >> rollback >> execute
        pending >> execute
        execute >> schedule >> new_plan >> clean >> archive
    return dag
