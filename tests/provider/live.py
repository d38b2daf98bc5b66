"""A real Airflow for the tests that need its processes: API server, scheduler (LocalExecutor),
DAG processor, triggerer, in their own AIRFLOW_HOME on SQLite."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

AIRFLOW = str(Path(sys.executable).with_name("airflow"))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Airflow:
    """The components of a real Airflow in their own AIRFLOW_HOME (SQLite, LocalExecutor)."""

    def __init__(self, home: Path, env: dict[str, str] | None = None):
        self.home = home
        port = _free_port()
        self.env = {**os.environ, "AIRFLOW_HOME": str(home), "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
                    "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home / 'airflow.db'}",
                    "AIRFLOW__CORE__DAGS_FOLDER": str(home / "dags"), "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
                    "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "False",
                    "AIRFLOW__API_AUTH__JWT_SECRET": "a-test-secret",
                    "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://127.0.0.1:{port}/execution/",
                    "AIRFLOW__API__PORT": str(port), "AIRFLOW__API__HOST": "127.0.0.1",
                    "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(_free_port()),
                    "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(_free_port()),
                    "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "2",
                    "AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC": "1", "AIRFLOW__TRIGGERER__JOB_HEARTBEAT_SEC": "1",
                    "AIRFLOW__CORE__UNIT_TEST_MODE": "False", **(env or {})}
        self.port = port
        self.procs: dict[str, subprocess.Popen] = {}
        subprocess.run([AIRFLOW, "db", "migrate"], env=self.env, check=True, capture_output=True, timeout=300)

    def start(self, component: str, *args: str) -> None:
        log = open(self.home / f"{component}.log", "a")
        self.procs[component] = subprocess.Popen([AIRFLOW, component, *args], env=self.env, stdout=log,
                                                 stderr=subprocess.STDOUT, start_new_session=True)

    def stop(self, component: str) -> None:
        proc = self.procs.pop(component)
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
        for _ in range(150):  # its children too (the triggerer's runner, the executor's workers)
            try:
                os.killpg(proc.pid, signal.SIGKILL if _ == 100 else 0)
            except ProcessLookupError:
                return
            time.sleep(0.2)
        raise AssertionError(f"airflow {component}: processes of group {proc.pid} outlived SIGKILL")

    def log(self, component: str) -> str:
        return (self.home / f"{component}.log").read_text(errors="replace")

    def close(self) -> None:
        for component in list(self.procs):
            try:
                self.stop(component)
            except Exception:
                pass
