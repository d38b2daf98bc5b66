"""Base files: parquet with the five meta columns and Hudi's footer metadata (spec §6)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.parquet as pq

from ..errors import InvalidTableError, LakeError
from ..objectstore import failure_kind
from ..schema import schema_text
from ..storage import Storage
from .bloom import DYNAMIC_V0, BloomFilter, java_order, min_max_keys
from .lance import EXTENSION as LANCE_EXTENSION
from .lance import read_lance_file

BLOOM_KEY = "org.apache.hudi.bloomfilter"
BLOOM_KEY_LEGACY = "com.uber.hoodie.bloomfilter"
BLOOM_TYPE_KEY = "hoodie_bloom_filter_type_code"
MIN_KEY = "hoodie_min_record_key"
MAX_KEY = "hoodie_max_record_key"
AVRO_SCHEMA_KEY = "parquet.avro.schema"
# Columns that are constant within a base file: dictionary-encode only these (fast writes).
_DICTIONARY_COLUMNS = ["_hoodie_commit_time", "_hoodie_partition_path", "_hoodie_file_name"]


@dataclass(frozen=True)
class BloomSettings:
    num_entries: int = 60000
    fpp: float = 1e-9
    kind: str = DYNAMIC_V0
    max_entries: int = 100000


@dataclass(frozen=True)
class PriorKeys:
    """What an earlier base file's footer says of its `count` keys: the file is rewritten with
    those keys first, in the same order (in-place updates, no deletes), so its bloom filter is
    extended and its key range widened instead of hashing and scanning every key again."""

    bloom: BloomFilter
    count: int
    min_key: str
    max_key: str


def footer_metadata(keys: pa.ChunkedArray | None, avro_schema: dict, bloom: BloomSettings | None,
                    prior: PriorKeys | None = None) -> dict[bytes, bytes]:
    """Hudi's footer key/values for a file whose records have these keys, in file order."""
    meta = {AVRO_SCHEMA_KEY: schema_text(avro_schema), "writer.model.name": "avro"}
    if keys is not None and bloom is not None:
        if prior is not None:
            added = keys.slice(prior.count)
            bf = prior.bloom.extend(added, prior.count, bloom.max_entries)
            lo, hi = min_max_keys(added)
            bounds = [k for k in (prior.min_key, prior.max_key, lo, hi) if k is not None]
            if bounds:
                lo, hi = min(bounds, key=java_order), max(bounds, key=java_order)
        else:
            bf = BloomFilter.build(keys, num_entries=bloom.num_entries, fpp=bloom.fpp,
                                   kind=bloom.kind, max_entries=bloom.max_entries)
            lo, hi = min_max_keys(keys)
        meta[BLOOM_KEY] = bf.to_base64()
        if bloom.kind == DYNAMIC_V0:
            meta[BLOOM_TYPE_KEY] = DYNAMIC_V0
        if lo is not None:
            meta[MIN_KEY], meta[MAX_KEY] = lo, hi
    return {k.encode(): v.encode() for k, v in meta.items()}


def write_base_file(storage: Storage, path: str, table: pa.Table, avro_schema: dict, *,
                    bloom: BloomSettings | None, compression: str = "snappy",
                    prior: PriorKeys | None = None, collect: list | None = None) -> int:
    """Write a whole base file in one PUT; returns its size in bytes.

    `table` starts with the five meta columns; `avro_schema` includes them. With `bloom`
    None (populate.meta.fields=false) no bloom filter or key range is written. `collect`: a
    list the written file's `FileMetaData` is appended to (as pyarrow's `metadata_collector`).
    """
    keys = table.column("_hoodie_record_key") if bloom is not None else None
    footer = footer_metadata(keys, avro_schema, bloom, prior)
    table = table.replace_schema_metadata(None)
    sink = pa.BufferOutputStream()
    dictionary = [c for c in _DICTIONARY_COLUMNS if c in table.column_names]
    with pq.ParquetWriter(sink, table.schema, compression=compression, use_dictionary=dictionary) as writer:
        writer.write_table(table, row_group_size=1_000_000)
        # added to the footer only: on the Arrow schema it would also be copied into the
        # ARROW:schema entry (the bloom filter twice, ~15% of the file)
        writer.add_key_value_metadata(footer)
    buf = sink.getvalue()
    storage.write(path, buf)
    if collect is not None:
        collect.append(pq.read_metadata(pa.BufferReader(buf)))
    return buf.size


