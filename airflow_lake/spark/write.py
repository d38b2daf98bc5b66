"""Distributed writes: a Spark DataFrame written to a table as one commit, rows never on the driver.

Driver | executors:
- schema, options and the operation checked from the DataFrame's schema (no rows);
- | key frame: record key and partition path from the core's key generator, in an Arrow UDF
  given only its input columns (the payload stays in the JVM; when a column must be cast to
  the stored type, the core casts and checks the rows in `mapInArrow` instead), a delete
  flag and a sequence number in input order; its values are checked here, before the timeline;
- | combine (upsert, delete, insert with `hoodie.combine.before.insert`): a window keeping, per
  key, the largest ordering value, ties to the later row (the sequence number);
- begin: lock, repair, requested instant, heartbeat (the core's write client);
- | tag (`tag.py`): BLOOM candidates by key range (footers read here), bloom filters tested
  and candidates confirmed against their group's keys in executors; SIMPLE a join with every
  group's live keys; either way a join tags the key frame with locations and ordering values;
- | BUCKET (`bucket.py`): each row's bucket computed in executors, its group the bucket's;
- route: partition moves (delete at the old location, insert at the new), stale deletes and
  unknown deletes dropped; inserts per partition planned from counts by the core's rule (small
  files first, then new file groups), each insert taking a slot of that plan (its key hash's
  spread bucket, then input order), so every group gets the rows the local engine gives it
  (an Arrow UDF on the location and slot columns);
- | execute: rows shuffled by target file group; each group written by the core's
  `merge_file` / `append_log` / `insert_file`, returning its write stat;
- commit: the stats, the core's conflict checks (keys inserted concurrently found by a join in
  executors, `conflicts.py`), the completed instant.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass, replace
from functools import partial

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.errors import AnalysisException
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.types import LongType

from airflow_lake.core.config import DEFAULT_PAYLOAD, TableOptions, WriteOptions
from airflow_lake.core.context import TableContext
from airflow_lake.core.errors import (
    LakeError,
    MissingFieldError,
    SchemaError,
    UnsupportedTableVersionError,
)
from airflow_lake.core.index import check_index_type
from airflow_lake.core.merge import KEY
from airflow_lake.core.model import WriteStat
from airflow_lake.core.schema import IS_DELETED, META_FIELDS, conform, evolve, from_avro, resolve_names
from airflow_lake.core.timeline.active import ActiveTimeline
from airflow_lake.core.timeline.instant import COMMIT, COMPACTION, DELTA_COMMIT, REPLACE_COMMIT
from airflow_lake.core.timeline.metadata import workload_metadata
from airflow_lake.core.txn.heartbeat import beating
from airflow_lake.core.view import FileSystemView
from airflow_lake.core.vocabulary import LOOKUP_OPERATIONS, OPERATIONS, OVERWRITE_OPERATIONS
from airflow_lake.core.write.client import OPERATION_TYPES, TOKEN_KEY, WriteClient, WriteResult
from airflow_lake.core.write.execute import ExecSpec, execute_group
from airflow_lake.core.write.partitions import check_batch_nesting
from airflow_lake.core.write.plan import Sizing, fill_small_files, new_files, slice_ref
from airflow_lake.core.write.prepare import combine_order, resolvable_names

from .bucket import BucketRoute, BucketSpec, bucket_targets, plan_buckets, row_buckets
from .conflicts import key_clash
from .engine import SparkEngine
from .frames import (
    BUCKET,
    DEL,
    LOC_F,
    LOC_P,
    PART,
    SEQ,
    STORED,
    TARGET,
    WORK,
    GroupPlan,
    group_ids,
    scalar_arrow_udf,
    stage,
)
from .schema import arrow_schema_of, exact_arrow_schema
from .tag import tag

log = logging.getLogger(__name__)

# -- values the executors get ----------------------------------------------------------------
SOURCE_FILE = "_al_source_file"  # the key frame's column naming the file a row was read from
SPREAD = "_al_insert_spread"  # an insert's bucket of its partition's inserts (by key hash)
RANK = "_al_insert_rank"  # an insert's place in its spread bucket (input order), from 1


@dataclass(frozen=True)
class KeySpec:
    ctx: TableContext
    operation: str
    is_global: bool
    data_schema: pa.Schema  # the written columns, conformed to the table schema
    out_schema: pa.Schema  # data_schema + the work columns, exactly as Spark declares them
    where: str


@dataclass(frozen=True)
class RouteSpec:
    located: dict[str, int]  # "partition\0file_id" -> group id
    bins: dict[str, tuple[np.ndarray, np.ndarray]]  # partition -> (cumulative rows, group ids)
    starts: dict[str, int]  # "partition\0spread bucket" -> the first insert slot of the bucket's rows


# -- entry point ---------------------------------------------------------------------------------
def write(table, df: DataFrame, operation: str = "upsert", extra_metadata: dict[str, str] | None = None,
          ) -> WriteResult:
    """`table.write(df)` on `df`'s Spark (the same as a table opened with a `SparkEngine`)."""
    return SparkEngine(df.sparkSession).write_frame(table, df, operation, extra_metadata)


