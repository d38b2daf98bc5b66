"""Schedule a compaction of a MERGE_ON_READ table: write `T.compaction.requested` if the
trigger holds and some file slice has log files. Nothing else changes; `compaction_execute`
runs the plan. "Not now" is a normal answer: `instant` null and the `reason`."""

from __future__ import annotations

from typing import Any

from airflow_lake.core.timeline.instant import COMMIT
from airflow_lake.spark import job

TRIGGERS = ("NUM_COMMITS", "NUM_COMMITS_AFTER_LAST_REQUEST", "TIME_ELAPSED", "NUM_AND_TIME", "NUM_OR_TIME")

PARSER = job.parser("compaction_schedule", __doc__)
PARSER.add_argument("--strategy", type=str.upper, choices=TRIGGERS,
                    help="trigger (default: hoodie.compact.inline.trigger.strategy, else NUM_COMMITS)")
PARSER.add_argument("--max-delta-commits", type=int, metavar="N",
                    help="delta commits since the last compaction that trigger it "
                         "(default: hoodie.compact.inline.max.delta.commits, else 5)")
PARSER.add_argument("--max-delta-seconds", type=int, metavar="S",
                    help="seconds since the last compaction that trigger it "
                         "(default: hoodie.compact.inline.max.delta.seconds, else 3600)")
PARSER.add_argument("--target-io-mb", type=int, metavar="MB",
                    help="IO budget of one plan, largest log files first (default: hoodie.compaction.target.io)")


def body(run: job.JobRun) -> dict[str, Any]:
    a = run.args
    table = run.open_table()
    done = run.token and table.timeline.find_token(run.token, pending=True, actions=(COMMIT,))
    job.log.info("compaction_schedule: planning (strategy %s)", a.strategy or "from the table's options")
    decision = table.plan_compaction(strategy=a.strategy, max_delta_commits=a.max_delta_commits,
                                     max_delta_seconds=a.max_delta_seconds, target_io_mb=a.target_io_mb,
                                     extra_metadata=run.extra_metadata)
    job.log.info("compaction_schedule: %s", f"planned {decision.instant} ({decision.operations} file groups)"
                 if decision.instant else f"nothing planned: {decision.reason}")
    return run.result(instant=decision.instant, action="compaction" if decision.instant else None,
                      operation="compaction_schedule", scheduled=decision.instant is not None,
                      reason=decision.reason, file_groups=decision.operations, already_done=bool(done))


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run in this process (the active SparkSession); the JSON result as a dict."""
    return job.execute(PARSER, body, argv)


if __name__ == "__main__":
    job.run(PARSER, body)
