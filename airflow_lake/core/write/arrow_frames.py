"""The write pipeline's frame operations on Arrow tables (`FrameOps`): the local engine's
frames, in this process. Expressions are Arrow compute expressions; an insert's spread bucket
is 0 (one bucket: inserts take their partition's slots in input order)."""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..config import DEFAULT_PAYLOAD
from ..index import tagger
from ..index.live import LiveKeys
from ..index.record_index import tag as record_index_tag
from ..index.simple import Tags, read_keys
from ..merge import KEY
from ..metadata_writer import tagging_record_index
from ..model import BaseFile
from ..ordering import ordering_column, ordering_key
from ..read import Reader
from ..schema import META_FIELDS
from ..txn.conflicts import KeyClash
from .execute import DEL, LOC_F, PART, SEQ
from .keying import InputPlan, key_table
from .prepare import to_arrow
from .routing import BUCKET, LOC_P, SPREAD, STORED

log = logging.getLogger(__name__)


class ArrowColumns:
    """The core's column algebra on Arrow compute expressions."""

    col = staticmethod(pc.field)

    @staticmethod
    def lit(value: Any) -> pc.Expression:
        return pc.scalar(value)

    @staticmethod
    def valid(expr: pc.Expression) -> pc.Expression:
        return expr.is_valid()

    @staticmethod
    def false_if_null(expr: pc.Expression) -> pc.Expression:
        return pc.Expression._call("coalesce", [expr, pc.scalar(False)])

    @staticmethod
    def isin(expr: pc.Expression, values: list) -> pc.Expression:
        return expr.isin(values) if values else pc.scalar(False)


def evaluate(table: pa.Table, expr: pc.Expression) -> np.ndarray:
    """A boolean expression's value on every row (null: False)."""
    if not table.num_rows:
        return np.zeros(0, dtype=bool)
    import pyarrow.dataset as ds  # (here: importing it imports pandas, 0.25 s of every process's start)

    values = ds.dataset(table).to_table(columns={"_al_value": expr}, use_threads=False).column(0)
    return pc.fill_null(values, False).to_numpy(zero_copy_only=False).astype(bool)


