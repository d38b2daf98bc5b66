"""Processes racing on S3: for each instant both try to create the same completed instant
file, exactly one wins and the file holds the winner's content; the `.hoodie/lock` file
excludes: read-modify-write of a counter under it loses no increment, also when the processes
race to take over a dead holder's lock."""

from __future__ import annotations

import json
import multiprocessing
import time

import pyarrow as pa

from airflow_lake.core import Table
from airflow_lake.core.errors import TimelineError
from airflow_lake.core.lock import LOCK_PATH, FileSystemLock
from airflow_lake.core.timeline.active import ActiveTimeline
from airflow_lake.core.timeline.instant import COMMIT, Instant, State

ROUNDS = 12
WORKERS = 2


def _race_instants(uri: str, options: dict, me: int, times: list[str], barrier, results) -> None:
    table = Table.open(uri, storage_options=options)
    won = []
    for t in times:
        timeline = ActiveTimeline(table.storage)
        barrier.wait(timeout=120)  # all start each round together
        try:
            timeline.create(Instant(t, COMMIT, State.COMPLETED), json.dumps({"writer": me}).encode())
            won.append(t)
        except TimelineError:
            pass
    results.put((me, won))


def _increment(uri: str, options: dict, rounds: int, barrier, expire_ms: int = 60_000) -> None:
    table = Table.open(uri, storage_options=options)
    barrier.wait(timeout=120)
    for _ in range(rounds):
        with FileSystemLock(table.storage, expire_ms=expire_ms, wait_ms=300_000):
            n = int(table.storage.read("counter"))
            time.sleep(0.05)  # widen the window a second holder would need
            table.storage.write("counter", str(n + 1).encode())




def test_exactly_one_creator_wins_each_completed_instant(s3_table, s3_options):
    table = Table.create(s3_table, name="t", record_key="id", storage_options=s3_options)
    table.write(pa.table({"id": [1]}))
    times = [f"2030010112{m:02d}00000" for m in range(ROUNDS)]
    ctx = multiprocessing.get_context("spawn")
    barrier, results = ctx.Barrier(WORKERS), ctx.Queue()
    procs = [ctx.Process(target=_race_instants, args=(s3_table, s3_options, i, times, barrier, results))
             for i in range(WORKERS)]
    for p in procs:
        p.start()
    won = dict(results.get(timeout=600) for _ in procs)
    for p in procs:
        p.join(timeout=120)
        assert p.exitcode == 0
    for t in times:
        winners = [w for w, instants in won.items() if t in instants]
        assert len(winners) == 1, (t, won)
        assert json.loads(table.storage.read(f".hoodie/{t}.commit")) == {"writer": winners[0]}


def test_lock_file_excludes_other_processes(s3_table, s3_options):
    table = Table.create(s3_table, name="t", record_key="id", storage_options=s3_options)
    table.storage.write("counter", b"0")
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(WORKERS)
    rounds = 10
    procs = [ctx.Process(target=_increment, args=(s3_table, s3_options, rounds, barrier)) for _ in range(WORKERS)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=600)
        assert p.exitcode == 0
    assert int(table.storage.read("counter")) == WORKERS * rounds
    assert not table.storage.exists(".hoodie/lock")


def test_one_taker_of_a_dead_holders_lock(s3_table, s3_options):
    """A lock left by a dead process (older than the expiry): both processes see it stale and
    take it over by a PUT conditional on its ETag; only one can, the other waits its turn."""
    table = Table.create(s3_table, name="t", record_key="id", storage_options=s3_options)
    table.storage.write("counter", b"0")
    table.storage.write(LOCK_PATH, json.dumps({"owner": "dead"}).encode())
    time.sleep(2.5)  # S3 times have second resolution: now it is surely older than the expiry
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(WORKERS)
    procs = [ctx.Process(target=_increment, args=(s3_table, s3_options, 1, barrier, 2000)) for _ in range(WORKERS)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=600)
        assert p.exitcode == 0
    assert int(table.storage.read("counter")) == WORKERS


def test_a_live_holders_refresh_renews_the_lock_only_while_it_is_theirs(s3_table, s3_options):
    """The keep-alive's refresh on S3: a PUT conditional on the ETag renews the modification
    time of the holder's own lock; another holder's lock, or none, is left alone."""
    table = Table.create(s3_table, name="t", record_key="id", storage_options=s3_options)
    storage, mine = table.storage, b'{"owner": "me"}'
    assert storage.create(LOCK_PATH, mine)
    before = storage.conditional_put.version(storage.full(LOCK_PATH))[1]
    time.sleep(1.1)  # S3 times have second resolution
    assert storage.refresh(LOCK_PATH, mine)
    assert storage.conditional_put.version(storage.full(LOCK_PATH))[1] > before
    assert not storage.refresh(LOCK_PATH, b'{"owner": "another"}')
    assert storage.read(LOCK_PATH) == mine
    storage.delete(LOCK_PATH)
    assert not storage.refresh(LOCK_PATH, mine) and not storage.exists(LOCK_PATH)
