"""Typed log blocks (spec §7.2-7.6): data (parquet or Avro), delete, command, corrupt."""

from __future__ import annotations

import datetime as dt
import decimal
import io
import json
import struct
from dataclasses import dataclass, field
from typing import Any

import fastavro
import pyarrow as pa
import pyarrow.parquet as pq

from ...errors import CorruptLogError
from ...schema import from_avro, schema_text
from .framing import BlockType, HeaderKey, RawBlock, encode_block, split_blocks

CONTENT_VERSION = 3
# what a damaged payload raises from pyarrow ("Couldn't deserialize thrift" is an OSError),
# fastavro and struct
_DECODE_ERRORS = (OSError, ValueError, EOFError, IndexError, KeyError, TypeError, struct.error, pa.ArrowException)
NS = "org.apache.hudi.avro.model"


def _wrapper(name: str, value_type: Any) -> dict:
    return {"type": "record", "name": name, "namespace": NS, "fields": [{"name": "value", "type": value_type}]}


# HoodieMetadata.avsc wrappers, in the union order of HoodieDeleteRecord.orderingVal (spec §4.9).
WRAPPERS = [
    _wrapper("BooleanWrapper", "boolean"),
    _wrapper("IntWrapper", "int"),
    _wrapper("LongWrapper", "long"),
    _wrapper("FloatWrapper", "float"),
    _wrapper("DoubleWrapper", "double"),
    _wrapper("BytesWrapper", "bytes"),
    _wrapper("StringWrapper", "string"),
    _wrapper("DateWrapper", "int"),
    _wrapper("DecimalWrapper", {"type": "bytes", "logicalType": "decimal", "precision": 30, "scale": 15}),
    _wrapper("TimeMicrosWrapper", {"type": "long", "logicalType": "time-micros"}),
    _wrapper("TimestampMicrosWrapper", "long"),
]
def _delete_record_list(ordering_type: Any) -> dict:
    """`HoodieDeleteRecordList` with `orderingVal` of `ordering_type`."""
    return {
        "type": "record",
        "name": "HoodieDeleteRecordList",
        "namespace": NS,
        "fields": [{
            "name": "deleteRecordList",
            "type": {"type": "array", "items": {
                "type": "record",
                "name": "HoodieDeleteRecord",
                "fields": [
                    {"name": "recordKey", "type": ["null", "string"], "default": None},
                    {"name": "partitionPath", "type": ["null", "string"], "default": None},
                    {"name": "orderingVal", "type": ordering_type, "default": None},
                ],
            }},
        }],
    }


DELETE_RECORD_LIST = _delete_record_list(["null", *WRAPPERS])
_DELETE_SCHEMA = fastavro.parse_schema(DELETE_RECORD_LIST)
# A newer Hudi revision of HoodieDeleteRecordList (for several ordering fields) makes
# orderingVal an array of wrappers (v8 spec §4.1); no released table version was seen writing
# it: read it when the scalar form does not decode the payload exactly, never written.
DELETE_RECORD_LIST_ARRAY = _delete_record_list(["null", {"type": "array", "items": ["null", *WRAPPERS]}])
_DELETE_SCHEMA_ARRAY = fastavro.parse_schema(DELETE_RECORD_LIST_ARRAY)


def wrapper_name(arrow_type: pa.DataType | None) -> str | None:
    """The Java wrapper Hudi uses for ordering values of this Arrow type (None: unsupported)."""
    t = arrow_type
    if t is None:
        return None
    if pa.types.is_boolean(t):
        return "BooleanWrapper"
    if pa.types.is_int64(t) or pa.types.is_uint32(t) or pa.types.is_uint64(t):
        return "LongWrapper"
    if pa.types.is_integer(t):
        return "IntWrapper"
    if pa.types.is_float32(t):
        return "FloatWrapper"
    if pa.types.is_floating(t):
        return "DoubleWrapper"
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "StringWrapper"
    if pa.types.is_binary(t):
        return "BytesWrapper"
    if pa.types.is_date(t):
        return "DateWrapper"
    if pa.types.is_decimal(t):
        return "DecimalWrapper"
    if pa.types.is_timestamp(t):
        return "TimestampMicrosWrapper"
    return None