def write_frame(table, df: DataFrame, operation: str, extra_metadata: dict[str, str] | None) -> WriteResult:
    """Write `df` to `table` (a core `Table`) as one commit of `operation`, on `df`'s Spark
    (what `SparkEngine.write_frame` runs)."""
    where = f"table {table.storage.uri}"
    cfg = table.config
    if cfg.version != 6 or cfg.get(TableOptions.TIMELINE_LAYOUT) != 1:
        raise UnsupportedTableVersionError(f"{where}: table version {cfg.version} cannot be written; "
                                           "airflow-lake writes table version 6, layout 1")
    table.check_write_support()
    operation = OPERATIONS.parse(operation, where)
    index_type = check_index_type(table.option(WriteOptions.INDEX_TYPE), where)
    is_global = index_type.startswith("GLOBAL")
    client = WriteClient(table, table.engine)
    spark = df.sparkSession
    frame, avro = _key_frame(table, df, operation, is_global, where)
    combine = operation in LOOKUP_OPERATIONS or table.option(WriteOptions.COMBINE_BEFORE_INSERT)
    frame = frame.persist()
    keyed = frame.drop(SOURCE_FILE)  # (the combine's source order only)
    try:
        # one pass: bad values fail here, before the timeline is touched; the partitions written,
        # and whether a key repeats within one (a global index combines across partitions)
        counts = stage(lambda: frame.groupBy(PART).agg(F.count(F.lit(1)), F.count_distinct(KEY)).collect(),
                       where, "checking the batch")
        parts = sorted(p for p, _, _ in counts)
        # the core's rule on the distinct partitions (metadata-sized); against the table's in `begin`
        created = [] if operation == "delete" else parts
        check_batch_nesting(table.storage, created)
        if combine and (is_global or any(n != distinct for _, n, distinct in counts)):
            keyed = _combine(frame, cfg.precombine_field if operation != "delete" else None, is_global).persist()
        extra = dict(extra_metadata or {})
        replace = operation in OVERWRITE_OPERATIONS
        action = REPLACE_COMMIT if replace else (DELTA_COMMIT if cfg.is_mor else COMMIT)
        requested, heartbeat, timeline = client.begin(action, extra.get(TOKEN_KEY), partitions=created)
        if heartbeat is None:  # a retry whose run token is already committed
            return client.stored_result(timeline, requested, operation)
        with beating(heartbeat):  # (an error names the instant: the job's error line says which it rolled back)
            try:
                return _run(spark, table, client, keyed, parts, avro, operation, is_global, index_type, requested,
                            timeline, extra, where)
            except BaseException:
                _abandon(table, requested.time)
                raise
    finally:
        keyed.unpersist()
        frame.unpersist()


@dataclass
class _Routing:
    """Where the rows go: the file groups written, the rows with their TARGET group, the
    workload figures, and the keys this write inserts (for the concurrent-insert check)."""

    groups: dict[int, GroupPlan]
    routed: DataFrame
    inserts: dict[str, int]
    updates: dict[tuple[str, str], tuple[str, int]]
    new_keys: DataFrame  # PART, KEY


