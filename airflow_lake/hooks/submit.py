"""Submitting a packaged job (`spark_jobs/`) through the Spark provider, by its public API
only: `SparkSubmitHook` / `SparkSubmitOperator` constructor arguments and their methods.

A `JobSubmission` holds those arguments. In client mode (the driver runs here) it calls
`SparkSubmitHook.submit(application, env=...)`, handing spark-submit's environment (this
Python for the driver and executors, the secret options) to the process, never to the
command line; the job writes its JSON result, or its one-line error, to `--result-file`, so
a failure says what the job said instead of an exit code. In a cluster mode the provider
tracks (standalone, YARN through its ResourceManager, Kubernetes through its API), a
`SparkSubmitOperator` built from the same arguments submits and tracks the driver, and the
result is read from the table's timeline by run token (`LakeHook.job_result`).
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook
from airflow.sdk.exceptions import AirflowException

from airflow_lake.core.objectstore import is_secret_option, split_secrets
from airflow_lake.core.vocabulary import is_table_option
from airflow_lake.hooks.spark_target import SparkTarget
from airflow_lake.spark.options import encode
from airflow_lake.spark.startup import DriverStartup

PYTHON_ENV = ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")


class LakeJobError(AirflowException):
    """A packaged job failed; the message is the job's own one-line error when it printed one."""


@dataclass
class JobSubmission:
    """One packaged job's spark-submit: the provider's keyword arguments (`arguments`, the
    same for `SparkSubmitHook` and `SparkSubmitOperator`), where it goes (`target`), and in
    client mode spark-submit's added environment (`env`) and the job's `result_file`."""

    job: str
    application: str
    arguments: dict[str, Any]
    target: SparkTarget
    env: dict[str, str] = field(default_factory=dict)
    result_file: Path | None = None
    startup: DriverStartup | None = None  # the driver's start-up options (client mode)
    result: dict[str, Any] | None = None  # what the job wrote to `result_file`
    hook: SparkSubmitHook | None = None  # the provider's hook, once submitted here
    operator: Any = None  # the provider's `SparkSubmitOperator`, once tracking a cluster-mode driver

    def tracks_driver(self) -> bool:
        """Whether spark-submit returns before the driver ends and the provider tracks it."""
        return self.target.tracks_driver(self.arguments)

    @property
    def result_line(self) -> dict[str, Any] | None:
        """The job's JSON result (client mode), None when it wrote none."""
        return self.result if self.result and "error" not in self.result else None

    @property
    def error_line(self) -> str | None:
        """The job's one-line error (client mode), None when it wrote none."""
        return (self.result or {}).get("error")

    def spark_hook(self) -> SparkSubmitHook:
        """A `SparkSubmitHook` of the arguments."""
        return SparkSubmitHook(**self.arguments)

    def submit(self) -> str | None:
        """Run spark-submit to its end (`SparkSubmitHook.submit`), then read the job's result
        file; the driver id in standalone cluster mode, else None."""
        self.hook = self.spark_hook()
        try:
            return self.hook.submit(self.application, **({"env": {**os.environ, **self.env}} if self.env else {}))
        finally:
            self.result = self._read_result()

    def spark_operator(self, task_id: str, durable: bool):
        """The provider's `SparkSubmitOperator` of the same arguments, which submits a
        cluster-mode driver and tracks it (`ResumableJobMixin` methods), also after a retry."""
        from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

        if self.operator is None:
            self.operator = SparkSubmitOperator(task_id=task_id, application=self.application, durable=durable,
                                                **self.arguments)
        return self.operator

    def on_kill(self) -> None:
        target = self.operator if self.operator is not None else self.hook
        if target is not None:
            target.on_kill()

    def _read_result(self) -> dict[str, Any] | None:
        if self.result_file is None:
            return None
        try:
            text = self.result_file.read_text()
            self.result_file.unlink()
        except FileNotFoundError:
            return None
        try:
            value = json.loads(text) if text.strip() else None
        except ValueError:
            return None
        return value if isinstance(value, dict) else None


_RESULTS: list = []  # [folder, pid]: this process's folder of result files, removed at its exit


def _remove_results(folder: str, pid: int) -> None:
    if os.getpid() == pid:  # (not in a forked child that inherited the handler)
        shutil.rmtree(folder, ignore_errors=True)


def result_file(job: str) -> Path:
    """A new, empty local file for a client-mode job's result (`--result-file`), in a folder of
    this process's own that goes when the process exits (a submission built and never run
    leaves nothing behind; a process killed outright leaves its folder)."""
    if not _RESULTS or _RESULTS[1] != os.getpid() or not os.path.isdir(_RESULTS[0]):
        _RESULTS[:] = [tempfile.mkdtemp(prefix="airflow-lake-results-"), os.getpid()]
        atexit.register(_remove_results, *_RESULTS)
    handle, name = tempfile.mkstemp(prefix=f"{job}-", suffix=".json", dir=_RESULTS[0])
    os.close(handle)
    return Path(name)


def job_options(table_options: Mapping[str, Any], storage_options: Mapping[str, Any]) -> list[str]:
    """`--option KEY=VALUE` arguments: table options as Hudi strings, storage options as JSON
    literals (so `"0123"` stays a string and `true` a boolean, see `airflow_lake.spark.job`).
    Secret options (`is_secret_option`) are left out: they travel in `secret_env`."""
    args: list[str] = []
    for key, value in table_options.items():
        if not is_table_option(key):
            raise ValueError(f"table option {key!r} is not a hoodie.* or airflow_lake.* key")
        if not is_secret_option(key):
            args += ["--option", f"{key}={_hudi_string(value)}"]
    for key, value in storage_options.items():
        if is_table_option(key):
            raise ValueError(f"storage option {key!r} looks like a table option")
        if not is_secret_option(key):
            args += ["--option", f"{key}={json.dumps(value)}"]
    return args


def secret_env(table_options: Mapping[str, Any], storage_options: Mapping[str, Any]) -> dict[str, str]:
    """The environment carrying the secret options to the job's driver (never argv), encoded
    as `job_options` encodes them (`airflow_lake.spark.options`); empty without secrets."""
    _, table = split_secrets(dict(table_options))
    _, storage = split_secrets(dict(storage_options))
    return encode({**{k: _hudi_string(v) for k, v in table.items()}, **{k: json.dumps(v) for k, v in storage.items()}})


def _hudi_string(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    return str(value)


def python_env(env_vars: Mapping[str, Any] | None) -> dict[str, Any]:
    """`env_vars` with `PYSPARK_PYTHON` / `PYSPARK_DRIVER_PYTHON` defaulting to this Python
    (where airflow-lake is installed), unless configured here or in the environment."""
    import os

    env = dict(env_vars or {})
    for name in PYTHON_ENV:
        if name not in env and not os.environ.get(name):
            env[name] = sys.executable
    return env
