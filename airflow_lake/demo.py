"""`make demo`: the end-to-end example DAG (`dags/lake_demo.py`) run by Airflow's `dag.test()`
on Spark `local[*]`, in a throwaway `AIRFLOW_HOME` with SQLite.

The DAG lands three parquet batches of trips, upserts them into a MERGE_ON_READ table (one
`spark-submit` each), waits for them with `InstantSensor`, schedules then executes a compaction,
cleans and archives. This runner prints each task's state, the table's timeline and its row
count (ours and hudi-rs'), and exits 1 if any task did not succeed. `spark-submit` gets
small-data settings as Java system properties in `SPARK_SUBMIT_OPTS` (4 shuffle partitions, no
web UI, Spark's JVM logs at WARN): a Spark conf folder holding files would keep the drivers from
the class-data archive that makes each job start faster (`airflow_lake.spark.startup`).

    python -m airflow_lake.demo [--base DIR] [--master 'local[*]']
    python -m airflow_lake.demo --base s3://bucket/prefix [--storage-option KEY=VALUE ...] [--home DIR]

With an object-store base the tables and landing files go there (the Airflow home stays in a
local folder): the storage options (`--storage-option`, and for S3 the AWS SDK's variables
`AWS_ENDPOINT_URL`, `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`,
`AWS_REGION` / `AWS_DEFAULT_REGION`) go into the `lake_default` connection, from which every
task, and every Spark job's executors, take them. A missing bucket is created when an endpoint
is given (a local S3-compatible server), else it is an error naming it.

This module imports no Airflow: it drives the DAG and its run through their own methods.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pyarrow as pa
import pyarrow.parquet as pq

from airflow_lake.core.errors import LakeError
from airflow_lake.core.objectstore import is_secret_option, names_setting
from airflow_lake.core.storage import open_storage

CITIES = ("chennai", "san_francisco", "sao_paulo")
DAGS_FOLDER = Path(__file__).resolve().parents[1] / "dags"
DEMO_DAG = "lake_demo"
OK_STATES = ("success", "skipped")


# -- source data ---------------------------------------------------------------------------------
def trips_batch(batch: int, rows: int = 40) -> pa.Table:
    """Batch `batch` (1, 2, ...) of trips: half its keys are the previous batch's (updates, with a
    larger `ts`), half are new. Keys `trip-0000`...; `fare` encodes key and batch."""
    start = (batch - 1) * rows // 2
    keys = range(start, start + rows)
    return pa.table({
        "uuid": [f"trip-{k:04d}" for k in keys],
        "ts": pa.array([batch] * rows, pa.int64()),
        "rider": [f"rider-{k % 7}" for k in keys],
        "fare": pa.array([round(10.0 + k + batch / 10, 2) for k in keys], pa.float64()),
        "city": [CITIES[k % len(CITIES)] for k in keys],
    })


def expected_trips(batches: int, rows: int = 40) -> dict[str, float]:
    """uuid -> fare after upserting batches 1..`batches` in order (what the table must hold)."""
    fares: dict[str, float] = {}
    for b in range(1, batches + 1):
        t = trips_batch(b, rows)
        fares.update(zip(t["uuid"].to_pylist(), t["fare"].to_pylist(), strict=True))
    return fares


def land_trips(folder: str, batches: int = 3, rows: int = 40, first: int = 1,
               storage_options: dict[str, Any] | None = None) -> list[str]:
    """Write batches `first`..`first + batches - 1` as `batch_<n>.parquet` into `folder` (a path,
    or a URI on an object store reached with `storage_options`). A watcher never sees half a
    file: locally each is written under a temporary name, then renamed; on an object store each
    is one PUT through the core's storage layer."""
    if "://" in folder:
        storage = open_storage(folder, storage_options)
        paths = []
        for b in range(first, first + batches):
            sink = pa.BufferOutputStream()
            pq.write_table(trips_batch(b, rows), sink)
            storage.write(f"batch_{b}.parquet", sink.getvalue().to_pybytes())
            paths.append(f"{folder.rstrip('/')}/batch_{b}.parquet")
        return paths
    os.makedirs(folder, exist_ok=True)
    paths = []
    for b in range(first, first + batches):
        path = os.path.join(folder, f"batch_{b}.parquet")
        pq.write_table(trips_batch(b, rows), path + ".tmp")
        os.replace(path + ".tmp", path)
        paths.append(path)
    return paths


