"""A real Airflow for the tests that need its processes: API server, scheduler (LocalExecutor),
DAG processor, triggerer, in their own AIRFLOW_HOME on SQLite."""

from __future__ import annotations

import base64
import fcntl
import hashlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from importlib.metadata import distributions
from pathlib import Path

AIRFLOW = str(Path(sys.executable).with_name("airflow"))


def migrated_db(database: Path) -> None:
    """An Airflow database at `database` (SQLite), as `airflow db migrate` leaves it: migrated
    once per temp folder, virtualenv and Airflow distributions (3 CPU-s each time), then copied (it
    holds no path of its home: the log templates, the default pool, the schema's version).
    One already there is left as it is, as `db migrate` leaves a migrated one."""
    if database.exists():
        return
    airflow = sorted(f"{d.metadata['Name']}=={d.version}" for d in distributions()
                     if (d.metadata["Name"] or "").lower().startswith("apache-airflow"))  # (providers add tables)
    key = hashlib.sha1(" ".join([sys.prefix, *airflow]).encode()).hexdigest()[:12]
    folder = Path(tempfile.gettempdir()) / f"airflow-lake-db-{key}"
    folder.mkdir(exist_ok=True)
    template = folder / "airflow.db"
    with open(folder / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # (xdist's workers: one migrates, the others wait)
        if not template.exists():
            building = folder / "building.db"
            building.unlink(missing_ok=True)
            (folder / "dags").mkdir(exist_ok=True)
            env = {**os.environ, "AIRFLOW_HOME": str(folder), "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
                   "AIRFLOW__CORE__DAGS_FOLDER": str(folder / "dags"),
                   "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{building}"}
            proc = subprocess.run([AIRFLOW, "db", "migrate"], env=env, capture_output=True, text=True, timeout=300)
            assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
            os.replace(building, template)
    copying = database.with_name(f".{database.name}.{os.getpid()}")
    shutil.copyfile(template, copying)
    os.replace(copying, database)


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
                    # (the secrets `airflow db migrate` would have generated into an airflow.cfg:
                    # the components share these instead, none writes a file of its own)
                    "AIRFLOW__CORE__FERNET_KEY": base64.urlsafe_b64encode(os.urandom(32)).decode(),
                    "AIRFLOW__API__SECRET_KEY": base64.urlsafe_b64encode(os.urandom(16)).decode(),
                    "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://127.0.0.1:{port}/execution/",
                    "AIRFLOW__API__PORT": str(port), "AIRFLOW__API__HOST": "127.0.0.1",
                    "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(_free_port()),
                    "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(_free_port()),
                    "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "2",
                    "AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC": "1", "AIRFLOW__TRIGGERER__JOB_HEARTBEAT_SEC": "1",
                    "AIRFLOW__CORE__UNIT_TEST_MODE": "False", **(env or {})}
        self.port = port
        self.procs: dict[str, subprocess.Popen] = {}
        (home / "airflow.cfg").touch()  # Airflow's defaults and this environment, read alike by every component
        migrated_db(home / "airflow.db")

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
