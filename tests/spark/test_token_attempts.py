"""Two spark-submits with one run token at the same moment (a task submitted twice): the upsert
job commits once, the compaction job executes its plan once; both report that instant, hudi-rs
counts the rows once."""

from __future__ import annotations

import threading

import numpy as np
import pyarrow as pa

from airflow_lake.core import Table
from airflow_lake.spark.packaging import package_zip
from tests.conftest import hudi_read
from tests.core.test_compaction import mor
from tests.spark.test_jobs import last_json, spark_submit
from tests.spark.test_upsert_job import landing

# a live driver's heartbeat (2 s beats, dead after 2 missed) and lock (6 s) survive a loaded machine
FAST = ["--option", "hoodie.client.heartbeat.interval_in_ms=2000",
        "--option", "hoodie.write.lock.filesystem.expire=0.1"]


def at_once(job: str, *args: str) -> tuple[dict, dict]:
    """Two spark-submits of `job` with `args`, started at the same moment; their JSON results."""
    package_zip()  # built once, before the two submissions
    barrier = threading.Barrier(2)
    procs: dict[str, object] = {}

    def submit(name: str) -> None:
        barrier.wait()
        procs[name] = spark_submit(job, *args, *FAST)

    threads = [threading.Thread(target=submit, args=(name,)) for name in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return last_json(procs["a"]), last_json(procs["b"])


def test_two_upsert_jobs_with_one_token_commit_once(tmp_path, table_path):
    n = 150_000
    ids = np.arange(n)
    source = landing(tmp_path, "p", pa.table({"id": [f"k{i:07d}" for i in ids], "ts": np.ones(n, dtype=np.int64),
                                              "part": [f"p{i % 3}" for i in ids], "v": ids.astype(np.float64)}))
    Table.create(table_path, name="t", record_key="id", precombine_field="ts", partition_fields="part")
    a, b = at_once("upsert", "--table", table_path, "--source", source, "--operation", "insert",
                   "--run-token", "dag/run/ingest")
    assert a["instant"] == b["instant"] and a["inserts"] == b["inserts"] == n
    assert sorted([a["already_done"], b["already_done"]]) == [False, True]
    timeline = Table.open(table_path).timeline
    assert len(timeline.commits().completed()) == 1 and not timeline.pending().instants
    assert hudi_read(table_path).num_rows == n


def test_two_compaction_jobs_with_one_token_run_the_plan_once(table_path):
    plan = mor(table_path).plan_compaction(max_delta_commits=1)
    assert plan.instant
    a, b = at_once("compaction_execute", "--table", table_path, "--run-token", "dag/run/compact")
    assert a["instant"] == b["instant"] == plan.instant and a["files_written"] == b["files_written"] == 3
    assert sorted([a["already_done"], b["already_done"]]) == [False, True]
    timeline = Table.open(table_path).timeline
    assert timeline.get(plan.instant).is_completed and not timeline.pending().instants
    assert hudi_read(table_path).num_rows == 29