# -- object stores -------------------------------------------------------------------------------
# the AWS SDK's variables -> (storage option, setting); the first one set of a setting wins
AWS_VARIABLES = (
    ("AWS_ENDPOINT_URL_S3", "aws_endpoint_url", "endpoint"),
    ("AWS_ENDPOINT_URL", "aws_endpoint_url", "endpoint"),
    ("AWS_ACCESS_KEY_ID", "aws_access_key_id", "access_key"),
    ("AWS_SECRET_ACCESS_KEY", "aws_secret_access_key", "secret_key"),
    ("AWS_SESSION_TOKEN", "aws_session_token", "session_token"),
    ("AWS_REGION", "aws_region", "region"),
    ("AWS_DEFAULT_REGION", "aws_region", "region"),
)


def is_object_store(base: str) -> bool:
    return "://" in base and urlsplit(base).scheme.lower() != "file"


def parse_storage_options(pairs: list[str]) -> dict[str, str]:
    """`KEY=VALUE` strings -> a dict (a pair without `=` is a usage error)."""
    options = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise SystemExit(f"--storage-option {pair!r}: expected KEY=VALUE")
        options[key.strip()] = value
    return options


def option(options: dict[str, Any], setting: str) -> str | None:
    """The value of the option naming `setting` (e.g. `endpoint`), under any of its names."""
    return next((str(v) for k, v in options.items() if names_setting(k, setting)), None)


def demo_storage_options(base: str, given: dict[str, str],
                         environ: dict[str, str]) -> tuple[dict[str, str], list[str]]:
    """The storage options of the lake at `base`: `given` (from `--storage-option`), and for S3
    the AWS SDK's variables of `environ` turned into options for the settings `given` leaves
    open (`aws_allow_http=true` with an `http://` endpoint). Returns them and the variables used.
    Nothing relies on Spark's executors inheriting the variables: the options travel with the jobs."""
    options = dict(given)
    used = []
    if urlsplit(base).scheme.lower() in ("s3", "s3a"):
        for variable, key, setting in AWS_VARIABLES:
            value = environ.get(variable)
            if value and option(options, setting) is None:
                options[key] = value
                used.append(variable)
    if (option(options, "endpoint") or "").startswith("http://") and option(options, "allow_http") is None:
        options["aws_allow_http" if "aws_endpoint_url" in options else "allow_http"] = "true"
    return options, used


def shown_options(options: dict[str, Any]) -> str:
    """The options for printing, secrets masked."""
    return ", ".join(f"{k}={'***' if is_secret_option(k) else v}"
                     for k, v in sorted(options.items())) or "none (the SDK's own defaults)"


def ensure_bucket(base: str, options: dict[str, Any]) -> str | None:
    """Check that the bucket of `base` exists. A missing one is created when the options name
    an endpoint (a local or self-hosted S3-compatible server: returns a line saying so); on
    the provider's own service (no endpoint) it is an error naming bucket and store."""
    parts = urlsplit(base)
    bucket, scheme = parts.netloc, parts.scheme.lower()
    endpoint = option(options, "endpoint")
    where = endpoint or ("AWS S3" if scheme in ("s3", "s3a") else scheme.upper())
    try:
        storage = open_storage(f"{scheme}://{bucket}", options)
        if storage.exists(""):
            return None
    except (OSError, LakeError) as e:
        raise SystemExit(f"cannot reach bucket {bucket!r} at {where}: {e}") from None
    if endpoint is None:
        raise SystemExit(f"bucket {bucket!r} does not exist at {where}: create it first "
                         f"(e.g. `aws s3 mb s3://{bucket}`) or name an existing one in --base")
    creating = {**options, "allow_bucket_creation": True} if scheme in ("s3", "s3a") else options
    try:
        open_storage(f"{scheme}://{bucket}", creating).fs.create_dir(bucket)
    except (OSError, LakeError) as e:
        raise SystemExit(f"bucket {bucket!r} does not exist at {where} and could not be created: {e}") from None
    return f"created bucket {bucket!r} at {where}"


# -- the runner ----------------------------------------------------------------------------------
# small tables on one machine: few shuffle partitions, no web UI
SPARK_DEFAULTS = {"spark.sql.shuffle.partitions": "4", "spark.ui.enabled": "false"}
LOG4J2 = """\
# Spark's JVM logs at WARN (the jobs' own progress lines are Python logging, at INFO)
rootLogger.level = warn
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n%ex
logger.hadoop.name = org.apache.hadoop.util.NativeCodeLoader
logger.hadoop.level = error
"""


