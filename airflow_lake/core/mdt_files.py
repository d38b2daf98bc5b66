"""The files a metadata-table (MDT) partition is made of, whatever it holds (v8 spec §5.6, §6):
its base HFiles (with Hudi's bloom filter and file info), the partition metadata file and the
empty DELETE log an initialisation writes, and the JSON of `index.json` as Jackson writes it."""

from __future__ import annotations

import json
import time

import pyarrow as pa

from .formats.bloom import BloomFilter
from .formats.hfile import BLOCK_SIZE, write_hfile_columns
from .formats.log import encode_block
from .formats.log.framing import BlockType, HeaderKey
from .metadata_table import MDT
from .view import PARTITION_METAFILE

MDT_BLOOM_ENTRIES, MDT_BLOOM_FPP = 10000, 1e-9  # the MDT base files' bloom filter (as Hudi's fixtures have)


def index_base_hfile(rows: pa.Array, values: pa.Array, schema_text: str, create_time_ms: int | None = None, *,
                     block_size: int = BLOCK_SIZE) -> bytes:
    """An MDT base HFile of cells (rows sorted) as Hudi writes one: its schema, a DYNAMIC_V0
    bloom filter of its keys, the first and last key."""
    keys = rows.cast(pa.string())
    bloom = BloomFilter.build(keys, num_entries=MDT_BLOOM_ENTRIES, fpp=MDT_BLOOM_FPP)
    n = len(rows)
    info = {b"schema": schema_text.encode(), b"bloomFilterTypeCode": b"DYNAMIC_V0",
            b"minRecordKey": rows[0].as_py() if n else b"", b"maxRecordKey": rows[n - 1].as_py() if n else b""}
    return write_hfile_columns(rows, values, info, {"bloomFilter": bloom.to_base64().encode()},
                               create_time_ms=create_time_ms, block_size=block_size)


def empty_delete(instant: str) -> bytes:
    """A log block Java writes when it initialises an MDT partition: a DELETE of nothing."""
    return encode_block(BlockType.DELETE, {HeaderKey.INSTANT_TIME: instant}, b"\x00\x00\x00\x03\x00\x00\x00\x01\x00")


def partition_metafile(partition: str, instant: str) -> tuple[str, bytes]:
    """The partition metadata file an MDT partition's initialisation at `instant` writes."""
    return (f"{MDT}/{partition}/{PARTITION_METAFILE}",
            f"#partition metadata\n#{java_date()}\ncommitTime={instant}\npartitionDepth=1\n".encode())


def java_date() -> str:
    return time.strftime("%a %b %d %H:%M:%S UTC %Y", time.gmtime())


def jackson_pretty(value, indent: int = 0) -> str:
    """JSON as Jackson's default pretty printer writes it (Hudi's index.json)."""
    pad = "  " * indent
    if isinstance(value, dict):
        if not value:
            return "{ }"
        items = [f'{pad}  {json.dumps(k)} : {jackson_pretty(v, indent + 1)}' for k, v in value.items()]
        return "{\n" + ",\n".join(items) + f"\n{pad}}}"
    if isinstance(value, list):
        if not value:
            return "[ ]"
        return "[ " + ", ".join(jackson_pretty(v, indent + 1) for v in value) + " ]"
    return json.dumps(value)


def without_meta(schema_text: str) -> str:
    schema = json.loads(schema_text)
    schema["fields"] = [f for f in schema["fields"] if not f["name"].startswith("_hoodie_")]
    return json.dumps(schema, separators=(",", ":"))


INDEX_DEFS_PATH = ".hoodie/.index_defs/index.json"
