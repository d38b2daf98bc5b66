"""Reads to Arrow: snapshot (base + logs merged), read-optimized, time travel (`as_of`) and
incremental, with column projection, filters and partition pruning. Replaced file groups,
uncommitted files and blocks of uncommitted or rolled-back instants are never read.

A read is planned on the driver from metadata only (`Reader.plan_snapshot`,
`Reader.plan_incremental` -> `ReadPlan`: one `SliceRead` task per file group) and each task is
read by `read_slice`, the one file-group reader, wherever it runs (threads, Spark executors)."""

from __future__ import annotations

import bisect
import itertools
import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property, partial
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from .config import DEFAULT_PAYLOAD, unsupported_merge
from .engine import Engine
from .errors import CorruptLogError, InvalidOptionError, LakeError, UnsupportedFeatureError
from .formats.log import CommandBlock, CorruptBlock, DataBlock, DeleteBlock, read_log_file
from .formats.parquet import read_base_file
from .keys import parse_partition_path
from .merge import KEY, MergeSpec, merge_slice, record_keys
from .model import FileGroup, LogFile
from .schema import META_FIELDS, META_SCHEMA, conform, from_avro
from .timeline.active import ActiveTimeline
from .timeline.archived import archive_files
from .timeline.clock import as_of_instant
from .timeline.instant import SAVEPOINT, check_instant_time
from .view import FileSystemView

log = logging.getLogger(__name__)
QUERY_TYPES = ("snapshot", "read_optimized")


@dataclass(frozen=True)
class Visibility:
    """Which instants a read sees (the view's rule, as a small picklable value): the completed
    commits up to the bound, and anything before the first write on the active timeline
    (archived, hence committed) that is not after the bound."""

    completed: tuple[str, ...]  # sorted
    bound: str | None = None
    first_write: str | None = None

    @staticmethod
    def of(view: FileSystemView) -> Visibility:
        first = view.timeline.writes().first
        return Visibility(tuple(sorted(view.completed)), view.as_of, first.time if first else None)

    def __call__(self, instant: str) -> bool:
        i = bisect.bisect_left(self.completed, instant)
        if i < len(self.completed) and self.completed[i] == instant:
            return True
        if self.bound is not None and instant > self.bound:
            return False
        return self.first_write is not None and instant < self.first_write


@dataclass(frozen=True)
class SliceQuery:
    """What every slice task of one read returns: `columns` (None: all) in the table schema,
    rows passing `filters` (pyarrow DNF or an expression), from the base file only when
    `read_optimized`. With `window` (start, end] only rows committed in it: by
    `_hoodie_commit_time`, or (`window_by_file`, tables without meta fields, as hudi-rs does)
    by the instant of the base file or log block a row is read from."""

    columns: tuple[str, ...] | None = None
    read_columns: tuple[str, ...] | None = None  # columns + filter columns (+ commit time)
    filters: Any = None
    read_optimized: bool = False
    window: tuple[str, str] | None = None
    window_by_file: bool = False

    @property
    def expression(self) -> pc.Expression | None:
        return _expression(self.filters)


@dataclass(frozen=True)
class SliceRead:
    """One file group's read task: the newest visible base file (path relative to the table)
    and the log files after it, with the visibility facts and the query. Small and picklable:
    a Spark executor or a worker thread runs it with `read_slice`."""

    partition: str
    file_id: str
    base: str | None
    base_instant: str | None
    logs: tuple[str, ...]
    size: int  # bytes of the files, for balancing
    visibility: Visibility
    query: SliceQuery

    @staticmethod
    def of(view: FileSystemView, group: FileGroup, visibility: Visibility, query: SliceQuery) -> SliceRead:
        base, logs = view.read_slice(group)
        if query.read_optimized:
            logs = []
        size = (base.size if base is not None else 0) + sum(lf.size for lf in logs)
        return SliceRead(group.partition, group.file_id, base.path if base is not None else None,
                         base.instant if base is not None else None, tuple(lf.path for lf in logs), size,
                         visibility, query)


