"""The write pipeline over an engine's frames: one commit of one operation, rows never on the
driver. The stages and their rules are here; an engine supplies `FrameOps` (frame operations:
build a column with a core function, filter, keep one row per key, join, count, shuffle).

input (`keying`: schema checks, the key frame; bad values fail in the first count, before the
timeline) -> combine (`combine_order`) -> begin (the transaction: lock, repair, requested
instant, heartbeat) -> tag (the index lookup) -> route (`routing`: moves, stale and unknown
deletes; the plan of file groups from counts; each row's target) -> inflight -> execute (each
group written by `execute_group` in a task) -> commit (conflict checks, the completed instant).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial
from typing import Any, Protocol

import pyarrow as pa

from ..config import MetadataOptions, WriteOptions
from ..errors import InstantNotFoundError, LakeError, RecordKeyError, SchemaError, WriteConflictError
from ..index import check_index_type
from ..index import is_global as global_index
from ..index.record_index import RecordIndex
from ..index.record_index_update import (
    RLI_GROUP,
    index_groups,
    replaced_rows,
    row_schema,
    update_for,
    write_index_group,
)
from ..index.secondary_index import (
    CHANGES,
    SLOT,
    ChangeSpec,
    IndexWrite,
    diff_tasks,
    group_changes,
    supported_type,
    write_changes,
)
from ..merge import KEY
from ..metadata_writer import (
    MetadataWriter,
    maintained_record_index,
    maintained_secondary_definitions,
    maintained_secondary_indexes,
)
from ..model import WriteStat
from ..ordering import ordering_column
from ..schema import arrow_schema_with_meta, from_avro
from ..slice_reader import SliceQuery, SliceRead, Visibility
from ..timeline.clock import instant_epoch_ms
from ..timeline.tokens import check_extra_metadata
from ..txn.conflicts import KeyClash
from ..txn.heartbeat import beating
from ..view import FileSystemView
from ..vocabulary import LOOKUP_OPERATIONS, OPERATIONS
from .arrow_frames import ArrowFrames, stored_key_clash
from .client import TOKEN_KEY, WriteClient, WriteResult
from .execute import DEL, LOC_F, PART, SEQ, TARGET, WORK, ExecSpec, execute_group
from .keying import InputPlan, plan_input
from .partitions import check_batch_nesting
from .plan import Sizing
from .prepare import combine_order
from .routing import (
    BUCKET,
    LOC_P,
    SPREAD,
    BucketSpec,
    Columns,
    Routing,
    bucket_targets,
    located_rule,
    plan_bucket_groups,
    plan_key_groups,
    route_targets,
    row_buckets,
)

log = logging.getLogger(__name__)


class FrameOps(Protocol):
    """The frame operations an engine supplies to the pipeline (no write rule: the rules come
    as arguments, core functions and expressions). `Frame` is the engine's frame type."""

    columns: Columns
    trusts_filters: bool  # whether `tag` honours `trust_filters`
    eager: bool  # frames are computed at once, in this process (the input stage runs under the lock)

    def source(self, data: Any) -> Any:
        """The input as this engine's frame (an error names the table when it cannot be read)."""

    def schema(self, data: Any) -> pa.Schema:
        """The Arrow schema of a frame."""

    def key_frame(self, data: Any, plan: InputPlan) -> tuple[Any, tuple[str, ...]]:
        """The input with its data columns (renamed, conformed to the table schema: missing
        ones null) and the work columns KEY, PART, DEL, SEQ computed by `keying`'s functions;
        and the columns giving a row's source position, most significant first (for combine)."""

    def cluster(self, frame: Any, by: list[str]) -> Any:
        """`frame` with its rows placed by the values of `by` (a distributed engine hashes them
        into partitions and orders them there, so that the joins and windows by `by` that
        follow move and sort no rows; a local engine returns `frame`)."""

    def cache(self, frame: Any) -> Any: ...

    def release(self, frame: Any) -> None: ...

    def partition_counts(self, frame: Any, *, distinct: bool = True) -> list[tuple[str, int, int | None]]:
        """(PART, rows, distinct KEYs: None unless `distinct`) per partition: the first action
        (bad values fail here)."""

    def keep_first(self, frame: Any, by: list[str], order: list[str]) -> Any:
        """One row per value of `by`: the first by `order` (every column descending, nulls last)."""

    def tag(self, table: Any, view: FileSystemView, frame: Any, parts: list[str] | None, is_global: bool,
            index_type: str, where: str, *, trust_filters: bool = False,
            ) -> tuple[Any, list[Any], Callable[[], dict[str, int]]]:
        """`frame` with LOC_P, LOC_F (and STORED) of each key the index finds (nulls for new
        keys); the frames to release after the write; how the index found them, asked once
        the write is done (an engine may count it in the tasks that tag the rows). With
        `trust_filters` a key a bloom filter claims may be taken as found without reading the
        file's keys (the Spark engine confirms always)."""

    def routing_columns(self, frame: Any, columns: list[str]) -> Any:
        """The rows of `frame` for tagging and routing: only `columns` (the key, the work and
        the ordering columns) where moving whole rows costs (their routes are joined back by
        `with_routes`), else `frame` itself."""

    def with_routes(self, frame: Any, routes: Any, by: list[str]) -> Any:
        """The rows of `frame` with the routes of `routing_columns(frame)`'s rows: one row per
        route (a moved key: two; a row the routing dropped: none), its columns from `routes`
        where both have them, joined by `by` (the key a combined batch holds once: a row is
        joined by its own key, never by a position a recomputed input could change)."""

    def untagged(self, frame: Any) -> Any:
        """`frame` with null LOC_P, LOC_F, STORED columns."""

    def filter(self, frame: Any, predicate: Any) -> Any: ...

    def move(self, frame: Any, moved: Any, ordering: str | None) -> Any:
        """Rows where `moved` holds become two: an insert at PART (LOC_P, LOC_F null) and a
        delete at LOC_P (DEL true, the `ordering` column null)."""

    def insert_spread(self, frame: Any) -> Any:
        """`frame` with SPREAD: an insert's spread bucket, null for located rows: the partition of
        the engine's it lies in once `frame` is cached, whose rows `with_partition_udf` sees at
        once. Slots follow (partition, spread bucket, SEQ): `plan_key_groups`."""

    def location_counts(self, frame: Any) -> list[tuple]:
        """(LOC_P, LOC_F, PART of an insert, SPREAD, rows) per distinct value."""

    def bucket_counts(self, frame: Any) -> list[tuple[str, int, int, int]]:
        """(PART, BUCKET, rows, rows that are not deletes) per distinct value."""

    def with_udf(self, frame: Any, name: str, fn: Any, inputs: list[str], arrow_type: pa.DataType) -> Any:
        """`frame` with the column `name` computed by `fn` (Arrow arrays of `inputs` -> an array)."""

    def with_partition_udf(self, frame: Any, name: str, fn: Any, inputs: list[str], arrow_type: pa.DataType) -> Any:
        """`with_udf` with `fn` given all the rows of one of the engine's partitions of the cached
        `frame` at once (the rows of each of its spread buckets, `insert_spread`)."""

    def project(self, frame: Any, columns: list[str]) -> Any:
        """`frame` with only `columns`."""

    def first_rows(self, frame: Any, columns: list[str], n: int) -> list[tuple]:
        """At most `n` rows of `frame` (any `n`: for an error to name), as tuples of `columns`."""

    def union(self, frame: Any, other: Any) -> Any:
        """`frame` with the rows of `other` (the same columns) after its own."""

    def write_groups(self, fn: Any, frame: Any, key: str, groups: int) -> list[Any]:
        """`fn` applied to each group's rows (`key`: the group id), one task per group."""

    def task_frame(self, fn: Any, items: list[Any], schema: pa.Schema) -> Any:
        """The frame of `fn(item)`'s rows (Arrow tables of `schema`) for each small, picklable
        `item`, each computed in a task."""

    def key_clash(self, ctx: Any, new_keys: Any, is_global: bool, where: str) -> KeyClash:
        """The commit's check that no key of `new_keys` (PART, KEY) is in a concurrent commit's files."""


