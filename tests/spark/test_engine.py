"""SparkEngine runs the core's per-file-group tasks in Spark executors."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from concurrent.futures import ThreadPoolExecutor

import pyarrow as pa

from airflow_lake.core import Table
from airflow_lake.spark import SparkEngine, package_zip
from tests.conftest import hudi_read, rows


def _pid_and_square(x: int) -> tuple[int, int]:
    return os.getpid(), x * x


def test_map_runs_in_executors_in_item_order(spark):
    out = SparkEngine(spark).map(_pid_and_square, range(7))
    assert [r for _, r in out] == [x * x for x in range(7)]
    assert os.getpid() not in {pid for pid, _ in out}  # Python workers, not the driver
    assert SparkEngine(spark).map(_pid_and_square, []) == []


def _group_summary(rows: pa.Table) -> tuple[int, int, list[int], int]:
    return rows.column("g")[0].as_py(), len(set(rows.column("g").to_pylist())), sorted(rows.column("n").to_pylist()), \
        os.getpid()


def test_write_groups_runs_each_group_once_in_executors(spark):
    """A DataFrame's groups in executors (hashed by group, one partition per group when their
    number is given), each once; an Arrow table's as map tasks."""
    from pyspark.sql import functions as F

    frame = spark.range(200).select((F.col("id") % 7).alias("g"), F.col("id").alias("n"))
    engine = SparkEngine(spark)
    local = pa.table({"g": [n % 7 for n in range(200)], "n": list(range(200))})
    for result in (engine.write_groups(_group_summary, frame, "g", groups=7),
                   engine.write_groups(_group_summary, frame, "g"),
                   engine.write_groups(_group_summary, local, "g")):
        out = sorted(result)
        assert [(g, k, ns) for g, k, ns, _ in out] == [(g, 1, list(range(g, 200, 7))) for g in range(7)]
        assert os.getpid() not in {pid for *_, pid in out}


def test_package_zip_is_cached_by_content_and_importable(tmp_path):
    first = package_zip(tmp_path)
    assert package_zip(tmp_path) == first
    with zipfile.ZipFile(first) as z:
        names = set(z.namelist())
    assert {"airflow_lake/__init__.py", "airflow_lake/core/table.py", "airflow_lake/spark/engine.py"} <= names
    assert not any("__pycache__" in n for n in names)
    assert {n[:-1] for n in names if n.endswith(".pyc")} == {n for n in names if n.endswith(".py")}
    code = "import airflow_lake.core, sys; print(airflow_lake.core.__spec__.origin)"
    out = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": str(first)},
                         cwd=tmp_path, capture_output=True, text=True, check=True)
    # imported from the zip, as an executor would, from its bytecode (not compiled again)
    assert out.stdout.strip() == f"{first}/airflow_lake/core/__init__.pyc"
    with zipfile.ZipFile(first, "a") as z:  # bytecode of another Python version: the source is used
        z.writestr("airflow_lake/probe.py", "VALUE = 'source'\n")
        z.writestr("airflow_lake/probe.pyc", b"\0\0\0\0" + bytes(12) + b"not code")
    code = "import airflow_lake.probe as p; print(p.VALUE, p.__spec__.origin)"
    out = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": str(first)},
                         cwd=tmp_path, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["source", f"{first}/airflow_lake/probe.py"]


def test_package_zip_built_by_several_threads_at_once(tmp_path):
    """Threads of one process (two submissions from one Airflow worker) each build the zip
    under their own temporary name: none fails, all get the same zip."""
    with ThreadPoolExecutor(4) as pool:
        built = list(pool.map(lambda _: package_zip(tmp_path), range(4)))
    assert len(set(built)) == 1 and zipfile.is_zipfile(built[0])
    assert [p.name for p in tmp_path.iterdir()] == [built[0].name]  # no temporary left


def _mor_table(path: str) -> Table:
    t = Table.create(path, name="t", table_type="MERGE_ON_READ", record_key="id", precombine_field="ts",
                     partition_fields="part")
    parts = ["a", "b", "c", "d"]
    t.write(pa.table({"id": [f"k{i}" for i in range(40)], "ts": [0] * 40, "part": parts * 10}), operation="insert")
    for ts in (1, 2):
        ids = list(range(ts, 40, 3))
        t.write(pa.table({"id": [f"k{i}" for i in ids], "ts": [ts] * len(ids), "part": [parts[i % 4] for i in ids]}))
    return t


def test_compaction_and_clean_run_in_executors(spark, table_path, caplog):
    t = _mor_table(table_path)
    cols = ["id", "ts", "part"]
    before = rows(t.read(), cols)
    plan = t.schedule_compaction(max_delta_commits=1)
    on_spark = Table.open(table_path, engine=SparkEngine(spark))
    caplog.set_level("INFO", logger="airflow_lake.spark.engine")
    result = on_spark.run_compaction(plan)
    assert result.operations == 4 and result.records_written == 40
    assert rows(t.read(), cols) == before == rows(hudi_read(table_path), cols)
    assert t.timeline.commits().completed().last.time == plan
    cleaned = on_spark.clean(policy="KEEP_LATEST_FILE_VERSIONS", retained=1)
    assert sum(len(v) for v in cleaned.files.values()) > 0
    assert all(not os.path.exists(f"{table_path}/{p}/{f}") for p, fs in cleaned.files.items() for f in fs)
    assert rows(t.read(), cols) == before == rows(hudi_read(table_path), cols)
    logged = [r.getMessage() for r in caplog.records]
    assert "compact operation: 4/4 done" in " ".join(logged)  # both ran as Spark tasks
    assert any(m.startswith("delete files: ") and " done " in m for m in logged)


def test_session_caches_frames_uncompressed(spark):
    """A write's cached frames are read a few times each: compressing Spark's in-memory columns
    cost a third of a large upsert's JVM CPU (`SQL_DEFAULTS`)."""
    assert spark.conf.get("spark.sql.inMemoryColumnarStorage.compressed") == "false"


def test_session_lets_adaptive_execution_coalesce_a_cached_shuffle(spark):
    """A write persists its key frame after a shuffle; the session lets adaptive execution
    coalesce it, so a small batch's later stages do not each run spark.sql.shuffle.partitions
    tasks (200 by default under spark-submit)."""
    from pyspark.sql import functions as F

    frame = spark.range(1000).withColumn("k", F.col("id") % 50).groupBy("k").count().persist()
    try:
        assert frame.count() == 50
        assert frame.rdd.getNumPartitions() < int(spark.conf.get("spark.sql.shuffle.partitions"))
    finally:
        frame.unpersist()
