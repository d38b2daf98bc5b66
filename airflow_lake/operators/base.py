"""`LakeJobOperator`: what every operator shares. Arguments become one packaged job's flags;
`LakeHook` submits it through the Spark provider's `SparkSubmitHook` and reads the result back
from the table's timeline by run token (`dag_id/run_id/task_id/map_index`, the same for every
try of a task instance).

Retries never run a job twice:

- before submitting, an instant already done with the run token is returned as the result,
  and an attempt still running with it (live heartbeat) is waited for, never rolled back;
- with `durable=True` (the default, Airflow 3.3's `ResumableJobMixin`), the submission is kept
  in the task state store: a retry reattaches to a cluster-mode driver still running (through
  the Spark provider's own trackers: standalone driver id, YARN application, Kubernetes pod),
  and in client mode it finds the finished job's result there and checks it on the timeline.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Mapping, Sequence
from functools import cached_property
from typing import TYPE_CHECKING, Any, ClassVar

from airflow.sdk import Asset, BaseOperator, ResumableJobMixin
from airflow.sdk.exceptions import AirflowSkipException
from airflow.sdk.log import mask_secret

from airflow_lake.core.errors import InvalidOptionError
from airflow_lake.core.objectstore import is_secret_option
from airflow_lake.core.vocabulary import is_table_option
from airflow_lake.hooks.lake import LakeHook, table_asset, with_asset
from airflow_lake.hooks.submit import LakeJobError
from airflow_lake.location import is_absolute
from airflow_lake.operators.metrics import emit_job

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_lake.hooks.submit import JobSubmission

COMMON_TEMPLATE_FIELDS = ("table_path", "lake_conn_id", "storage_options", "table_options", "spark_conn_id",
                          "spark_conf", "env_vars")
EVENT_KEYS = ("instant", "action", "operation", "inserts", "updates", "deletes", "files_written", "records_written",
              "replaced_file_groups")
CHANGE_COUNTS = ("records_written", "deletes", "replaced_file_groups", "files_deleted", "file_groups")
"""Counts of a job's result of which one not zero means its instant changed the table."""


class TimelineReadLineage:
    """OpenLineage of a task that reads a table's timeline only (`table_path`, `lake_conn_id`,
    `storage_options`): the table as input. The OpenLineage provider is imported only here."""

    def _read_lineage(self):
        from airflow_lake.operators.lineage import read_lineage

        return read_lineage(LakeHook(self.lake_conn_id, self.storage_options), self.table_path)

    def get_openlineage_facets_on_start(self):
        return self._read_lineage()

    def get_openlineage_facets_on_complete(self, task_instance):
        return self._read_lineage()

    def get_openlineage_facets_on_failure(self, task_instance):
        return self._read_lineage()


