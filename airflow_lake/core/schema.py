"""Table schemas: Arrow <-> Avro conversion (Spark's naming rules, spec §6.1) and evolution.

The Avro schema in each commit's `extraMetadata.schema` is the table schema; Arrow is what
we compute with. Data are normalised to Avro-expressible Arrow types before writing, so
the round trip Arrow -> Avro -> Arrow is exact.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from typing import Any, TypeVar

import pyarrow as pa
import pyarrow.compute as pc

from .errors import SchemaError
from .values import describe_value

ArrowValues = TypeVar("ArrowValues", pa.Array, pa.ChunkedArray)

META_FIELDS = (
    "_hoodie_commit_time",
    "_hoodie_commit_seqno",
    "_hoodie_record_key",
    "_hoodie_partition_path",
    "_hoodie_file_name",
)
META_SCHEMA = pa.schema([pa.field(n, pa.string()) for n in META_FIELDS])
IS_DELETED = "_hoodie_is_deleted"
NAME_RULE = "Avro names must match [A-Za-z_][A-Za-z0-9_]*"
_AVRO_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_INVALID_CHAR = re.compile(r"[^A-Za-z0-9_]")
MAX_DECIMAL_PRECISION = 38  # Spark's DecimalType and Hudi's Avro decimals


# -- names --------------------------------------------------------------------------------


def is_avro_name(name: str) -> bool:
    return _AVRO_NAME.fullmatch(name) is not None


def avro_safe_name(name: str) -> str:
    """Java's `HoodieAvroUtils.sanitizeName`: an invalid first character and every other
    invalid character (per UTF-16 unit, as Java counts them) become `__`."""
    def mask(m: re.Match) -> str:
        return "__" * (2 if ord(m.group()) > 0xFFFF else 1)

    if not name:
        return "_"
    if not re.match(r"[A-Za-z_]", name):
        name = mask(re.match(".", name, re.S)) + name[1:]
    return _INVALID_CHAR.sub(mask, name)


def record_name(table_name: str) -> tuple[str, str]:
    """The Avro record name and namespace Spark's Hudi writer gives a table's schema
    (`AvroSchemaUtils.getAvroRecordQualifiedName`): `<t>_record` in `hoodie.<t>`, with `t`
    the sanitised table name (`trips-v2` -> `trips__v2`)."""
    safe = avro_safe_name(table_name)
    return f"{safe}_record", f"hoodie.{safe}"


def check_schema(schema: pa.Schema, where: str) -> None:
    """Refuse what no Avro schema (hence no Hudi reader) can hold: invalid field names, names
    equal ignoring case (Spark and Hive resolve names so) at any depth, and types without an
    Avro form. Names the column path and the rule."""
    check_unique_names(schema.names, where, "the data")
    for f in schema:
        _check_field(f, f.name, where)


def check_unique_names(names: Sequence[str], where: str, owner: str) -> None:
    """Refuse two names of `owner` (the data, a struct column) that are equal, or equal
    ignoring case: Spark, Hive and Hudi's Spark readers resolve column names ignoring case."""
    seen: dict[str, str] = {}
    for name in names:
        other = seen.setdefault(name.lower(), name)
        if other == name and names.count(name) > 1:
            raise SchemaError(f"{where}: duplicate column names in {owner}: {list(names)}")
        if other != name:
            raise SchemaError(f"{where}: columns {other!r} and {name!r} of {owner} differ only in case; Spark and "
                              "Hive resolve column names ignoring case, so a Hudi table cannot hold both: rename "
                              "or drop one")