class _FooterCache:
    """Parsed footers of base files, by path. Base files are immutable (a name carries its
    instant, and instants are never reused), so an entry never goes stale; bounded LRU."""

    def __init__(self, size: int = 128):
        self.size = size
        self._entries: OrderedDict[tuple[str, str], dict] = OrderedDict()
        self._lock = threading.Lock()

    def entry(self, storage: Storage, path: str) -> dict:
        key = (storage.root, path)
        with self._lock:
            found = self._entries.get(key)
            if found is not None:
                self._entries.move_to_end(key)
                return found
        with storage.open_input(path) as f:
            metadata = pq.read_metadata(f)
        kv = metadata.metadata or {}
        bloom = kv.get(BLOOM_KEY.encode()) or kv.get(BLOOM_KEY_LEGACY.encode())  # kept as bytes: large
        # top-level field names: parquet's leaf names (`element`, `key`, a struct's fields)
        # would drop every list, map and struct column from a projection
        names = set(metadata.schema.to_arrow_schema().names)
        found = {"metadata": metadata, "names": names, "bloom_text": bloom,
                 "footer": {k.decode(): v.decode() for k, v in kv.items() if v is not bloom}}
        with self._lock:
            self._entries[key] = found
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)
        return found


FOOTERS = _FooterCache()


def read_footer(storage: Storage, path: str) -> dict[str, str]:
    """The key/value footer metadata of a parquet file, but its bloom filter (parsed once per
    process)."""
    return FOOTERS.entry(storage, path)["footer"]


def file_num_rows(storage: Storage, path: str) -> int:
    """Records in a base file, from its (cached) footer."""
    return FOOTERS.entry(storage, path)["metadata"].num_rows


def file_bloom(storage: Storage, path: str) -> BloomFilter | None:
    """The decoded bloom filter of a base file (decoded once per process)."""
    entry = FOOTERS.entry(storage, path)
    if "bloom" not in entry:
        text = entry["bloom_text"]
        entry["bloom"] = BloomFilter.from_base64(text, entry["footer"].get(BLOOM_TYPE_KEY)) if text else None
    return entry["bloom"]


def prior_keys(storage: Storage, path: str, count: int, settings: BloomSettings) -> PriorKeys | None:
    """The footer facts of the base file at `path` (holding `count` keys), when a rewrite that
    keeps its records in order can extend them instead of recomputing them."""
    footer = read_footer(storage, path)
    bloom = file_bloom(storage, path)
    if bloom is None or not bloom.matches(settings.num_entries, settings.fpp, settings.kind):
        return None
    if bloom.kind != "SIMPLE" and bloom.current_nb_record != count - (bloom.num_rows - 1) * bloom.num_entries:
        return None  # not built from exactly this file's keys in order
    if count and (MIN_KEY not in footer or MAX_KEY not in footer):
        return None
    return PriorKeys(bloom, count, footer.get(MIN_KEY), footer.get(MAX_KEY))


# a base file up to this size whose size the caller knows is read whole in one request where
# that is one request (S3): a footer and a data open cost a HEAD and one or more GETs each
WHOLE_READ_BYTES = 16 << 20


def read_base_file(storage: Storage, path: str, columns: list[str] | None = None, *,
                   size: int | None = None) -> pa.Table:
    """Read a base file, only the `columns` it has (None: all). A damaged file is an
    `InvalidTableError` naming it; a missing one stays `FileNotFoundError`. Lance base files
    (Hudi 1.1) are read by `formats.lance`. `size`: the file's size, when the listing gave it."""
    if path.endswith(LANCE_EXTENSION):
        return read_lance_file(storage, path, columns)
    try:
        if size is not None and size <= WHOLE_READ_BYTES and storage.one_request_reads:
            pf = pq.ParquetFile(pa.BufferReader(storage.read(path)))
            names = set(pf.schema_arrow.names)
            return pf.read(columns=None if columns is None else [c for c in columns if c in names])
        entry = FOOTERS.entry(storage, path)
        with storage.open_input(path) as f:
            pf = pq.ParquetFile(f, metadata=entry["metadata"])
            return pf.read(columns=None if columns is None else [c for c in columns if c in entry["names"]])
    except FileNotFoundError:
        raise
    except (pa.ArrowInvalid, pa.ArrowIOError, OSError) as e:
        if isinstance(e, OSError) and (isinstance(e, LakeError) or failure_kind(e) is not None):
            raise storage.translate(e, path, "reading the base file") from e  # gone or unreachable: not damaged
        raise InvalidTableError(f"table {storage.uri}: base file {path} is unreadable ({e}); restore it from "
                                "a backup or roll back the commit that wrote it") from e
