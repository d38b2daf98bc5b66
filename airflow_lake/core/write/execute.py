"""One file group's write, the same function on every engine.

The plan stage routes every row of a write to a target file group (the `TARGET` work column)
and describes each group's write as a `GroupPlan`; an engine hands each group's rows (an Arrow
table: the data columns and the work columns) to `execute_group`, which writes them with the
per-group writers (`merge_file`, `append_log`, `insert_file`) and returns the write stat. The
values here are frozen and picklable: they travel to Spark executors as they are.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..context import TableContext
from ..merge import KEY
from ..model import BaseFile, WriteStat
from ..ordering import ordering_key, stored_wins
from ..read import SliceRead, read_group_records
from .files import WriteContext, insert_file, merge_file
from .logs import SliceRef, append_log
from .prepare import Batch

# work columns a routed row carries next to its data (none reaches a file)
PART = "_hoodie_partition_path"
DEL = "_al_delete"  # delete this key
SEQ = "_al_seq"  # the row's place in the write: a group's rows are written in this order
LOC_F = "_al_loc_file"  # the file group the index found the key in (null: a new key)
TARGET = "_al_target"  # the file group (plan id) a row is written to
WORK = (KEY, PART, DEL, SEQ)


@dataclass(frozen=True)
class GroupPlan:
    """One file group's write: `merge` (rewrite a base file), `log` (a new log file), `insert`.
    `whole`: every row of a merge is matched against the file (the bucket index), not only
    the located ones; `inserts`: rows of a log that are new records (a new bucket); `stored`:
    the group's current records (key, ordering value) to read for a log's ordering check."""

    kind: str
    partition: str
    file_id: str
    base: BaseFile | None = None
    slice: SliceRef | None = None
    whole: bool = False
    inserts: int = 0
    stored: SliceRead | None = None


@dataclass(frozen=True)
class ExecSpec:
    """What every group of one write shares. `new_keys`: stats carry the keys each group
    inserted (the local engine's concurrent-insert check; Spark finds them by a join).
    `table` and `schema` (with meta fields): to read a group's `stored` records."""

    ctx: WriteContext
    groups: dict[int, GroupPlan]
    data_columns: tuple[str, ...]
    ordering_field: str | None
    block_format: str
    new_keys: bool = False
    table: TableContext | None = None
    schema: pa.Schema | None = None

    def columns(self, available: list[str]) -> list[str]:
        """Of the routed rows' columns `available`, those `execute_group` reads (a group's rows
        travel with these only: not the lookup's and the routing's other work columns)."""
        read = {*self.data_columns, *WORK, LOC_F, TARGET, self.ordering_field}
        return [c for c in available if c in read]


def execute_group(spec: ExecSpec, rows: pa.Table) -> WriteStat | None:
    """Write one file group's rows (all with the same `TARGET`) with the core's per-group
    writers; its write stat (None: the ordering check left nothing to write)."""
    gid = rows.column(TARGET)[0].as_py()
    plan = spec.groups[gid]
    seq = rows.column(SEQ).to_numpy()
    if len(seq) > 1 and (seq[1:] < seq[:-1]).any():
        rows = rows.sort_by(SEQ)
    ctx = spec.ctx
    if plan.kind == "insert":
        stat = insert_file(ctx, gid, plan.partition, plan.file_id, _batch(spec, rows))
    elif plan.kind == "log":
        lost = None
        if plan.stored is not None:
            kept = _drop_stale_deletes(spec, plan.stored, rows)
            lost = rows.column(KEY).combine_chunks().filter(pc.invert(pc.is_in(rows.column(KEY), kept.column(KEY))))
            rows = kept
            if not rows.num_rows:  # (nothing to write; the deletes that lost are still reported)
                return WriteStat(plan.file_id, plan.partition, None, lost_deletes=lost)
        stat = replace(append_log(ctx, gid, plan.slice, _batch(spec, rows), block_format=spec.block_format,
                                  inserts=plan.inserts), lost_deletes=lost)
    elif plan.whole:  # the bucket index: every row is matched against the file's keys
        stat = merge_file(ctx, gid, plan.base, _batch(spec, rows), null_deletes_win=False)
    else:  # located rows update the file, the others are appended to it (a small file filled)
        located = pc.is_valid(rows.column(LOC_F)).to_numpy(zero_copy_only=False)
        n = int(located.sum())
        if located[:n].all():  # (the local engine orders a group's located rows first)
            updates, inserts = rows.slice(0, n), rows.slice(n)
        else:
            updates, inserts = rows.filter(pa.array(located)), rows.filter(pa.array(~located))
        stat = merge_file(ctx, gid, plan.base, _batch(spec, updates),
                          _batch(spec, inserts) if inserts.num_rows else None)
    return stat if spec.new_keys else replace(stat, new_keys=None)


def _drop_stale_deletes(spec: ExecSpec, stored: SliceRead, rows: pa.Table) -> pa.Table:
    """MOR: a `_hoodie_is_deleted` row older than the stored record (base and logs merged,
    DefaultHoodieRecordPayload; a null ordering value the oldest) is dropped, so that Java
    (whose delete blocks always remove the base record) and hudi-rs agree. (The bucket index's:
    no partition move makes a delete by key here.)"""
    dels = np.flatnonzero(rows.column(DEL).to_numpy(zero_copy_only=False))
    column = spec.ordering_field
    if not len(dels) or not column or column not in rows.column_names:  # (a delete by key always wins)
        return rows
    fields = spec.ctx.ordering_fields
    current = read_group_records(spec.table, stored, spec.schema, [KEY, *fields])
    idx = pa.array(dels)
    pos = pc.index_in(rows.column(KEY).take(idx), value_set=current.column(KEY).combine_chunks())
    values = ordering_key(current.select(list(fields)).take(pos), fields, [rows.schema.field(f).type for f in fields])
    incoming = rows.column(column).take(idx)
    older = stored_wins(incoming, values, np.zeros(len(dels), dtype=bool))
    if not older.any():
        return rows
    keep = np.ones(rows.num_rows, dtype=bool)
    keep[dels[older]] = False
    return rows.filter(pa.array(keep))


def _batch(spec: ExecSpec, rows: pa.Table) -> Batch:
    data = rows.select(list(spec.data_columns))
    if spec.ordering_field and spec.ordering_field in rows.column_names:  # (a field, or the key of several)
        ordering = rows.column(spec.ordering_field).combine_chunks()
    else:
        ordering = None
    return Batch(data, rows.column(KEY).combine_chunks(), rows.column(PART).combine_chunks(),
                 rows.column(DEL).to_numpy(zero_copy_only=False).astype(bool), ordering, spec.ctx.avro_schema)


