"""Reads to Arrow: snapshot (base + logs merged), read-optimized, time travel (`as_of`) and
incremental, with column projection, filters and partition pruning. Replaced file groups,
uncommitted files and blocks of uncommitted or rolled-back instants are never read."""

from __future__ import annotations

import itertools
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from .config import DEFAULT_PAYLOAD
from .engine import Engine
from .errors import CorruptLogError, InvalidOptionError, LakeError
from .formats.log import CommandBlock, CorruptBlock, DataBlock, DeleteBlock, read_log_file
from .formats.parquet import read_base_file
from .keys import parse_partition_path
from .merge import KEY, MergeSpec, merge_slice, record_keys
from .model import FileGroup, LogFile
from .schema import META_FIELDS, META_SCHEMA, conform
from .timeline.archived import archive_files
from .timeline.instant import check_instant_time
from .view import FileSystemView

log = logging.getLogger(__name__)
QUERY_TYPES = ("snapshot", "read_optimized")


class Reader:
    def __init__(self, table, engine: Engine):
        self.table = table
        self.storage = table.storage
        self.engine = engine

    @cached_property
    def full_schema(self) -> pa.Schema:
        """The table schema with the meta fields, resolved once per Reader (it reads the
        timeline and the latest commit)."""
        schema = self.table.schema()
        return pa.schema(list(META_SCHEMA) + [f for f in schema if f.name not in META_FIELDS])

    def snapshot(self, *, as_of: str | None, columns: list[str] | None, filters,
                 query_type: str = "snapshot") -> pa.Table:
        if query_type not in QUERY_TYPES:
            raise InvalidOptionError(f"table {self.storage.uri}: unknown query_type {query_type!r}; "
                                     f"one of {QUERY_TYPES}")
        timeline = self.table.timeline
        if as_of is not None:
            check_instant_time(as_of)
            self._check_retained(timeline, as_of, "time travel to")
        view = FileSystemView(self.storage, timeline, as_of)
        groups = self._prune(view, view.file_groups(), filters)
        return self._read_groups(view, groups, columns, filters, query_type == "read_optimized")

    def incremental(self, start: str, end: str | None, *, columns=None, filters=None,
                    holes: str = "FAIL") -> pa.Table:
        """Rows whose latest write is a commit in (start, end]."""
        check_instant_time(start)
        timeline = self.table.timeline
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
        check_instant_time(end)
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
        if not self.table.config.populate_meta_fields:
            # no per-row commit time: as hudi-rs does, a row's is that of the file or log block
            # it is read from (a compaction's base file: the compaction's instant)
            return self._read_groups(view, groups, columns, filters, False, window=(start, end))
        need = None if columns is None else list(dict.fromkeys(list(columns) + ["_hoodie_commit_time"]))
        table = self._read_groups(view, groups, need, filters, False)
        times = table.column("_hoodie_commit_time")
        table = table.filter(pc.and_(pc.greater(times, start), pc.less_equal(times, end)))
        return table.select(list(columns)) if columns is not None else table

    def _check_retained(self, timeline, instant: str, what: str) -> None:
        from .services.clean import latest_clean_bound

        bound = latest_clean_bound(timeline)
        if bound and instant < bound:
            raise LakeError(f"table {self.storage.uri}: {what} {instant} is not possible: the cleaner kept only "
                            f"file versions needed from {bound} on")

    # -- internals -------------------------------------------------------------------------
    def read_group(self, view: FileSystemView, group: FileGroup, columns: list[str] | None) -> pa.Table:
        """One file group's current records (base and visible logs merged). Without meta fields
        `_hoodie_record_key` holds the keys derived from the key fields (for index lookups and
        ordering checks), not the stored nulls."""
        cfg = self.table.config
        derive = not cfg.populate_meta_fields and (columns is None or KEY in columns)
        cols = columns
        if derive and columns is not None:
            cols = [c for c in dict.fromkeys(list(columns) + self._key_columns()) if c in self.full_schema.names]
        t = self._read_one(view, group, cols, None, False, BlockFilter.of(view)) \
            or _select(self.full_schema, cols).empty_table()
        if derive:
            t = t.set_column(t.schema.get_field_index(KEY), KEY, record_keys(t, self.table.keygen.record_keys))
        return t.select(columns) if columns is not None else t

    def _key_columns(self) -> list[str]:
        return [f.split(".")[0] for f in self.table.config.record_key_fields]

    def _read_groups(self, view: FileSystemView, groups: list[FileGroup], columns: list[str] | None, filters,
                     read_optimized: bool, window: tuple[str, str] | None = None) -> pa.Table:
        schema = self.full_schema
        if columns is not None:
            unknown = [c for c in columns if c not in schema.names]
            if unknown:
                raise InvalidOptionError(f"table {self.storage.uri}: no column {unknown[0]!r}; "
                                         f"columns: {schema.names}")
        expr = _expression(filters)
        out_cols = None if columns is None else list(dict.fromkeys(list(columns) + sorted(_filter_columns(filters))))
        visible = BlockFilter.of(view)
        try:
            parts = self.engine.map(lambda g: self._read_one(view, g, out_cols, expr, read_optimized, visible,
                                                             window),
                                    groups)
        except FileNotFoundError as e:
            raise LakeError(f"table {self.storage.uri}: {e.filename or e} was removed while reading (a clean "
                            f"or another writer); {'time travel to ' + view.as_of if view.as_of else 'retry'} "
                            "may need files outside the retained window") from e
        parts = [p for p in parts if p is not None]
        table = pa.concat_tables(parts) if parts else _select(schema, out_cols).empty_table()
        return table.select(list(columns)) if columns is not None else table

    def _read_one(self, view: FileSystemView, group: FileGroup, out_cols: list[str] | None, expr,
                  read_optimized: bool, visible: BlockFilter,
                  window: tuple[str, str] | None = None) -> pa.Table | None:
        """One group's rows; with `window` (start, end] only those read from a base file or log
        block whose instant is in it (incremental reads of tables without meta fields)."""
        schema = self.full_schema
        cfg = self.table.config
        base, logs = view.read_slice(group)
        blocks = visible.blocks(self.storage, logs) if logs and not read_optimized else []
        if window is not None:
            blocks_in = [window[0] < b.instant <= window[1] for b in blocks]
            base_in = base is not None and window[0] < base.instant <= window[1]
            if not base_in and not any(blocks_in):
                return None
        if not blocks:
            if base is None:
                return None
            t = conform(read_base_file(self.storage, base.path, out_cols), _select(schema, out_cols))
            return t.filter(expr) if expr is not None else t
        self.table.check_merge_support("a merge-on-read snapshot")
        spec = MergeSpec(cfg.precombine_field, cfg.payload_class == DEFAULT_PAYLOAD)
        merge_cols = [KEY] + ([spec.ordering_field] if spec.ordering_field else [])
        derive = None
        if not cfg.populate_meta_fields:  # null meta values: keys come from the key fields
            merge_cols += self._key_columns()
            derive = self.table.keygen.record_keys
        cols = None if out_cols is None else [c for c in dict.fromkeys(out_cols + merge_cols) if c in schema.names]
        work = _select(schema, cols)
        if base is not None:
            t = conform(read_base_file(self.storage, base.path, cols), work)
        else:
            t = work.empty_table()
        info: dict = {}
        t = merge_slice(t, blocks, work, spec, cols, info, derive_keys=derive)
        if window is not None:
            src = info["source_block"]
            keep = np.where(src >= 0, np.asarray(blocks_in + [False], bool)[src], base_in)
            t = t.filter(pa.array(keep))
        if out_cols is not None:
            t = t.select(out_cols)
        return t.filter(expr) if expr is not None else t

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
        self.timeline = timeline
        self.is_visible = is_visible
        self._writers: dict[str, list[tuple[str, int, float]]] | None = None
        self._lock = threading.Lock()

    @staticmethod
    def of(view: FileSystemView) -> BlockFilter:
        return BlockFilter(view.storage, view.timeline, view.is_visible)

    def blocks(self, storage, logs: list[LogFile]) -> list[DataBlock | DeleteBlock]:
        """Visible blocks for a read: a damaged one is logged and skipped; an undecodable
        payload inside intact framing is a `CorruptLogError`."""
        visible, damaged, _ = self.scan([lf.path for lf in logs], storage)
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
                writers: dict[str, list[tuple[str, int, float]]] = {}
                for instant in self.timeline.commits().completed():
                    for stat in self.timeline.commit_metadata(instant).write_stats():
                        name = stat.get("path") or ""
                        if ".log." not in name.rsplit("/", 1)[-1]:
                            continue
                        start = int(stat.get("logOffset") or 0)
                        sizes = [start + int(stat.get("totalWriteBytes") or 0), int(stat.get("fileSizeInBytes") or 0)]
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


