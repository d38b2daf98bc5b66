"""Whether an earlier attempt of a run token is still alive is judged with the heartbeat
settings its job runs with: the lake connection's table options, then the operator's
`table_options` (issue 23, item 9, the hook's part). No Spark: nothing is submitted."""

from __future__ import annotations

import json
import os
import time

import pytest

from airflow_lake.core.table import Table
from airflow_lake.core.timeline.instant import Instant, State
from airflow_lake.core.txn.heartbeat import FOLDER, Heartbeat
from tests.provider.conftest import batch

TOKEN = "d/r/up/-1"
INTERVAL = "hoodie.client.heartbeat.interval_in_ms"


def pending_with_beat(path: str, age_s: float) -> str:
    """A pending commit started with TOKEN whose last heartbeat is `age_s` seconds old."""
    t = Table.create(path, name="t", record_key="id", precombine_field="ts")
    t.write(batch([1]))
    with t.lock():
        timeline = t.timeline
        running = t.new_instant_time(timeline)
        timeline.create(Instant(running, "commit", State.REQUESTED), token=TOKEN)
        timeline.transition(Instant(running, "commit", State.REQUESTED), State.INFLIGHT)
    Heartbeat(t.storage, running, 1000).beat()
    beat = os.path.join(path, FOLDER, running)
    then = time.time() - age_s
    os.utime(beat, (then, then))
    return running


@pytest.fixture
def lake_conn(monkeypatch, tmp_path):
    """`lake_hb`: its table options beat every 10 minutes."""
    extra = {"base_path": str(tmp_path), "table_options": {INTERVAL: 600_000}}
    monkeypatch.setenv("AIRFLOW_CONN_LAKE_HB", json.dumps({"conn_type": "lake", "extra": extra}))
    monkeypatch.setenv("PATH", "/nonexistent")  # nothing may be submitted
    return "lake_hb"


def test_live_attempt_uses_the_jobs_heartbeat_settings(tmp_path, lake_conn):
    from airflow_lake.hooks import LakeHook
    from airflow_lake.hooks.submit import LakeJobError

    path = str(tmp_path / "t")
    running = pending_with_beat(path, age_s=30)
    hook = LakeHook(lake_conn)
    # the connection's 10-minute interval: a 30 s old beat is alive
    assert hook.live_attempt("t", TOKEN) == running
    # the job beats every second (2 misses tolerated): 30 s of silence means it died
    assert hook.live_attempt("t", TOKEN, table_options={INTERVAL: 1000}) is None
    assert hook.await_attempt("t", TOKEN, table_options={INTERVAL: 1000}, timeout=0) is None
    with pytest.raises(LakeJobError, match=f"instant {running} of run token {TOKEN} is still running"):
        hook.await_attempt("t", TOKEN, timeout=0, poll=0)
    # and the other way round: a job beating every 10 minutes, under a connection that says 1 s
    short = LakeHook(lake_conn)
    short.settings.table_options[INTERVAL] = 1000
    assert short.live_attempt("t", TOKEN) is None
    assert short.live_attempt("t", TOKEN, table_options={INTERVAL: 600_000}) == running


def test_the_operator_judges_an_attempt_by_its_own_table_options(tmp_path, lake_conn):
    from airflow_lake.operators import UpsertOperator

    path = str(tmp_path / "t")
    running = pending_with_beat(path, age_s=30)
    stored = {"token": TOKEN, "result": {"instant": "20000101000000000"}}

    def status(table_options):
        op = UpsertOperator(task_id="up", table_path="t", source="s", lake_conn_id=lake_conn, asset=False,
                            table_options=table_options)
        op._token = TOKEN
        return op.get_job_status(stored, {})

    assert status(None) == "lake:RUNNING"  # the connection's 10 minutes
    assert status({INTERVAL: 1000}) == "lake:FAILED"  # the job's 1 s: the attempt is dead, run again
    assert Table.open(path).timeline.get(running).state == State.INFLIGHT  # judged, never rolled back here