class ArrowFrames:
    """`FrameOps` over `pyarrow.Table`s; file-group tasks and index lookups run on `engine`."""

    columns = ArrowColumns()
    trusts_filters = True
    eager = True

    def __init__(self, engine, where: str):
        self.engine = engine
        self.where = where

    def source(self, data: Any) -> pa.Table:
        return to_arrow(data, self.where)

    def schema(self, data: pa.Table) -> pa.Schema:
        return data.schema

    def cluster(self, frame: pa.Table, by: list[str]) -> pa.Table:
        return frame

    def key_frame(self, data: pa.Table, plan: InputPlan) -> tuple[pa.Table, tuple[str, ...]]:
        if plan.renames:
            data = data.rename_columns([plan.renames.get(n, n) for n in data.column_names])
        data = data.drop_columns([c for c in data.column_names if c in META_FIELDS])
        spec = replace(plan.spec, out_schema=pa.schema(list(plan.spec.data_schema) + plan.work_fields))
        return key_table(spec, data), (SEQ,)

    def cache(self, frame: pa.Table) -> pa.Table:
        return frame

    def release(self, frame: pa.Table) -> None:
        return None

    def partition_counts(self, frame: pa.Table, *, distinct: bool = True) -> list[tuple[str, int, int | None]]:
        aggregates = [(KEY, "count")] + ([(KEY, "count_distinct")] if distinct else [])
        counts = frame.group_by(PART, use_threads=False).aggregate(aggregates)
        n = counts.num_rows
        found = counts.column(f"{KEY}_count_distinct").to_pylist() if distinct else [None] * n
        return list(zip(counts.column(PART).to_pylist(), counts.column(f"{KEY}_count").to_pylist(), found,
                        strict=True))

    def keep_first(self, frame: pa.Table, by: list[str], order: list[str]) -> pa.Table:
        """The first row per `by` by `order` (descending, nulls last), the rows in frame order."""
        n = frame.num_rows
        if n < 2:
            return frame
        sort = [(c, "ascending", "at_end") for c in by] + [(c, "descending", "at_end") for c in order]
        idx = pc.sort_indices(frame, sort_keys=sort).to_numpy()
        return frame.take(pa.array(np.sort(idx[_first_of_runs(frame, by, idx)])))

    def tag(self, table, view, frame: pa.Table, parts, is_global: bool, index_type: str, where: str, *,
            trust_filters: bool = False):
        files = view.latest_base_files() if is_global else \
            view.latest_base_files([p for p in view.partitions if p in set(parts or [])])
        reader = Reader(table, self.engine, view.timeline)
        key_reader = LiveKeys.of(table.context(), view, files, reader.full_schema)
        keys, partitions = frame.column(KEY).combine_chunks(), frame.column(PART).combine_chunks()
        stats = {"file_groups": len(files)}
        index = tagging_record_index(table.storage, table.config.props, view.timeline, index_type, where)
        if index is not None:
            found, stale = record_index_tag(index, files, keys, partitions)
            tags = Tags(found, files)
            slots = index.layout.slots(keys, partitions)
            stats.update(index_file_groups=int(np.unique(slots[slots >= 0]).size), stale_entries=stale)
            log.info("%s: record index: %d keys found in %d of its %d file groups%s", where, int((found >= 0).sum()),
                     stats["index_file_groups"], index.num_groups,
                     f" ({stale} entries name a file group the table lacks: written as new)" if stale else "")
        else:
            tags = tagger(index_type)(table.storage, files, keys, partitions, is_global=is_global,
                                      key_reader=key_reader, engine=self.engine, trust_filters=trust_filters)
        found = tags.file_index >= 0
        index = pa.array(np.where(found, tags.file_index, len(tags.files)))
        loc_p = pa.array([f.partition for f in tags.files] + [None], pa.string()).take(index)
        loc_f = pa.array([f.file_id for f in tags.files] + [None], pa.string()).take(index)
        rows = frame.append_column(LOC_P, loc_p).append_column(LOC_F, loc_f)
        # the located rule compares with the stored record only a delete and a move (a key in
        # another partition under a global index): only their groups are read for it
        dels = frame.column(DEL).to_numpy(zero_copy_only=False).astype(bool)
        need = found & dels
        if is_global:
            need |= found & ~dels & pc.fill_null(pc.not_equal(loc_p, partitions), False) \
                .to_numpy(zero_copy_only=False)
        rows = rows.append_column(STORED, _stored_ordering(table, view, rows, tags, reader, need))
        return rows, [], lambda: stats

    def routing_columns(self, frame: pa.Table, columns: list[str]) -> pa.Table:
        return frame  # (whole rows cost nothing more to route: no join back)

    def with_routes(self, frame: pa.Table, routes: pa.Table, by: list[str]) -> pa.Table:
        return routes

    def untagged(self, frame: pa.Table) -> pa.Table:
        n = frame.num_rows
        for c in (LOC_P, LOC_F, STORED):
            frame = frame.append_column(c, pa.nulls(n, pa.string()))
        return frame

    def filter(self, frame: pa.Table, predicate: pc.Expression) -> pa.Table:
        return frame.filter(predicate) if frame.num_rows else frame

    def move(self, frame: pa.Table, moved: pc.Expression, ordering: str | None) -> pa.Table:
        mask = evaluate(frame, moved)
        if not mask.any():
            return frame
        rows = pa.array(np.flatnonzero(mask))
        deletes = frame.take(rows)
        deletes = _set(deletes, DEL, pa.repeat(pa.scalar(True), len(rows)))
        deletes = _set(deletes, PART, deletes.column(LOC_P).combine_chunks())
        if ordering:
            deletes = _set(deletes, ordering, pa.nulls(len(rows), frame.schema.field(ordering).type))
        keep = pa.array(~mask)
        inserts = _set(frame, LOC_F, pc.if_else(keep, frame.column(LOC_F), pa.scalar(None, pa.string())))
        inserts = _set(inserts, LOC_P, pc.if_else(keep, frame.column(LOC_P), pa.scalar(None, pa.string())))
        return pa.concat_tables([inserts, deletes])

    def insert_spread(self, frame: pa.Table) -> pa.Table:
        inserts = pc.is_null(frame.column(LOC_F))
        return frame.append_column(SPREAD, pc.if_else(inserts, pa.scalar(0, pa.int64()), pa.scalar(None, pa.int64())))

    def location_counts(self, frame: pa.Table) -> list[tuple]:
        new_part = pc.if_else(pc.is_null(frame.column(LOC_F)), frame.column(PART), pa.scalar(None, pa.string()))
        keys = pa.table({"p": frame.column(LOC_P), "f": frame.column(LOC_F), "n": new_part,
                         "s": frame.column(SPREAD)})
        counts = keys.group_by(["p", "f", "n", "s"], use_threads=False).aggregate([([], "count_all")])
        return list(zip(*[counts.column(c).to_pylist() for c in ("p", "f", "n", "s", "count_all")], strict=True))

    def bucket_counts(self, frame: pa.Table) -> list[tuple[str, int, int, int]]:
        keys = pa.table({"p": frame.column(PART), "b": frame.column(BUCKET),
                         "live": pc.cast(pc.invert(frame.column(DEL)), pa.int64())})
        counts = keys.group_by(["p", "b"], use_threads=False).aggregate([([], "count_all"), ("live", "sum")])
        return list(zip(*[counts.column(c).to_pylist() for c in ("p", "b", "count_all", "live_sum")], strict=True))

    def with_udf(self, frame: pa.Table, name: str, fn, inputs: list[str], arrow_type: pa.DataType) -> pa.Table:
        return self.with_partition_udf(frame, name, fn, inputs, arrow_type)

    def with_partition_udf(self, frame: pa.Table, name: str, fn, inputs: list[str],
                           arrow_type: pa.DataType) -> pa.Table:
        values = fn(*[frame.column(c).combine_chunks() for c in inputs]) if frame.num_rows else \
            pa.array([], arrow_type)
        return frame.append_column(name, pa.array(values, arrow_type) if not isinstance(values, pa.Array)
                                   else values.cast(arrow_type))

    def project(self, frame: pa.Table, columns: list[str]) -> pa.Table:
        return frame.select(columns)

    def first_rows(self, frame: pa.Table, columns: list[str], n: int) -> list[tuple]:
        head = frame.select(columns).slice(0, n)
        return list(zip(*(head.column(c).to_pylist() for c in columns), strict=True))

    def union(self, frame: pa.Table, other: pa.Table) -> pa.Table:
        return pa.concat_tables([frame, other.select(frame.column_names).cast(frame.schema)])

    def write_groups(self, fn, frame: pa.Table, key: str, groups: int) -> list:
        return self.engine.write_groups(fn, frame, key)

    def task_frame(self, fn, items: list, schema: pa.Schema) -> pa.Table:
        return pa.concat_tables([schema.empty_table(), *(t.cast(schema) for t in self.engine.map(fn, items))])

    def key_clash(self, ctx, new_keys: pa.Table, is_global: bool, where: str) -> KeyClash:
        def clash(files: dict[str, list[str]]) -> str | None:  # (asked only when a concurrent commit wrote files)
            by_partition: dict[str, pa.Array] = {}
            for p in pc.unique(new_keys.column(PART)).to_pylist() if new_keys.num_rows else []:
                by_partition[p] = new_keys.filter(pc.equal(new_keys.column(PART), p)).column(KEY).combine_chunks()
            return stored_key_clash(ctx, by_partition, is_global)(files)

        return clash


