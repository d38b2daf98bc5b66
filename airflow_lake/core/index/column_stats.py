"""Column statistics in the metadata table (v8 spec §5.5a, §5.5b): the `column_stats` partition
(min, max and counts of each indexed column per data file) and `partition_stats` (the same per
data partition). Keys, the `HoodieMetadataColumnStats` record of index versions V1 and V2, the
statistics of a new base file (its parquet footer) or log file (the records written), the merge
rule, and data skipping.

Values in a `ColumnRange` are Python values ordered as the column's type orders them:
bool, int, float, str, bytes; decimals as `decimal.Decimal` (at the column's scale); dates as
`datetime.date`; timestamps (zoned or local) as int **epoch microseconds** (a local timestamp:
its wall clock read as UTC; nanosecond bounds widened to whole microseconds); times of day as
int microseconds; UUIDs as their text.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import hashlib
import math
from dataclasses import dataclass, replace
from enum import IntEnum
from functools import partial
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import xxhash

from ..formats.log.blocks import NS
from ..metadata_table import MDT, index_definitions, mdt_timeline, merge_mdt_slice, partition_view, readable_instants
from ..schema import META_FIELDS
from ..storage import Storage
from ..timeline.active import ActiveTimeline

COLUMN_STATS, PARTITION_STATS = "column_stats", "partition_stats"
COLUMN_STATS_TYPE, PARTITION_STATS_TYPE = 3, 6  # `HoodieMetadataRecord.type` (§5.3)
V1, V2 = "V1", "V2"  # index versions (index.json `version`)
XXH64_SEED = 0xFFFFFFFFDABADABA  # Java's int seed 0xdabadaba, sign-extended
NON_PARTITIONED = "."  # the partition id of a non-partitioned table's files
V1_DECIMAL_SCALE = 15  # DecimalWrapper: decimal(30, 15)
OPS = ("=", "!=", "<", "<=", ">", ">=", "in", "is_null", "is_not_null")
_EPOCH = dt.date(1970, 1, 1)
_EPOCH_DT = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
_WIDE = decimal.Context(prec=200)
_PER_SECOND = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}


class ValueType(IntEnum):
    """`HoodieValueTypeInfo.typeOrdinal` of index version V2: positions in Java's `ValueType`."""

    V1 = 0
    NULL = 1
    BOOLEAN = 2
    INT = 3
    LONG = 4
    FLOAT = 5
    DOUBLE = 6
    STRING = 7
    BYTES = 8
    FIXED = 9
    DECIMAL = 10
    UUID = 11
    DATE = 12
    TIME_MILLIS = 13
    TIME_MICROS = 14
    TIMESTAMP_MILLIS = 15
    TIMESTAMP_MICROS = 16
    TIMESTAMP_NANOS = 17
    LOCAL_TIMESTAMP_MILLIS = 18
    LOCAL_TIMESTAMP_MICROS = 19
    LOCAL_TIMESTAMP_NANOS = 20


# the primitive wrapper each V2 value type is stored in
_V2_WRAPPERS = {
    ValueType.BOOLEAN: "BooleanWrapper", ValueType.INT: "IntWrapper", ValueType.LONG: "LongWrapper",
    ValueType.FLOAT: "FloatWrapper", ValueType.DOUBLE: "DoubleWrapper", ValueType.STRING: "StringWrapper",
    ValueType.BYTES: "BytesWrapper", ValueType.FIXED: "BytesWrapper", ValueType.DECIMAL: "BytesWrapper",
    ValueType.UUID: "StringWrapper", ValueType.DATE: "IntWrapper", ValueType.TIME_MILLIS: "IntWrapper",
    ValueType.TIME_MICROS: "LongWrapper", **{t: "LongWrapper" for t in range(ValueType.TIMESTAMP_MILLIS, 21)},
}
# V2 timestamp types (zoned and local) -> the unit of their stored long
_TIMESTAMPS = {ValueType(ValueType.TIMESTAMP_MILLIS + i): unit for i, unit in enumerate(["ms", "us", "ns"] * 2)}


@dataclass(frozen=True)
class ColumnRange:
    """One column's statistics in one data file (column stats) or partition (partition stats);
    values as the module docstring says."""

    file_name: str  # the file name (column stats) or the partition path (partition stats)
    column: str
    min: object  # None: no non-null value (or no statistics)
    max: object
    null_count: int | None
    value_count: int | None  # values including nulls
    total_size: int | None = 0
    total_uncompressed_size: int | None = 0
    is_deleted: bool = False
    is_tight_bound: bool = False


