"""Vectorised record merging of one file slice: base records + log blocks -> one Arrow table.

Semantics (Java's HoodieMergedLogRecordScanner and payloads, spec §7.4 and §13 step 6):
- between log records of a key, the larger ordering value wins; ties go to the later record;
- a delete-block entry removes the buffered record unless it carries a non-natural ordering
  value of the same type that is smaller than the buffered record's; after a delete, a later
  record always wins (natural order);
- a surviving delete removes the base record; a surviving record replaces the base record,
  except under DefaultHoodieRecordPayload when the base record's ordering value is larger;
- a record with `_hoodie_is_deleted = true` that wins is a delete.
The fold runs in rounds (one per event rank within a key), each round vectorised over keys.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .config import COMMIT_TIME_ORDERING, DEFAULT_PAYLOAD
from .formats.log import DataBlock, DeleteBlock
from .formats.log.blocks import wrapper_name
from .schema import IS_DELETED, conform, promote

KEY = "_hoodie_record_key"
_NONE, _DATA, _DEL = 0, 1, 2


@dataclass(frozen=True)
class MergeSpec:
    """How records of one table merge."""

    fields: tuple[str, ...]  # the ordering fields (v9 allows several: compared as a tuple), or none
    base_ordering_wins: bool  # DefaultHoodieRecordPayload

    @staticmethod
    def of(config) -> MergeSpec:
        """The merge of a table (`TableConfig`): its ordering field(s), and whether the base
        record's ordering value counts (DefaultHoodieRecordPayload)."""
        if config.version >= 8 and config.merge_mode == COMMIT_TIME_ORDERING:  # the later record wins
            return MergeSpec((), False)
        return MergeSpec(tuple(config.ordering_fields), config.payload_class == DEFAULT_PAYLOAD)


def _ordering_array(values: list, arrow_type: pa.DataType) -> pa.Array:
    if pa.types.is_date32(arrow_type):
        return pa.array(values, pa.int32()).cast(arrow_type)
    if pa.types.is_timestamp(arrow_type):
        return pa.array(values, pa.int64()).cast(pa.timestamp("us", arrow_type.tz)).cast(arrow_type)
    return pa.array(values, arrow_type)


KeyDeriver = Callable[[pa.Table], pa.Array]
"""Record keys of rows from their key fields (the table's key generator)."""


def record_keys(table: pa.Table, derive: KeyDeriver | None) -> pa.Array:
    """`_hoodie_record_key` of each row; where it is null (populate.meta.fields=false: Java
    writes null meta values in base files and log blocks) the key from the key fields."""
    stored = table.column(KEY).combine_chunks().cast(pa.string())
    if derive is None or stored.null_count == 0 or table.num_rows == 0:
        return stored
    if stored.null_count == len(stored):
        return _plain(derive(table)).cast(pa.string())
    missing = stored.is_null()
    derived = _plain(derive(table.filter(missing))).cast(pa.string())
    where = np.maximum(np.cumsum(missing.to_numpy(zero_copy_only=False)) - 1, 0)
    return pc.if_else(missing, derived.take(pa.array(where)), stored)


def _plain(arr) -> pa.Array:
    return arr.combine_chunks() if isinstance(arr, pa.ChunkedArray) else arr


