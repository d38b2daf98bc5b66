"""Savepoint a completed commit: its files are kept by clean and archive, and `restore` can
roll the table back to it. Savepointing an instant twice is a no-op. Refuses an instant older
than the latest clean's earliest retained commit (its files may be gone)."""

from __future__ import annotations

from typing import Any

from airflow_lake.spark import job, services

PARSER = job.parser("savepoint", __doc__)
PARSER.add_argument("--instant", required=True, metavar="TIME", help="the completed commit to savepoint")
PARSER.add_argument("--user", help="recorded as savepointedBy (default: the job's OS user)")
PARSER.add_argument("--comments", default="", help="recorded with the savepoint")


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run in this process (the active SparkSession); the JSON result as a dict."""
    return job.execute(PARSER, services.savepoint, argv)


if __name__ == "__main__":
    job.run(PARSER, services.savepoint)