def write_arrow(table, data: Any, operation: str = "upsert", extra_metadata: dict[str, str] | None = None,
                ) -> WriteResult:
    """Write Arrow data (a table, batches, a reader, anything with an Arrow stream) to `table`
    as one commit: the pipeline on `ArrowFrames`, file groups written on the table's engine."""
    return write_frame(table, ArrowFrames(table.engine, f"table {table.storage.uri}"), data, operation,
                       extra_metadata)


def write_frame(table, ops: FrameOps, data: Any, operation: str = "upsert",
                extra_metadata: dict[str, str] | None = None) -> WriteResult:
    """Write the engine frame `data` to `table` as one commit of `operation`."""
    where = f"table {table.storage.uri}"
    cfg = table.config
    operation = OPERATIONS.parse(operation, where)
    cfg.check_writable(table.storage.uri)
    table.check_write_support()  # key generator, payload and merge options we implement
    data = ops.source(data)
    index_type = check_index_type(table.option(WriteOptions.INDEX_TYPE), where)
    is_global = global_index(index_type)
    client = WriteClient(table, table.engine)
    extra = check_extra_metadata(where, extra_metadata)
    inputs: list[_Input] = []
    try:
        if ops.eager:  # under the lock, against the timeline `begin` lists: one listing less
            def check(timeline) -> list[str]:
                inputs.append(_input(table, ops, data, operation, is_global, index_type, table.schema_avro(timeline),
                                     where))
                return inputs[0].created
        else:  # before the lock (a first pass over the rows), then found unchanged under it
            inputs.append(_input(table, ops, data, operation, is_global, index_type, table.schema_avro(), where))

            def check(timeline) -> list[str]:
                if table.schema_avro(timeline) != inputs[0].plan.table_avro:
                    raise WriteConflictError(f"{where}: the table schema changed while this write was prepared "
                                             "(a concurrent write evolved it); nothing was written, retry it")
                return inputs[0].created

        requested, heartbeat, timeline = client.begin(client.action(operation), extra.get(TOKEN_KEY), check)
        if heartbeat is None:  # a retry whose run token is already committed
            return client.stored_result(timeline, requested, operation)
        given = inputs[0]
        # any other failure leaves the instant pending, its heartbeat stopped: the next writer's
        # repair rolls it back (`hoodie.cleaner.policy.failed.writes`), as after a crash
        with beating(heartbeat):
            try:
                return _run(table, ops, client, given.keyed, given.parts, given.plan.avro, operation, is_global,
                            index_type, requested, timeline, extra, where)
            except RecordKeyError:  # (refused before any file was written: its instant withdrawn)
                _abandon(table, requested.time)
                raise
            except FileNotFoundError as e:  # a file this write read was cleaned, compacted or rolled back
                _abandon(table, requested.time)
                raise WriteConflictError(f"{where}: write {requested.time} read a file that another writer or "
                                         f"service removed meanwhile ({e.filename or e}); it was rolled back, "
                                         "retry it") from e
            except InstantNotFoundError as e:  # an instant its timeline listed (a pending compaction's
                # plan) was completed and archived, or rolled back, before the write read it
                _abandon(table, requested.time)
                raise WriteConflictError(f"{where}: write {requested.time} found an instant it had listed gone "
                                         f"meanwhile ({e}); it was rolled back, retry it") from e
    finally:
        for given in inputs:
            given.release(ops)


