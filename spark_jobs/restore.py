"""Restore a table to a savepoint: roll back every write, compaction and plan after it (a new
`R.restore` records what was undone). Refuses while a later write is still running (live
heartbeat)."""

from __future__ import annotations

from typing import Any

from airflow_lake.spark import job, services

PARSER = job.parser("restore", __doc__)
PARSER.add_argument("--instant", required=True, metavar="TIME", help="the savepoint to restore to")


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run in this process (the active SparkSession); the JSON result as a dict."""
    return job.execute(PARSER, services.restore, argv)


if __name__ == "__main__":
    job.run(PARSER, services.restore)