def resolve_names(names: Sequence[str], known: Iterable[str], where: str) -> dict[str, str]:
    """Incoming column names resolved as Spark and Hive resolve them, ignoring case:
    `{incoming: known}` for each name that matches a known name (a table column, a key,
    partition or ordering field, a meta field) but for case, so `V` is written into the
    table's `v` and never becomes a second column. Names equal ignoring case within the data,
    or matching two known names, are a `SchemaError` naming them."""
    check_unique_names(names, where, "the data")
    exact = set(known)
    folded: dict[str, list[str]] = {}
    for name in sorted(exact):
        folded.setdefault(name.lower(), []).append(name)
    renames = {}
    for name in names:
        matches = [] if name in exact else folded.get(name.lower(), [])
        if len(matches) > 1:
            raise SchemaError(f"{where}: column {name!r} of the data matches the table's columns {matches} "
                              "ignoring case; rename it to one of them exactly")
        if matches:
            renames[name] = matches[0]
    return renames


def known_names(table_avro: dict | None, fields: Iterable[str]) -> list[str]:
    """The names incoming columns resolve to: meta fields, `fields` (key, partition and
    ordering fields) and the table schema's columns."""
    return [*META_FIELDS, *fields, *(f["name"] for f in (table_avro or {}).get("fields", []))]


def _check_field(f: pa.Field, path: str, where: str) -> None:
    if not is_avro_name(f.name):
        raise SchemaError(f"{where}: column {path!r} has a name Avro does not allow ({NAME_RULE}; "
                          f"Apache Hudi's Spark writer refuses it too); rename it, e.g. to "
                          f"{avro_safe_name(f.name)!r}")
    _check_type(f.type, path, where)


def _check_type(t: pa.DataType, path: str, where: str) -> None:
    if isinstance(t, pa.BaseExtensionType):
        return _check_type(t.storage_type, path, where)
    if pa.types.is_dictionary(t):
        return _check_type(t.value_type, path, where)
    if pa.types.is_struct(t):
        if t.num_fields == 0:
            raise SchemaError(f"{where}: column {path!r} is a struct with no fields, which parquet "
                              "cannot store; drop the column or give the struct a field")
        check_unique_names([c.name for c in t], where, f"struct column {path!r}")
        for c in t:
            _check_field(c, f"{path}.{c.name}", where)
        return None
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t) \
            or pa.types.is_list_view(t) or pa.types.is_large_list_view(t):
        return _check_type(t.value_type, f"{path}[]", where)
    if pa.types.is_map(t):
        return _check_type(t.item_type, f"{path}{{}}", where)
    if pa.types.is_decimal(t) and t.precision > MAX_DECIMAL_PRECISION:
        raise SchemaError(f"{where}: column {path!r} is {t}; Hudi (Spark's DecimalType, Avro decimal) "
                          f"holds at most {MAX_DECIMAL_PRECISION} digits; cast it to decimal128 with "
                          f"precision <= {MAX_DECIMAL_PRECISION}, to float64 or to string")
    try:
        _avro_type(normalize_type(t), "c", "n")
    except SchemaError:
        raise SchemaError(f"{where}: column {path!r} has type {t}, which has no Avro (Hudi) "
                          "equivalent; cast it (durations and intervals to int64, unions and "
                          "run-end-encoded arrays to a plain type) before writing") from None
    return None


def normalize_type(t: pa.DataType) -> pa.DataType:
    """The Arrow type our files store for a user type (what Avro can express). Naive
    timestamps stay naive here; `to_avro` decides whether they are UTC instants."""
    if isinstance(t, pa.BaseExtensionType):
        return normalize_type(t.storage_type)
    if pa.types.is_int8(t) or pa.types.is_int16(t) or pa.types.is_uint8(t) or pa.types.is_uint16(t):
        return pa.int32()
    if pa.types.is_uint32(t) or pa.types.is_uint64(t):
        return pa.int64()
    if pa.types.is_float16(t):
        return pa.float32()
    if pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return pa.string()
    if pa.types.is_large_binary(t) or pa.types.is_binary_view(t) or pa.types.is_fixed_size_binary(t):
        return pa.binary()
    if pa.types.is_dictionary(t):
        return normalize_type(t.value_type)
    if pa.types.is_timestamp(t):
        unit = "ms" if t.unit == "ms" else "us"
        return pa.timestamp(unit, tz="UTC" if t.tz else None)
    if pa.types.is_date64(t):
        return pa.date32()
    if pa.types.is_time(t):
        return pa.time64("us") if t.unit in ("us", "ns") else pa.time32("ms")
    if pa.types.is_decimal(t):
        return pa.decimal128(t.precision, t.scale)
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t) \
            or pa.types.is_list_view(t) or pa.types.is_large_list_view(t):
        return pa.list_(normalize_type(t.value_type))
    if pa.types.is_struct(t):
        return pa.struct([pa.field(f.name, normalize_type(f.type)) for f in t])
    if pa.types.is_map(t):
        return pa.map_(pa.string(), normalize_type(t.item_type))
    if pa.types.is_null(t):
        return pa.string()
    return t