class LakeJobOperator(ResumableJobMixin, BaseOperator):
    """Runs one packaged job (`spark_jobs/<job>.py`) on a table with `spark-submit`.

    :param table_path: absolute path or URI of the table, or a path relative to the lake
        connection's base path (templated).
    :param lake_conn_id: a `lake` connection (base path, storage options, default table
        options); default `lake_default`, which may be left undefined for absolute local paths
        and URIs with ambient credentials (templated).
    :param storage_options: file-system options over the connection's (templated).
    :param table_options: `hoodie.*` options over the connection's, given to the job as
        `--option` (templated).
    :param spark_conn_id: the Spark provider's connection giving master, deploy mode, queue,
        binary (default `spark_default`; templated).
    :param spark_conf: `--conf` settings (templated).
    :param spark_args: any other `SparkSubmitHook` keyword (`executor_memory`, `num_executors`,
        `archives`, `py_files` added to the package zip, `deploy_mode`, `name`, ...).
    :param env_vars: environment of spark-submit; `PYSPARK_PYTHON` and
        `PYSPARK_DRIVER_PYTHON` default to the worker's Python in client mode (templated).
    :param asset: the table's Asset, declared as outlet and given an event carrying the
        instant and counts; default `hudi:/abs/path` (`hudi+s3://...`) of `table_path` for the
        operators that change the table's files, which needs an absolute, untemplated path
        (else pass `asset=table_asset(...)`, or `asset=False` for none).
    :param wait_timeout: seconds to wait for a previous try's job still running with this
        task's run token (default: no limit but the task's own timeout).
    :param fast_start: give a client-mode driver JVM options that cut Spark's start-up (quick
        JIT, or C2 for the hottest code where a local-master driver will move many rows; a
        class-data archive of Spark's classes written by the first job on the machine,
        see `airflow_lake.spark.startup`); skipped when `spark.driver.extraJavaOptions` and
        `spark.driver.defaultJavaOptions` are both set by you (default True).
    :param durable: keep the submission in the task state store so a retry reattaches to it
        (Airflow 3.3 `ResumableJobMixin`; default True).
    """

    job: ClassVar[str]
    # the instants the job makes, for the run-token lookup (completed action names)
    result_actions: ClassVar[Collection[str] | None] = None
    # a plan left requested counts as done (compaction schedule)
    pending_done: ClassVar[bool] = False
    # counts of the result of which one not zero means the instant changed the table
    change_counts: ClassVar[tuple[str, ...]] = CHANGE_COUNTS
    # declares the table's Asset as outlet by default
    writes_files: ClassVar[bool] = True
    external_id_key = "airflow_lake.job"
    template_fields: Sequence[str] = COMMON_TEMPLATE_FIELDS
    # arguments that must be one string (or None) once rendered: a list or dict there is refused
    text_fields: ClassVar[tuple[str, ...]] = ("table_path", "lake_conn_id", "spark_conn_id")
    template_fields_renderers = {"table_options": "json", "storage_options": "json", "spark_conf": "json"}
    ui_color = "#d8e8f0"

    def __init__(self, *, table_path: str, lake_conn_id: str | None = "lake_default",
                 storage_options: dict[str, Any] | None = None, table_options: dict[str, Any] | None = None,
                 spark_conn_id: str = "spark_default", spark_conf: dict[str, Any] | None = None,
                 spark_args: dict[str, Any] | None = None, env_vars: dict[str, Any] | None = None,
                 asset: Asset | bool | None = None, wait_timeout: float | None = None, fast_start: bool = True,
                 **kwargs) -> None:
        asset = self._default_asset(table_path, asset, kwargs.get("task_id"))
        if asset is not None:
            with_asset(kwargs, "outlets", asset)
        super().__init__(**kwargs)
        self.table_path = table_path
        self.lake_conn_id = lake_conn_id
        self.storage_options = storage_options
        self.table_options = table_options
        self.spark_conn_id = spark_conn_id
        self.spark_conf = spark_conf
        self.spark_args = spark_args
        self.env_vars = env_vars
        self.asset = asset
        self.wait_timeout = wait_timeout
        self.fast_start = flag(self, "fast_start", fast_start)
        self._token: str | None = None
        self._result: dict[str, Any] | None = None
        self._outcome: dict[str, Any] | None = None  # the finished job's result (for the metrics)
        self._submission: JobSubmission | None = None

    def _default_asset(self, table_path: str, asset: Asset | bool | None, task_id: str | None) -> Asset | None:
        if asset is False or (asset is None and not self.writes_files):
            return None
        if isinstance(asset, Asset):
            return asset
        if asset not in (None, True):
            raise InvalidOptionError(f"{type(self).__name__} {task_id}: asset must be an Asset, True, False or "
                                     f"None, got {asset!r}")
        if not isinstance(table_path, str) or "{{" in table_path or not is_absolute(table_path):
            raise InvalidOptionError(
                f"{type(self).__name__} {task_id}: table_path {table_path!r} is relative or templated, so the "
                "table's Asset (hudi:/abs/path, hudi+s3://bucket/path) cannot be named when the DAG is parsed "
                "(a relative path is joined to the lake connection's base_path only when the task runs): pass "
                "asset=table_asset('<the table's absolute path or URI>') from airflow_lake.hooks, or asset=False "
                "for no Asset (docs/operators.md, 'Relative or templated table paths')")
        return table_asset(table_path)

    # -- what subclasses give ------------------------------------------------------------------
    @property
    def writes_table(self) -> bool:
        """Whether a run may change the table (its lineage output): the job writes files."""
        return self.writes_files

    def job_args(self) -> list[str]:
        """The job's own flags, from the rendered arguments (raise `InvalidOptionError`)."""
        return []

    def to_xcom(self, result: dict[str, Any], context: Context) -> Any:
        """The task's return value (its XCom) from the job's result."""
        return result

    def event_extra(self, result: dict[str, Any]) -> dict[str, Any]:
        """The asset event's extra: the instant and the counts."""
        return {key: result.get(key) for key in EVENT_KEYS if key in result}

    # -- running -------------------------------------------------------------------------------
    @cached_property
    def hook(self) -> LakeHook:
        return LakeHook(self.lake_conn_id, self.storage_options)

    def invalid(self, message: str) -> InvalidOptionError:
        """A bad argument, naming the task and the table."""
        return InvalidOptionError(f"{type(self).__name__} {self.task_id}: table {self.table_path}: {message}")

    def check_arguments(self) -> None:
        """The rendered common arguments: mappings with string keys and plain values (a
        templated dict rendered as a string, a list, a number fail here naming the argument;
        secret values are never printed). Secret storage and table option values are masked in the task log."""
        storage = mapping(self, "storage_options", self.storage_options, secret=True)
        table = mapping(self, "table_options", self.table_options, secret=True)
        mapping(self, "spark_conf", self.spark_conf)
        mapping(self, "spark_args", self.spark_args)
        mapping(self, "env_vars", self.env_vars, secret=True)
        seconds(self, "wait_timeout", self.wait_timeout)
        for name in self.text_fields:
            value = getattr(self, name, None)
            if value is not None and not isinstance(value, str):
                raise self.invalid(f"{name} must be a string, got {type(value).__name__} {_short(value)}")
        bad = next((k for k in table if not is_table_option(k)), None)
        if bad is not None:
            raise self.invalid(f"table_options key {bad!r} is not a hoodie.* or airflow_lake.* key (storage options "
                               "go in storage_options)")
        bad = next((k for k in storage if is_table_option(k)), None)
        if bad is not None:
            raise self.invalid(f"storage_options key {bad!r} is a table option (it goes in table_options)")
        for key, value in {**storage, **table}.items():
            if is_secret_option(key) and value not in (None, ""):
                mask_secret(str(value), key)

    def execute(self, context: Context) -> Any:
        start = time.monotonic()
        try:
            xcom = self._execute(context)
        except AirflowSkipException:  # (nothing to do: a compaction not due)
            emit_job(self.job, self.table_path, outcome="skipped", seconds=time.monotonic() - start)
            raise
        except BaseException:
            emit_job(self.job, self.table_path, outcome="failure", seconds=time.monotonic() - start)
            raise
        emit_job(self.job, self.table_path, outcome="success", seconds=time.monotonic() - start, result=self._outcome)
        return xcom

    def _execute(self, context: Context) -> Any:
        self.check_arguments()
        self._args = self.job_args()
        self._token = LakeHook.run_token(context)
        self.log.info("table %s: %s with run token %s", self.table_path, self.job, self._token)
        result = self.execute_resumable(context)
        if result is None:
            raise LakeJobError(f"{self.job}: table {self.table_path}: no result")
        self.log.info("table %s: %s result: %s", self.table_path, self.job, result)
        self._outcome = result
        if self.asset is not None:
            if self.changed_table(result):
                context["outlet_events"][self.asset].extra = self.event_extra(result)
            else:  # Airflow emits an event for each declared outlet of a successful task: undeclare it
                self.log.info("table %s: %s changed nothing: no event for asset %s", self.table_path, self.job,
                              self.asset.uri)
                self.outlets = [o for o in self.outlets if o != self.asset]
        return self.to_xcom(result, context)

    @classmethod
    def changed_table(cls, result: dict[str, Any]) -> bool:
        """Whether the job changed the table: it completed an instant (a compaction not due,
        a clean with nothing to delete complete none) and, when its result counts what the
        instant did (`change_counts`), one of those counts is not zero: an upsert of an empty
        source writes no record, an insert_overwrite of one replaces file groups. No change, no
        asset event."""
        if not result.get("instant"):
            return False
        counted = [key for key in cls.change_counts if key in result]
        return not counted or any(result[key] for key in counted)

    def submission(self) -> JobSubmission:
        """This task's spark-submit (`LakeHook.submission`), built once per try."""
        if self._submission is None:
            self._submission = self.hook.submission(
                self.job, self.table_path, self._args, token=self._token, spark_conn_id=self.spark_conn_id,
                spark_conf=self.spark_conf, spark_args=self.spark_args, env_vars=self.env_vars,
                table_options=self.table_options, fast_start=self.fast_start,
                where=f"{type(self).__name__} {self.task_id}: table {self.table_path}")
        return self._submission

    def _lookup(self) -> dict[str, Any]:
        return {"actions": self.result_actions, "pending_done": self.pending_done}

    # -- ResumableJobMixin -----------------------------------------------------------------------
    def submit_job(self, context: Context) -> dict[str, Any] | None:
        """Submit unless the run token's result is already on the timeline. The external id:
        `{"spark": id}` for a cluster-mode driver the Spark provider tracks, else (client mode,
        the job already finished) `{"token", "result"}`."""
        hook = self.hook
        timeout = seconds(self, "wait_timeout", self.wait_timeout)
        done = hook.await_attempt(self.table_path, self._token, timeout=timeout,
                                  table_options=self.table_options, **self._lookup())
        if done is not None:
            self.log.info("table %s: run token %s already has %s %s: not resubmitting", self.table_path,
                          self._token, done.get("action"), done["instant"])
            self._result = done
            return None
        submission = self.submission()
        if submission.tracks_driver():
            return {"spark": self._spark_operator().submit_job(context)}
        hook.run_spark_submit(submission)
        self._result = hook.job_result(self.job, self.table_path, self._token, submission.result_line,
                                       **self._lookup())
        return {"token": self._token, "result": self._result}

    def get_job_status(self, external_id: Any, context: Context) -> str:
        if "spark" in external_id:
            return "spark:" + self._spark_operator().get_job_status(external_id["spark"], context)
        stored = external_id.get("result") or {}
        if not stored.get("instant"):
            return "lake:SUCCEEDED"  # nothing was written: the stored result stands
        found = self.hook.find_result(self.table_path, self._token, **self._lookup())
        if found is not None and found["instant"] == stored["instant"]:
            return "lake:SUCCEEDED"
        if self.hook.live_attempt(self.table_path, self._token, actions=self.result_actions,
                                  table_options=self.table_options):
            return "lake:RUNNING"
        return "lake:FAILED"  # rolled back or restored away since: run again

    def is_job_active(self, status: str) -> bool:
        kind, _, value = status.partition(":")
        if kind == "spark":
            return self._spark_operator().is_job_active(value)
        return value == "RUNNING"

    def is_job_succeeded(self, status: str) -> bool:
        kind, _, value = status.partition(":")
        if kind == "spark":
            return self._spark_operator().is_job_succeeded(value)
        return value == "SUCCEEDED"

    def poll_until_complete(self, external_id: Any, context: Context) -> None:
        if external_id is None or self._result is not None:
            return
        if "spark" in external_id:
            self._spark_operator().poll_until_complete(external_id["spark"], context)
            return
        done = self.hook.await_attempt(self.table_path, self._token,
                                       timeout=seconds(self, "wait_timeout", self.wait_timeout),
                                       table_options=self.table_options, **self._lookup())
        if done is None:
            raise LakeJobError(f"{self.job}: table {self.table_path}: the attempt of run token {self._token} "
                               "stopped without completing; the next try submits it again")
        self._result = done

    def get_job_result(self, external_id: Any, context: Context) -> dict[str, Any] | None:
        if self._result is not None:
            return self._result
        if external_id is not None and "result" in external_id:
            return {**external_id["result"], "already_done": True}
        # a cluster-mode driver: its output stayed on the cluster, the timeline has the result
        return self.hook.job_result(self.job, self.table_path, self._token, None, **self._lookup())

    # -- OpenLineage (the provider is optional: imported only here) -------------------------------
    def lineage_inputs(self) -> list[str]:
        """The locations the job reads (the table; a write: its source)."""
        return [self.table_path]

    def get_openlineage_facets_on_start(self):
        from airflow_lake.operators.lineage import operator_lineage

        return operator_lineage(self, None)

    def get_openlineage_facets_on_complete(self, task_instance):
        from airflow_lake.operators.lineage import operator_lineage

        return operator_lineage(self, self._outcome, done=True)

    def get_openlineage_facets_on_failure(self, task_instance):
        from airflow_lake.operators.lineage import operator_lineage

        return operator_lineage(self, None)

    def _spark_operator(self):
        """The Spark provider's own `SparkSubmitOperator` (its tracking of a cluster-mode driver)
        of this task's submission."""
        return self.submission().spark_operator(f"{self.task_id}__spark_submit", self.durable)

    def on_kill(self) -> None:
        if self._submission is not None:
            self._submission.on_kill()