def wrap_ordering(value: Any, arrow_type: pa.DataType | None) -> tuple[str, dict]:
    """The wrapped ordering value of a delete entry; IntWrapper(0) ("natural order") if none."""
    name = wrapper_name(arrow_type)
    if value is None or name is None:
        return (f"{NS}.IntWrapper", {"value": 0})
    if name in ("IntWrapper", "LongWrapper"):
        value = int(value)
    elif name == "DateWrapper":
        value = (value - dt.date(1970, 1, 1)).days
    elif name == "DecimalWrapper":
        value = decimal.Decimal(value).quantize(decimal.Decimal(1).scaleb(-15))
    elif name == "TimestampMicrosWrapper":
        epoch = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
        v = value if value.tzinfo else value.replace(tzinfo=dt.timezone.utc)
        value = (v - epoch) // dt.timedelta(microseconds=1)
    return (f"{NS}.{name}", {"value": value})


@dataclass
class LogBlock:
    """A block of a log file, with its position, header and instant (`source`: the file)."""

    offset: int
    header: dict[int, str] = field(default_factory=dict)
    source: str = field(default="", kw_only=True)

    @property
    def instant(self) -> str | None:
        return self.header.get(HeaderKey.INSTANT_TIME)


@dataclass
class DataBlock(LogBlock):
    """AVRO_DATA or PARQUET_DATA: records with the five meta fields, schema in the header."""

    block_type: BlockType = BlockType.PARQUET_DATA
    content: bytes = b""

    @property
    def avro_schema(self) -> dict:
        return json.loads(self.header[HeaderKey.SCHEMA])

    def avro_records(self) -> list[dict]:
        """The records of an AVRO_DATA block as Python dicts (archived timeline entries)."""
        parsed = fastavro.parse_schema(self.avro_schema)
        (version, count) = struct.unpack_from(">ii", self.content, 0)
        pos, out = 8, []
        buf = io.BytesIO(self.content)
        for _ in range(count):
            (length,) = struct.unpack_from(">i", self.content, pos)
            buf.seek(pos + 4)
            out.append(fastavro.schemaless_reader(buf, parsed, None))
            pos += 4 + length
        return out

    def records(self, columns: list[str] | None = None) -> pa.Table:
        """The block's records as Arrow (only `columns` that exist, None: all). A payload that
        cannot be decoded inside intact framing is a `CorruptLogError` naming the file."""
        try:
            if self.block_type == BlockType.PARQUET_DATA:
                pf = pq.ParquetFile(pa.BufferReader(self.content))
                cols = None if columns is None else [c for c in columns if c in pf.schema_arrow.names]
                return pf.read(columns=cols)
            table = pa.Table.from_pylist(self.avro_records(), schema=from_avro(self.avro_schema))
            return table if columns is None else table.select([c for c in columns if c in table.column_names])
        except _DECODE_ERRORS as e:
            raise CorruptLogError(f"log file {self.source or '(unnamed)'}: the {self.block_type.name} block at "
                                  f"byte {self.offset} of instant {self.instant} cannot be decoded ({e})") from e


@dataclass
class DeleteBlock(LogBlock):
    """Keys to delete, with partition paths and wrapped ordering values (spec §7.4)."""

    keys: list[str] = field(default_factory=list)
    partitions: list[str | None] = field(default_factory=list)
    ordering: list[tuple[str, Any] | None] = field(default_factory=list)  # (wrapper, value)


@dataclass
class HFileBlock(LogBlock):
    """HFILE_DATA (metadata table logs): a complete HFile of records keyed by record key."""

    content: bytes = b""

    def hfile(self):
        from ..hfile import read_hfile

        return read_hfile(self.content, f"{self.source} @ {self.offset}")


