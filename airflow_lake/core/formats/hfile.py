"""HFile version 3 as Hudi writes it for the metadata table (v8 spec §6): base files of MDT
partitions and the content of HFILE_DATA log blocks.

`read_hfile` reads both writers' files (HBase's, Hudi 1.0: CRC32C checksums, full cell keys in
the index; Hudi 1.1's native writer: no checksums, row-only index keys) by scanning the data
blocks in order; `write_hfile` writes the native form: GZ-compressed blocks, a single-level root
index, the file info and the 4096-byte trailer. Cells are (row, value): the row is the record
key (UTF-8), the value an Avro datum; the cell key's tail is always that of a Put."""

from __future__ import annotations

import bisect
import math
import struct
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import InvalidTableError

try:  # zlib-ng inflates the gzip blocks about twice as fast as zlib (a dependency; zlib where it is missing)
    from zlib_ng import zlib_ng as _inflating
except ImportError:  # pragma: no cover
    _inflating = zlib

DATA, META, ROOT_INDEX, FILE_INFO = b"DATABLK*", b"METABLKc", b"IDXROOT2", b"FILEINF2"
DATA_ENCODED = b"DATABLKE"
TRAILER_MAGIC = b'TRABLK"$'
HEADER = 33
BYTES_PER_CHECKSUM = 16384
TRAILER_SIZE = 4096
GZ, NONE = 1, 2
KEY_TAIL = b"\x00" + b"\x7f\xff\xff\xff\xff\xff\xff\xff" + b"\x04"  # no family, latest timestamp, Put
COMPARATOR = b"org.apache.hudi.io.storage.HoodieHBaseKVComparator"
BLOCK_SIZE = 1 << 20


@dataclass
class HFile:
    """The cells (row, value) in key order, and the file info (key -> value bytes)."""

    cells: list[tuple[bytes, bytes]]
    info: dict[bytes, bytes] = field(default_factory=dict)
    meta: dict[str, bytes] = field(default_factory=dict)

    def get(self, row: bytes) -> bytes | None:
        """The value of `row` (binary search: cells are sorted)."""
        lo, hi = 0, len(self.cells)
        while lo < hi:
            mid = (lo + hi) // 2
            if self.cells[mid][0] < row:
                lo = mid + 1
            else:
                hi = mid
        if lo < len(self.cells) and self.cells[lo][0] == row:
            return self.cells[lo][1]
        return None


# -- reading ---------------------------------------------------------------------------------
def read_hfile(data: bytes, where: str = "") -> HFile:
    """Every cell of an HFile, its file info and meta blocks; a malformed file is an
    `InvalidTableError` naming `where`."""
    try:
        return _read(data)
    except (IndexError, KeyError, ValueError, struct.error, zlib.error, EOFError, OSError) as e:
        raise InvalidTableError(f"{where or 'HFile'}: not a readable HFile ({e})") from e


def _read(data: bytes) -> HFile:
    if len(data) < TRAILER_SIZE:
        raise ValueError("shorter than its trailer")
    fields = _trailer(data[-TRAILER_SIZE:])
    codec = fields.get(12, NONE)
    load_on_open = fields[2]
    info_offset = fields[1]
    meta_count = fields.get(6, 0)
    cells: list[tuple[bytes, bytes]] = []
    offset = 0
    while offset < load_on_open:  # the scanned section: data (and meta or leaf index) blocks
        magic, payload, offset_next = _block(data, offset, codec)
        if magic in (DATA, DATA_ENCODED):
            cells.extend(_cells(payload))
        offset = offset_next
    if len(cells) != fields.get(7, len(cells)):
        raise ValueError(f"{len(cells)} cells, the trailer says {fields.get(7)}")
    magic, payload, after_root = _block(data, load_on_open, codec)
    meta: dict[str, bytes] = {}
    if meta_count:
        magic, payload, _ = _block(data, after_root, codec)  # the meta index
        pos = 0
        while pos < len(payload):
            block_offset, _size = struct.unpack_from(">qi", payload, pos)
            name_len, pos = _hadoop_vlong(payload, pos + 12)
            name = payload[pos:pos + name_len].decode()
            pos += name_len
            meta[name] = _block(data, block_offset, codec)[1]
    return HFile(cells, _file_info(*_block(data, info_offset, codec)[:2]), meta)


