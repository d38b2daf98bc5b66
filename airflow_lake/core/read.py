"""Reads to Arrow: snapshot, time travel (`as_of`) and incremental, with column projection,
filters and partition pruning. Replaced file groups and uncommitted files are never read."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from .engine import Engine
from .errors import InvalidOptionError, LakeError
from .formats.parquet import read_base_file
from .keys import parse_partition_path
from .model import BaseFile
from .schema import META_FIELDS, META_SCHEMA, conform
from .timeline.instant import check_instant_time
from .view import FileSystemView


class Reader:
    def __init__(self, table, engine: Engine):
        self.table = table
        self.storage = table.storage
        self.engine = engine

    def full_schema(self) -> pa.Schema:
        schema = self.table.schema()
        return pa.schema(list(META_SCHEMA) + [f for f in schema if f.name not in META_FIELDS])

    def snapshot(self, *, as_of: str | None, columns: list[str] | None, filters) -> pa.Table:
        if as_of is not None:
            check_instant_time(as_of)
        view = FileSystemView(self.storage, self.table.timeline, as_of)
        files = self._prune(view.latest_base_files(), filters)
        return self._read_files(files, columns, filters)

    def incremental(self, start: str, end: str | None, *, columns=None, filters=None,
                    holes: str = "FAIL") -> pa.Table:
        """Rows whose latest write is a commit in (start, end]."""
        check_instant_time(start)
        timeline = self.table.timeline
        commits = timeline.commits()
        completed = commits.completed()
        if end is None:
            end = completed.last.time if completed.last else start
        check_instant_time(end)
        pending = [i for i in commits.pending() if start < i.time <= end]
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
        in_range = completed.between(start, end)
        touched: set[tuple[str, str]] = set()
        for instant in in_range:
            touched |= timeline.commit_metadata(instant).file_ids()
        view = FileSystemView(self.storage, timeline, end)
        files = [f for f in view.latest_base_files() if (f.partition, f.file_id) in touched]
        files = self._prune(files, filters)
        need = None if columns is None else list(dict.fromkeys(list(columns) + ["_hoodie_commit_time"]))
        table = self._read_files(files, need, filters)
        times = table.column("_hoodie_commit_time")
        keep = pc.and_(pc.greater(times, start), pc.less_equal(times, end))
        table = table.filter(keep)
        return table.select(list(columns)) if columns is not None else table

    # -- internals -------------------------------------------------------------------------
    def _read_files(self, files: list[BaseFile], columns: list[str] | None, filters) -> pa.Table:
        schema = self.full_schema()
        if columns is not None:
            unknown = [c for c in columns if c not in schema.names]
            if unknown:
                raise InvalidOptionError(f"table {self.storage.uri}: no column {unknown[0]!r}; "
                                         f"columns: {schema.names}")
        expr = _expression(filters)
        needed = None
        if columns is not None:
            needed = list(dict.fromkeys(list(columns) + sorted(_filter_columns(filters))))
        out_schema = schema if needed is None else pa.schema([schema.field(c) for c in needed])

        def read(f: BaseFile) -> pa.Table:
            t = conform(read_base_file(self.storage, f.path, needed), out_schema)
            return t.filter(expr) if expr is not None else t

        parts = self.engine.map(read, files)
        table = pa.concat_tables(parts) if parts else out_schema.empty_table()
        return table.select(list(columns)) if columns is not None else table

    def _prune(self, files: list[BaseFile], filters) -> list[BaseFile]:
        """Drop files whose partition cannot match the filters on partition columns."""
        cfg = self.table.config
        fields = cfg.partition_fields
        if not filters or not fields:
            return files
        disjuncts = filters if isinstance(filters[0], list) else [filters]
        parts_only = [[c for c in conj if c[0] in fields] for conj in disjuncts]
        if any(not conj for conj in parts_only):
            return files
        schema = self.table.schema()
        partitions = sorted({f.partition for f in files})
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
            return files
        index = {p: i for i, p in enumerate(partitions)}
        return [f for f in files if index[f.partition] in kept]


def _expression(filters):
    if filters is None:
        return None
    if isinstance(filters, pc.Expression):
        return filters
    if not filters:
        return None
    return pq.filters_to_expression(filters)


def _filter_columns(filters) -> set[str]:
    if not filters or isinstance(filters, pc.Expression):
        if isinstance(filters, pc.Expression):
            raise InvalidOptionError("pass filters as [(column, op, value), ...] when selecting columns")
        return set()
    disjuncts = filters if isinstance(filters[0], list) else [filters]
    return {c[0] for conj in disjuncts for c in conj}
