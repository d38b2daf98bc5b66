"""Execute pending compaction plans of a MERGE_ON_READ table: merge each planned file slice
(base file + log files) into a new base file, one Spark task per file group, and complete
`T.commit`. Without `--instant`, runs the oldest (FIFO) or newest (LIFO) pending plan, up to
`--max-plans` of them; with none pending, prints `instant` null. A plan left inflight by a dead
job is rolled back (its plan kept) and run again."""

from __future__ import annotations

from typing import Any

from airflow_lake.core.vocabulary import COMPACTION_ORDERS
from airflow_lake.spark import job, services

PARSER = job.parser("compaction_execute", __doc__)
PARSER.add_argument("--instant", metavar="TIME", help="the plan to run (default: the oldest pending, see --order)")
PARSER.add_argument("--order", type=COMPACTION_ORDERS.normalise, choices=COMPACTION_ORDERS.names, default="FIFO",
                    help="without --instant: oldest (FIFO, default) or newest (LIFO) pending plan first")
PARSER.add_argument("--max-plans", type=job.positive_int, default=1, metavar="N",
                    help="without --instant: run up to N pending plans, one after the other (default 1)")


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run in this process (the active SparkSession); the JSON result as a dict."""
    return job.execute(PARSER, services.compaction_execute, argv)


if __name__ == "__main__":
    job.run(PARSER, services.compaction_execute)
