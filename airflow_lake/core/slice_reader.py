"""The file-group reader: one file slice's records, its base file merged with its visible log
blocks (deletes, rollback command blocks, the ordering rule and payload classes of
`merge.merge_slice`). Snapshot, time-travel and incremental reads, the index lookups (local
and on Spark) and compaction all read a file group with `read_file_group`, wherever it runs
(threads, Spark executors): it takes a `TableContext` and a small `SliceRead` value.

What differs between callers is explicit: the columns, whether `_hoodie_record_key` holds the
keys derived from the key fields (tables without meta fields), whether a log file listed in the
task must exist, and the `DamagePolicy`."""

from __future__ import annotations

import bisect
import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from .config import unsupported_merge
from .errors import CorruptLogError, UnsupportedFeatureError
from .formats.log import CommandBlock, CorruptBlock, DataBlock, DeleteBlock, read_log_file
from .formats.parquet import read_base_file
from .merge import KEY, MergeSpec, merge_slice, record_keys
from .model import FileGroup
from .schema import conform
from .timeline.active import ActiveTimeline
from .view import FileSystemView

log = logging.getLogger(__name__)
COMMIT_TIME = "_hoodie_commit_time"


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
    by the instant of the base file or log block a row is read from. With `commits` (timeline
    layout 2, where the window is one of completion times) the window is these instants."""

    columns: tuple[str, ...] | None = None
    read_columns: tuple[str, ...] | None = None  # columns + filter columns (+ commit time)
    filters: Any = None
    read_optimized: bool = False
    window: tuple[str, str] | None = None
    window_by_file: bool = False
    commits: frozenset[str] | None = None

    def in_window(self, instant: str) -> bool:
        if self.commits is not None:
            return instant in self.commits
        return self.window is not None and self.window[0] < instant <= self.window[1]

    @property
    def expression(self) -> pc.Expression | None:
        return expression(self.filters)


@dataclass(frozen=True)
class SliceRead:
    """One file group's read task: the newest visible base file (path relative to the table)
    and the log files after it, with the visibility facts and the query. Small and picklable:
    a Spark executor or a worker thread runs it with `read_file_group`."""

    partition: str
    file_id: str
    base: str | None
    base_instant: str | None
    logs: tuple[str, ...]
    size: int  # bytes of the files, for balancing
    visibility: Visibility
    query: SliceQuery = SliceQuery()
    base_size: int | None = None  # bytes of the base file, when the listing gave them

    @staticmethod
    def of(view: FileSystemView, group: FileGroup, visibility: Visibility, query: SliceQuery) -> SliceRead:
        base, logs = view.read_slice(group)
        if query.read_optimized:
            logs = []
        size = (base.size if base is not None else 0) + sum(lf.size for lf in logs)
        return SliceRead(group.partition, group.file_id, base.path if base is not None else None,
                         base.instant if base is not None else None, tuple(lf.path for lf in logs), size,
                         visibility, query, (base.size or None) if base is not None else None)  # (0: unknown)


class DamagePolicy(Enum):
    """What the reader does with a damaged log block of a visible instant (a torn block of a
    failed or pending write is always skipped silently, as Java does)."""

    WARN = "warn"  # reads, index lookups: logged and skipped; an undecodable payload in intact framing raises
    REPORT = "report"  # skipped and returned, for the caller to refuse (compaction); an undecodable payload raises
    SKIP = "skip"  # every damaged block skipped and returned, undecodable payloads too (decoded before the merge)


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


@dataclass(frozen=True)
class SliceRecords:
    """What `read_file_group` read: the merged `rows`, the visible log blocks merged, the
    damaged blocks left out, the bytes of log read, and facts about the base file's rows."""

    rows: pa.Table
    blocks: list[DataBlock | DeleteBlock]
    damaged: list[Damage]
    log_size: int = 0
    base_rows: int = 0
    base_rows_dropped: bool = False


def read_file_group(ctx, task: SliceRead, schema: pa.Schema, columns: Sequence[str] | None = None, *,
                    damage: DamagePolicy = DamagePolicy.WARN, derived_keys: bool = False,
                    logs_must_exist: bool = False, timeline=None) -> SliceRecords:
    """The file-group reader: the task's slice (base file and visible log blocks merged) in
    `schema` (the table schema with meta fields) restricted to `columns` (None: all), with the
    task's query applied (window, filters).

    `ctx` is a `TableContext` (or an open `Table`: both have storage, config, options and
    keygen). Without meta fields records match on the keys of their key fields; with
    `derived_keys` `_hoodie_record_key` holds those keys, else the stored (null) values, as
    compaction writes them. A base file removed since the plan raises `FileNotFoundError`, and
    so does a listed log file when `logs_must_exist` (else it was rolled back: none of it is
    visible). `timeline` (optional, else listed on demand) attributes damaged blocks without
    an instant header to the commit that wrote them."""
    storage, cfg, query = ctx.storage, ctx.config, task.query
    wanted = None if columns is None else list(columns)
    blocks, damaged, log_size = _log_blocks(ctx, task, damage, timeline, logs_must_exist)
    window = query.window if query.window_by_file else None
    if window is not None:
        blocks_in = [query.in_window(b.instant) for b in blocks]
        base_in = task.base is not None and query.in_window(task.base_instant)
        if not base_in and not any(blocks_in):
            return SliceRecords(projected(schema, wanted).empty_table(), blocks, damaged, log_size)
    derive = None if cfg.populate_meta_fields else ctx.keygen.record_keys
    extra = _key_columns(cfg) if derive is not None and (derived_keys or blocks) else []
    if blocks:
        _check_merge(ctx)
        spec = MergeSpec.of(cfg)
        extra = [KEY] + list(spec.fields) + extra
    cols = None if wanted is None else [c for c in dict.fromkeys(wanted + extra) if c in schema.names]
    work = projected(schema, cols)
    base = conform(read_base_file(storage, task.base, cols, size=task.base_size), work) if task.base is not None \
        else work.empty_table()
    rows, source, dropped = base, None, False
    if blocks:
        info: dict = {}
        rows = merge_slice(base, blocks, work, spec, cols, info, derive_keys=derive)
        source, dropped = info["source_block"], info["base_rows_dropped"]
    if window is not None:
        src = source if source is not None else np.full(rows.num_rows, -1, np.int64)
        rows = rows.filter(pa.array(np.where(src >= 0, np.asarray(blocks_in + [False], bool)[src], base_in)))
    if derived_keys and derive is not None and rows.num_rows:
        rows = rows.set_column(rows.schema.get_field_index(KEY), KEY, record_keys(rows, derive))
    rows = _apply_query(rows, query)
    return SliceRecords(rows.select(wanted) if wanted is not None else rows, blocks, damaged, log_size,
                        base.num_rows, dropped)


