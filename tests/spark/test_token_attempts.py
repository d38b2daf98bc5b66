"""Two spark-submits of the upsert job with one run token at the same moment (a task submitted
twice): one commit, both report its instant, hudi-rs counts the rows once."""

from __future__ import annotations

import threading

import numpy as np
import pyarrow as pa

from airflow_lake.core import Table
from airflow_lake.spark.packaging import package_zip
from tests.conftest import hudi_read
from tests.spark.test_jobs import last_json, spark_submit
from tests.spark.test_upsert_job import landing

# a live driver's heartbeat (2 s beats, dead after 2 missed) and lock (6 s) survive a loaded machine
FAST = ["--option", "hoodie.client.heartbeat.interval_in_ms=2000",
        "--option", "hoodie.write.lock.filesystem.expire=0.1"]


def test_two_upsert_jobs_with_one_token_commit_once(tmp_path, table_path):
    n = 150_000
    ids = np.arange(n)
    source = landing(tmp_path, "p", pa.table({"id": [f"k{i:07d}" for i in ids], "ts": np.ones(n, dtype=np.int64),
                                              "part": [f"p{i % 3}" for i in ids], "v": ids.astype(np.float64)}))
    Table.create(table_path, name="t", record_key="id", precombine_field="ts", partition_fields="part")
    package_zip()  # built once, before the two submissions
    barrier = threading.Barrier(2)
    procs: dict[str, object] = {}

    def submit(name: str) -> None:
        barrier.wait()
        procs[name] = spark_submit("upsert", "--table", table_path, "--source", source, "--operation", "insert",
                                   "--run-token", "dag/run/ingest", *FAST)

    threads = [threading.Thread(target=submit, args=(name,)) for name in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    a, b = last_json(procs["a"]), last_json(procs["b"])
    assert a["instant"] == b["instant"] and a["inserts"] == b["inserts"] == n
    assert sorted([a["already_done"], b["already_done"]]) == [False, True]
    timeline = Table.open(table_path).timeline
    assert len(timeline.commits().completed()) == 1 and not timeline.pending().instants
    assert hudi_read(table_path).num_rows == n