def merge_slice(base: pa.Table | None, blocks: list[DataBlock | DeleteBlock], schema: pa.Schema,
                spec: MergeSpec, columns: list[str] | None = None, info: dict | None = None,
                derive_keys: KeyDeriver | None = None) -> pa.Table:
    """Merge a slice's base records (conformed to `schema`) with its visible log blocks, in order.

    `schema` is the output schema; it must hold `_hoodie_record_key` and, when merging by
    ordering, the ordering field. `info` receives `base_rows_dropped` and `source_block` (per
    output row, the index in `blocks` of the block it comes from, -1 for the base). With
    `derive_keys` (tables without meta fields; `schema` then holds the record key fields) null
    keys are derived for matching; the output keeps the stored meta values.
    """
    read_cols = None if columns is None else schema.names + [IS_DELETED]
    data_parts, data_seq = [], []
    del_keys: list[str] = []
    del_wrappers: list = []
    del_seq: list[int] = []
    for b, block in enumerate(blocks):
        if isinstance(block, DataBlock):
            t = conform(block.records(read_cols), _with_flag(schema))
            data_parts.append(t)
            data_seq.append(np.full(t.num_rows, b, dtype=np.int64))
        else:
            del_keys.extend(block.keys)
            del_wrappers.extend(block.ordering)
            del_seq.extend([b] * len(block.keys))
    if base is None:
        base = schema.empty_table()
    if info is not None:
        info["base_rows_dropped"] = False
        info["source_block"] = np.full(base.num_rows, -1, np.int64)
    if not data_parts and not del_keys:
        return base
    flagged = _with_flag(schema)
    logs = pa.concat_tables(data_parts) if data_parts else flagged.empty_table()
    n_data, n_del = logs.num_rows, len(del_keys)
    # events: data rows first, then delete entries; ordered by (block, row) within a key
    seq = np.concatenate([
        np.concatenate(data_seq) * (1 << 32) + np.arange(n_data) if n_data else np.zeros(0, np.int64),
        np.asarray(del_seq, dtype=np.int64) * (1 << 32) + np.arange(n_del),
    ])
    event_keys = pa.concat_arrays([record_keys(logs, derive_keys),
                                   pa.array(del_keys, pa.string())])
    is_del = np.concatenate([np.zeros(n_data, bool), np.ones(n_del, bool)])

    # one rank space for base, data and delete ordering values (tuples, for several fields)
    fields = spec.fields
    has_ordering = bool(fields) and all(f in schema.names for f in fields)
    natural = np.ones(n_del, bool)
    if has_ordering:
        types = [schema.field(f).type for f in fields]
        values, natural = _delete_values(del_wrappers, [wrapper_name(t) for t in types])
        columns = [pa.concat_arrays([promote(base.column(f).combine_chunks(), t),
                                     promote(logs.column(f).combine_chunks(), t), _ordering_array(v, t)])
                   for f, t, v in zip(fields, types, values, strict=True)]
        ranks = _dense_ranks(columns)
        base_rank, event_rank = ranks[: base.num_rows], ranks[base.num_rows :]
    else:
        base_rank = np.zeros(base.num_rows, np.int64)
        event_rank = np.zeros(n_data + n_del, np.int64)

    # key codes over the events, then the fold, round by round
    uniq = pc.unique(event_keys)
    code = pc.index_in(event_keys, value_set=uniq).to_numpy().astype(np.int64)
    order = np.lexsort((seq, code))
    sorted_code = code[order]
    starts = np.r_[0, np.nonzero(np.diff(sorted_code))[0] + 1]
    counts = np.diff(np.r_[starts, len(order)])
    rank_in_group = np.arange(len(order)) - np.repeat(starts, counts)
    nkeys = len(uniq)
    kind = np.zeros(nkeys, np.int8)
    state_rank = np.zeros(nkeys, np.int64)
    state_event = np.full(nkeys, -1, np.int64)
    for r in range(int(counts.max()) if len(counts) else 0):
        sel = rank_in_group == r
        ev = order[sel]
        k = sorted_code[sel]
        d = is_del[ev]
        # data events
        dk, de = k[~d], ev[~d]
        win = (kind[dk] != _DATA) | (event_rank[de] >= state_rank[dk])
        kind[dk[win]] = _DATA
        state_rank[dk[win]] = event_rank[de[win]]
        state_event[dk[win]] = de[win]
        # delete events
        xk, xe = k[d], ev[d]
        nat = natural[xe - n_data]
        ignore = (kind[xk] == _DATA) & ~nat & (state_rank[xk] > event_rank[xe])
        apply_k, apply_e = xk[~ignore], xe[~ignore]
        kind[apply_k] = _DEL
        state_rank[apply_k] = event_rank[apply_e]
        state_event[apply_k] = apply_e

    # merge with the base records, in base order: a winning log record replaces its base
    # record in place (Java's merge order), a delete drops it, new keys come last
    base_keys = record_keys(base, derive_keys)
    pos = pc.index_in(base_keys, value_set=uniq).fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)
    n_base = base.num_rows
    deleted_flag = _deleted_flags(logs)
    replace_with = np.full(n_base, -1, np.int64)
    dropped = np.zeros(n_base, bool)
    in_base = np.zeros(nkeys, bool)
    base_idx = np.nonzero(pos >= 0)[0]
    pk = pos[base_idx]
    in_base[pk] = True
    key_kind = kind[pk]
    dropped[base_idx[key_kind == _DEL]] = True
    data_hit = key_kind == _DATA
    if data_hit.any():
        bi, kk = base_idx[data_hit], pk[data_hit]
        log_wins = np.ones(len(bi), bool)
        if has_ordering and spec.base_ordering_wins:
            log_wins = ~(base_rank[bi] > state_rank[kk])
        ev = state_event[kk]
        dropped[bi[log_wins & deleted_flag[ev]]] = True
        keep = log_wins & ~deleted_flag[ev]
        replace_with[bi[keep]] = ev[keep]
    new_keys = np.nonzero((kind == _DATA) & ~in_base)[0]
    new_rows = state_event[new_keys]
    new_rows = np.sort(new_rows[~deleted_flag[new_rows]])
    if info is not None:
        info["base_rows_dropped"] = bool(dropped.any())
    survivors = np.nonzero(~dropped)[0]
    order = np.concatenate([np.where(replace_with[survivors] >= 0, n_base + replace_with[survivors], survivors),
                            n_base + new_rows])
    if info is not None:  # the block each output row comes from (-1: the base file)
        log_block = np.concatenate(data_seq) if data_seq else np.zeros(0, np.int64)
        info["source_block"] = np.where(order >= n_base, log_block[np.maximum(order - n_base, 0)], -1) \
            if len(log_block) else np.full(len(order), -1, np.int64)
    if not dropped.any() and not (replace_with >= 0).any() and not len(new_rows):
        return base
    combined = pa.concat_tables([base, conform(logs, schema)])
    return combined.take(pa.array(order, pa.int64()))


