"""Validate and shape an incoming batch before anything touches the table.

Bad input (missing or null keys, missing precombine or partition fields, schema clashes)
fails here, so the table stays unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import partial

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..engine import Engine, take_column
from ..errors import InvalidOptionError, MissingFieldError, SchemaError
from ..keys import KeyGenerator
from ..schema import IS_DELETED, META_FIELDS, conform, evolve, from_avro, known_names, resolve_names
from ..vocabulary import OPERATIONS


def to_arrow(data, where: str) -> pa.Table:
    """A `pyarrow.Table` from a table, batch, reader, or anything Arrow can read as a stream."""
    if isinstance(data, pa.Table):
        return data
    if isinstance(data, pa.RecordBatch):
        return pa.Table.from_batches([data])
    if isinstance(data, pa.RecordBatchReader):
        return data.read_all()
    if hasattr(data, "__arrow_c_stream__"):
        return pa.RecordBatchReader.from_stream(data).read_all()
    if isinstance(data, (list, tuple)) and all(isinstance(b, pa.RecordBatch) for b in data) and data:
        return pa.Table.from_batches(list(data))
    raise InvalidOptionError(f"{where}: cannot read {type(data).__name__} as Arrow data")


@dataclass(frozen=True)
class Batch:
    """An incoming batch, deduplicated, conformed to the table schema, with keys and paths.

    Frozen: `take` may return the batch itself, so a changed copy is made with `with_deletes`
    (or `dataclasses.replace`), never by assigning to a shared batch."""

    data: pa.Table  # user columns in table-schema order (no meta columns)
    keys: pa.Array
    partitions: pa.Array
    is_delete: np.ndarray  # bool per row: delete this key
    ordering: pa.Array | None  # precombine values, or None
    avro_schema: dict | None  # table schema after this write (without meta fields); None before conform_batch

    def __len__(self) -> int:
        return len(self.keys)

    def concat(self, other: Batch) -> Batch:
        """This batch followed by `other` (a missing ordering column becomes nulls)."""
        ordering = None
        if self.ordering is not None or other.ordering is not None:
            typ = (self.ordering if self.ordering is not None else other.ordering).type
            ordering = pa.concat_arrays([o if o is not None else pa.nulls(len(b), typ)
                                         for o, b in ((self.ordering, self), (other.ordering, other))])
        return Batch(pa.concat_tables([self.data, other.data]), pa.concat_arrays([self.keys, other.keys]),
                     pa.concat_arrays([self.partitions, other.partitions]),
                     np.concatenate([self.is_delete, other.is_delete]), ordering, self.avro_schema)

    def as_deletes(self) -> Batch:
        """The same keys as deletes by key (natural order: no ordering value)."""
        return replace(self, is_delete=np.ones(len(self), dtype=bool), ordering=None)

    def slice(self, start: int, stop: int) -> Batch:
        """Rows start..stop, without copying."""
        n = int(stop) - int(start)
        return Batch(self.data.slice(start, n), self.keys.slice(start, n), self.partitions.slice(start, n),
                     self.is_delete[start:stop], None if self.ordering is None else self.ordering.slice(start, n),
                     self.avro_schema)

    def take(self, rows: np.ndarray, engine: Engine | None = None) -> Batch:
        """These rows; with an engine, the columns are gathered in parallel."""
        if len(rows) == len(self) and np.array_equal(rows, np.arange(len(self))):
            return self  # every row, in order
        idx = pa.array(rows, pa.int64())
        if engine is not None:
            columns = engine.map(partial(take_column, idx), self.data.columns)
            data = pa.Table.from_arrays(columns, schema=self.data.schema)
        else:
            data = self.data.take(idx)
        return Batch(data, self.keys.take(idx), self.partitions.take(idx),
                     self.is_delete[rows], None if self.ordering is None else self.ordering.take(idx),
                     self.avro_schema)


def prepare(data: pa.Table, operation: str, *, keygen: KeyGenerator, precombine: str | None, where: str,
            combine: bool, is_global: bool) -> Batch:
    """Check, key and dedupe one batch for `operation`; no table state is read (the schema
    comes later: `conform_batch`). Its `avro_schema` is None until then."""
    operation = OPERATIONS.parse(operation, where)
    data = resolve_columns(data, resolvable_names(keygen, precombine), where)
    data = data.drop_columns([c for c in data.column_names if c in META_FIELDS])
    is_delete_op = operation == "delete"
    keygen.check_fields(data, partition=not (is_delete_op and is_global))
    if precombine and not is_delete_op and precombine not in data.column_names:
        raise MissingFieldError(f"{where}: the data has no precombine field {precombine!r}; "
                                f"columns: {data.column_names}")
    keys = keygen.record_keys(data)
    if is_delete_op and is_global and any(f not in data.column_names for f in keygen.partition_fields):
        partitions = pa.repeat(pa.scalar("", pa.string()), len(data))
    else:
        partitions = keygen.partition_paths(data)
    if is_delete_op:
        is_delete = np.ones(len(data), dtype=bool)
    else:
        is_delete = np.zeros(len(data), dtype=bool)
        if IS_DELETED in data.column_names:
            flag = data.column(IS_DELETED)
            if not pa.types.is_boolean(flag.type):
                raise SchemaError(f"{where}: column {IS_DELETED!r} must be boolean, not {flag.type}")
            is_delete = pc.fill_null(flag, False).to_numpy(zero_copy_only=False).astype(bool)
    ordering = None  # a delete by key carries no ordering value: it always wins
    if precombine and not is_delete_op:
        ordering = data.column(precombine).combine_chunks()
    batch = Batch(data, keys, partitions, is_delete, ordering, None)
    if combine and len(batch) > 1 and len(pc.unique(keys)) < len(batch):
        batch = batch.take(dedupe_rows(batch, by_partition=not is_global))  # (unique keys: nothing to do)
    return batch


def conform_batch(batch: Batch, operation: str, *, precombine: str | None, table_avro: dict | None,
                  table_name: str, where: str, local_timestamps: bool = False) -> Batch:
    """The batch in the table's schema after this write (evolved by the batch's columns;
    `local_timestamps`: new naive timestamp columns are timestamp-without-time-zone)."""
    if operation == "delete":
        avro = table_avro or evolve(None, batch.data.schema, table_name, where, local_timestamps=local_timestamps)
        return replace(batch, avro_schema=avro)
    data = resolve_columns(batch.data, known_names(table_avro, ()), where)
    avro = evolve(table_avro, data.schema, table_name, where, local_timestamps=local_timestamps)
    data = conform(data, from_avro(avro), where)
    ordering = data.column(precombine).combine_chunks() if precombine else None
    return replace(batch, data=data, ordering=ordering, avro_schema=avro)


def resolvable_names(keygen: KeyGenerator, precombine: str | None, table_avro: dict | None = None) -> list[str]:
    """The names incoming columns resolve to, ignoring case: meta, key, partition and ordering
    fields, and the table schema's columns."""
    return known_names(table_avro, [*keygen.record_key_fields, *keygen.partition_fields,
                                    *([precombine] if precombine else [])])