def _apply_query(rows: pa.Table, query: SliceQuery) -> pa.Table:
    """The query's row filters, and its commit-time window (tables with meta fields)."""
    expr = query.expression
    if expr is not None:
        rows = rows.filter(expr)
    if query.window is not None and not query.window_by_file:
        times = rows.column(COMMIT_TIME)
        if query.commits is not None:
            rows = rows.filter(pc.is_in(times, value_set=pa.array(sorted(query.commits), pa.string())))
        else:
            rows = rows.filter(pc.and_(pc.greater(times, query.window[0]), pc.less_equal(times, query.window[1])))
    return rows


def _check_merge(ctx) -> None:
    """Refuse to merge records by a payload or merger we do not implement."""
    problem = unsupported_merge(ctx.config.props, ctx.options, write=False)
    if problem:
        raise UnsupportedFeatureError(
            f"table {ctx.storage.uri}: a merge-on-read snapshot needs record merging with {problem}, which "
            "airflow-lake does not implement (DefaultHoodieRecordPayload and OverwriteWithLatestAvroPayload with the "
            "default merger); refusing rather than merging differently from Apache Hudi; read-optimized reads work")


def _log_blocks(ctx, task: SliceRead, damage: DamagePolicy, timeline, logs_must_exist: bool
                ) -> tuple[list[DataBlock | DeleteBlock], list[Damage], int]:
    """The task's visible log blocks, the damaged ones left out (per `damage`), the bytes read."""
    if not task.logs:
        return [], [], 0
    storage = ctx.storage
    blocks, damaged, size = BlockFilter(storage, timeline, task.visibility).scan(
        list(task.logs), missing_ok=not logs_must_exist)
    if damage == DamagePolicy.SKIP:
        for b in [b for b in blocks if isinstance(b, DataBlock)]:
            try:
                b.records()
            except CorruptLogError as e:
                blocks.remove(b)
                damaged.append(Damage(b.source.removeprefix(f"{storage.uri}/"), b.offset, b.instant, str(e), True))
    elif damage == DamagePolicy.WARN:
        for d in damaged:
            if d.payload:
                raise CorruptLogError(f"table {storage.uri}: {d.describe()}")
            log.warning("table %s: %s; the block is skipped", storage.uri, d.describe())
    return blocks, damaged, size


def read_slice(ctx, task: SliceRead, schema: pa.Schema, *, timeline=None) -> pa.Table:
    """A read task's rows in its query's columns (`read_file_group` with the read's policy)."""
    query = task.query
    rows = read_file_group(ctx, task, schema, query.read_columns, timeline=timeline).rows
    return rows.select(list(query.columns)) if query.columns is not None else rows


def group_read(view: FileSystemView, group: FileGroup) -> SliceRead:
    """The read task of one file group's current records for a writer (`read_group_records`)."""
    return SliceRead.of(view, group, Visibility.of(view), SliceQuery())


def read_group_records(ctx, task: SliceRead, schema: pa.Schema, columns: list[str] | None, *,
                       timeline=None) -> pa.Table:
    """A `group_read` task's records in `columns`; without meta fields `_hoodie_record_key`
    holds the keys derived from the key fields, not the stored nulls."""
    return read_file_group(ctx, task, schema, columns, derived_keys=True, timeline=timeline).rows


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

    def scan(self, paths: list[str], *, missing_ok: bool = True
             ) -> tuple[list[DataBlock | DeleteBlock], list[Damage], int]:
        """Visible data and delete blocks of the log files, in order, the damaged blocks that
        belong to visible instants, and the bytes read."""
        storage = self.storage
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


def _key_columns(cfg) -> list[str]:
    return [f.split(".")[0] for f in cfg.record_key_fields]


def projected(schema: pa.Schema, columns: list[str] | None) -> pa.Schema:
    """`schema` restricted to `columns`, in their order (None: all)."""
    return schema if columns is None else pa.schema([schema.field(c) for c in columns])


def expression(filters) -> pc.Expression | None:
    """Row filters (pyarrow DNF or an expression) as an expression; None for no filter."""
    if filters is None:
        return None
    if isinstance(filters, pc.Expression):
        return filters
    if not filters:
        return None
    return pq.filters_to_expression(filters)
