"""Spark's Python processes start on the installed, compiled pyspark when Spark's own zip is
the same code (the driver by `prefer_installed_pyspark`, local executors by the daemon module)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile

import pyarrow as pa
import pytest

from airflow_lake.spark.pythonpath import prefer_installed_pyspark
from airflow_lake.spark.session import LOCAL_DAEMON


def _pip_pyspark(site, version: str, zipped_version: str) -> list[str]:
    """A pip-like pyspark under `site`: its version file and Spark's zips (with `zipped_version`)."""
    package = site / "pyspark"
    lib = package / "python" / "lib"
    lib.mkdir(parents=True)
    (package / "version.py").write_text(version)
    (site / "py4j").mkdir()
    (site / "py4j" / "__init__.py").write_text("")
    with zipfile.ZipFile(lib / "pyspark.zip", "w") as z:
        z.writestr("pyspark/version.py", zipped_version)
    with zipfile.ZipFile(lib / "py4j-0.10.9.9-src.zip", "w") as z:
        z.writestr("py4j/__init__.py", "")
    return [str(lib / "pyspark.zip"), str(lib / "py4j-0.10.9.9-src.zip")]


def test_spark_zips_move_behind_the_same_installed_pyspark(tmp_path):
    site = tmp_path / "site-packages"
    zips = _pip_pyspark(site, '__version__ = "4.3.0"\n', '__version__ = "4.3.0"\n')
    path = ["/job.zip", *zips, "/usr/lib/python3.11", str(site)]
    assert prefer_installed_pyspark(path)
    assert path == ["/job.zip", "/usr/lib/python3.11", str(site), *zips]
    assert not prefer_installed_pyspark(["/job.zip", *zips])  # site-packages not on the path: unchanged


def test_a_pyspark_with_other_files_than_its_zip_keeps_the_zip(tmp_path):
    site = tmp_path / "site-packages"
    zips = _pip_pyspark(site, '__version__ = "4.2.0"\n', '__version__ = "4.3.0"\n')  # another version's files
    path = [*zips, str(site)]
    assert not prefer_installed_pyspark(path)
    assert path == [*zips, str(site)]
    other = ["/opt/spark/python/lib/pyspark.zip", "/opt/spark/python/lib/py4j-0.10.9.9-src.zip", str(site)]
    assert not prefer_installed_pyspark(other)  # a Spark distribution's zip, not the pip package's


def _origin(batches):
    import pyspark

    for batch in batches:
        yield pa.RecordBatch.from_pydict({"origin": [pyspark.__file__] * batch.num_rows})


def test_local_executors_start_on_the_installed_pyspark(spark):
    import pyspark

    assert spark.sparkContext.getConf().get("spark.python.daemon.module") == LOCAL_DAEMON
    origins = {r[0] for r in spark.range(4, numPartitions=2).mapInArrow(_origin, "origin string").collect()}
    installed = os.path.join(os.path.dirname(pyspark.__file__), "__init__.py")
    assert origins == {installed}, origins  # not .../python/lib/pyspark.zip/pyspark/__init__.py


def test_the_daemon_module_only_where_the_executors_run_this_python(monkeypatch):
    import sys

    from airflow_lake.spark.session import _local_daemon_possible

    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)
    assert _local_daemon_possible("local[2]")
    assert not _local_daemon_possible("spark://127.0.0.1:7077")  # executors elsewhere
    assert not _local_daemon_possible("local[2]", "/usr/bin/python3-other")  # spark.pyspark.python
    monkeypatch.setenv("PYSPARK_PYTHON", "/usr/bin/python3-other")
    assert not _local_daemon_possible("local[*]")


SETTINGS_SCRIPT = """
import json
from airflow_lake.spark.session import DAEMON_KEY, EXTENSIONS_FROM_CLASSPATH, session_settings
settings = session_settings()
print(json.dumps([settings.get(DAEMON_KEY), settings.get("spark.python.sql.dataFrameDebugging.enabled"),
                  settings.get(EXTENSIONS_FROM_CLASSPATH)]))
"""


