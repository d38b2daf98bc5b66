"""The spark-submit service jobs: flags, JSON result, errors, run tokens, packaging.

Most jobs run in this process through their `main(argv)` on the shared session; a few real
`spark-submit` runs (about 20 s each) check what only a real submission shows: the JSON line
last on stdout, the exit code, the one-line error, a re-submission with the same run token.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from airflow_lake.spark import job_path, package_zip
from airflow_lake.spark.job import JobError, split_options
from airflow_lake.spark.packaging import job_names
from airflow_lake.spark.startup import QUICK_JIT, driver_moves_rows, driver_startup
from tests.conftest import REPO, hudi_read, rows
from tests.core.test_compaction import mor
from tests.core.test_lifecycle import cow

JOBS = {"upsert", "compaction_schedule", "compaction_execute", "clean", "archive", "rollback", "savepoint", "restore"}
COLS = ["id", "ts", "part", "v", "_hoodie_commit_time"]
FAST = ["--option", "hoodie.client.heartbeat.interval_in_ms=50"]


def load(name: str):
    """A job file as a module (what spark-submit runs, imported here to call `main`)."""
    spec = importlib.util.spec_from_file_location(f"airflow_lake_job_{name}", job_path(name))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# -- packaging -----------------------------------------------------------------------------
def test_job_path_finds_every_job_in_the_source_checkout():
    assert JOBS <= set(job_names())
    for name in JOBS:
        assert job_path(name) == REPO / "spark_jobs" / f"{name}.py"
    assert job_path("clean.py") == job_path("clean")
    with pytest.raises(ValueError, match="no spark job 'nope'; jobs: archive, clean"):
        job_path("nope")
    with pytest.raises(ValueError):
        job_path("__init__")


# -- the shared frame ----------------------------------------------------------------------
def test_options_split_into_table_and_storage_options():
    table, storage = split_options([("hoodie.cleaner.commits.retained", "3"), ("airflow_lake.x", "true"),
                                    ("region", "eu-west-1"), ("allow_bucket_creation", "true"),
                                    ("connect_timeout", "2.5"), ("access_key", '"0123"'), ("secret_key", "a=b")])
    assert table == {"hoodie.cleaner.commits.retained": "3", "airflow_lake.x": "true"}
    assert storage == {"region": "eu-west-1", "allow_bucket_creation": True, "connect_timeout": 2.5,
                       "access_key": "0123", "secret_key": "a=b"}


@pytest.mark.parametrize("name", sorted(JOBS))
def test_help_and_argument_errors(name, capsys):
    module = load(name)
    with pytest.raises(SystemExit) as exit_:
        module.main(["--help"])
    assert exit_.value.code == 0
    text = capsys.readouterr().out
    assert all(flag in text for flag in ("--table", "--option KEY=VALUE", "--run-token", "spark-submit"))
    assert module.__doc__.split()[0] in text  # the job says what it does
    with pytest.raises(SystemExit) as exit_:
        module.main(["--option", "hoodie.x=1"])  # no --table
    assert exit_.value.code == 2
    with pytest.raises(SystemExit) as exit_:
        module.main(["--table", "/t", "--option", "no-equals-sign"])
    assert exit_.value.code == 2


# -- jobs in this process ------------------------------------------------------------------
def test_clean_job_dry_run_then_clean_then_the_same_token(spark, table_path):
    cow(table_path)
    clean = load("clean").main
    dry = clean(["--table", table_path, "--retained", "3", "--dry-run"])
    assert dry["instant"] is None and dry["dry_run"] and dry["files_planned"] > 0 and dry["files_deleted"] == 0
    result = clean(["--table", table_path, "--option", "hoodie.cleaner.commits.retained=3", "--run-token", "r/c"])
    assert result["instant"] and result["action"] == "clean" and result["operation"] == "clean"
    assert result["files_deleted"] == dry["files_planned"] and not result["already_done"]
    assert result["policy"] == "KEEP_LATEST_COMMITS" and result["earliest_instant_to_retain"]
    again = clean(["--table", table_path, "--retained", "1", "--run-token", "r/c"])
    assert again["instant"] == result["instant"] and again["already_done"]
    assert again["files_deleted"] == result["files_deleted"]  # the stored result, nothing new deleted
    assert json.loads(json.dumps(again)) == again  # JSON-ready


def test_archive_job_says_what_blocked_it(spark, table_path):
    t = cow(table_path, commits=12)
    t.clean(retained=4)
    latest = rows(t.read(), COLS)
    result = load("archive").main(["--table", table_path, "--min-commits", "3", "--max-commits", "5",
                                   "--run-token", "r/a"])
    assert result["instant"] is None and result["operation"] == "archive" and not result["already_done"]
    assert result["archived"] == len(result["archived_instants"]) > 0 and result["archive_file"]
    assert "clean" in result["blocked_by"]
    assert rows(hudi_read(table_path), COLS) == latest
    assert load("archive").main(["--table", table_path, "--run-token", "r/a"]) == {**result, "already_done": True}
    again = load("archive").main(["--table", table_path, "--option", "hoodie.keep.min.commits=3",
                                  "--option", "hoodie.keep.max.commits=5"])
    assert again["archived"] == 0


def _spark_deletions(caplog) -> list[str]:
    """The SparkEngine's log lines of file deletions run as Spark tasks (then forgotten)."""
    found = [r.getMessage() for r in caplog.records if r.getMessage().startswith("delete files: ")]
    caplog.clear()
    return found