@dataclass
class _Input:
    """The input stage's outcome: the checked plan, the key frame (cached), the combined rows,
    the partitions written and those the write creates."""

    plan: InputPlan
    frame: Any
    keyed: Any
    parts: list[str]
    created: list[str]

    def release(self, ops: FrameOps) -> None:
        if self.keyed is not self.frame:
            ops.release(self.keyed)
        ops.release(self.frame)


def _check_indexed_types(table, avro: dict | None, where: str) -> None:
    """A write may not turn a column a secondary index keeps into a type the index cannot hold
    (an integer widened to a floating type): refused before the timeline is touched, rather
    than the index going stale; widening within the integers is kept."""
    if table.config.version < 8 or not avro:
        return
    schema = from_avro(avro)
    for defn in maintained_secondary_definitions(table.storage, table.config.props):
        if defn.column in schema.names and not supported_type(schema.field(defn.column).type):
            raise SchemaError(f"{where}: this write makes column {defn.column!r} {schema.field(defn.column).type}, "
                              f"which secondary index {defn.partition} cannot keep (strings, integers, booleans, "
                              "dates); drop the index first (Table.drop_index), then write; nothing was written")


def _input(table, ops: FrameOps, data: Any, operation: str, is_global: bool, index_type: str,
           table_avro: dict | None, where: str) -> _Input:
    """Check the input against the table schema `table_avro`, build its key frame and combine
    it; one pass over the rows, in which bad values fail (before the timeline is touched).
    Rows routed by key are placed by it at once: the batch check, the combine, the tagging
    and the routes' join then find them in place."""
    cfg = table.config
    plan = plan_input(table, ops.schema(data), operation, is_global, table_avro, where)
    _check_indexed_types(table, plan.avro, where)
    frame, positions = ops.key_frame(data, plan)
    key = _routing_key(table, operation, is_global)  # (None: the batch is not combined)
    frame = ops.cache(ops.cluster(frame, key) if key and index_type != "BUCKET" else frame)
    try:
        # the partitions written, and whether a key repeats within one: asked only where it
        # decides (a global index combines across partitions always; without combine, never)
        combine = key is not None
        counts = ops.partition_counts(frame, distinct=combine and not is_global)
        parts = sorted(p for p, _, _ in counts)
        created = [] if operation == "delete" else parts
        check_batch_nesting(table.storage, created)  # (against the table's: in `begin`)
        keyed = frame
        # (the input's other position columns, e.g. the source file, order the combine only: once
        # it is done they are dropped, SEQ stays; the rows move without them)
        names = ops.schema(frame).names
        after_combine = [c for c in names if c not in positions or c == SEQ]
        if combine and (is_global or any(n != distinct for _, n, distinct in counts)):
            ordering = ordering_column(cfg.ordering_fields) if operation != "delete" else None
            order = [c for c, _ in combine_order(ordering, positions)]
            keyed = ops.cache(ops.project(ops.keep_first(frame, key, order), after_combine))
        elif len(after_combine) < len(names):
            keyed = ops.project(frame, after_combine)
    except BaseException:
        ops.release(frame)
        raise
    return _Input(plan, frame, keyed, parts, created)


