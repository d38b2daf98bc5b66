"""SIGKILL a job's Python driver during an upsert and a compaction, then re-submit with the
same run token: nothing lost, nothing half-visible, hudi-rs agrees with the model.

Each crash point is hit by `driver_probe.py` in the real `spark-submit` driver: right before
the instant turns inflight (the requested instant written, under the table lock), once the
executors have written a first data file, and right before the completed instant is written
(every data file written). The attempts of one job are chained: each re-submission with the
same token is killed at the next point, the last one completes. Between attempts our reader
and hudi-rs must show exactly the table as it was before the job.
"""

from __future__ import annotations

import os
import time

import pyarrow as pa

from airflow_lake.core import Table
from airflow_lake.core.txn.heartbeat import is_expired
from tests.conftest import hudi_read, let_time_pass, rows
from tests.core.test_compaction import mor
from tests.spark.test_jobs import last_json, spark_submit
from tests.spark.test_upsert_job import landing

COLS = ["id", "ts", "part", "v", "_hoodie_commit_time"]
DATA = ["id", "ts", "part", "v"]
TIMELINE = r"^\.hoodie/[0-9]+"  # an instant file (the token index under .hoodie/.aux has the same names)
# a live driver's heartbeat (2 s beats, expired after 2 missed) and lock (6 s) survive a loaded
# machine; a killed one's expire at once before the next attempt (`expire_killed_attempt`)
HEARTBEAT_MS, MISSES = 2000, 2
FAST = ["--option", f"hoodie.client.heartbeat.interval_in_ms={HEARTBEAT_MS}",
        "--option", "hoodie.write.lock.filesystem.expire=0.1"]


def expire_killed_attempt(table_path: str) -> None:
    """Let a killed attempt's heartbeats and lock expire, as the next attempt judges them,
    without waiting (`let_time_pass` ages the files): a re-submission that starts within a
    killed attempt's expiry is rightly refused ("being executed by another task")."""
    let_time_pass(table_path, 60)
    storage = Table.open(table_path).storage
    folder = os.path.join(table_path, ".hoodie", ".heartbeat")
    live = [i for i in (os.listdir(folder) if os.path.isdir(folder) else [])
            if not is_expired(storage, i, HEARTBEAT_MS, MISSES)]
    assert not live, f"heartbeats {live} still beating after the kill"


def killed(table_path: str, job: str, args: list[str], at: str, files: int = 0) -> str:
    """Run `job` and SIGKILL its driver at the mutation matching `at` (or after `files` new
    data files, whichever comes first); the run must have died of it. The probe's line."""
    env = {"AIRFLOW_LAKE_PROBE_KILL": at}
    if files:
        env.update(AIRFLOW_LAKE_PROBE_KILL_FILES=str(files), AIRFLOW_LAKE_PROBE_TABLE=table_path)
    start = time.monotonic()
    proc = spark_submit(job, "--table", table_path, *FAST, *args, env=env, probe=True, timeout=1800)
    text, out = proc.stdout + proc.stderr, proc.stdout.splitlines()
    assert proc.returncode != 0 and not (out and out[-1].startswith("{")), text[-3000:]
    assert "PROBE KILL" in text, text[-3000:]  # died by the probe's SIGKILL, not of something else
    line = next(x for x in text.splitlines() if x.startswith("PROBE KILL"))
    print(f"{job}: {line}; spark-submit ran {time.monotonic() - start:.0f} s")
    expire_killed_attempt(table_path)
    return line


def state(table_path: str, **options: str) -> tuple[list, list]:
    return rows(Table.open(table_path).read(), COLS), rows(hudi_read(table_path, **options), COLS)


def data_files(table_path: str) -> set[str]:
    return {os.path.join(d, f) for d, dirs, fs in os.walk(table_path) if "/.hoodie" not in d
            for f in fs if ".parquet" in f or ".log." in f}


def test_upsert_killed_three_times_then_resubmitted(tmp_path, table_path):
    t = mor(table_path, upserts=2)
    before = rows(t.read(), COLS)
    assert rows(hudi_read(table_path), COLS) == before
    ids = range(0, 60, 2)  # half of them update stored keys, half are new (also a new partition d)
    batch = pa.table({"id": [f"k{i:02d}" for i in ids], "ts": [10] * len(ids),
                      "part": [["a", "b", "c", "d"][i // 2 % 4] if i >= 30 else ["a", "b", "c"][i % 3] for i in ids],
                      "v": [10.0 + i for i in ids]})
    args = ["--source", landing(tmp_path, "batch", batch), "--run-token", "dag/run/upsert"]
    files = data_files(table_path)
    completed = t.timeline.commits().completed().times

    for at, n in ((rf"{TIMELINE}\.deltacommit\.inflight$", 0), (rf"{TIMELINE}\.deltacommit$", 1),
                  (rf"{TIMELINE}\.deltacommit$", 0)):
        line = killed(table_path, "upsert", args, at, n)
        assert state(table_path) == (before, before), f"half-visible after {line}"
        pending = Table.open(table_path).timeline.pending().instants
        assert [i.action for i in pending] == ["deltacommit"], (line, pending)
        if n or at.endswith("deltacommit$"):
            assert data_files(table_path) - files, "the kill came before any data file"

    done = last_json(spark_submit("upsert", "--table", table_path, *FAST, *args, timeout=1800))
    assert not done["already_done"] and done["updates"] == 15 and done["inserts"] == 15
    model = {r[0]: r for r in rows(t.read(as_of=completed[-1]), DATA)}
    model.update({r[0]: r for r in rows(batch, DATA)})
    t = Table.open(table_path)
    assert rows(t.read(), DATA) == rows(hudi_read(table_path), DATA) == sorted(model.values())
    assert t.timeline.commits().completed().times == [*completed, done["instant"]]  # written once
    assert not t.timeline.pending().instants


def test_compaction_killed_three_times_then_resubmitted(table_path):
    t = mor(table_path)
    plan = t.schedule_compaction(max_delta_commits=1)
    before = rows(t.read(), COLS)
    read_optimized = rows(t.read(query_type="read_optimized"), COLS)
    ro = {"hoodie.read.use.read_optimized.mode": "true"}
    args = ["--run-token", "dag/run/compact"]

    for at, n in ((rf"{TIMELINE}\.compaction\.inflight$", 0), (rf"{TIMELINE}\.commit$", 1),
                  (rf"{TIMELINE}\.commit$", 0)):
        line = killed(table_path, "compaction_execute", args, at, n)
        assert state(table_path) == (before, before), f"half-visible after {line}"
        assert state(table_path, **ro)[1] == read_optimized
        assert Table.open(table_path).timeline.actions("compaction").pending().times == [plan]

    done = last_json(spark_submit("compaction_execute", "--table", table_path, *FAST, *args, timeout=1800))
    assert done["instant"] == plan and not done["already_done"] and done["files_written"] == 3
    t = Table.open(table_path)
    assert state(table_path) == (before, before)
    assert rows(hudi_read(table_path, **ro), COLS) == before  # the merged base files hold every row
    assert not t.timeline.pending().instants and t.timeline.commits().completed().times[-1] == plan
