"""Savepoint a completed commit: its files are kept by clean and archive, and `restore` can
roll the table back to it. Savepointing an instant twice is a no-op. Refuses an instant older
than the latest clean's earliest retained commit (its files may be gone)."""

from __future__ import annotations

from typing import Any

from airflow_lake.core.timeline.instant import SAVEPOINT
from airflow_lake.spark import job

PARSER = job.parser("savepoint", __doc__)
PARSER.add_argument("--instant", required=True, metavar="TIME", help="the completed commit to savepoint")
PARSER.add_argument("--user", help="recorded as savepointedBy (default: the job's OS user)")
PARSER.add_argument("--comments", default="", help="recorded with the savepoint")


def body(run: job.JobRun) -> dict[str, Any]:
    a = run.args
    table = run.open_table()
    done = table.timeline.actions(SAVEPOINT).completed().contains(a.instant)
    job.log.info("savepoint: savepointing %s", a.instant)
    instant = table.savepoint(a.instant, user=a.user, comments=a.comments, extra_metadata=run.extra_metadata)
    return run.result(instant=instant, action=SAVEPOINT, operation="savepoint", already_done=done)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run in this process (the active SparkSession); the JSON result as a dict."""
    return job.execute(PARSER, body, argv)


if __name__ == "__main__":
    job.run(PARSER, body)