@dataclass
class CommandBlock(LogBlock):
    """A ROLLBACK command: blocks of TARGET_INSTANT_TIME are void."""

    @property
    def target(self) -> str | None:
        return self.header.get(HeaderKey.TARGET_INSTANT_TIME)

    @property
    def is_rollback(self) -> bool:
        return self.header.get(HeaderKey.COMMAND_BLOCK_TYPE, "0") == "0"


@dataclass
class CorruptBlock(LogBlock):
    """A damaged byte range; `payload`: intact framing (header readable) around content that
    cannot be decoded."""

    reason: str = ""
    length: int = 0
    payload: bool = False


def decode_block(raw: RawBlock, hfile_blocks: bool = False) -> LogBlock:
    """A block by its type; HFILE_DATA only where `hfile_blocks` (the metadata table's logs;
    in a data table's log it is not a block any reader of ours or Hudi's writes)."""
    if hfile_blocks and raw.block_type == BlockType.HFILE_DATA:
        return HFileBlock(raw.offset, raw.header, raw.content)
    if raw.block_type == BlockType.CORRUPT:
        return CorruptBlock(raw.offset, {}, raw.corrupt_reason, len(raw.content))
    if raw.block_type in (BlockType.PARQUET_DATA, BlockType.AVRO_DATA):
        return DataBlock(raw.offset, raw.header, raw.block_type, raw.content)
    if raw.block_type == BlockType.DELETE:
        try:
            return _decode_delete(raw)
        except _DECODE_ERRORS as e:
            return CorruptBlock(raw.offset, raw.header, f"delete block content cannot be decoded ({e})",
                                len(raw.content), payload=True)
    if raw.block_type == BlockType.COMMAND:
        return CommandBlock(raw.offset, raw.header)
    return CorruptBlock(raw.offset, raw.header, f"unsupported block type {raw.block_type.name}", len(raw.content))


def _decode_delete(raw: RawBlock) -> LogBlock:
    version, length = struct.unpack_from(">ii", raw.content, 0)
    if version != CONTENT_VERSION:
        return CorruptBlock(raw.offset, raw.header, f"delete block content version {version} is not supported",
                            len(raw.content))
    record = _delete_records(raw.content[8 : 8 + length])
    block = DeleteBlock(raw.offset, raw.header)
    for entry in record["deleteRecordList"]:
        block.keys.append(entry["recordKey"])
        block.partitions.append(entry["partitionPath"])
        val = entry["orderingVal"]
        if isinstance(val, list):  # the array form: a value per ordering field
            values = [_wrapped(v) for v in val]
            block.ordering.append(values[0] if len(values) == 1 else values)
        else:
            block.ordering.append(_wrapped(val))
    return block


def _wrapped(val):
    """An `orderingVal` wrapper as (wrapper name, value), or None."""
    return (val[0].rsplit(".", 1)[-1], val[1]["value"]) if isinstance(val, tuple) else None


def _delete_records(payload: bytes) -> dict:
    """The delete records of a payload: the scalar orderingVal form when it decodes the payload
    exactly, else the array form (`DELETE_RECORD_LIST_ARRAY`)."""
    error: Exception | None = None
    for schema in (_DELETE_SCHEMA, _DELETE_SCHEMA_ARRAY):
        buf = io.BytesIO(payload)
        try:
            record = fastavro.schemaless_reader(buf, schema, None, return_record_name=True)
        except _DECODE_ERRORS as e:
            error = error or e
            continue
        if buf.tell() == len(payload):
            return record
        error = error or ValueError(f"{len(payload) - buf.tell()} bytes left after the delete records")
    raise error


def read_log_file(data: bytes, source: str = "", *, hfile_blocks: bool = False) -> list[LogBlock]:
    """Every block of a log file, corrupt ranges included as `CorruptBlock`s (never fatal);
    `source` names the file in errors; `hfile_blocks`: a metadata table's log (HFILE_DATA)."""
    blocks = [decode_block(raw, hfile_blocks) for raw in split_blocks(data)]
    for block in blocks:
        block.source = source
    return blocks