def _run(table, ops: FrameOps, client: WriteClient, keyed, parts: list[str], avro: dict, operation: str,
         is_global: bool, index_type: str, requested, timeline, extra: dict[str, str], where: str) -> WriteResult:
    seen = client.seen(timeline)
    wide = is_global or operation == "insert_overwrite_table"
    view = FileSystemView(table.storage, timeline, partition_files=None if wide else client.partition_files(parts))
    replaced = client.replaced_groups(view, operation, parts)
    index_stats: list[Callable[[], dict[str, int]]] = []
    routing = None
    record_index = maintained_record_index(table.storage, table.config.props, timeline)
    try:
        if index_type == "BUCKET":
            routing = _route_buckets(ops, client, keyed, view, requested.time, replaced is not None)
        else:
            routing = _route_keys(ops, table, client, keyed, view, operation, parts, is_global, index_type,
                                  timeline, replaced, index_stats, where, exact=record_index is not None,
                                  unique_keys=record_index is not None and not record_index.layout.is_partitioned)
        result = _execute(ops, table, client, routing, view, avro, operation, is_global, index_type, requested,
                          timeline, seen, extra, replaced, where, record_index)
    finally:
        for frame in routing.cached if routing else []:
            ops.release(frame)
    result.index_stats = {key: value for stats in index_stats for key, value in stats().items()}
    return result


