"""Same question, same answer: a service command gives the same exit code, message and JSON
fields on the local engine and with `--spark` (a real spark-submit); the local engine's
answer is the rule. Few Spark runs: each one checks a command against its local twin."""

from __future__ import annotations

import json
import shutil
import sys

import pytest

from airflow_lake.core import Table
from tests.conftest import hudi_read, rows

from .conftest import TRIPS, invoke, invoke_json, make_trips

SPARK = ("--spark", "--master", "local[1]", "--conf", "spark.ui.enabled=false")
COLS = ["uuid", "rider", "fare", "city"]


def _both(*args: str, code: int = 0) -> tuple:
    """The command's outcome locally and with --spark: (stdout as JSON or stderr) of each."""
    local = invoke(*args, "--json", code=code)
    spark = invoke(*args, "--json", *SPARK, code=code)
    if code:
        return local.stderr, spark.stderr
    return json.loads(local.stdout), json.loads(spark.stdout)


@pytest.mark.spark
def test_every_service_command_answers_alike_on_both_engines(tmp_path, monkeypatch):
    monkeypatch.setenv("SPARK_LOCAL_IP", "127.0.0.1")
    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)
    local_path, spark_path = str(tmp_path / "local"), str(tmp_path / "spark")
    make_trips(local_path)
    Table.open(local_path).write(TRIPS.slice(0, 2), operation="upsert")
    shutil.copytree(local_path, spark_path)

    # nothing to compact: exit 1 and the core's message on both (the job used to exit 0)
    local, spark = _both("compaction", "run", local_path, code=1)
    assert local == spark == f"airflow-lake: error: table {local_path}: no pending compaction plan to run\n"

    # the same plan run on twin tables: the same fields and figures
    plans = [invoke_json("compaction", "schedule", p, "--max-delta-commits", "1")["instant"]
             for p in (local_path, spark_path)]
    local = invoke_json("compaction", "run", local_path)
    spark = invoke_json("compaction", "run", spark_path, *SPARK)
    assert (local.pop("engine"), spark.pop("engine")) == ("local", "spark")
    assert [local.pop("instant"), spark.pop("instant")] == plans
    assert (local.pop("table"), spark.pop("table")) == (local_path, spark_path)
    assert len(local.pop("files")) == len(spark.pop("files")) == local["operations"] > 0
    assert local == spark and local["records_written"] > 0

    # the table's cleaner policy is the default on both, and the result has the same fields
    clean = ("clean", local_path, "--dry-run", "--retained", "1",
             "-o", "hoodie.cleaner.policy=keep_latest_file_versions")
    local, spark = _both(*clean)
    assert (local.pop("engine"), spark.pop("engine")) == ("local", "spark")
    assert local == spark and local["policy"] == "KEEP_LATEST_FILE_VERSIONS" and local["files_planned"] > 0
    assert sorted(local) == ["dry_run", "earliest_instant_to_retain", "files", "files_deleted", "files_planned",
                             "instant", "policy", "table"]
    for path in (local_path, spark_path):
        assert rows(hudi_read(path), COLS) == rows(Table.open(local_path).read(), COLS)

    # refusals: compaction of a COPY_ON_WRITE table (the job said "no pending compaction plan"),
    # a bad table option (the job's message did not name the table)
    cow = str(tmp_path / "cow")
    Table.create(cow, name="cow", table_type="COPY_ON_WRITE", record_key="uuid").write(TRIPS.slice(0, 2))
    local, spark = _both("compaction", "run", cow, code=1)
    assert local == spark and "is a COPY_ON_WRITE table" in local
    local, spark = _both("archive", local_path, "-o", "hoodie.keep.min.commits=x", code=1)
    assert local == spark == \
        f"airflow-lake: error: table {local_path}: option hoodie.keep.min.commits='x' is not a valid int\n"


def test_a_jobs_error_line_reads_as_the_local_error():
    from airflow_lake.cli.spark import job_error
    from airflow_lake.core.errors import InstantNotFoundError
    from airflow_lake.spark.job import JobError

    cause = InstantNotFoundError("table /t: 20200101000000000 is not a completed commit on the active timeline")
    assert job_error(str(JobError("savepoint", "/t", "20200101000000000", cause))) == str(cause)
    odd = str(JobError("clean", "/t", None, RuntimeError("executor lost")))
    assert job_error(odd) == odd == "clean failed: table /t, instant none: RuntimeError: executor lost"
