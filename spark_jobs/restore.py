"""Restore a table to a savepoint: roll back every write, compaction and plan after it (a new
`R.restore` records what was undone). Refuses while a later write is still running (live
heartbeat)."""

from __future__ import annotations

from typing import Any

from airflow_lake.core.timeline.instant import RESTORE
from airflow_lake.spark import job

PARSER = job.parser("restore", __doc__)
PARSER.add_argument("--instant", required=True, metavar="TIME", help="the savepoint to restore to")


def body(run: job.JobRun) -> dict[str, Any]:
    a = run.args
    table = run.open_table()
    done = bool(run.token and table.timeline.find_token(run.token, actions=(RESTORE,)))
    job.log.info("restore: restoring to savepoint %s", a.instant)
    result = table.restore(a.instant, extra_metadata=run.extra_metadata)
    job.log.info("restore: %s undid %d instants", result.instant, len(result.rolled_back))
    return run.result(instant=result.instant, action=RESTORE, operation="restore", savepoint=result.savepoint,
                      rolled_back=result.rolled_back, already_done=done)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run in this process (the active SparkSession); the JSON result as a dict."""
    return job.execute(PARSER, body, argv)


if __name__ == "__main__":
    job.run(PARSER, body)