def test_rollback_savepoint_restore_jobs_and_their_tokens(spark, table_path, caplog):
    t = cow(table_path, commits=5, table_type="MERGE_ON_READ")
    times = t.timeline.commits().completed().times
    rollback, savepoint, restore = load("rollback").main, load("savepoint").main, load("restore").main
    caplog.set_level("INFO", logger="airflow_lake.spark.engine")
    rb = rollback(["--table", table_path, "--instant", times[-1], "--run-token", "r/rb", *FAST])
    assert rb["rolled_back"] == times[-1] and rb["rolled_back_action"] == "deltacommit" and rb["files_deleted"]
    assert any(" done " in m for m in _spark_deletions(caplog))  # the rollback's deletions ran as Spark tasks
    rb_again = rollback(["--table", table_path, "--instant", times[-1], "--run-token", "r/rb"])
    assert (rb_again["instant"], rb_again["files_deleted"], rb_again["already_done"]) == \
        (rb["instant"], rb["files_deleted"], True)
    assert not rb["already_done"]
    sp = savepoint(["--table", table_path, "--instant", times[1], "--comments", "before the backfill"])
    assert sp["instant"] == times[1] and sp["action"] == "savepoint" and not sp["already_done"]
    assert savepoint(["--table", table_path, "--instant", times[1]])["already_done"]
    saved = rows(t.read(as_of=times[1]), COLS)
    caplog.clear()
    res = restore(["--table", table_path, "--instant", times[1], "--run-token", "r/rs", *FAST])
    assert res["action"] == "restore" and res["savepoint"] == times[1] and set(res["rolled_back"]) == set(times[2:-1])
    assert len([m for m in _spark_deletions(caplog) if " done " in m]) == len(res["rolled_back"])  # Spark tasks
    assert rows(hudi_read(table_path), COLS) == saved
    files = sorted(os.listdir(f"{table_path}/.hoodie"))
    again = restore(["--table", table_path, "--instant", times[1], "--run-token", "r/rs"])
    assert again["instant"] == res["instant"] and again["already_done"]
    assert sorted(os.listdir(f"{table_path}/.hoodie")) == files  # nothing written twice


def test_failures_are_one_line_naming_table_and_instant(spark, table_path):
    cow(table_path, commits=2)
    with pytest.raises(JobError) as error:
        load("savepoint").main(["--table", table_path, "--instant", "20200101000000000"])
    message = str(error.value)
    assert "\n" not in message and table_path in message and "20200101000000000" in message
    assert message.startswith("savepoint failed: table ")
    with pytest.raises(JobError, match="table /nowhere/t, instant none: TableNotFoundError"):
        load("archive").main(["--table", "/nowhere/t"])


def test_compaction_jobs_on_a_table_with_nothing_to_do(spark, table_path):
    mor(table_path, upserts=1)
    decision = load("compaction_schedule").main(["--table", table_path])
    assert decision["instant"] is None and "NUM_COMMITS not met" in decision["reason"] and not decision["scheduled"]
    result = load("compaction_execute").main(["--table", table_path])
    assert result["instant"] is None and result["plans"] == [] and result["files_written"] == 0
    with pytest.raises(SystemExit) as exit_:
        load("compaction_execute").main(["--table", table_path, "--max-plans", "0"])
    assert exit_.value.code == 2


# -- real spark-submit runs ----------------------------------------------------------------
# what Spark logs when a SparkContext starts (a job that finds its work done, or works on the
# timeline alone, starts none)
SPARK_CONTEXT_STARTS = "SparkContext: Running Spark version"


def spark_binary() -> Path:
    """This environment's `spark-submit`."""
    binary = Path(sys.executable).parent / "spark-submit"
    if not binary.exists():
        import pyspark

        binary = Path(pyspark.__file__).parent / "bin" / "spark-submit"
    return binary


def submit_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """spark-submit's environment for this checkout: this Python for driver and executors."""
    return {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1",
            "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep),
            **(extra or {})}


