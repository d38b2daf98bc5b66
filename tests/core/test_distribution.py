"""The distribution's package list: every package of the source tree is in the wheel (a
missing one installs a product that cannot import), and the jobs are mapped into it. Needs no
Spark: it runs in the fast lane."""

from __future__ import annotations

from pathlib import Path

import tomllib
from setuptools import find_packages

import airflow_lake

REPO = Path(__file__).resolve().parents[2]


def test_distribution_lists_every_package_and_maps_the_jobs():
    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    found = set(find_packages(str(REPO), include=["airflow_lake*"]))
    assert set(config["packages"]) == found | {"airflow_lake.spark.jobs"}, "add new packages to pyproject.toml"
    assert config["package-dir"] == {"airflow_lake.spark.jobs": "spark_jobs"}
    assert Path(airflow_lake.__file__).resolve().parent == REPO / "airflow_lake"  # testing this checkout