def _run(spark, table, client: WriteClient, keyed: DataFrame, parts: list[str], avro: dict, operation: str,
         is_global: bool, index_type: str, requested, timeline: ActiveTimeline, extra: dict[str, str],
         where: str) -> WriteResult:
    seen = set(timeline.completed().times) | {i.time for i in timeline.actions(COMPACTION)}
    wide = is_global or operation == "insert_overwrite_table"
    view = FileSystemView(table.storage, timeline,
                          partition_files=None if wide else client.partition_files(parts))
    replaced = None
    if operation == "insert_overwrite_table":
        replaced = _group_ids(view.file_groups())
    elif operation == "insert_overwrite":
        replaced = _group_ids(g for g in view.file_groups() if g.partition in set(parts))
    cached: list[DataFrame] = []
    index_stats: dict[str, int] = {}
    try:
        if index_type == "BUCKET":
            routing = _route_buckets(client, keyed, view, requested.time, replaced is not None, where)
        else:
            routing = _route_keys(spark, table, client, keyed, view, operation, parts, is_global, index_type,
                                  timeline, replaced, cached, index_stats, where)
        result = _execute(spark, table, client, routing, view, avro, operation, is_global, index_type, requested,
                          timeline, seen, extra, replaced, where)
    finally:
        for frame in cached:
            frame.unpersist()
    result.index_stats = index_stats
    return result


def _route_keys(spark, table, client: WriteClient, keyed: DataFrame, view: FileSystemView, operation: str,
                parts: list[str], is_global: bool, index_type: str, timeline: ActiveTimeline, replaced,
                cached: list[DataFrame], index_stats: dict[str, int], where: str) -> _Routing:
    """Key-lookup indexes (and no index): located rows to their group, inserts binned into small
    groups and new ones."""
    cfg = table.config
    lookup = operation in LOOKUP_OPERATIONS or (
        operation == "insert" and table.option(WriteOptions.INSERT_DROP_DUPLICATES))
    if lookup:
        tagged = tag(spark, table, view, keyed, None if is_global else parts, is_global, index_type, where)
        cached += tagged.cached
        index_stats.update(tagged.stats)
        rows = _route_located(table, tagged.rows, operation, is_global, index_type)
    else:
        rows = keyed.withColumn(LOC_P, F.lit(None).cast("string")).withColumn(LOC_F, F.lit(None).cast("string"))
        rows = rows.withColumn(STORED, F.lit(None).cast("string")).filter(~F.col(DEL))
    # metadata only, in one job: rows per located group (LOC_P, LOC_F), inserts per partition (PART);
    # it reads the key columns of the cached key frame, never the payload
    # inserts take the slots of the core's plan in order: by partition, spread bucket, input order
    spread = F.pmod(F.xxhash64(KEY), F.lit(max(1, spark.sparkContext.defaultParallelism)))
    rows = rows.withColumn(SPREAD, F.when(F.col(LOC_F).isNull(), spread))
    new_part = F.when(F.col(LOC_F).isNull(), F.col(PART)).alias("_al_new_partition")
    counts = stage(lambda: rows.groupBy(LOC_P, LOC_F, new_part, SPREAD).count().collect(), where, "counting")
    located_counts = {(p, f): n for p, f, _, _, n in counts if f is not None}
    insert_counts: dict[str, int] = {}
    starts: dict[str, int] = {}
    for _, _, p, b, n in sorted((c for c in counts if c[1] is None), key=lambda c: (c[2], c[3])):
        starts[f"{p}\0{b}"] = insert_counts.get(p, 0)
        insert_counts[p] = insert_counts.get(p, 0) + n

    groups: dict[int, GroupPlan] = {}
    located: dict[str, int] = {}
    for (p, f) in sorted(located_counts):
        group = view.groups[p][f]
        gid = len(groups)
        if cfg.is_mor:
            groups[gid] = GroupPlan("log", p, f, slice=slice_ref(view, group))
        else:
            base = next(s.base_file for s in reversed(group.slices) if s.base_file is not None)
            groups[gid] = GroupPlan("merge", p, f, base=base)
        located[f"{p}\0{f}"] = gid
    sizing = Sizing(table.option(WriteOptions.MAX_FILE_SIZE), table.option(WriteOptions.SMALL_FILE_LIMIT),
                    client.record_size_estimate(timeline))
    bins: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    inserts: dict[str, int] = {}
    busy = {f for (_, f) in located_counts}
    for p, n in sorted(insert_counts.items()):
        slots = np.arange(n)
        filled, rest = ([], slots) if replaced is not None or p not in view.groups else fill_small_files(
            view, p, slots, sizing, is_mor=cfg.is_mor, busy=busy if cfg.is_mor else set())
        sizes, ids = [], []
        for t in filled:
            gid = located.get(f"{p}\0{t.file_id}")
            if gid is None:  # a small group only receiving inserts: its base file is rewritten
                gid = len(groups)
                groups[gid] = GroupPlan("merge", p, t.file_id, base=t.base)
            sizes.append(len(t.insert_rows))
            ids.append(gid)
        for t in new_files(p, rest, sizing):
            gid = len(groups)
            groups[gid] = GroupPlan("insert", p, t.file_id)
            sizes.append(len(t.rows))
            ids.append(gid)
        bins[p] = (np.cumsum(sizes), np.asarray(ids, dtype=np.int64))
        inserts[p] = n
    updates = {(g.partition, g.file_id): ((g.base.instant if g.base else g.slice.base_instant),
                                          located_counts[(g.partition, g.file_id)])
               for g in groups.values() if (g.partition, g.file_id) in located_counts}
    log.info("%s: write routes rows to %d file groups (%d updated, %d inserted into)", where, len(groups),
             len(located), len(groups) - len(located))
    # the target group from a few columns: the payload never goes through Python for it
    rank = F.row_number().over(Window.partitionBy(PART, SPREAD).orderBy(SEQ))
    rows = rows.filter(F.col(LOC_F).isNull()).withColumn(RANK, rank) \
        .unionByName(rows.filter(F.col(LOC_F).isNotNull()).withColumn(RANK, F.lit(None).cast("int")))
    route = scalar_arrow_udf(partial(route_targets, RouteSpec(located, bins, starts)), LongType())
    routed = rows.withColumn(TARGET, route(PART, SPREAD, RANK, LOC_P, LOC_F))
    return _Routing(groups, routed, inserts, updates, rows.filter(F.col(LOC_F).isNull()).select(PART, KEY))


