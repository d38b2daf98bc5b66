"""Functions handed to an engine are module-level over picklable values: an engine that runs
every task from its pickled form (as Spark does in other processes) writes what LocalEngine
writes, on every index and table type."""

from __future__ import annotations

import pickle

import pyarrow as pa
import pytest

from airflow_lake.core import Table
from airflow_lake.core.engine import LocalEngine
from tests.conftest import hudi_read, rows


class PicklingEngine(LocalEngine):
    """Runs each task from pickled copies of its function and value (plain `pickle`: a lambda
    or a closure over driver state fails, as it would on a Spark executor)."""

    def __init__(self):
        super().__init__(1)
        self.tasks = 0

    def map(self, fn, items):
        shipped = pickle.dumps(fn)
        out = []
        for item in items:
            self.tasks += 1
            out.append(pickle.loads(shipped)(pickle.loads(pickle.dumps(item))))
        return out


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
@pytest.mark.parametrize("index", ["BLOOM", "SIMPLE", "GLOBAL_BLOOM", "GLOBAL_SIMPLE", "BUCKET"])
def test_write_tasks_travel_as_values(tmp_path, table_type, index):
    results = {}
    for name in ("local", "pickled"):
        path = str(tmp_path / name)
        Table.create(path, name="t", table_type=table_type, record_key="id", precombine_field="ts",
                     partition_fields="part", options={"hoodie.index.type": index,
                                                       "hoodie.bucket.index.num.buckets": 2})
        engine = PicklingEngine() if name == "pickled" else LocalEngine()
        t = Table.open(path, engine=engine)
        ids = [f"k{i}" for i in range(12)]
        counts = []
        for op, batch in (
                ("insert", {"id": ids, "ts": [1] * 12, "part": ["a", "b", "c"] * 4}),
                ("upsert", {"id": ids[::2] + ["n1"], "ts": [2] * 7, "part": ["a", "b", "c"] * 2 + ["a"]}),
                ("delete", {"id": ["k1", "k2", "zz"], "part": ["b", "c", "a"]}),
                ("upsert", {"id": ["k0", "k3", "k5"], "ts": [3] * 3, "part": ["a", "a", "c"]})):  # keys with logs
            r = t.write(pa.table(batch), operation=op)
            counts.append((r.num_inserts, r.num_updates, r.num_deletes, r.num_writes, len(r.files)))
        results[name] = (counts, rows(t.read(), ["id", "ts", "part"]), rows(hudi_read(path), ["id", "ts", "part"]))
        if name == "pickled":
            assert engine.tasks > 0
    assert results["pickled"] == results["local"]
    assert results["local"][1] == results["local"][2]
