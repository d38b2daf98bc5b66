"""Archive a table's timeline: move the oldest completed instants from `.hoodie/` to the
archived timeline, keeping at least `--min-commits` once more than `--max-commits` are active.
Archival stops at the cleaner's bound, at the first savepoint, before the oldest pending write,
and keeps every delta commit after the latest compaction: `blocked_by` says what stopped it.
Writes no instant (`instant` null); a re-run archives only what is newly eligible, and a re-run
with the same `--run-token` returns the first run's result (`already_done`)."""

from __future__ import annotations

from typing import Any

from airflow_lake.core.config import Option
from airflow_lake.spark import job

MIN_COMMITS = Option("hoodie.keep.min.commits", 20, int)
MAX_COMMITS = Option("hoodie.keep.max.commits", 30, int)
BATCH = Option("hoodie.commits.archival.batch", 10, int)

PARSER = job.parser("archive", __doc__)
PARSER.add_argument("--min-commits", type=int, metavar="N", help="active commits to keep (default: "
                    "hoodie.keep.min.commits, else 20)")
PARSER.add_argument("--max-commits", type=int, metavar="N", help="archive once more are active (default: "
                    "hoodie.keep.max.commits, else 30)")
PARSER.add_argument("--batch", type=int, metavar="N", help="instants per archive log block (default: "
                    "hoodie.commits.archival.batch, else 10)")


def body(run: job.JobRun) -> dict[str, Any]:
    a = run.args
    table = run.open_table()
    low = a.min_commits if a.min_commits is not None else table.option(MIN_COMMITS)
    high = a.max_commits if a.max_commits is not None else table.option(MAX_COMMITS)
    batch = a.batch if a.batch is not None else table.option(BATCH)
    job.log.info("archive: selecting instants (keep %d, archive beyond %d)", low, high)
    result = table.archive(min_commits=low, max_commits=high, batch=batch, extra_metadata=run.extra_metadata)
    job.log.info("archive: archived %d instants%s", len(result.archived),
                 f"; stopped by {result.blocked_by}" if result.blocked_by else "")
    return run.result(instant=None, action=None, operation="archive", archived=len(result.archived),
                      archived_instants=result.archived, archive_file=result.archive_file,
                      blocked_by=result.blocked_by, merged_files=len(result.merged_files),
                      already_done=result.already_done)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run in this process (the active SparkSession); the JSON result as a dict."""
    return job.execute(PARSER, body, argv)


if __name__ == "__main__":
    job.run(PARSER, body)
