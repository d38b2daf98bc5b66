"""Execute pending compaction plans of a MERGE_ON_READ table: merge each planned file slice
(base file + log files) into a new base file, one Spark task per file group, and complete
`T.commit`. Without `--instant`, runs the oldest (FIFO) or newest (LIFO) pending plan, up to
`--max-plans` of them; with none pending, prints `instant` null. A plan left inflight by a dead
job is rolled back (its plan kept) and run again."""

from __future__ import annotations

from typing import Any

from airflow_lake.core.timeline.instant import COMMIT, COMPACTION
from airflow_lake.core.timeline.tokens import TOKEN_KEY
from airflow_lake.spark import job

PARSER = job.parser("compaction_execute", __doc__)
PARSER.add_argument("--instant", metavar="TIME", help="the plan to run (default: the oldest pending, see --order)")
PARSER.add_argument("--order", type=str.upper, choices=("FIFO", "LIFO"), default="FIFO",
                    help="without --instant: oldest (FIFO, default) or newest (LIFO) pending plan first")
PARSER.add_argument("--max-plans", type=job.positive_int, default=1, metavar="N",
                    help="without --instant: run up to N pending plans, one after the other (default 1)")


def _token(run: job.JobRun, n: int) -> dict[str, str] | None:
    """The first plan carries the run token; later plans of the same run `<token>#<n>`."""
    if not run.token:
        return None
    return {TOKEN_KEY: run.token if n == 0 else f"{run.token}#{n + 1}"}


def body(run: job.JobRun) -> dict[str, Any]:
    a = run.args
    table = run.open_table()
    results = []
    for n in range(1 if a.instant else a.max_plans):
        extra = _token(run, n)
        timeline = table.timeline
        mine = extra and timeline.find_token(extra[TOKEN_KEY], pending=True, actions=(COMMIT,))
        pending = timeline.actions(COMPACTION).pending().times
        if a.instant:
            target = a.instant
        elif mine:  # this run's plan: done (a re-submission) or left inflight by a dead attempt
            target = mine.time
        elif results and results[0].already_done:
            break  # a re-submitted run returns what it did and takes no new plan
        elif pending:
            target = pending[0] if a.order == "FIFO" else pending[-1]
        else:
            break
        run.instant = target
        job.log.info("compaction_execute: plan %s (%d pending)", target, len(pending))
        result = table.run_compaction(target, extra_metadata=extra)
        job.log.info("compaction_execute: %s %s: %d file groups, %d files written",
                     "found done" if result.already_done else "completed", result.instant, result.operations,
                     len(result.files))
        results.append(result)
    if not results:
        job.log.info("compaction_execute: no pending compaction plan")
        return run.result(instant=None, action=None, operation="compact", reason="no pending compaction plan",
                          plans=[], file_groups=0, records_written=0, log_records=0, already_done=False)
    first = results[0]
    return run.result(
        instant=first.instant, action=COMMIT, operation="compact", files_written=sum(len(r.files) for r in results),
        plans=[r.instant for r in results], file_groups=sum(r.operations for r in results),
        records_written=sum(r.records_written for r in results), log_records=sum(r.log_records for r in results),
        already_done=all(r.already_done for r in results))


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run in this process (the active SparkSession); the JSON result as a dict."""
    return job.execute(PARSER, body, argv)


if __name__ == "__main__":
    job.run(PARSER, body)
