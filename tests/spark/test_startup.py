"""The driver's start-up options (`airflow_lake.spark.startup`): what the hook adds to a
client-mode spark-submit, what it leaves to the user, and the class-data archive the first
job writes and later jobs map. One real spark-submit pair on a fresh cache."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from airflow_lake.spark import job_path
from airflow_lake.spark.startup import (
    BALANCED_JIT,
    DRIVER_OPTION_KEYS,
    KEEP_ARCHIVES,
    LARGE_INPUT_BYTES,
    archive_path,
    driver_moves_rows,
    driver_startup,
    main,
    source_bytes_of,
    user_java_options,
)
from tests.conftest import hudi_read, rows
from tests.core.test_lifecycle import cow
from tests.spark.test_jobs import SPARK_CONTEXT_STARTS, last_json, spark_submit

COLS = ["id", "ts", "part", "v"]


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("AIRFLOW_LAKE_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache" / "jvm"


def test_first_run_writes_the_archive_then_later_runs_map_it(cache):
    target = archive_path()
    assert target is not None and target.parent == cache  # java and pyspark's jars are here
    first = driver_startup()
    assert first.writing is not None and f"-XX:ArchiveClassesAtExit={first.writing}" in first.java_options
    assert "-XX:TieredStopAtLevel=1" in first.java_options and "-Xlog:disable" in first.java_options
    first.writing.write_bytes(b"archive")  # what the JVM writes at exit
    first.finish(ok=True)
    assert target.read_bytes() == b"archive" and [p.name for p in cache.iterdir()] == [target.name]
    later = driver_startup()
    assert later.writing is None and later.java_options.endswith(f"-XX:SharedArchiveFile={target}")
    later.finish(ok=True)  # nothing to move
    assert target.read_bytes() == b"archive"


def test_other_jobs_write_and_map_a_partial_archive_until_an_upsert_writes_the_full_one(cache):
    """An upsert's JVM loads the most classes (Spark SQL, Arrow, the Python runner): its archive
    serves every job; before one has run, the first other job's (partial) archive serves the
    others, and the first upsert writes the full one, replacing it."""
    full, partial = archive_path(), archive_path(partial=True)
    clean = driver_startup(job="clean")
    assert clean.archive == partial and f"-XX:ArchiveClassesAtExit={clean.writing}" in clean.java_options
    clean.writing.write_bytes(b"partial")
    clean.finish(ok=True)
    archive = driver_startup(job="archive")
    assert archive.writing is None and archive.java_options.endswith(f"-XX:SharedArchiveFile={partial}")
    upsert = driver_startup(job="upsert")  # writes the full one, starting without the partial
    assert upsert.archive == full and "SharedArchiveFile" not in upsert.java_options
    upsert.writing.write_bytes(b"full")
    upsert.finish(ok=True)
    assert [p.name for p in cache.iterdir()] == [full.name]  # the partial one is gone
    for job in ("clean", "upsert", None):
        assert driver_startup(job=job).java_options.endswith(f"-XX:SharedArchiveFile={full}")


def test_a_failed_run_leaves_no_archive_and_old_archives_are_pruned(cache):
    failed = driver_startup()
    failed.writing.write_bytes(b"half")
    failed.finish(ok=False)  # the job failed: the next one tries again
    assert not archive_path().exists() and list(cache.iterdir()) == []
    for n in range(KEEP_ARCHIVES + 2):  # other Java / Spark versions' archives, oldest first
        old = cache / f"spark-old{n}.jsa"
        old.write_bytes(b"x")
        os.utime(old, (1000 + n, 1000 + n))
    run = driver_startup()
    run.writing.write_bytes(b"new")
    run.finish(ok=True)
    assert sorted(p.name for p in cache.iterdir()) == sorted(
        [archive_path().name] + [f"spark-old{n}.jsa" for n in range(KEEP_ARCHIVES + 1, KEEP_ARCHIVES + 2)])
    assert driver_startup(archive=False).java_options.count("-XX:") == 2  # no archive option


def test_no_archive_where_the_class_path_has_a_conf_folder_or_writing_it_failed(tmp_path, monkeypatch, cache):
    """The JVM cannot archive classes with a non-empty folder on the class path (a Spark conf
    folder with spark-defaults.conf): writing it at exit would fail the job's exit code."""
    conf = tmp_path / "conf"
    conf.mkdir()
    env = {"SPARK_CONF_DIR": str(conf)}
    assert driver_startup(env=env).writing is not None  # an empty conf folder is fine
    (conf / "spark-defaults.conf").write_text("spark.ui.enabled false\n")
    startup = driver_startup(env=env)
    assert startup.writing is None and startup.archive is None and "-XX:Shared" not in startup.java_options
    assert "-XX:TieredStopAtLevel=1" in startup.java_options  # the JIT options still apply
    monkeypatch.setenv("HADOOP_CONF_DIR", str(conf))
    assert driver_startup().archive is None
    monkeypatch.delenv("HADOOP_CONF_DIR")
    broken = driver_startup()
    broken.finish(ok=False, archive_failed=True)  # the job completed, the archive's writing failed
    assert driver_startup().writing is None and not archive_path().exists()


