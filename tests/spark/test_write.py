"""Distributed writes: the model tests' random operation sequences through Spark, judged by
the model, hudi-rs and our reader; the work spreads over file groups."""

from __future__ import annotations

import pyarrow as pa
import pytest

from airflow_lake.core import LakeError, Table
from airflow_lake.core.errors import RecordKeyError
from airflow_lake.spark.write import write
from tests.conftest import hudi_read, rows
from tests.core.test_write_model import LAYOUTS, judge, run_scenario

SPARK_LAYOUTS = [layout for layout in LAYOUTS if layout.options.get("hoodie.index.type") != "BUCKET"]


@pytest.mark.parametrize("layout", SPARK_LAYOUTS, ids=lambda layout: layout.name)
def test_random_operations_agree_with_model_and_hudi_rs(spark, layout, table_path):
    def spark_write(table, data: pa.Table, operation: str):
        return write(table, spark.createDataFrame(data), operation)

    table, model = run_scenario(layout, table_path, seed=1, steps=6, write=spark_write)
    judge(layout, table, model, table_path)


def test_same_rows_and_counts_as_the_local_engine(spark, tmp_path):
    results = {}
    for engine in ("local", "spark"):
        path = str(tmp_path / engine)
        t = Table.create(path, name="t", table_type="MERGE_ON_READ", record_key="id", precombine_field="ts",
                         partition_fields="part")
        batches = [pa.table({"id": [f"k{i}" for i in range(30)], "ts": [1] * 30, "part": ["a", "b", "c"] * 10}),
                   pa.table({"id": [f"k{i}" for i in range(0, 40, 2)], "ts": [2] * 20,
                             "part": [["a", "b", "c"][i % 3] for i in range(0, 40, 2)]})]
        counts = []
        for op, batch in zip(("insert", "upsert"), batches, strict=True):
            res = t.write(batch, operation=op) if engine == "local" else write(t, spark.createDataFrame(batch), op)
            counts.append((res.num_inserts, res.num_updates, res.num_deletes, res.num_writes))
        res = t.write(pa.table({"id": ["k3", "k4", "zz"], "part": ["a", "b", "c"]}), operation="delete") \
            if engine == "local" else write(t, spark.createDataFrame(
                pa.table({"id": ["k3", "k4", "zz"], "part": ["a", "b", "c"]})), "delete")
        counts.append((res.num_inserts, res.num_updates, res.num_deletes, res.num_writes))
        cols = ["id", "ts", "part"]
        results[engine] = (counts, rows(t.read(), cols), rows(hudi_read(path), cols))
    assert results["local"] == results["spark"]
    assert results["spark"][1] == results["spark"][2]


def test_one_partition_many_file_groups_spreads_over_tasks(spark, table_path):
    t = Table.create(table_path, name="t", record_key="id", precombine_field="ts",
                     options={"hoodie.parquet.max.file.size": 20_000, "hoodie.copyonwrite.record.size.estimate": 100})
    n = 2000
    write(t, spark.createDataFrame(pa.table({"id": [f"k{i:05d}" for i in range(n)], "ts": [1] * n})), "insert")
    groups = {f.split("_")[0] for f in t.read(columns=["_hoodie_file_name"]).column(0).to_pylist()}
    assert len(groups) >= 4  # the plan made several file groups in the one partition
    tracker = spark.sparkContext.statusTracker()
    before = set(tracker.getJobIdsForGroup())
    res = write(t, spark.createDataFrame(pa.table({"id": [f"k{i:05d}" for i in range(0, n, 7)],
                                                    "ts": [2] * len(range(0, n, 7))})), "upsert")
    assert res.num_updates == len(range(0, n, 7)) and len(res.files) >= 4
    jobs = set(tracker.getJobIdsForGroup()) - before
    stages = [s for j in jobs for s in (tracker.getJobInfo(j).stageIds if tracker.getJobInfo(j) else [])]
    assert max(tracker.getStageInfo(s).numTasks for s in stages if tracker.getStageInfo(s)) > 1
    assert rows(t.read(), ["id", "ts"]) == rows(hudi_read(table_path), ["id", "ts"])


def test_bad_values_fail_before_the_timeline_is_touched(spark, table_path):
    import os

    t = Table.create(table_path, name="t", record_key="id", precombine_field="ts", partition_fields="part")
    write(t, spark.createDataFrame(pa.table({"id": ["a"], "ts": [1], "part": ["x"]})), "insert")
    before = sorted(os.listdir(f"{table_path}/.hoodie"))
    bad = spark.createDataFrame(pa.table({"id": ["b", None], "ts": [1, 1], "part": ["x", "x"]}))
    with pytest.raises(RecordKeyError, match=table_path):
        write(t, bad, "upsert")
    with pytest.raises(LakeError, match="precombine"):
        write(t, spark.createDataFrame(pa.table({"id": ["b"], "part": ["x"]})), "upsert")
    assert sorted(os.listdir(f"{table_path}/.hoodie")) == before