def read_slice(ctx, task: SliceRead, schema: pa.Schema, *, timeline=None) -> pa.Table:
    """The file-group reader: one slice's rows (base file and visible log blocks merged) in
    `schema` (the table schema with meta fields) restricted to the task's columns.

    `ctx` is a `TableContext` (or an open `Table`: both have storage, config, options and
    keygen). `timeline` (optional, else listed on demand) attributes damaged log blocks
    without an instant header to the commit that wrote them. A base file removed since the
    plan raises `FileNotFoundError`."""
    query = task.query
    out = _select(schema, None if query.columns is None else list(query.columns))
    rows = _merged(ctx, task, schema, timeline)
    if rows is None:
        return out.empty_table()
    if query.window is not None and not query.window_by_file:
        times = rows.column("_hoodie_commit_time")
        rows = rows.filter(pc.and_(pc.greater(times, query.window[0]), pc.less_equal(times, query.window[1])))
    return rows.select(out.names) if query.columns is not None else rows


def _merged(ctx, task: SliceRead, schema: pa.Schema, timeline) -> pa.Table | None:
    """The slice's rows in `query.read_columns`, filtered; None when it has none to give."""
    query = task.query
    storage, cfg = ctx.storage, ctx.config
    read_cols = None if query.read_columns is None else list(query.read_columns)
    expr = query.expression
    blocks = BlockFilter(storage, timeline, task.visibility).blocks(storage, task.logs) if task.logs else []
    window = query.window if query.window_by_file else None
    if window is not None:
        blocks_in = [window[0] < b.instant <= window[1] for b in blocks]
        base_in = task.base is not None and window[0] < task.base_instant <= window[1]
        if not base_in and not any(blocks_in):
            return None
    if not blocks:
        if task.base is None:
            return None
        t = conform(read_base_file(storage, task.base, read_cols), _select(schema, read_cols))
        return t.filter(expr) if expr is not None else t
    problem = unsupported_merge(cfg.props, ctx.options, write=False)
    if problem:
        raise UnsupportedFeatureError(
            f"table {storage.uri}: a merge-on-read snapshot needs record merging with {problem}, which airflow-lake "
            "does not implement (DefaultHoodieRecordPayload and OverwriteWithLatestAvroPayload with the default "
            "merger); refusing rather than merging differently from Apache Hudi; read-optimized reads work")
    spec = MergeSpec(cfg.precombine_field, cfg.payload_class == DEFAULT_PAYLOAD)
    merge_cols = [KEY] + ([spec.ordering_field] if spec.ordering_field else [])
    derive = None
    if not cfg.populate_meta_fields:  # null meta values: keys come from the key fields
        merge_cols += _key_columns(cfg)
        derive = ctx.keygen.record_keys
    cols = None if read_cols is None else [c for c in dict.fromkeys(read_cols + merge_cols) if c in schema.names]
    work = _select(schema, cols)
    t = conform(read_base_file(storage, task.base, cols), work) if task.base is not None else work.empty_table()
    info: dict = {}
    t = merge_slice(t, blocks, work, spec, cols, info, derive_keys=derive)
    if window is not None:
        src = info["source_block"]
        keep = np.where(src >= 0, np.asarray(blocks_in + [False], bool)[src], base_in)
        t = t.filter(pa.array(keep))
    if read_cols is not None:
        t = t.select(read_cols)
    return t.filter(expr) if expr is not None else t


def group_read(view: FileSystemView, group: FileGroup, schema: pa.Schema, columns: list[str] | None,
               cfg) -> SliceRead:
    """The read task of one file group's current records for a writer (`read_group_records`):
    `columns` and, without meta fields, the key fields the keys are derived from."""
    cols = columns
    if not cfg.populate_meta_fields and columns is not None and KEY in columns:
        cols = [c for c in dict.fromkeys(list(columns) + _key_columns(cfg)) if c in schema.names]
    query = SliceQuery(None if cols is None else tuple(cols), None if cols is None else tuple(cols))
    return SliceRead.of(view, group, Visibility.of(view), query)


def read_group_records(ctx, task: SliceRead, schema: pa.Schema, columns: list[str] | None, *,
                       timeline=None) -> pa.Table:
    """A `group_read` task's records in `columns`; without meta fields `_hoodie_record_key`
    holds the keys derived from the key fields, not the stored nulls. `ctx` as `read_slice`'s."""
    t = read_slice(ctx, task, schema, timeline=timeline)
    if not ctx.config.populate_meta_fields and (columns is None or KEY in columns):
        t = t.set_column(t.schema.get_field_index(KEY), KEY, record_keys(t, ctx.keygen.record_keys))
    return t.select(columns) if columns is not None else t


