"""The frame every `spark_jobs/*.py` entry point shares.

A job file declares its flags on `parser(...)`, writes a `body(run) -> dict`, and ends with
`run(PARSER, body)`. This module gives every job the same contract:

- common flags: `--table PATH` (required), `--option KEY=VALUE` (repeatable), `--run-token`;
- logging at INFO to stderr (stages, files done / total);
- stdout's very last line is one JSON object (the result), nothing after it; exit 0;
- any failure: the last stderr line is one line naming the job, the table and the instant,
  exit 1 (argparse errors exit 2, `--help` exits 0).

`--option` keys starting with `hoodie.` or `airflow_lake.` are table / write options (as in
`Table.open(options=...)`); every other key is a storage option (delta-rs style keys such as
`aws_region`, `aws_endpoint_url`, or pyarrow's S3/GCS/HDFS/Azure keywords; docs/object-stores.md).
A storage option's value is read as JSON when it is a JSON literal (`true`, `false`, `null`, a
number, a quoted string), else taken as the plain string: `--option allow_bucket_creation=true`,
`--option 'access_key="0123"'`. Secret options (keys, tokens, passwords) come in the
environment instead (`airflow_lake.spark.options`), never on the command line.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NoReturn, TypeVar

from airflow_lake.core.errors import LakeError, noted_instant
from airflow_lake.core.objectstore import scrub
from airflow_lake.core.services.runs import TOKEN_KEY
from airflow_lake.core.table import Table
from airflow_lake.core.vocabulary import split_options
from airflow_lake.spark.options import take_secret_options

log = logging.getLogger("airflow_lake.job")
T = TypeVar("T")
R = TypeVar("R")


class JobError(Exception):
    """A job failed; `str()` is the one-line message naming job, table and instant."""

    def __init__(self, job: str, table: str | None, instant: str | None, cause: BaseException,
                 options: dict[str, Any] | None = None):
        self.job, self.table, self.instant, self.cause = job, table, instant, cause
        reason = scrub(" ".join(str(cause).split()), options or {}) or type(cause).__name__
        if len(reason) > 2000:
            reason = reason[:2000] + "..."
        super().__init__(f"{job} failed: table {table or '?'}, instant {instant or 'none'}: "
                         f"{type(cause).__name__}: {reason}")


def parser(name: str, description: str | None) -> argparse.ArgumentParser:
    """An argument parser with the flags every job takes."""
    p = argparse.ArgumentParser(
        prog=f"{name}.py", description=(description or "").strip(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=f"Run: spark-submit [--master M] --py-files AIRFLOW_LAKE_ZIP {name}.py ARGS\n"
               "(python -c 'from airflow_lake.spark import job_path, package_zip; print(package_zip(), "
               f"job_path(\"{name}\"))').\n"
               "Prints one JSON object as the last line on stdout. On failure exits 1, the last line on\n"
               "stderr naming the table and the instant. See docs/spark.md.")
    p.add_argument("--table", required=True, metavar="PATH",
                   help="the table's path or URI (file:///..., s3://bucket/..., hdfs://...)")
    p.add_argument("--option", action="append", default=[], metavar="KEY=VALUE", type=key_value,
                   help="repeatable; hoodie.* and airflow_lake.* keys are table/write options, any other key a "
                        "storage option (pyarrow file-system keyword; JSON literals are typed: true, 5, \"0123\")")
    p.add_argument("--run-token", metavar="TOKEN",
                   help="the caller's run id, stored as extraMetadata airflow_lake.token; a re-submitted job with "
                        "the same token returns the result it already committed instead of writing again")
    p.add_argument("--result-file", metavar="PATH",
                   help="also write the JSON result, or {\"error\": the one-line error}, to this local file "
                        "(what the Airflow hook reads in client mode)")
    p.job_name = name  # type: ignore[attr-defined]
    return p


def key_value(text: str) -> tuple[str, str]:
    """An argparse type: `KEY=VALUE` as (key, value)."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key.strip(), value