def _trailer(trailer: bytes) -> dict[int, int | bytes]:
    """The fields of the trailer (the file's last 4096 bytes) of an HFile version 3."""
    if trailer[:8] != TRAILER_MAGIC:
        raise ValueError("no trailer magic")
    version = int.from_bytes(trailer[-4:], "big")
    if version & 0x00FFFFFF != 3:
        raise ValueError(f"HFile major version {version & 0x00FFFFFF}, not 3")
    length, pos = _varint(trailer, 8)
    return _protobuf(trailer[pos:pos + length])


def _file_info(magic: bytes, payload: bytes) -> dict[bytes, bytes]:
    """The entries of the file info block."""
    if magic != FILE_INFO or payload[:4] != b"PBUF":
        raise ValueError("no file info block")
    length, pos = _varint(payload, 4)
    return dict(_pairs(payload[pos:pos + length]))


@dataclass
class HFileIndex:
    """What an HFile's trailer and load-on-open section say: its codec, its data blocks
    (offsets, sizes on disk, first rows, as arrays) and its file info; for reading chosen rows
    only."""

    codec: int
    offsets: np.ndarray  # int64, each data block's
    sizes: np.ndarray  # int64, each data block's size on disk
    firsts: pa.BinaryArray  # each data block's first row
    info: dict[bytes, bytes]


def read_hfile_index(read_at: Callable[[int, int], bytes], size: int, where: str = "") -> HFileIndex | None:
    """The index of an HFile read through `read_at(offset, length)` (its trailer, then the
    load-on-open section); None when the file has a multi-level data index (HBase's writer, for
    large files): scan it with `read_hfile` instead."""
    try:
        fields = _trailer(read_at(size - TRAILER_SIZE, TRAILER_SIZE))
        if fields.get(8, 1) != 1:
            return None
        codec, start, info_offset = fields.get(12, NONE), fields[2], fields[1]
        section = read_at(start, size - TRAILER_SIZE - start)
        _, payload, _ = _block(section, 0, codec)
        return HFileIndex(codec, *_root_entries(payload), _file_info(*_block(section, info_offset - start, codec)[:2]))
    except (IndexError, KeyError, ValueError, struct.error, zlib.error, EOFError, OSError) as e:
        raise InvalidTableError(f"{where or 'HFile'}: not a readable HFile ({e})") from e


def _root_entries(payload: bytes) -> tuple[np.ndarray, np.ndarray, pa.BinaryArray]:
    """(offsets, sizes on disk, first rows) of a single-level root index's entries (each: offset,
    size, a Hadoop vlong key length, the key: row length, row, ...): one walk over the key
    lengths, the fields then read by numpy."""
    starts: list[int] = []
    keys: list[int] = []
    pos, end = 0, len(payload)
    while pos < end:
        key_len, key_at = payload[pos + 12], pos + 13
        if key_len >= 0x80:  # (a vlong of more than one byte, or negative)
            key_len, key_at = _hadoop_vlong(payload, pos + 12)
            if key_len < 2:
                raise ValueError(f"a root index entry's key length is {key_len}")
        starts.append(pos)
        keys.append(key_at)
        pos = key_at + key_len
    if pos != end:
        raise ValueError(f"the root index's last entry runs {pos - end} bytes past its block")
    buf = np.frombuffer(payload, dtype=np.uint8)
    at = np.array(starts, dtype=np.int64)
    key_at = np.array(keys, dtype=np.int64)
    fixed = buf[(at[:, None] + np.arange(12)).ravel()].reshape(-1, 12).copy() \
        .view(np.dtype([("offset", ">i8"), ("size", ">i4")])).ravel() if len(at) else \
        np.zeros(0, np.dtype([("offset", ">i8"), ("size", ">i4")]))
    row_len = (buf[key_at].astype(np.int64) << 8 | buf[key_at + 1]) if len(at) else np.zeros(0, np.int64)
    key_end = np.append(at[1:], end)
    if (row_len >= 0x8000).any() or (key_at + 2 + row_len > key_end).any():
        raise ValueError("a root index entry's row is longer than its key")
    return fixed["offset"].astype(np.int64), fixed["size"].astype(np.int64), _gather(buf, key_at + 2, row_len)


