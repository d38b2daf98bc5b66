"""Keeping the record-level index current on a write (v8 spec §5.5, "Updates per data-table
write"): the routed rows regrouped by the index file group their key hashes to, one task per
index file group, each appending one log file to its group (an HFILE_DATA block of the new
locations, a DELETE block of the keys that left the table) and returning its write stat for
the MDT deltacommit at the write's instant. Rows never reach the driver.

A row's fate is decided by the write's routing (the index task applies no rule of its own):
a row that is not a delete lives in its target file group afterwards (an entry unless the
routing found it there already: an in-place update); a delete row deletes its key unless the
same key lives on in this write (a key moved to another partition). An overwrite also deletes
the keys of the file groups it replaces that it does not write again (read from those groups
in tasks: `replaced_rows`, delete rows joined to the routed ones).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..context import TableContext
from ..merge import KEY
from ..metadata_table import MDT, RECORD_INDEX
from ..model import WriteStat
from ..slice_reader import SliceRead, read_file_group
from ..storage import Storage
from .record_index import (
    LOCATIONS,
    IndexLayout,
    RecordIndex,
    check_record_index,
    index_log_blocks,
)

RLI_GROUP = "_al_rli_group"  # work column: the record-index file group of the row's key


@dataclass(frozen=True)
class IndexUpdate:
    """What every index task of one write shares (metadata only): the index's file groups and
    the slices an overwrite reads, the write's instant, its targets' locations, and the
    columns naming a row's fate."""

    ctx: TableContext
    instant: str
    instant_ms: int
    schema_text: str
    file_ids: tuple[str, ...]  # index file group (slot) k -> its file id
    targets: dict[int, tuple[str, str]]  # the write's group id -> (partition, file id)
    target: str  # the column holding a row's group id
    delete: str  # the column saying a row deletes its key
    located: str | None  # the column of the file id the index found a key in (None: not looked up)
    # keys of delete rows the stored record won over in the write's tasks (the bucket index
    # compares there): they stay
    spared: frozenset[str] = frozenset()
    layout: IndexLayout | None = None  # with groups for the partitions the write adds (partitioned)
    partition: str | None = None  # the column of a row's partition (a partitioned index's)

    @property
    def num_groups(self) -> int:
        return len(self.file_ids)

    def columns(self) -> list[str]:
        """The routed columns the index tasks read."""
        return [KEY, self.target, self.delete] + ([self.located] if self.located else []) + \
            ([self.partition] if self.partition else [])

    def slot_inputs(self) -> list[str]:
        """The columns a row's index file group is computed from."""
        return [KEY] + ([self.partition] if self.partition else [])


def update_for(ctx: TableContext, index: RecordIndex, instant: str, instant_ms: int, schema_text: str,
               targets: dict[int, tuple[str, str]], *, target: str, delete: str, located: str | None,
               spared: list[str] = (), partition: str | None = None, new_partition_groups: int = 1) -> IndexUpdate:
    """The index update of one write to the table whose record index is `index`; a partitioned
    index gets `new_partition_groups` file groups for each partition the write adds (their
    first log file is this write's, at its instant, as Java creates them)."""
    layout = index.layout
    if layout.is_partitioned:
        layout = layout.with_partitions({p for p, _ in targets.values()}, new_partition_groups)
    return IndexUpdate(ctx, instant, instant_ms, schema_text, layout.file_ids(), dict(targets), target, delete,
                       located, frozenset(spared), layout, partition if layout.is_partitioned else None)


def replaced_rows(ctx, schema: pa.Schema, update: IndexUpdate, task: SliceRead) -> pa.Table:
    """The keys of a file group an overwrite replaces, as delete rows of the index update (a
    task function: the group's keys read there): each is deleted unless the write keeps it."""
    keys = read_file_group(ctx, task, schema, [KEY], derived_keys=True).rows.column(KEY).combine_chunks()
    n = len(keys)
    columns = {KEY: keys.cast(pa.string()), update.target: pa.nulls(n, pa.int64()),
               update.delete: pa.repeat(pa.scalar(True), n)}
    if update.located:
        columns[update.located] = pa.nulls(n, pa.string())
    if update.partition:
        columns[update.partition] = pa.repeat(pa.scalar(task.partition, pa.string()), n)
    return pa.table([columns[c] for c in update.columns()], names=update.columns())


def row_schema(update: IndexUpdate) -> pa.Schema:
    """The schema of `replaced_rows`."""
    types = {KEY: pa.string(), update.target: pa.int64(), update.delete: pa.bool_()}
    return pa.schema([pa.field(c, types.get(c, pa.string())) for c in update.columns()])


def index_groups(layout: IndexLayout, keys: pa.Array, partitions: pa.Array | None = None) -> pa.Array:
    """The index file group (slot) of each key, of a partitioned index in its partition (-1:
    the partition has no groups); a task function: Arrow in, Arrow out."""
    return pa.array(layout.slots(keys, partitions), pa.int64())


