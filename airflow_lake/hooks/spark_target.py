"""Where a job's `spark-submit` sends its driver, read from the Spark connection before
anything is submitted: the master, the deploy mode, and whether the Spark provider tracks the
driver after `spark-submit` returns.

The Spark provider, given a connection id that names no connection, logs one line and submits
to `--master yarn`; without a Hadoop configuration that fails later with "HADOOP_CONF_DIR or
YARN_CONF_DIR must be set". `spark_target` says what is missing instead, before submitting.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from airflow.sdk import BaseHook
from airflow.sdk.exceptions import AirflowNotFoundException

from airflow_lake.core.errors import InvalidOptionError

HADOOP_CONF_VARS = ("HADOOP_CONF_DIR", "YARN_CONF_DIR")


@dataclass(frozen=True)
class SparkTarget:
    """A Spark connection's master and deploy mode (a `deploy_mode` keyword overriding the
    connection's `deploy-mode` extra, as the provider does)."""

    conn_id: str
    master: str
    deploy_mode: str | None

    @property
    def cluster(self) -> bool:
        return self.deploy_mode == "cluster"

    def tracks_driver(self, arguments: Mapping[str, Any]) -> bool:
        """Cluster deploy modes where spark-submit returns before the driver ends and the Spark
        provider tracks the driver: standalone cluster, Kubernetes with `track_driver_via_k8s_api`,
        YARN with `yarn_track_via_rm_api` (`arguments`: the `SparkSubmitHook` keywords)."""
        if not self.cluster:
            return False
        return ("spark://" in self.master or ("k8s" in self.master and bool(arguments.get("track_driver_via_k8s_api")))
                or ("yarn" in self.master and bool(arguments.get("yarn_track_via_rm_api"))))


def spark_target(conn_id: str, arguments: Mapping[str, Any], where: str) -> SparkTarget:
    """The target of connection `conn_id`; a connection that does not exist is an
    `InvalidOptionError` saying how to define it (`where` names the task and table), unless a
    Hadoop configuration is set, with which the provider's YARN default can work."""
    try:
        conn = BaseHook.get_connection(conn_id)
    except AirflowNotFoundException:
        conn = None
    if conn is None:
        if any(os.environ.get(name) for name in HADOOP_CONF_VARS):
            return SparkTarget(conn_id, "yarn", arguments.get("deploy_mode"))
        raise InvalidOptionError(
            f"{where}: the Spark connection {conn_id!r} is not defined, so the Spark provider would submit to "
            "YARN (--master yarn), and neither HADOOP_CONF_DIR nor YARN_CONF_DIR is set. Define it, for example "
            f"AIRFLOW_CONN_{conn_id.upper()}='{{\"conn_type\": \"spark\", \"host\": \"local[*]\"}}' or "
            f"`airflow connections add {conn_id} --conn-type spark --conn-host 'local[*]'` (host: local[N], "
            "spark://HOST:PORT, yarn, k8s://https://HOST:PORT; extra {\"deploy-mode\": \"cluster\"} for cluster "
            "mode), or pass spark_conn_id= naming a Spark connection that exists")
    return SparkTarget(conn_id, _master(conn), arguments.get("deploy_mode") or conn.extra_dejson.get("deploy-mode"))


def _master(conn) -> str:
    """The master URL as the Spark provider builds it from a connection."""
    if conn.conn_type == "spark" and conn.host and ("://" in conn.host or not conn.port):
        master = conn.host
    else:
        master = f"{conn.conn_type}://{conn.host or ''}"
    return f"{master}:{conn.port}" if conn.port else master
