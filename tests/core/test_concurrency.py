"""Several writers and services on one table: optimistic concurrency at commit, the table
lock, and a bounded stress run judged by hudi-rs, our reader and a model."""

from __future__ import annotations

import os
import random
import threading
import time
import traceback

import pyarrow as pa
import pytest

from airflow_lake.core import Table
from airflow_lake.core.engine import LocalEngine
from airflow_lake.core.errors import InstantNotFoundError, LockError, WriteConflictError
from airflow_lake.core.lock import LOCK_PATH, FileSystemLock
from airflow_lake.core.storage import Storage
from tests.conftest import hudi_read, let_time_pass, rows

COLS = ["id", "ts", "part", "v"]


class GateEngine(LocalEngine):
    """Holds its first task batch until the gate opens (a writer paused mid-write)."""

    def __init__(self, gate: threading.Event, started: threading.Event):
        super().__init__(1)
        self.gate, self.started, self.first = gate, started, True

    def map(self, fn, items):
        if self.first:
            self.first = False
            self.started.set()
            assert self.gate.wait(30)
        return super().map(fn, items)


def table(path: str, table_type: str) -> Table:
    t = Table.create(path, name="c", table_type=table_type, record_key="id", precombine_field="ts",
                     partition_fields="part", options={"hoodie.parquet.small.file.limit": 0})
    t.write(pa.table({"id": ["a1", "a2", "b1", "b2"], "ts": [0] * 4, "part": ["a", "a", "b", "b"],
                      "v": [0.0] * 4}), operation="insert")
    return t


def paused_write(path: str, data: pa.Table, outcome: dict) -> tuple[threading.Thread, threading.Event]:
    gate, started = threading.Event(), threading.Event()
    slow = Table.open(path, engine=GateEngine(gate, started))

    def run():
        try:
            outcome["result"] = slow.write(data)
        except Exception as e:  # noqa: BLE001 - the test inspects it
            outcome["error"] = e

    thread = threading.Thread(target=run)
    thread.start()
    assert started.wait(30)
    return thread, gate


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_same_file_group_later_writer_fails_cleanly(table_path, table_type):
    table(table_path, table_type)
    outcome: dict = {}
    thread, gate = paused_write(table_path, pa.table({"id": ["a1"], "ts": [1], "part": ["a"], "v": [1.0]}), outcome)
    Table.open(table_path).write(pa.table({"id": ["a2"], "ts": [2], "part": ["a"], "v": [2.0]}))
    gate.set()
    thread.join()
    assert isinstance(outcome.get("error"), WriteConflictError), outcome
    assert "conflicts with" in str(outcome["error"])
    expected = [("a1", 0, "a", 0.0), ("a2", 2, "a", 2.0), ("b1", 0, "b", 0.0), ("b2", 0, "b", 0.0)]
    t = Table.open(table_path)
    assert rows(t.read(), COLS) == expected == rows(hudi_read(table_path), COLS)
    assert not t.timeline.pending().instants  # the loser rolled itself back