def normalize_schema(schema: pa.Schema) -> pa.Schema:
    return pa.schema([pa.field(f.name, normalize_type(f.type)) for f in schema])


# -- Arrow -> Avro ------------------------------------------------------------------------


def _decimal_size(precision: int) -> int:
    size = 1
    while 2 ** (8 * size - 1) < 10**precision:
        size += 1
    return size


def _avro_type(t: pa.DataType, name: str, namespace: str, local_ts: bool = False) -> Any:
    if pa.types.is_boolean(t):
        return "boolean"
    if pa.types.is_int32(t):
        return "int"
    if pa.types.is_int64(t):
        return "long"
    if pa.types.is_float32(t):
        return "float"
    if pa.types.is_float64(t):
        return "double"
    if pa.types.is_string(t):
        return "string"
    if pa.types.is_binary(t):
        return "bytes"
    if pa.types.is_decimal(t):
        return {"type": "fixed", "name": "fixed", "namespace": f"{namespace}.{name}",
                "size": _decimal_size(t.precision), "logicalType": "decimal",
                "precision": t.precision, "scale": t.scale}
    if pa.types.is_date32(t):
        return {"type": "int", "logicalType": "date"}
    if pa.types.is_timestamp(t):
        # a naive timestamp is a UTC instant (Spark's TimestampType) unless the table asks
        # for timestamp-without-time-zone semantics (docs/core.md, "Types")
        local = "local-" if t.tz is None and local_ts else ""
        unit = "millis" if t.unit == "ms" else "micros"
        return {"type": "long", "logicalType": f"{local}timestamp-{unit}"}
    if pa.types.is_time32(t):
        return {"type": "int", "logicalType": "time-millis"}
    if pa.types.is_time64(t):
        return {"type": "long", "logicalType": "time-micros"}
    if pa.types.is_list(t):
        return {"type": "array", "items": _nullable(_avro_type(t.value_type, name, namespace, local_ts))}
    if pa.types.is_map(t):
        return {"type": "map", "values": _nullable(_avro_type(t.item_type, name, namespace, local_ts))}
    if pa.types.is_struct(t):
        return _record(list(t), name, namespace, local_ts)
    raise SchemaError(f"column {name!r}: type {t} has no Avro equivalent")


def _nullable(avro: Any) -> list:
    return ["null", avro]


def _record(fields: list[pa.Field], name: str, namespace: str, local_ts: bool = False) -> dict:
    full = f"{namespace}.{name}" if namespace else name
    return {
        "type": "record",
        "name": name,
        "namespace": namespace,
        "fields": [avro_field(f, full, local_ts) for f in fields],
    }


def avro_field(f: pa.Field, parent_full_name: str, local_ts: bool = False) -> dict:
    """A nullable Avro field; `local_ts` writes naive timestamps as `local-timestamp-*`."""
    return {"name": f.name, "type": _nullable(_avro_type(f.type, f.name, parent_full_name, local_ts)),
            "default": None}