def _route_keys(ops: FrameOps, table, client: WriteClient, keyed, view: FileSystemView, operation: str,
                parts: list[str], is_global: bool, index_type: str, timeline, replaced,
                index_stats: list[Callable[[], dict[str, int]]], where: str, *, exact: bool = False,
                unique_keys: bool = False) -> Routing:
    """Key-lookup indexes (and no index): located rows to their group, inserts into small groups
    and new ones, in slot order. `exact`: every key's location confirmed (the record index
    maintained learns from the routing which keys are new); `unique_keys`: the table's keys are
    unique table-wide (its global record index holds one location per key)."""
    cfg = table.config
    cached: list = []
    trust = False
    ordering = ordering_column(cfg.ordering_fields) if operation != "delete" else None
    # a combined batch holds each key once: its keys are routed alone (what the rules and the
    # routing read), the payload joined back to the routes by key
    by = _routing_key(table, operation, is_global)
    records = keyed
    if by:
        reads = {*WORK, *cfg.ordering_fields, ordering}
        keyed = ops.routing_columns(keyed, [c for c in ops.schema(keyed).names if c in reads])
    if client.looks_up(operation) and not _nothing_stored(view, parts, is_global):
        # a COW upsert or delete rewrites every file a key is tagged to and sees there which keys it
        # really holds (a key a bloom filter wrongly claims is inserted into it and reported as new)
        trust = ops.trusts_filters and not cfg.is_mor and operation in LOOKUP_OPERATIONS and not exact
        rows, cached, stats = ops.tag(table, view, keyed, None if is_global else parts, is_global, index_type,
                                      where, trust_filters=trust)
        index_stats.append(stats)
        rule = located_rule(ops.columns, table, operation, is_global, index_type)
        rows = ops.filter(rows, rule.keep)
        if rule.moved is not None:
            rows = ops.move(rows, rule.moved, ordering)
    else:  # (no lookup, or nothing it could find: every key is new, a delete of one does nothing)
        if client.looks_up(operation):
            index_stats.append(lambda: {"file_groups": 0})
        rows = ops.filter(ops.untagged(keyed), ~ops.columns.col(DEL))
    rows = ops.cache(ops.insert_spread(rows))
    cached.append(rows)
    sizing = Sizing(table.option(WriteOptions.MAX_FILE_SIZE), table.option(WriteOptions.SMALL_FILE_LIMIT),
                    client.record_size_estimate(timeline))
    plan = plan_key_groups(view, ops.location_counts(rows), sizing, is_mor=cfg.is_mor, overwrite=replaced is not None)
    log.info("%s: write routes rows to %d file groups (%d updated, %d inserted into)", where, len(plan.groups),
             len(plan.route.located), len(plan.groups) - len(plan.route.located))
    routes = ops.with_partition_udf(rows, TARGET, partial(route_targets, plan.route),
                                    [PART, SPREAD, SEQ, LOC_P, LOC_F], pa.int64())
    new_keys = ops.filter(rows, ~ops.columns.valid(ops.columns.col(LOC_F)))
    if unique_keys and not is_global and operation == "upsert":
        _check_keys_stay_unique(ops, table, view, new_keys, where)
    if exact and by:  # (read by the groups' tasks and the record index's; whole rows: `_execute` caches them)
        routes = ops.cache(routes)
        cached.append(routes)
    return Routing(plan, ops.with_routes(records, routes, by) if by else routes, new_keys, cached,
                   inserted_by_stats=client.looks_up(operation) and trust, routes=routes)


def _check_keys_stay_unique(ops: FrameOps, table, view: FileSystemView, new_keys, where: str) -> None:
    """A key that an upsert under a partition-scoped index inserts, and that the table's
    global record index holds in another partition, would live twice: the index (one location
    per key, as Java's) could not hold both. Refused, naming a few such keys; their own lookup in
    the record index, of the keys new to their partition only, against every partition's file
    groups (the write's view lists its own partitions only)."""
    every = FileSystemView(table.storage, view.timeline)
    found, cached, _ = ops.tag(table, every, ops.project(new_keys, [KEY, PART, DEL]), None, True, "RECORD_INDEX",
                               where)
    try:
        clashes = ops.first_rows(ops.filter(found, ops.columns.valid(ops.columns.col(LOC_F))), [KEY, PART, LOC_P], 3)
    finally:
        for frame in cached:
            ops.release(frame)
    if clashes:
        shown = "; ".join(f"{key!r} (written to {part!r}, held in {held!r})" for key, part, held in clashes)
        raise RecordKeyError(f"{where}: this upsert would give keys the table already holds in another partition a "
                             f"second row ({shown}): the table's global record index keeps one location per key. "
                             "Nothing was written. Upsert with hoodie.index.type=RECORD_INDEX (or a GLOBAL_* index) "
                             "to update such a key where it is (hoodie.record.index.update.partition.path=true "
                             "moves it), or keep keys unique per partition with the partitioned record index "
                             "(hoodie.metadata.record.level.index.enable, table version 9)")


def _routing_key(table, operation: str, is_global: bool) -> list[str] | None:
    """The columns a combined batch holds once per value ([PART, KEY]; [KEY] under a global
    index): it is combined, placed and routed by them, its routes joined back to its rows by
    them; None: the batch is not combined."""
    return ([KEY] if is_global else [PART, KEY]) if _combines(table, operation) else None


def _combines(table, operation: str) -> bool:
    """Whether the write combines its batch by key (one row per PART and KEY remains; one per
    KEY under a global index)."""
    return operation in LOOKUP_OPERATIONS or bool(table.option(WriteOptions.COMBINE_BEFORE_INSERT))