def test_a_pending_compaction_archived_while_a_write_reads_it_is_a_conflict_to_retry(table_path, monkeypatch):
    """A write's timeline lists a pending compaction; before the write reads its plan, the
    compaction completes and is archived (the stress test met it). The write is a conflict to
    retry, rolled back (not an error that leaves the instant pending), and the retry lands."""
    from airflow_lake.core.timeline.active import ActiveTimeline

    t = table(table_path, "MERGE_ON_READ")
    t.write(pa.table({"id": ["a1"], "ts": [1], "part": ["a"], "v": [1.0]}))
    plan = t.schedule_compaction(max_delta_commits=1)
    read_details = ActiveTimeline.read_details

    def gone(self, instant):
        if instant.time == plan and instant.action == "compaction":
            raise InstantNotFoundError(f"table {self.storage.uri}: {instant.file_name} is gone")
        return read_details(self, instant)

    monkeypatch.setattr(ActiveTimeline, "read_details", gone)
    update = pa.table({"id": ["a2"], "ts": [2], "part": ["a"], "v": [2.0]})
    with pytest.raises(WriteConflictError, match="gone meanwhile.*retry it"):
        Table.open(table_path).write(update)
    monkeypatch.setattr(ActiveTimeline, "read_details", read_details)
    t = Table.open(table_path)
    assert [i.time for i in t.timeline.pending().instants] == [plan]  # the write rolled itself back
    t.write(update)
    expected = [("a1", 1, "a", 1.0), ("a2", 2, "a", 2.0), ("b1", 0, "b", 0.0), ("b2", 0, "b", 0.0)]
    assert rows(Table.open(table_path).read(), COLS) == expected
    t.run_compaction(plan)  # (hudi-rs reads a slice's logs once its pending compaction completed)
    assert rows(Table.open(table_path).read(), COLS) == expected == rows(hudi_read(table_path), COLS)


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_different_file_groups_both_commit(table_path, table_type):
    table(table_path, table_type)
    outcome: dict = {}
    thread, gate = paused_write(table_path, pa.table({"id": ["a1"], "ts": [1], "part": ["a"], "v": [1.0]}), outcome)
    Table.open(table_path).write(pa.table({"id": ["b1"], "ts": [2], "part": ["b"], "v": [2.0]}))
    gate.set()
    thread.join()
    assert "result" in outcome, outcome
    expected = [("a1", 1, "a", 1.0), ("a2", 0, "a", 0.0), ("b1", 2, "b", 2.0), ("b2", 0, "b", 0.0)]
    assert rows(Table.open(table_path).read(), COLS) == expected == rows(hudi_read(table_path), COLS)


def test_lock_excludes_and_expires(table_path):
    t = table(table_path, "COPY_ON_WRITE")
    first = FileSystemLock(t.storage, expire_ms=60_000, wait_ms=100)
    second = FileSystemLock(t.storage, expire_ms=60_000, wait_ms=100)
    with first:
        with pytest.raises(LockError, match="lock"):
            second.acquire()
    with second:
        pass
    t.storage.create(LOCK_PATH, b'{"owner": "a writer that died"}')  # never released
    let_time_pass(table_path, 1)
    with FileSystemLock(t.storage, expire_ms=50, wait_ms=2000):
        pass


def test_a_holder_keeps_the_lock_longer_than_its_expiry(tmp_path):
    """A holder past `expire_ms` (a long commit) is alive: its keep-alive refreshes the file,
    so a polling waiter never takes it for a dead holder's; it gets it once released."""
    storage = Storage(str(tmp_path))
    holder = FileSystemLock(storage, expire_ms=500, wait_ms=10_000)
    waiter = FileSystemLock(storage, expire_ms=500, wait_ms=10_000)
    order: list[str] = []
    errors: list[str] = []

    @guarded(errors)
    def wait():
        with waiter:
            order.append("waiter")

    with holder:
        thread = threading.Thread(target=wait)
        thread.start()
        time.sleep(1.6)  # over three expiries, with the waiter polling all along
        order.append("holder released")
    thread.join()
    assert not errors, errors[0]
    assert order == ["holder released", "waiter"]
    assert not holder.lost and not storage.exists(LOCK_PATH)


def test_a_refresh_racing_a_take_over_does_not_claim_the_new_lock(tmp_path, monkeypatch):
    """The holder read its own content, then a taker replaced the file before the touch: the
    refresh touched the taker's lock and must say it is no longer the holder's."""
    storage = Storage(str(tmp_path))
    storage.create(LOCK_PATH, b"mine")
    touch = os.utime

    def utime(path, *args, **kwargs):
        os.unlink(path)
        storage.create(LOCK_PATH, b"taker")  # (between the holder's read and its touch)
        touch(path, *args, **kwargs)

    monkeypatch.setattr(os, "utime", utime)
    assert not storage.refresh(LOCK_PATH, b"mine")
    monkeypatch.setattr(os, "utime", touch)
    assert storage.read(LOCK_PATH) == b"taker"
    assert storage.refresh(LOCK_PATH, b"taker")


