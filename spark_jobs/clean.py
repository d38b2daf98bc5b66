"""Clean a table: delete the file slices no query of the retained window needs (plan in
`T.clean.requested`, deletions as Spark tasks, `T.clean`). Never deleted: the latest slice of a
file group, savepointed files, slices of a pending compaction, files of pending writes. A
clean left half done is finished from its plan. With nothing to delete no instant is written
(`instant` null)."""

from __future__ import annotations

from typing import Any

from airflow_lake.core.vocabulary import CLEAN_POLICIES
from airflow_lake.spark import job, services

PARSER = job.parser("clean", __doc__)
PARSER.add_argument("--policy", type=CLEAN_POLICIES.normalise, choices=CLEAN_POLICIES.names,
                    help="what to keep (default: hoodie.cleaner.policy, else KEEP_LATEST_COMMITS)")
PARSER.add_argument("--retained", type=int, metavar="N",
                    help="commits, file versions or hours to keep (default: hoodie.cleaner.commits.retained 10, "
                         "hoodie.cleaner.fileversions.retained 3, hoodie.cleaner.hours.retained 24)")
PARSER.add_argument("--dry-run", action="store_true", help="plan only: list what would be deleted, write nothing")


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run in this process (the active SparkSession); the JSON result as a dict."""
    return job.execute(PARSER, services.clean, argv)


if __name__ == "__main__":
    job.run(PARSER, services.clean)
