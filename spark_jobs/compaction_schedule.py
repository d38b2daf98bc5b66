"""Schedule a compaction of a MERGE_ON_READ table: write `T.compaction.requested` if the
trigger holds and some file slice has log files. Nothing else changes; `compaction_execute`
runs the plan. "Not now" is a normal answer: `instant` null and the `reason`."""

from __future__ import annotations

from typing import Any

from airflow_lake.core.vocabulary import COMPACTION_TRIGGERS
from airflow_lake.spark import job, services

PARSER = job.parser("compaction_schedule", __doc__)
PARSER.add_argument("--strategy", type=COMPACTION_TRIGGERS.normalise, choices=COMPACTION_TRIGGERS.names,
                    help="trigger (default: hoodie.compact.inline.trigger.strategy, else NUM_COMMITS)")
PARSER.add_argument("--max-delta-commits", type=int, metavar="N",
                    help="delta commits since the last compaction that trigger it "
                         "(default: hoodie.compact.inline.max.delta.commits, else 5)")
PARSER.add_argument("--max-delta-seconds", type=int, metavar="S",
                    help="seconds since the last compaction that trigger it "
                         "(default: hoodie.compact.inline.max.delta.seconds, else 3600)")
PARSER.add_argument("--target-io-mb", type=int, metavar="MB",
                    help="IO budget of one plan, largest log files first (default: hoodie.compaction.target.io)")


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run in this process (the active SparkSession); the JSON result as a dict."""
    return job.execute(PARSER, services.compaction_schedule, argv)


if __name__ == "__main__":
    job.run(PARSER, services.compaction_schedule)
