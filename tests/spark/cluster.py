"""A Spark standalone cluster for the tests: a master and a worker started from the pip
install's `sbin/spark-daemon.sh` (what `start-master.sh` / `start-worker.sh` run) on 127.0.0.1.
One cluster serves the whole run (the `cluster` fixture of tests/spark/conftest.py)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from airflow_lake.spark.startup import QUICK_JIT


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
            PYSPARK_PYTHON=sys.executable, SPARK_DAEMON_JAVA_OPTS=" ".join(QUICK_JIT))

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
            except (OSError, ValueError):  # (not up yet; or up and its JSON page not yet attached: an HTML page)
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
            while alive(pid) and time.monotonic() < deadline:
                time.sleep(0.5)
            if alive(pid):
                os.kill(pid, 9)

    def logs(self) -> str:
        return "\n".join(p.read_text()[-2000:] for p in (self.root / "logs").glob("*.out"))

    def executor_logs(self) -> str:
        return "\n".join(p.read_text(errors="replace") for p in (self.root / "work").rglob("stderr"))


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
