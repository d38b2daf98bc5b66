"""`TableCommitTrigger` in an `AssetWatcher`: a real Airflow (API server, scheduler with the
LocalExecutor, DAG processor, triggerer; SQLite) runs a DAG scheduled on a table's Asset when a
process outside Airflow commits to the table; the triggerer is stopped, commits land while it
is down, and the restarted triggerer fires them once, the earlier commit never again. The
trigger's own loop is also run directly: back-off over storage errors that pass, the
watermark in the state store, `start_from`."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest

from airflow_lake.core.errors import StorageUnavailableError
from airflow_lake.core.storage import open_storage
from airflow_lake.core.table import Table
from airflow_lake.triggers.commit import TableCommitTrigger
from tests.provider.conftest import batch
from tests.provider.live import Airflow

CONSUMER = """
import json
from datetime import datetime

from airflow.sdk import DAG, Asset, AssetWatcher, task

from airflow_lake.triggers import TableCommitTrigger

TABLE = {table!r}
table = Asset(uri="hudi:" + TABLE, name="t", watchers=[
    AssetWatcher(name="t_commits", trigger=TableCommitTrigger(table_path=TABLE, poll_interval=0.5))])

with DAG("on_table_commit", schedule=[table], start_date=datetime(2024, 1, 1), catchup=False):
    @task
    def record(triggering_asset_events=None):
        with open({events!r}, "a") as f:
            for event in triggering_asset_events[table]:
                f.write(json.dumps(event.extra["payload"]) + "\\n")

    record()
"""


def _events(path: Path, count: int, airflow: Airflow, timeout: float = 120, settle: float = 5) -> list[dict]:
    """The payloads the consumer DAG recorded, once there are `count` (then `settle` seconds
    longer, to see none more comes)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        lines = path.read_text().splitlines() if path.exists() else []
        if len(lines) >= count:
            time.sleep(settle)
            return [json.loads(x) for x in path.read_text().splitlines()]
        time.sleep(0.5)
    raise AssertionError(f"{len(lines)} of {count} events after {timeout} s; triggerer log:\n"
                         f"{airflow.log('triggerer')[-3000:]}\nscheduler log:\n{airflow.log('scheduler')[-3000:]}")


@pytest.mark.slow
def test_a_dag_on_the_table_asset_runs_for_commits_of_any_writer_across_a_triggerer_restart(tmp_path):
    home = tmp_path / "home"
    (home / "dags").mkdir(parents=True)
    path, events = str(tmp_path / "lake" / "t"), tmp_path / "events.jsonl"
    table = Table.create(path, name="t", record_key="id", precombine_field="ts")
    before = table.write(batch([1])).instant  # on the timeline before the watcher starts: never fires
    (home / "dags" / "consumer.py").write_text(CONSUMER.format(table=path, events=str(events)))
    airflow = Airflow(home)
    try:
        airflow.start("api-server", "--apps", "execution")  # the tasks' API; no UI or REST API needed
        for component in ("dag-processor", "scheduler", "triggerer"):
            airflow.start(component)
        deadline = time.monotonic() + 180
        while "watching from watermark" not in airflow.log("triggerer"):
            assert time.monotonic() < deadline, airflow.log("triggerer")[-3000:]
            time.sleep(0.5)
        first = table.write(batch([2], ts=2)).instant  # a writer outside Airflow
        [event] = _events(events, 1, airflow, settle=0)  # (a second firing would show in the last check)
        assert [i["instant"] for i in event["instants"]] == [first] and event["previous_watermark"] == before

        airflow.stop("triggerer")
        down = [table.write(batch([3], ts=3)).instant, table.write(batch([4], ts=4)).instant]
        airflow.start("triggerer")
        recorded = _events(events, 2, airflow)
        assert [[i["instant"] for i in e["instants"]] for e in recorded] == [[first], down]  # once each, none lost
        assert f"watching from the stored watermark {first}" in airflow.log("triggerer")
    finally:
        airflow.close()