def mapping(op: LakeJobOperator, name: str, value: Any, *, secret: bool = False) -> dict[str, Any]:
    """A rendered dict argument (None: empty) with string keys and scalar (or list) values."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        shown = f"a {type(value).__name__}" if secret else f"{type(value).__name__} {_short(value)}"
        raise op.invalid(f"{name} must be a dict, got {shown} (a templated dict renders as a string unless the "
                         "DAG sets render_template_as_native_obj=True)")
    for key, item in value.items():
        if not isinstance(key, str) or not key.strip():
            raise op.invalid(f"{name} keys must be non-empty strings, got {key!r}")
        if not isinstance(item, (str, int, float, bool, type(None), list, tuple)) or (
                isinstance(item, (list, tuple)) and not all(isinstance(i, (str, int, float)) for i in item)):
            what = "a secret" if secret and is_secret_option(key) else _short(item)
            raise op.invalid(f"{name}[{key!r}] must be a string, number, boolean or list, got "
                             f"{type(item).__name__} {what}")
    return dict(value)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 200 else text[:200] + "..."


def none_if_empty(value: Any) -> Any:
    """None for None, "" and "None" (what `{{ ti.xcom_pull(...) }}` renders for no value)."""
    if value is None or (isinstance(value, str) and value.strip() in ("", "None")):
        return None
    return value


def choice(op: LakeJobOperator, name: str, value: str | None, choices: Sequence[str], norm=str) -> str | None:
    """`value` normalised by `norm` if it is one of `choices` (None passes), else `InvalidOptionError`."""
    if value is None:
        return None
    if not isinstance(value, str) or norm(value) not in choices:
        raise op.invalid(f"{name} must be one of {', '.join(choices)}, got {value!r}")
    return norm(value)


def fields(op: LakeJobOperator, name: str, value: str | Sequence[str] | None, *, required: bool = False) -> str:
    """A field name or list of names as the jobs take them (`a,b`)."""
    value = none_if_empty(value)
    if value is not None and not isinstance(value, str) and not (
            isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value)):
        raise op.invalid(f"{name} must be a field name or a list of field names, got {_short(value)}")
    names = [value] if isinstance(value, str) else list(value or [])
    names = [n.strip() for part in names for n in str(part).split(",") if n.strip()]
    if required and not names:
        raise op.invalid(f"{name} is empty")
    return ",".join(names)


def as_flag(value: Any) -> bool | None:
    """True or False for a boolean or its text in any case (as a template renders it), else None."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    return None


def flag(op, name: str, value: Any) -> bool:
    """A boolean argument (`as_flag`), else `InvalidOptionError` naming it: a non-empty string
    such as "false" is not taken as true."""
    parsed = as_flag(value)
    if parsed is None:
        raise op.invalid(f"{name} must be True or False, got {_short(value)}")
    return parsed


def seconds(op, name: str, value: Any) -> float | None:
    """An optional number of seconds, at least 0 (templated values arrive as strings)."""
    value = none_if_empty(value)
    if value is None:
        return None
    try:
        number = float(value) if not isinstance(value, bool) else -1.0
    except (TypeError, ValueError):
        number = -1.0
    if not number >= 0:
        raise op.invalid(f"{name} must be a number of seconds, at least 0, got {_short(value)}")
    return number


def count(op: LakeJobOperator, name: str, value: Any, *, minimum: int = 0) -> int | None:
    """An optional whole number of at least `minimum` (templated values arrive as strings)."""
    value = none_if_empty(value)
    if value is None:
        return None
    try:
        number = int(value)
    except (TypeError, ValueError):
        number = None
    if number is None or number < minimum or (isinstance(value, float) and value != number):
        raise op.invalid(f"{name} must be a whole number of at least {minimum}, got {value!r}")
    return number