def test_the_users_driver_options_win(tmp_path, monkeypatch):
    monkeypatch.delenv("SPARK_HOME", raising=False)
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path))
    assert user_java_options({}) == "spark.driver.extraJavaOptions"
    assert user_java_options({"spark.driver.extraJavaOptions": "-Dx=1"}) == "spark.driver.defaultJavaOptions"
    assert user_java_options({k: "-Dx=1" for k in DRIVER_OPTION_KEYS}) is None
    (tmp_path / "spark-defaults.conf").write_text("# a comment\nspark.driver.defaultJavaOptions  -Dy=2\n")
    assert user_java_options({"spark.driver.extraJavaOptions": "-Dx=1"}) is None  # a --conf would replace it
    props = tmp_path / "job.properties"
    props.write_text("spark.driver.extraJavaOptions -Dz=3\n")
    assert user_java_options({}, str(props)) == "spark.driver.defaultJavaOptions"


def test_the_hook_adds_them_to_client_mode_only(tmp_path, monkeypatch, cache):
    from airflow_lake.hooks import LakeHook

    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path))
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_LOCAL", json.dumps({"conn_type": "spark", "host": "local[2]"}))
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_CLUSTER", json.dumps(
        {"conn_type": "spark", "host": "yarn", "extra": {"deploy-mode": "cluster"}}))
    table = str(tmp_path / "t")
    hook = LakeHook(None).submission("clean", table, spark_conn_id="spark_local")
    text = " ".join(hook.spark_hook()._build_spark_submit_command(str(job_path("clean"))))
    assert f"spark.driver.extraJavaOptions={hook.startup.java_options}" in text and "TieredStopAtLevel=1" in text
    mine = LakeHook(None).submission("clean", table, spark_conn_id="spark_local",
                                     spark_conf={"spark.driver.extraJavaOptions": "-Dmine=1"})
    assert mine.arguments["conf"]["spark.driver.extraJavaOptions"] == "-Dmine=1"
    assert "TieredStopAtLevel=1" in mine.arguments["conf"]["spark.driver.defaultJavaOptions"]
    off = LakeHook(None).submission("clean", table, spark_conn_id="spark_local", fast_start=False)
    assert off.startup is None and not any(k in off.arguments["conf"] for k in DRIVER_OPTION_KEYS)
    cluster = LakeHook(None).submission("clean", table, spark_conn_id="spark_cluster")
    assert cluster.startup is None and not any(k in cluster.arguments["conf"] for k in DRIVER_OPTION_KEYS)


