"""The jobs on a real Spark standalone cluster: a master and a worker started from the pip
install's `sbin/spark-daemon.sh` (what `start-master.sh` / `start-worker.sh` run) on 127.0.0.1,
jobs submitted with `--master spark://127.0.0.1:PORT`, the table judged by hudi-rs. Executors
are then separate JVMs and Python workers under the worker, not threads of the driver. The
cluster (tests/spark/cluster.py) is the run's one, shared with test_secrets_standalone.py."""

from __future__ import annotations

import os

import pyarrow as pa

from tests.conftest import hudi_read, rows
from tests.spark.test_jobs import last_json, spark_submit
from tests.spark.test_upsert_job import landing

COLS = ["id", "ts", "part", "v"]
FAST = ["--option", "hoodie.client.heartbeat.interval_in_ms=2000"]


def batch(ids, ts: int) -> pa.Table:
    ids = list(ids)
    return pa.table({"id": [f"k{i:04d}" for i in ids], "ts": [ts] * len(ids),
                     "part": [["a", "b", "c"][i % 3] for i in ids], "v": [float(ts * 1000 + i) for i in ids]})


def test_jobs_on_a_standalone_cluster(cluster, tmp_path, table_path):
    def submit(name: str, *args: str) -> dict:
        return last_json(spark_submit(name, "--table", table_path, *FAST, *args, master=cluster.url, timeout=1800))

    model: dict[str, tuple] = {}
    for n, ids in enumerate((range(0, 600), range(300, 900, 2))):
        data = batch(ids, n + 1)
        done = submit("upsert", "--source", landing(tmp_path, f"b{n}", data), "--create-if-missing",
                      "--table-type", "MERGE_ON_READ", "--record-key", "id", "--precombine-field", "ts",
                      "--partition-fields", "part", "--run-token", f"standalone/upsert/{n}")
        new = {r[0] for r in rows(data, COLS)} - set(model)
        assert (done["inserts"], done["updates"]) == (len(new), data.num_rows - len(new)), done
        model.update({r[0]: r for r in rows(data, COLS)})
    assert rows(hudi_read(table_path), COLS) == sorted(model.values())

    planned = submit("compaction_schedule", "--max-delta-commits", "1", "--run-token", "standalone/schedule")
    assert planned["instant"] and planned["file_groups"] == 3
    compacted = submit("compaction_execute", "--run-token", "standalone/execute")
    assert compacted["instant"] == planned["instant"] and compacted["files_written"] == 3
    # the first batch's 3 file groups (the second batch's inserts went to new groups, no logs)
    assert compacted["records_written"] == 600
    cleaned = submit("clean", "--policy", "KEEP_LATEST_FILE_VERSIONS", "--retained", "1")
    assert cleaned["files_deleted"] > 0, cleaned

    # the work ran in the worker's executors: their logs name the tasks
    assert "Running task" in cluster.executor_logs()
    assert rows(hudi_read(table_path), COLS) == sorted(model.values())
    assert rows(hudi_read(table_path, **{"hoodie.read.use.read_optimized.mode": "true"}), COLS) == \
        sorted(model.values())
    assert not [f for f in os.listdir(f"{table_path}/a") if ".log." in f]  # cleaned: only the new base files
