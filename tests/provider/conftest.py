"""A throwaway AIRFLOW_HOME for the provider tests (set before Airflow is imported) and
helpers to build real tables with the core."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pyarrow as pa
import pytest

from tests.provider.live import migrated_db

_HOME = Path(tempfile.mkdtemp(prefix="airflow-lake-home-"))
(_HOME / "dags").mkdir()
AIRFLOW_ENV = {
    "AIRFLOW_HOME": str(_HOME),
    "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
    "AIRFLOW__CORE__DAGS_FOLDER": str(_HOME / "dags"),
    "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{_HOME / 'airflow.db'}",
    "AIRFLOW__CORE__UNIT_TEST_MODE": "False",
}
os.environ.update(AIRFLOW_ENV)


@pytest.fixture(scope="session", autouse=True)
def _remove_airflow_home():
    yield
    shutil.rmtree(_HOME, ignore_errors=True)


@pytest.fixture(scope="session")
def airflow_db() -> Path:
    """This session's Airflow database, migrated (`live.migrated_db`)."""
    migrated_db(_HOME / "airflow.db")
    return _HOME


def batch(ids: list[int], ts: int = 1) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "ts": pa.array([ts] * len(ids), pa.int64()),
                     "value": pa.array([f"v{i}" for i in ids])})


class StatsdListener:
    """A UDP socket where Airflow's StatsD client sends the metrics (`[metrics] statsd_on`)."""

    def __init__(self):
        import socket

        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.lines: list[str] = []

    def received(self) -> list[str]:
        """Every metric line received so far (`name:value|type`)."""
        while True:
            try:
                data = self.sock.recv(65536)
            except TimeoutError:
                return self.lines
            self.lines += [x for x in data.decode().splitlines() if x]

    def values(self, name: str) -> list[str]:
        return [x.split(":", 1)[1] for x in self.received() if x.split(":", 1)[0] == name]


@pytest.fixture
def statsd(monkeypatch):
    """Airflow's metrics on, sent by StatsD to a listener: the deployment's `[metrics]`
    settings, then what a task runner does when it starts (`stats.initialize`)."""
    from airflow.sdk.observability import stats
    from airflow.sdk.observability.metrics import stats_utils

    listener = StatsdListener()
    monkeypatch.setenv("AIRFLOW__METRICS__STATSD_ON", "True")
    monkeypatch.setenv("AIRFLOW__METRICS__STATSD_HOST", "127.0.0.1")
    monkeypatch.setenv("AIRFLOW__METRICS__STATSD_PORT", str(listener.port))
    stats.initialize(factory=stats_utils.get_stats_factory(), export_legacy_names=False)
    yield listener
    monkeypatch.delenv("AIRFLOW__METRICS__STATSD_ON")
    stats.initialize(factory=stats_utils.get_stats_factory(), export_legacy_names=False)
    listener.sock.close()
