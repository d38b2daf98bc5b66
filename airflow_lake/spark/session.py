"""The SparkSession a job runs in."""

from __future__ import annotations

import importlib.machinery
import os
import shutil
import site
import sys

from pyspark import SparkConf, SparkContext
from pyspark.sql import SparkSession

from .startup import ARCHIVE_AT_EXIT, DRIVER_OPTION_KEYS, INTERPRETED_SQL, interprets_sql

DEFAULT_MASTER = "local[*]"
# local masters: the executors' Python workers start on the installed, compiled pyspark
DAEMON_KEY = "spark.python.daemon.module"
PYTHON_KEY = "spark.pyspark.python"  # the executors' Python, before PYSPARK_PYTHON
LOCAL_DAEMON = "airflow_lake.spark.daemon"
SQL_DEFAULTS = {
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    # a write persists its key frame after a shuffle: without this, adaptive execution may not
    # coalesce the cached frame's partitions, and every later stage of a small batch runs
    # spark.sql.shuffle.partitions (200) tasks
    "spark.sql.optimizer.canChangeCachedPlanOutputPartitioning": "true",
    # a write caches its key frame and its tagged rows once and reads each a few times: the
    # compression of Spark's in-memory columns (choosing an encoding per column and batch from
    # statistics of every value) took a third of a 1M-row upsert's JVM CPU, for 2.2x less memory;
    # uncompressed the upsert ran 28-29 -> 25-26 s (cached blocks beyond memory go to disk either way)
    "spark.sql.inMemoryColumnarStorage.compressed": "false",
}
EXTENSIONS_FROM_CLASSPATH = "spark.sql.extensions.test.loadFromCp"
# static settings (fixed when the session starts), where neither `conf` nor spark-submit set them
STATIC_DEFAULTS = {
    # pyspark records the Python call site of every column function through the JVM (six round
    # trips and a stack walk each: a write builds hundreds), for error messages about DataFrames
    # a user builds; the write's own frames need none (a small write: 1,380 round trips, 880 after)
    "spark.python.sql.dataFrameDebugging.enabled": "false",
    # session extensions that jars name in META-INF/services: pyspark's jars name one, spark-mllib's
    # registration of its internal ML functions, which starts Scala's runtime reflection (about
    # 1 of the 8-9 CPU-s of a small upsert job); the jobs use no ML function. Spark calls this
    # switch a test flag: a later Spark without it ignores the setting. `true` loads them again.
    EXTENSIONS_FROM_CLASSPATH: "false",
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
    for key, value in session_settings(conf).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    for key, value in SQL_DEFAULTS.items():  # only where neither spark-submit nor `conf` set them
        if spark.conf.get(key, None) is None:
            spark.conf.set(key, value)
    return spark


def interpret_small_input(spark: SparkSession, input_bytes: int | None) -> bool:
    """For a job reading `input_bytes` (None: not known) below `startup.SMALL_INPUT_BYTES`:
    `INTERPRETED_SQL`, unless spark-submit or the session set any of them (a user's choice of
    code generation). Whether it applied."""
    if not interprets_sql(input_bytes) or any(spark.conf.get(k, None) is not None for k in INTERPRETED_SQL):
        return False
    for key, value in INTERPRETED_SQL.items():
        spark.conf.set(key, value)
    return True


def session_settings(conf: dict[str, str] | None = None) -> dict[str, str]:
    """What a new session is built with: `conf`; `local[*]` when neither `conf` nor spark-submit
    chose a master; the local daemon module (`LOCAL_DAEMON`) when the executors run here in this
    Python and neither set one; `STATIC_DEFAULTS` where neither set them."""
    settings = dict(conf or {})
    if "spark.master" not in settings and not _submitted_master():
        settings["spark.master"] = DEFAULT_MASTER
    submitted = submitted_conf()
    master = settings.get("spark.master") or submitted.get("spark.master", None)  # None: chosen, not known
    executor_python = settings.get(PYTHON_KEY) or submitted.get(PYTHON_KEY, None)
    if DAEMON_KEY not in settings and not submitted.contains(DAEMON_KEY) and master is not None \
            and _local_daemon_possible(master, executor_python):
        settings[DAEMON_KEY] = LOCAL_DAEMON
    for key, value in STATIC_DEFAULTS.items():
        if key not in settings and not submitted.contains(key):
            settings[key] = value
    return settings


def submitted_conf() -> SparkConf:
    """The settings spark-submit gave this driver (master, deploy mode, `--conf`s), read from
    the JVM spark-submit started, without starting a SparkContext; empty when this Python was
    not started by spark-submit (a JVM launched here later gets the session's own settings)."""
    if os.environ.get("PYSPARK_GATEWAY_PORT"):
        # (SparkConf reads the JVM's settings only once pyspark has joined its gateway, which
        # otherwise happens when the SparkContext starts: too late for the settings chosen here)
        SparkContext._ensure_initialized()
    return SparkConf()


def may_defer_session() -> bool:
    """Whether a job may start its SparkContext only when it first needs executors (a job
    that finds nothing to do, or works on the timeline alone, then starts none): not when a
    session is already active, nor for a cluster-mode driver (YARN fails an application whose
    driver starts none), nor when the driver's JVM writes the class-data archive at exit (it
    must hold the classes a session loads: `startup`)."""
    if SparkSession.getActiveSession() is not None:
        return False
    submitted = submitted_conf()
    if submitted.get("spark.submit.deployMode", "client") != "client":
        return False
    java_options = " ".join(submitted.get(key, "") for key in DRIVER_OPTION_KEYS)
    return ARCHIVE_AT_EXIT not in java_options


def _local_daemon_possible(master: str, executor_python: str | None = None) -> bool:
    """The executors run here, in this Python (`spark.pyspark.python`, else `PYSPARK_PYTHON`),
    which has airflow-lake installed (not only the `--py-files` zip): they can start `LOCAL_DAEMON`."""
    if not master.startswith("local"):
        return False
    python = shutil.which(executor_python or os.environ.get("PYSPARK_PYTHON") or sys.executable)
    if python is None or os.path.abspath(python) != os.path.abspath(sys.executable):
        return False
    return _installed_module_file(LOCAL_DAEMON) is not None


def _installed_module_file(name: str) -> str | None:
    """The file of module `name` in this Python's installed packages: its site-packages, an
    editable install's finder, or a `PYTHONPATH` folder (what a process Spark starts here has;
    not the `--py-files` zips, nor the job script's folder)."""
    candidates = [*site.getsitepackages(), site.getusersitepackages(),
                  *os.environ.get("PYTHONPATH", "").split(os.pathsep)]
    folders = [p for p in candidates if p and os.path.isabs(p) and not p.endswith(".zip")]
    package = name.split(".")[0]
    for finder in sys.meta_path:
        try:
            if finder is importlib.machinery.PathFinder:
                spec = finder.find_spec(package, folders)
            else:
                spec = finder.find_spec(package, None)  # an editable install's finder
        except (ImportError, AttributeError, ValueError):
            continue
        if spec is not None and spec.submodule_search_locations:
            for root in spec.submodule_search_locations:
                path = os.path.join(root, *name.split(".")[1:]) + ".py"
                if not root.endswith(".zip") and ".zip" + os.sep not in root and os.path.isfile(path):
                    return path
            return None
    return None


def _submitted_master() -> bool:
    """True when spark-submit (or PYSPARK_SUBMIT_ARGS) chose the master."""
    if os.environ.get("SPARK_MASTER") or "--master" in os.environ.get("PYSPARK_SUBMIT_ARGS", ""):
        return True
    # spark-submit starts the Python driver with the Java gateway already up and spark.master set
    return bool(os.environ.get("PYSPARK_GATEWAY_PORT"))
