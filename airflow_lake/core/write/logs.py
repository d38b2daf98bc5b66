"""MOR append task: one new log file per file group per commit (we never append to a file),
named by the slice's base instant and the next version (table version 6), or by the write's
own instant, version 1 (versions 8 and 9: v8 spec §2.7).

The file holds a data block with the updated (and, for the bucket index, inserted)
records, then, when the batch deletes keys of the group, one delete block per ordering type.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from ..formats.log import data_block_bytes, delete_block_bytes
from ..formats.log.blocks import wrap_ordering
from ..index.column_stats import ranges_of_records
from ..model import BaseFile, LogFile, WriteStat
from ..txn.markers import APPEND, create_marker
from .files import WriteContext, meta_columns, with_meta
from .prepare import Batch


@dataclass
class SliceRef:
    """Where a log file goes: the group's slice (base instant) and its current files."""

    partition: str
    file_id: str
    base_instant: str
    base_file: BaseFile | None
    log_files: list[LogFile]
    next_version: int


def append_log(ctx: WriteContext, task: int, target: SliceRef, batch: Batch, *, block_format: str,
               inserts: int = 0) -> WriteStat:
    """Write the batch's records (and deletes) of one file group as a new log file."""
    start = time.monotonic()
    token = ctx.token(task)
    named = ctx.instant if ctx.log_by_instant else target.base_instant
    log = LogFile(target.partition, target.file_id, named, 1 if ctx.log_by_instant else target.next_version, token)
    fake_base = BaseFile(target.partition, target.file_id, token, named)
    create_marker(ctx.storage, ctx.instant, fake_base.path, APPEND)
    schema = ctx.avro_with_meta
    parts = []
    records = batch.take(np.nonzero(~batch.is_delete)[0]) if batch.is_delete.any() else batch
    table = with_meta(ctx, meta_columns(ctx, task, records.keys, target.partition, target.file_id), records.data)
    if len(records):
        parts.append(data_block_bytes(ctx.instant, schema, table, fmt=block_format, compression=ctx.compression))
    deletes = batch.take(np.nonzero(batch.is_delete)[0]) if batch.is_delete.any() else batch.slice(0, 0)
    if len(deletes):
        otype = ctx.arrow_schema.field(ctx.ordering_field).type if ctx.ordering_field else None
        # (several ordering fields: deletes in natural order, as a stale one was dropped before)
        values = deletes.ordering.to_pylist() if deletes.ordering is not None and otype is not None \
            else [None] * len(deletes)
        ordering = [wrap_ordering(v, otype) for v in values]
        keys = deletes.keys.to_pylist()
        # one delete block per ordering type (natural-order IntWrapper(0) of a partition move
        # or delete by key, the field's own wrapper of a `_hoodie_is_deleted` row): Java reads a
        # mixed block, hudi-rs refuses one
        by_type: dict[str, list[int]] = {}
        for i, (wrapper, _) in enumerate(ordering):
            by_type.setdefault(wrapper, []).append(i)
        for rows in by_type.values():
            parts.append(delete_block_bytes(ctx.instant, schema, [keys[i] for i in rows],
                                            [target.partition] * len(rows), [ordering[i] for i in rows]))
    content = b"".join(parts)
    ctx.storage.write(log.path, content)
    # Hudi 1.x's stat of a log write: the writing instant as previous commit, no base file,
    # only the file written (v8 spec §2.3)
    stat = WriteStat(target.file_id, target.partition, log.path, named,
                     num_writes=len(records), num_deletes=len(deletes),
                     num_update_writes=len(records) - inserts, num_inserts=inserts,
                     total_write_bytes=len(content), file_size=len(content),
                     upsert_ms=int((time.monotonic() - start) * 1000), delta={
                         "logVersion": log.version,
                         "logOffset": 0,
                         "baseFile": target.base_file.name if target.base_file and not ctx.log_by_instant else "",
                         "logFiles": ([] if ctx.log_by_instant else [f.name for f in target.log_files]) + [log.name],
                         "recordsStats": {"val": None},
                     }, new_keys=records.keys if inserts else None,
                     column_ranges=None if ctx.stats_columns is None else  # (the records written)
                     tuple(ranges_of_records(table, log.name, list(ctx.stats_columns))))
    return stat