def to_avro(schema: pa.Schema, table_name: str, local_ts: bool = False) -> dict:
    """Spark's Avro form: record `<t>_record` in namespace `hoodie.<t>` (`t` the sanitised
    table name, see `record_name`), all fields nullable."""
    name, namespace = record_name(table_name)
    return _record(list(schema), name, namespace, local_ts)


def with_meta_fields(avro: dict) -> dict:
    """The schema with the five meta fields first (as base files and log blocks carry it)."""
    meta = [{"name": n, "type": ["null", "string"], "doc": "", "default": None} for n in META_FIELDS]
    return {**avro, "fields": meta + [f for f in avro["fields"] if f["name"] not in META_FIELDS]}


_TEXTS: dict[int, tuple[dict, str]] = {}


def schema_text(avro: dict) -> str:
    """`json.dumps(avro)`, computed once per schema object (every file and block of a commit
    carries the same schema). Schemas are never mutated once built."""
    found = _TEXTS.get(id(avro))
    if found is None or found[0] is not avro:
        if len(_TEXTS) > 64:
            _TEXTS.clear()
        found = _TEXTS[id(avro)] = (avro, json.dumps(avro))
    return found[1]


# -- Avro -> Arrow ------------------------------------------------------------------------


def _strip_null(avro: Any) -> tuple[Any, bool]:
    if isinstance(avro, list):
        branches = [b for b in avro if b != "null"]
        if len(branches) != 1:
            raise SchemaError(f"unsupported Avro union {avro}")
        return branches[0], len(branches) != len(avro)
    return avro, False


def _arrow_type(avro: Any) -> pa.DataType:
    avro, _ = _strip_null(avro)
    if isinstance(avro, str):
        prim = {"boolean": pa.bool_(), "int": pa.int32(), "long": pa.int64(), "float": pa.float32(),
                "double": pa.float64(), "string": pa.string(), "bytes": pa.binary(), "null": pa.string()}
        if avro not in prim:
            raise SchemaError(f"unsupported Avro type {avro!r}")
        return prim[avro]
    logical = avro.get("logicalType")
    kind = avro["type"]
    if logical == "decimal":
        return pa.decimal128(avro["precision"], avro.get("scale", 0))
    if logical == "date":
        return pa.date32()
    if logical in ("timestamp-micros", "timestamp-millis"):
        return pa.timestamp("us" if logical.endswith("micros") else "ms", tz="UTC")
    if logical in ("local-timestamp-micros", "local-timestamp-millis"):
        return pa.timestamp("us" if logical.endswith("micros") else "ms")
    if logical == "time-millis":
        return pa.time32("ms")
    if logical == "time-micros":
        return pa.time64("us")
    if kind == "array":
        return pa.list_(_arrow_type(avro["items"]))
    if kind == "map":
        return pa.map_(pa.string(), _arrow_type(avro["values"]))
    if kind == "record":
        return pa.struct([pa.field(f["name"], _arrow_type(f["type"])) for f in avro["fields"]])
    if kind == "enum":
        return pa.string()
    if kind == "fixed":
        return pa.binary()
    return _arrow_type(kind)


def arrow_schema_with_meta(avro: dict | str | None) -> pa.Schema:
    """A table's Arrow schema with the five meta fields first, from its Avro schema (None:
    the meta fields only); meta fields the Avro schema also names are not repeated."""
    fields = from_avro(avro) if avro else pa.schema([])
    return pa.schema(list(META_SCHEMA) + [f for f in fields if f.name not in META_FIELDS])


def from_avro(avro: dict | str) -> pa.Schema:
    if isinstance(avro, str):
        avro = json.loads(avro)
    return pa.schema([pa.field(f["name"], _arrow_type(f["type"])) for f in avro["fields"]])


# -- evolution ----------------------------------------------------------------------------

