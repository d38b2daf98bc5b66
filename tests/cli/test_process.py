"""The command line as a process: the console script, `--spark` through a real spark-submit."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from airflow_lake.core.timeline.instant import COMPACTION

from ..conftest import REPO, hudi_read, rows
from .conftest import invoke, invoke_json

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    from pip._vendor import tomli as tomllib

COLS = ["uuid", "rider", "fare", "city"]


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "airflow_lake.cli", *map(str, args)], capture_output=True,
                          text=True, timeout=300, cwd=REPO)


def test_console_script_is_declared_and_runs(trips):
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts == {"airflow-lake": "airflow_lake.cli:main"}
    path = trips.storage.uri
    shown = run("commits", path, "--json")
    assert shown.returncode == 0 and len(json.loads(shown.stdout)["commits"]) == 3 and shown.stderr == ""
    failed = run("rollback", path, "20200101000000000")
    assert failed.returncode == 1 and failed.stdout == ""
    assert failed.stderr == (f"airflow-lake: error: table {path}: no write or compaction instant 20200101000000000 "
                             "to roll back\n")
    helped = run("--help")
    assert all(f"  {c} " in helped.stdout for c in ("table", "timeline", "commits", "commit", "files", "compaction",
                                                      "clean", "archive", "rollback", "savepoint", "restore", "read",
                                                      "doctor"))


@pytest.mark.parametrize("args", [("read", "--limit", "50000"), ("read", "--limit", "50000", "--format", "csv")])
def test_a_reader_that_closes_the_pipe_is_no_error(tmp_path, args):
    """`airflow-lake read T | head -1`: exit 0 with nothing on stderr, in every format (the
    table format exited 1 with no line: rich and click take a broken pipe for a failure)."""
    import pyarrow as pa

    from airflow_lake.core import Table

    path = str(tmp_path / "t")
    n = 60_000  # (more than the limit: the table format ends with "(N more rows ...)")
    Table.create(path, name="t", record_key="id", precombine_field="ts").write(
        pa.table({"id": [f"k{i}" for i in range(n)], "ts": [1] * n, "v": ["x" * 40] * n}), operation="insert")
    command = [sys.executable, "-m", "airflow_lake.cli", args[0], path, *args[1:]]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO)
    proc.stdout.readline()
    proc.stdout.close()  # (as `head -1` exits)
    assert proc.wait(timeout=300) == 0 and proc.stderr.read() == b""


@pytest.mark.spark
def test_spark_submit_runs_the_compaction_and_reports_failures(trips, monkeypatch):
    monkeypatch.setenv("SPARK_LOCAL_IP", "127.0.0.1")
    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)
    path = trips.storage.uri
    before = rows(trips.read(), COLS)
    plan = invoke_json("compaction", "schedule", path, "--max-delta-commits", "2")["instant"]
    spark = ("--spark", "--master", "local[1]", "--conf", "spark.ui.enabled=false")
    done = invoke_json("compaction", "run", path, *spark)
    assert done["engine"] == "spark" and done["instant"] == plan
    assert len(done["files"]) == 2 and done["operations"] == 2 and not done["already_done"]
    timeline = trips.timeline
    assert timeline.actions(COMPACTION).pending().times == [] and timeline.commits().completed().last.time == plan
    assert rows(hudi_read(path), COLS) == before == rows(trips.read(), COLS)
    failed = invoke("savepoint", "create", path, "20200101000000000", *spark, code=1)
    assert failed.stderr == (f"airflow-lake: error: table {path}: 20200101000000000 is not a completed commit on "
                             "the active timeline\n")  # as the local engine words it


def test_the_command_line_imports_neither_airflow_nor_pyspark_nor_matplotlib():
    code = ("import sys, airflow_lake.cli;"
            "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('airflow', 'pyspark', 'matplotlib'));"
            "print(','.join(bad)); sys.exit(1 if bad else 0)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=300)
    assert proc.returncode == 0, f"the command line imported: {proc.stdout} {proc.stderr}"


def test_a_broken_pipe_of_the_storage_is_an_error_line(trips, monkeypatch):
    """Only a closed stdout is the reader's choice: a connection that broke is an error."""
    from airflow_lake.core import Table

    def broken(*args, **kwargs):
        raise BrokenPipeError(32, "Broken pipe (connection to the object store)")

    monkeypatch.setattr(Table, "read", broken)
    failed = invoke("read", trips.storage.uri, code=1)
    assert failed.stdout == "" and "BrokenPipeError: [Errno 32] Broken pipe (connection to the object store)" in \
        failed.stderr