def _route_buckets(client: WriteClient, keyed: DataFrame, view: FileSystemView, instant: str, overwrite: bool,
                   where: str) -> _Routing:
    """BUCKET: every row to its bucket's group (the core's bucket function, in executors)."""
    table = client.table
    spec = BucketSpec(table.option(WriteOptions.BUCKET_NUM), tuple(client.bucket_hash_fields()))
    rows = keyed.withColumn(BUCKET, scalar_arrow_udf(partial(row_buckets, spec), LongType())(KEY))
    counts = stage(lambda: rows.groupBy(PART, BUCKET).agg(
        F.count(F.lit(1)), F.sum(F.when(F.col(DEL), 0).otherwise(1))).collect(), where, "counting")
    plan = plan_buckets(view, [(p, b, n, live) for p, b, n, live in counts], instant=instant,
                        is_mor=table.config.is_mor, overwrite=overwrite)
    for p, b, n, live in counts:  # MOR: deletes are checked against a stored group's records
        gid = plan.route.get(f"{p}\0{b}")
        g = plan.groups.get(gid)
        if n > live and g is not None and g.kind == "log" and gid not in plan.new:
            plan.groups[gid] = replace(g, stored=client.delete_check_read(view, view.groups[p][g.file_id]))
    log.info("%s: write routes rows to %d bucket file groups (%d new)", where, len(plan.groups), len(plan.new))
    route = scalar_arrow_udf(partial(bucket_targets, BucketRoute(plan.route, frozenset(plan.new))), LongType())
    routed = rows.withColumn(TARGET, route(PART, BUCKET, DEL))
    routed = routed.filter(F.col(TARGET) >= 0)
    new_keys = routed.filter(F.col(TARGET).isin(sorted(plan.new)) & ~F.col(DEL)).select(PART, KEY)
    return _Routing(plan.groups, routed, plan.inserts, plan.updates, new_keys)


