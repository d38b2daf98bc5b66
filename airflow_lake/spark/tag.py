"""Tagging on Spark: the key frame joined with the location (and the stored ordering value) of
every key the table already holds. No key reaches the driver.

- SIMPLE / GLOBAL_SIMPLE: every file group of the touched partitions reads its live keys in a
  task; a join tags the key frame.
- BLOOM / GLOBAL_BLOOM (Java's HoodieBloomIndex): the driver reads the key ranges of the
  latest base files from their footers (metadata); in executors each incoming key is paired
  with the groups whose range holds it, then one task per candidate group tests its keys
  against the group's bloom filter and, only when the filter claims some, reads the group's
  live keys to confirm them exactly. Only confirmed keys are joined to the key frame.
"""

from __future__ import annotations

import logging
import pickle
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.accumulators import Accumulator
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.types import LongType

from airflow_lake.core.config import DEFAULT_PAYLOAD
from airflow_lake.core.context import TableContext
from airflow_lake.core.formats.parquet import MAX_KEY, MIN_KEY, file_bloom, read_footer
from airflow_lake.core.index.record_index import RecordIndex, decode_locations, slice_cells
from airflow_lake.core.index.record_index_update import RLI_GROUP, index_groups
from airflow_lake.core.merge import KEY
from airflow_lake.core.metadata_writer import tagging_record_index
from airflow_lake.core.ordering import ordering_key
from airflow_lake.core.read import Reader
from airflow_lake.core.slice_reader import SliceQuery, SliceRead, Visibility, read_file_group
from airflow_lake.core.view import FileSystemView

from .frames import CANDIDATE, DEL, LOC_F, LOC_P, LOOKUP_KEY, PART, STORED, scalar_arrow_udf, stage
from .schema import arrow_schema_of, exact_arrow_schema

log = logging.getLogger(__name__)
_JAVA_ORDER_UNSAFE = "[\\x{E000}-\\x{10FFFF}]"  # where UTF-8 byte order and Java's UTF-16 order differ


@dataclass(frozen=True)
class LookupSpec:
    """What every lookup task shares: the table, its schema (meta fields first), the ordering
    field(s) whose stored value the write compares (DefaultHoodieRecordPayload only; several:
    the key of the tuple, `ordering.ordering_key`) and the visible instants."""

    ctx: TableContext
    schema: pa.Schema
    ordering_fields: tuple[str, ...]
    visible: Visibility
    out_schema: pa.Schema
    ordering_types: tuple[pa.DataType, ...] = ()  # what stored values are promoted to (several fields)


@dataclass(frozen=True)
class RangeSpec:
    """Per partition ("" for a global index): (min key, max key, candidate id) of each base
    file; a bound is None where it cannot prune (absent, or beyond Java's order)."""

    files: dict[str, tuple[tuple[str | None, str | None, int], ...]]
    is_global: bool
    out_schema: pa.Schema


@dataclass(frozen=True)
class BloomSpec:
    lookup: LookupSpec
    groups: dict[int, tuple]  # candidate id -> (partition, file id, base file, slice base, slice logs)


@dataclass(frozen=True)
class IndexLookupSpec:
    """What every record-index lookup task shares: index file group k's slice (base HFile,
    log files), the MDT instants read, the table's file groups (an entry naming another is
    stale: its key is new)."""

    ctx: TableContext
    slices: tuple[tuple[str | None, tuple[str, ...]], ...]
    valid: frozenset[str]
    groups: frozenset[tuple[str, str]]
    out_schema: pa.Schema


@dataclass
class Tagged:
    """The key frame with its locations, the frames to release once the write is done, and
    how the index found the keys (for logs and the write result: asked once the rows were
    used, when the tasks that tagged them have counted)."""

    rows: DataFrame
    cached: list[DataFrame]
    stats: Callable[[], dict[str, int]]


