"""Spark cases: a whole `spark-submit` of a job on `local[2]` (JVM start, session, the job,
shutdown), timed from the outside, the way an Airflow task runs it; the Python driver's peak
RSS (VmHWM) comes from `tests/spark/driver_probe.py`, which runs the job in the driver. The
driver gets the hook's start-up options (`airflow_lake.spark.startup`; the first run on a machine,
which writes the class-data archive, is untimed); `AIRFLOW_LAKE_BENCH_FAST_START=0` runs a plain
`spark-submit` instead.

`bench.suite` runs `spark_upsert_bloom` (vs the local engine's `mor_upsert_bloom`) and
`spark_compaction` (vs `compaction`). `python -m bench.spark driver-memory [N ...]` upserts
batches of N rows (default 1M and 5M) into a 100k-row table and prints the driver's peak RSS
of each: it must not grow with the batch (rows never pass through the driver).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import pyarrow.parquet as pq

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROBE = os.path.join(REPO, "tests", "spark", "driver_probe.py")
MASTER = "local[2]"
FAST_START = os.environ.get("AIRFLOW_LAKE_BENCH_FAST_START", "1") != "0"  # 0: plain spark-submit, to compare


def spark_submit(job: str, *args: str, timeout: float = 3600) -> dict:
    """Run `job` with spark-submit under the driver probe: wall seconds, the driver's peak RSS
    in MB and the job's JSON result."""
    from airflow_lake.spark import package_zip
    from airflow_lake.spark.startup import driver_moves_rows, driver_startup

    binary = os.path.join(os.path.dirname(sys.executable), "spark-submit")
    with tempfile.TemporaryDirectory(prefix="bench-rss-") as scratch:
        rss = os.path.join(scratch, "rss")
        env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1",
               "PYTHONPATH": REPO, "AIRFLOW_LAKE_PROBE_RSS": rss}
        # the driver's JVM options as the hook gives them (AIRFLOW_LAKE_BENCH_FAST_START=0: none)
        moves_rows = driver_moves_rows(job, MASTER, args)
        startup = driver_startup(job=job, moves_rows=moves_rows) if FAST_START else None
        conf = ["--conf", f"spark.driver.extraJavaOptions={startup.java_options}"] if startup else []
        command = [binary, "--master", MASTER, "--conf", "spark.ui.enabled=false", *conf,
                   "--py-files", str(package_zip()), PROBE, job, *args]
        start = time.perf_counter()
        proc = subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout)
        seconds = time.perf_counter() - start
        if startup is not None:
            startup.finish(proc.returncode == 0)
        lines = proc.stdout.strip().splitlines()
        if proc.returncode != 0 or not lines or not lines[-1].startswith("{"):
            raise RuntimeError(f"{job} failed ({proc.returncode}): {(proc.stdout + proc.stderr)[-3000:]}")
        with open(rss) as f:
            peak_kb = int(f.read())
    return {"seconds": seconds, "peak_rss_mb": peak_kb / 1024, "result": json.loads(lines[-1])}


def case(name: str, base_rows: int, batch_rows: int, path: str) -> dict:
    """One Spark measurement on the copy at `path` (made by `bench.suite`)."""
    from airflow_lake.spark import package_zip
    from airflow_lake.spark.startup import archive_path

    package_zip()  # built (and cached) before the clock starts
    archive = archive_path()
    if FAST_START and archive is not None and not archive.is_file():
        # the first job on a machine writes the driver's class-data archive at exit: untimed
        shutil.copytree(path, f"{path}-warm")
        try:
            _case(name, base_rows, batch_rows, f"{path}-warm")
        finally:
            shutil.rmtree(f"{path}-warm", ignore_errors=True)
    run = _case(name, base_rows, batch_rows, path)
    return {"seconds": run["seconds"], "peak_rss_mb": run["peak_rss_mb"]}


def _case(name: str, base_rows: int, batch_rows: int, path: str) -> dict:
    from bench.suite import _batch

    if name == "spark_upsert_bloom":
        source = f"{path}-source"
        os.makedirs(source)
        pq.write_table(_batch(base_rows, batch_rows), f"{source}/batch.parquet")
        run = spark_submit("upsert", "--table", path, "--source", source)
        shutil.rmtree(source)
    elif name == "spark_compaction":
        from airflow_lake.core import Table

        plan = Table.open(path).schedule_compaction(max_delta_commits=1)
        run = spark_submit("compaction_execute", "--table", path, "--instant", plan)
    else:
        raise SystemExit(f"unknown case {name}")
    return run


# Rows through the driver would show: 4M more rows of ~120 bytes are ~500 MB as Arrow, far more as
# Python objects; the driver's own noise (py4j, listings, statistics) stays within a few MB.
DRIVER_GROWTH_MB = 100


def driver_memory(batches: list[int], base_rows: int = 100_000) -> list[tuple[int, float, float]]:
    """(batch rows, driver peak RSS MB, seconds) of an upsert of each batch into a fresh copy of
    a `base_rows` MOR table (the same `base_rows / 2` updated keys in every batch, the rest new)."""
    from airflow_lake.core import Table
    from bench.data import rows, upsert_batch

    out = []
    with tempfile.TemporaryDirectory(prefix="bench-driver-") as scratch:
        base = f"{scratch}/base"
        t = Table.create(base, name="bench", table_type="MERGE_ON_READ", record_key="key", precombine_field="ts",
                         partition_fields="city", hive_style_partitioning=True)
        t.write(rows(0, base_rows, seed=1), operation="insert")
        for n in batches:
            path, source = f"{scratch}/t{n}", f"{scratch}/s{n}"
            shutil.copytree(base, path)
            os.makedirs(source)
            pq.write_table(upsert_batch(base_rows, n, min(0.5, base_rows / 2 / n), seed=2), f"{source}/batch.parquet")
            run = spark_submit("upsert", "--table", path, "--source", source)
            assert run["result"]["inserts"] + run["result"]["updates"] == n, run["result"]
            out.append((n, run["peak_rss_mb"], run["seconds"]))
            print(f"  {n:>10,} rows: driver peak RSS {run['peak_rss_mb']:.0f} MB, {run['seconds']:.1f} s", flush=True)
            shutil.rmtree(path)
            shutil.rmtree(source)
    return out


def main() -> None:
    if sys.argv[1:2] != ["driver-memory"]:
        raise SystemExit(__doc__)
    batches = [int(n) for n in sys.argv[2:]] or [1_000_000, 5_000_000]
    figures = driver_memory(batches)
    low, high = figures[0], figures[-1]
    met = high[1] - low[1] < DRIVER_GROWTH_MB
    print(f"driver peak RSS: {low[0]:,} rows {low[1]:.0f} MB, {high[0]:,} rows {high[1]:.0f} MB: "
          f"difference {high[1] - low[1]:+.0f} MB (target: under {DRIVER_GROWTH_MB} MB: {'met' if met else 'NOT met'})")
    if not met:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
