"""The operations the kill harness runs: how to build the table each needs, run it, retry it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pyarrow as pa

from airflow_lake.core import Table
from airflow_lake.core.errors import InstantNotFoundError

FAST = {"hoodie.client.heartbeat.interval_in_ms": 40, "hoodie.write.lock.filesystem.expire": 0.003,
        "hoodie.archive.merge.enable": "true", "hoodie.archive.merge.files.batch.size": 2,
        "hoodie.parquet.small.file.limit": 0}
PARTS = ["p0", "p1", "p2"]
TOKEN = {"airflow_lake.token": "harness/run/op"}


def open_table(path: str, storage_options: dict | None = None) -> Table:
    return Table.open(path, options=FAST, storage_options=storage_options)


def rows_of(start: int, n: int, ts: int, size: int = 1) -> pa.Table:
    ids = [f"k{i:05d}" for i in range(start, start + n)]
    return pa.table({"id": ids, "ts": [ts] * n, "part": [PARTS[i % 3] for i in range(start, start + n)],
                     "v": [float(ts * 1000 + i) for i in range(start, start + n)],
                     "pad": ["x" * size] * n})


def build(path: str, table_type: str, commits: int, size: int, storage_options: dict | None = None,
          options: dict | None = None) -> Table:
    """The table an operation runs on; `options` add creation options (e.g. a Hudi 1.x table
    with its metadata table: `hoodie.write.table.version`, `hoodie.metadata.enable`)."""
    t = Table.create(path, name="h", table_type=table_type, record_key="id", precombine_field="ts",
                     partition_fields="part", options={**FAST, **(options or {})}, storage_options=storage_options)
    t.write(rows_of(0, 30 * size, 0), operation="insert")
    for j in range(1, commits):
        t.write(rows_of(j * 3, 10 * size, j))
    return t


@dataclass
class Operation:
    table_type: str
    prepare: Callable[[Table], None]
    run: Callable[[Table], object]
    retry: Callable[[Table], object]
    # instants whose as-of state a killed run may show, besides before and after (restore
    # undoes the instants after the savepoint one by one, newest first)
    intermediate: Callable[[Table], list[str]] = lambda t: []


def _noop(_t: Table) -> None:
    pass


def _write(op: str, data: Callable[[], pa.Table]):
    return lambda t: t.write(data(), operation=op, extra_metadata=TOKEN)


def _rollback_latest(t: Table):
    return t.rollback(t.storage.read(".hoodie/harness-rollback-target").decode())


def _retry_rollback(t: Table):
    return t.rollback(t.storage.read(".hoodie/harness-rollback-target").decode())


def _prepare_rollback(t: Table) -> None:
    target = t.timeline.commits().completed().last.time
    t.storage.write(".hoodie/harness-rollback-target", target.encode())


def _prepare_plan(t: Table) -> None:
    assert t.schedule_compaction(max_delta_commits=1)


def _prepare_savepoint(t: Table) -> None:
    t.savepoint(t.timeline.commits().completed().times[2])


def _restore(t: Table):
    sp = t.timeline.actions("savepoint").completed().first.time
    return t.restore(sp)


def _run_plan(t: Table):
    try:
        return t.run_compaction()
    except InstantNotFoundError:  # already completed by the run that was killed
        return None


OPERATIONS: dict[str, Operation] = {
    "insert": Operation("MERGE_ON_READ", _noop, _write("insert", lambda: rows_of(5000, 12, 50)),
                        _write("insert", lambda: rows_of(5000, 12, 50))),
    "upsert_cow": Operation("COPY_ON_WRITE", _noop, _write("upsert", lambda: rows_of(20, 15, 60)),
                            _write("upsert", lambda: rows_of(20, 15, 60))),
    "upsert_mor": Operation("MERGE_ON_READ", _noop, _write("upsert", lambda: rows_of(20, 15, 60)),
                            _write("upsert", lambda: rows_of(20, 15, 60))),
    "delete": Operation("MERGE_ON_READ", _noop, _write("delete", lambda: rows_of(0, 9, 0)),
                        _write("delete", lambda: rows_of(0, 9, 0))),
    "insert_overwrite": Operation("COPY_ON_WRITE", _noop, _write("insert_overwrite", lambda: rows_of(7000, 3, 70)),
                                  _write("insert_overwrite", lambda: rows_of(7000, 3, 70))),
    "compaction_schedule": Operation(
        "MERGE_ON_READ", _noop,
        lambda t: t.schedule_compaction(max_delta_commits=1, extra_metadata=TOKEN),
        lambda t: t.schedule_compaction(max_delta_commits=1, extra_metadata=TOKEN)),
    "compaction_execute": Operation("MERGE_ON_READ", _prepare_plan, _run_plan, _run_plan),
    "clean": Operation("COPY_ON_WRITE", _noop, lambda t: t.clean(retained=2), lambda t: t.clean(retained=2)),
    "archive": Operation("COPY_ON_WRITE", lambda t: t.clean(retained=3),
                         lambda t: t.archive(min_commits=3, max_commits=4, batch=2),
                         lambda t: t.archive(min_commits=3, max_commits=4, batch=2)),
    "archive_merge": Operation("COPY_ON_WRITE", lambda t: [t.archive(min_commits=k, max_commits=k + 1) for k in (9, 8)],
                               lambda t: t.archive(min_commits=6, max_commits=7),
                               lambda t: t.archive(min_commits=6, max_commits=7)),
    "rollback": Operation("MERGE_ON_READ", _prepare_rollback, _rollback_latest, _retry_rollback),
    "restore": Operation("MERGE_ON_READ", _prepare_savepoint, _restore, _restore,
                         lambda t: [i for i in t.timeline.commits().completed().times
                                    if i >= t.timeline.actions("savepoint").completed().first.time]),
}
