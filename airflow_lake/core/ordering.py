"""Ordering values: what "the larger ordering value wins" compares.

A table orders its records by one field (`hoodie.table.precombine.field`, v6 and v8) or by
several (`hoodie.table.ordering.fields=a,b`, v9), compared as a tuple, element by element, as
Java compares them. With one field the comparison is on the field itself; with several, on an
order-preserving binary key of the tuple (`ordering_key`): each element a presence byte (null
first) and a byte string that compares, unsigned byte by byte, as the value does (integers
big-endian with the sign bit flipped, floats by their IEEE bits made monotone, strings and bytes
with zero bytes escaped and a terminator), so one binary comparison, sort or join orders tuples
on both engines. The write path carries it in the work column `ORDER`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .errors import UnsupportedFeatureError
from .schema import promote

ORDER = "_al_order"  # the write path's work column holding the key of several ordering fields


def ordering_column(fields: Sequence[str]) -> str | None:
    """The column a write compares ordering values by: the field itself, `ORDER` for several
    fields, None without ordering."""
    if not fields:
        return None
    return fields[0] if len(fields) == 1 else ORDER


def stored_wins(incoming: pa.Array, stored: pa.Array, deletes: np.ndarray) -> np.ndarray:
    """Where the stored record keeps its place against the incoming one (DefaultHoodieRecordPayload):
    its ordering value is the larger, a null being the smallest (an incoming null loses to a
    stored value; a stored null, or an equal value, to the incoming record). A delete without
    an ordering value (`deletes`: which incoming rows delete) is a delete by key: it always wins
    (a delete operation's, a partition move's; a `_hoodie_is_deleted` row with a null ordering
    value the routing let through: `routing.located_rule`)."""
    smaller = pc.fill_null(pc.less(incoming, stored), False).to_numpy(zero_copy_only=False).astype(bool)
    only_stored = pc.and_(pc.is_null(incoming), pc.is_valid(stored)).to_numpy(zero_copy_only=False).astype(bool)
    return smaller | (only_stored & ~deletes)


def ordering_key(table: pa.Table, fields: Sequence[str], types: Sequence[pa.DataType] | None = None) -> pa.Array:
    """The ordering value of each row of `table`: the field itself (promoted to `types[0]`) for
    one field, the binary key of the tuple for several (each field promoted to its type in
    `types` first, so that stored and incoming values encode alike)."""
    columns = []
    for i, name in enumerate(fields):
        col = table.column(name)
        col = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
        if types is not None and not col.type.equals(types[i]):
            col = promote(col, types[i])
        columns.append(col)
    if len(columns) == 1:
        return columns[0]
    parts: list[pa.Array] = []
    for name, col in zip(fields, columns, strict=True):
        valid = col.is_valid()
        parts.append(pc.if_else(valid, pa.scalar(b"\x01"), pa.scalar(b"\x00")))
        parts.append(pc.if_else(valid, _encode(col, name), pa.scalar(b"")))
    return pc.binary_join_element_wise(*parts, pa.scalar(b""))


def _encode(col: pa.Array, name: str) -> pa.Array:
    t = col.type
    n = len(col)
    if pa.types.is_floating(t):
        values = np.asarray(col.cast(pa.float64()).fill_null(0.0))
        bits = np.where(np.isnan(values), np.nan, values).view(np.uint64)  # every NaN the greatest, as Java
        negative = (bits >> np.uint64(63)).astype(bool)
        return _fixed(np.where(negative, ~bits, bits | np.uint64(1 << 63)), n)
    if pa.types.is_boolean(t) or pa.types.is_integer(t) or pa.types.is_temporal(t):
        if pa.types.is_timestamp(t) or pa.types.is_duration(t) or pa.types.is_time(t) or pa.types.is_date(t):
            col = col.view(pa.int64() if t.bit_width == 64 else pa.int32())
        if pa.types.is_unsigned_integer(t) and t.bit_width == 64:
            return _fixed(np.asarray(col.fill_null(0)), n)
        ints = np.asarray(col.cast(pa.int64()).fill_null(0)).view(np.uint64)
        return _fixed(ints ^ np.uint64(1 << 63), n)
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t) or \
            pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
        raw = col.cast(pa.binary())
        escaped = pc.replace_substring(raw, b"\x00", b"\x00\xff")
        return pc.binary_join_element_wise(escaped.fill_null(b""), pa.scalar(b"\x00\x00"), pa.scalar(b""))
    raise UnsupportedFeatureError(f"ordering field {name!r} of type {t}: a table with several ordering fields is "
                                  "written by airflow-lake for integer, floating, boolean, date, time, timestamp, "
                                  "string and bytes fields only")


def _fixed(values: np.ndarray, n: int) -> pa.Array:
    """8-byte big-endian keys of unsigned 64-bit values, as binary."""
    data = values.astype(">u8").tobytes()
    return pa.FixedSizeBinaryArray.from_buffers(pa.binary(8), n, [None, pa.py_buffer(data)]).cast(pa.binary())


def ordering_key_of(fields: tuple[str, ...], *columns: pa.Array) -> pa.Array:
    """`ordering_key` of the `fields`' columns given one by one (an engine's Arrow UDF)."""
    return ordering_key(pa.Table.from_arrays(list(columns), names=list(fields)), fields)