_WIDENING = {
    (pa.int32(), pa.int64()), (pa.int32(), pa.float32()), (pa.int32(), pa.float64()),
    (pa.int64(), pa.float32()), (pa.int64(), pa.float64()), (pa.float32(), pa.float64()),
}


def _fits(old: pa.DataType, new: pa.DataType) -> bool:
    """Data of type `new` can be stored in a column of type `old` (same, narrower, or fewer
    nested fields)."""
    if old.equals(new) or (new, old) in _WIDENING:
        return True
    if pa.types.is_struct(old) and pa.types.is_struct(new):
        olds = {f.name: f.type for f in old}
        return all(f.name in olds and _fits(olds[f.name], f.type) for f in new)
    if pa.types.is_list(old) and pa.types.is_list(new):
        return _fits(old.value_type, new.value_type)
    if pa.types.is_map(old) and pa.types.is_map(new):
        return _fits(old.item_type, new.item_type)
    if pa.types.is_timestamp(old) and pa.types.is_timestamp(new):
        # an instant column takes naive values as UTC; a local (naive) column takes naive only
        return old.tz is not None or new.tz is None
    return False


def evolve(table_avro: dict | None, data: pa.Schema, table_name: str, where: str, *,
           local_timestamps: bool = False) -> dict:
    """The table's Avro schema after a write of `data` (nullable columns added, types widened).

    Existing fields keep their Avro form (names and namespaces as the original writer gave
    them); a column missing from the data stays in the table. An invalid name, a type
    without an Avro form, narrowing or a type change is a `SchemaError` naming the column.
    New naive timestamp columns become `timestamp-*` (UTC instants), or `local-timestamp-*`
    with `local_timestamps`.
    """
    data = pa.schema([f for f in data if f.name not in META_FIELDS])
    check_schema(data, where)
    data = normalize_schema(data)
    if table_avro is None:
        return to_avro(data, table_name, local_timestamps)
    current = from_avro(table_avro)
    fields = list(table_avro["fields"])
    index = {f["name"]: i for i, f in enumerate(fields)}
    namespace = f"{table_avro.get('namespace', '')}.{table_avro['name']}".lstrip(".")
    folded = {name.lower(): name for name in index}
    for f in data:
        if f.name not in index:
            if f.name.lower() in folded:  # `resolve_names` renames it before; never a second column
                raise SchemaError(f"{where}: column {f.name!r} differs from the table's column "
                                  f"{folded[f.name.lower()]!r} only in case; write it as {folded[f.name.lower()]!r}")
            fields.append(avro_field(f, namespace, local_timestamps))
            continue
        old = current.field(f.name).type
        if (old, f.type) in _WIDENING:
            fields[index[f.name]] = avro_field(f, namespace, local_timestamps)
        elif not _fits(old, f.type):
            hint = (" (a timestamp-without-time-zone column takes naive timestamps only)"
                    if pa.types.is_timestamp(old) and pa.types.is_timestamp(f.type) else "")
            raise SchemaError(f"{where}: column {f.name!r} has type {f.type} in the data but "
                              f"{old} in the table{hint}; only new columns (stored nullable, as Hudi stores them) and "
                              "int->long->float->double widening are allowed")
    out = {**table_avro, "fields": fields}
    namespace_parts = (table_avro.get("namespace") or "").split(".") if table_avro.get("namespace") else []
    if not is_avro_name(table_avro["name"]) or not all(is_avro_name(p) for p in namespace_parts):
        # an older airflow-lake wrote the raw table name (`trips-v2_record`), which no reader parses
        out["name"], out["namespace"] = record_name(table_name)
    return out


