"""Table schemas: Arrow <-> Avro conversion (Spark's naming rules, spec §6.1) and evolution.

The Avro schema in each commit's `extraMetadata.schema` is the table schema; Arrow is what
we compute with. Data are normalised to Avro-expressible Arrow types before writing, so
the round trip Arrow -> Avro -> Arrow is exact.
"""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa

from .errors import SchemaError

META_FIELDS = (
    "_hoodie_commit_time",
    "_hoodie_commit_seqno",
    "_hoodie_record_key",
    "_hoodie_partition_path",
    "_hoodie_file_name",
)
META_SCHEMA = pa.schema([pa.field(n, pa.string()) for n in META_FIELDS])
IS_DELETED = "_hoodie_is_deleted"


def normalize_type(t: pa.DataType) -> pa.DataType:
    """The Arrow type our files store for a user type (what Avro can express)."""
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
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t) or pa.types.is_list_view(t):
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


def _avro_type(t: pa.DataType, name: str, namespace: str) -> Any:
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
        local = "local-" if t.tz is None else ""
        unit = "millis" if t.unit == "ms" else "micros"
        return {"type": "long", "logicalType": f"{local}timestamp-{unit}"}
    if pa.types.is_time32(t):
        return {"type": "int", "logicalType": "time-millis"}
    if pa.types.is_time64(t):
        return {"type": "long", "logicalType": "time-micros"}
    if pa.types.is_list(t):
        return {"type": "array", "items": _nullable(_avro_type(t.value_type, name, namespace))}
    if pa.types.is_map(t):
        return {"type": "map", "values": _nullable(_avro_type(t.item_type, name, namespace))}
    if pa.types.is_struct(t):
        return _record(list(t), name, namespace)
    raise SchemaError(f"column {name!r}: type {t} has no Avro equivalent")


def _nullable(avro: Any) -> list:
    return ["null", avro]


def _record(fields: list[pa.Field], name: str, namespace: str) -> dict:
    full = f"{namespace}.{name}" if namespace else name
    return {
        "type": "record",
        "name": name,
        "namespace": namespace,
        "fields": [avro_field(f, full) for f in fields],
    }


def avro_field(f: pa.Field, parent_full_name: str) -> dict:
    return {"name": f.name, "type": _nullable(_avro_type(f.type, f.name, parent_full_name)), "default": None}


def to_avro(schema: pa.Schema, table_name: str) -> dict:
    """Spark's Avro form: record `<table>_record` in namespace `hoodie.<table>`, all nullable."""
    return _record(list(schema), f"{table_name}_record", f"hoodie.{table_name}")


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
        return (old.tz is None) == (new.tz is None)
    return False


def evolve(table_avro: dict | None, data: pa.Schema, table_name: str, where: str) -> dict:
    """The table's Avro schema after a write of `data` (nullable columns added, types widened).

    Existing fields keep their Avro form (names and namespaces as the original writer gave
    them); a column missing from the data stays in the table. Narrowing or a type change is
    a `SchemaError` naming the column.
    """
    data = normalize_schema(pa.schema([f for f in data if f.name not in META_FIELDS]))
    if table_avro is None:
        return to_avro(data, table_name)
    current = from_avro(table_avro)
    fields = list(table_avro["fields"])
    index = {f["name"]: i for i, f in enumerate(fields)}
    namespace = f"{table_avro.get('namespace', '')}.{table_avro['name']}".lstrip(".")
    for f in data:
        if f.name not in index:
            fields.append(avro_field(f, namespace))
            continue
        old = current.field(f.name).type
        if (old, f.type) in _WIDENING:
            fields[index[f.name]] = avro_field(f, namespace)
        elif not _fits(old, f.type):
            raise SchemaError(f"{where}: column {f.name!r} has type {f.type} in the data but "
                              f"{old} in the table; only added nullable columns and "
                              "int->long->float->double widening are allowed")
    return {**table_avro, "fields": fields}


def conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """Arrange `table` as `schema`: reorder, add missing columns as nulls, cast."""
    columns = []
    names = set(table.column_names)
    for f in schema:
        if f.name in names:
            col = table.column(f.name)
            if not col.type.equals(f.type):
                col = _cast(col, f.type)
            columns.append(col)
        else:
            columns.append(pa.nulls(len(table), f.type))
    return pa.Table.from_arrays(columns, schema=pa.schema([pa.field(f.name, f.type) for f in schema]))


def _cast(col: pa.ChunkedArray, target: pa.DataType) -> pa.ChunkedArray:
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
    return col.cast(target)