@pytest.mark.parametrize(("submitted", "daemon"), [
    (["--master", "local[2]"], LOCAL_DAEMON),
    (["--master", "spark://127.0.0.1:7077"], None),  # executors elsewhere
    (["--master", "local[2]", "--conf", "spark.pyspark.python=/usr/bin/python3-other",
      "--conf", f"spark.pyspark.driver.python={sys.executable}"], None),
    (["--master", "local[2]", "--conf", "spark.python.daemon.module=pyspark.daemon"], None),  # (theirs stays)
], ids=["local", "cluster", "other-executor-python", "own-daemon"])
def test_the_settings_follow_what_spark_submit_was_given(tmp_path, submitted, daemon):
    """The local daemon module where spark-submit's master and executor Python allow it; pyspark's
    DataFrame debugging (a JVM round trip per column function) and the session extensions named
    in jars (spark-mllib's) off, unless spark-submit set them."""
    from tests.spark.test_jobs import spark_binary, submit_env

    script = tmp_path / "settings.py"
    script.write_text(SETTINGS_SCRIPT)
    env = submit_env()
    proc = subprocess.run([str(spark_binary()), *submitted, str(script)], env=env, capture_output=True, text=True,
                          timeout=300)  # (no SparkContext starts: it reads the settings only)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout.splitlines()[-1]) == [daemon, "false", "false"]
    if daemon is None:
        return
    own = subprocess.run([str(spark_binary()), *submitted, "--conf", "spark.python.sql.dataFrameDebugging.enabled=true",
                          "--conf", "spark.sql.extensions.test.loadFromCp=true", str(script)],
                         env=env, capture_output=True, text=True, timeout=300)
    assert json.loads(own.stdout.splitlines()[-1]) == [daemon, None, None]  # theirs stays


def test_an_installed_module_is_found_outside_the_zips_and_the_script_folder(tmp_path, monkeypatch):

    from airflow_lake.spark.session import LOCAL_DAEMON, _installed_module_file

    assert _installed_module_file(LOCAL_DAEMON).endswith(os.path.join("airflow_lake", "spark", "daemon.py"))
    fake = tmp_path / "script" / "somepkg"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    (fake / "mod.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path / "script"))  # the job script's folder: not the workers'
    assert _installed_module_file("somepkg.mod") is None
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "script"))  # inherited by local workers
    assert _installed_module_file("somepkg.mod") == str(fake / "mod.py")


def test_a_reused_worker_freezes_what_outlives_a_task_after_collecting_its_garbage():
    import gc
    import weakref

    from airflow_lake.spark.daemon import freezing

    class Node:
        pass

    kept: list = []
    cycles: list = []

    def task(sock, authenticated):
        a, b = Node(), Node()
        a.other, b.other = b, a  # garbage once the task returns: only the collector frees it
        cycles.append(weakref.ref(a))
        kept.append(Node())
        if sock == "fail":
            raise RuntimeError("task failed")
        return 0

    before = gc.get_freeze_count()
    try:
        assert freezing(task)("sock", True) == 0
        assert cycles[-1]() is None  # the task's garbage was collected first
        assert gc.get_freeze_count() > before and not gc.is_finalized(kept[-1])
        with pytest.raises(RuntimeError, match="task failed"):
            freezing(task)("fail", True)
        gc.collect()
        assert cycles[-1]() is None  # not frozen (a worker whose task failed exits)
    finally:
        gc.unfreeze()


def _freeze_count(batches):
    import gc

    for batch in batches:
        yield pa.RecordBatch.from_pydict({"frozen": [gc.get_freeze_count()] * batch.num_rows})


def test_local_executors_collect_only_what_the_last_task_made(spark):
    # pyspark's daemon collects after every task of a reused worker; ours freezes what survives
    # first, so the workers' modules are not walked again each time (measured: 12 ms a task)
    counts = spark.range(16, numPartitions=8).mapInArrow(_freeze_count, "frozen long").collect()
    assert max(r[0] for r in counts) > 10_000, counts  # the imported modules' objects, frozen


def test_spark_zips_reached_through_links_move_behind_the_installed_pyspark(tmp_path):
    """A Spark home of hard links to the package's files (tests/spark_home.py) is the same code."""
    site = tmp_path / "site-packages"
    zips = _pip_pyspark(site, '__version__ = "4.3.0"\n', '__version__ = "4.3.0"\n')
    linked = tmp_path / "home" / "python" / "lib"
    linked.mkdir(parents=True)
    for z in zips:
        os.link(z, linked / os.path.basename(z))
    copied = tmp_path / "copy" / "python" / "lib"
    shutil.copytree(linked, copied)
    path = [*(str(linked / os.path.basename(z)) for z in zips), str(site)]
    assert prefer_installed_pyspark(path)
    assert path[0] == str(site)
    other = [*(str(copied / os.path.basename(z)) for z in zips), str(site)]
    assert not prefer_installed_pyspark(other)  # equal bytes, other files: not known to be the package's
