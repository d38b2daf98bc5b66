"""Roll back one instant: a pending write or compaction whose heartbeat has expired, or the
latest completed write. Deletes the files it wrote (markers say which) and records a new,
later `R.rollback`; a rolled-back compaction keeps its plan, which runs again. Refuses an
instant still running (live heartbeat)."""

from __future__ import annotations

from typing import Any

from airflow_lake.spark import job, services

PARSER = job.parser("rollback", __doc__)
PARSER.add_argument("--instant", required=True, metavar="TIME", help="the instant to roll back")


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run in this process (the active SparkSession); the JSON result as a dict."""
    return job.execute(PARSER, services.rollback, argv)


if __name__ == "__main__":
    job.run(PARSER, services.rollback)
