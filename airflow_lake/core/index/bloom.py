"""The BLOOM index: prune by min/max key range, then footer bloom filters, then confirm by
reading `_hoodie_record_key` of the candidate files only. A file that a sample shows holds many
of the keys skips the filter: its keys are read anyway, and an exact check of them all is cheaper.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..engine import Engine
from ..formats.bloom import _utf8
from ..formats.parquet import MAX_KEY, MIN_KEY, file_bloom, read_footer
from ..model import BaseFile
from ..storage import Storage
from .simple import KeyReader, Tags

_SAMPLE = 512  # keys tested against a file's bloom filter before deciding how to look up the rest
_DIRECT_SHARE = 0.05  # from this share of possible hits in the sample, all keys are confirmed exactly


def _java_order_safe(keys: pa.Array) -> bool:
    """True when Arrow's string order equals Java's UTF-16 order for these keys."""
    _, data = _utf8(keys)
    return not (data >= 0xEE).any()


def tag(storage: Storage, files: list[BaseFile], keys: pa.Array, partitions: pa.Array, *,
        is_global: bool, key_reader: KeyReader, engine: Engine) -> Tags:
    file_index = np.full(len(keys), -1, dtype=np.int64)
    if not files or len(keys) == 0:
        return Tags(file_index, files)
    footers = engine.map(lambda f: read_footer(storage, f.path), files)
    range_ok = _java_order_safe(keys)
    by_partition: dict[str, np.ndarray] = {}
    if not is_global:
        codes = partitions.dictionary_encode()
        idx = codes.indices.to_numpy(zero_copy_only=False)
        for c, name in enumerate(codes.dictionary.to_pylist()):
            by_partition[name] = np.nonzero(idx == c)[0]
    everything = np.arange(len(keys))

    def candidates(i: int) -> np.ndarray:
        f, footer = files[i], footers[i]
        rows = everything if is_global else by_partition.get(f.partition, everything[:0])
        if not len(rows):
            return rows
        sub = keys.take(pa.array(rows))
        lo, hi = footer.get(MIN_KEY), footer.get(MAX_KEY)
        if lo is not None and hi is not None and range_ok and _java_order_safe(pa.array([lo, hi])):
            inside = pc.and_(pc.greater_equal(sub, lo), pc.less_equal(sub, hi)).to_numpy(zero_copy_only=False)
            rows, sub = rows[inside], sub.filter(pa.array(inside))
        bloom = file_bloom(storage, f.path)
        if bloom is None or not len(rows):
            return rows
        # Test a sample first: when many keys may be in the file (an update-heavy batch), its
        # keys are read anyway and checking them all exactly is cheaper than the filter.
        sample = bloom.might_contain(sub.slice(0, _SAMPLE))
        if len(rows) > _SAMPLE and sample.mean() < _DIRECT_SHARE:
            return rows[bloom.might_contain(sub)]
        return rows if sample.any() else rows[:0]

    cand = engine.map(candidates, range(len(files)))

    def confirm(i: int) -> tuple[np.ndarray, np.ndarray]:
        rows = cand[i]
        if not len(rows):
            return rows, np.zeros(0, bool)
        stored = key_reader(files[i])
        # hash the few candidates and probe the file's many keys, not the other way round
        wanted = keys.take(pa.array(rows))
        present = stored.filter(pc.is_in(stored, value_set=wanted))
        return rows, pc.is_in(wanted, value_set=present).to_numpy(zero_copy_only=False)

    for i, (rows, found) in enumerate(engine.map(confirm, [i for i in range(len(files))])):
        hit = rows[found]
        file_index[hit[file_index[hit] < 0]] = i
    return Tags(file_index, files)
