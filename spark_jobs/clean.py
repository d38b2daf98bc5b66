"""Clean a table: delete the file slices no query of the retained window needs (plan in
`T.clean.requested`, deletions as Spark tasks, `T.clean`). Never deleted: the latest slice of a
file group, savepointed files, slices of a pending compaction, files of pending writes. A
clean left half done is finished from its plan. With nothing to delete no instant is written
(`instant` null)."""

from __future__ import annotations

from typing import Any

from airflow_lake.core.timeline.instant import CLEAN
from airflow_lake.spark import job

POLICIES = ("KEEP_LATEST_COMMITS", "KEEP_LATEST_FILE_VERSIONS", "KEEP_LATEST_BY_HOURS")

PARSER = job.parser("clean", __doc__)
PARSER.add_argument("--policy", type=str.upper, choices=POLICIES,
                    help="what to keep (default: hoodie.cleaner.policy, else KEEP_LATEST_COMMITS)")
PARSER.add_argument("--retained", type=int, metavar="N",
                    help="commits, file versions or hours to keep (default: hoodie.cleaner.commits.retained 10, "
                         "hoodie.cleaner.fileversions.retained 3, hoodie.cleaner.hours.retained 24)")
PARSER.add_argument("--dry-run", action="store_true", help="plan only: list what would be deleted, write nothing")


def body(run: job.JobRun) -> dict[str, Any]:
    a = run.args
    table = run.open_table()
    policy = a.policy or str(table.options.get("hoodie.cleaner.policy") or "KEEP_LATEST_COMMITS").upper()
    job.log.info("clean: %s (%s, retained %s)", "planning (dry run)" if a.dry_run else "cleaning", policy,
                 a.retained if a.retained is not None else "from the table's options")
    result = table.clean(policy=policy, retained=a.retained, dry_run=a.dry_run, extra_metadata=run.extra_metadata)
    files = result.total_files
    job.log.info("clean: %s %d files in %d partitions", "would delete" if a.dry_run else "deleted", files,
                 len(result.files))
    return run.result(instant=result.instant, action=CLEAN if result.instant else None, operation="clean",
                      policy=result.policy, earliest_instant_to_retain=result.earliest_instant_to_retain,
                      dry_run=a.dry_run, files_planned=files, files_deleted=0 if a.dry_run else files,
                      partitions=len(result.files), already_done=result.already_done)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run in this process (the active SparkSession); the JSON result as a dict."""
    return job.execute(PARSER, body, argv)


if __name__ == "__main__":
    job.run(PARSER, body)
