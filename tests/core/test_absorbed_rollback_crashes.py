"""Rolling back a commit an MDT compaction already merged writes an MDT deltacommit at the
rollback's instant (tombstones). A crash after that deltacommit began left its requested file,
and the retry, creating it again, failed ("already exists") and so did every later write."""

from __future__ import annotations

import pyarrow as pa
import pytest

from airflow_lake.core import Table
from airflow_lake.core.metadata_writer import MetadataWriter
from tests.conftest import hudi_read, let_time_pass, rows
from tests.crashes import Crash, Dies

FAST = {"hoodie.client.heartbeat.interval_in_ms": 50, "hoodie.write.lock.filesystem.expire": 0.005}
OPTIONS = {**FAST, "hoodie.write.table.version": 9, "hoodie.metadata.enable": "true",
           "hoodie.metadata.compact.max.delta.commits": 2}
COLS = ["id", "ts", "v"]


def _batch(ids: list[str], ts: int) -> pa.Table:
    return pa.table({"id": ids, "ts": [ts] * len(ids), "part": ["p0"] * len(ids), "v": [float(ts)] * len(ids)})


def _absorbed(path: str) -> str:
    """A table whose last commit an MDT compaction merged; its time."""
    t = Table.create(path, name="t", table_type="COPY_ON_WRITE", record_key="id", precombine_field="ts",
                     partition_fields="part", options=OPTIONS)
    t.write(_batch(["k1", "k2", "k3"], 1), operation="insert")
    t.write(_batch(["k1"], 2))
    t.write(_batch(["k1"], 3))
    last = t.timeline.commits().completed().last.time
    t.clean(retained=1)  # (its MDT sync compacts the MDT)
    mdt = MetadataWriter(t.storage).timeline()
    assert any(i.action == "commit" and i.time > (i2.completion or i2.time) for i in mdt.completed()
               for i2 in mdt.completed() if i2.time == last)
    return last


def test_a_rollback_of_an_absorbed_commit_killed_anywhere_is_finished_by_the_retry(tmp_path):
    expected = [("k1", 2, 2.0), ("k2", 1, 1.0), ("k3", 1, 1.0)]
    counting = str(tmp_path / "count")
    target = _absorbed(counting)
    t = Table.open(counting, options=OPTIONS)
    t.storage = Dies(counting, at=0)
    t.rollback(target)
    total = t.storage.count
    assert total > 5
    for k in range(1, total):
        path = str(tmp_path / f"t{k}")
        target = _absorbed(path)
        t = Table.open(path, options=OPTIONS)
        t.storage = Dies(path, at=k)
        with pytest.raises(Crash):
            t.rollback(target)
        let_time_pass(path, 60)
        Table.open(path, options=OPTIONS).rollback(target)
        Table.open(path, options=OPTIONS).write(_batch(["k4"], 4))
        want = expected + [("k4", 4, 4.0)]
        assert rows(Table.open(path).read(), COLS) == want, k
        assert rows(hudi_read(path), COLS) == want, k
        assert not Table.open(path).timeline.pending().instants, k
