"""The test run's Spark home of hard links (tests/spark_home.py)."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from airflow_lake.spark.startup import cache_dir
from tests.spark_home import COMPLETE, installed_spark_home, linked_spark_home


@pytest.fixture
def cache():
    """A cache folder beside the user's (the tests' temp folder may be another file system)."""
    root = cache_dir().parent
    root.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix=".test-spark-home-", dir=root))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def test_the_linked_home_holds_the_installed_files_and_is_made_once(cache):
    home = installed_spark_home()
    linked = linked_spark_home(cache)
    if os.stat(cache).st_dev != os.stat(home).st_dev:
        assert linked is None  # no links across file systems: Spark runs from its own home
        return
    assert linked is not None and (linked / COMPLETE).is_file()
    for sub in ("bin/spark-submit", "bin/spark-class", "python/lib/pyspark.zip"):
        assert os.path.samefile(linked / sub, home / sub), sub
    jars = sorted(p.name for p in (home / "jars").iterdir() if p.is_file())
    assert sorted(p.name for p in (linked / "jars").iterdir() if p.is_file()) == jars
    assert all(os.path.samefile(linked / "jars" / j, home / "jars" / j) for j in jars)
    assert os.access(linked / "bin" / "spark-submit", os.X_OK)
    assert linked_spark_home(cache) == linked  # the same files: the same folder
    assert [p.name for p in (cache / "spark-home").iterdir()] == [linked.name]  # no partial left


def test_a_cache_on_another_file_system_gives_none(tmp_path):
    home = installed_spark_home()
    linked = linked_spark_home(tmp_path)
    assert (linked is None) == (os.stat(tmp_path).st_dev != os.stat(home).st_dev)


def test_older_homes_are_pruned(cache):
    root = cache / "spark-home"
    for i, name in enumerate(("pyspark-old1", "pyspark-old2", "pyspark-old3")):
        (root / name).mkdir(parents=True)
        os.utime(root / name, (i, i))
    linked = linked_spark_home(cache)
    if linked is None:  # nothing linked (nor pruned) where the cache is on another file system
        assert os.stat(cache).st_dev != os.stat(installed_spark_home()).st_dev
        return
    assert sorted(p.name for p in root.iterdir()) == sorted([linked.name, "pyspark-old3"])
