"""The provider reaches Spark through the Spark provider's public API only (constructor
arguments and methods of `SparkSubmitHook` / `SparkSubmitOperator`), so it keeps working across
the provider versions pyproject.toml admits (`make test-compat` runs these tests on the
lowest); and a Spark connection that does not exist is said before anything is submitted."""

from __future__ import annotations

import ast
import json

import pytest

from airflow_lake.core.errors import InvalidOptionError
from tests.conftest import REPO

PACKAGES = ("hooks", "operators", "sensors", "triggers")
PROVIDER_CLASSES = {"SparkSubmitHook", "SparkSubmitOperator"}


def private_uses(path) -> list[str]:
    """`x._name` where x is not `self` / `cls` (another object's private attribute or method),
    and classes deriving from the Spark provider's classes (which could override their private
    methods), in one source file."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if (isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__")
                and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))):
            found.append(f"{path.name}:{node.lineno} {ast.unparse(node)}")
        if isinstance(node, ast.ClassDef) and {ast.unparse(b) for b in node.bases} & PROVIDER_CLASSES:
            found.append(f"{path.name}:{node.lineno} class {node.name} derives from the Spark provider")
    return found


def test_the_provider_uses_no_private_attribute_or_method_of_other_objects():
    files = [f for package in PACKAGES for f in sorted((REPO / "airflow_lake" / package).glob("*.py"))]
    assert len(files) >= 8
    assert [use for f in files for use in private_uses(f)] == []


def test_a_missing_spark_connection_is_said_before_submitting(tmp_path, monkeypatch):
    from airflow_lake.hooks import LakeHook

    for name in ("HADOOP_CONF_DIR", "YARN_CONF_DIR", "AIRFLOW_CONN_SPARK_DEFAULT"):
        monkeypatch.delenv(name, raising=False)
    table = str(tmp_path / "t")
    with pytest.raises(InvalidOptionError) as e:
        LakeHook().submission("clean", table)
    message = str(e.value)
    assert f"table {table}: the Spark connection 'spark_default' is not defined" in message
    assert "YARN (--master yarn)" in message and "neither HADOOP_CONF_DIR nor YARN_CONF_DIR is set" in message
    assert """AIRFLOW_CONN_SPARK_DEFAULT='{"conn_type": "spark", "host": "local[*]"}'""" in message
    assert "airflow connections add spark_default --conn-type spark --conn-host 'local[*]'" in message
    with pytest.raises(InvalidOptionError, match="the Spark connection 'spark_etl' is not defined"):
        LakeHook().submission("clean", table, spark_conn_id="spark_etl")
    # with a Hadoop configuration the provider's default (YARN) can work: it is used
    monkeypatch.setenv("HADOOP_CONF_DIR", str(tmp_path))
    submission = LakeHook().submission("clean", table)
    assert (submission.target.master, submission.target.deploy_mode) == ("yarn", None)
    # a defined connection: its master and deploy mode, the deploy_mode keyword first
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", json.dumps(
        {"conn_type": "spark", "host": "spark://m1", "port": 7077, "extra": {"deploy-mode": "client"}}))
    target = LakeHook().submission("clean", table, spark_args={"deploy_mode": "cluster"}).target
    assert (target.master, target.deploy_mode, target.cluster) == ("spark://m1:7077", "cluster", True)


def test_the_supported_ranges_and_the_lowest_versions_make_test_compat_installs():
    import importlib.util
    from importlib.metadata import version

    spec = importlib.util.spec_from_file_location("lowest", REPO / ".ci" / "lowest.py")
    lowest = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(lowest)
    pins = dict(pin.split("==") for pin in lowest.lowest_pins())
    assert pins == {"apache-airflow": "3.3.0", "apache-airflow-providers-apache-spark": "6.2.0"}
    for name, low in pins.items():  # this environment runs a version of the range: the lowest, or a newer one
        installed = tuple(int(p) for p in version(name).split(".")[:3])
        assert installed >= tuple(int(p) for p in low.split(".")), (name, version(name))
