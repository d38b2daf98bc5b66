"""Submitting a packaged job (`spark_jobs/`) through the Spark provider's `SparkSubmitHook`.

`SparkSubmitHook` runs `spark-submit` with stderr merged into stdout, logs every line and
keeps no more than a short tail; it has no public way to read the driver's output.
`JobSubmitHook` is that hook with the output iterator tapped: it remembers the last line that
is a job's JSON result (client mode, where the driver's stdout is spark-submit's) and the
job's one-line `ERROR` message, so a failure says what the job said instead of an exit code.
In cluster mode the driver's output stays on the cluster: the caller reads the result from
the table's timeline instead (`LakeHook.submit_job`).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator, Mapping
from typing import Any

from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook
from airflow.sdk.exceptions import AirflowException

from airflow_lake.core.objectstore import is_secret_option, split_secrets
from airflow_lake.core.vocabulary import is_table_option
from airflow_lake.spark.options import encode
from airflow_lake.spark.startup import DriverStartup

PYTHON_ENV = ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")


class LakeJobError(AirflowException):
    """A packaged job failed; the message is the job's own one-line error when it printed one."""


class JobSubmitHook(SparkSubmitHook):
    """`SparkSubmitHook` that also keeps the job's JSON result line and its `ERROR` line."""

    def __init__(self, *args, job: str, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.job = job
        self.result_line: dict[str, Any] | None = None
        self.error_line: str | None = None
        self.startup: DriverStartup | None = None  # the driver's start-up options (client mode)
        self.secret_env: dict[str, str] = {}  # secret options, in spark-submit's environment only

    def _build_spark_submit_command(self, application: str) -> list[str]:
        command = super()._build_spark_submit_command(application)
        if self.secret_env:  # set after the provider's own env handling, which may turn env into --conf
            self._env = {**(self._env or {}), **self.secret_env}
        return command

    def tracks_driver(self) -> bool:
        """Cluster deploy modes where spark-submit returns before the driver ends and the Spark
        provider tracks the driver: standalone cluster, Kubernetes (API tracking), YARN (RM API)."""
        return bool(self._should_track_driver_status or self._should_track_driver_via_k8s_api()
                    or self._should_track_yarn_application_via_rm_api())

    def _process_spark_submit_log(self, itr: Iterator[Any]) -> None:
        super()._process_spark_submit_log(self._tap(itr))

    def _tap(self, itr: Iterator[Any]) -> Iterator[Any]:
        for raw in itr:
            line = raw.strip()
            if line.startswith("{") and line.endswith("}"):
                try:
                    value = json.loads(line)
                except ValueError:
                    value = None
                if isinstance(value, dict) and value.get("job") == self.job:
                    self.result_line = value
            elif line.startswith(f"ERROR {self.job} failed:"):
                self.error_line = line.removeprefix("ERROR ")
            yield raw


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
