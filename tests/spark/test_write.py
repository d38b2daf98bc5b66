"""Distributed writes: the model tests' random operation sequences through Spark, judged by
the model, hudi-rs and our reader; the work spreads over file groups."""

from __future__ import annotations

import importlib
import json
import re
from itertools import pairwise

import pyarrow as pa
import pytest
from pyspark.sql import functions as F

from airflow_lake.core import LakeError, Table
from airflow_lake.core.errors import RecordKeyError
from airflow_lake.spark.write import write
from tests.conftest import hudi_read, rows
from tests.core.test_write_model import HUDI1X_LAYOUTS, LAYOUTS, judge, run_scenario

# The layouts whose features the engine conformance suite (tests/conformance, every index type on
# both table types, every operation and key generator, partition moves) does not cover: random
# global moves on both table types, Avro log blocks, tables without meta fields, partition values
# whose paths differ from the values. (Each Spark write costs about 2 s of a 2-core run.)
SPARK_LAYOUTS = [layout for layout in LAYOUTS if layout.name in {
    "global_simple", "mor_global_bloom", "mor_complex_avro", "cow_no_meta", "mor_no_meta", "mor_url_encoded",
    "cow_slashes", "cow_nesting_encoded"}]
assert len(SPARK_LAYOUTS) == 8, "a layout named here was renamed"
# and a Hudi 1.x table (version 9: completion times, log files named by their deltacommit) of
# each type, the MOR one with its metadata table on (and in it a partitioned record index tagging
# the keys and secondary indexes), as the model tests run them
SPARK_LAYOUTS += [layout for layout in HUDI1X_LAYOUTS if layout.name in {"v9_simple", "v9_prli_mor_bloom"}]
# and several ordering fields compared as a tuple (the stored key joined in executors)
SPARK_LAYOUTS += [layout for layout in HUDI1X_LAYOUTS if layout.name == "v9_tuple_mor_global_bloom"]
# and a record index kept by the write's tasks and tagging its keys (lookups in executors)
SPARK_LAYOUTS += [layout for layout in HUDI1X_LAYOUTS if layout.name == "v9_rli_mor_global_bloom"]
# and column and partition stats from the statistics executors compute (filtered reads skip by them)
SPARK_LAYOUTS += [layout for layout in HUDI1X_LAYOUTS if layout.name == "v9_stats_mor_bloom"]
assert len(SPARK_LAYOUTS) == 13, "a layout named here was renamed"


@pytest.mark.parametrize("layout", SPARK_LAYOUTS, ids=lambda layout: layout.name)
def test_random_operations_agree_with_model_and_hudi_rs(spark, layout, table_path):
    def spark_write(table, data: pa.Table, operation: str):
        return write(table, spark.createDataFrame(data), operation)

    table, model = run_scenario(layout, table_path, seed=1, steps=6, write=spark_write)
    judge(layout, table, model, table_path)


@pytest.mark.parametrize(("table_type", "index"), [("MERGE_ON_READ", "BLOOM"), ("COPY_ON_WRITE", "BUCKET"),
                                                   ("MERGE_ON_READ", "BUCKET")])
def test_same_rows_and_counts_as_the_local_engine(spark, tmp_path, table_type, index):
    results = {}
    for engine in ("local", "spark"):
        path = str(tmp_path / engine)
        t = Table.create(path, name="t", table_type=table_type, record_key="id", precombine_field="ts",
                         partition_fields="part", options={"hoodie.index.type": index,
                                                           "hoodie.bucket.index.num.buckets": 3})
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
    if index == "BUCKET":  # one file group per bucket and partition, named for the bucket
        names = t.read(columns=["_hoodie_partition_path", "_hoodie_file_name"]).to_pylist()
        groups = {(r["_hoodie_partition_path"], r["_hoodie_file_name"][:8]) for r in names}
        assert len(groups) == len({(p, f.split("-")[0]) for p, f in groups}) and all(f.isdigit() for _, f in groups)


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


def _frame(spark, ids: list[str], ts: int, part: str = "a"):
    return spark.createDataFrame(pa.table({"id": ids, "ts": [ts] * len(ids), "part": [part] * len(ids)}))


