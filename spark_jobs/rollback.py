"""Roll back one instant: a pending write or compaction whose heartbeat has expired, or the
latest completed write. Deletes the files it wrote (markers say which) and records a new,
later `R.rollback`; a rolled-back compaction keeps its plan, which runs again. Refuses an
instant still running (live heartbeat)."""

from __future__ import annotations

from typing import Any

from airflow_lake.core.timeline.instant import ROLLBACK
from airflow_lake.spark import job

PARSER = job.parser("rollback", __doc__)
PARSER.add_argument("--instant", required=True, metavar="TIME", help="the instant to roll back")


def body(run: job.JobRun) -> dict[str, Any]:
    a = run.args
    table = run.open_table()
    job.log.info("rollback: rolling back %s", a.instant)
    result = table.rollback(a.instant, extra_metadata=run.extra_metadata)
    job.log.info("rollback: %s rolled back %s, %d files deleted", result.instant, result.rolled_back,
                 len(result.files_deleted))
    return run.result(instant=result.instant, action=ROLLBACK, operation="rollback", rolled_back=result.rolled_back,
                      rolled_back_action=result.action or None, files_deleted=len(result.files_deleted),
                      already_done=result.already_done)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run in this process (the active SparkSession); the JSON result as a dict."""
    return job.execute(PARSER, body, argv)


if __name__ == "__main__":
    job.run(PARSER, body)
