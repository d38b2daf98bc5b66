"""The job files are entry points only: flags, then one call of the library function that
does the job (`airflow_lake.spark.services`); no table logic lives in `spark_jobs/`."""

from __future__ import annotations

import ast

import pytest

from airflow_lake.spark import job_path, services
from airflow_lake.spark.packaging import job_names


@pytest.mark.parametrize("name", sorted(job_names()))
def test_a_job_file_parses_its_flags_and_calls_one_library_function(name):
    tree = ast.parse(job_path(name).read_text())
    functions = [node.name for node in tree.body if isinstance(node, (ast.FunctionDef, ast.ClassDef))]
    assert functions == ["main"], f"{name}.py defines {functions}: move what it does to airflow_lake.spark.services"
    called = {ast.unparse(node.args[1]) for node in ast.walk(tree)
              if isinstance(node, ast.Call) and ast.unparse(node.func) in ("job.run", "job.execute")}
    assert called == {f"services.{name}"}
    assert callable(getattr(services, name))


def test_a_zip_another_builder_made_first_is_never_replaced(tmp_path, monkeypatch):
    """Two builders of the same package content (xdist workers, Airflow tasks) race: the first
    zip stays, byte for byte, since a Spark that fetched it refuses the same name with other
    bytes ("exists and does not match contents"); the late builder's copy is discarded."""
    from pathlib import Path

    from airflow_lake.spark import packaging

    first = packaging.package_zip(tmp_path)
    inode, data = first.stat().st_ino, first.read_bytes()
    real = Path.exists
    monkeypatch.setattr(Path, "exists", lambda self: False if self == first else real(self))  # (it lost the race)
    again = packaging.package_zip(tmp_path)
    assert again == first and first.stat().st_ino == inode and first.read_bytes() == data
    assert sorted(p.name for p in tmp_path.iterdir()) == [first.name]  # (no partial zip left behind)