def tag(spark, table, view: FileSystemView, keyed: DataFrame, parts: list[str] | None, is_global: bool,
        index_type: str, where: str) -> Tagged:
    """`keyed` left-joined with the stored location of its keys (LOC_P, LOC_F, STORED: nulls
    for new keys)."""
    spec = _lookup_spec(table, view, arrow_schema_of(keyed.schema))
    index = tagging_record_index(table.storage, table.config.props, view.timeline, index_type, where)
    if index is not None:
        return _record_index_tag(spark, view, keyed, index, spec, where)
    if index_type.endswith("BLOOM"):
        stored, cached, stats = _bloom_lookup(spark, table, view, keyed, parts, is_global, spec, where)
    else:
        stored, groups = _simple_lookup(spark, view, parts, spec)
        cached, stats = [], _known({"file_groups": groups, "keys_read": groups})
    cond = [keyed[KEY] == stored[LOOKUP_KEY]] + ([] if is_global else [keyed[PART] == stored[LOC_P]])
    return Tagged(keyed.join(stored, on=cond, how="left").drop(LOOKUP_KEY), cached, stats)


def _record_index_tag(spark, view: FileSystemView, keyed: DataFrame, index: RecordIndex, spec: LookupSpec,
                      where: str) -> Tagged:
    """RECORD_INDEX: the keys grouped by the index file group they hash to, each group's
    entries for them read in a task (only the base HFile blocks that may hold them), joined to
    the key frame; the stored ordering value read, where a rule needs it (a delete, a key in
    another partition), from those rows' file groups only."""
    groups = {(g.partition, g.file_id) for g in view.file_groups()}
    slices = tuple(_index_slice(index, k) for k in range(index.num_groups))
    lookup = IndexLookupSpec(spec.ctx, slices, frozenset(index.valid), frozenset(groups), spec.out_schema)
    partitioned = index.layout.is_partitioned  # (a key looked up in its partition's groups)
    inputs = [KEY, PART] if partitioned else [KEY]
    hashed = keyed.select(*inputs).withColumn(
        RLI_GROUP, scalar_arrow_udf(partial(index_groups, index.layout), LongType())(*inputs))
    if partitioned:
        hashed = hashed.filter(F.col(RLI_GROUP) >= 0)
    found = hashed.groupBy(RLI_GROUP).applyInArrow(index_looker(lookup), from_arrow_schema(spec.out_schema))
    cond = [keyed[KEY] == found[LOOKUP_KEY]] + ([keyed[PART] == found[LOC_P]] if partitioned else [])
    rows = keyed.join(found, on=cond, how="left").drop(LOOKUP_KEY)
    stats = {"file_groups": len(groups), "index_file_groups": index.num_groups}
    if not spec.ordering_fields:
        return Tagged(rows, [], _known(stats))
    rows = rows.persist()
    need = stage(lambda: rows.filter(F.col(LOC_F).isNotNull() & (F.col(DEL) | (F.col(PART) != F.col(LOC_P))))
                 .select(LOC_P, LOC_F).distinct().collect(), where, "tagging")
    if not need:
        return Tagged(rows, [rows], _known(stats))
    stored, _ = _simple_lookup(spark, view, None, spec, only={(r[0], r[1]) for r in need})
    stored = stored.select(F.col(LOOKUP_KEY), F.col(LOC_F).alias("_al_stored_in"), F.col(STORED).alias("_al_stored"))
    cond = [rows[KEY] == stored[LOOKUP_KEY], rows[LOC_F] == stored["_al_stored_in"]]
    tagged = rows.join(stored, on=cond, how="left").withColumn(STORED, F.col("_al_stored").cast(
        rows.schema[STORED].dataType)).drop(LOOKUP_KEY, "_al_stored_in", "_al_stored")
    stats["stored_read"] = len(need)
    return Tagged(tagged, [rows], _known(stats))


def _known(stats: dict[str, int]) -> Callable[[], dict[str, int]]:
    return lambda: stats