def _execute(spark, table, client: WriteClient, routing: _Routing, view: FileSystemView, avro: dict,
             operation: str, is_global: bool, index_type: str, requested, timeline, seen, extra, replaced,
             where) -> WriteResult:
    """Inflight, every group written in an executor, then the commit."""
    cfg = table.config
    instant = requested.time
    groups = routing.groups
    inflight = client.txn.inflight(timeline, requested, workload_metadata(
        OPERATION_TYPES[operation], routing.inserts, routing.updates).to_bytes())
    client.write_partition_metadata(instant, {g.partition for g in groups.values()})
    routed = routing.routed
    data_columns = tuple(c for c in routed.columns if c not in WORK and not c.startswith("_al_"))
    stored = any(g.stored is not None for g in groups.values())
    spec = ExecSpec(client.write_context(instant, avro), groups, data_columns, cfg.precombine_field,
                    table.option(WriteOptions.LOG_BLOCK_FORMAT).lower(), table=table.context() if stored else None,
                    schema=client.reader(view).full_schema if stored else None)
    # the core's group executor in executors, one shuffle partition (task) per file group
    written = stage(lambda: SparkEngine(spark).write_groups(partial(execute_group, spec), routed, TARGET,
                                                            groups=max(1, len(groups))), where, f"write {instant}")
    stats: list[WriteStat] = [s for s in written if s is not None]

    if index_type == "BUCKET":  # a concurrent writer of the same bucket clashes, new group or not
        touched = {(g.partition, g.file_id) for g in groups.values()}
    else:
        touched = {(g.partition, g.file_id) for g in groups.values() if g.kind != "insert"}
    touched |= {(p, f) for p, ids in (replaced or {}).items() for f in ids}
    clash = key_clash(spark, table.context(), routing.new_keys, is_global, where) if operation == "upsert" \
        else _no_clash
    return client.commit(timeline, inflight, seen, operation, stats, extra, avro, touched, clash, replaced)


def _no_clash(files: dict[str, list[str]]) -> None:
    return None


# -- stages on the driver ------------------------------------------------------------------------
def _key_frame(table, df: DataFrame, operation: str, is_global: bool, where: str) -> tuple[DataFrame, dict]:
    """The DataFrame with its key columns (computed in executors) and the table schema after
    this write (checked from the DataFrame's schema alone)."""
    cfg = table.config
    table_avro = table.schema_avro()
    known = resolvable_names(table.keygen, cfg.precombine_field, table_avro)  # the core's rule: ignoring case
    renames = resolve_names(df.columns, known, where)
    df = df.withColumnsRenamed(renames) if renames else df
    incoming = arrow_schema_of(df.schema)
    incoming = pa.schema([f for f in incoming if f.name not in META_FIELDS])
    empty = incoming.empty_table()
    is_delete_op = operation == "delete"
    table.keygen.check_fields(empty, partition=not (is_delete_op and is_global))
    precombine = cfg.precombine_field
    if precombine and not is_delete_op and precombine not in incoming.names:
        raise MissingFieldError(f"{where}: the data has no precombine field {precombine!r}; "
                                f"columns: {incoming.names}")
    if IS_DELETED in incoming.names and not pa.types.is_boolean(incoming.field(IS_DELETED).type):
        raise SchemaError(f"{where}: column {IS_DELETED!r} must be boolean, not {incoming.field(IS_DELETED).type}")
    local = table.option(WriteOptions.TIMESTAMP_WITHOUT_TIMEZONE)
    if is_delete_op:
        avro = table_avro or evolve(None, incoming, cfg.name, where, local_timestamps=local)
        data_schema = incoming
    else:
        avro = evolve(table_avro, incoming, cfg.name, where, local_timestamps=local)
        data_schema = from_avro(avro)
    source = df.drop(*[c for c in df.columns if c in META_FIELDS])
    source_file = _source_file(source)
    work = [pa.field(KEY, pa.string()), pa.field(PART, pa.string()), pa.field(DEL, pa.bool_()),
            pa.field(SEQ, pa.int64())] + ([pa.field(SOURCE_FILE, pa.string())] if source_file is not None else [])
    out_schema = exact_arrow_schema(pa.schema(list(data_schema) + work))
    spec = KeySpec(table.context(), operation, is_global, data_schema, out_schema, where)
    if source_file is not None:
        source = source.withColumn(SOURCE_FILE, source_file)
    if is_delete_op or _stored_as_is(incoming, data_schema):
        return _key_columns(spec, source, incoming, table.keygen), avro
    # columns the table stores as other types: cast (and checked) by the core, in executors
    return source.mapInArrow(partial(key_batches, spec), from_arrow_schema(out_schema)), avro


def _stored_as_is(incoming: pa.Schema, data_schema: pa.Schema) -> bool:
    """Whether every incoming column already has the type the table stores (no cast to check)."""
    return all(f.name not in incoming.names or incoming.field(f.name).type.equals(f.type) for f in data_schema)