def read_rows(read_at: Callable[[int, int], bytes], index: HFileIndex, rows: list[bytes],
              where: str = "") -> dict[bytes, bytes]:
    """The values of those `rows` the HFile holds (`read_row_columns`, as a dict)."""
    found, values = read_row_columns(read_at, index, pa.array(sorted(set(rows)), pa.binary()), where)
    return dict(zip(found.to_pylist(), values.to_pylist(), strict=True))


def _block(data: bytes, offset: int, codec: int) -> tuple[bytes, bytes, int]:
    """(magic, uncompressed payload, next block's offset) of the block at `offset`."""
    magic = data[offset:offset + 8]
    on_disk, uncompressed, _prev, _checksum, _per, with_header = struct.unpack_from(">iiqbii", data, offset + 8)
    raw = data[offset + HEADER:offset + with_header]
    try:
        payload = _inflating.decompress(raw, 31) if codec == GZ and raw else raw  # (31: a gzip stream, CRC checked)
    except _inflating.error as e:
        raise ValueError(f"block at {offset}: {e}") from e
    if codec not in (GZ, NONE):
        raise ValueError(f"compression codec {codec} is not supported (GZ and NONE are)")
    if len(payload) != uncompressed:
        raise ValueError(f"block at {offset}: {len(payload)} bytes, its header says {uncompressed}")
    return magic, payload, offset + HEADER + on_disk


def _cells(payload: bytes) -> list[tuple[bytes, bytes]]:
    rows, values = cell_columns(payload)
    return list(zip(rows.to_pylist(), values.to_pylist(), strict=True))


def cell_columns(payload: bytes) -> tuple[pa.BinaryArray, pa.BinaryArray]:
    """The rows and values of a data block's cells, as Arrow arrays: one walk over the cells'
    lengths (each cell: key length, value length, key, value, a Hadoop vlong MVCC timestamp),
    the bytes then gathered by numpy."""
    starts: list[int] = []
    add = starts.append
    unpack = struct.unpack_from
    pos, end = 0, len(payload)
    while pos < end:  # (the hot loop: one append per cell, lengths re-read by numpy below)
        key_len, value_len = unpack(">ii", payload, pos)
        add(pos)
        pos += 9 + key_len + value_len
        if 0x80 <= payload[pos - 1] <= 0x8F:  # a vlong MVCC timestamp of more than one byte (Hudi's: 0)
            pos = _hadoop_vlong(payload, pos - 1)[1]
    if pos != end:
        raise ValueError(f"the last cell runs {pos - end} bytes past its block")
    buf = np.frombuffer(payload, dtype=np.uint8)
    at = np.array(starts, dtype=np.int64)
    lengths = buf[(at[:, None] + np.arange(10)).ravel()].reshape(-1, 10) if len(at) else np.zeros((0, 10), np.uint8)
    lengths = lengths.copy().view(np.dtype([("k", ">i4"), ("v", ">i4"), ("r", ">i2")])).ravel()
    key_len = lengths["k"].astype(np.int64)
    value_len = lengths["v"].astype(np.int64)
    row_len = lengths["r"].astype(np.int64)
    if (row_len + 2 > key_len).any():
        raise ValueError("a cell's row is longer than its key")
    return _gather(buf, at + 10, row_len), _gather(buf, at + 8 + key_len, value_len)