def _nothing_stored(view: FileSystemView, parts: list[str], is_global: bool) -> bool:
    """Whether the table has no file group where a lookup of the batch's keys would look (a
    new table; under a partition-scoped index, partitions the batch is the first to write):
    then every key is new, and the lookup, which could find none, is not made."""
    wanted = None if is_global else set(parts)
    return not any(wanted is None or g.partition in wanted for g in view.file_groups())


def _route_buckets(ops: FrameOps, client: WriteClient, keyed, view: FileSystemView, instant: str,
                   overwrite: bool) -> Routing:
    """BUCKET: every row to its bucket's group (the core's bucket function, in tasks)."""
    table = client.table
    spec = BucketSpec(table.option(WriteOptions.BUCKET_NUM), tuple(client.bucket_hash_fields()))
    rows = ops.with_udf(keyed, BUCKET, partial(row_buckets, spec), [KEY], pa.int64())
    counts = ops.bucket_counts(rows)
    plan = plan_bucket_groups(view, counts, instant=instant, is_mor=table.config.is_mor, overwrite=overwrite,
                              log_only_groups=table.config.timeline_layout == 1)
    for p, b, n, live in counts:  # MOR: deletes are checked against a stored group's records
        gid = plan.route.groups.get(f"{p}\0{b}")
        g = plan.groups.get(gid)
        if n > live and g is not None and g.kind == "log" and gid not in plan.route.new:
            plan.groups[gid] = _with_stored(g, client.delete_check_read(view, view.groups[p][g.file_id]))
    log.info("%s: write routes rows to %d bucket file groups (%d new)", client.where, len(plan.groups),
             len(plan.route.new))
    routed = ops.with_udf(rows, TARGET, partial(bucket_targets, plan.route), [PART, BUCKET, DEL], pa.int64())
    routed = ops.filter(routed, ops.columns.col(TARGET) >= ops.columns.lit(0))
    c = ops.columns
    new_keys = ops.filter(routed, c.isin(c.col(TARGET), sorted(plan.route.new)) & ~c.col(DEL))
    return Routing(plan, routed, new_keys, routes=routed)


def _with_stored(plan, stored):
    return replace(plan, stored=stored)


def _execute(ops: FrameOps, table, client: WriteClient, routing: Routing, view: FileSystemView, avro: dict,
             operation: str, is_global: bool, index_type: str, requested, timeline, seen, extra, replaced,
             where, record_index: RecordIndex | None) -> WriteResult:
    """Inflight, every group written in a task, then the commit."""
    cfg = table.config
    instant = requested.time
    plan = routing.plan
    groups = plan.groups
    inflight = client.inflight(timeline, requested, operation, plan.inserts, plan.updates)
    client.write_partition_metadata(instant, {g.partition for g in groups.values()})
    if record_index is not None and routing.routes is routing.routed:  # (read by the groups' tasks and the index's)
        routing.routed = routing.routes = ops.cache(routing.routed)
        routing.cached.append(routing.routed)
    routed = routing.routed
    names = ops.schema(routed).names
    data_columns = tuple(c for c in names if c not in WORK and not c.startswith("_al_"))
    stored = any(g.stored is not None for g in groups.values())
    by_stats = routing.inserted_by_stats and operation == "upsert"
    # (a delete by key: natural order)
    ordering = ordering_column(cfg.ordering_fields) if operation != "delete" else None
    spec = ExecSpec(client.write_context(instant, avro), groups, data_columns, ordering,
                    table.option(WriteOptions.LOG_BLOCK_FORMAT).lower(), new_keys=by_stats,
                    table=table.context() if stored else None,
                    schema=client.reader(view).full_schema if stored else None)
    written = ops.write_groups(partial(execute_group, spec), ops.project(routed, spec.columns(names)), TARGET,
                               max(1, len(groups)))
    stats: list[WriteStat] = [s for s in written if s is not None and s.path is not None]
    lost = [s.lost_deletes for s in written if s is not None and s.lost_deletes is not None]
    spared = pa.chunked_array(lost, pa.string()).to_pylist() if lost else []
    index_written = [] if record_index is None else \
        _update_record_index(ops, table, client, view, record_index, routing, instant, replaced,
                             index_type != "BUCKET" and client.looks_up(operation), spared)
    secondary = maintained_secondary_indexes(table.storage, table.config.props, timeline)
    if secondary:
        index_written += _update_secondary_indexes(ops, table, client, view, secondary, stats, replaced, instant,
                                                   avro)
    touched = client.touched(groups.values(), replaced, bucket=index_type == "BUCKET")
    if operation != "upsert":
        clash = _no_clash
    elif by_stats:  # trusted filters: the keys each group really inserted (a wrongly claimed one too)
        clash = stored_key_clash(table.context(), _inserted_keys(stats), is_global)
    else:
        clash = ops.key_clash(table.context(), routing.new_keys, is_global, where)
    return client.commit(timeline, inflight, seen, operation, stats, extra, avro, touched, clash, replaced,
                         index_written)