# -- writing --------------------------------------------------------------------------------


def avro_block_bytes(header: dict[HeaderKey, str], schema: dict, records: list[dict]) -> bytes:
    """An AVRO_DATA block: version 3, record count, length-prefixed schemaless datums."""
    parsed = fastavro.parse_schema(schema)
    parts = [struct.pack(">ii", CONTENT_VERSION, len(records))]
    buf = io.BytesIO()
    for row in records:
        buf.seek(0)
        buf.truncate()
        fastavro.schemaless_writer(buf, parsed, row)
        raw = buf.getvalue()
        parts.append(struct.pack(">i", len(raw)))
        parts.append(raw)
    return encode_block(BlockType.AVRO_DATA, {**header, HeaderKey.SCHEMA: json.dumps(schema)}, b"".join(parts))


def data_block_bytes(instant: str, avro_schema_with_meta: dict, table: pa.Table, *, fmt: str = "parquet",
                     compression: str = "snappy") -> bytes:
    header = {HeaderKey.INSTANT_TIME: instant, HeaderKey.SCHEMA: schema_text(avro_schema_with_meta)}
    if fmt == "avro":
        return avro_block_bytes({HeaderKey.INSTANT_TIME: instant}, avro_schema_with_meta, _avro_records(table))
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, compression=compression,
                   use_dictionary=["_hoodie_commit_time", "_hoodie_partition_path", "_hoodie_file_name"])
    return encode_block(BlockType.PARQUET_DATA, header, sink.getvalue().to_pybytes())


def _avro_records(table: pa.Table) -> list[dict]:
    """The rows as Avro datums: Arrow maps (lists of pairs in Python) become dicts."""
    records = table.to_pylist()
    mapped = [f for f in table.schema if _has_map(f.type)]
    for record in records:
        for f in mapped:
            record[f.name] = _avro_datum(record[f.name], f.type)
    return records


def _has_map(t: pa.DataType) -> bool:
    if pa.types.is_map(t):
        return True
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return _has_map(t.value_type)
    return pa.types.is_struct(t) and any(_has_map(f.type) for f in t)


def _avro_datum(value, t: pa.DataType):
    if value is None:
        return None
    if pa.types.is_map(t):
        return {k: _avro_datum(v, t.item_type) for k, v in value}
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return [_avro_datum(v, t.value_type) for v in value]
    if pa.types.is_struct(t):
        return {f.name: _avro_datum(value[f.name], f.type) for f in t}
    return value


def delete_block_bytes(instant: str, avro_schema_with_meta: dict, keys: list[str], partitions: list[str],
                       ordering: list[tuple[str, dict]]) -> bytes:
    header = {HeaderKey.INSTANT_TIME: instant, HeaderKey.SCHEMA: json.dumps(avro_schema_with_meta)}
    return encode_block(BlockType.DELETE, header, delete_block_content(keys, partitions, ordering))


def delete_block_content(keys: list[str], partitions: list[str], ordering: list[tuple[str, dict] | None]) -> bytes:
    """A DELETE block's content: content version, length, the `HoodieDeleteRecordList` of
    `keys` (each with its partition and wrapped ordering value)."""
    records = [{"recordKey": k, "partitionPath": p, "orderingVal": o}
               for k, p, o in zip(keys, partitions, ordering, strict=True)]
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, _DELETE_SCHEMA, {"deleteRecordList": records})
    payload = buf.getvalue()
    return struct.pack(">ii", CONTENT_VERSION, len(payload)) + payload


def command_block_bytes(instant: str, target: str) -> bytes:
    header = {HeaderKey.INSTANT_TIME: instant, HeaderKey.TARGET_INSTANT_TIME: target,
              HeaderKey.COMMAND_BLOCK_TYPE: "0"}
    return encode_block(BlockType.COMMAND, header, b"")
