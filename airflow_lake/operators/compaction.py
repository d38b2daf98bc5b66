"""`CompactionScheduleOperator` and `CompactionExecuteOperator`: offline compaction of a
MERGE_ON_READ table, the planned instant passed from one to the other by XCom."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from airflow.sdk.exceptions import AirflowSkipException

from airflow_lake.core.errors import TableNotFoundError
from airflow_lake.core.services.compaction import not_merge_on_read
from airflow_lake.core.timeline.instant import check_instant_time
from airflow_lake.core.vocabulary import COMPACTION_ORDERS, COMPACTION_TRIGGERS
from airflow_lake.operators.base import (
    COMMON_TEMPLATE_FIELDS,
    LakeJobOperator,
    choice,
    count,
    flag,
    none_if_empty,
)

if TYPE_CHECKING:
    from airflow.sdk import Context



# the job's count flags: (flag, argument, minimum)
_COUNTS = (("--max-delta-commits", "max_delta_commits", 1), ("--max-delta-seconds", "max_delta_seconds", 0),
           ("--target-io-mb", "target_io_mb", 1))


class CompactionScheduleOperator(LakeJobOperator):
    """Plans a compaction (`T.compaction.requested`) with the `compaction_schedule` job if the
    trigger holds and some file slice has log files; nothing else changes.

    :param strategy: trigger: `NUM_COMMITS`, `NUM_COMMITS_AFTER_LAST_REQUEST`, `TIME_ELAPSED`,
        `NUM_AND_TIME`, `NUM_OR_TIME` (default: the table option, else `NUM_COMMITS`).
    :param max_delta_commits: delta commits since the last compaction that trigger it (templated).
    :param max_delta_seconds: seconds since the last compaction that trigger it (templated).
    :param target_io_mb: IO budget of one plan (templated).
    :param skip_if_no_plan: when nothing is due, skip this task (and so the execution
        downstream) instead of succeeding with `None` (default True).

    XCom: the planned instant as a bare string (so `{{ ti.xcom_pull(task_ids=...) }}` renders
    it), or None. A retry returns the plan its first try made instead of planning again.
    Failure: a COPY_ON_WRITE table (before submitting anything, naming it), bad arguments, a
    failed job fail the task. No Asset event
    by default (a plan changes no data; pass `asset=` to get one).
    """

    job = "compaction_schedule"
    result_actions = ("commit",)
    pending_done = True
    writes_files = False
    template_fields: Sequence[str] = (*COMMON_TEMPLATE_FIELDS, "max_delta_commits", "max_delta_seconds",
                                      "target_io_mb")

    def __init__(self, *, table_path: str, strategy: str | None = None, max_delta_commits: int | None = None,
                 max_delta_seconds: int | None = None, target_io_mb: int | None = None,
                 skip_if_no_plan: bool = True, **kwargs) -> None:
        super().__init__(table_path=table_path, **kwargs)
        self.strategy = choice(self, "strategy", strategy, COMPACTION_TRIGGERS.spellings, COMPACTION_TRIGGERS.find)
        self.max_delta_commits = max_delta_commits
        self.max_delta_seconds = max_delta_seconds
        self.target_io_mb = target_io_mb
        self.skip_if_no_plan = flag(self, "skip_if_no_plan", skip_if_no_plan)
        for _, name, minimum in _COUNTS:  # (a template is checked once rendered)
            if not isinstance(getattr(self, name), str):
                count(self, name, getattr(self, name), minimum=minimum)

    def job_args(self) -> list[str]:
        check_merge_on_read(self)
        args = ["--strategy", self.strategy] if self.strategy else []
        for option, name, minimum in _COUNTS:
            value = count(self, name, getattr(self, name), minimum=minimum)
            if value is not None:
                args += [option, str(value)]
        return args

    def to_xcom(self, result: dict[str, Any], context: Context) -> str | None:
        instant = result.get("instant")
        if instant is None and self.skip_if_no_plan:
            raise AirflowSkipException(f"table {self.table_path}: nothing to compact: "
                                       f"{result.get('reason') or 'no plan was made'}")
        return instant


class CompactionExecuteOperator(LakeJobOperator):
    """Executes pending compaction plans with the `compaction_execute` job: each planned file
    slice (base + log files) merged into a new base file, one Spark task per file group.

    :param instant: the plan to run, e.g. `"{{ ti.xcom_pull(task_ids='schedule') }}"`
        (templated; None, "" or "None": the pending plans, see `order`).
    :param order: without `instant`: `FIFO` (oldest plan first, default) or `LIFO`.
    :param max_plans: without `instant`: drain up to this many pending plans, one after the
        other (default 1).

    XCom: `{"instants": [executed plans], "instant": the first or None, "file_groups",
    "records_written", "log_records", "files_written", "already_done"}`; with no pending plan
    `instants` is empty. The table's Asset gets an event carrying the instant and counts
    (none when nothing was pending: a run that changed nothing emits no event).

    Failure: a COPY_ON_WRITE table (before submitting anything, naming it); a plan being
    executed by another task (live heartbeat) fails this task clearly
    (`WriteConflictError` in the job's message), it is never run twice; a plan left inflight
    by a dead job is rolled back and run again; an unknown `instant` fails naming it. A retry
    returns the plans its first try completed.
    """

    job = "compaction_execute"
    result_actions = ("commit",)
    template_fields: Sequence[str] = (*COMMON_TEMPLATE_FIELDS, "instant", "max_plans")

    def __init__(self, *, table_path: str, instant: str | None = None, order: str = "FIFO", max_plans: int = 1,
                 **kwargs) -> None:
        super().__init__(table_path=table_path, **kwargs)
        self.instant = instant
        self.order = choice(self, "order", order, COMPACTION_ORDERS.spellings, COMPACTION_ORDERS.find)
        self.max_plans = max_plans
        if not isinstance(max_plans, str):
            count(self, "max_plans", max_plans, minimum=1)

    def job_args(self) -> list[str]:
        instant = none_if_empty(self.instant)
        if instant is not None:
            try:
                check_instant_time(str(instant))
            except Exception as e:
                raise self.invalid(f"instant {e}") from None
            args = ["--instant", str(instant)]
        else:
            args = ["--order", self.order, "--max-plans", str(count(self, "max_plans", self.max_plans, minimum=1))]
        check_merge_on_read(self)  # (after the arguments: a mistake in them is named first)
        return args

    def get_job_result(self, external_id: Any, context: Context) -> dict[str, Any] | None:
        result = super().get_job_result(external_id, context)
        if result is not None and "plans" not in result:  # read from the timeline, not the job's line
            result = self._plans_from_timeline(result)
        return result

    def _plans_from_timeline(self, first: dict[str, Any]) -> dict[str, Any]:
        """Without the job's line: the plans completed with this run's tokens (`token`,
        `token#2`, ...), their counts from their commit metadata."""
        found = [first] if first.get("instant") else []
        limit = 1 if none_if_empty(self.instant) else count(self, "max_plans", self.max_plans, minimum=1)
        for n in range(2, limit + 1 if found else 0):
            more = self.hook.find_result(self.table_path, f"{self._token}#{n}", actions=self.result_actions)
            if more is None:
                break
            found.append(more)
        return {**first, "plans": [r["instant"] for r in found],
                "file_groups": sum(r.get("files_written") or 0 for r in found),
                "records_written": sum(r.get("records_written") or 0 for r in found),
                "log_records": sum(r.get("log_records") or 0 for r in found),
                "files_written": sum(r.get("files_written") or 0 for r in found)}

    def to_xcom(self, result: dict[str, Any], context: Context) -> dict[str, Any]:
        plans = result.get("plans") if "plans" in result else [result["instant"]] if result.get("instant") else []
        return {"instants": plans, "instant": plans[0] if plans else None,
                "file_groups": result.get("file_groups"), "records_written": result.get("records_written"),
                "log_records": result.get("log_records"), "files_written": result.get("files_written"),
                "already_done": bool(result.get("already_done"))}

    def event_extra(self, result: dict[str, Any]) -> dict[str, Any]:
        return {**super().event_extra(result), "instants": result.get("plans") or []}

    @classmethod
    def changed_table(cls, result: dict[str, Any]) -> bool:
        """As every job's, except that a plan another run had completed was not changed by this one."""
        return not result.get("completed_elsewhere") and super().changed_table(result)


def check_merge_on_read(op: LakeJobOperator) -> None:
    """A COPY_ON_WRITE table has no log files to compact: a misconfigured DAG, failed here
    before anything is submitted (a path holding no table yet is left to the job)."""
    try:
        config = op.hook.get_table(op.table_path, op.table_options).config
    except TableNotFoundError:
        return
    problem = not_merge_on_read(config)
    if problem:
        raise op.invalid(problem)
