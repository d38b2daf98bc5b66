"""`LakeHook`: opens tables for timeline reads, submits the packaged jobs through the Spark
provider's `SparkSubmitHook`, and reads their results back from the timeline by run token."""

from __future__ import annotations

import os
import time
from collections.abc import Collection, Mapping, Sequence
from functools import cached_property
from typing import Any
from urllib.parse import quote

from airflow.sdk import Asset, BaseHook
from airflow.sdk.exceptions import AirflowNotFoundException

from airflow_lake.core.config import WriteOptions
from airflow_lake.core.objectstore import is_secret_option, scrub
from airflow_lake.core.storage import Storage, open_storage
from airflow_lake.core.table import Table, check_table_exists
from airflow_lake.core.timeline.active import ActiveTimeline
from airflow_lake.core.timeline.instant import Instant
from airflow_lake.core.txn.heartbeat import is_expired
from airflow_lake.core.write.client import TOKEN_KEY
from airflow_lake.hooks.spark_target import spark_target
from airflow_lake.hooks.submit import (
    JobSubmission,
    LakeJobError,
    job_options,
    python_env,
    result_file,
    secret_env,
)
from airflow_lake.location import LakeSettings, asset_uri
from airflow_lake.watch import TimelineWatch


class LakeHook(BaseHook):
    """Hudi tables at a path or URI: timeline reads (core, no Spark), and the packaged jobs
    (`spark_jobs/`) submitted through the Spark provider's `SparkSubmitHook`, their results
    read back from the timeline by run token (`submit_job`).

    :param lake_conn_id: a `lake` connection (base path, storage options, table options);
        default `lake_default`, which may be left undefined for tables given by absolute local
        path or by URI with ambient credentials (a connection named otherwise must exist);
        None: no connection.
    :param storage_options: file-system options overriding the connection's.
    """

    conn_name_attr = "lake_conn_id"
    default_conn_name = "lake_default"
    conn_type = "lake"
    hook_name = "Lake (Hudi tables)"

    def __init__(self, lake_conn_id: str | None = default_conn_name, storage_options: dict[str, Any] | None = None,
                 **kwargs) -> None:
        super().__init__(**kwargs)
        self.lake_conn_id = lake_conn_id
        self.extra_storage_options = dict(storage_options or {})

    @cached_property
    def settings(self) -> LakeSettings:
        """The connection's settings (empty without a connection, or when `lake_default` is not defined)."""
        try:
            conn = self.get_connection(self.lake_conn_id) if self.lake_conn_id else None
        except AirflowNotFoundException:
            if self.lake_conn_id != self.default_conn_name:
                raise
            conn = None
        return LakeSettings.from_connection(conn, self.lake_conn_id, self.extra_storage_options)

    # -- locations -------------------------------------------------------------------------
    def resolve(self, table_path: str) -> str:
        """Absolute path or URI of a table; relative paths are under the connection's base path."""
        return self.settings.resolve(table_path)

    def storage(self, table_path: str) -> Storage:
        return open_storage(self.resolve(table_path), self.settings.storage_options)

    def table_asset(self, table_path: str) -> Asset:
        return table_asset(self.resolve(table_path))

    # -- tables and timelines (no Spark) ---------------------------------------------------
    def get_table(self, table_path: str, options: dict[str, Any] | None = None) -> Table:
        """Open a table with the connection's table options (then `options`)."""
        merged = {**self.settings.table_options, **(options or {})}
        return Table.open(self.resolve(table_path), options=merged,
                          storage_options=self.settings.storage_options or None)

    def get_timeline(self, table_path: str) -> ActiveTimeline:
        """The table's active timeline, scanned now."""
        storage = self.storage(table_path)
        check_table_exists(storage)
        return ActiveTimeline(storage)

    def watch(self, table_path: str, actions=None) -> TimelineWatch:
        """A `TimelineWatch` (what completed since a baseline) over the table's timeline."""
        storage = self.storage(table_path)
        check_table_exists(storage)
        return TimelineWatch(storage, actions)

    # -- the result channel ------------------------------------------------------------------
    @staticmethod
    def run_token(context) -> str:
        """`dag_id/run_id/task_id/map_index` of a task instance: the same for each try."""
        ti = context["ti"]
        map_index = getattr(ti, "map_index", None)
        return f"{ti.dag_id}/{ti.run_id}/{ti.task_id}/{-1 if map_index is None else map_index}"

    def find_instant(self, table_path: str, token: str) -> dict[str, Any] | None:
        """The completed commit carrying `token` in `extraMetadata[airflow_lake.token]`, with its
        metadata summarised, or None."""
        timeline = self.get_timeline(table_path)
        instant = timeline.find_by_metadata(TOKEN_KEY, token)
        if instant is None:
            return None
        meta = timeline.stored_commit_metadata(instant)  # active, or archived since
        stats = meta.stats()
        return {
            "instant": instant.time,
            "action": instant.action,
            "operation_type": meta.operation_type,
            "compacted": meta.compacted,
            "extra_metadata": {k: v for k, v in meta.extra_metadata.items() if k != "schema"},
            "num_inserts": sum(s.num_inserts for s in stats),
            "num_updates": sum(s.num_update_writes for s in stats),
            "num_deletes": sum(s.num_deletes for s in stats),
            "num_writes": sum(s.num_writes for s in stats),
            "files": sorted(s.path for s in stats if s.path),
        }

    # -- job submission ----------------------------------------------------------------------
    def submission(self, job: str, table_path: str, args: Sequence[str] = (), *, token: str | None = None,
                   spark_conn_id: str = "spark_default", spark_conf: Mapping[str, Any] | None = None,
                   spark_args: Mapping[str, Any] | None = None, env_vars: Mapping[str, Any] | None = None,
                   table_options: Mapping[str, Any] | None = None, fast_start: bool = True,
                   where: str | None = None) -> JobSubmission:
        """The spark-submit of `spark_jobs/<job>.py` on the table, as `SparkSubmitHook` arguments:
        `--py-files` the package zip, master and deploy mode from the Spark connection (which
        must exist, see `spark_target`), `spark_conf` as `--conf`, `spark_args` (any other
        `SparkSubmitHook` keyword), `--option` from the lake connection's storage and table
        options (then `table_options`), `--run-token token`. In client mode `env_vars`, this
        Python (`PYSPARK_PYTHON`, unless configured) and the secret options go to spark-submit's
        environment, and the job writes its result to a local `--result-file`.
        `fast_start`: a client-mode driver gets `airflow_lake.spark.startup`'s JVM options (quick
        JIT, or for a large upsert on a local master the balanced one; a class-data archive)
        unless the driver's Java options are set by the user.
        `where` names the caller in errors (default: the table)."""
        from airflow_lake.spark.packaging import job_path, package_zip  # no pyspark import
        from airflow_lake.spark.startup import driver_moves_rows, driver_startup, user_java_options

        application = str(job_path(job))  # an unknown job fails here, naming the known ones
        location = self.resolve(table_path)
        extra = dict(spark_args or {})
        target = spark_target(spark_conn_id, extra, where or f"table {location}")
        options = {**self.settings.table_options, **(table_options or {})}
        argv = ["--table", location, *job_options(options, self.settings.storage_options)]
        if token:
            argv += ["--run-token", token]
        argv += [str(a) for a in args]
        py_files = ",".join(p for p in (str(package_zip()), extra.pop("py_files", None)) if p)
        conf = dict(spark_conf or {})
        arguments = {**extra, "conf": conf, "conn_id": spark_conn_id, "py_files": py_files,
                     "name": extra.get("name", f"airflow-lake {job}"), "application_args": argv}
        submission = JobSubmission(job, application, arguments, target)
        secrets = secret_env(options, self.settings.storage_options)
        if target.cluster:
            arguments["env_vars"] = dict(env_vars or {}) or None
            if secrets:
                names = sorted(k for k in {**options, **self.settings.storage_options} if is_secret_option(k))
                self.log.warning("table %s: secret options (%s) reach a cluster-mode driver only through the "
                                 "environment its cluster gives it; they are never put on spark-submit's command "
                                 "line", location, ", ".join(names))
            return submission
        configured = "spark.pyspark.python" in conf or "spark.pyspark.driver.python" in conf
        submission.env = {k: str(v) for k, v in (dict(env_vars or {}) if configured else python_env(env_vars)).items()}
        submission.env.update(secrets)
        submission.result_file = result_file(job)
        argv += ["--result-file", str(submission.result_file)]
        key = user_java_options(conf, extra.get("properties_file")) if fast_start else None
        if key is not None:
            moves_rows = driver_moves_rows(job, target.master, argv, self.settings.storage_options)
            submission.startup = driver_startup(env={**os.environ, **submission.env}, job=job, moves_rows=moves_rows)
            conf[key] = submission.startup.java_options
        return submission

    def submit_job(self, job: str, table_path: str, args: Sequence[str] = (), *, token: str | None = None,
                   actions: Collection[str] | None = None, pending_done: bool = False,
                   wait_timeout: float | None = None, **submit: Any) -> dict[str, Any]:
        """Run job `job` on the table and return its result (the job's JSON fields and
        `already_done`).

        With a run `token`: an instant already committed with it is returned without
        submitting anything; an attempt still running with it (live heartbeat) is waited for,
        never rolled back. After the job exits, the instant carrying the token is read from the
        timeline (the result channel, also in cluster mode) and cross-checked with the job's
        JSON result when it wrote one (client mode). `actions` / `pending_done` say which
        instants the job makes (`find_result`). `submit`: `submission` keywords."""
        if token:
            done = self.await_attempt(table_path, token, actions=actions, pending_done=pending_done,
                                      timeout=wait_timeout, table_options=submit.get("table_options"))
            if done is not None:
                self.log.info("table %s: run token %s already committed %s: not resubmitting", table_path, token,
                              done["instant"])
                return done
        submission = self.submission(job, table_path, args, token=token, **submit)
        if submission.tracks_driver():
            raise LakeJobError(f"{job}: table {self.resolve(table_path)}: spark-submit returns before a tracked "
                               "cluster-mode driver ends; run the job with the airflow_lake operators, which track "
                               "and reattach to it")
        self.run_spark_submit(submission)
        return self.job_result(job, table_path, token, submission.result_line, actions=actions,
                               pending_done=pending_done)

    def run_spark_submit(self, submission: JobSubmission) -> str | None:
        """`submission.submit()`: the driver id (standalone cluster mode) or None; a failed job
        raises `LakeJobError` with the job's own one-line error when it wrote one."""
        ok = False
        try:
            driver = submission.submit()
            ok = True
            return driver
        except Exception as e:
            startup = submission.startup
            if startup is not None and startup.settle(False, submission.result_line is not None):
                # the job wrote its result, then its JVM failed writing the class-data archive
                self.log.warning("%s: the job completed, but its driver could not write the class-data archive "
                                 "%s at exit (%s); later jobs start without one", submission.job, startup.archive, e)
                return None
            if submission.error_line:
                raise LakeJobError(submission.error_line) from e
            raise LakeJobError(f"{submission.job} failed: {e}") from e
        finally:
            if submission.startup is not None:  # a class-data archive this run wrote moves into place
                submission.startup.finish(ok)

    def find_result(self, table_path: str, token: str, *, actions: Collection[str] | None = None,
                    pending_done: bool = False) -> dict[str, Any] | None:
        """The result of the instant started with `token` that is done (completed; or, with
        `pending_done`, a plan left requested such as a compaction schedule), else None."""
        timeline = self.get_timeline(table_path)
        instant = timeline.find_token(token, pending=pending_done, actions=actions)
        return None if instant is None else self._summary(timeline, instant)

    def await_attempt(self, table_path: str, token: str, *, actions: Collection[str] | None = None,
                      pending_done: bool = False, timeout: float | None = None, poll: float = 5.0,
                      table_options: Mapping[str, Any] | None = None) -> dict[str, Any] | None:
        """The done result of `token` (`find_result`); while an attempt with `token` is still
        pending and its heartbeat alive (a previous try's job still running), wait for it to
        complete or die. None when nothing is done: the caller submits (the job rolls back a
        dead attempt under the table lock). `table_options`: the job's, over the connection's
        (they say the heartbeat interval)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        if not self.storage(table_path).exists(".hoodie"):
            return None  # no table yet (the job may create it): nothing was done
        while True:
            done = self.find_result(table_path, token, actions=actions, pending_done=pending_done)
            if done is not None:
                return {**done, "already_done": True}
            alive = self.live_attempt(table_path, token, actions=actions, table_options=table_options)
            if alive is None:
                return None
            if deadline is not None and time.monotonic() > deadline:
                raise LakeJobError(f"table {self.resolve(table_path)}: instant {alive} of run token {token} is "
                                   f"still running (live heartbeat) after {timeout:.0f} s")
            self.log.info("table %s: instant %s of run token %s is still running: waiting", table_path, alive, token)
            time.sleep(poll)

    def live_attempt(self, table_path: str, token: str, *, actions: Collection[str] | None = None,
                     table_options: Mapping[str, Any] | None = None) -> str | None:
        """The pending instant started with `token` whose heartbeat is alive, if any, by the
        heartbeat settings the job runs with: the connection's table options, then `table_options`."""
        timeline = self.get_timeline(table_path)
        instant = timeline.find_token(token, pending=True, actions=actions)
        if instant is None or instant.is_completed:
            return None
        table = self.get_table(table_path, dict(table_options or {}))
        interval = table.option(WriteOptions.HEARTBEAT_INTERVAL_MS)
        misses = table.option(WriteOptions.HEARTBEAT_TOLERABLE_MISSES)
        if not timeline.storage.exists(f".hoodie/.heartbeat/{instant.time}"):
            return None  # a requested plan or a dead attempt: nothing runs it
        return None if is_expired(timeline.storage, instant.time, interval, misses) else instant.time

    def job_result(self, job: str, table_path: str, token: str | None, line: dict[str, Any] | None, *,
                   actions: Collection[str] | None = None, pending_done: bool = False) -> dict[str, Any]:
        """A finished job's result: the instant its token names on the timeline, the job's JSON
        line (client mode) cross-checked against it; the timeline alone in cluster mode."""
        found = self.find_result(table_path, token, actions=actions, pending_done=pending_done) if token else None
        if line is None:
            if found is None:
                self.log.info("table %s: job %s left no instant with run token %s and no result line (nothing "
                              "to do, or its output is on the cluster)", table_path, job, token)
                return {"job": job, "table": self.resolve(table_path), "instant": None, "action": None,
                        "already_done": False, "source": "timeline"}
            return {**found, "job": job, "already_done": False, "source": "timeline"}
        if found is not None and line.get("instant") != found["instant"]:
            raise LakeJobError(f"{job}: table {self.resolve(table_path)}: the job reported instant "
                               f"{line.get('instant')} but run token {token} names {found['instant']} on the timeline")
        return {**line, "source": "job"}

    def _summary(self, timeline: ActiveTimeline, instant: Instant) -> dict[str, Any]:
        """An instant's result as the jobs print it, from the timeline: counts for commits."""
        result: dict[str, Any] = {"table": timeline.storage.uri, "instant": instant.time, "action": instant.action}
        if instant.is_completed and instant.comparable_action in ("commit", "deltacommit", "replacecommit"):
            meta = timeline.stored_commit_metadata(instant)  # active, or archived since
            stats = meta.stats()
            result.update(
                operation=(meta.operation_type or "").lower() or None,
                inserts=sum(s.num_inserts for s in stats),
                # (a compaction changes no record: its merge is counted by log_records, as its job says)
                updates=0 if meta.compacted else sum(s.num_update_writes for s in stats),
                deletes=sum(s.num_deletes for s in stats),
                files_written=len([s for s in stats if s.path]),
                records_written=sum(s.num_writes for s in stats),
                replaced_file_groups=len(meta.replaced_file_ids()))
            if meta.compacted:
                result["log_records"] = sum(s.log_records for s in stats)
        return result

    def test_connection(self) -> tuple[bool, str]:
        """The base path (when set) must be reachable."""
        base = self.settings.base_path
        if not base:
            return True, "no base_path: tables must be given by absolute path or URI"
        try:
            open_storage(base, self.settings.storage_options).list("")
        except Exception as e:  # surfaced to the UI as text
            return False, f"cannot list {base}: {scrub(str(e), self.settings.storage_options)}"
        return True, f"listed {base}"


def with_asset(kwargs: dict[str, Any], field: str, asset: Asset) -> None:
    """Add `asset` to a task's `inlets` or `outlets` keyword (`field`) unless it is there."""
    assets = list(kwargs.pop(field, None) or [])
    if asset not in assets:
        assets.append(asset)
    kwargs[field] = assets


PAGE_KEY = "lake_table_page"


def table_asset(location: str, *, name: str | None = None) -> Asset:
    """The Airflow Asset of the table at an absolute path or URI (see `asset_uri`); its extra
    links to the table's page in the UI (`PAGE_KEY`: the Lake tables page, relative to the
    UI's base URL)."""
    uri = asset_uri(location)
    return Asset(uri=uri, name=name or uri, extra={PAGE_KEY: f"lake/table?uri={quote(uri, safe=':/')}"})