def _update_record_index(ops: FrameOps, table, client: WriteClient, view: FileSystemView, index: RecordIndex,
                         routing: Routing, instant: str, replaced: dict[str, list[str]] | None, located: bool,
                         spared: list[str]) -> list[WriteStat]:
    """The record index's log files of this write, one task per index file group its keys
    hash to (an overwrite's also the keys of the groups it replaces); their write stats for the
    MDT deltacommit."""
    plan = routing.plan
    targets = {gid: (g.partition, g.file_id) for gid, g in plan.groups.items()}
    update = update_for(table.context(), index, instant, instant_epoch_ms(instant, table.config.timezone),
                        MetadataWriter(table.storage).schema_text(), targets, target=TARGET, delete=DEL,
                        located=LOC_F if located else None, spared=spared, partition=PART,
                        new_partition_groups=table.option(MetadataOptions.PARTITIONED_RECORD_INDEX_MIN_GROUPS))
    frame = ops.project(routing.routes, update.columns())
    if replaced:  # the replaced groups' keys, read in tasks, as delete rows (those written again stay)
        visible = Visibility.of(view)
        tasks = [SliceRead.of(view, view.groups[p][f], visible, SliceQuery()) for p, ids in sorted(replaced.items())
                 for f in ids if f in view.groups.get(p, {})]
        frame = ops.union(frame, ops.task_frame(partial(replaced_rows, table.context(), client.reader(view).full_schema,
                                                        update), tasks, row_schema(update)))
    frame = ops.with_udf(frame, RLI_GROUP, partial(index_groups, update.layout), update.slot_inputs(), pa.int64())
    if update.layout.is_partitioned:  # (a delete of a key in a partition without groups: nothing to delete)
        frame = ops.filter(frame, ops.columns.col(RLI_GROUP) >= ops.columns.lit(0))
    written = ops.write_groups(partial(write_index_group, update), frame, RLI_GROUP, update.num_groups)
    return [s for s in written if s is not None]


def _update_secondary_indexes(ops: FrameOps, table, client: WriteClient, view: FileSystemView, indexes: list,
                              stats: list[WriteStat], replaced: dict[str, list[str]] | None, instant: str,
                              avro: dict) -> list[WriteStat]:
    """The secondary indexes' log files of this write: each touched file group's cells before
    and after it compared in a task (rows stay there), the changes regrouped by index file
    group, one task per group appending its log file; their write stats. Both sides are read
    with the write's schema (`avro`: a column it widened reads wide before it too)."""
    kept = tuple((index.defn, index.num_groups) for index in indexes)
    spec = ChangeSpec(table.context(), arrow_schema_with_meta(avro), kept)
    changes = ops.task_frame(partial(group_changes, spec), diff_tasks(view, stats, replaced, instant), CHANGES)
    write = IndexWrite(table.context(), instant, MetadataWriter(table.storage).schema_text(), kept)
    written = ops.write_groups(partial(write_changes, write), changes, SLOT, sum(n for _, n in kept))
    return [s for s in written if s is not None]


def _inserted_keys(stats: list[WriteStat]) -> dict[str, pa.Array]:
    inserted: dict[str, list[pa.Array]] = {}
    for stat in stats:
        if stat.new_keys is not None and len(stat.new_keys):
            inserted.setdefault(stat.partition, []).append(stat.new_keys)
    return {p: pa.concat_arrays(k) for p, k in inserted.items()}


def _no_clash(files: dict[str, list[str]]) -> None:
    return None


def _abandon(table, instant: str) -> None:
    """Roll back this write's own pending instant after a failure (nothing becomes visible)."""
    try:
        table.transaction().abort(instant)
    except LakeError:
        log.exception("table %s: write %s failed and could not be rolled back now; the next writer will",
                      table.storage.uri, instant)