def conform(table: pa.Table, schema: pa.Schema, where: str | None = None) -> pa.Table:
    """Arrange `table` as `schema`: reorder, add missing columns as nulls, cast. With `where`
    (incoming data), a value the cast would change (a uint64 above the int64 maximum, a
    nanosecond timestamp with sub-microsecond digits...) is a `SchemaError` naming it."""
    columns = []
    names = set(table.column_names)
    for f in schema:
        if f.name in names:
            col = table.column(f.name)
            if not col.type.equals(f.type):
                try:
                    col = _cast(col, f.type)
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as e:
                    if where is None:
                        raise
                    raise SchemaError(f"{where}: column {f.name!r} ({col.type}) cannot be stored as "
                                      f"{f.type}: {_lost_value(col, f.type) or e}") from None
            columns.append(col)
        else:
            columns.append(pa.nulls(len(table), f.type))
    return pa.Table.from_arrays(columns, schema=pa.schema([pa.field(f.name, f.type) for f in schema]))


def _lost_value(col: pa.ChunkedArray, target: pa.DataType) -> str | None:
    """The first value of `col` a cast to `target` would change, described; None if unknown."""
    t = col.type
    if pa.types.is_unsigned_integer(t) and pa.types.is_signed_integer(target):
        limit = 2 ** (target.bit_width - 1) - 1
        bad = pc.greater(col, pa.scalar(limit, t)).fill_null(False)
        if pc.any(bad).as_py():
            value = describe_value(col.filter(bad)[0])
            return f"value {value} is above the {target} maximum {limit} (Avro has no unsigned types)"
    if (pa.types.is_timestamp(t) or pa.types.is_time64(t)) and t.unit == "ns" \
            and getattr(target, "unit", None) == "us":
        ints = col.cast(pa.int64())
        bad = pc.not_equal(pc.multiply(pc.divide(ints, 1000), 1000), ints).fill_null(False)
        if pc.any(bad).as_py():
            value = describe_value(col.filter(bad)[0])  # never `str(scalar)`: that needs pandas for ns
            return (f"value {value} ({ints.filter(bad)[0].as_py()} ns) has sub-microsecond digits; "
                    "Hudi stores microseconds: round the column to microseconds first")
    return None


def _cast(col: pa.ChunkedArray, target: pa.DataType) -> pa.ChunkedArray:
    if isinstance(col.type, pa.BaseExtensionType):
        col = pa.chunked_array([c.storage for c in col.chunks], type=col.type.storage_type)
        if col.type.equals(target):
            return col
    if pa.types.is_list_view(col.type) or pa.types.is_large_list_view(col.type):
        col = pa.chunked_array([_list_from_view(c) for c in col.chunks], type=pa.list_(col.type.value_type))
        if col.type.equals(target):
            return col
    if pa.types.is_struct(target) and pa.types.is_struct(col.type):
        chunks = []
        for chunk in col.chunks:
            present = {f.name for f in chunk.type}
            children = [
                _cast(pa.chunked_array([chunk.field(f.name)]), f.type).combine_chunks()
                if f.name in present else pa.nulls(len(chunk), f.type)
                for f in target
            ]
            chunks.append(pa.StructArray.from_arrays(children, fields=list(target), mask=chunk.is_null()))
        return pa.chunked_array(chunks, type=target)
    return promote(col, target)


def promote(values: ArrowValues, target: pa.DataType) -> ArrowValues:
    """`values` cast to `target`. An integer promoted to a floating type (int/long to
    float/double, as evolution widens) rounds to the nearest value, as Spark's cast does
    (2**62+1 becomes 4.611686018427388e18) instead of failing; every other cast is exact or fails."""
    lossy = pa.types.is_integer(values.type) and pa.types.is_floating(target)
    return values.cast(target, safe=not lossy)


def _list_from_view(chunk: pa.Array) -> pa.ListArray:
    """A list array with the values of a list-view array (pyarrow 26 casts them wrongly)."""
    lengths = pc.list_value_length(chunk).fill_null(0).cast(pa.int32())
    offsets = pa.concat_arrays([pa.array([0], pa.int32()), pc.cumulative_sum(lengths).cast(pa.int32())])
    return pa.ListArray.from_arrays(offsets, pc.list_flatten(chunk), mask=chunk.is_null())