def test_bloom_tagging_reads_only_groups_whose_range_and_filter_hold_the_keys(spark, table_path):
    t = Table.create(table_path, name="t", record_key="id", precombine_field="ts", partition_fields="part",
                     options={"hoodie.parquet.small.file.limit": 0})
    for r in range(4):  # four file groups in one partition, with disjoint key ranges
        write(t, _frame(spark, [f"k{r}{i:03d}" for i in range(50)], 1), "insert")
    # stored keys of one range, and new keys inside that range: one group is read
    res = write(t, _frame(spark, [f"k2{i:03d}" for i in range(0, 50, 5)] + [f"k2{i:03d}x" for i in range(5)], 2),
                "upsert")
    assert res.index_stats == {"file_groups": 4, "in_key_range": 1, "keys_read": 1}
    assert (res.num_updates, res.num_inserts) == (10, 5)
    # only new keys inside one group's range: its bloom filter rules them out, no keys are read
    res = write(t, _frame(spark, [f"k1{i:03d}x" for i in range(5)], 3), "upsert")
    assert res.index_stats == {"file_groups": 5, "in_key_range": 1, "keys_read": 0}
    assert (res.num_updates, res.num_inserts) == (0, 5)
    # a key in two groups' ranges: both filters tested, the one holding it read
    res = write(t, _frame(spark, ["k1003x"], 4), "upsert")  # in k1000-k1049 and k1000x-k1004x
    assert res.index_stats == {"file_groups": 6, "in_key_range": 2, "keys_read": 1}
    assert (res.num_updates, res.num_inserts) == (1, 0)
    expected = sorted([(f"k{r}{i:03d}", 2 if r == 2 and i % 5 == 0 else 1) for r in range(4) for i in range(50)]
                      + [(f"k2{i:03d}x", 2) for i in range(5)] + [(f"k1{i:03d}x", 4 if i == 3 else 3)
                                                                   for i in range(5)])
    assert rows(t.read(), ["id", "ts"]) == expected == rows(hudi_read(table_path), ["id", "ts"])


def _new_plans(spark, after: int | None = None) -> dict[int, str]:
    """The physical plans of the session's SQL executions numbered above `after` (None: only the
    latest's number, for a later call), from Spark's status store. It keeps the last 1,000: a
    shared session's list is walked once, and only new plans are fetched."""
    store = spark._jsparkSession.sharedState().statusStore()
    count = store.executionsCount()
    latest = store.executionsList(max(0, count - 300), 300).iterator()  # (a write runs a few dozen)
    plans: dict[int, str] = {}
    while latest.hasNext():
        execution = latest.next()
        number = execution.executionId()
        plans[number] = "" if after is None or number <= after else execution.physicalPlanDescription()
    if after is None:
        return {max(plans, default=-1): ""}
    return {n: p for n, p in plans.items() if n > after}


def _final_nodes(plan: str, node: str = "Exchange") -> list[tuple[str, str]]:
    """(input columns, arguments) of every `node` (Exchange: a shuffle) a query ran: those of
    its adaptive plan's final form (a plan first made without knowing a cached frame's
    partitioning and order may list shuffles and sorts the final plan dropped)."""
    tree = plan.split("\n\n")[0].splitlines()
    sections: list[tuple[int, bool]] = []  # (column, initial) of the plan sections a line is in
    ran = set()
    for line in tree:
        col = len(line) - len(line.lstrip(" |:"))  # (a section's lines are indented below its marker)
        while sections and sections[-1][0] >= col:
            sections.pop()
        if "== Initial Plan ==" in line or "== Final Plan ==" in line:
            sections.append((col, "Initial" in line))
        elif not any(initial for _, initial in sections):
            ran.update(re.findall(rf"\b{node} \((\d+)\)", line))
    details = re.findall(rf"\((\d+)\) {node}\nInput \[\d+\]: \[(.*)\]\nArguments: (.*)", plan)
    return [(columns, arguments) for n, columns, arguments in details if n in ran]