# -- keys (§5.5a, §5.5b) ------------------------------------------------------------------------
def hash_id(text: str, size: int) -> str:
    """Hudi's `HashID` in Base64 (with padding): XXH64 (seed 0xFFFFFFFFDABADABA, 8 bytes
    big-endian) for `size` 64, MD5 for 128, over the UTF-8 bytes of `text`."""
    data = text.encode("utf-8", "replace")  # (Java writes '?' for a lone surrogate too)
    if size == 64:
        digest = xxhash.xxh64(data, seed=XXH64_SEED).digest()
    elif size == 128:
        digest = hashlib.md5(data).digest()
    else:
        raise ValueError(f"hash size {size}: only 64 (XXH64) and 128 (MD5) are used for column stats keys")
    return base64.b64encode(digest).decode("ascii")


def _partition_id(partition: str) -> str:
    return partition or NON_PARTITIONED


def column_stats_key(column: str, partition: str, file_name: str) -> str:
    """The `column_stats` key of a column in a data file (§5.5a): hashes of the column, the
    partition ("." when non-partitioned) and the file's name (no folder), 48 characters."""
    return hash_id(column, 64) + hash_id(_partition_id(partition), 64) + hash_id(file_name, 128)


def partition_stats_key(column: str, partition: str) -> str:
    """The `partition_stats` key of a column in a data partition (§5.5b), 24 characters."""
    return hash_id(column, 64) + hash_id(_partition_id(partition), 64)


# -- statistics of new files ----------------------------------------------------------------------
def ranges_of_parquet(metadata, file_name: str, columns: list[str]) -> list[ColumnRange]:
    """A base file's statistics from its parquet footer (`pyarrow.parquet.FileMetaData`), as
    Hudi writes them (§5.5a): per column, counts and sizes summed over the row groups, min and
    max the extremes of the chunk statistics (None when a chunk with non-null values has none,
    or they are INT96). Columns the file lacks, or nested ones, get no range."""
    schema = metadata.schema
    arrow = schema.to_arrow_schema()
    leaves = {schema.column(i).path: i for i in range(len(schema))}
    out = []
    for name in columns:
        at = leaves.get(name)
        if at is None or arrow.get_field_index(name) < 0:
            continue
        arrow_type = arrow.field(name).type
        lo = hi = None
        nulls: int | None = 0
        values = size = raw_size = 0
        known = schema.column(at).physical_type != "INT96"
        for g in range(metadata.num_row_groups):
            chunk = metadata.row_group(g).column(at)
            values += chunk.num_values
            size += chunk.total_compressed_size
            raw_size += chunk.total_uncompressed_size
            stats = chunk.statistics if chunk.is_stats_set else None
            chunk_nulls = stats.null_count if stats is not None and stats.has_null_count else None
            nulls = None if nulls is None or chunk_nulls is None else nulls + chunk_nulls
            if stats is not None and stats.has_min_max and known:
                try:
                    a = _parquet_value(stats.min_raw, arrow_type, ceil=False)
                    b = _parquet_value(stats.max_raw, arrow_type, ceil=True)
                except (UnicodeDecodeError, ValueError, OverflowError):
                    known = False
                    continue
                lo = a if lo is None or _java_less(a, lo) else lo
                hi = b if hi is None or _java_less(hi, b) else hi
            elif chunk_nulls is None or chunk.num_values > chunk_nulls:
                known = False  # values without bounds: nothing is known
        if not known:
            lo = hi = None
        out.append(ColumnRange(file_name, name, lo, hi, nulls, values, size, raw_size))
    return out


def _parquet_value(raw: Any, t: pa.DataType, *, ceil: bool) -> Any:
    """A parquet statistic (physical value) as a range value of Arrow type `t`."""
    if pa.types.is_decimal(t):
        unscaled = int.from_bytes(raw, "big", signed=True) if isinstance(raw, bytes) else int(raw)
        return _decimal(unscaled, t.scale)
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return raw.decode("utf-8") if isinstance(raw, bytes) else raw
    if pa.types.is_date(t):
        return _EPOCH + dt.timedelta(days=int(raw)) if pa.types.is_date32(t) else \
            _EPOCH + dt.timedelta(milliseconds=int(raw))
    if pa.types.is_timestamp(t) or pa.types.is_time(t):
        return _to_micros(int(raw), t.unit, ceil)
    if pa.types.is_unsigned_integer(t) and int(raw) < 0:
        return int(raw) + (1 << (64 if t.bit_width == 64 else 32))
    return raw