def _index_slice(index: RecordIndex, k: int) -> tuple[str | None, tuple[str, ...]]:
    base, logs = index.view.read_slice(index.groups[k])
    return base.path if base else None, tuple(lf.path for lf in logs)


def _lookup_spec(table, view: FileSystemView, incoming: pa.Schema) -> LookupSpec:
    """The lookup of `table`'s stored keys; the stored ordering value of several fields is the
    key of the tuple with each field promoted to its `incoming` type first (as the incoming
    rows' key was made: an int field a write widens to double is compared as a double)."""
    cfg = table.config
    schema = Reader(table, timeline=view.timeline).full_schema
    fields = tuple(cfg.ordering_fields) if cfg.payload_class == DEFAULT_PAYLOAD else ()
    if not fields or any(f not in schema.names for f in fields):
        fields, otype, types = (), None, ()
    else:
        otype = schema.field(fields[0]).type if len(fields) == 1 else pa.binary()
        types = tuple(incoming.field(f).type if f in incoming.names else schema.field(f).type for f in fields)
    out = exact_arrow_schema(pa.schema([pa.field(LOOKUP_KEY, pa.string()), pa.field(LOC_P, pa.string()),
                           pa.field(LOC_F, pa.string()), pa.field(STORED, otype or pa.string())]))
    return LookupSpec(table.context(), schema, fields, Visibility.of(view), out, types)


def _simple_lookup(spark, view: FileSystemView, parts: list[str] | None, spec: LookupSpec,
                   only: set[tuple[str, str]] | None = None) -> tuple[DataFrame, int]:
    """Every group's live keys (of `parts`, or the groups `only` names), read in a task per
    group; and the number of groups."""
    tasks = []
    for g in view.file_groups():
        if parts is not None and g.partition not in parts or only is not None and (g.partition, g.file_id) not in only:
            continue
        base, logs = view.read_slice(g)
        if base is None and not logs:
            continue
        tasks.append((g.partition, g.file_id, base.path if base else None, [lf.path for lf in logs]))
    task_df = spark.createDataFrame([(pickle.dumps(t),) for t in tasks], "task binary")
    if tasks:
        task_df = task_df.repartition(min(len(tasks), spark.sparkContext.defaultParallelism * 4))
    return task_df.mapInArrow(partial(lookup_batches, spec), from_arrow_schema(spec.out_schema)), len(tasks)


def _bloom_lookup(spark, table, view: FileSystemView, keyed: DataFrame, parts: list[str] | None, is_global: bool,
                  spec: LookupSpec, where: str) -> tuple[DataFrame, list[DataFrame], Callable[[], dict[str, int]]]:
    """Confirmed locations of the incoming keys: candidates by key range, then bloom filter,
    then the candidate group's keys; and how many groups held keys in their key range and
    how many had their keys read, counted by the checking tasks (accumulators: known once
    the rows were first used; no action of their own)."""
    storage = table.storage
    wanted = None if parts is None else set(parts)
    bases = view.latest_base_files(None if wanted is None else [p for p in view.partitions if p in wanted])
    with ThreadPoolExecutor(8) as pool:  # footers: metadata, read here once (cached per process)
        footers = list(pool.map(lambda b: read_footer(storage, b.path), bases))
    files: dict[str, list[tuple[str | None, str | None, int]]] = {}
    groups: dict[int, tuple] = {}
    for cid, (base, footer) in enumerate(zip(bases, footers, strict=True)):
        lo, hi = footer.get(MIN_KEY), footer.get(MAX_KEY)
        if lo is None or hi is None or max(lo + hi, default="") >= "\ue000":
            lo = hi = None
        files.setdefault("" if is_global else base.partition, []).append((lo, hi, cid))
        slice_base, logs = view.read_slice(view.groups[base.partition][base.file_id])
        read_from = (slice_base.path if slice_base else None) if logs else base.path
        groups[cid] = (base.partition, base.file_id, base.path, read_from, [lf.path for lf in logs])
    range_schema = exact_arrow_schema(pa.schema([pa.field(KEY, pa.string()), pa.field(CANDIDATE, pa.int64())]))
    ranges = RangeSpec({p: tuple(v) for p, v in files.items()}, is_global, range_schema)
    candidates = keyed.select(KEY, PART).mapInArrow(partial(range_batches, ranges), from_arrow_schema(range_schema))
    in_key_range, keys_read = spark.sparkContext.accumulator(0), spark.sparkContext.accumulator(0)
    check = bloom_checker(BloomSpec(spec, groups), (in_key_range, keys_read))
    found = candidates.groupBy(CANDIDATE).applyInArrow(check, from_arrow_schema(spec.out_schema)).persist()

    def stats() -> dict[str, int]:
        counted = {"file_groups": len(bases), "in_key_range": in_key_range.value, "keys_read": keys_read.value}
        log.info("%s: bloom index: %d file groups, %d hold incoming keys in their key range, %d read after their "
                 "bloom filter", where, counted["file_groups"], counted["in_key_range"], counted["keys_read"])
        return counted

    return found, [found], stats


