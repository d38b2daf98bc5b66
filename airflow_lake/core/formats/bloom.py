"""Hudi's bloom filters, vectorised: Hadoop MurmurHash, SIMPLE and DYNAMIC_V0 (spec §6.3).

Serialised bytes are identical to what Java writes for the same keys in the same order.
"""

from __future__ import annotations

import base64
import math
import struct
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

_M = np.uint32(0x5BD1E995)
MURMUR = 1
SIMPLE = "SIMPLE"
DYNAMIC_V0 = "DYNAMIC_V0"


def bloom_size(num_entries: int, fpp: float) -> tuple[int, int]:
    """(bitSize, numHashes) as Hudi's BloomFilterUtils computes them."""
    bits = math.ceil(num_entries * (-math.log(fpp) / (math.log(2) ** 2)))
    return bits, math.ceil(math.log(2) * bits / num_entries)


def utf8_buffers(keys: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
    """(offsets int64[n+1], data uint8) of a string array."""
    if isinstance(keys, pa.ChunkedArray):
        keys = keys.combine_chunks() if keys.num_chunks != 1 else keys.chunk(0)
    keys = keys.cast(pa.large_string())
    if keys.null_count:
        raise ValueError("bloom filter keys must not be null")
    _, off_buf, data_buf = keys.buffers()
    offsets = np.frombuffer(off_buf, dtype=np.int64)[keys.offset : keys.offset + len(keys) + 1]
    data = np.frombuffer(data_buf, dtype=np.uint8) if data_buf is not None else np.zeros(0, np.uint8)
    return offsets, data


def hash_positions(keys: pa.Array | pa.ChunkedArray, num_hashes: int, bit_size: int):
    """Yield (row indices, positions[num_hashes, len(rows)]) per key-length group."""
    offsets, data = utf8_buffers(keys)
    lengths = np.diff(offsets)
    for length in np.unique(lengths):
        rows = np.nonzero(lengths == length)[0]
        yield rows, _positions_fixed_length(offsets[rows], data, int(length), num_hashes, bit_size)


def key_positions(keys: pa.Array | pa.ChunkedArray, num_hashes: int, bit_size: int) -> np.ndarray:
    """Bit positions of every key: int32[num_hashes, len(keys)]."""
    groups = list(hash_positions(keys, num_hashes, bit_size))
    if len(groups) == 1:  # keys of one length (the usual case): already in row order
        return groups[0][1]
    out = np.empty((num_hashes, len(keys)), np.int32)
    for idx, positions in groups:
        out[:, idx] = positions
    return out


def _positions_fixed_length(starts, data, length, num_hashes, bit_size) -> np.ndarray:
    n = len(starts)
    matrix = data[starts[:, None] + np.arange(length)] if length else np.zeros((n, 0), np.uint8)
    nwords = length // 4
    words = np.ascontiguousarray(matrix[:, : nwords * 4]).view("<u4").astype(np.uint32)
    with np.errstate(over="ignore"):
        k = np.ascontiguousarray((words * _M).T)  # [word, key]: contiguous per word
        k ^= k >> np.uint32(24)
        k *= _M
        tail = length % 4
        tailx = np.zeros(n, np.uint32)
        signed = matrix[:, nwords * 4:].view(np.int8).astype(np.int32)
        if tail >= 3:
            tailx ^= (signed[:, tail - 3] << 16).astype(np.uint32)
        if tail >= 2:
            tailx ^= (signed[:, tail - 2] << 8).astype(np.uint32)
        if tail >= 1:
            tailx ^= signed[:, tail - 1].astype(np.uint32)
        out = np.empty((num_hashes, n), np.int32)
        h = np.zeros(n, np.uint32)
        tmp = np.empty(n, np.uint32)
        length_u = np.uint32(length)
        for i in range(num_hashes):
            h ^= length_u  # h holds the previous hash: the seed
            for w in range(nwords):
                h *= _M
                h ^= k[w]
            if tail:
                h ^= tailx
                h *= _M
            np.right_shift(h, 13, out=tmp)
            h ^= tmp
            h *= _M
            np.right_shift(h, 15, out=tmp)
            h ^= tmp
            np.fmod(h.view(np.int32), bit_size, out=out[i])
    return np.abs(out, out=out)


@dataclass
class BloomFilter:
    """A Hudi bloom filter: one bit-vector row (SIMPLE) or several (DYNAMIC_V0)."""

    bit_size: int
    num_hashes: int
    kind: str = DYNAMIC_V0
    num_entries: int = 60000
    current_nb_record: int = 0
    _packed: np.ndarray | None = None  # the bit vectors as bytes, LSB first: [rows, ceil(bit_size / 8)]
    _b64: bytes | None = None  # the footer text, decoded only when whole rows are needed
    _num_rows: int = 1

    @staticmethod
    def build(keys, *, num_entries=60000, fpp=1e-9, kind=DYNAMIC_V0, max_entries=100000) -> BloomFilter:
        """The filter of these keys, in order: an empty filter extended with them."""
        bit_size, num_hashes = bloom_size(num_entries, fpp)
        empty = np.zeros((1, (bit_size + 7) // 8), np.uint8)
        return BloomFilter(bit_size, num_hashes, kind, num_entries, 0, _packed=empty).extend(keys, 0, max_entries)

    def extend(self, keys, count_before: int, max_entries: int) -> BloomFilter:
        """This filter (of a file's first `count_before` keys) with `keys` added after them,
        exactly as building it from all the keys in order would give."""
        total = count_before + len(keys)
        if self.kind == SIMPLE:
            row_of, nrows, current = np.zeros(total, np.int64), 1, total
        else:
            row_of, nrows, current = dynamic_rows(total, self.num_entries, max_entries)
        width = self.packed.shape[1]
        added = np.zeros((nrows, width * 8), dtype=bool)  # the new keys' bits only, then OR-ed in
        tail = row_of[count_before:]
        for idx, positions in hash_positions(keys, self.num_hashes, self.bit_size):
            added[tail[idx][None, :], positions] = True
        packed = np.packbits(added, axis=1, bitorder="little")
        packed[: len(self.packed)] |= self.packed
        return BloomFilter(self.bit_size, self.num_hashes, self.kind, self.num_entries, current, _packed=packed)

    def matches(self, num_entries: int, fpp: float, kind: str) -> bool:
        """Built with these settings (so it can be extended instead of rebuilt)."""
        bit_size, num_hashes = bloom_size(num_entries, fpp)
        return (self.bit_size, self.num_hashes, self.kind) == (bit_size, num_hashes, kind) and \
            (kind == SIMPLE or self.num_entries == num_entries)

    def might_contain(self, keys) -> np.ndarray:
        """bool per key: possibly present (any row matches all its positions)."""
        return self.contains_positions(key_positions(keys, self.num_hashes, self.bit_size))

    def contains_positions(self, positions: np.ndarray) -> np.ndarray:
        """`might_contain` for keys already hashed (`key_positions` with this filter's sizes). A
        filter parsed from a footer and asked about few keys decodes only the bytes they need."""
        lookups = positions.size * self.num_rows
        if self._packed is None and self._b64 is not None and lookups * 4 < len(self._b64):
            byte = self._row_offsets()[:, None, None] + (positions >> 3)[None, :, :]
            values = _b64_bytes_at(self._b64, byte)
        else:
            values = self.packed[:, positions >> 3]
        bits = (values >> (positions & 7).astype(np.uint8)) & 1  # [rows, hashes, n]
        return bits.all(axis=1).any(axis=0)

    def false_positive_rate(self, num_keys: int) -> float:
        """The chance that a key not among the filter's `num_keys` keys tests positive."""
        m, k = self.bit_size, self.num_hashes
        if self.kind == SIMPLE:
            loads = [num_keys]
        else:  # rows hold num_entries keys each; past saturation the rest go round-robin
            loads = [max(self.num_entries, num_keys / self.num_rows)] * self.num_rows
        return min(1.0, sum((1 - math.exp(-k * n / m)) ** k for n in loads))

    @property
    def num_rows(self) -> int:
        return len(self._packed) if self._packed is not None else self._num_rows

    def _row_offsets(self) -> np.ndarray:
        """Offset of each row's first bit-vector byte in the serialised filter."""
        nbytes = (self.bit_size + 7) // 8
        if self.kind == SIMPLE:
            return np.array([13], np.int64)
        return 25 + np.arange(self.num_rows, dtype=np.int64) * (13 + nbytes) + 13

    @property
    def packed(self) -> np.ndarray:
        """The bit vectors as bytes, LSB first: [rows, ceil(bit_size / 8)]."""
        if self._packed is None:
            raw = base64.b64decode(self._b64)
            nbytes = (self.bit_size + 7) // 8
            self._packed = np.stack([np.frombuffer(raw, np.uint8, nbytes, o) for o in self._row_offsets()])
        return self._packed

    # -- serialisation ---------------------------------------------------------------------
    def _header(self) -> bytes:
        return struct.pack(">iibi", -1, self.num_hashes, MURMUR, self.bit_size)

    def to_bytes(self) -> bytes:
        rows = [self._header() + r.tobytes() for r in self.packed]
        if self.kind == SIMPLE:
            return rows[0]
        head = [self._header(), struct.pack(">iii", self.num_entries, self.current_nb_record, len(rows))]
        return b"".join(head + rows)

    def to_base64(self) -> str:
        return base64.b64encode(self.to_bytes()).decode("ascii")

    @staticmethod
    def from_base64(text: str | bytes, kind: str | None) -> BloomFilter:
        """Parse a footer value: only the header now; the bit vectors when first needed."""
        b64 = text.encode("ascii") if isinstance(text, str) else bytes(text)
        head = base64.b64decode(b64[:36])  # the first 27 bytes: both headers
        kind = kind or SIMPLE
        version, num_hashes, hash_type, bit_size = struct.unpack_from(">iibi", head, 0)
        if version >= 0 or hash_type != MURMUR:
            raise ValueError("only versioned Murmur bloom filters are supported")
        if kind == SIMPLE:
            return BloomFilter(bit_size, num_hashes, SIMPLE, _b64=b64)
        nr, current, nrows = struct.unpack_from(">iii", head, 13)
        return BloomFilter(bit_size, num_hashes, DYNAMIC_V0, nr, current, _b64=b64, _num_rows=nrows)


_B64_ALPHABET = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
_B64_VALUES = np.zeros(256, np.uint8)
_B64_VALUES[np.frombuffer(_B64_ALPHABET, np.uint8)] = np.arange(64)


def _b64_bytes_at(b64: bytes, offsets: np.ndarray) -> np.ndarray:
    """The decoded bytes at these offsets of base64 text, decoding nothing else."""
    text = np.frombuffer(b64, np.uint8)
    quad, within = np.divmod(offsets, 3)
    first = _B64_VALUES[text[4 * quad + within]].astype(np.uint16)
    second = _B64_VALUES[text[4 * quad + within + 1]].astype(np.uint16)
    shift = (2 * within + 2).astype(np.uint16)  # byte k of a quad: chars k and k+1
    return ((first << shift) | (second >> (6 - shift))).astype(np.uint8)


def dynamic_rows(n: int, nr: int, max_entries: int) -> tuple[np.ndarray, int, int]:
    """Row of each of n keys added in order to an InternalDynamicBloomFilter.

    Rows fill `nr` keys each while `rows * nr < max_entries`; once a full row cannot be
    followed by a new one the filter saturates and later keys go round-robin over the rows
    (starting at row 0). Returns (row per key, number of rows, currentNbRecord).
    """
    max_rows = 1
    while max_rows * nr < max_entries:
        max_rows += 1
    filled = max_rows * nr
    i = np.arange(n, dtype=np.int64)
    row_of = np.minimum(i // nr, max_rows - 1)
    nrows = max(1, min(max_rows, -(-n // nr) if n else 1))
    if n > filled:
        extra = i[filled:] - filled
        # the first saturated add goes to row 0, then the round-robin index starts at 0 again
        row_of[filled:] = np.where(extra == 0, 0, (extra - 1) % max_rows)
    current = n - (nrows - 1) * nr
    return row_of, nrows, int(current)


def java_order(key: str) -> bytes:
    """Sort key giving Java's `String.compareTo` (UTF-16 code unit) order."""
    return key.encode("utf-16-be")


def min_max_keys(keys: pa.Array | pa.ChunkedArray) -> tuple[str | None, str | None]:
    """Smallest and largest key in Java `String.compareTo` (UTF-16 code unit) order."""
    if len(keys) == 0:
        return None, None
    _, data = utf8_buffers(keys)
    if (data >= 0xEE).any():  # code points >= U+E000 sort differently in UTF-16
        values = sorted(set(keys.to_pylist()), key=java_order)
        return values[0], values[-1]
    mm = pc.min_max(keys)
    return mm["min"].as_py(), mm["max"].as_py()
