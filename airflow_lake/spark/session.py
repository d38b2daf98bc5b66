"""The SparkSession a job runs in."""

from __future__ import annotations

import os
import sys

from pyspark.sql import SparkSession

DEFAULT_MASTER = "local[*]"
SQL_DEFAULTS = {
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    # a write persists its key frame after a shuffle: without this, adaptive execution may not
    # coalesce the cached frame's partitions, and every later stage of a small batch runs
    # spark.sql.shuffle.partitions (200) tasks
    "spark.sql.optimizer.canChangeCachedPlanOutputPartitioning": "true",
}


def session(app_name: str, conf: dict[str, str] | None = None) -> SparkSession:
    """The active session, or a new one named `app_name`.

    A master or setting given to `spark-submit` (or `spark.master` in `conf`) always wins:
    only when none is set does the session run on `local[*]`, and `SQL_DEFAULTS` apply only
    where neither set them. Executors use this driver's
    Python unless `PYSPARK_PYTHON` says otherwise.
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    builder = SparkSession.builder.appName(app_name)
    settings = dict(conf or {})
    if "spark.master" not in settings and not _submitted_master():
        settings["spark.master"] = DEFAULT_MASTER
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    for key, value in SQL_DEFAULTS.items():  # only where neither spark-submit nor `conf` set them
        if spark.conf.get(key, None) is None:
            spark.conf.set(key, value)
    return spark


def _submitted_master() -> bool:
    """True when spark-submit (or PYSPARK_SUBMIT_ARGS) chose the master."""
    if os.environ.get("SPARK_MASTER") or "--master" in os.environ.get("PYSPARK_SUBMIT_ARGS", ""):
        return True
    # spark-submit starts the Python driver with the Java gateway already up and spark.master set
    return bool(os.environ.get("PYSPARK_GATEWAY_PORT"))