def _key_columns(cfg) -> list[str]:
    return [f.split(".")[0] for f in cfg.record_key_fields]


def removed_while_reading(uri: str, as_of: str | None, error: FileNotFoundError) -> LakeError:
    """The error for a file a read planned on and that is gone (a clean or another writer)."""
    return LakeError(f"table {uri}: {error.filename or error} was removed while reading (a clean or another "
                     f"writer); {'time travel to ' + as_of if as_of else 'retry'} may need files outside the "
                     "retained window")


@dataclass(frozen=True)
class ReadPlan:
    """A read planned on the driver from metadata only (timeline, listings, schema): one task
    per file group, partitions pruned; `schema` is the table schema with meta fields and
    `output` the schema of the rows `read_slice` returns for every task."""

    uri: str
    schema: pa.Schema
    output: pa.Schema
    tasks: tuple[SliceRead, ...]
    as_of: str | None = None

    def run(self, ctx, engine: Engine, *, timeline=None) -> pa.Table:
        """Read every task with `engine` and concatenate (the local read)."""
        try:
            parts = engine.map(partial(_read_task, ctx, self.schema, timeline), self.tasks)
        except FileNotFoundError as e:
            raise removed_while_reading(self.uri, self.as_of, e) from e
        parts = [p for p in parts if p.num_rows]
        return pa.concat_tables(parts) if parts else self.output.empty_table()


def _read_task(ctx, schema: pa.Schema, timeline, task: SliceRead) -> pa.Table:
    """One task of a `ReadPlan` (the engine's task function: a `TableContext` and values)."""
    return read_slice(ctx, task, schema, timeline=timeline)


