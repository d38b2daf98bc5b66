"""Distributed writes: the model tests' random operation sequences through Spark, judged by
the model, hudi-rs and our reader; the work spreads over file groups."""

from __future__ import annotations

from itertools import pairwise

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


def task_intervals(spark, group: str) -> dict[int, list[tuple[int, int]]]:
    """(launch, finish) in ms of every task of each stage the jobs of `group` ran, from Spark's
    own status store (what the UI shows)."""
    sc = spark.sparkContext
    tracker, store = sc.statusTracker(), sc._jsc.sc().statusStore()
    out: dict[int, list[tuple[int, int]]] = {}
    for job_id in sorted(tracker.getJobIdsForGroup(group)):
        for stage in sorted(tracker.getJobInfo(job_id).stageIds):
            tasks = store.taskList(stage, 0, 100_000).iterator()
            while tasks.hasNext():
                task = tasks.next()
                launch = task.launchTime().getTime()
                out.setdefault(stage, []).append((launch, launch + task.duration().get()))
    return out


def overlapping(intervals: list[tuple[int, int]]) -> bool:
    ordered = sorted(intervals)
    return any(b[0] < a[1] for a, b in pairwise(ordered))


def test_one_partition_many_file_groups_are_written_by_concurrent_tasks(spark, table_path):
    t = Table.create(table_path, name="t", record_key="id", precombine_field="ts",
                     options={"hoodie.parquet.max.file.size": 20_000, "hoodie.copyonwrite.record.size.estimate": 100})
    n = 2000
    write(t, spark.createDataFrame(pa.table({"id": [f"k{i:05d}" for i in range(n)], "ts": [1] * n})), "insert")
    groups = {f.split("_")[0] for f in t.read(columns=["_hoodie_file_name"]).column(0).to_pylist()}
    assert len(groups) >= 4  # the plan made several file groups in the one partition
    spark.sparkContext.setJobGroup("one-partition-upsert", "upsert")
    try:
        res = write(t, spark.createDataFrame(pa.table({"id": [f"k{i:05d}" for i in range(0, n, 7)],
                                                        "ts": [2] * len(range(0, n, 7))})), "upsert")
    finally:
        spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)
    assert res.num_updates == len(range(0, n, 7)) and len(res.files) == len(groups)
    stages = task_intervals(spark, "one-partition-upsert")
    writing = stages[max(stages)]  # the last stage before the commit: each task writes its file groups
    assert len(writing) > 1, f"all {len(groups)} file groups were written by one task"
    assert overlapping(writing), writing  # local[2]: two tasks at a time
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