def test_a_holder_whose_lock_was_taken_says_so_and_leaves_the_new_lock(tmp_path, caplog):
    storage = Storage(str(tmp_path))
    holder = FileSystemLock(storage, expire_ms=60, wait_ms=1000)
    with holder:
        storage.delete(LOCK_PATH)
        storage.create(LOCK_PATH, b'{"owner": "another writer"}')
        deadline = time.monotonic() + 10
        while not holder.lost and time.monotonic() < deadline:
            time.sleep(0.01)
    assert holder.lost
    assert storage.read(LOCK_PATH) == b'{"owner": "another writer"}'  # not deleted on release
    assert "another writer" in caplog.text and "no longer held" in caplog.text


def test_a_writer_whose_lock_was_taken_meanwhile_completes_nothing(tmp_path, monkeypatch):
    """A holder frozen past the lock's expiry (a long pause) may find, when it resumes, that
    another writer took the lock for a dead holder's: its commit must then complete nothing."""
    from airflow_lake.core.txn.transaction import Transaction

    path = str(tmp_path / "t")
    t = table(path, "MERGE_ON_READ")
    before = rows(hudi_read(path), ["id", "ts"])
    sync = Transaction.sync_metadata_table

    def taken_over(self, *args, **kwargs):  # the pause: meanwhile the lock changed hands
        self.storage.delete(LOCK_PATH)
        self.storage.create(LOCK_PATH, b'{"owner": "the writer that took over"}')
        return sync(self, *args, **kwargs)

    monkeypatch.setattr(Transaction, "sync_metadata_table", taken_over)
    with pytest.raises(LockError, match="no longer held by this writer .*the writer that took over"):
        t.write(pa.table({"id": ["a1", "c1"], "ts": [1, 1], "part": ["a", "c"], "v": [1.0, 1.0]}))
    monkeypatch.undo()
    assert rows(hudi_read(path), ["id", "ts"]) == before  # nothing completed
    assert t.timeline.commits().pending().last is not None
    # the lock's new holder is done; the next writer rolls back what the frozen one left
    t.storage.delete(LOCK_PATH)
    let_time_pass(path, 3600)
    t.write(pa.table({"id": ["b1"], "ts": [2], "part": ["b"], "v": [2.0]}))
    assert not t.timeline.commits().pending()
    assert rows(hudi_read(path), ["id", "ts"]) == sorted([("a1", 0), ("a2", 0), ("b1", 2), ("b2", 0)])


@pytest.mark.parametrize("version", ["6", "9"])
def test_a_writer_that_paused_while_completing_its_instant_does_not_commit_a_rolled_back_write(tmp_path, version):
    """The pause may come after the last check, inside the completed file's creation (a trial's
    SIGSTOP harness found it): meanwhile another writer takes the expired lock and rolls the
    write back. The resumed writer used to answer success with its rows gone. Its completion is
    now checked once written: undone, a LockError."""
    from airflow_lake.core.timeline.instant import State

    path = str(tmp_path / "t")
    t = Table.create(path, name="t", table_type="MERGE_ON_READ", record_key="id", precombine_field="ts",
                     options={"hoodie.write.table.version": version})
    t.write(pa.table({"id": ["a"], "ts": [1]}))
    create = t.storage.create

    def paused(rel, data=b"", *args, **kwargs):  # another writer rolls the write back meanwhile
        timeline = t.timeline
        pending = timeline.commits().pending().last
        name = rel.rsplit("/", 1)[-1]
        if pending is not None and rel == f"{timeline.folder}/{name}" and name.startswith(pending.time) and \
                name.endswith(f".{pending.action}"):  # its completed file
            for state in (State.REQUESTED, State.INFLIGHT):
                t.storage.delete(f"{timeline.folder}/{pending.to(state).file_name}")
        return create(rel, data, *args, **kwargs)

    t.storage.create = paused
    with pytest.raises(LockError, match="was completed after it was lost .*rolled it back"):
        t.write(pa.table({"id": ["b"], "ts": [1]}))
    t.storage.create = create
    assert [i.time for i in Table.open(path).timeline.commits().completed()] == \
        [i.time for i in t.timeline.commits().completed()][:1]
    assert rows(hudi_read(path), ["id"]) == [("a",)]