class Reader:
    """Plans reads of a table (`plan_snapshot`, `plan_incremental`) and runs them locally."""

    def __init__(self, table, engine: Engine | None = None, timeline=None):
        self.table = table
        self.storage = table.storage
        self.engine = engine if engine is not None else table.engine
        self._timeline = timeline

    @property
    def timeline(self):
        """The timeline this Reader works with: listed once, on first use (or given)."""
        if self._timeline is None:
            self._timeline = self.table.timeline
        return self._timeline

    @cached_property
    def full_schema(self) -> pa.Schema:
        """The table schema with the meta fields, resolved once per Reader (from its timeline
        and the latest commit)."""
        avro = self.table.schema_avro(self.timeline)
        schema = from_avro(avro) if avro else pa.schema([])
        return pa.schema(list(META_SCHEMA) + [f for f in schema if f.name not in META_FIELDS])

    def snapshot(self, *, as_of: str | None, columns: list[str] | None, filters,
                 query_type: str = "snapshot") -> pa.Table:
        plan, timeline = self._snapshot_plan(as_of, columns, filters, query_type)
        return plan.run(self.table.context(), self.engine, timeline=timeline)

    def incremental(self, start: str, end: str | None, *, columns=None, filters=None,
                    holes: str = "FAIL") -> pa.Table:
        """Rows whose latest write is a commit in (start, end]."""
        plan, timeline = self._incremental_plan(start, end, columns, filters, holes)
        return plan.run(self.table.context(), self.engine, timeline=timeline)

    def plan_snapshot(self, *, as_of: str | None = None, columns: list[str] | None = None, filters=None,
                      query_type: str = "snapshot") -> ReadPlan:
        """The tasks of a snapshot, as-of or read-optimized read."""
        return self._snapshot_plan(as_of, columns, filters, query_type)[0]

    def plan_incremental(self, start: str, end: str | None = None, *, columns: list[str] | None = None,
                         filters=None, holes: str = "FAIL") -> ReadPlan:
        """The tasks of an incremental read: rows whose latest write is a commit in (start, end]."""
        return self._incremental_plan(start, end, columns, filters, holes)[0]

    def _snapshot_plan(self, as_of, columns, filters, query_type):
        if query_type not in QUERY_TYPES:
            raise InvalidOptionError(f"table {self.storage.uri}: unknown query_type {query_type!r}; "
                                     f"one of {QUERY_TYPES}")
        timeline = self.timeline
        if as_of is not None:
            as_of = as_of_instant(as_of, self.table.config.timezone, self.storage.uri)
            if not timeline.actions(SAVEPOINT).completed().contains(as_of):  # a savepoint keeps its files
                self._check_retained(timeline, as_of, "time travel to")
            self._warn_before_first_commit(timeline, as_of)
        view = FileSystemView(self.storage, timeline, as_of)
        groups = self._prune(view, view.file_groups(), filters)
        return self._plan(view, groups, columns, filters, query_type == "read_optimized"), timeline

    def _warn_before_first_commit(self, timeline, as_of: str) -> None:
        """Time travel to before the table's first commit reads no rows, as in Hudi: said, not
        silent (a date means its midnight: today's date reads the table before today's commits)."""
        first = timeline.commits().completed().first
        if first is not None and as_of < first.time and not archive_files(
                self.storage, self.table.config.archive_folder):
            log.warning("table %s: as of %s is before the table's first commit %s: the read has no rows",
                        self.storage.uri, as_of, first.time)

    def _incremental_plan(self, start, end, columns, filters, holes):
        check_instant_time(start, self.storage.uri)
        timeline = self.timeline
        self._check_retained(timeline, start, "an incremental read from")
        first = timeline.commits().first
        if first is not None and start < first.time and archive_files(self.storage, self.table.config.archive_folder):
            archived = self.table.archived_timeline.last_time
            if archived is not None and start < archived:
                raise LakeError(f"table {self.storage.uri}: an incremental read from {start} needs commits that "
                                f"were archived (the active timeline starts at {first.time})")
        commits = timeline.commits()
        completed = commits.completed()
        if end is None:
            end = completed.last.time if completed.last else start
        check_instant_time(end, self.storage.uri)
        pending = [i for i in timeline.writes().pending()
                   if start < i.time <= end and i.action != "compaction"]
        if pending:
            policy = holes.upper()
            if policy == "FAIL":
                raise LakeError(f"table {self.storage.uri}: instant {pending[0].time} in ({start}, {end}] is "
                                "still pending; retry later or use holes='BLOCK'")
            if policy == "BLOCK":
                earlier = [i.time for i in completed if i.time < pending[0].time]
                end = min(end, earlier[-1]) if earlier else start
            else:
                raise InvalidOptionError(f"unknown holes resolution policy {holes!r} (FAIL or BLOCK)")
        touched: set[tuple[str, str]] = set()
        for instant in completed.between(start, end):
            touched |= timeline.commit_metadata(instant).file_ids()
        view = FileSystemView(self.storage, timeline, end)
        groups = [g for g in view.file_groups() if (g.partition, g.file_id) in touched]
        groups = self._prune(view, groups, filters)
        # without meta fields there is no per-row commit time: as hudi-rs does, a row's is that
        # of the file or log block it is read from (a compaction's base file: the compaction's)
        by_file = not self.table.config.populate_meta_fields
        return self._plan(view, groups, columns, filters, False, window=(start, end), by_file=by_file), timeline

    def _check_retained(self, timeline, instant: str, what: str) -> None:
        bound = timeline.latest_clean_bound()
        if bound and instant < bound:
            raise LakeError(f"table {self.storage.uri}: {what} {instant} is not possible: the cleaner kept only "
                            f"file versions needed from {bound} on")

    def _plan(self, view: FileSystemView, groups: list[FileGroup], columns: list[str] | None, filters,
              read_optimized: bool, window: tuple[str, str] | None = None, by_file: bool = False) -> ReadPlan:
        schema = self.full_schema
        if columns is not None:
            unknown = [c for c in columns if c not in schema.names]
            if unknown:
                raise InvalidOptionError(f"table {self.storage.uri}: no column {unknown[0]!r}; "
                                         f"columns: {schema.names}")
        _expression(filters)  # a malformed filter fails here, on the driver
        read_cols = None
        if columns is not None:
            extra = sorted(_filter_columns(filters))
            if window is not None and not by_file:
                extra.append("_hoodie_commit_time")
            read_cols = tuple(dict.fromkeys(list(columns) + extra))
        query = SliceQuery(None if columns is None else tuple(columns), read_cols, filters, read_optimized,
                           window, by_file)
        visibility = Visibility.of(view)
        tasks = tuple(SliceRead.of(view, g, visibility, query) for g in groups)
        return ReadPlan(self.storage.uri, schema, _select(schema, columns), tasks, view.as_of)

    # -- one group, for writers ------------------------------------------------------------
    def read_group(self, view: FileSystemView, group: FileGroup, columns: list[str] | None) -> pa.Table:
        """One file group's current records (base and visible logs merged). Without meta fields
        `_hoodie_record_key` holds the keys derived from the key fields (for index lookups and
        ordering checks), not the stored nulls."""
        task = group_read(view, group, self.full_schema, columns, self.table.config)
        return read_group_records(self.table, task, self.full_schema, columns, timeline=view.timeline)

    def _prune(self, view: FileSystemView, groups: list[FileGroup], filters) -> list[FileGroup]:
        """Drop groups whose partition provably cannot match the filters on partition columns.

        Each partition path gives, per field, the values it may stand for (decoded, null or
        "" for the default partition); a partition is kept when any combination of them
        passes, or when a field's value cannot be told from the path. The row filter decides
        the rest."""
        cfg = self.table.config
        fields = list(cfg.partition_fields)
        if not filters or not fields or isinstance(filters, pc.Expression) \
                or not self.table.keygen.partition_values_are_fields:
            return groups
        disjuncts = filters if isinstance(filters[0], list) else [filters]
        parts_only = [[c for c in conj if c[0] in fields] for conj in disjuncts]
        if any(not conj for conj in parts_only):
            return groups
        schema = self.full_schema
        if any(f not in schema.names for f in fields):
            return groups
        try:
            expr = pq.filters_to_expression(parts_only)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, KeyError, ValueError, TypeError):
            return groups
        partitions = sorted({g.partition for g in groups})
        kept: set[str] = set()
        columns: dict[str, list] = {f: [] for f in fields}
        owner: list[int] = []
        for i, p in enumerate(partitions):
            parsed = parse_partition_path(p, fields, cfg.hive_style, cfg.url_encode)
            typed = {f: _typed_candidates(parsed.get(f), schema.field(f).type) for f in fields}
            if any(v is None for v in typed.values()):  # a value we cannot tell: keep
                kept.add(p)
                continue
            for combo in itertools.product(*(typed[f] for f in fields)):
                for f, v in zip(fields, combo, strict=True):
                    columns[f].append(v)
                owner.append(i)
        if owner:
            candidates = pa.table({**{f: pa.array(v, schema.field(f).type) for f, v in columns.items()},
                                   "__i": pa.array(owner, pa.int64())})
            try:
                hits = candidates.filter(expr).column("__i").to_pylist()
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, KeyError, ValueError, TypeError):
                return groups
            kept |= {partitions[i] for i in hits}
        return [g for g in groups if g.partition in kept]


