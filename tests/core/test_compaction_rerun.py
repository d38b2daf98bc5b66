"""A compaction whose run died is rolled back (its plan kept) and run again at the same
instant. A writer repairing the timeline while the new run executed took the new run's
inflight file for what a crash after that rollback left, deleted it, and the run failed
at its commit: on a busy table a compaction that once died could never finish."""

from __future__ import annotations

import pyarrow as pa
import pytest

from airflow_lake.core import Table
from airflow_lake.core.storage import Storage
from tests.conftest import hudi_read, let_time_pass, rows

FAST = {"hoodie.client.heartbeat.interval_in_ms": 50, "hoodie.write.lock.filesystem.expire": 0.005}
COLS = ["id", "ts", "v"]


class Crash(BaseException):
    """Stands for the process dying."""


def _batch(ids: list[str], ts: int) -> pa.Table:
    return pa.table({"id": ids, "ts": [ts] * len(ids), "part": ["p0"] * len(ids), "v": [float(ts)] * len(ids)})


@pytest.mark.parametrize("version", [6, 9])
def test_a_compaction_run_again_finishes_while_another_writer_commits(tmp_path, version):
    path = str(tmp_path / "t")
    options = {**FAST, **({"hoodie.write.table.version": 9, "hoodie.metadata.enable": "true"} if version == 9 else {})}
    t = Table.create(path, name="t", table_type="MERGE_ON_READ", record_key="id", precombine_field="ts",
                     partition_fields="part", options=options)
    t.write(_batch(["k1", "k2", "k3"], 1), operation="insert")
    t.write(_batch(["k1", "k2"], 2))
    plan = t.schedule_compaction(max_delta_commits=1)

    class DiesWritingBase(Storage):
        def write(self, path_, data):
            if path_.endswith(".parquet"):
                raise Crash(path_)
            return super().write(path_, data)

    dying = Table.open(path, options=options)
    dying.storage = DiesWritingBase(path)
    with pytest.raises(Crash):
        dying.run_compaction()
    let_time_pass(path, 60)

    class WriterMeanwhile(Storage):
        done = False

        def write(self, path_, data):
            if path_.endswith(".parquet") and not WriterMeanwhile.done:
                WriterMeanwhile.done = True
                Table.open(path, options=options).write(_batch(["k3"], 3))  # (repairs the timeline first)
            return super().write(path_, data)

    again = Table.open(path, options=options)
    again.storage = WriterMeanwhile(path)
    assert again.run_compaction().instant == plan
    assert WriterMeanwhile.done
    expected = [("k1", 2, 2.0), ("k2", 2, 2.0), ("k3", 3, 3.0)]
    assert rows(Table.open(path).read(), COLS) == expected
    assert rows(hudi_read(path), COLS) == expected
    assert plan in Table.open(path).timeline.completed().times