def test_the_nodes_a_query_ran_are_those_of_its_final_plans():
    """(`_final_nodes` itself: a cached frame's plan nested in a query's, each with a final and
    an initial form.)"""
    plan = "\n".join([
        "== Physical Plan ==", "AdaptiveSparkPlan (9)", "+- == Final Plan ==", "   HashAggregate (5)",
        "   +- Exchange (4)", "      +- InMemoryTableScan (1)", "            +- AdaptiveSparkPlan (3)",
        "            +- == Final Plan ==", "               Exchange (2)", "            +- == Initial Plan ==",
        "               Exchange (2)", "   +- Exchange (10)", "+- == Initial Plan ==", "   HashAggregate (8)",
        "   +- Exchange (7)", "", *[f"({n}) Exchange\nInput [1]: [c{n}]\nArguments: a{n}" for n in (2, 4, 7, 10)]])
    assert _final_nodes(plan) == [("c2", "a2"), ("c4", "a4"), ("c10", "a10")]


@pytest.mark.parametrize("index_type", ["BLOOM", "GLOBAL_BLOOM", "SIMPLE"])
def test_keys_are_tagged_and_routed_without_their_rows_and_writers_get_the_columns_they_read(
        spark, table_path, tmp_path, index_type, monkeypatch):
    """The tagging and the routing hold the key, work and ordering columns only (the payload
    joins the routes once, in the write); the file groups' writers get the columns they read:
    not the source file a row came from (it orders the combine only), nor the routing's work."""
    t = Table.create(table_path, name="t", record_key="id", precombine_field="ts", partition_fields="part",
                     options={"hoodie.index.type": index_type})
    write(t, _frame(spark, ["a", "b"], 1).withColumn("payload", F.lit("x")), "insert")
    source = str(tmp_path / "source")
    _frame(spark, ["a", "c"], 2).withColumn("payload", F.lit("y")).write.parquet(source)  # (rows carry their file)
    before = max(_new_plans(spark))
    # this small input placed by key as a large one is (the module: the package's name
    # `airflow_lake.spark.write` is its `write` function)
    monkeypatch.setattr(importlib.import_module("airflow_lake.spark.write"), "SMALL_INPUT_BYTES", 0)
    assert write(t, spark.read.parquet(source), "upsert").num_updates == 1
    plans = list(_new_plans(spark, before).values())
    expected = [("a", 2, "y"), ("b", 1, "x"), ("c", 2, "y")]
    assert rows(t.read(), ["id", "ts", "payload"]) == expected == rows(hudi_read(table_path), ["id", "ts", "payload"])
    cached = [c for plan in plans for c in re.findall(r"\) InMemoryRelation\nArguments: \[(.*?)\], StorageLevel", plan)]
    assert any("payload" in c for c in cached)  # (the key frame: the rows)
    tagged = [c for c in cached if "_al_insert_spread" in c]  # the tagged keys, as the routing reads them
    assert tagged and all("_al_loc_file" in c and "payload" not in c for c in tagged), tagged
    assert any("_al_source_file" in plan for plan in plans)  # (read with the rows)
    writer_inputs = [i for plan in plans for i in re.findall(r"\) MapInArrow\nInput \[\d+\]: \[(.*)\]", plan)
                     if "_al_target" in i]
    # the writers cut their partition's rows into file groups themselves: no sort by target file group
    assert not any(re.search(r"\) Sort\nInput \[\d+\]: \[.*\]\nArguments: \[_al_target", plan) for plan in plans)
    assert writer_inputs and all("payload" in i and "_al_loc_file" in i for i in writer_inputs)
    assert not any(c in i for i in writer_inputs for c in ("_al_source_file", "_al_loc_partition",
                                                           "_al_insert_spread", "_al_stored_ordering"))
    # the rows cross two shuffles: by key as they are read (the batch check, the tagging join and
    # the routes' join then find them in place, in order), and by file group to their writers
    moved = [(c, a) for plan in plans for c, a in _final_nodes(plan) if "payload" in c]
    by_key = r"_hoodie_record_key#\d+" if index_type.startswith("GLOBAL") else \
        r"_hoodie_partition_path#\d+, _hoodie_record_key#\d+"
    assert any("_al_source_file" in c and re.match(rf"hashpartitioning\({by_key}, \d+\), REPARTITION_BY_NUM", a)
               for c, a in moved)
    assert all("_al_target" in c or "_al_source_file" in c for c, _ in moved), moved
    sorted_rows = [(c, a) for plan in plans for c, a in _final_nodes(plan, "Sort") if "payload" in c]
    assert sorted_rows and all("_al_source_file" in c for c, _ in sorted_rows), sorted_rows  # (as they are read)
    # the inserts are ranked in the partitions they are cached in, as they are routed: the tagged
    # keys cross one shuffle (to the payload's join), none by their spread bucket, no window (the
    # routing counts' aggregate shuffles counts, not keys)
    routes = [(c, a) for plan in plans for c, a in _final_nodes(plan)
              if "_al_insert_spread" in c and "_hoodie_record_key" in c]
    assert len(routes) <= 1 and all("_al_target" in c for c, _ in routes), routes  # (none: a broadcast join)
    assert not any(c for plan in plans for c, _ in _final_nodes(plan, "Window") if "_al_insert_spread" in c)


