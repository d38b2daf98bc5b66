"""Reads to Arrow: snapshot (base + logs merged), read-optimized, time travel (`as_of`) and
incremental, with column projection, filters and partition pruning. Replaced file groups,
uncommitted files and blocks of uncommitted or rolled-back instants are never read."""

from __future__ import annotations

from functools import cached_property

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from .config import DEFAULT_PAYLOAD
from .engine import Engine
from .errors import InvalidOptionError, LakeError
from .formats.log import CommandBlock, DataBlock, DeleteBlock, read_log_file
from .formats.parquet import read_base_file
from .keys import parse_partition_path
from .merge import KEY, MergeSpec, merge_slice
from .model import FileGroup, LogFile
from .schema import META_FIELDS, META_SCHEMA, conform
from .timeline.archived import archive_files
from .timeline.instant import check_instant_time
from .view import FileSystemView

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
        """One file group's current records (base and visible logs merged)."""
        return self._read_one(view, group, columns, None, False, _BlockFilter(view)) \
            or _select(self.full_schema, columns).empty_table()

    def _read_groups(self, view: FileSystemView, groups: list[FileGroup], columns: list[str] | None, filters,
                     read_optimized: bool) -> pa.Table:
        schema = self.full_schema
        if columns is not None:
            unknown = [c for c in columns if c not in schema.names]
            if unknown:
                raise InvalidOptionError(f"table {self.storage.uri}: no column {unknown[0]!r}; "
                                         f"columns: {schema.names}")
        expr = _expression(filters)
        out_cols = None if columns is None else list(dict.fromkeys(list(columns) + sorted(_filter_columns(filters))))
        visible = _BlockFilter(view)
        try:
            parts = self.engine.map(lambda g: self._read_one(view, g, out_cols, expr, read_optimized, visible),
                                    groups)
        except FileNotFoundError as e:
            raise LakeError(f"table {self.storage.uri}: {e.filename or e} was removed while reading (a clean "
                            f"or another writer); {'time travel to ' + view.as_of if view.as_of else 'retry'} "
                            "may need files outside the retained window") from e
        parts = [p for p in parts if p is not None]
        table = pa.concat_tables(parts) if parts else _select(schema, out_cols).empty_table()
        return table.select(list(columns)) if columns is not None else table

    def _read_one(self, view: FileSystemView, group: FileGroup, out_cols: list[str] | None, expr,
                  read_optimized: bool, visible: _BlockFilter) -> pa.Table | None:
        schema = self.full_schema
        cfg = self.table.config
        base, logs = view.read_slice(group)
        blocks = visible.blocks(self.storage, logs) if logs and not read_optimized else []
        if not blocks:
            if base is None:
                return None
            t = conform(read_base_file(self.storage, base.path, out_cols), _select(schema, out_cols))
            return t.filter(expr) if expr is not None else t
        self.table.check_merge_support("a merge-on-read snapshot")
        spec = MergeSpec(cfg.precombine_field, cfg.payload_class == DEFAULT_PAYLOAD)
        merge_cols = [KEY] + ([spec.ordering_field] if spec.ordering_field else [])
        if not cfg.populate_meta_fields:
            merge_cols += [f.split(".")[0] for f in cfg.record_key_fields]
        cols = None if out_cols is None else [c for c in dict.fromkeys(out_cols + merge_cols) if c in schema.names]
        work = _select(schema, cols)
        if base is not None:
            t = conform(read_base_file(self.storage, base.path, cols), work)
            if not cfg.populate_meta_fields and t.num_rows:
                t = t.set_column(t.schema.get_field_index(KEY), KEY, self.table.keygen.record_keys(t))
        else:
            t = work.empty_table()
        t = merge_slice(t, blocks, work, spec, cols)
        if out_cols is not None:
            t = t.select(out_cols)
        return t.filter(expr) if expr is not None else t

    def _prune(self, view: FileSystemView, groups: list[FileGroup], filters) -> list[FileGroup]:
        """Drop groups whose partition cannot match the filters on partition columns."""
        cfg = self.table.config
        fields = cfg.partition_fields
        if not filters or not fields or isinstance(filters, pc.Expression) \
                or not self.table.keygen.partition_values_are_fields:
            return groups
        disjuncts = filters if isinstance(filters[0], list) else [filters]
        parts_only = [[c for c in conj if c[0] in fields] for conj in disjuncts]
        if any(not conj for conj in parts_only):
            return groups
        schema = self.full_schema
        partitions = sorted({g.partition for g in groups})
        try:
            values = {name: [] for name in fields}
            for p in partitions:
                parsed = parse_partition_path(p, fields, cfg.hive_style)
                for name in fields:
                    values[name].append(parsed.get(name))
            arrays = {n: pa.array(v, pa.string()).cast(schema.field(n).type) for n, v in values.items()}
            rows = pa.table({**arrays, "__i": pa.array(range(len(partitions)))})
            kept = set(rows.filter(pq.filters_to_expression(parts_only)).column("__i").to_pylist())
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, KeyError, ValueError, TypeError):
            return groups
        index = {p: i for i, p in enumerate(partitions)}
        return [g for g in groups if index[g.partition] in kept]


class _BlockFilter:
    """Which log blocks a query sees: committed, not after the bound, not rolled back."""

    def __init__(self, view: FileSystemView):
        self.view = view

    def blocks(self, storage, logs: list[LogFile]) -> list[DataBlock | DeleteBlock]:
        decoded = []
        rolled_back: set[str] = set()
        for log in logs:
            try:
                data = storage.read(log.path)
            except FileNotFoundError:
                continue  # rolled back by another writer since we listed it: none of it is visible
            for block in read_log_file(data):
                if isinstance(block, CommandBlock):
                    if block.is_rollback and block.target:
                        rolled_back.add(block.target)
                elif isinstance(block, (DataBlock, DeleteBlock)):
                    decoded.append(block)
        return [b for b in decoded
                if b.instant is not None and b.instant not in rolled_back and self.view.is_visible(b.instant)]


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