# -- executor functions (module level: they travel as values) -----------------------------------
def range_batches(spec: RangeSpec, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """(key, candidate) for every base file whose key range may hold the key (its partition's
    files, or every file under a global index)."""
    for batch in batches:
        keys = batch.column(KEY)
        unsafe = pc.fill_null(pc.match_substring_regex(keys, _JAVA_ORDER_UNSAFE), False)
        if spec.is_global:
            by_part = {"": None}
        else:
            encoded = batch.column(PART).dictionary_encode()
            by_part = {name: pc.equal(encoded.indices, i) for i, name in enumerate(encoded.dictionary.to_pylist())}
        out_keys, out_ids = [], []
        for partition, rows in by_part.items():
            for lo, hi, cid in spec.files.get(partition, ()):
                mask = rows
                if lo is not None:
                    inside = pc.or_(pc.and_(pc.greater_equal(keys, lo), pc.less_equal(keys, hi)), unsafe)
                    mask = inside if mask is None else pc.and_(mask, inside)
                hit = keys if mask is None else keys.filter(mask)
                if len(hit):
                    out_keys.append(hit)
                    out_ids.append(pa.repeat(pa.scalar(cid, pa.int64()), len(hit)))
        if out_keys:
            out = pa.table([pa.concat_arrays(out_keys), pa.concat_arrays(out_ids)], names=spec.out_schema.names)
            yield from out.cast(spec.out_schema).to_batches()


def bloom_checker(spec: BloomSpec, counters: tuple[Accumulator, Accumulator]):
    """`confirm_candidates` bound to `spec`, typed as pyspark's applyInArrow wants; each group
    checked adds 1 to the first of `counters`, and 1 to the second when its keys were read."""
    in_key_range, keys_read = counters

    def check(rows: pa.Table) -> pa.Table:
        located, read = confirm_candidates(spec, rows)
        in_key_range.add(1)
        keys_read.add(int(read))
        return located

    return check


def confirm_candidates(spec: BloomSpec, rows: pa.Table) -> tuple[pa.Table, bool]:
    """One candidate group: its incoming keys tested against its bloom filter; when the filter
    claims some, the group's live keys read and the claimed keys confirmed. Returns the
    confirmed locations and whether the keys were read."""
    lookup = spec.lookup
    partition, file_id, base_path, read_from, log_paths = spec.groups[rows.column(CANDIDATE)[0].as_py()]
    keys = pc.unique(rows.column(KEY).combine_chunks())
    bloom = file_bloom(lookup.ctx.storage, base_path)
    if bloom is not None and len(keys):
        keys = keys.filter(pa.array(bloom.might_contain(keys)))
    located = lookup.out_schema.empty_table()
    if len(keys):
        live = _live_records(lookup, partition, file_id, read_from, log_paths)
        live = live.filter(pc.is_in(live.column(KEY), value_set=keys))
        located = _locations(lookup, partition, file_id, live, live.num_rows)
    return located.cast(lookup.out_schema), bool(len(keys))


def index_looker(spec: IndexLookupSpec):
    """`index_lookup` bound to `spec`, typed as pyspark's applyInArrow wants."""

    def look(rows: pa.Table) -> pa.Table:
        return index_lookup(spec, rows)

    return look


def index_lookup(spec: IndexLookupSpec, rows: pa.Table) -> pa.Table:
    """One index file group: the entries of its incoming keys (LOOKUP_KEY, LOC_P, LOC_F; null
    STORED), read from only the base HFile blocks that may hold them."""
    k = rows.column(RLI_GROUP)[0].as_py()
    keys = pc.unique(rows.column(KEY).combine_chunks()).drop_null().cast(pa.binary())
    base, logs = spec.slices[k]
    found = decode_locations(*slice_cells(spec.ctx.storage, base, list(logs), spec.valid,
                                          keys.take(pc.array_sort_indices(keys))))
    groups = pa.table({"partition": [p for p, _ in spec.groups], "file_id": [f for _, f in spec.groups]})
    found = found.join(groups, ["partition", "file_id"], join_type="inner")  # (another: stale, the key is new)
    out = pa.table([found.column("key"), found.column("partition"), found.column("file_id"),
                    pa.nulls(found.num_rows)], names=spec.out_schema.names)
    return out.cast(spec.out_schema)


def lookup_batches(spec: LookupSpec, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """For each file-group task: the group's live keys (base records merged with its visible
    log blocks), with the stored ordering value."""
    for batch in batches:
        for raw in batch.column(0).to_pylist():
            partition, file_id, base_path, log_paths = pickle.loads(raw)
            live = _live_records(spec, partition, file_id, base_path, log_paths)
            yield from _locations(spec, partition, file_id, live, live.num_rows).to_batches()


def _locations(spec: LookupSpec, partition: str, file_id: str, live: pa.Table, n: int) -> pa.Table:
    fields = spec.ordering_fields
    if len(fields) > 1:
        stored = ordering_key(live, fields, spec.ordering_types)
    else:  # (one field: its stored type; Spark compares it with the incoming one)
        stored = live.column(fields[0]) if fields else pa.nulls(n, pa.string())
    names = spec.out_schema.names
    out = pa.table([live.column(KEY), pa.repeat(pa.scalar(partition, pa.string()), n),
                    pa.repeat(pa.scalar(file_id, pa.string()), n), stored], names=names)
    if n and pc.count_distinct(out.column(0)).as_py() < n:
        # a key stored twice in the group (an insert may write that): one location, or the join
        # would double the incoming row; the smallest stored value (null the smallest), so that
        # no stored copy misses its update (the group's writer compares each copy)
        once = out.group_by(names[0], use_threads=False).aggregate(
            [(names[1], "first"), (names[2], "first"), (names[3], "min", pc.ScalarAggregateOptions(skip_nulls=False))])
        out = pa.table([once.column(names[0]), once.column(f"{names[1]}_first"), once.column(f"{names[2]}_first"),
                        once.column(f"{names[3]}_min")], names=names)
    return out.cast(spec.out_schema)


def _live_records(spec: LookupSpec, partition: str, file_id: str, base_path: str | None,
                  log_paths: list[str]) -> pa.Table:
    """The group's live keys (derived from the key fields on tables without meta fields) and
    stored ordering values, read by the core's file-group reader as the local index reads them."""
    task = SliceRead(partition, file_id, base_path, None, tuple(log_paths), 0, spec.visible, SliceQuery())
    columns = [KEY, *spec.ordering_fields]
    return read_file_group(spec.ctx, task, spec.schema, columns, derived_keys=True).rows
