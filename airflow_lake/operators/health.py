"""`TableHealthOperator`: a table's health (`airflow_lake.core.health.TableHealth`) as XCom,
read in the worker from the timeline and the file listing (no Spark job, no data file read),
failing when a figure is above its threshold."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowFailException

from airflow_lake.core.health import breaches, table_health
from airflow_lake.hooks.lake import LakeHook
from airflow_lake.operators.base import TimelineReadLineage
from airflow_lake.operators.metrics import emit_health

if TYPE_CHECKING:
    from airflow.sdk import Context


class TableHealthOperator(TimelineReadLineage, BaseOperator):
    """Reads a table's health and returns it as XCom (`TableHealth.as_dict()`: the compaction
    backlog, pending plans and their age, pending instants and whether their writers are alive,
    what archival and a clean would do, the latest commit's age, table and MDT versions).

    :param table_path: absolute path or URI, or a path relative to the lake connection's base
        path (templated).
    :param lake_conn_id: a `lake` connection (default `lake_default`; templated).
    :param storage_options: file-system options over the connection's (templated).
    :param table_options: `hoodie.*` options over the connection's (heartbeat interval, clean
        policy and retention, archival bounds: what the figures are judged by; templated).
    :param thresholds: figure name -> the largest acceptable value (a list figure such as
        `stale_instants` counts its items), e.g. `{"max_log_files_per_slice": 20,
        "oldest_pending_compaction_age_s": 3600, "stale_instants": 0}`; a figure above its
        threshold fails the task (no retry) with one log line per figure saying what to do,
        after the health is pushed as XCom (templated).
    """

    template_fields: Sequence[str] = ("table_path", "lake_conn_id", "storage_options", "table_options", "thresholds")
    template_fields_renderers = {"table_options": "json", "storage_options": "json", "thresholds": "json"}
    ui_color = "#e8f0d8"

    def __init__(self, *, table_path: str, lake_conn_id: str | None = "lake_default",
                 storage_options: dict[str, Any] | None = None, table_options: dict[str, Any] | None = None,
                 thresholds: dict[str, float] | None = None, **kwargs) -> None:
        super().__init__(**kwargs)
        self.table_path = table_path
        self.lake_conn_id = lake_conn_id
        self.storage_options = storage_options
        self.table_options = table_options
        self.thresholds = thresholds

    def execute(self, context: Context) -> dict[str, Any]:
        hook = LakeHook(lake_conn_id=self.lake_conn_id, storage_options=self.storage_options)
        table = hook.get_table(self.table_path, self.table_options)
        health = table_health(table)
        doc = health.as_dict()
        emit_health(self.table_path, doc)
        self.log.info("table %s: %d delta commits since the last compaction, %d pending compaction plans, "
                      "%d stale instants, %d archivable commits, a clean would delete %d files",
                      health.table, health.delta_commits_since_compaction, len(health.pending_compactions),
                      len(health.stale_instants), health.archivable_commits, health.clean_would_delete)
        try:
            problems = breaches(health, dict(self.thresholds or {}))
        except ValueError as e:
            raise AirflowFailException(f"{type(self).__name__} {self.task_id}: thresholds: {e}") from None
        if problems:
            context["ti"].xcom_push(key="return_value", value=doc)
            for line in problems:
                self.log.error("%s", line)
            raise AirflowFailException("; ".join(problems))
        return doc
