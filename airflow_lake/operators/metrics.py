"""The provider's metrics, sent through Airflow's `Stats` (StatsD or OpenTelemetry, whatever the
deployment configured in `[metrics]`; nothing when neither is on).

Names (docs/operators.md, "Metrics"), after the deployment's prefix (`[metrics] statsd_prefix`,
`airflow` by default); `<table>` is the table folder's name (the last segment of `table_path`),
characters outside `[A-Za-z0-9_-]` replaced by `_`; every metric also carries the tags `table`
(that name) and, for jobs, `job`:

- `lake.health.<table>.<figure>` (gauge), from `TableHealthOperator`, for each figure of
  `HEALTH_GAUGES` (a list figure: its length);
- `lake.<job>.<table>.success` / `.failure` / `.skipped` (counter) and `lake.<job>.<table>.duration` (timer),
  from every job operator (`job`: upsert, compaction_schedule, compaction_execute, clean,
  archive, rollback, savepoint, restore);
- `lake.<job>.<table>.<count>` (gauge) for each count of the job's result in `RESULT_GAUGES`
  (records written, deletes, files deleted, archived instants, ...).

A metric that cannot be sent is logged, never raised: metrics never fail a task.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from airflow.sdk.observability.stats import Stats

log = logging.getLogger(__name__)

PREFIX = "lake"
HEALTH_GAUGES = (
    "latest_commit_age_s", "delta_commits_since_compaction", "slices_with_logs", "log_files",
    "max_log_files_per_slice", "max_delta_commits_per_slice", "pending_compactions",
    "oldest_pending_compaction_age_s", "pending", "stale_instants", "active_commits", "archivable_commits",
    "clean_would_delete",
)
RESULT_GAUGES = (
    "records_written", "inserts", "updates", "deletes", "files_written", "replaced_file_groups", "file_groups",
    "files_deleted", "archived", "rolled_back",
)
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def table_name(table_path: str) -> str:
    """The `<table>` of the metric names: the table folder's name, made safe for StatsD."""
    last = str(table_path).rstrip("/").rsplit("/", 1)[-1] or "table"
    return _UNSAFE.sub("_", last)


def emit_health(table_path: str, health: Mapping[str, Any]) -> None:
    """The health figures of one table as gauges."""
    name = table_name(table_path)
    for figure in HEALTH_GAUGES:
        value = health.get(figure)
        if isinstance(value, list):
            value = len(value)
        if isinstance(value, (int, float)):
            _send("gauge", f"{PREFIX}.health.{name}.{figure}", value, {"table": name})


def emit_job(job: str, table_path: str, *, outcome: str, seconds: float,
             result: Mapping[str, Any] | None = None) -> None:
    """A job's outcome (`success`, `failure` or `skipped`), duration and result counts."""
    name = table_name(table_path)
    tags = {"table": name, "job": job}
    base = f"{PREFIX}.{job}.{name}"
    _send("incr", f"{base}.{outcome}", 1, tags)
    _send("timing", f"{base}.duration", timedelta(seconds=seconds), tags)
    for key in RESULT_GAUGES:
        value = (result or {}).get(key)
        if isinstance(value, list):
            value = len(value)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            _send("gauge", f"{base}.{key}", value, tags)


def _send(kind: str, stat: str, value: Any, tags: dict[str, str]) -> None:
    try:
        getattr(Stats, kind)(stat, value, tags=tags)
    except Exception as e:  # metrics never fail a task
        log.warning("metric %s not sent: %s", stat, e)