def spark_submit_opts(folder: Path) -> str:
    """`SPARK_SUBMIT_OPTS` for small local runs: `SPARK_DEFAULTS` as `spark.*` system properties
    (a driver's SparkConf reads them) and `LOG4J2`, written to `folder` (off the class path)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "log4j2.properties").write_text(LOG4J2)
    settings = [f"-D{key}={value}" for key, value in SPARK_DEFAULTS.items()]
    return " ".join([*settings, f"-Dlog4j2.configurationFile={(folder / 'log4j2.properties').as_uri()}"])


def airflow_env(home: Path, lake: Path | str, master: str, dags_folder: Path = DAGS_FOLDER,
                storage_options: dict[str, Any] | None = None) -> dict[str, str]:
    """Environment of a throwaway Airflow (SQLite) whose `spark_default` submits to `master`;
    with `storage_options` (a lake on an object store), the `lake_default` connection holds them."""
    bin_dir = str(Path(sys.executable).parent)
    lake_conn = {} if storage_options is None else {"AIRFLOW_CONN_LAKE_DEFAULT": json.dumps(
        {"conn_type": "lake", "extra": {"storage_options": storage_options}})}
    return {
        **lake_conn,
        "SPARK_SUBMIT_OPTS": spark_submit_opts(home / "spark-conf"),
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(dags_folder),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__UNIT_TEST_MODE": "False",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home / 'airflow.db'}",
        "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": master}),
        "AIRFLOW_CONN_FS_DEFAULT": json.dumps({"conn_type": "fs", "extra": {"path": "/"}}),
        "AIRFLOW_LAKE_BASE": str(lake),
        "PYSPARK_PYTHON": os.environ.get("PYSPARK_PYTHON") or sys.executable,
        "SPARK_LOCAL_IP": os.environ.get("SPARK_LOCAL_IP") or "127.0.0.1",
        # spark-submit of the pyspark next to this Python (the venv may not be activated)
        "PATH": bin_dir + os.pathsep + os.environ.get("PATH", ""),
    }


def migrate_db() -> None:
    """`airflow db migrate` into the SQLite file of `AIRFLOW_HOME` (about 5-20 s)."""
    airflow = Path(sys.executable).with_name("airflow")
    proc = subprocess.run([str(airflow), "db", "migrate"], capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        raise SystemExit(f"airflow db migrate failed:\n{proc.stdout[-3000:]}{proc.stderr[-3000:]}")


def load_dag(dag_id: str, dags_folder: Path = DAGS_FOLDER):
    """Import `<dags_folder>/<dag_id>.py` and return its DAG."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(dag_id, dags_folder / f"{dag_id}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return next(d for d in vars(module).values() if getattr(d, "dag_id", None) == dag_id)


def task_states(dag_run) -> dict[str, str]:
    """task_id (with `[map_index]` for mapped tasks) -> state, in task order."""
    states = {}
    for ti in sorted(dag_run.get_task_instances(), key=lambda t: (t.start_date is None, t.start_date or 0)):
        name = ti.task_id if ti.map_index < 0 else f"{ti.task_id}[{ti.map_index}]"
        states[name] = str(getattr(ti.state, "value", ti.state))
    return states


def task_results(dag_run) -> dict[str, object]:
    """task_id -> its XCom `return_value` (what each lake task reported), through the run's
    own task instances (this module imports no Airflow)."""
    results = {}
    for ti in dag_run.get_task_instances():
        value = ti.xcom_pull(task_ids=ti.task_id, map_indexes=ti.map_index)
        if value is not None:
            results[ti.task_id] = value
    return results


def failed_tasks(dag_run) -> list[str]:
    """Tasks of a `dag.test()` run that did not succeed (it does not raise by itself)."""
    return [t for t, s in task_states(dag_run).items() if s not in OK_STATES]