def _typed_candidates(values: list[str | None] | None, arrow_type: pa.DataType) -> list | None:
    """Partition-path candidates as Python values of the column type; None when unknown."""
    if values is None:
        return None
    out = []
    for v in values:
        if v is None:
            out.append(None)
            continue
        try:
            out.append(pa.array([v], pa.string()).cast(arrow_type)[0].as_py())
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, ValueError):
            continue  # not a value of this type (e.g. "" for an int column)
    return out or None


@dataclass(frozen=True)
class Damage:
    """A damaged block in a log file written by a completed instant."""

    path: str  # relative to the table
    offset: int
    instant: str
    reason: str
    payload: bool  # intact framing around content that cannot be decoded

    def describe(self) -> str:
        return f"log file {self.path}: damaged block at byte {self.offset} of completed instant {self.instant} " \
               f"({self.reason})"


class BlockFilter:
    """Which log blocks a query sees: committed (`is_visible`), not rolled back; and which
    damaged blocks matter. A corrupt block counts when its instant (from its header, else
    from the completed commit whose write stats list the file and the byte range it wrote)
    is visible and not rolled back. A torn block of a failed or pending write, or of an
    unknown instant, is skipped silently, as Java does."""

    def __init__(self, storage, timeline, is_visible: Callable[[str], bool]):
        self.storage = storage
        self.timeline = timeline  # None: listed when a damaged block needs its writer
        self.is_visible = is_visible
        self._writers: dict[str, list[tuple[str, int, float]]] | None = None
        self._lock = threading.Lock()

    @staticmethod
    def of(view: FileSystemView) -> BlockFilter:
        return BlockFilter(view.storage, view.timeline, view.is_visible)

    def blocks(self, storage, logs: Sequence[LogFile | str]) -> list[DataBlock | DeleteBlock]:
        """Visible blocks for a read: a damaged one is logged and skipped; an undecodable
        payload inside intact framing is a `CorruptLogError`."""
        paths = [lf if isinstance(lf, str) else lf.path for lf in logs]
        visible, damaged, _ = self.scan(paths, storage)
        for d in damaged:
            if d.payload:
                raise CorruptLogError(f"table {self.storage.uri}: {d.describe()}")
            log.warning("table %s: %s; the block is skipped", self.storage.uri, d.describe())
        return visible

    def scan(self, paths: list[str], storage=None, *, missing_ok: bool = True
             ) -> tuple[list[DataBlock | DeleteBlock], list[Damage], int]:
        """Visible data and delete blocks of the log files, in order, the damaged blocks that
        belong to visible instants, and the bytes read."""
        storage = storage or self.storage
        size = 0
        decoded: list[DataBlock | DeleteBlock] = []
        corrupt: list[tuple[str, CorruptBlock]] = []
        rolled_back: set[str] = set()
        for path in paths:
            try:
                data = storage.read(path)
            except FileNotFoundError:
                if not missing_ok:
                    raise
                continue  # rolled back by another writer since we listed it: none of it is visible
            size += len(data)
            for block in read_log_file(data, f"{storage.uri}/{path}"):
                if isinstance(block, CommandBlock):
                    if block.is_rollback and block.target:
                        rolled_back.add(block.target)
                elif isinstance(block, (DataBlock, DeleteBlock)):
                    decoded.append(block)
                elif isinstance(block, CorruptBlock):
                    corrupt.append((path, block))
        visible = [b for b in decoded
                   if b.instant is not None and b.instant not in rolled_back and self.is_visible(b.instant)]
        damaged = []
        for path, block in corrupt:
            instant = block.instant or self._writer(path, block.offset)
            if instant is not None and instant not in rolled_back and self.is_visible(instant):
                damaged.append(Damage(path, block.offset, instant, block.reason, block.payload))
        return visible, damaged, size

    def _writer(self, path: str, offset: int) -> str | None:
        """The completed instant whose write stats list `path` with a byte range holding
        `offset` (log appends record logOffset and the size they wrote)."""
        with self._lock:
            if self._writers is None:
                if self.timeline is None:
                    self.timeline = ActiveTimeline(self.storage)
                writers: dict[str, list[tuple[str, int, float]]] = {}
                for instant in self.timeline.commits().completed():
                    for stat in self.timeline.commit_metadata(instant).stats():
                        name = stat.path or ""
                        if ".log." not in name.rsplit("/", 1)[-1]:
                            continue
                        start = stat.log_offset
                        sizes = [start + int(stat.total_write_bytes), int(stat.file_size)]
                        end = max(sizes) if max(sizes) > start else float("inf")
                        writers.setdefault(name, []).append((instant.time, start, end))
                self._writers = writers
        for time_, start, end in self._writers.get(path, []):
            if start <= offset < end:
                return time_
        return None


def _select(schema: pa.Schema, columns: list[str] | None) -> pa.Schema:
    return schema if columns is None else pa.schema([schema.field(c) for c in columns])


def _expression(filters):
    if filters is None:
        return None
    if isinstance(filters, pc.Expression):
        return filters
    if not filters:
        return None
    return pq.filters_to_expression(filters)


def _filter_columns(filters) -> set[str]:
    if not filters:
        return set()
    if isinstance(filters, pc.Expression):
        raise InvalidOptionError("pass filters as [(column, op, value), ...] when selecting columns")
    disjuncts = filters if isinstance(filters[0], list) else [filters]
    return {c[0] for conj in disjuncts for c in conj}


