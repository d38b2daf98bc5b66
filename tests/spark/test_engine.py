"""SparkEngine runs the core's per-file-group tasks in Spark executors."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile

from airflow_lake.spark import SparkEngine, package_zip


def _pid_and_square(x: int) -> tuple[int, int]:
    return os.getpid(), x * x


def test_map_runs_in_executors_in_item_order(spark):
    out = SparkEngine(spark).map(_pid_and_square, range(7))
    assert [r for _, r in out] == [x * x for x in range(7)]
    assert os.getpid() not in {pid for pid, _ in out}  # Python workers, not the driver
    assert SparkEngine(spark).map(_pid_and_square, []) == []


def test_package_zip_is_cached_by_content_and_importable(tmp_path):
    first = package_zip(tmp_path)
    assert package_zip(tmp_path) == first
    with zipfile.ZipFile(first) as z:
        names = set(z.namelist())
    assert {"airflow_lake/__init__.py", "airflow_lake/core/table.py", "airflow_lake/spark/engine.py"} <= names
    assert not any("__pycache__" in n for n in names)
    code = "import airflow_lake.core, sys; print(airflow_lake.core.__file__)"
    out = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": str(first)},
                         cwd=tmp_path, capture_output=True, text=True, check=True)
    assert str(first) in out.stdout  # imported from the zip, as an executor would