def test_a_local_driver_that_will_move_many_rows_keeps_the_optimising_compiler(tmp_path, monkeypatch, cache, capsys):
    """Quick JIT where the driver moves few rows; C2 for the hottest code where a local-master
    driver (it runs the tasks' JVM side) reads a large source, or one of unknown size."""
    from airflow_lake.hooks import LakeHook

    small, large = tmp_path / "small", tmp_path / "large"
    small.mkdir()
    large.mkdir()
    (small / "part-0.parquet").write_bytes(b"x" * 1000)
    with open(large / "part-0.parquet", "wb") as f:
        f.truncate(LARGE_INPUT_BYTES)  # (sparse: its size is what counts)
    (small / "_SUCCESS").write_bytes(b"")
    (small / ".part-0.parquet.crc").write_bytes(b"x" * LARGE_INPUT_BYTES)  # skipped, as the job skips it
    assert source_bytes_of(["--table", "t", "--source", str(small)]) == 1000
    assert source_bytes_of(["--source", str(large / "part-0.parquet")]) == LARGE_INPUT_BYTES
    assert source_bytes_of(["--source", "select 1", "--source-format", "sql"]) is None
    assert source_bytes_of(["--source", str(tmp_path / "none")]) == 0  # (the job says what is wrong)
    unreachable = {"aws_endpoint_url": "http://127.0.0.1:9", "aws_allow_http": "true", "aws_region": "us-east-1",
                   "aws_access_key_id": "k", "aws_secret_access_key": "s"}
    started = time.monotonic()
    assert source_bytes_of(["--source", "s3://b/landing"], unreachable) == 0
    assert time.monotonic() - started < 3  # asked once, no retries waited out

    sql = ["--source", "select 1", "--source-format", "sql"]
    assert not driver_moves_rows("upsert", "local[2]", ["--source", str(small)])
    assert driver_moves_rows("upsert", "local[*]", ["--source", str(large)]) and driver_moves_rows("upsert", None, sql)
    assert not driver_moves_rows("compaction_execute", "local[2]", [])  # (it merges in the Python workers)
    assert not driver_moves_rows("upsert", "spark://host:7077", sql)  # executors: JVMs of their own
    assert not driver_moves_rows("clean", "local[2]", sql) and not driver_moves_rows(None, None, sql)
    quick, balanced = driver_startup().java_options, driver_startup(moves_rows=True).java_options
    assert "-XX:TieredStopAtLevel=1" in quick and "Tier4" not in quick
    assert "TieredStopAtLevel" not in balanced and all(o in balanced for o in BALANCED_JIT)
    main(["--moves-rows"])  # (by hand: `python -m airflow_lake.spark.startup --moves-rows`)
    main([])
    printed = [driver_startup(create=False, moves_rows=True).java_options, driver_startup(create=False).java_options]
    assert capsys.readouterr().out.splitlines() == printed

    # the hook decides from the job, the Spark connection's master and the source's files
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path))
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_LOCAL", json.dumps({"conn_type": "spark", "host": "local[2]"}))
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_MASTER", json.dumps({"conn_type": "spark", "host": "spark://h:7077"}))

    def options(source: Path, conn: str = "spark_local") -> str:
        submission = LakeHook(None).submission("upsert", str(tmp_path / "t"), ["--source", str(source)],
                                               spark_conn_id=conn)
        return submission.arguments["conf"]["spark.driver.extraJavaOptions"]

    assert "TieredStopAtLevel=1" in options(small) and "Tier4" not in options(small)
    assert "TieredStopAtLevel" not in options(large) and "Tier4InvocationThreshold" in options(large)
    assert "TieredStopAtLevel=1" in options(large, "spark_master")


def test_real_jobs_write_then_use_the_archive(tmp_path, cache):
    """On a fresh cache the first spark-submit writes the archive at its exit (JVM log lines go
    to stderr: the job's JSON stays stdout's last line); the second maps it; a damaged archive
    is ignored by the JVM."""
    path = str(tmp_path / "t")
    expected = rows(cow(path).read(), COLS)
    target = archive_path()
    writing = spark_submit("archive", "--table", path)
    first = last_json(writing)
    partial = archive_path(partial=True)  # (until an upsert writes the full one)
    assert first["job"] == "archive" and partial.is_file() and partial.stat().st_size > 10_000_000
    # a job on the timeline alone starts no SparkContext, except the one writing the archive: it
    # must hold the classes a session loads
    assert SPARK_CONTEXT_STARTS in writing.stderr
    assert [p.name for p in cache.iterdir()] == [partial.name]  # no temporary file left
    second = last_json(spark_submit("clean", "--table", path))
    assert second["job"] == "clean"
    partial.rename(target)  # (as if an upsert had written it)
    target.chmod(0o644)
    target.write_bytes(b"damaged")
    assert last_json(spark_submit("clean", "--table", path))["job"] == "clean"
    assert rows(hudi_read(path), COLS) == expected
