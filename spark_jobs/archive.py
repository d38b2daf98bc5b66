"""Archive a table's timeline: move the oldest completed instants from `.hoodie/` to the
archived timeline, keeping at least `--min-commits` once more than `--max-commits` are active.
Archival stops at the cleaner's bound, at the first savepoint, before the oldest pending write,
and keeps every delta commit after the latest compaction: `blocked_by` says what stopped it.
Writes no instant (`instant` null); a re-run archives only what is newly eligible, and a re-run
with the same `--run-token` returns the first run's result (`already_done`)."""

from __future__ import annotations

from typing import Any

from airflow_lake.spark import job, services

PARSER = job.parser("archive", __doc__)
PARSER.add_argument("--min-commits", type=int, metavar="N", help="active commits to keep (default: "
                    "hoodie.keep.min.commits, else 20)")
PARSER.add_argument("--max-commits", type=int, metavar="N", help="archive once more are active (default: "
                    "hoodie.keep.max.commits, else 30)")
PARSER.add_argument("--batch", type=int, metavar="N", help="instants per archive log block (default: "
                    "hoodie.commits.archival.batch, else 10)")


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run in this process (the active SparkSession); the JSON result as a dict."""
    return job.execute(PARSER, services.archive, argv)


if __name__ == "__main__":
    job.run(PARSER, services.archive)