def _delete_values(wrappers: list, expected: list[str]) -> tuple[list[list], np.ndarray]:
    """Per ordering field, each delete entry's value, and which entries are in natural order
    (their values then None): no value, `IntWrapper(0)` (Java's default), another type than the
    field's, or another number of values than the table has ordering fields."""
    natural = np.ones(len(wrappers), bool)
    values: list[list] = [[None] * len(wrappers) for _ in expected]
    for i, w in enumerate(wrappers):
        parts = w if isinstance(w, list) else [w]
        if len(parts) != len(expected) or any(p is None for p in parts):
            continue
        if all(p[0] == "IntWrapper" and p[1] == 0 for p in parts):
            continue
        if any(p[0] != e for p, e in zip(parts, expected, strict=True)):
            continue
        natural[i] = False
        for j, p in enumerate(parts):
            values[j][i] = p[1]
    return values, natural


def _dense_ranks(columns: list[pa.Array]) -> np.ndarray:
    """Dense ranks of the rows of `columns` compared as tuples, element by element (nulls
    first), as Java compares several ordering fields."""
    if len(columns) == 1:
        ranks = pc.rank(columns[0], sort_keys=[("", "ascending", "at_start")], tiebreaker="dense")
        return ranks.to_numpy().astype(np.int64)
    names = [f"o{j}" for j in range(len(columns))]
    table = pa.table(dict(zip(names, columns, strict=True)))
    idx = pc.sort_indices(table, sort_keys=[(n, "ascending", "at_start") for n in names])
    ordered = table.take(idx)
    n = ordered.num_rows
    new = np.zeros(n, bool)
    if n:
        new[0] = True
    for col in ordered.columns if n > 1 else ():
        a = col.combine_chunks()
        prev, cur = a.slice(0, n - 1), a.slice(1)
        # a value after a null, or a different value (Kleene or: null vs value is a change)
        differ = pc.or_kleene(pc.xor(prev.is_null(), cur.is_null()), pc.not_equal(prev, cur))
        new[1:] |= pc.fill_null(differ, False).to_numpy(zero_copy_only=False).astype(bool)
    ranks = np.empty(n, np.int64)
    ranks[idx.to_numpy()] = np.cumsum(new)
    return ranks


def _with_flag(schema: pa.Schema) -> pa.Schema:
    if IS_DELETED in schema.names:
        return schema
    return schema.append(pa.field(IS_DELETED, pa.bool_()))


def _deleted_flags(logs: pa.Table) -> np.ndarray:
    if IS_DELETED not in logs.column_names or logs.num_rows == 0:
        return np.zeros(logs.num_rows, bool)
    return pc.fill_null(logs.column(IS_DELETED), False).to_numpy(zero_copy_only=False).astype(bool)
