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