def test_take_over_never_removes_a_lock_taken_meanwhile(tmp_path, monkeypatch):
    """A waiter whose look finds no lock file (its holder just let go) must not delete the
    one another waiter creates before it acts: two holders would follow."""
    storage = Storage(str(tmp_path))
    look = Storage.status

    def status(self, path):
        found = look(self, path)  # absent: the holder let go
        if path == LOCK_PATH:
            self.create(path, b"other")  # and another waiter took the lock before this one acts
        return found

    monkeypatch.setattr(Storage, "status", status)
    assert not storage.take_over(LOCK_PATH, b"me", 60_000)
    assert storage.read(LOCK_PATH) == b"other"


def test_of_takers_of_one_dead_lock_one_wins(tmp_path, monkeypatch):
    """Two takers saw the same stale lock; the first replaces it; the second, acting on what
    it saw, loses and leaves the first's lock in place."""
    storage = Storage(str(tmp_path))
    storage.create(LOCK_PATH, b"dead")
    let_time_pass(str(tmp_path), 120)
    stale = storage.status(LOCK_PATH)
    assert storage.take_over(LOCK_PATH, b"first", 60_000)
    monkeypatch.setattr(Storage, "status", lambda self, path: stale)  # what the second taker saw
    assert not storage.take_over(LOCK_PATH, b"second", 60_000)
    assert storage.read(LOCK_PATH) == b"first"


def test_a_taker_that_died_mid_take_over_does_not_wedge_the_lock(tmp_path, monkeypatch):
    """A taker killed after it won the take-over of a dead lock, before it replaced the file:
    once its own claim is as old as a dead holder's, the next taker takes the lock over."""
    import os

    from airflow_lake.core.storage import TEMP_FOLDER

    storage = Storage(str(tmp_path))
    storage.create(LOCK_PATH, b"dead")
    let_time_pass(str(tmp_path), 120)

    def killed(*args):
        raise KeyboardInterrupt("killed")

    with monkeypatch.context() as m:
        m.setattr(os, "rename", killed)
        with pytest.raises(KeyboardInterrupt):
            storage.take_over(LOCK_PATH, b"dies", 60_000)
    assert not storage.take_over(LOCK_PATH, b"next", 60_000)  # its claim is fresh: it may still finish
    for claim in (tmp_path / TEMP_FOLDER).iterdir():
        then = claim.stat().st_mtime - 120
        os.utime(claim, (then, then))
    assert storage.take_over(LOCK_PATH, b"next", 60_000)
    assert storage.read(LOCK_PATH) == b"next"


