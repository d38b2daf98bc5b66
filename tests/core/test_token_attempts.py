"""Two attempts with one run token (a task submitted twice at the same moment, or retried while
its first try still runs) make at most one instant: the second waits for the first while its
heartbeat is live and returns its result, or takes over once that heartbeat has expired.
hudi-rs counts the rows once."""

from __future__ import annotations

import threading

import numpy as np
import pyarrow as pa
import pytest

from airflow_lake.core import Table
from airflow_lake.core.timeline import tokens
from airflow_lake.core.timeline.instant import COMMIT, Instant, State
from airflow_lake.core.txn import transaction as attempt
from tests.conftest import hudi_read
from tests.core.test_compaction import mor
from tests.core.test_concurrency import GateEngine

KEY = tokens.TOKEN_KEY
# a live attempt beats every 0.3 s and is dead after 0.6 s without a beat; the lock outlives a
# loaded machine's pauses
OPTIONS = {"hoodie.client.heartbeat.interval_in_ms": 300, "hoodie.client.heartbeat.tolerable.misses": 2,
           "hoodie.write.lock.filesystem.expire": 0.2}


def batch(n: int, start: int = 0) -> pa.Table:
    ids = np.arange(start, start + n)
    return pa.table({"id": [f"k{i:07d}" for i in ids], "ts": np.ones(n, dtype=np.int64),
                     "part": [f"p{i % 3}" for i in ids], "v": ids.astype(np.float64)})


def create(path: str, table_type: str = "COPY_ON_WRITE") -> Table:
    return Table.create(path, name="t", table_type=table_type, record_key="id", precombine_field="ts",
                        partition_fields="part", options=OPTIONS)


def in_thread(fn, outcome: dict, name: str) -> threading.Thread:
    def run():
        try:
            outcome[name] = fn()
        except Exception as e:  # noqa: BLE001 - the test inspects it
            outcome[name] = e

    thread = threading.Thread(target=run)
    thread.start()
    return thread


@pytest.fixture
def waits(monkeypatch) -> threading.Event:
    """Set when an attempt waits for a running one with its token."""
    event = threading.Event()
    real = attempt.sleep

    def sleep(seconds: float) -> None:
        event.set()
        real(seconds)

    monkeypatch.setattr(attempt, "sleep", sleep)
    return event


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_two_writes_with_one_token_at_the_same_moment_commit_once(table_path, table_type):
    create(table_path, table_type)
    data = batch(150_000)
    barrier = threading.Barrier(2)
    outcome: dict = {}

    def attempt_(name: str):
        table = Table.open(table_path, options=OPTIONS)
        barrier.wait()
        return table.write(data, operation="insert", extra_metadata={KEY: "dag/run/load/-1"})

    threads = [in_thread(lambda n=n: attempt_(n), outcome, n) for n in ("a", "b")]
    for t in threads:
        t.join()
    a, b = outcome["a"], outcome["b"]
    assert not isinstance(a, Exception) and not isinstance(b, Exception), outcome
    assert a.instant == b.instant and a.num_inserts == b.num_inserts == 150_000
    assert len(Table.open(table_path).timeline.commits().completed()) == 1
    assert hudi_read(table_path).num_rows == 150_000


def test_a_second_attempt_waits_for_the_running_one_and_returns_its_result(table_path, waits):
    create(table_path)
    gate, started = threading.Event(), threading.Event()
    slow = Table.open(table_path, options=OPTIONS, engine=GateEngine(gate, started))
    outcome: dict = {}
    first = in_thread(lambda: slow.write(batch(1000), extra_metadata={KEY: "run/1"}), outcome, "first")
    assert started.wait(30)  # the first attempt holds its instant, mid-write
    second = in_thread(lambda: Table.open(table_path, options=OPTIONS).write(batch(1000),
                                                                             extra_metadata={KEY: "run/1"}),
                       outcome, "second")
    assert waits.wait(30), outcome  # it waits for the live attempt instead of writing
    assert "second" not in outcome
    gate.set()
    first.join()
    second.join()
    assert not isinstance(outcome["second"], Exception), outcome
    assert outcome["second"].instant == outcome["first"].instant
    assert outcome["second"].num_inserts == 1000 and outcome["second"].already_done
    assert not outcome["first"].already_done
    assert len(Table.open(table_path).timeline.commits().completed()) == 1
    assert hudi_read(table_path).num_rows == 1000


def test_an_attempt_whose_heartbeat_expires_is_taken_over(table_path, waits):
    t = create(table_path)
    t.write(batch(10), operation="insert")
    # a first attempt that created its instant, beat once and was killed
    dead = Instant("20300101000000000", COMMIT, State.REQUESTED)
    t.timeline.create(dead, token="run/killed")
    t.storage.write(f".hoodie/.heartbeat/{dead.time}", b"0")
    result = Table.open(table_path, options=OPTIONS).write(batch(10, 10), extra_metadata={KEY: "run/killed"})
    assert waits.is_set()  # waited while the heartbeat was live, then took over
    timeline = Table.open(table_path).timeline
    assert result.instant != dead.time and not result.already_done
    assert not timeline.contains(dead.time) and not timeline.pending().instants
    assert timeline.find_token("run/killed").time == result.instant
    assert hudi_read(table_path).num_rows == 20


def test_a_second_compaction_execute_with_the_token_waits_and_returns_the_first(table_path, waits):
    mor(table_path, **OPTIONS)
    plan = Table.open(table_path, options=OPTIONS).plan_compaction(max_delta_commits=1)
    assert plan.instant
    gate, started = threading.Event(), threading.Event()
    slow = Table.open(table_path, options=OPTIONS, engine=GateEngine(gate, started))
    outcome: dict = {}
    first = in_thread(lambda: slow.run_compaction(extra_metadata={KEY: "run/compact"}), outcome, "first")
    assert started.wait(30)
    second = in_thread(lambda: Table.open(table_path, options=OPTIONS).run_compaction(
        extra_metadata={KEY: "run/compact"}), outcome, "second")
    assert waits.wait(30), outcome
    gate.set()
    first.join()
    second.join()
    assert not isinstance(outcome["second"], Exception), outcome
    assert outcome["first"].instant == outcome["second"].instant == plan.instant
    assert outcome["second"].already_done and not outcome["first"].already_done
    assert outcome["second"].files == outcome["first"].files
    assert hudi_read(table_path).num_rows == 29


def test_a_second_clean_with_the_token_waits_and_returns_the_first(table_path, waits):
    t = create(table_path)
    for _ in range(4):
        t.write(batch(30))  # every file group rewritten four times
    gate, started = threading.Event(), threading.Event()
    slow = Table.open(table_path, options=OPTIONS, engine=GateEngine(gate, started))
    outcome: dict = {}
    first = in_thread(lambda: slow.clean(retained=1, extra_metadata={KEY: "run/clean"}), outcome, "first")
    assert started.wait(30)  # the plan is on the timeline; its deletions are held
    second = in_thread(lambda: Table.open(table_path, options=OPTIONS).clean(
        retained=1, extra_metadata={KEY: "run/clean"}), outcome, "second")
    assert waits.wait(30), outcome
    gate.set()
    first.join()
    second.join()
    assert not isinstance(outcome["second"], Exception), outcome
    assert outcome["first"].instant == outcome["second"].instant
    assert outcome["first"].files == outcome["second"].files and outcome["first"].files
    assert len(Table.open(table_path).timeline.actions("clean").completed()) == 1
    assert hudi_read(table_path).num_rows == 30