def _key_columns(spec: KeySpec, source: DataFrame, incoming: pa.Schema, keygen) -> DataFrame:
    """The key frame with the payload left in the JVM: only the key generator's input columns go
    to Python (an Arrow UDF returning record key and partition path); columns the table has
    and the data lacks are nulls; the sequence number is Spark's row id (increasing in input
    order within and across partitions)."""
    fields = list(keygen.record_key_fields) + list(keygen.partition_fields)
    inputs = [c for c in dict.fromkeys(f.split(".")[0] for f in fields) if c in incoming.names]
    keys_type = from_arrow_schema(pa.schema([pa.field(KEY, pa.string()), pa.field(PART, pa.string())]))
    udf = scalar_arrow_udf(partial(key_paths, spec, tuple(inputs)), keys_type)
    types = from_arrow_schema(spec.data_schema)
    data = [F.col(f.name) if f.name in incoming.names else F.lit(None).cast(types[f.name].dataType).alias(f.name)
            for f in spec.data_schema]
    if spec.operation == "delete":
        flag = F.lit(True)
    elif IS_DELETED in incoming.names:
        flag = F.coalesce(F.col(IS_DELETED), F.lit(False))
    else:
        flag = F.lit(False)
    origin = [SOURCE_FILE] if SOURCE_FILE in source.columns else []
    keyed = source.select(*data, udf(*inputs).alias("_al_keys"), flag.alias(DEL),
                          F.monotonically_increasing_id().alias(SEQ), *origin)
    return keyed.select(*spec.data_schema.names, F.col(f"_al_keys.{KEY}").alias(KEY),
                        F.col(f"_al_keys.{PART}").alias(PART), DEL, SEQ, *origin)


def _combine(keyed: DataFrame, ordering: str | None, is_global: bool) -> DataFrame:
    """Per key (and partition, under a non-global index): the winner of the core's combine rule
    (`combine_order`). A row's source position: the file it was read from (files in path order),
    then its place in the DataFrame (Spark's row id: partition, then row; within one file that
    is the file's row order, its splits being packed in offset order)."""
    positions = ((SOURCE_FILE,) if SOURCE_FILE in keyed.columns else ()) + (SEQ,)
    order = [F.col(c).desc_nulls_last() for c, _ in combine_order(ordering, positions)]
    window = Window.partitionBy(*([KEY] if is_global else [PART, KEY])).orderBy(*order)
    ranked = keyed.withColumn("_al_rank", F.row_number().over(window)).filter(F.col("_al_rank") == 1)
    return ranked.drop("_al_rank", SOURCE_FILE)


def _source_file(df: DataFrame) -> Column | None:
    """The file each row was read from, for a DataFrame read by Spark's file sources (whose
    partitions are packed by file size, largest first, not in the files' order); else None."""
    try:
        if not df.inputFiles():  # not read from files (an Arrow table, a query...): nothing to ask
            return None
        df.select(F.col("_metadata.file_path"))
    except AnalysisException:
        return None
    return F.col("_metadata.file_path")


def _route_located(table, rows: DataFrame, operation: str, is_global: bool, index_type: str) -> DataFrame:
    """Partition moves, stale and unknown deletes, and (insert with drop duplicates) keys that
    exist, decided on columns."""
    cfg = table.config
    located = F.col(LOC_F).isNotNull()
    ordering = cfg.precombine_field if operation != "delete" else None
    wins_check = ordering is not None and cfg.payload_class == DEFAULT_PAYLOAD
    older = (F.col(ordering) < F.col(STORED)) if wins_check else F.lit(False)
    older = F.coalesce(older, F.lit(False))
    if operation == "insert":  # drop duplicates: keys already stored are not inserted again
        return rows.filter(~located & ~F.col(DEL))
    if cfg.is_mor:  # a `_hoodie_is_deleted` row older than the stored record changes nothing
        rows = rows.filter(~(F.col(DEL) & located & older))
    rows = rows.filter(located | ~F.col(DEL))  # deleting an unknown key: nothing to do
    if not is_global:
        return rows
    option = WriteOptions.BLOOM_UPDATE_PARTITION_PATH if "BLOOM" in index_type else \
        WriteOptions.SIMPLE_UPDATE_PARTITION_PATH
    if not table.option(option):
        return rows  # updated in place, in the old partition
    rows = rows.withColumn("_al_moved", located & (F.col(LOC_P) != F.col(PART)) & ~F.col(DEL) & ~older)
    moved = F.col("_al_moved")
    deletes = rows.filter(moved).withColumn(DEL, F.lit(True)).withColumn(PART, F.col(LOC_P))
    if ordering:
        deletes = deletes.withColumn(ordering, F.lit(None).cast(rows.schema[ordering].dataType))
    inserts = rows.withColumn(LOC_F, F.when(moved, F.lit(None)).otherwise(F.col(LOC_F))) \
        .withColumn(LOC_P, F.when(moved, F.lit(None)).otherwise(F.col(LOC_P)))
    return inserts.unionByName(deletes).drop("_al_moved")