def test_a_batch_is_placed_by_key_in_partitions_its_estimated_size_asks_for_without_running_it(spark):
    """The rows routed by key are hashed into as many partitions as the plan's estimate of their
    size asks for (64 MiB each, at least two per core, at most spark.sql.shuffle.partitions; a
    small input is left as it is); a source with shuffles of its own (an aggregate, a join) is
    not run to find out."""
    from airflow_lake.spark.write import SparkFrames

    frames = SparkFrames(spark, "t")
    tracker = spark.sparkContext.statusTracker()
    most = int(spark.conf.get("spark.sql.shuffle.partitions"))
    least = 2 * spark.sparkContext.defaultParallelism

    def partitions(frame) -> int | None:
        jobs = set(tracker.getJobIdsForGroup())
        placed = frames.cluster(frame, ["k"])
        assert set(tracker.getJobIdsForGroup()) == jobs  # (nothing ran)
        if placed is frame:
            return None
        logical = placed._jdf.queryExecution().logical().toString()
        return int(re.search(r"RepartitionByExpression \[k#\d+L?\], (\d+)", logical).group(1))

    small = spark.range(1000).groupBy((F.col("id") % 7).alias("k")).count()
    assert partitions(small) is None
    # an aggregate over a billion rows: run, it would take minutes (the old count of the RDD's
    # partitions ran its shuffle)
    aggregate = spark.range(10**9).groupBy((F.col("id") % 10**6).alias("k")).count()
    assert least <= partitions(aggregate) <= most
    medium = spark.range(10**6).withColumn("k", F.col("id") % 7)  # (16 MB)
    assert partitions(medium) == min(least, most)
    unknown = spark.createDataFrame(spark.sparkContext.parallelize([(1,)], 1), "k long")  # (not sized)
    assert partitions(unknown) == min(least, most)
    large = spark.range(10**9).withColumn("k", F.col("id") % 7)  # (estimated at 16 bytes a row)
    assert partitions(large) == min(max(least, -(-16 * 10**9 // 2**26)), most)


def test_a_spread_bucket_is_one_cached_partition_whose_rows_a_partition_udf_sees_at_once(spark):
    """The routes' UDF ranks a spread bucket's inserts by sequence number in one call: every
    bucket lies in one partition of the cached rows, also when they are the union of two frames
    (moved keys: an insert and a delete) or a join's output, and the UDF gets it whole."""
    from airflow_lake.core.merge import KEY
    from airflow_lake.core.write.execute import LOC_F, PART, SEQ
    from airflow_lake.core.write.routing import SPREAD
    from airflow_lake.spark.write import SparkFrames

    frames = SparkFrames(spark, "t")
    n = 5000
    keys = spark.range(n).select(F.concat(F.lit("k"), F.col("id").cast("string")).alias(KEY),
                                 (F.col("id") % 3).cast("string").alias(PART), F.col("id").alias(SEQ),
                                 F.when(F.col("id") % 4 == 0, F.lit("f1")).alias(LOC_F)).repartition(6, KEY)
    moved = keys.filter(F.col(SEQ) % 5 == 0).withColumn(LOC_F, F.lit(None).cast("string"))
    joined = keys.join(spark.range(0, n, 2).select(F.concat(F.lit("k"), F.col("id").cast("string")).alias(KEY)),
                       on=KEY)
    for frame in (keys, keys.unionByName(moved), joined):
        rows = frames.cache(frames.insert_spread(frame))
        try:
            def seen(part, spread, seq):  # (the spread buckets of the call, and how many rows each has)
                counts = pa.table({"s": spread.drop_null()}).group_by("s").aggregate([([], "count_all")])
                pairs = zip(counts.column("s").to_pylist(), counts.column("count_all").to_pylist(), strict=True)
                return pa.array([json.dumps(sorted(pairs))] * len(part))

            calls = {r[0] for r in frames.with_partition_udf(rows, "_seen", seen, [PART, SPREAD, SEQ], pa.string())
                     .select("_seen").collect()}
            buckets = [b for call in calls for b, _ in json.loads(call)]
            assert len(buckets) == len(set(buckets))  # (no bucket in two calls)
            totals = {r[0]: r[1] for r in rows.groupBy(SPREAD).count().collect() if r[0] is not None}
            assert {b: c for call in calls for b, c in json.loads(call)} == totals
            assert sum(totals.values()) == rows.filter(F.col(LOC_F).isNull()).count() > 0
        finally:
            frames.release(rows)


def test_routes_join_their_rows_by_key_never_by_position(spark):
    """A cached input partition that is lost and recomputed may number its rows otherwise (an
    unordered source): each row's payload still meets its own key's route."""
    from airflow_lake.core.merge import KEY
    from airflow_lake.core.write.execute import PART, SEQ, TARGET
    from airflow_lake.spark.write import SparkFrames

    records = spark.createDataFrame(pa.table({KEY: ["a", "b"], PART: ["p", "p"], SEQ: [0, 1], "v": ["va", "vb"]}))
    routes = spark.createDataFrame(pa.table({KEY: ["a", "b"], PART: ["p", "p"], SEQ: [1, 0], TARGET: [7, 8]}))
    out = SparkFrames(spark, "t").with_routes(records, routes, [PART, KEY]).collect()
    assert sorted((r[KEY], r["v"], r[TARGET]) for r in out) == [("a", "va", 7), ("b", "vb", 8)]


@pytest.mark.parametrize(("index_type", "operation", "distinct"), [
    ("BLOOM", "upsert", True), ("GLOBAL_BLOOM", "upsert", False), ("BLOOM", "insert", False)])
def test_the_batch_check_counts_distinct_keys_only_where_that_decides_the_combine(
        spark, table_path, index_type, operation, distinct):
    """A partition-scoped upsert combines a partition whose keys repeat, so the check counts
    distinct keys; a global index combines always, an insert never (by default): no distinct
    count (two shuffles), and the rows still combine as they must."""
    t = Table.create(table_path, name="t", record_key="id", precombine_field="ts", partition_fields="part",
                     options={"hoodie.index.type": index_type})
    write(t, _frame(spark, ["a", "b"], 1), "insert")
    before = max(_new_plans(spark))
    batch = spark.createDataFrame(pa.table({"id": ["a", "c", "a"], "ts": [3, 2, 2], "part": ["a", "a", "a"]}))
    write(t, batch, operation)
    plans = list(_new_plans(spark, before).values())
    assert any("count(distinct" in plan for plan in plans) == distinct
    expected = [("a", 1), ("a", 2), ("a", 3), ("b", 1), ("c", 2)] if operation == "insert" else \
        [("a", 3), ("b", 1), ("c", 2)]
    assert rows(t.read(), ["id", "ts"]) == expected == rows(hudi_read(table_path), ["id", "ts"])


@pytest.mark.parametrize("index_type", ["BLOOM", "SIMPLE", "GLOBAL_BLOOM"])
def test_no_lookup_where_no_file_group_could_hold_the_keys(spark, table_path, index_type):
    # a new table, and (a partition-scoped index) partitions the batch is the first to write:
    # every key is new, no lookup is made; where a group could hold one, it is
    t = Table.create(table_path, name="t", record_key="id", precombine_field="ts", partition_fields="part",
                     options={"hoodie.index.type": index_type})
    res = write(t, _frame(spark, ["a", "b"], 1, "x"), "upsert")
    assert (res.num_inserts, res.index_stats) == (2, {"file_groups": 0})
    res = write(t, _frame(spark, ["b", "c"], 2, "y"), "upsert")  # a new partition
    if index_type == "GLOBAL_BLOOM":  # b is found in x (and moves to y)
        assert res.index_stats["file_groups"] == 1
    else:
        assert (res.num_updates, res.num_inserts, res.index_stats) == (0, 2, {"file_groups": 0})
    res = write(t, _frame(spark, ["a", "d"], 3, "x"), "upsert")
    assert (res.num_updates, res.num_inserts) == (1, 1) and res.index_stats["file_groups"] >= 1
    b_in_x = [] if index_type == "GLOBAL_BLOOM" else [("b", 1, "x")]
    expected = sorted([("a", 3, "x"), ("b", 2, "y"), ("c", 2, "y"), ("d", 3, "x"), *b_in_x])
    assert rows(t.read(), ["id", "ts", "part"]) == expected == rows(hudi_read(table_path), ["id", "ts", "part"])


@pytest.mark.parametrize("index", ["BLOOM", "GLOBAL_SIMPLE"])
def test_a_key_inserted_by_a_concurrent_commit_fails_the_write(spark, table_path, monkeypatch, index):
    from airflow_lake.core.errors import WriteConflictError
    from airflow_lake.core.write.client import WriteClient

    options = {"hoodie.parquet.small.file.limit": 0, "hoodie.index.type": index}  # inserts: new file groups
    t = Table.create(table_path, name="t", record_key="id", precombine_field="ts", partition_fields="part",
                     options=options)
    write(t, _frame(spark, ["a1", "a2"], 0), "insert")
    commit = WriteClient.commit

    def other_writer_commits_first(self, *args, **kwargs):
        monkeypatch.setattr(WriteClient, "commit", commit)
        other = pa.table({"id": ["x0", "new"], "ts": [5, 5], "part": ["a", "a"]})
        # the local engine, between plan and commit: no file group in common, one new key
        Table.open(table_path, options=options).write(other, operation="upsert")
        return commit(self, *args, **kwargs)

    monkeypatch.setattr(WriteClient, "commit", other_writer_commits_first)
    with pytest.raises(WriteConflictError, match=r"inserts key 'new'"):
        write(Table.open(table_path, options=options), _frame(spark, ["a1", "new", "b7"], 9), "upsert")
    t = Table.open(table_path)
    expected = [("a1", 0), ("a2", 0), ("new", 5), ("x0", 5)]
    assert rows(t.read(), ["id", "ts"]) == expected == rows(hudi_read(table_path), ["id", "ts"])
    assert not t.timeline.pending().instants  # the failed write rolled itself back


@pytest.mark.parametrize("cast", [False, True], ids=["payload-in-jvm", "cast-in-python"])
def test_key_frame_with_and_without_casts_agrees_with_the_local_engine(spark, tmp_path, cast):
    """The key frame leaves the payload in the JVM when every column already has the stored
    type (a column the batch lacks becomes nulls); otherwise the core casts it in Python. Both
    give the local engine's rows and counts, including repeated keys and `_hoodie_is_deleted`."""
    from airflow_lake.core.schema import IS_DELETED
    from airflow_lake.core.write.keying import stored_as_is as _stored_as_is
    from airflow_lake.spark.schema import arrow_schema_of

    first = pa.table({"id": [f"k{i}" for i in range(12)], "ts": pa.array([1] * 12, pa.int64()),
                      "part": ["a", "b", "c"] * 4, "note": [f"n{i}" for i in range(12)],
                      IS_DELETED: [False] * 12})
    ts_type = pa.int32() if cast else pa.int64()
    second = pa.table({"id": ["k0", "k1", "k1", "k5", "new", "new"], "ts": pa.array([2, 3, 4, 2, 1, 7], ts_type),
                       "part": ["a", "b", "b", "c", "a", "a"], IS_DELETED: [False, False, True, False, False, None]})
    results = {}
    for engine in ("local", "spark"):
        path = str(tmp_path / engine)
        t = Table.create(path, name="t", table_type="MERGE_ON_READ", record_key="id", precombine_field="ts",
                         partition_fields="part", options={"hoodie.write.set.null.for.missing.columns": "true"})
        counts = []
        for op, batch in (("insert", first), ("upsert", second)):
            if engine == "local":
                res = t.write(batch, operation=op)
            else:
                frame = spark.createDataFrame(batch)
                if op == "upsert":
                    assert _stored_as_is(arrow_schema_of(frame.schema), t.schema()) is not cast
                res = write(t, frame, op)
            counts.append((res.num_inserts, res.num_updates, res.num_deletes, res.num_writes))
        cols = ["id", "ts", "part", "note"]
        results[engine] = (counts, rows(t.read(), cols), rows(hudi_read(path), cols))
    assert results["spark"] == results["local"]
    assert results["spark"][1] == results["spark"][2]
    assert ("k1", 4, "b", "n1") not in results["spark"][1] and ("new", 7, "a", None) in results["spark"][1]


def test_group_ids_of_names_known_unknown_and_null():
    from airflow_lake.core.write.routing import group_ids

    names = pa.array(["a\0f1", None, "b\0f2", "c\0f9", "a\0f1"])
    assert group_ids(names, {"a\0f1": 3, "b\0f2": 0}).tolist() == [3, -1, 0, -1, 3]
    assert group_ids(names, {}).tolist() == [-1] * 5


@pytest.mark.parametrize(("table_type", "index"), [("COPY_ON_WRITE", "BLOOM"), ("COPY_ON_WRITE", "GLOBAL_SIMPLE"),
                                                   ("MERGE_ON_READ", "SIMPLE"), ("MERGE_ON_READ", "BLOOM")])
def test_a_key_stored_twice_in_a_group_is_updated_and_deleted_as_the_local_engine_does(
        spark, tmp_path, table_type, index):
    """An insert may store a key twice (no lookup, no combine). An upsert of it found two
    locations in one group and the join doubled the incoming row: a third copy, counted as an
    insert. Both engines now rewrite each stored copy, as Java's merge handle does."""
    twice = pa.table({"id": ["d", "d", "e"], "ts": [1, 2, 1], "p": ["x", "x", "x"], "v": [4, 5, 6]})
    update = pa.table({"id": ["d"], "ts": [3], "p": ["x"], "v": [9]})
    got = {}
    for engine in ("local", "spark"):
        path = str(tmp_path / engine)
        table = Table.create(path, name="t", table_type=table_type, record_key="id", precombine_field="ts",
                             partition_fields="p", options={"hoodie.index.type": index})
        table.write(twice, operation="insert")
        run = (lambda data, op, t=table: t.write(data, operation=op)) if engine == "local" else \
            (lambda data, op, t=table: write(t, spark.createDataFrame(data.to_pandas()), op))
        result = run(update, "upsert")
        assert (result.num_inserts, result.num_updates) == (0, 1), engine
        got[engine] = rows(table.read(), ["id", "ts", "v"])
        if table_type == "COPY_ON_WRITE":  # (on MOR how a log record meets two base copies is the reader's)
            assert got[engine] == [("d", 3, 9), ("d", 3, 9), ("e", 1, 6)] == rows(hudi_read(path), ["id", "ts", "v"])
        assert [r[0] for r in got[engine]] == ["d", "d", "e"], engine  # no third copy
        run(pa.table({"id": ["d"], "ts": [4], "p": ["x"], "v": [0]}), "delete")
        assert rows(table.read(), ["id"]) == [("e",)], engine
        if table_type == "COPY_ON_WRITE":  # (hudi-rs applies a MOR delete to the first base copy only)
            assert rows(hudi_read(path), ["id"]) == [("e",)], engine
    assert got["local"] == got["spark"]
