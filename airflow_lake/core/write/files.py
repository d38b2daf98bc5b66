"""Per-file-group write tasks of a COW commit: new base files (insert) and rewrites (merge)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..formats.parquet import BloomSettings, prior_keys, read_base_file, write_base_file
from ..index.column_stats import base_ranges
from ..keys import KeyGenerator
from ..model import BaseFile, WriteStat
from ..ordering import ordering_key, stored_wins
from ..schema import META_FIELDS, META_SCHEMA, conform, with_meta_fields
from ..storage import Storage
from ..txn.markers import CREATE, MERGE, create_marker
from .prepare import Batch


@dataclass(frozen=True)
class WriteContext:
    """What every task of one commit shares."""

    storage: Storage
    instant: str
    avro_schema: dict  # without meta fields
    arrow_schema: pa.Schema  # without meta fields
    bloom: BloomSettings | None
    compression: str
    populate_meta: bool
    ordering_fields: tuple[str, ...]  # one, or several compared as a tuple (`ordering.ordering_key`)
    ordering_wins: bool  # DefaultHoodieRecordPayload: the base record survives a smaller update
    keygen: KeyGenerator
    log_by_instant: bool = False  # timeline layout 2: a log file is named by the write's own instant
    stats_columns: tuple[str, ...] | None = None  # the metadata table's column_stats columns (None: off)

    @property
    def ordering_field(self) -> str | None:
        """The one ordering field whose values delete records carry (None: none, or several:
        their deletes are written in natural order)."""
        return self.ordering_fields[0] if len(self.ordering_fields) == 1 else None

    @cached_property
    def avro_with_meta(self) -> dict:
        return with_meta_fields(self.avro_schema)

    @cached_property
    def arrow_with_meta(self) -> pa.Schema:
        return pa.schema(list(META_SCHEMA) + list(self.arrow_schema))

    def token(self, task: int) -> str:
        """Write token `<task>-<stage>-<attempt>`, the stage taken from the instant so that
        tokens differ between commits (a rollback finds its own log files by token)."""
        return f"{task}-{int(self.instant[-9:])}-{task}"


def meta_columns(ctx: WriteContext, task: int, keys: pa.Array, partition: str, file_name: str) -> list[pa.Array]:
    n = len(keys)
    if not ctx.populate_meta:
        null = pa.nulls(n, pa.string())
        return [null, null, null, *_constant_meta(ctx, partition, file_name, n)]
    counter = pa.array(np.arange(n, dtype=np.int64)).cast(pa.string())
    seqno = pc.binary_join_element_wise(f"{ctx.instant}_{task}_", counter, "")
    return [_const(ctx.instant, n), seqno, keys, *_constant_meta(ctx, partition, file_name, n)]


def _constant_meta(ctx: WriteContext, partition: str, file_name: str, n: int) -> list[pa.Array]:
    """`_hoodie_partition_path` and `_hoodie_file_name`: one value in a whole base file."""
    path = _const(partition, n) if ctx.populate_meta else pa.nulls(n, pa.string())
    return [path, _const(file_name, n)]


def _const(value: str, n: int) -> pa.Array:
    return pa.repeat(pa.scalar(value, pa.string()), n)


def _gather(old: pa.ChunkedArray | pa.Array, new: pa.ChunkedArray | pa.Array, order: pa.Array) -> pa.Array:
    """Rows `order` of old followed by new (indices past len(old) address new)."""
    chunks = old.chunks if isinstance(old, pa.ChunkedArray) else [old]
    chunks += new.chunks if isinstance(new, pa.ChunkedArray) else [new]
    return pa.chunked_array(chunks, type=new.type).take(order)


def with_meta(ctx: WriteContext, meta: list, data: pa.Table) -> pa.Table:
    return pa.Table.from_arrays(meta + list(conform(data, ctx.arrow_schema).columns), schema=ctx.arrow_with_meta)


def _write(ctx: WriteContext, base: BaseFile, table: pa.Table, io_type: str, footers: list | None = None) -> int:
    create_marker(ctx.storage, ctx.instant, base.path, io_type)
    return write_base_file(ctx.storage, base.path, table, ctx.avro_with_meta,
                           bloom=ctx.bloom, compression=ctx.compression, collect=footers)


def insert_file(ctx: WriteContext, task: int, partition: str, file_id: str, batch: Batch) -> WriteStat:
    """Write inserts as a new file group's first base file."""
    start = time.monotonic()
    base = BaseFile(partition, file_id, ctx.token(task), ctx.instant)
    table = with_meta(ctx, meta_columns(ctx, task, batch.keys, partition, base.name), batch.data)
    footers: list | None = [] if ctx.stats_columns else None
    size = _write(ctx, base, table, CREATE, footers)
    return WriteStat(file_id, partition, base.path, "null", num_writes=len(table), num_inserts=len(table),
                     total_write_bytes=size, file_size=size, create_ms=int((time.monotonic() - start) * 1000),
                     new_keys=batch.keys, column_ranges=base_ranges(ctx.stats_columns, base.name, footers))