def resolve_columns(data: pa.Table, known: list[str], where: str) -> pa.Table:
    """`data` with its columns named as the `known` names they match ignoring case
    (`schema.resolve_names`)."""
    renames = resolve_names(data.column_names, known, where)
    return data.rename_columns([renames.get(n, n) for n in data.column_names]) if renames else data


def combine_order(ordering: str | None, positions: tuple[str, ...]) -> list[tuple[str, str]]:
    """The combine rule, as the sort keys (column, "descending") that put each key's winner
    first: the largest ordering value (a null is the smallest), then the latest source
    position (`positions`, most significant first). This is Hudi's preCombine: the payload
    with the larger ordering value wins, the newer record on equal values; Hudi's newer is the
    later one in its input's order (`HoodieWriteHelper.deduplicateRecords`). Both engines
    combine by these keys; each says what a row's source position is (`dedupe_rows`: its
    index in the batch; Spark: the file it was read from, then its place in the DataFrame)."""
    return [(column, "descending") for column in ([ordering] if ordering else []) + list(positions)]


def dedupe_rows(batch: Batch, *, by_partition: bool) -> np.ndarray:
    """Rows that survive precombine (`combine_order`, the position being the row's index)."""
    n = len(batch)
    key = pc.binary_join_element_wise(batch.partitions, batch.keys, "\x00") if by_partition else batch.keys
    cols = {"k": key, "i": pa.array(np.arange(n, dtype=np.int64))}
    if batch.ordering is not None:
        cols["o"] = batch.ordering
    rule = combine_order("o" if batch.ordering is not None else None, ("i",))
    t = pa.table(cols)
    sort = [("k", "ascending")] + [(column, direction, "at_end") for column, direction in rule]  # nulls smallest
    order = pc.sort_indices(t, sort_keys=sort).to_numpy()
    sorted_keys = t.column("k").take(pa.array(order)).combine_chunks()
    if n == 0:
        return order
    first = np.ones(n, dtype=bool)
    first[1:] = pc.not_equal(sorted_keys[1:], sorted_keys[:-1]).to_numpy(zero_copy_only=False)
    return np.sort(order[first])