def positive_int(text: str) -> int:
    """An argparse type: an integer of at least 1."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of at least 1, got {text!r}")
    return value


@dataclass
class JobRun:
    """One run of a job: its arguments and what it works on (named by a failure)."""

    job: str
    args: argparse.Namespace
    instant: str | None = None
    table_options: dict[str, str] = field(default_factory=dict)
    storage_options: dict[str, Any] = field(default_factory=dict)

    @property
    def table_uri(self) -> str:
        return self.args.table

    @property
    def token(self) -> str | None:
        return self.args.run_token or None

    @property
    def extra_metadata(self) -> dict[str, str] | None:
        """What every service call is given: the run token, under `airflow_lake.token`."""
        return {TOKEN_KEY: self.token} if self.token else None

    def open_table(self) -> Table:
        """Open the table on a `SparkEngine` whose session (built, or joined) starts when the job
        first needs executors, where `may_defer_session` allows: a job with nothing to do, or
        working on the timeline alone (archive, a compaction plan, a savepoint), starts none."""
        from airflow_lake.spark import SparkEngine  # pyspark: only once the arguments are good
        from airflow_lake.spark.session import may_defer_session

        engine = SparkEngine(self.start_session)
        if not may_defer_session():
            engine.spark  # noqa: B018 - started now
        log.info("%s: opening table %s", self.job, self.table_uri)
        table = Table.open(self.table_uri, options=self.table_options, storage_options=self.storage_options,
                           engine=engine)
        log.info("%s: table %s is %s %s", self.job, table.storage.uri, table.config.table_type, table.config.name)
        return table

    def start_session(self):
        """Build (or join) the job's SparkSession."""
        from pyspark.sql import SparkSession

        from airflow_lake.spark import session

        if SparkSession.getActiveSession() is None:
            log.info("%s: starting the Spark session", self.job)
        return session(f"airflow-lake {self.job}")

    def result(self, *, instant: str | None, action: str | None, operation: str, files_written: int = 0,
               inserts: int = 0, updates: int = 0, deletes: int = 0, **figures: Any) -> dict[str, Any]:
        """The job's JSON result: the fields every job prints, then the service's own."""
        self.instant = instant or self.instant
        return {"job": self.job, "table": self.table_uri, "instant": instant, "action": action,
                "operation": operation, "inserts": inserts, "updates": updates, "deletes": deletes,
                "files_written": files_written, **figures}


def setup_logging() -> None:
    """INFO to stderr for airflow_lake, WARNING for everything else (py4j is chatty)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.WARNING)
    logging.getLogger("airflow_lake").setLevel(logging.INFO)


def execute(p: argparse.ArgumentParser, body: Callable[[JobRun], dict[str, Any]],
            argv: list[str] | None = None) -> dict[str, Any]:
    """Parse `argv` and run `body` in this process; the result, or `JobError` naming table
    and instant (argparse's own errors raise `SystemExit`)."""
    args = p.parse_args(argv)
    name = p.job_name  # type: ignore[attr-defined]
    job = JobRun(name, args, getattr(args, "instant", None))
    try:
        job.table_options, job.storage_options = split_options([*args.option, *take_secret_options()])
        result = body(job)
    except Exception as e:  # noqa: BLE001 - every failure becomes the job's one-line error
        if not isinstance(e, LakeError):
            log.error("%s: unexpected failure\n%s", name,
                      scrub(traceback.format_exc().rstrip(), {**job.table_options, **job.storage_options}))
        raise JobError(name, args.table, job.instant or noted_instant(e), e,
                       {**job.table_options, **job.storage_options}) from e
    log.info("%s: done on table %s, instant %s", name, args.table, result.get("instant"))
    return result


def run(p: argparse.ArgumentParser, body: Callable[[JobRun], dict[str, Any]],
        argv: list[str] | None = None) -> NoReturn:
    """The `__main__` of a job: `execute`, print the JSON result as stdout's last line, exit."""
    from airflow_lake.spark.pythonpath import prefer_installed_pyspark

    prefer_installed_pyspark()  # before pyspark is imported: its compiled copy, not Spark's zip
    setup_logging()
    result_file = p.parse_known_args(argv)[0].result_file
    try:
        result = execute(p, body, argv)
    except JobError as e:
        _stop_session()
        _write_result(result_file, {"error": str(e)})
        sys.stdout.flush()
        print(f"ERROR {e}", file=sys.stderr, flush=True)
        sys.exit(1)
    _stop_session()  # before the JSON line: nothing the shutdown prints may follow it
    _write_result(result_file, result)
    sys.stderr.flush()
    print(json.dumps(result, default=str), flush=True)
    sys.exit(0)


def _write_result(path: str | None, value: dict[str, Any]) -> None:
    """`value` as JSON to the `--result-file`, when one was given."""
    if path:
        with open(path, "w") as f:
            json.dump(value, f, default=str)


def _stop_session() -> None:
    if "pyspark" in sys.modules:
        from pyspark.sql import SparkSession

        active = SparkSession.getActiveSession()
        if active is not None:
            _release_accumulator_server(active.sparkContext)
            active.stop()


def _release_accumulator_server(sc: Any) -> None:
    """Let `stop()` skip waiting for pyspark's accumulator server. Its request handler polls
    for updates once a second and `stop()` waits for it to notice the shutdown (about 1 s of
    every job); once the job's actions are done no update is due, and its daemon thread ends
    with the process, which exits right after."""
    server = getattr(sc, "_accumulatorServer", None)
    if server is not None:
        server.server_shutdown = True  # (the handler's loop ends at its next wake)
        sc._accumulatorServer = None