def stored_key_clash(ctx, new_keys: dict[str, pa.Array], is_global: bool) -> KeyClash:
    """The commit's check that no key this write inserts (per partition) is in a base file a
    concurrent commit wrote: the first clashing key, or None."""
    storage, keygen, populate = ctx.storage, ctx.keygen, ctx.config.populate_meta_fields

    def clash(files: dict[str, list[str]]) -> str | None:
        if not new_keys:
            return None
        mine = pa.concat_arrays(list(new_keys.values())) if is_global else None
        for partition, paths in files.items():
            keys = mine if is_global else new_keys.get(partition)
            if keys is None:
                continue
            for path in paths:
                stored = read_keys(storage, BaseFile.parse(partition, path.rsplit("/", 1)[-1]), keygen, populate)
                hit = pc.is_in(keys, value_set=stored)
                if pc.any(hit).as_py():
                    return keys.filter(hit)[0].as_py()
        return None

    return clash


def _first_of_runs(frame: pa.Table, by: list[str], idx: np.ndarray) -> np.ndarray:
    """Positions in `idx` (rows sorted by `by` first) where a new value of `by` starts."""
    first = np.zeros(len(idx), dtype=bool)
    first[0] = True
    take = pa.array(idx)
    for c in by:
        column = frame.column(c).take(take).combine_chunks()
        first[1:] |= pc.fill_null(pc.not_equal(column[1:], column[:-1]), True).to_numpy(zero_copy_only=False)
    return first


def _set(table: pa.Table, name: str, column) -> pa.Table:
    return table.set_column(table.schema.get_field_index(name), name, column)


def _stored_ordering(table, view, rows: pa.Table, tags, reader, need: np.ndarray) -> pa.Array:
    """The stored record's ordering value (base and logs merged; the key of the tuple for
    several ordering fields) of the `need`ed located rows, where a rule compares against it
    (DefaultHoodieRecordPayload with ordering fields); else nulls."""
    cfg = table.config
    fields = tuple(cfg.ordering_fields)
    column = ordering_column(fields)
    n = rows.num_rows
    located = need
    if not fields or cfg.payload_class != DEFAULT_PAYLOAD or column not in rows.column_names \
            or any(f not in rows.column_names for f in fields):
        return pa.nulls(n, pa.string())
    otype = rows.schema.field(column).type  # (the incoming values' type: stored ones are promoted to it)
    types = [rows.schema.field(f).type for f in fields]
    if not located.any() or any(f not in reader.full_schema.names for f in fields):
        return pa.nulls(n, otype)
    pieces, slot = [], np.full(n, -1, dtype=np.int64)
    offset = 0
    for i in np.unique(tags.file_index[located]):
        where = np.flatnonzero(located & (tags.file_index == i))
        base = tags.files[i]
        current = reader.read_group(view, view.groups[base.partition][base.file_id], [KEY, *fields])
        pos = pc.index_in(rows.column(KEY).take(pa.array(where)), value_set=current.column(KEY).combine_chunks())
        pos = pos.combine_chunks() if isinstance(pos, pa.ChunkedArray) else pos
        key = ordering_key(current.take(pos), fields, types)
        pieces.append(pc.if_else(pos.is_valid(), key, pa.scalar(None, key.type)))
        slot[where] = np.arange(offset, offset + len(where))
        offset += len(where)
    values = pa.concat_arrays(pieces + [pa.nulls(1, otype)])
    return values.take(pa.array(np.where(slot < 0, offset, slot)))