def merge_file(ctx: WriteContext, task: int, old: BaseFile, batch: Batch, appended: Batch | None = None, *,
               null_deletes_win: bool = True) -> WriteStat:
    """Rewrite a file group's base file with the batch applied (COW merge, small-file fill).

    Incoming records whose key is in the file update it, others are inserted; `appended`
    records are added as they are (inserts filling a small file: duplicates allowed). Kept records
    keep `_hoodie_commit_time` and `_hoodie_commit_seqno`; only `_hoodie_file_name` changes.
    Under DefaultHoodieRecordPayload an update, or a `_hoodie_is_deleted` row, loses to a
    stored record with a larger ordering value (a null is the smallest: `ordering.stored_wins`); a
    delete by key (no ordering value: a partition move's) always wins, unless `null_deletes_win`
    is False (the bucket index: no moves, no routing rule judged its `_hoodie_is_deleted` rows).
    """
    start = time.monotonic()
    existing = read_base_file(ctx.storage, old.path)
    new = BaseFile(old.partition, old.file_id, ctx.token(task), ctx.instant)
    existing_keys = existing.column("_hoodie_record_key").combine_chunks()
    if existing_keys.null_count:  # populate.meta.fields=false: keys from the key fields
        existing_keys = ctx.keygen.record_keys(existing)
    pos = pc.index_in(existing_keys, value_set=batch.keys).fill_null(-1).to_numpy(zero_copy_only=False)
    matched = pos >= 0
    incoming_wins = np.ones(len(batch), dtype=bool)
    hit_rows = np.nonzero(matched)[0]
    hit_in = pos[matched].astype(np.int64)
    fields = ctx.ordering_fields
    if ctx.ordering_wins and fields and batch.ordering is not None and len(hit_rows) \
            and all(f in existing.column_names and f in batch.data.column_names for f in fields):
        old_vals = ordering_key(existing.select(list(fields)).take(pa.array(hit_rows)), fields,
                                [batch.data.schema.field(f).type for f in fields])
        new_vals = batch.ordering.take(pa.array(hit_in))
        incoming_wins[hit_in[stored_wins(new_vals, old_vals, batch.is_delete[hit_in] & null_deletes_win)]] = False
    touched = np.zeros(len(batch), dtype=bool)
    touched[hit_in] = True
    updates = np.nonzero(touched & incoming_wins & ~batch.is_delete)[0]
    inserts = np.nonzero(~touched & ~batch.is_delete)[0]
    # an old row is dropped when the incoming record that matched it is a winning delete, and
    # replaced in place (Java's merge order) when it is a winning update
    update_of = np.full(len(batch), -1, dtype=np.int64)
    update_of[updates] = np.arange(len(updates))
    row_update = np.full(len(existing), -1, dtype=np.int64)
    row_update[hit_rows] = update_of[hit_in]
    dropped = np.zeros(len(existing), dtype=bool)
    dropped[hit_rows] = incoming_wins[hit_in] & batch.is_delete[hit_in]
    deleted = int((touched & incoming_wins & batch.is_delete).sum())
    written = batch.take(np.concatenate([updates, inserts]))
    if appended is not None and len(appended):
        written = written.concat(appended)
        inserts = np.concatenate([inserts, np.arange(len(appended))])
    # the rows in Java's order: kept rows (an updated one replaced in place), then inserts;
    # only the columns that vary are gathered, the per-file constants are made at full length
    survivors = np.nonzero(~dropped)[0]
    order = np.where(row_update[survivors] >= 0, len(existing) + row_update[survivors], survivors)
    order = pa.array(np.concatenate([order, len(existing) + np.arange(len(updates), len(written))]))
    new_meta = meta_columns(ctx, task, written.keys, old.partition, new.name)
    old_data = conform(existing.drop_columns(list(META_FIELDS)), ctx.arrow_schema)
    new_data = conform(written.data, ctx.arrow_schema)
    columns = [_gather(existing.column(META_FIELDS[i]), new_meta[i], order) for i in range(3)]
    columns += _constant_meta(ctx, old.partition, new.name, len(order))
    columns += [_gather(old_data.column(i), new_data.column(i), order) for i in range(old_data.num_columns)]
    table = pa.Table.from_arrays(columns, schema=ctx.arrow_with_meta)
    prior = None
    if ctx.bloom is not None and ctx.populate_meta and not dropped.any():
        prior = prior_keys(ctx.storage, old.path, len(existing), ctx.bloom)
    create_marker(ctx.storage, ctx.instant, new.path, MERGE)
    footers: list | None = [] if ctx.stats_columns else None
    size = write_base_file(ctx.storage, new.path, table, ctx.avro_with_meta, bloom=ctx.bloom,
                           compression=ctx.compression, prior=prior, collect=footers)
    return WriteStat(old.file_id, old.partition, new.path, old.instant, num_writes=len(table),
                     num_deletes=deleted, num_update_writes=len(updates), num_inserts=len(inserts),
                     total_write_bytes=size, file_size=size, upsert_ms=int((time.monotonic() - start) * 1000),
                     new_keys=written.keys.slice(len(updates)),
                     column_ranges=base_ranges(ctx.stats_columns, new.name, footers),
                     lost_deletes=batch.keys.filter(pa.array(touched & ~incoming_wins & batch.is_delete)))
