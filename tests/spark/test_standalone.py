"""The jobs on a real Spark standalone cluster: a master and a worker started from the pip
install's `sbin/spark-daemon.sh` (what `start-master.sh` / `start-worker.sh` run) on 127.0.0.1,
jobs submitted with `--master spark://127.0.0.1:PORT`, the table judged by hudi-rs. Executors
are then separate JVMs and Python workers under the worker, not threads of the driver."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pyarrow as pa
import pytest

from tests.conftest import hudi_read, rows
from tests.spark.test_jobs import last_json, spark_submit
from tests.spark.test_upsert_job import landing

COLS = ["id", "ts", "part", "v"]
FAST = ["--option", "hoodie.client.heartbeat.interval_in_ms=2000"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Cluster:
    """A standalone master and one worker (2 cores, 1 GiB) in a scratch folder."""

    MASTER, WORKER = "org.apache.spark.deploy.master.Master", "org.apache.spark.deploy.worker.Worker"

    def __init__(self, root: Path):
        import pyspark

        self.home = Path(pyspark.__file__).resolve().parent
        self.root = root
        self.port, self.ui = free_port(), free_port()
        self.url = f"spark://127.0.0.1:{self.port}"
        for d in ("logs", "pids", "work", "conf"):
            (root / d).mkdir(parents=True, exist_ok=True)
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("SPARK_", "PYSPARK_"))}
        self.env.update(
            SPARK_HOME=str(self.home), SPARK_CONF_DIR=str(root / "conf"), SPARK_LOG_DIR=str(root / "logs"),
            SPARK_PID_DIR=str(root / "pids"), SPARK_WORKER_DIR=str(root / "work"), SPARK_LOCAL_IP="127.0.0.1",
            SPARK_MASTER_HOST="127.0.0.1", SPARK_MASTER_PORT=str(self.port), SPARK_MASTER_WEBUI_PORT=str(self.ui),
            SPARK_WORKER_CORES="2", SPARK_WORKER_MEMORY="1g", SPARK_WORKER_PORT=str(free_port()),
            SPARK_WORKER_WEBUI_PORT=str(free_port()), SPARK_IDENT_STRING=f"airflow-lake-{os.getpid()}",
            PYSPARK_PYTHON=sys.executable)

    def daemon(self, action: str, cls: str, *args: str) -> None:
        subprocess.run(["bash", str(self.home / "sbin" / "spark-daemon.sh"), action, cls, "1", *args],
                       env=self.env, check=action == "start", capture_output=True, text=True, timeout=120)

    def start(self) -> None:
        self.daemon("start", self.MASTER, "--host", "127.0.0.1", "--port", str(self.port),
                    "--webui-port", str(self.ui))
        self.daemon("start", self.WORKER, "--host", "127.0.0.1", "--cores", "2", "--memory", "1g", self.url)
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:  # the worker has registered with the master
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.ui}/json/", timeout=5) as r:
                    state = json.load(r)
                if any(w.get("state") == "ALIVE" for w in state.get("workers", [])):
                    return
            except OSError:
                pass
            time.sleep(1)
        raise AssertionError(f"no worker registered with {self.url}:\n{self.logs()}")

    def pids(self) -> list[int]:
        return [int(p.read_text().split()[0]) for p in (self.root / "pids").glob("*.pid") if p.read_text().strip()]

    def stop(self) -> None:
        started = self.pids()
        self.daemon("stop", self.WORKER)
        self.daemon("stop", self.MASTER)
        deadline = time.monotonic() + 60
        for pid in started:  # the daemons this cluster started, nothing else
            while _alive(pid) and time.monotonic() < deadline:
                time.sleep(0.5)
            if _alive(pid):
                os.kill(pid, 9)

    def logs(self) -> str:
        return "\n".join(p.read_text()[-2000:] for p in (self.root / "logs").glob("*.out"))

    def executor_logs(self) -> str:
        return "\n".join(p.read_text(errors="replace") for p in (self.root / "work").rglob("stderr"))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = Cluster(tmp_path_factory.mktemp("standalone"))
    try:
        c.start()
        yield c
    finally:
        c.stop()  # also when starting or a test failed
    assert not any(_alive(pid) for pid in c.pids()), "a daemon outlived stop"


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
