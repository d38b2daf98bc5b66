"""Validate and shape an incoming batch before anything touches the table.

Bad input (missing or null keys, missing precombine or partition fields, schema clashes)
fails here, so the table stays unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial

import numpy as np
import pyarrow as pa

from ..engine import Engine, take_column
from ..errors import InvalidOptionError, MissingFieldError, SchemaError, UnsupportedFeatureError
from ..keys import KeyGenerator
from ..schema import IS_DELETED, known_names


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




def check_columns(keygen, ordering: Sequence[str], schema: pa.Schema, operation: str, is_global: bool,
                  where: str) -> None:
    """The input has the key generator's fields, the ordering field(s) (but for a delete by key)
    and a boolean `_hoodie_is_deleted` if any."""
    is_delete_op = operation == "delete"
    keygen.check_fields(pa.Table.from_batches([], schema), partition=not (is_delete_op and is_global))
    nested = [f for f in ordering if f not in schema.names and "." in f]
    if nested:
        raise UnsupportedFeatureError(f"{where}: the ordering (precombine) field {nested[0]!r} is a nested field, "
                                      "which airflow-lake does not order records by (top-level fields only)")
    missing = [f for f in ordering if f not in schema.names]
    if missing and not is_delete_op:
        what = f"precombine field {missing[0]!r}" if len(ordering) == 1 else \
            f"ordering fields {missing} (of {list(ordering)})"
        raise MissingFieldError(f"{where}: the data has no {what}; columns: {schema.names}")
    if not is_delete_op and IS_DELETED in schema.names and not pa.types.is_boolean(schema.field(IS_DELETED).type):
        raise SchemaError(f"{where}: column {IS_DELETED!r} must be boolean, not {schema.field(IS_DELETED).type}")




def resolvable_names(keygen: KeyGenerator, ordering: Sequence[str], table_avro: dict | None = None) -> list[str]:
    """The names incoming columns resolve to, ignoring case: meta, key, partition and ordering
    fields, and the table schema's columns."""
    return known_names(table_avro, [*keygen.record_key_fields, *keygen.partition_fields, *ordering])


def combine_order(ordering: str | None, positions: tuple[str, ...]) -> list[tuple[str, str]]:
    """The combine rule, as the sort keys (column, "descending") that put each key's winner
    first: the largest ordering value (a null is the smallest), then the latest source
    position (`positions`, most significant first). This is Hudi's preCombine: the payload
    with the larger ordering value wins, the newer record on equal values; Hudi's newer is the
    later one in its input's order (`HoodieWriteHelper.deduplicateRecords`). Both engines
    combine by these keys; each says what a row's source position is (the local engine: its
    index in the batch; Spark: the file it was read from, then its place in the DataFrame)."""
    return [(column, "descending") for column in ([ordering] if ordering else []) + list(positions)]