def write_index_group(update: IndexUpdate, rows: pa.Table) -> WriteStat | None:
    """One index file group's part of the write: its log file appended (None when nothing in
    it changes)."""
    k = int(rows.column(RLI_GROUP)[0].as_py())
    rows = rows.filter(pc.is_valid(rows.column(KEY)))
    dels = rows.column(update.delete).to_numpy(zero_copy_only=False).astype(bool) if rows.num_rows \
        else np.zeros(0, bool)
    live = rows.filter(pa.array(~dels))
    if update.spared and rows.num_rows:
        dels &= ~pc.is_in(rows.column(KEY), pa.array(sorted(update.spared), pa.string())).to_numpy(
            zero_copy_only=False)
    gids = live.column(update.target).to_numpy(zero_copy_only=False)
    order = sorted(update.targets)
    where = np.searchsorted(np.array(order, dtype=np.int64), gids) if len(gids) else np.zeros(0, np.int64)
    partitions = pa.array([update.targets[g][0] for g in order] or [""], pa.string()).take(pa.array(where))
    files = pa.array([update.targets[g][1] for g in order] or [""], pa.string()).take(pa.array(where))
    new = np.ones(live.num_rows, dtype=bool)
    if update.located is not None and live.num_rows:  # found in its target group already: in place
        new = ~pc.fill_null(pc.equal(live.column(update.located), files), False).to_numpy(zero_copy_only=False)
    entries = pa.table({"key": live.column(KEY).cast(pa.string()), "partition": partitions, "file_id": files,
                        "instant_ms": pa.repeat(pa.scalar(update.instant_ms, pa.int64()), live.num_rows)},
                       schema=LOCATIONS).filter(pa.array(new))
    entries = _last_per_key(entries)
    staying = live.column(KEY).combine_chunks().cast(pa.string())
    gone = rows.filter(pa.array(dels)).column(KEY).combine_chunks().cast(pa.string())
    deleted = pc.unique(gone.filter(pc.invert(pc.is_in(gone, value_set=staying)))).to_pylist()
    if not entries.num_rows and not deleted:
        return None
    return append_log(update.ctx.storage, update.file_ids[k], k, update.instant, update.schema_text, entries, deleted)


def append_log(storage: Storage, file_id: str, k: int, instant: str, schema_text: str, entries: pa.Table,
               deleted: list[str]) -> WriteStat:
    """Index file group `k`'s log file of the MDT deltacommit at `instant` (its new `entries`,
    `LOCATIONS`, and `deleted` keys); its write stat."""
    data = index_log_blocks(instant, schema_text, entries, sorted(deleted))
    name = f".{file_id}_{instant}.log.1_{k}-{int(instant[-9:])}-{k}"
    storage.write(f"{MDT}/{RECORD_INDEX}/{name}", data)
    return WriteStat(file_id, RECORD_INDEX, f"{RECORD_INDEX}/{name}", instant, num_writes=entries.num_rows,
                     num_update_writes=entries.num_rows, num_deletes=len(deleted), total_write_bytes=len(data),
                     file_size=len(data), delta={"logVersion": 1, "logOffset": 0, "baseFile": "", "logFiles": [name]})


def resync(index: RecordIndex, located: pa.Table, instant: str, instant_ms: int, schema_text: str,
           ) -> list[WriteStat]:
    """Bring `index` in line with `located` (every live key's partition and file group, a scan
    of the table) by log files of the MDT deltacommit at `instant`: keys it lacks or places
    elsewhere get entries, keys no row has are deleted. After a rollback or restore undid a
    write whose index logs an MDT compaction had merged (they cannot be rolled back)."""
    check = check_record_index(index, located)
    changed = pa.array(check.missing + check.moved, pa.string())
    ids = located.column("key") if not index.layout.is_partitioned else \
        pc.binary_join_element_wise(located.column("partition"), located.column("key"), "\x00")
    rows = located.filter(pc.is_in(ids, value_set=changed))
    entries = pa.table({"key": rows.column("key"), "partition": rows.column("partition"),
                        "file_id": rows.column("file_id"),
                        "instant_ms": pa.repeat(pa.scalar(instant_ms, pa.int64()), rows.num_rows)}, schema=LOCATIONS)
    entries = _last_per_key(entries)
    stale = pa.array(check.stale, pa.string())
    layout, stale_parts = index.layout, None
    if layout.is_partitioned:  # (the check's keys are partition\0key; partitions it lacks get groups)
        split = pc.split_pattern(stale, "\x00", max_splits=1)
        stale_parts, stale = pc.list_element(split, 0), pc.list_element(split, 1)
        layout = layout.with_partitions(set(entries.column("partition").to_pylist()), 1)
    file_ids = layout.file_ids()
    put = layout.slots(entries.column("key"), entries.column("partition"))
    drop = layout.slots(stale, stale_parts)
    stats = []
    for k in sorted(set(put.tolist()) | set(drop.tolist())):
        stats.append(append_log(index.storage, file_ids[k], k, instant, schema_text,
                                entries.filter(pa.array(put == k)), stale.filter(pa.array(drop == k)).to_pylist()))
    return stats


def _last_per_key(entries: pa.Table) -> pa.Table:
    """One entry per key (the last row of a key that repeats: an insert without combining)."""
    if entries.num_rows < 2 or pc.count_distinct(entries.column("key")).as_py() == entries.num_rows:
        return entries
    numbered = entries.append_column("_n", pa.array(np.arange(entries.num_rows)))
    last = numbered.group_by("key", use_threads=False).aggregate([("_n", "max")]).column("_n_max")
    return entries.take(pc.sort_indices(last))