def describe_table(path: str, storage_options: dict[str, Any] | None = None) -> list[str]:
    """Timeline (active and archived) and row counts of the table, read by us and by hudi-rs
    (both with the same storage options)."""
    from airflow_lake.core import Table

    table = Table.open(path, storage_options=storage_options or None)
    lines = [f"table {path} ({table.config.table_type})", "  active timeline:"]
    lines += [f"    {i.time}  {i.action:<13} {i.state.name}" for i in table.timeline]
    archived = table.archived_timeline.completed()
    if archived:
        lines.append(f"  archived: {', '.join(f'{i.time} {i.action}' for i in archived)}")
    lines.append(f"  rows: {table.read(columns=['uuid']).num_rows}")
    try:
        from hudi import HudiReadOptions, HudiTableBuilder
    except ImportError:
        return lines
    uri = path if "://" in path else str(Path(path).resolve())
    builder = HudiTableBuilder.from_base_uri(uri).with_storage_options(
        {k: str(v) for k, v in (storage_options or {}).items()})
    batches = builder.build().read(HudiReadOptions())
    lines.append(f"  rows read by hudi-rs: {sum(b.num_rows for b in batches)}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m airflow_lake.demo", description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", help="where the lake goes: a folder (then also the Airflow home, in <base>/airflow) "
                        "or an object-store URI (s3://bucket/prefix, gs://...); default: a new temporary folder")
    parser.add_argument("--home", help="the Airflow home (default: <base>/airflow for a folder, a new temporary "
                        "folder for an object-store base)")
    parser.add_argument("--storage-option", action="append", default=[], metavar="KEY=VALUE",
                        help="a storage option of an object-store base (repeatable; see docs/object-stores.md); "
                        "for s3:// the AWS_* variables fill in the ones not given")
    parser.add_argument("--master", default="local[*]", help="Spark master of spark_default (default: local[*])")
    args = parser.parse_args(argv)
    if not (shutil.which("java") or os.environ.get("JAVA_HOME")):
        print("Spark needs a Java runtime (17 or later): put `java` on PATH or set JAVA_HOME", file=sys.stderr)
        return 2
    given = parse_storage_options(args.storage_option)
    options: dict[str, Any] | None = None
    if args.base and is_object_store(args.base):
        lake: Path | str = args.base.rstrip("/")
        options, used = demo_storage_options(lake, given, dict(os.environ))
        for variable in used:  # the options carry them, to every task and executor
            os.environ.pop(variable, None)
        home = Path(args.home or tempfile.mkdtemp(prefix="airflow-lake-demo-home-")).resolve()
        created = ensure_bucket(lake, options)
        print(f"airflow-lake demo on {lake}: storage options {shown_options(options)}"
              f"{' (from ' + ', '.join(used) + ')' if used else ''}", flush=True)
        if created:
            print(created, flush=True)
        kept = f"tables in {lake}, Airflow home in {home}"
    else:
        if given:
            raise SystemExit("--storage-option is for an object-store --base (s3://..., gs://...)")
        base = Path(args.base or tempfile.mkdtemp(prefix="airflow-lake-demo-")).resolve()
        home, lake = Path(args.home).resolve() if args.home else base / "airflow", base / "lake"
        kept = f"files kept in {base}"
    home.mkdir(parents=True, exist_ok=True)
    os.environ.update(airflow_env(home, lake, args.master, storage_options=options))
    started = time.monotonic()
    print(f"airflow-lake demo: AIRFLOW_HOME={home}, tables under {lake}, Spark {args.master}", flush=True)
    migrate_db()

    dag = load_dag(DEMO_DAG)
    print(f"running DAG {DEMO_DAG} with dag.test(): {', '.join(t.task_id for t in dag.tasks)}", flush=True)
    dag_run = dag.test()

    print(f"\nDAG run {dag_run.run_id}: {dag_run.state}")
    results = task_results(dag_run)
    for task_id, state in task_states(dag_run).items():
        shown = json.dumps(results[task_id], default=str) if task_id in results else ""
        print(f"  {task_id:<20} {state:<16} {shown if len(shown) < 160 else shown[:157] + '...'}")
    table_path = f"{lake}/demo/trips"
    if open_storage(table_path, options).exists(".hoodie"):
        print("\n" + "\n".join(describe_table(table_path, options)))
    failed = failed_tasks(dag_run)
    print(f"\n{'FAILED: ' + ', '.join(failed) if failed else 'all tasks succeeded'} "
          f"({time.monotonic() - started:.0f} s); {kept}")
    return 1 if failed or dag_run.state != "success" else 0


if __name__ == "__main__":
    sys.exit(main())
