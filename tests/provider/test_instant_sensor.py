"""InstantSensor's poke logic and LakeInstantTrigger against real tables (no Airflow run)."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from airflow_lake.core.errors import InvalidOptionError, LakeError
from airflow_lake.core.table import Table
from airflow_lake.core.timeline.active import ActiveTimeline
from airflow_lake.core.timeline.instant import COMMIT, DELTA_COMMIT, Instant, State
from airflow_lake.core.timeline.metadata import CommitMetadata
from airflow_lake.core.txn.heartbeat import Heartbeat
from airflow_lake.sensors import InstantSensor
from airflow_lake.triggers import LakeInstantTrigger
from airflow_lake.watch import Baseline, TimelineWatch
from tests.provider.conftest import batch


def cow(path: str) -> Table:
    return Table.create(path, name="t", record_key="id", precombine_field="ts")


def mor(path: str) -> Table:
    return Table.create(path, name="m", table_type="MERGE_ON_READ", record_key="id", precombine_field="ts")


def sensor(path: str, **kwargs) -> InstantSensor:
    kwargs.setdefault("track_watermark", False)
    return InstantSensor(task_id="wait", table_path=path, poke_interval=0.05, timeout=30, **kwargs)


def poke(s: InstantSensor):
    """One poke; the result dict when the sensor fires, else None."""
    got = s.poke({})
    return got.xcom_value if got else None


def begin_pending(table: Table, action: str = COMMIT) -> str:
    """A write that has started (requested, inflight, live heartbeat) and not completed."""
    with table.lock():
        timeline = table.timeline
        time_ = table.new_instant_time(timeline)
        requested = timeline.create(Instant(time_, action, State.REQUESTED))
        timeline.transition(requested, State.INFLIGHT)
    Heartbeat(table.storage, time_, 60_000).beat()
    return time_


def complete_pending(table: Table, time_: str, action: str = COMMIT) -> None:
    meta = CommitMetadata("UPSERT", {}, {"schema": table.timeline.commit_metadata(
        table.timeline.commits().completed().last).schema})
    ActiveTimeline(table.storage).transition(Instant(time_, action, State.INFLIGHT), State.COMPLETED,
                                             meta.to_bytes())
    table.storage.delete(f".hoodie/.heartbeat/{time_}")


def test_fires_on_a_commit_after_the_baseline_only(table_path):
    t = cow(table_path)
    first = t.write(batch([1, 2])).instant
    s = sensor(table_path)
    result = poke(s)  # no baseline: from the beginning
    assert result["instants"] == [{"instant": first, "action": "commit"}]
    assert result["watermark"] == first and result["previous_watermark"] is None
    assert result["table"] == table_path and result["completed_after_watermark"] == []

    s = sensor(table_path, baseline=result)
    assert poke(s) is None
    second = t.write(batch([3])).instant
    got = poke(s)
    assert got["instants"] == [{"instant": second, "action": "commit"}]
    assert (got["previous_watermark"], got["watermark"]) == (first, second)
    # an instant time works as a baseline too (the watermark alone)
    assert poke(sensor(table_path, baseline=first))["instants"] == got["instants"]
    assert poke(sensor(table_path, baseline=second)) is None


def test_compaction_is_not_new_data_unless_asked_for(table_path):
    t = mor(table_path)
    t.write(batch([1, 2, 3]), operation="insert")
    t.write(batch([1, 2], ts=2))
    baseline = poke(sensor(table_path))
    plan = t.schedule_compaction(strategy="NUM_COMMITS", max_delta_commits=1)
    assert plan is not None
    assert poke(sensor(table_path, baseline=baseline)) is None  # plan pending
    t.run_compaction(plan)
    assert poke(sensor(table_path, baseline=baseline)) is None  # completed compaction: not data
    compactions = poke(sensor(table_path, baseline=baseline, actions=["compaction"]))
    assert compactions["instants"] == [{"instant": plan, "action": "compaction"}]
    upsert = t.write(batch([3], ts=3)).instant
    data = poke(sensor(table_path, baseline=baseline))
    assert data["instants"] == [{"instant": upsert, "action": "deltacommit"}]
    # the commit file of the compaction says compacted: true; the sensor agrees with it
    assert t.timeline.commit_metadata(t.timeline.get(plan)).compacted


def test_actions_filter_and_min_new_instants(table_path):
    t = cow(table_path)
    base = t.write(batch([1])).instant
    s = sensor(table_path, baseline=base, min_new_instants=2)
    one = t.write(batch([2])).instant
    assert poke(s) is None
    over = t.write(batch([3]), operation="insert_overwrite_table").instant
    got = poke(s)
    assert got["instants"] == [{"instant": one, "action": "commit"}, {"instant": over, "action": "replacecommit"}]
    only = poke(sensor(table_path, baseline=base, actions=["replacecommit"]))
    assert only["instants"] == [{"instant": over, "action": "replacecommit"}]
    assert poke(sensor(table_path, baseline=over, actions="commit,replacecommit")) is None


def test_out_of_order_completion_watermark_is_the_block_bound(table_path):
    t = cow(table_path)
    first = t.write(batch([1])).instant
    pending = begin_pending(t)  # a long write starts ...
    short = t.write(batch([2])).instant  # ... a later one completes first
    assert first < pending < short

    got = poke(sensor(table_path, baseline=first))
    assert got["instants"] == [{"instant": short, "action": "commit"}]
    # BLOCK bound: everything at or before the watermark was complete; the pending write holds it back
    assert got["watermark"] == first and got["completed_after_watermark"] == [short]
    # the same instants do not fire twice while the hole stays open
    assert poke(sensor(table_path, baseline=got)) is None

    complete_pending(t, pending)  # started before the baseline was taken, completed after it
    late = poke(sensor(table_path, baseline=got))
    assert late["instants"] == [{"instant": pending, "action": "commit"}]
    assert late["watermark"] == short and late["completed_after_watermark"] == []
    # a bare watermark baseline would have said "new" for anything above it: correct, never lost
    assert [i["instant"] for i in poke(sensor(table_path, baseline=first))["instants"]] == [pending, short]


def test_pending_compaction_holds_back_only_a_compaction_watermark(table_path):
    t = mor(table_path)
    t.write(batch([1, 2]), operation="insert")
    last = t.write(batch([1], ts=2)).instant
    plan = t.schedule_compaction(strategy="NUM_COMMITS", max_delta_commits=1)
    after = t.write(batch([2], ts=3)).instant
    data = TimelineWatch(t.storage).observe()
    assert data.watermark == after and data.pending == []
    compact = TimelineWatch(t.storage, ["compaction"]).observe()
    assert compact.watermark == last and compact.pending == [plan]


def test_bad_arguments_name_the_table(table_path):
    cow(table_path)
    with pytest.raises(LakeError, match=f"table {table_path}: baseline 'yesterday' is not an instant time"):
        poke(sensor(table_path, baseline="yesterday"))
    with pytest.raises(LakeError, match=f"table {table_path}: actions: unknown timeline action 'upsert'"):
        sensor(table_path, actions=["upsert"])
    with pytest.raises(LakeError, match=f"table {table_path}: min_new_instants must be a whole number of at least 1"):
        sensor(table_path, min_new_instants=0)
    # an upsert's result is no sensor result: refused, not read as "from the beginning"
    upserted = {"instant": "20240101000000000", "inserts": 1}
    with pytest.raises(LakeError, match=f"table {table_path}: baseline .* is not an InstantSensor result"):
        poke(sensor(table_path, baseline=upserted))
    with pytest.raises(LakeError, match="baseline watermark: 'x' is not an instant time"):
        poke(sensor(table_path, baseline={"watermark": "x"}))
    with pytest.raises(InvalidOptionError, match="relative or templated"):
        InstantSensor(task_id="w", table_path="orders")
    missing = table_path + "-missing"
    with pytest.raises(LakeError, match=f"{missing} is not a Hudi table"):
        poke(sensor(missing))


# -- the trigger ----------------------------------------------------------------------------
def test_trigger_serializes_to_an_importable_class(table_path):
    trigger = LakeInstantTrigger(table_path, baseline="20240101000000000", actions=["deltacommit", "commit"],
                                 min_new_instants=2, poll_interval=5, lake_conn_id="lake_x")
    path, kwargs = trigger.serialize()
    assert path == "airflow_lake.triggers.instant.LakeInstantTrigger"
    module, name = path.rsplit(".", 1)
    again = getattr(__import__(module, fromlist=[name]), name)(**kwargs)
    assert again.serialize() == (path, kwargs)
    assert kwargs["baseline"] == {"watermark": "20240101000000000", "completed_after_watermark": []}
    assert kwargs["actions"] == ["commit", "deltacommit"]


async def _events(trigger: LakeInstantTrigger, limit: float = 20) -> list:
    async def collect():
        return [event async for event in trigger.run()]

    return await asyncio.wait_for(collect(), limit)


def test_trigger_fires_once_on_a_commit_not_on_a_compaction(table_path):
    t = mor(table_path)
    t.write(batch([1, 2]), operation="insert")
    t.write(batch([1], ts=2))
    baseline = poke(sensor(table_path))
    compacted = []

    def later():
        time.sleep(0.3)
        plan = t.schedule_compaction(strategy="NUM_COMMITS", max_delta_commits=1)
        compacted.append(t.run_compaction(plan).instant)
        time.sleep(0.3)  # several polls see the completed compaction and do not fire
        compacted.append(t.write(batch([2], ts=3)).instant)

    writer = threading.Thread(target=later)
    writer.start()
    ticks = 0

    async def run_with_ticker():
        nonlocal ticks

        async def ticker():  # the event loop stays free while the trigger polls
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0.01)

        task = asyncio.create_task(ticker())
        try:
            return await _events(LakeInstantTrigger(table_path, baseline=baseline, poll_interval=0.05))
        finally:
            task.cancel()

    events = asyncio.run(run_with_ticker())
    writer.join()
    compaction, upsert = compacted
    assert len(events) == 1 and events[0].payload["status"] == "success"
    result = events[0].payload["result"]
    assert result["instants"] == [{"instant": upsert, "action": "deltacommit"}]
    assert compaction not in [i["instant"] for i in result["instants"]]
    assert result["watermark"] == upsert and result["table"] == table_path
    assert ticks > 20


def test_trigger_reports_errors_as_one_event(table_path):
    events = asyncio.run(_events(LakeInstantTrigger(table_path + "-missing", poll_interval=0.05)))
    assert len(events) == 1
    assert events[0].payload["status"] == "error"
    assert "is not a Hudi table" in events[0].payload["message"]


def test_baseline_parses_previous_results_and_json(table_path):
    cow(table_path).write(batch([1]))
    result = poke(sensor(table_path))
    import json

    assert Baseline.parse(json.dumps(result)) == Baseline.parse(result) == Baseline(result["watermark"])
    assert Baseline.parse(None) == Baseline.parse("") == Baseline()


def test_deltacommit_pending_blocks_like_reads(table_path):
    t = mor(table_path)
    first = t.write(batch([1]), operation="insert").instant
    hole = begin_pending(t, DELTA_COMMIT)
    later = t.write(batch([2]), operation="insert").instant
    seen = TimelineWatch(t.storage).observe(Baseline(first))
    assert seen.watermark == first and seen.pending == [hole]
    assert [i["instant"] for i in seen.new] == [later]
    # the watermark is what an incremental read with holes="BLOCK" reaches
    assert t.read_incremental(first, later, holes="BLOCK").num_rows == 0
    complete_pending(t, hole, DELTA_COMMIT)
    assert TimelineWatch(t.storage).observe(seen.baseline).watermark == later


def test_a_first_results_watermarks_pull_the_new_rows_as_the_docs_show(table_path):
    """docs/operators.md: `read_incremental(previous_watermark, watermark)`; a first run's
    previous watermark is None: from the beginning."""
    t = cow(table_path)
    t.write(batch([1, 2]))
    first = poke(sensor(table_path))
    assert first["previous_watermark"] is None
    assert sorted(t.read_incremental(first["previous_watermark"], first["watermark"])["id"].to_pylist()) == [1, 2]
    t.write(batch([3]))
    second = poke(sensor(table_path, baseline=first))
    assert t.read_incremental(second["previous_watermark"], second["watermark"])["id"].to_pylist() == [3]
    assert sorted(t.read_incremental(None)["id"].to_pylist()) == [1, 2, 3]