def base_ranges(columns: tuple[str, ...] | None, name: str, footers: list | None) -> tuple | None:
    """A written base file's statistics (from its footer, `footers[0]`), when stats are kept."""
    return None if columns is None or not footers else tuple(ranges_of_parquet(footers[0], name, list(columns)))


def ranges_of_records(table: pa.Table, file_name: str, columns: list[str]) -> list[ColumnRange]:
    """A log file's statistics from the records it holds (§5.5a): min and max of the non-null
    values (in Java's order), null and value counts, sizes 0. A delete-only log (no records):
    counts 0, min and max None. A column the records lack counts as all null."""
    out = []
    n = table.num_rows
    for name in columns:
        if name not in table.column_names:
            out.append(ColumnRange(file_name, name, None, None, n, n, 0, 0))
            continue
        column = table.column(name)
        nulls = column.null_count
        lo, hi = _min_max(column) if n > nulls else (None, None)
        out.append(ColumnRange(file_name, name, lo, hi, nulls, n, 0, 0))
    return out


def _min_max(column: pa.ChunkedArray) -> tuple[Any, Any]:
    """Min and max of a column's non-null values (Arrow kernels; strings with characters above
    U+FFFF are ordered by UTF-16 code units as Java orders them, over their distinct values)."""
    t = column.type
    if pa.types.is_dictionary(t):
        column, t = column.cast(t.value_type), t.value_type
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        if pc.any(pc.match_substring_regex(column, r"[\x{10000}-\x{10FFFF}]")).as_py():
            distinct = pc.unique(column.drop_null()).to_pylist()
            return min(distinct, key=_utf16), max(distinct, key=_utf16)
    if pa.types.is_timestamp(t) or pa.types.is_time(t):
        bounds = pc.min_max(column.cast(pa.int64()))
        return _to_micros(bounds["min"].as_py(), t.unit, False), _to_micros(bounds["max"].as_py(), t.unit, True)
    if pa.types.is_fixed_size_binary(t):
        column = column.cast(pa.binary())
    bounds = pc.min_max(column)
    lo, hi = bounds["min"].as_py(), bounds["max"].as_py()
    if pa.types.is_floating(t) and pc.any(pc.is_nan(column)).as_py():
        hi = math.nan  # Java's Double.compareTo puts NaN above every number
    if pa.types.is_date64(t):
        lo, hi = (v.date() if isinstance(v, dt.datetime) else v for v in (lo, hi))
    return lo, hi