@pytest.mark.parametrize("stale", [False, True], ids=["contended", "dead-holder"])
def test_the_lock_file_has_one_holder_at_a_time(tmp_path, stale):
    """Threads take and let go of the lock as fast as they can (also starting from a dead
    holder's lock, all waiters taking it over at once): never two inside."""
    storage = Storage(str(tmp_path))
    if stale:
        storage.create(LOCK_PATH, b"dead")
        let_time_pass(str(tmp_path), 120)
    inside, most, start = [0], [0], threading.Barrier(6)
    errors: list[str] = []

    @guarded(errors)
    def run():
        start.wait()
        for _ in range(60):
            with FileSystemLock(storage, expire_ms=60_000, wait_ms=60_000):
                inside[0] += 1
                most[0] = max(most[0], inside[0])
                time.sleep(0.0005)
                inside[0] -= 1

    threads = [threading.Thread(target=run) for _ in range(6)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors[0]
    assert most[0] == 1


def guarded(errors: list[str]):
    """A thread body whose exception is kept in `errors` for the test to report."""
    def wrap(fn):
        def run(*args):
            try:
                fn(*args)
            except Exception:  # noqa: BLE001 - reported by the test
                errors.append(traceback.format_exc())
        return run
    return wrap


def stress(table_path: str, seconds: float = 8) -> dict:
    """Threads upsert their own partitions (two share one, so they conflict and retry) while
    compaction, clean and archive run; afterwards every judge agrees with the model. Returns
    the counts (commits, conflicts, service rounds, compactions, rows compared)."""
    Table.create(table_path, name="s", table_type="MERGE_ON_READ", record_key="id", precombine_field="ts",
                     partition_fields="part", options={"hoodie.client.heartbeat.interval_in_ms": 5000})
    parts = ["p0", "p1", "p2"]
    model: dict[str, tuple] = {}
    lock = threading.Lock()
    stop = time.monotonic() + seconds
    counts = {"commits": 0, "conflicts": 0, "services": 0, "compactions": 0}
    quiet = threading.Event()  # the services thread asks writers for a short pause to schedule
    errors: list[str] = []
    def writer(part: str, seed: int):
        rng = random.Random(seed)
        handle = Table.open(table_path, options={"hoodie.client.heartbeat.interval_in_ms": 5000})
        step = 0
        while time.monotonic() < stop:
            while quiet.is_set():
                time.sleep(0.01)
            step += 1
            keys = [f"{part}-{rng.randint(0, 30)}" for _ in range(5)]
            data = pa.table({"id": keys, "ts": [step] * 5, "part": [part] * 5, "v": [float(step)] * 5})
            try:
                handle.write(data)
            except WriteConflictError:
                with lock:
                    counts["conflicts"] += 1
                continue
            with lock:
                counts["commits"] += 1
                for k in keys:
                    if k not in model or model[k][1] <= step:
                        model[k] = (k, step, part, float(step))

    def services():
        handle = Table.open(table_path, options={"hoodie.client.heartbeat.interval_in_ms": 5000})
        while time.monotonic() < stop:
            quiet.set()
            plan = None
            for _ in range(50):  # wait for the writes in flight to finish, then schedule
                decision = handle.plan_compaction(max_delta_commits=2)
                plan = decision.instant
                if plan or "in flight" not in decision.reason:
                    break
                time.sleep(0.02)
            quiet.clear()
            if plan:  # executes while the writers go on
                handle.run_compaction(plan)
                counts["compactions"] += 1
            handle.clean(retained=3)
            handle.archive(min_commits=4, max_commits=6)
            counts["services"] += 1
            time.sleep(0.05)

    # two writers share p2: same file groups, so one of them sometimes loses and retries
    threads = [threading.Thread(target=guarded(errors)(writer), args=(p, i)) for i, p in enumerate(parts + ["p2"])]
    threads.append(threading.Thread(target=guarded(errors)(services)))
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors[0]
    final = Table.open(table_path)
    assert not final.timeline.pending().instants  # every plan ran, every loser rolled back
    expected = sorted(model.values())
    assert rows(final.read(), COLS) == expected
    assert rows(hudi_read(table_path), COLS) == expected
    counts["rows_compared"] = 2 * len(expected)
    return counts


@pytest.mark.slow  # threads of writers and services for several seconds
def test_stress_writers_and_services(table_path):
    counts = stress(table_path)
    assert counts["commits"] > 10 and counts["compactions"] >= 1, counts


def test_concurrent_inserts_of_one_new_key_do_not_duplicate(table_path):
    table(table_path, "MERGE_ON_READ")
    outcome: dict = {}
    thread, gate = paused_write(table_path, pa.table({"id": ["new"], "ts": [1], "part": ["a"], "v": [1.0]}), outcome)
    Table.open(table_path).write(pa.table({"id": ["new"], "ts": [2], "part": ["a"], "v": [2.0]}))
    gate.set()
    thread.join()
    assert isinstance(outcome.get("error"), WriteConflictError) and "'new'" in str(outcome["error"])
    got = rows(hudi_read(table_path), COLS)
    assert [r for r in got if r[0] == "new"] == [("new", 2, "a", 2.0)]