def _gather(buf: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> pa.BinaryArray:
    """The byte ranges (starts, lengths) of `buf` as one Arrow binary array."""
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    total = int(offsets[-1])
    if total >= 1 << 31:
        raise ValueError("a block's cells exceed 2 GiB")
    index = np.repeat(starts - offsets[:-1], lengths) + np.arange(total, dtype=np.int64)
    data = buf[index] if total else np.zeros(0, np.uint8)
    return pa.Array.from_buffers(pa.binary(), len(lengths), [None, pa.py_buffer(offsets.astype(np.int32)),
                                                              pa.py_buffer(data.tobytes())])


def read_cell_columns(data: bytes, where: str = "") -> tuple[pa.BinaryArray, pa.BinaryArray, dict[bytes, bytes]]:
    """Every cell of an HFile as (rows, values) Arrow arrays, and its file info."""
    try:
        fields = _trailer(data[-TRAILER_SIZE:])
        codec, load_on_open = fields.get(12, NONE), fields[2]
        rows, values = [pa.array([], pa.binary())], [pa.array([], pa.binary())]
        offset = 0
        while offset < load_on_open:
            magic, payload, offset = _block(data, offset, codec)
            if magic in (DATA, DATA_ENCODED):
                r, v = cell_columns(payload)
                rows.append(r)
                values.append(v)
        return pa.concat_arrays(rows), pa.concat_arrays(values), _file_info(*_block(data, fields[1], codec)[:2])
    except (IndexError, KeyError, ValueError, struct.error, zlib.error, EOFError, OSError) as e:
        raise InvalidTableError(f"{where or 'HFile'}: not a readable HFile ({e})") from e


FIND_AT_MOST = 16  # a block asked for at most this many rows is searched for them, not walked
READ_GAP = 1 << 20  # blocks at most this far apart are read in one request


def read_row_columns(read_at: Callable[[int, int], bytes], index: HFileIndex, rows: pa.Array,
                     where: str = "") -> tuple[pa.BinaryArray, pa.BinaryArray]:
    """The cells of those `rows` (binary, sorted) the HFile holds, as (rows, values) arrays,
    reading only the data blocks whose key range may hold them (neighbouring ones in one
    request). A block asked for a few rows is searched for each row's cell key (C speed);
    one asked for many is walked cell by cell."""
    rows = (rows.combine_chunks() if isinstance(rows, pa.ChunkedArray) else rows).cast(pa.binary())
    found_at: list[int] = []  # (the rows found by their cell keys, and their values)
    found_values: list[bytes] = []
    walked: list[tuple[pa.Array, pa.Array]] = []
    unpack = struct.unpack_from
    try:
        blocks, firsts, lasts = _rows_by_block(index, rows)
        cell_keys = _cell_keys(rows) if len(blocks) else []
        offsets, ends = index.offsets[blocks], index.offsets[blocks] + index.sizes[blocks]
        breaks = np.flatnonzero(offsets[1:] - ends[:-1] > READ_GAP) + 1
        runs = zip([0, *breaks.tolist()], [*breaks.tolist(), len(blocks)], strict=True) if len(blocks) else ()
        if index.codec not in (GZ, NONE):
            raise ValueError(f"compression codec {index.codec} is not supported (GZ and NONE are)")
        inflate = _inflating.decompress if index.codec == GZ else None
        for lo, hi in runs:
            start = int(offsets[lo])
            data = read_at(start, int(ends[hi - 1]) - start)
            view = memoryview(data)
            for offset, first, last in zip((offsets[lo:hi] - start).tolist(), firsts[lo:hi].tolist(),
                                           lasts[lo:hi].tolist(), strict=True):
                # (`_block` inlined: the header's uncompressed and on-disk sizes, the payload inflated)
                uncompressed, with_header = unpack(">i", data, offset + 12)[0], unpack(">i", data, offset + 29)[0]
                payload = inflate(view[offset + HEADER:offset + with_header], 31) if inflate else \
                    data[offset + HEADER:offset + with_header]
                if len(payload) != uncompressed:
                    raise ValueError(f"block at {offset}: {len(payload)} bytes, its header says {uncompressed}")
                if last - first <= FIND_AT_MOST:  # (the hot loop: each row's cell key found after the previous one)
                    pos = 0
                    for i in range(first, last):
                        key = cell_keys[i]
                        at = payload.find(key, pos)
                        while at >= 0 and (at < 8 or unpack(">i", payload, at - 8)[0] != len(key)):
                            at = payload.find(key, at + 1)  # (the bytes inside another cell: look further)
                        if at >= 0:
                            value_at = at + len(key)
                            pos = value_at + unpack(">i", payload, at - 4)[0]
                            found_at.append(i)
                            found_values.append(payload[value_at:pos])
                else:
                    r, v = cell_columns(payload)
                    hit = pc.is_in(r, value_set=rows.slice(first, last - first))
                    walked.append((r.filter(hit), v.filter(hit)))
    except (IndexError, KeyError, ValueError, struct.error, zlib.error, _inflating.error, EOFError, OSError) as e:
        raise InvalidTableError(f"{where or 'HFile'}: not a readable HFile ({e})") from e
    walked.append((rows.take(pa.array(found_at, pa.int64())), pa.array(found_values, pa.binary())))
    return pa.concat_arrays([r for r, _ in walked]), pa.concat_arrays([v for _, v in walked])


def _rows_by_block(index: HFileIndex, rows: pa.Array) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The data blocks whose key range may hold some of the sorted `rows` (ascending), and for
    each the range [first, last) of its rows (vectorised: the blocks' first rows and the rows
    compared as fixed-width byte strings)."""
    none = np.zeros(0, np.int64)
    if not len(rows) or not len(index.firsts):
        return none, none, none
    rows_offsets, rows_data = _binary_parts(rows)
    firsts_offsets, firsts_data = _binary_parts(index.firsts)
    if _ends_in_nul(rows_offsets, rows_data) or _ends_in_nul(firsts_offsets, firsts_data):
        # (numpy's fixed-width strings drop trailing NULs: compare exactly)
        plain = index.firsts.to_pylist()
        at = np.array([bisect.bisect_right(plain, r) - 1 for r in rows.to_pylist()], dtype=np.int64)
    else:
        width = int(max(np.diff(rows_offsets).max(), np.diff(firsts_offsets).max(), 1))
        at = np.searchsorted(_fixed_width(firsts_offsets, firsts_data, width),
                             _fixed_width(rows_offsets, rows_data, width), side="right") - 1
    bounds = np.flatnonzero(np.diff(at)) + 1
    firsts = np.concatenate([[0], bounds]).astype(np.int64)
    lasts = np.append(bounds, len(at)).astype(np.int64)
    keep = at[firsts] >= 0
    return at[firsts][keep], firsts[keep], lasts[keep]


def _ends_in_nul(offsets: np.ndarray, data: np.ndarray) -> bool:
    """Whether a binary value (offsets from 0, bytes) ends in a NUL byte."""
    ends = offsets[1:][np.diff(offsets) > 0]
    return bool(len(ends) and (data[ends - 1] == 0).any())


def _fixed_width(offsets: np.ndarray, data: np.ndarray, width: int) -> np.ndarray:
    """Binary values (offsets from 0, bytes) as numpy fixed-width byte strings, NUL-padded."""
    lengths = np.diff(offsets)
    out = np.zeros((len(lengths), width), dtype=np.uint8)
    out[np.repeat(np.arange(len(lengths)), lengths), np.arange(len(data)) - np.repeat(offsets[:-1], lengths)] = data
    return out.view(f"S{width}").ravel()


def _cell_keys(rows: pa.Array) -> list[bytes]:
    """Each row's cell key as Hudi's cells carry it (row length, row, the Put tail), whose
    length the cell's key length repeats (vectorised)."""
    offsets, data = _binary_parts(rows)
    lengths = np.diff(offsets)
    sizes = lengths + 2 + len(KEY_TAIL)
    starts = np.zeros(len(rows) + 1, dtype=np.int64)
    np.cumsum(sizes, out=starts[1:])
    out = np.zeros(int(starts[-1]), dtype=np.uint8)
    out[starts[:-1]] = lengths >> 8
    out[starts[:-1] + 1] = lengths & 0xFF
    _scatter(out, starts[:-1] + 2, offsets, data)
    tail = np.frombuffer(KEY_TAIL, dtype=np.uint8)
    out[(starts[1:] - len(KEY_TAIL))[:, None] + np.arange(len(KEY_TAIL))] = tail
    return pa.Array.from_buffers(pa.binary(), len(rows), [None, pa.py_buffer(starts.astype(np.int32)),
                                                          pa.py_buffer(out.tobytes())]).to_pylist()


# -- writing ---------------------------------------------------------------------------------
def write_hfile(cells: list[tuple[bytes, bytes]], info: dict[bytes, bytes] | None = None,
                meta: dict[str, bytes] | None = None, *, codec: int = GZ, block_size: int = BLOCK_SIZE,
                create_time_ms: int | None = None) -> bytes:
    """An HFile of `cells` (sorted by row, each row once) as Hudi 1.1's native writer makes it;
    `info`: file-info entries besides the writer's own (e.g. `schema`), `meta`: meta blocks
    (e.g. `bloomFilter`)."""
    rows, values = pa.array([r for r, _ in cells], pa.binary()), pa.array([v for _, v in cells], pa.binary())
    return write_hfile_columns(rows, values, info, meta, codec=codec, block_size=block_size,
                               create_time_ms=create_time_ms)


def write_hfile_columns(rows: pa.Array, values: pa.Array, info: dict[bytes, bytes] | None = None,
                        meta: dict[str, bytes] | None = None, *, codec: int = GZ, block_size: int = BLOCK_SIZE,
                        create_time_ms: int | None = None) -> bytes:
    """`write_hfile` of cells given as Arrow binary arrays (rows sorted, each once): the cells'
    bytes laid out by numpy, blocks cut where the next cell would pass `block_size`."""
    n = len(rows)
    if n > 1 and not pc.all(pc.less(rows.slice(0, n - 1), rows.slice(1))).as_py():
        raise ValueError("HFile cells must be sorted by row, each row once")
    row_offsets, row_data = _binary_parts(rows)
    value_offsets, value_data = _binary_parts(values)
    row_len, value_len = np.diff(row_offsets), np.diff(value_offsets)
    sizes = 21 + row_len + value_len  # lengths (8), row length (2), row, key tail (10), value, MVCC (1)
    starts = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(sizes, out=starts[1:])
    cells = np.zeros(int(starts[-1]), dtype=np.uint8)
    if n:
        head = np.empty(n, dtype=[("k", ">i4"), ("v", ">i4"), ("r", ">i2")])
        head["k"], head["v"], head["r"] = row_len + 12, value_len, row_len
        cells[(starts[:-1, None] + np.arange(10)).ravel()] = head.view(np.uint8)
        _scatter(cells, starts[:-1] + 10, row_offsets, row_data)
        tail = np.frombuffer(KEY_TAIL, dtype=np.uint8)
        cells[((starts[:-1] + 10 + row_len)[:, None] + np.arange(len(KEY_TAIL))).ravel()] = np.tile(tail, n)
        _scatter(cells, starts[:-1] + 20 + row_len, value_offsets, value_data)
    out = bytearray()
    index: list[tuple[int, int, bytes]] = []
    first = 0
    while first < n:  # a block: the cells from `first` while they fit (at least one)
        last = max(first + 1, int(np.searchsorted(starts, starts[first] + block_size, side="right")) - 1)
        offset = len(out)
        written = _write_block(out, DATA, cells[starts[first]:starts[last]].tobytes(), codec)
        row = row_data[row_offsets[first]:row_offsets[first + 1]].tobytes()
        index.append((offset, written, struct.pack(">h", len(row)) + row))
        first = last
    raw_total = int(starts[-1])
    last_row = row_data[row_offsets[n - 1]:row_offsets[n]].tobytes() if n else b""
    meta_index = []
    for name, value in (meta or {}).items():
        start = len(out)
        meta_index.append((start, _write_block(out, META, value, codec), name.encode()))
    root_offset = len(out)
    _write_block(out, ROOT_INDEX, b"".join(struct.pack(">qi", o, s) + _hadoop_vint(len(k)) + k
                                            for o, s, k in index), codec)
    _write_block(out, ROOT_INDEX, b"".join(struct.pack(">qi", o, s) + _hadoop_vint(len(n)) + n
                                            for o, s, n in meta_index), codec)
    key_total = int(row_len.sum())  # (the row keys only: what Hudi 1.1 writes, every fixture HFile)
    value_total = int(value_len.sum())
    own = {  # (inserted after the caller's entries, as Hudi's writer does)
        b"hfile.LASTKEY": struct.pack(">h", len(last_row)) + last_row if n else b"",
        b"hfile.AVG_KEY_LEN": struct.pack(">i", key_total // n if n else 0),
        b"hfile.AVG_VALUE_LEN": struct.pack(">i", value_total // n if n else 0),
        b"MAX_MEMSTORE_TS_KEY": struct.pack(">q", 0),
        b"KEY_VALUE_VERSION": struct.pack(">i", 1),
        b"hfile.CREATE_TIME_TS": struct.pack(">q", int(time.time() * 1000) if create_time_ms is None
                                             else create_time_ms),
    }
    entries = {**(info or {}), **{k: (info or {}).get(k, v) for k, v in own.items()}}
    body = b"".join(_pb_bytes(1, _pb_bytes(1, k) + _pb_bytes(2, v)) for k, v in _java_map_order(entries))
    info_offset = len(out)
    _write_block(out, FILE_INFO, b"PBUF" + _pb_varint(len(body)) + body, codec)
    proto = (_pb_int(1, info_offset) + _pb_int(2, root_offset) + _pb_int(3, raw_total) + _pb_int(5, len(index))
             + _pb_int(6, len(meta_index)) + _pb_int(7, n) + _pb_int(8, 1)
             + _pb_int(9, 0 if index else (1 << 64) - 1) + _pb_int(10, index[-1][0] if index else 0)
             + _pb_bytes(11, COMPARATOR) + _pb_int(12, codec))
    trailer = TRAILER_MAGIC + _pb_varint(len(proto)) + proto
    out += trailer + b"\x00" * (TRAILER_SIZE - len(trailer) - 4) + struct.pack(">i", 3)
    return bytes(out)


def _binary_parts(array: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(offsets from 0, bytes) of a binary (or string) array without nulls."""
    array = array.cast(pa.large_binary())
    if array.null_count:
        raise ValueError("an HFile cell is null")
    offsets = np.frombuffer(array.buffers()[1], dtype=np.int64)[array.offset:array.offset + len(array) + 1]
    data = np.frombuffer(array.buffers()[2], dtype=np.uint8) if array.buffers()[2] is not None \
        else np.zeros(0, np.uint8)
    return offsets - offsets[0], data[offsets[0]:offsets[-1]] if len(offsets) else data[:0]


def _scatter(out: np.ndarray, at: np.ndarray, offsets: np.ndarray, data: np.ndarray) -> None:
    """Item i's bytes (data[offsets[i]:offsets[i + 1]]) written to out[at[i]:...]."""
    lengths = np.diff(offsets)
    out[np.repeat(at - offsets[:-1], lengths) + np.arange(int(offsets[-1]), dtype=np.int64)] = data


def _write_block(out: bytearray, magic: bytes, payload: bytes, codec: int) -> int:
    """Append one block (no checksums: type 0, zero bytes); returns its size on disk."""
    body = _java_gzip(payload) if codec == GZ else payload
    with_header = HEADER + len(body)
    checksums = 4 * math.ceil(with_header / BYTES_PER_CHECKSUM)
    out += magic + struct.pack(">iiqbii", len(body) + checksums, len(payload), -1, 0, BYTES_PER_CHECKSUM,
                               with_header)
    out += body + b"\x00" * checksums
    return HEADER + len(body) + checksums


def _java_map_order(entries: dict[bytes, bytes]) -> list[tuple[bytes, bytes]]:
    """The entries in the iteration order of the Java `HashMap<String, byte[]>` Hudi keeps the
    file info in (by bucket of the key's hash, then insertion order)."""
    capacity = 16
    while len(entries) > capacity * 3 // 4:
        capacity *= 2

    def bucket(key: bytes) -> int:
        h = 0
        for ch in key.decode("utf-8", "replace"):
            h = (31 * h + ord(ch)) & 0xFFFFFFFF
        return (h ^ (h >> 16)) & (capacity - 1)

    return sorted(entries.items(), key=lambda kv: bucket(kv[0]))  # (stable: insertion order within one)


def _java_gzip(payload: bytes) -> bytes:
    """A gzip stream as Java's `GZIPOutputStream` writes it (default level, a 10-byte header
    with no time, no extra flags, OS 0): byte-alike with Hudi's own HFiles."""
    deflate = zlib.compressobj(6, zlib.DEFLATED, -15)
    body = deflate.compress(payload) + deflate.flush()
    return (b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x00" + body
            + struct.pack("<II", zlib.crc32(payload), len(payload) & 0xFFFFFFFF))


# -- encodings: protobuf varints and Hadoop's vint ---------------------------------------------
def _varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        b = data[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7


def _pb_varint(value: int) -> bytes:
    out = bytearray()
    while True:
        b = value & 0x7F
        value >>= 7
        if value:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _pb_int(number: int, value: int) -> bytes:
    return _pb_varint(number << 3) + _pb_varint(value)


def _pb_bytes(number: int, value: bytes) -> bytes:
    return _pb_varint(number << 3 | 2) + _pb_varint(len(value)) + value


def _protobuf(data: bytes) -> dict[int, int | bytes]:
    """The scalar fields of a protobuf message (the last of a repeated one)."""
    out: dict[int, int | bytes] = {}
    pos = 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            out[number], pos = _varint(data, pos)
        elif wire == 2:
            length, pos = _varint(data, pos)
            out[number] = data[pos:pos + length]
            pos += length
        elif wire == 1:
            out[number] = struct.unpack_from("<q", data, pos)[0]
            pos += 8
        elif wire == 5:
            out[number] = struct.unpack_from("<i", data, pos)[0]
            pos += 4
        else:
            raise ValueError(f"protobuf wire type {wire}")
    return out


def _pairs(data: bytes) -> list[tuple[bytes, bytes]]:
    """The `BytesBytesPair` entries (field 1) of an `InfoProto`."""
    out = []
    pos = 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        length, pos = _varint(data, pos)
        entry = data[pos:pos + length]
        pos += length
        if key >> 3 == 1:
            pair = _protobuf(entry)
            out.append((bytes(pair.get(1, b"")), bytes(pair.get(2, b""))))
    return out


def _hadoop_vint(value: int) -> bytes:
    """Hadoop's `WritableUtils.writeVLong` (what HBase writes index key lengths with)."""
    if -112 <= value <= 127:
        return struct.pack(">b", value)
    length = -112
    if value < 0:
        value = ~value
        length = -120
    tmp = value
    while tmp:
        tmp >>= 8
        length -= 1
    out = bytearray(struct.pack(">b", length))
    n = -(length + 120) if length < -120 else -(length + 112)
    for i in range(n - 1, -1, -1):
        out.append((value >> (8 * i)) & 0xFF)
    return bytes(out)


def _hadoop_vlong(data: bytes, pos: int) -> tuple[int, int]:
    first = struct.unpack_from(">b", data, pos)[0]
    if first >= -112:
        return first, pos + 1
    size = (-119 - first) if first < -120 else (-111 - first)
    value = 0
    for i in range(1, size):
        value = (value << 8) | data[pos + i]
    negative = first < -120 or (-112 <= first < 0)
    return (~value if negative else value), pos + size