def _to_micros(value: int | None, unit: str, ceil: bool) -> int | None:
    """An epoch (or time-of-day) count in `unit` as microseconds; nanoseconds rounded outwards."""
    if value is None:
        return None
    per = _PER_SECOND[unit]
    if per <= 1_000_000:
        return value * (1_000_000 // per)
    return -((-value) // 1000) if ceil else value // 1000


def _from_micros(value: int, per_second: int, ceil: bool) -> int:
    """Microseconds as a count of 1/`per_second` seconds, rounded outwards."""
    if per_second >= 1_000_000:
        return value * (per_second // 1_000_000)
    step = 1_000_000 // per_second
    return -((-value) // step) if ceil else value // step


def _decimal(unscaled: int, scale: int) -> decimal.Decimal:
    return decimal.Decimal(unscaled).scaleb(-scale, _WIDE)


def _unscaled(value: Any, scale: int) -> int:
    """The unscaled integer of a decimal at `scale` (half up, as Java's setScale would need)."""
    d = decimal.Decimal(value) if not isinstance(value, decimal.Decimal) else value
    return int(d.scaleb(scale, _WIDE).to_integral_value(decimal.ROUND_HALF_UP))


def _java_bytes(n: int) -> bytes:
    """Java `BigInteger.toByteArray`: minimal big-endian two's complement."""
    return n.to_bytes((n.bit_length() if n >= 0 else (~n).bit_length()) // 8 + 1, "big", signed=True)


# -- ordering (Java's) ------------------------------------------------------------------------------
def _utf16(s: str) -> bytes:
    return s.encode("utf-16-be", "surrogatepass")


def _java_less(a: Any, b: Any) -> bool:
    """`a < b` as Java's `compareTo` orders: strings by UTF-16 code units, NaN above numbers."""
    if isinstance(a, str) and isinstance(b, str):
        return _utf16(a) < _utf16(b) if max(a + b, default="") > "\uffff" else a < b
    if isinstance(a, float) and math.isnan(a):
        return False
    if isinstance(b, float) and math.isnan(b):
        return not (isinstance(a, float) and math.isnan(a))
    return a < b


# -- merging (§5.5a) ----------------------------------------------------------------------------------
def merge_ranges(older: ColumnRange, newer: ColumnRange) -> ColumnRange:
    """Two records of one key, combined (`mergeColumnStatsRecords`): a tombstone on either side,
    or a newer tight bound, wins as it is; otherwise the wider min and max, counts and sizes
    summed (None when either is unknown), flags from the newer."""
    if older.is_deleted or newer.is_deleted or newer.is_tight_bound:
        return newer
    lo = older.min if newer.min is None else newer.min if older.min is None else \
        (older.min if _java_less(older.min, newer.min) else newer.min)
    hi = older.max if newer.max is None else newer.max if older.max is None else \
        (newer.max if _java_less(older.max, newer.max) else older.max)

    def total(a: int | None, b: int | None) -> int | None:
        return None if a is None or b is None else a + b

    return replace(newer, min=lo, max=hi, null_count=total(older.null_count, newer.null_count),
                   value_count=total(older.value_count, newer.value_count),
                   total_size=total(older.total_size, newer.total_size),
                   total_uncompressed_size=total(older.total_uncompressed_size, newer.total_uncompressed_size))


def tombstone(file_name: str, column: str, *, partition_stats: bool = False) -> ColumnRange:
    """The record that removes a file's entry (a clean, §5.5a) or a partition's (delete_partition,
    §5.5b; `file_name` is the partition path): `isDeleted`, min and max None, counts and sizes -1
    as Java's `HoodieColumnRangeMetadata.stub` writes them; tight for partition stats."""
    return ColumnRange(file_name, column, None, None, -1, -1, -1, -1, True, partition_stats)


# -- the record (§5.3, §5.5a) -----------------------------------------------------------------------
def _v2_type(t: pa.DataType) -> tuple[ValueType, str | None]:
    """The V2 value type (and `additionalInfo`) of an Arrow type."""
    if pa.types.is_null(t):
        return ValueType.NULL, None
    if pa.types.is_boolean(t):
        return ValueType.BOOLEAN, None
    if pa.types.is_int64(t) or (pa.types.is_unsigned_integer(t) and t.bit_width >= 32):
        return ValueType.LONG, None
    if pa.types.is_integer(t):
        return ValueType.INT, None
    if pa.types.is_float16(t) or pa.types.is_float32(t):
        return ValueType.FLOAT, None
    if pa.types.is_float64(t):
        return ValueType.DOUBLE, None
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return ValueType.STRING, None
    if pa.types.is_fixed_size_binary(t):
        return ValueType.FIXED, None
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return ValueType.BYTES, None
    if pa.types.is_decimal(t):
        return ValueType.DECIMAL, f"{t.precision},{t.scale}"
    if pa.types.is_date(t):
        return ValueType.DATE, None
    if pa.types.is_time32(t):
        return ValueType.TIME_MILLIS, None
    if pa.types.is_time64(t):
        return ValueType.TIME_MICROS, None
    if pa.types.is_timestamp(t):
        unit = {"s": 0, "ms": 0, "us": 1, "ns": 2}[t.unit]
        return ValueType((ValueType.TIMESTAMP_MILLIS if t.tz else ValueType.LOCAL_TIMESTAMP_MILLIS) + unit), None
    if pa.types.is_dictionary(t):
        return _v2_type(t.value_type)
    raise ValueError(f"column statistics of type {t} are not supported (Hudi indexes only top-level scalars)")


def _v2_primitive(value: Any, vt: ValueType, info: str | None, ceil: bool) -> Any:
    """A range value as the V2 primitive of its value type."""
    if vt == ValueType.DECIMAL:
        return _java_bytes(_unscaled(value, int(str(info).split(",")[1])))
    if vt == ValueType.DATE:
        return (value - _EPOCH).days
    if vt == ValueType.TIME_MILLIS:
        return _from_micros(value, 1_000, ceil)
    if vt in _TIMESTAMPS:
        return _from_micros(value, _PER_SECOND[_TIMESTAMPS[vt]], ceil)
    if vt in (ValueType.BYTES, ValueType.FIXED):
        return bytes(value)
    if vt == ValueType.UUID:
        return str(value)
    return value


def _v1_wrapped(value: Any, t: pa.DataType, log_file: bool, ceil: bool) -> tuple[str, Any]:
    """A range value in the wrapper V1 (the Java value's class) uses: parquet and Avro values
    as Hudi reads them (timestamps and times stay raw longs/ints in the column's unit; dates
    are `DateWrapper` from base files and `LocalDateWrapper` from log files)."""
    if pa.types.is_dictionary(t):
        t = t.value_type
    if pa.types.is_boolean(t):
        return "BooleanWrapper", value
    if pa.types.is_int64(t) or (pa.types.is_unsigned_integer(t) and t.bit_width >= 32):
        return "LongWrapper", value
    if pa.types.is_integer(t):
        return "IntWrapper", value
    if pa.types.is_float16(t) or pa.types.is_float32(t):
        return "FloatWrapper", value
    if pa.types.is_float64(t):
        return "DoubleWrapper", value
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "StringWrapper", value
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
        return "BytesWrapper", bytes(value)
    if pa.types.is_decimal(t):
        return "DecimalWrapper", _java_bytes(_unscaled(value, V1_DECIMAL_SCALE))
    if pa.types.is_date(t):
        return ("LocalDateWrapper" if log_file else "DateWrapper"), (value - _EPOCH).days
    if pa.types.is_timestamp(t):
        return "LongWrapper", _from_micros(value, _PER_SECOND[t.unit], ceil)
    if pa.types.is_time32(t):
        return "IntWrapper", _from_micros(value, _PER_SECOND[t.unit], ceil)
    if pa.types.is_time64(t):
        return "LongWrapper", _from_micros(value, _PER_SECOND[t.unit], ceil)
    raise ValueError(f"column statistics of type {t} are not supported (Hudi indexes only top-level scalars)")


def stats_datum(r: ColumnRange, arrow_type: pa.DataType | None, version: str, *, partition_stats: bool = False,
                file_name_field: str | None = None) -> dict:
    """The `HoodieMetadataRecord` of a range (type 3, or 6 with `partition_stats`; `key` empty,
    the key is the HFile row), fastavro-encodable with the MDT's writer schema. `version` "V1"
    wraps min and max by the Java value class and writes no `valueType`; "V2" wraps them per the
    column's value type and writes it (NULL for a tombstone or an empty range). `arrow_type`:
    the column's type (only needed when min or max is set). `file_name_field`: the
    `_hoodie_file_name` base HFiles name themselves in."""
    if version not in (V1, V2):
        raise ValueError(f"column stats index version {version!r}: only V1 and V2 are defined")
    empty = r.is_deleted or (r.min is None and r.max is None and not r.value_count)
    if (r.min is not None or r.max is not None) and arrow_type is None:
        raise ValueError(f"column {r.column!r}: its Arrow type is needed to encode min/max")
    value_type = None
    if version == V1:
        log_file = r.file_name.startswith(".")

        def wrap(v: Any, ceil: bool) -> Any:
            if v is None:
                return None
            name, primitive = _v1_wrapped(v, arrow_type, log_file, ceil)
            return (f"{NS}.{name}", {"value": primitive})
    else:
        vt, info = (ValueType.NULL, None) if empty or arrow_type is None else _v2_type(arrow_type)
        value_type = {"typeOrdinal": int(vt), "additionalInfo": info}

        def wrap(v: Any, ceil: bool) -> Any:
            if v is None or vt == ValueType.NULL:
                return None
            return (f"{NS}.{_V2_WRAPPERS[vt]}", {"value": _v2_primitive(v, vt, info, ceil)})

    stats = {"fileName": r.file_name, "columnName": r.column, "minValue": wrap(r.min, False),
             "maxValue": wrap(r.max, True), "valueCount": r.value_count, "nullCount": r.null_count,
             "totalSize": r.total_size, "totalUncompressedSize": r.total_uncompressed_size,
             "isDeleted": r.is_deleted, "isTightBound": r.is_tight_bound, "valueType": value_type}
    return {"_hoodie_commit_time": None, "_hoodie_commit_seqno": None, "_hoodie_record_key": None,
            "_hoodie_partition_path": None, "_hoodie_file_name": file_name_field, "key": "",
            "type": PARTITION_STATS_TYPE if partition_stats else COLUMN_STATS_TYPE, "filesystemMetadata": None,
            "BloomFilterMetadata": None, "ColumnStatsMetadata": stats, "recordIndexMetadata": None,
            "SecondaryIndexMetadata": None}


def _unwrap(wrapped: Any) -> tuple[str | None, Any]:
    """(wrapper name or None, primitive) of a decoded wrapper union: `(name, record)` as
    fastavro returns it with `return_record_name`, or the bare record."""
    if isinstance(wrapped, tuple):
        name, record = wrapped
        name = name.rsplit(".", 1)[-1]
    else:
        record, name = wrapped, wrapped.get("-type") if isinstance(wrapped, dict) else None
        name = name.rsplit(".", 1)[-1] if name else None
    if isinstance(record, dict) and "wrappedValues" in record:
        return "ArrayWrapper", tuple(_unwrap(w)[1] if w is not None else None for w in record["wrappedValues"] or ())
    return name, record["value"] if isinstance(record, dict) else record


def _decode(wrapped: Any, vt: int, info: str | None, t: pa.DataType | None, ceil: bool) -> Any:
    """A stored min or max as a range value."""
    if wrapped is None:
        return None
    name, v = _unwrap(wrapped)
    if vt != ValueType.V1:
        vt = ValueType(vt)
        if vt == ValueType.NULL:
            return None
        if vt == ValueType.DECIMAL:
            return _decimal(int.from_bytes(v, "big", signed=True), int(str(info).split(",")[1]))
        if vt == ValueType.DATE:
            return _EPOCH + dt.timedelta(days=v)
        if vt == ValueType.TIME_MILLIS:
            return v * 1000
        if vt in _TIMESTAMPS:
            return _to_micros(v, _TIMESTAMPS[vt], ceil)
        return v
    # V1: the wrapper names the Java class; the column's type says what a raw number means
    if t is not None and pa.types.is_dictionary(t):
        t = t.value_type
    if isinstance(v, dt.time):  # (fastavro's time-micros)
        v = ((v.hour * 60 + v.minute) * 60 + v.second) * 1_000_000 + v.microsecond
    if name in ("DateWrapper", "LocalDateWrapper") or (t is not None and pa.types.is_date(t) and isinstance(v, int)):
        return _EPOCH + dt.timedelta(days=v)
    if name == "DecimalWrapper" or isinstance(v, decimal.Decimal):
        d = _decimal(int.from_bytes(v, "big", signed=True), V1_DECIMAL_SCALE) if isinstance(v, bytes) else v
        if t is not None and pa.types.is_decimal(t):  # at the column's scale when that is exact
            at_scale = d.quantize(decimal.Decimal(1).scaleb(-t.scale), context=_WIDE)
            d = at_scale if at_scale == d else d
        return d
    if name in ("TimestampMicrosWrapper", "TimeMicrosWrapper"):
        return v
    if t is not None and (pa.types.is_timestamp(t) or pa.types.is_time(t)) and isinstance(v, int):
        return _to_micros(v, t.unit, ceil)
    return v


def range_of_datum(datum: dict, arrow_type: pa.DataType | None = None) -> ColumnRange:
    """A decoded column-stats or partition-stats record (the `HoodieMetadataRecord`, or its
    `ColumnStatsMetadata`; wrappers as fastavro returns them, best with `return_record_name`)
    as a range. V2 values decode by their `valueType`; V1 values by their wrapper, raw numbers
    of timestamp, time or date columns by `arrow_type` (without it they stay as stored)."""
    stats = datum.get("ColumnStatsMetadata", datum) if isinstance(datum, dict) and "columnName" not in datum \
        else datum
    if isinstance(stats, tuple):
        stats = stats[1]
    if not isinstance(stats, dict):
        raise ValueError("not a column stats record: its ColumnStatsMetadata is empty")
    value_type = stats.get("valueType")
    if isinstance(value_type, tuple):
        value_type = value_type[1]
    vt = value_type["typeOrdinal"] if value_type else ValueType.V1
    info = value_type.get("additionalInfo") if value_type else None
    return ColumnRange(stats.get("fileName") or "", stats.get("columnName") or "",
                       _decode(stats.get("minValue"), vt, info, arrow_type, False),
                       _decode(stats.get("maxValue"), vt, info, arrow_type, True),
                       stats.get("nullCount"), stats.get("valueCount"), stats.get("totalSize"),
                       stats.get("totalUncompressedSize"), bool(stats.get("isDeleted")),
                       bool(stats.get("isTightBound")))


def picked_range(record: dict, types: dict[str, pa.DataType] | None = None) -> ColumnRange | None:
    """A decoded MDT record's range if it is a column or partition stats record (for
    `metadata_table.merge_mdt_slice`, with `merge_ranges`); values as `range_of_datum` gives
    them, by the column's type in `types` (V1 stores timestamps and times in their own unit:
    without the type they stay as stored)."""
    stats = record.get("ColumnStatsMetadata")
    if record.get("type") not in (COLUMN_STATS_TYPE, PARTITION_STATS_TYPE) or not stats:
        return None
    return range_of_datum(record, (types or {}).get(stats.get("columnName")))


def stats_merger(types: dict[str, pa.DataType] | None):
    """The (pick, merge) functions `merge_mdt_slice` merges a stats partition's records by."""
    return partial(picked_range, types=types), merge_ranges


# -- the index definition (§1.2) ------------------------------------------------------------------------
def indexed_columns(storage: Storage, props: dict[str, str], schema: pa.Schema) -> list[str] | None:
    """The columns the table indexes: the `sourceFields` of its index.json `column_stats`
    definition that `schema` (or the meta fields) has as top-level scalars, in their order;
    None when there is no definition."""
    definition = index_definitions(storage, props).get(COLUMN_STATS)
    if definition is None:
        return None
    scalar = {f.name for f in schema if not pa.types.is_nested(f.type)} | set(META_FIELDS)
    return [c for c in definition.get("sourceFields") or [] if c in scalar]


def index_version(storage: Storage, props: dict[str, str], partition: str = COLUMN_STATS) -> str:
    """The index version ("V1", "V2") of `partition`'s index.json entry; partition stats, which
    have none, follow `column_stats`; "V1" when absent."""
    definitions = index_definitions(storage, props)
    definition = definitions.get(partition) or (definitions.get(COLUMN_STATS) if partition == PARTITION_STATS else None)
    return str((definition or {}).get("version") or V1).upper()


# -- reading the partitions ------------------------------------------------------------------------------
def read_stats(storage: Storage, partition: str, data_timeline: ActiveTimeline | None,
               keys: list[str] | None = None, types: dict[str, pa.DataType] | None = None) -> dict[str, ColumnRange]:
    """The merged records of an MDT stats `partition` (key -> range; tombstones kept), of
    every file group (with `keys`, sorted, only those; of each base HFile only the blocks that
    may hold them)."""
    timeline = mdt_timeline(storage)
    view = partition_view(storage, timeline, partition)
    valid = readable_instants(timeline, data_timeline)
    state: dict[str, ColumnRange | None] = {}
    for group in view.file_groups(f"{MDT}/{partition}"):
        base, logs = view.read_slice(group)
        merge_mdt_slice(storage, base.path if base else None, [lf.path for lf in logs], valid, state,
                        *stats_merger(types), keys=keys)
    return {k: v for k, v in state.items() if v is not None}


STATS_PARTITIONS = (COLUMN_STATS, PARTITION_STATS)


# -- data skipping (§5.5a Readers) -----------------------------------------------------------------------
def may_match(r: ColumnRange, op: str, value: Any = None) -> bool:
    """Whether a row of the file (or partition) may satisfy `column <op> value`: False only when
    provably none does. Ops: "=", "!=", "<", "<=", ">", ">=", "in" (value: a list; None members
    never match), "is_null", "is_not_null". Nulls satisfy no comparison. Values of another
    Python type are converted to the range's (datetime -> epoch µs, ISO text -> date, ...);
    when that fails, or bounds are unknown, the answer is True. Strings with characters at or
    above U+E000 are compared in both code point (UTF-8) and UTF-16 (Java) order, and a file
    is skipped only if both orders prove it."""
    if op not in OPS:
        raise ValueError(f"operator {op!r}: expected one of {', '.join(OPS)}")
    if r.is_deleted:
        return True  # (a tombstone says nothing about rows: readers drop it before skipping)
    counts = r.null_count is not None and r.value_count is not None and r.null_count >= 0 and r.value_count >= 0
    if op == "is_null":
        return not (counts and r.null_count == 0)
    all_null = counts and r.null_count >= r.value_count
    if op == "is_not_null":
        return not all_null
    if op == "in":
        if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
            raise ValueError(f"'in' takes a list of values, not {value!r}")
        return any(may_match(r, "=", v) for v in value if v is not None)
    if value is None:
        raise ValueError(f"'{op}' with None: use 'is_null' or 'is_not_null'")
    if all_null:
        return False
    if r.min is None or r.max is None:
        return True
    lo, hi = r.min, r.max
    try:
        if isinstance(lo, decimal.Decimal) and isinstance(value, float):
            lo, hi, v = float(lo), float(hi), value  # (pyarrow compares a decimal column with a float as doubles)
        else:
            v = _coerce(value, lo)
        orders = _signs(v, lo, hi)
    except (TypeError, ValueError, ArithmeticError, OverflowError):
        return True
    if orders is None:
        return True
    if op not in ("=", "!=") and _order_unknown(lo, hi):
        # bounds Java may have taken in UTF-16 (signed byte) order prove nothing about a range
        # compared in code point (unsigned byte) order: only equality is decided in either order
        return True
    if op == "=":
        return any(a >= 0 and b <= 0 for a, b in orders)
    if op == "!=":
        return any(not (a == 0 and b == 0) for a, b in orders)
    if op == "<":
        return any(a > 0 for a, _ in orders)
    if op == "<=":
        return any(a >= 0 for a, _ in orders)
    if op == ">":
        return any(b < 0 for _, b in orders)
    return any(b <= 0 for _, b in orders)  # ">="


def _order_unknown(lo: Any, hi: Any) -> bool:
    """Whether bounds may have been taken in another order than the one a filter compares in:
    strings holding characters at or above U+E000 (UTF-16 and code point orders differ there),
    bytes at or above 0x80 (signed and unsigned)."""
    if isinstance(lo, str) and isinstance(hi, str):
        return max(lo + hi, default="") >= "\ue000"
    if isinstance(lo, bytes) and isinstance(hi, bytes):
        return max(lo + hi, default=0) >= 0x80
    return False


def _sign(a: Any, b: Any) -> int:
    return (a > b) - (a < b)


def _signs(v: Any, lo: Any, hi: Any) -> list[tuple[int, int]] | None:
    """(sign of v - min, sign of v - max) under each order the bounds may have been computed in;
    None when undecidable (NaN)."""
    if any(isinstance(x, float) and math.isnan(x) for x in (v, lo, hi)):
        return None
    if isinstance(v, str) and isinstance(lo, str) and isinstance(hi, str):
        out = [(_sign(v, lo), _sign(v, hi))]
        if max(v + lo + hi, default="") >= "\ue000":
            out.append((_sign(_utf16(v), _utf16(lo)), _sign(_utf16(v), _utf16(hi))))
        return out
    if isinstance(v, bytes) and isinstance(lo, bytes) and isinstance(hi, bytes):
        def signed(b: bytes) -> bytes:  # Java ByteBuffer order: signed bytes
            return (np.frombuffer(b, np.uint8) ^ 0x80).tobytes()
        return [(_sign(v, lo), _sign(v, hi)), (_sign(signed(v), signed(lo)), _sign(signed(v), signed(hi)))]
    return [(_sign(v, lo), _sign(v, hi))]


def _coerce(value: Any, like: Any) -> Any:
    """`value` as the Python type of the range value `like` (TypeError when it has no meaning)."""
    if isinstance(value, np.generic):
        value = value.item() if not isinstance(value, np.datetime64) else value
    if isinstance(like, bool):
        if isinstance(value, (bool, int)):
            return bool(value)
        raise TypeError("not a boolean")
    if isinstance(like, int):
        if isinstance(value, dt.datetime):
            v = value if value.tzinfo else value.replace(tzinfo=dt.timezone.utc)
            return (v - _EPOCH_DT) // dt.timedelta(microseconds=1)
        if isinstance(value, np.datetime64):
            return int(value.astype("datetime64[us]").astype(np.int64))
        if isinstance(value, dt.time):
            return ((value.hour * 60 + value.minute) * 60 + value.second) * 1_000_000 + value.microsecond
        if isinstance(value, (int, float, decimal.Decimal)) and not isinstance(value, bool):
            return value
        raise TypeError("not a number")
    if isinstance(like, float):
        if isinstance(value, (int, float, decimal.Decimal)) and not isinstance(value, bool):
            return value
        raise TypeError("not a number")
    if isinstance(like, decimal.Decimal):
        if isinstance(value, (int, decimal.Decimal)) and not isinstance(value, bool):
            return decimal.Decimal(value)
        if isinstance(value, float):
            return decimal.Decimal(value)
        if isinstance(value, str):
            return decimal.Decimal(value)
        raise TypeError("not a decimal")
    if isinstance(like, dt.date):
        if isinstance(value, dt.datetime):
            raise TypeError("a datetime against a date column")
        if isinstance(value, dt.date):
            return value
        if isinstance(value, str):
            return dt.date.fromisoformat(value)
        if isinstance(value, np.datetime64):
            return value.astype("datetime64[D]").astype(object)
        raise TypeError("not a date")
    if isinstance(like, str):
        if isinstance(value, str):
            return value
        raise TypeError("not a string")
    if isinstance(like, bytes):
        if isinstance(value, (bytes, bytearray, memoryview)):
            return bytes(value)
        if isinstance(value, str):
            return value.encode("utf-8")
        raise TypeError("not bytes")
    raise TypeError(f"range values of type {type(like).__name__}")