def spark_submit(name: str, *args: str, master: str = "local[2]", env: dict[str, str] | None = None,
                 probe: bool = False, timeout: float = 900, write_archive: bool = True) -> subprocess.CompletedProcess:
    """`spark-submit --master M --py-files <zip> <job file> ARGS`, running this checkout; with
    `probe`, the job runs under `driver_probe.py` (configured by `env`). Without `write_archive`
    the job maps the class-data archive if there is one but never writes it (a job writing it
    starts a SparkContext in any case)."""
    binary = spark_binary()
    env = submit_env(env)
    script = [str(Path(__file__).with_name("driver_probe.py")), name] if probe else [str(job_path(name))]
    # the driver JVM options the hook gives (class-data archive included, the JIT for the job's input)
    moves_rows = driver_moves_rows(name, master, args)
    startup = driver_startup(env=env, job=name, create=write_archive, moves_rows=moves_rows)
    command = [str(binary), "--master", master, "--conf", "spark.ui.enabled=false",
               "--conf", f"spark.driver.extraJavaOptions={startup.java_options}",
               # a cluster's executors are JVMs of their own, started per job: the tests' small
               # jobs give them the driver's quick JIT and serial collector (C2 compilation and G1's
               # threads competed with the tests for 2 cores: the standalone tests 102 -> 81 CPU-s)
               *(["--conf", f"spark.executor.defaultJavaOptions={' '.join(QUICK_JIT)}"]
                 if master.startswith("spark://") else []),
               "--py-files", str(package_zip()), *script, *args]
    ok = False
    try:
        proc = subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout)
        ok = proc.returncode == 0
        return proc
    finally:
        startup.finish(ok)


def last_json(proc: subprocess.CompletedProcess) -> dict:
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    assert proc.stdout.endswith("}\n") and lines[-1].startswith("{"), lines[-5:]  # nothing after it
    return json.loads(lines[-1])


def test_spark_submit_schedule_execute_resubmit_and_fail(table_path):
    t = mor(table_path)
    before = rows(t.read(), COLS)
    scheduling = spark_submit("compaction_schedule", "--table", table_path, "--run-token", "dag/run/schedule",
                              write_archive=False)
    planned = last_json(scheduling)
    assert planned["instant"] and planned["action"] == "compaction" and planned["file_groups"] == 3
    assert SPARK_CONTEXT_STARTS not in scheduling.stderr  # a plan is the timeline's: no executors needed
    executing = spark_submit("compaction_execute", "--table", table_path, "--run-token", "dag/run/execute")
    assert SPARK_CONTEXT_STARTS in executing.stderr
    done = last_json(executing)
    assert done["instant"] == planned["instant"] and done["action"] == "commit" and done["operation"] == "compact"
    assert done["files_written"] == 3 and done["records_written"] == 29 and not done["already_done"]
    assert {k: done[k] for k in ("inserts", "updates", "deletes")} == {"inserts": 0, "updates": 0, "deletes": 0}
    assert rows(hudi_read(table_path), COLS) == before == rows(t.read(), COLS)
    assert rows(hudi_read(table_path, **{"hoodie.read.use.read_optimized.mode": "true"}), COLS) == before
    files = sorted(os.listdir(f"{table_path}/.hoodie")), sorted(os.listdir(f"{table_path}/a"))
    # the task is retried: the same run token finds the compaction it committed
    retried = spark_submit("compaction_execute", "--table", table_path, "--run-token", "dag/run/execute",
                           write_archive=False)
    again = last_json(retried)
    assert again["instant"] == done["instant"] and again["already_done"] and again["files_written"] == 3
    assert SPARK_CONTEXT_STARTS not in retried.stderr
    assert (sorted(os.listdir(f"{table_path}/.hoodie")), sorted(os.listdir(f"{table_path}/a"))) == files
    # a plan that does not exist: non-zero exit, one line naming table and instant, last
    failed = spark_submit("compaction_execute", "--table", table_path, "--instant", "20200101000000000")
    assert failed.returncode == 1
    error = [line for line in (failed.stdout + failed.stderr).splitlines() if line.startswith("ERROR compaction")]
    assert error == [f"ERROR compaction_execute failed: table {table_path}, instant 20200101000000000: "
                     f"InstantNotFoundError: table {table_path}: no pending compaction 20200101000000000"]
    # spark-submit hands the Python driver's stderr to its own stdout: the error line ends it
    assert failed.stdout.splitlines()[-1] == error[0] and "{" not in failed.stdout.splitlines()[-1]


def test_compaction_execute_runs_several_plans_and_a_resubmission_takes_no_new_one(spark, table_path):
    t = mor(table_path, upserts=2)
    first = t.schedule_compaction(max_delta_commits=1)
    for ts in (1, 2):  # a new file group in partition d, then a log file on it
        t.write(pa.table({"id": ["d1", "d2"], "ts": [ts, ts], "part": ["d", "d"], "v": [float(ts)] * 2}))
    second = t.schedule_compaction(max_delta_commits=1)
    assert first < second
    before = rows(t.read(), COLS)
    execute = load("compaction_execute").main
    done = execute(["--table", table_path, "--order", "LIFO", "--max-plans", "5", "--run-token", "r/x"])
    assert done["plans"] == [second, first] and done["instant"] == second and done["file_groups"] == 4
    assert rows(hudi_read(table_path), COLS) == before
    t.write(pa.table({"id": ["d1"], "ts": [3], "part": ["d"], "v": [3.0]}))
    third = t.schedule_compaction(max_delta_commits=1)
    assert third is not None
    again = execute(["--table", table_path, "--max-plans", "5", "--run-token", "r/x"])
    assert again["plans"] == [second, first] and again["already_done"]
    assert t.timeline.actions("compaction").pending().times == [third]  # left for the next run
