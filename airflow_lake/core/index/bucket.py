"""The BUCKET index (engine SIMPLE, spec §9): Java `List.hashCode` of the hash-field values,
bucket = (hash & 0x7fffffff) % buckets, one file group per bucket per partition, file ids
prefixed with the zero-padded bucket number."""

from __future__ import annotations

import uuid

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..formats.bloom import utf8_buffers
from ..keys import EMPTY_KEY, NULL_KEY

_MASK = np.uint64(0xFFFFFFFF)


def java_string_hashes(values: pa.Array) -> np.ndarray:
    """Java `String.hashCode` of each string (UTF-16 code units), as uint64 in [0, 2^32)."""
    values = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
    n = len(values)
    out = np.zeros(n, np.uint64)
    if n == 0:
        return out
    offsets, data = utf8_buffers(values.fill_null(""))
    if (data >= 0x80).any():  # non-ASCII: UTF-16 code units differ from bytes
        return np.array([_java_hash(s) for s in values.to_pylist()], dtype=np.uint64)
    lengths = np.diff(offsets)
    for length in np.unique(lengths):
        rows = np.nonzero(lengths == length)[0]
        starts = offsets[rows]
        h = np.zeros(len(rows), np.uint64)
        for i in range(int(length)):
            h = (h * np.uint64(31) + data[starts + i].astype(np.uint64)) & _MASK
        out[rows] = h
    return out


def _java_hash(s: str | None) -> int:
    if s is None:
        return 0
    h = 0
    raw = s.encode("utf-16-be")
    for i in range(0, len(raw), 2):
        h = (31 * h + ((raw[i] << 8) | raw[i + 1])) & 0xFFFFFFFF
    return h


def bucket_ids(keys: pa.Array, num_buckets: int, hash_fields: list[str]) -> np.ndarray:
    """Bucket of each record key, parsing `field:value,...` keys as Java does."""
    keys = keys.combine_chunks() if isinstance(keys, pa.ChunkedArray) else keys
    n = len(keys)
    h = np.zeros(n, np.uint64)
    simple = pc.invert(pc.match_substring(keys, ":")).to_numpy(zero_copy_only=False)
    if simple.any():
        rows = np.nonzero(simple)[0]
        h[rows] = (np.uint64(31) + java_string_hashes(keys.take(pa.array(rows)))) & _MASK
    if not simple.all():
        rows = np.nonzero(~simple)[0]
        h[rows] = _complex_list_hashes(keys.take(pa.array(rows)), hash_fields)
    signed = (h & np.uint64(0x7FFFFFFF)).astype(np.int64)
    return signed % num_buckets


def _complex_list_hashes(keys: pa.Array, hash_fields: list[str]) -> np.ndarray:
    parts = pc.split_pattern(keys, ",")
    lengths = pc.list_value_length(parts).to_numpy(zero_copy_only=False)
    owner = np.repeat(np.arange(len(keys)), lengths)
    flat = pc.list_flatten(parts)
    has_colon = pc.match_substring(flat, ":")
    pairs = pc.split_pattern(flat, ":", max_splits=1)
    name = pc.list_element(pairs, 0)
    value = pc.if_else(has_colon, pc.list_element(pc.if_else(has_colon, pairs, pa.scalar(["", ""], pairs.type)), 1),
                       flat)
    keep = pc.or_(pc.invert(has_colon), pc.is_in(name, value_set=pa.array(hash_fields, pa.string())))
    keep = keep.to_numpy(zero_copy_only=False)
    owner, value = owner[keep], value.filter(pa.array(keep))
    value = pc.if_else(pc.equal(value, EMPTY_KEY), "", value)
    is_null = pc.equal(value, NULL_KEY).to_numpy(zero_copy_only=False)
    hashes = java_string_hashes(value)
    hashes[is_null] = 0
    # List.hashCode: h = 31^m + sum(hash_i * 31^(m-1-i)), all mod 2^32
    m = np.bincount(owner, minlength=len(keys))
    first = np.r_[0, np.cumsum(m)[:-1]]
    pos = np.arange(len(owner)) - first[owner]
    exponent = m[owner] - 1 - pos
    out = _pow31(m.astype(np.int64))
    terms = (hashes * _pow31(exponent)) & _MASK
    np.add.at(out, owner, terms)
    return out & _MASK


def _pow31(exponent: np.ndarray) -> np.ndarray:
    result = np.ones(len(exponent), np.uint64)
    base = np.full(len(exponent), 31, np.uint64)
    e = exponent.astype(np.int64).copy()
    while (e > 0).any():
        odd = (e & 1) == 1
        result[odd] = (result[odd] * base[odd]) & _MASK
        base = (base * base) & _MASK
        e >>= 1
    return result


def bucket_of_file_id(file_id: str) -> int | None:
    head = file_id[:8]
    return int(head) if head.isascii() and head.isdigit() else None


def new_bucket_file_id(bucket: int) -> str:
    return f"{bucket:08d}{str(uuid.uuid4())[8:]}-0"