# -- the trigger's loop, run directly -------------------------------------------------------------
class MemoryStore:
    """Stands for the Asset state store the triggerer injects."""

    def __init__(self):
        self.values: dict = {}

    async def aget(self, key, default=None):
        return self.values.get(key, default)

    async def aset(self, key, value):
        self.values[key] = json.loads(json.dumps(value))


async def _next_event(run, timeout: float = 20):
    return (await asyncio.wait_for(run.__anext__(), timeout)).payload


async def _stored(store: MemoryStore, watermark, timeout: float = 20) -> None:
    """Wait until the store holds a watermark (`...`: any) equal to `watermark`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        held = store.values.get(KEY)
        if held is not None and (watermark is ... or held["watermark"] == watermark):
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"watermark {watermark} not stored: {store.values}")


KEY = "airflow_lake.table_commit_trigger/data"


def test_a_restarted_trigger_goes_on_from_the_stored_watermark(tmp_path):
    path = str(tmp_path / "t")
    store = MemoryStore()

    async def scenario():
        table = Table.create(path, name="t", record_key="id", precombine_field="ts")
        trigger = TableCommitTrigger(path, poll_interval=0.05, lake_conn_id=None)
        trigger.asset_state_store = store
        run = trigger.run()
        waiting = asyncio.ensure_future(_next_event(run))
        await _stored(store, ...)  # the first look, at the empty table: watching from there
        one = table.write(batch([1])).instant
        assert [i["instant"] for i in (await waiting)["instants"]] == [one]
        # the triggerer asks for the next event: the watermark is stored; then it stops
        asking = asyncio.ensure_future(_next_event(run))
        await _stored(store, one)
        asking.cancel()
        two = table.write(batch([2])).instant
        again = TableCommitTrigger(path, poll_interval=0.05, lake_conn_id=None)
        again.asset_state_store = store
        run = again.run()
        assert [i["instant"] for i in (await _next_event(run))["instants"]] == [two]  # not `one` again
        await run.aclose()
        # closed before asking for more: the watermark stays at `one`, so a restart repeats `two`
        # (at least once: an event the triggerer may not have stored is never dropped)
        assert store.values[KEY]["watermark"] == one

        beginning = TableCommitTrigger(path, poll_interval=0.05, lake_conn_id=None, start_from="beginning")
        run = beginning.run()  # (no state store: everything on the timeline is new once)
        assert [i["instant"] for i in (await _next_event(run))["instants"]] == [one, two]
        await run.aclose()

    asyncio.run(scenario())


def test_storage_errors_that_pass_are_waited_out(tmp_path, monkeypatch):
    path = str(tmp_path / "t")
    table = Table.create(path, name="t", record_key="id", precombine_field="ts")
    one = table.write(batch([1])).instant
    failures = {"left": 3}

    class Flaky(type(open_storage(path))):
        def exists(self, name):
            if failures["left"]:
                failures["left"] -= 1
                raise StorageUnavailableError(f"{path}: 503 Slow Down")
            return super().exists(name)

    monkeypatch.setattr("airflow_lake.triggers.commit.open_storage", lambda uri, options: Flaky(uri))

    async def scenario():
        trigger = TableCommitTrigger(path, poll_interval=0.01, lake_conn_id=None, start_from="beginning")
        run = trigger.run()
        payload = await _next_event(run)
        await run.aclose()
        return payload

    assert [i["instant"] for i in asyncio.run(scenario())["instants"]] == [one] and failures["left"] == 0


def test_secret_storage_options_and_a_bad_start_are_refused():
    with pytest.raises(ValueError, match="secret"):
        TableCommitTrigger("s3://b/t", storage_options={"aws_secret_access_key": "x"})
    with pytest.raises(ValueError, match="start_from must be one of latest, beginning"):
        TableCommitTrigger("/t", start_from="now")
    with pytest.raises(ValueError, match="poll_interval must be above 0"):
        TableCommitTrigger("/t", poll_interval=0)