def _abandon(table, instant: str) -> None:
    """Roll back this write's own pending instant after a failure (nothing becomes visible)."""
    try:
        table.transaction().abort(instant)
    except LakeError:
        log.exception("table %s: write %s failed and could not be rolled back now; the next writer will",
                      table.storage.uri, instant)


# -- executor functions (module level: they travel as values) -----------------------------------
def key_paths(spec: KeySpec, names: tuple[str, ...], *columns: pa.Array) -> pa.StructArray:
    """Record key and partition path of every row, from the key generator's input columns."""
    data = pa.Table.from_arrays(list(columns), names=list(names))
    keys, parts = _keys_and_parts(spec, data)
    return pa.StructArray.from_arrays([keys, parts], names=[KEY, PART])


def _keys_and_parts(spec: KeySpec, data: pa.Table) -> tuple[pa.Array, pa.Array]:
    keygen = spec.ctx.keygen
    keys = keygen.record_keys(data)
    if spec.operation == "delete" and spec.is_global and any(
            f not in data.column_names for f in keygen.partition_fields):
        return keys, pa.repeat(pa.scalar("", pa.string()), data.num_rows)
    return keys, keygen.partition_paths(data)


def key_batches(spec: KeySpec, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Record key, partition path, delete flag and sequence number of every row, with the
    columns conformed to the table schema (the core's key generator and checks)."""
    from pyspark import TaskContext

    context = TaskContext.get()
    seq_base = (context.partitionId() if context else 0) << 40
    offset = 0
    is_delete_op = spec.operation == "delete"
    for batch in batches:
        data = pa.Table.from_batches([batch])
        n = data.num_rows
        keys, parts = _keys_and_parts(spec, data)
        if is_delete_op:
            flags = pa.repeat(pa.scalar(True), n)
        elif IS_DELETED in data.column_names:
            flags = pc.fill_null(data.column(IS_DELETED), False).combine_chunks()
        else:
            flags = pa.repeat(pa.scalar(False), n)
        origin = [data.column(SOURCE_FILE)] if SOURCE_FILE in spec.out_schema.names else []
        if not is_delete_op:
            data = conform(data, spec.data_schema, spec.where)
        seq = pa.array(np.arange(offset, offset + n, dtype=np.int64) + seq_base)
        offset += n
        columns = list(data.select(spec.data_schema.names).columns) + [keys, parts, flags, seq, *origin]
        out = pa.Table.from_arrays(columns, names=spec.out_schema.names)
        yield from out.cast(spec.out_schema).to_batches()


def route_targets(spec: RouteSpec, part: pa.Array, spread: pa.Array, rank: pa.Array, loc_p: pa.Array,
                  loc_f: pa.Array) -> pa.Array:
    """The target file group of every row: its location's group, or for an insert the group
    whose planned slots hold its slot (its spread bucket's first slot + its rank there), so
    every group takes exactly the rows the core's plan gives it."""
    target = group_ids(pc.binary_join_element_wise(loc_p, loc_f, "\0"), spec.located)  # -1: not located
    located = pc.is_valid(loc_f).to_numpy(zero_copy_only=False)
    inserts = np.nonzero(~located)[0]
    if len(inserts):
        take = pa.array(inserts)
        parts = part.take(take).to_numpy(zero_copy_only=False)
        buckets = spread.take(take).to_numpy(zero_copy_only=False)
        ranks = rank.take(take).to_numpy(zero_copy_only=False).astype(np.int64)
        starts = np.array([spec.starts[f"{p}\0{b}"] for p, b in zip(parts, buckets, strict=True)], dtype=np.int64)
        slots = starts + ranks - 1
        for p in np.unique(parts):
            cum, ids = spec.bins[p]
            sel = parts == p
            target[inserts[sel]] = ids[np.minimum(np.searchsorted(cum, slots[sel], side="right"), len(ids) - 1)]
    return pa.array(target)


# -- helpers -------------------------------------------------------------------------------------
def _group_ids(groups) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for g in groups:
        out.setdefault(g.partition, []).append(g.file_id)
    return out
