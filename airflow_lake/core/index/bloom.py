"""The BLOOM index: prune by min/max key range, then footer bloom filters, then confirm.

Confirming reads `_hoodie_record_key` of a candidate file and checks the candidates exactly,
as Java does. Two shortcuts, both measured on update-heavy upserts:

- A file that a sample of its candidates shows to hold many of them skips the filter test: its
  keys are read anyway, and checking every candidate exactly is cheaper than the filter.
- With `trust_filters` (COW upserts and deletes under a non-global index: the caller rewrites
  every claimed file and sees each key that is really there) a positive test of an exact
  enough filter (`TRUSTED_FPP`) stands for a key that no other file's filter claims. A false
  positive (about 2e-9 per key and file with Hudi's defaults) is then an insert into the
  rewritten file, which the rewrite reports as such; the filter is extended with the key.

Every key tested in full is hashed once per commit, not once per file.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from functools import partial

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..engine import Engine
from ..formats.bloom import key_positions, utf8_buffers
from ..formats.parquet import MAX_KEY, MIN_KEY, file_bloom, file_num_rows, read_footer
from ..model import BaseFile
from ..storage import Storage
from .simple import KeyReader, Tags

TRUSTED_FPP = 1e-6  # per key and file; Hudi's defaults (60000 entries, 1e-9) give ~2e-9
_SAMPLE = 64  # candidates tested against a filter before deciding whether to test the rest
_DIRECT_SHARE = 0.05  # from this share of possible hits in the sample, confirm all exactly


def _java_order_safe(keys: pa.Array) -> bool:
    """True when Arrow's string order equals Java's UTF-16 order for these keys."""
    _, data = utf8_buffers(keys)
    return not (data >= 0xEE).any()


class _KeyHashes:
    """Bit positions of a group of incoming keys (a partition's, or all), computed once per
    filter size and shared by every file the group is tested against (in this process:
    pickled, only the keys travel)."""

    def __init__(self, keys: pa.Array):
        self.keys = keys
        self._done: dict[tuple[int, int], np.ndarray] = {}
        self._lock = threading.Lock()

    def __getstate__(self) -> dict:
        return {"keys": self.keys}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["keys"])

    def positions(self, num_hashes: int, bit_size: int) -> np.ndarray:
        with self._lock:
            key = (num_hashes, bit_size)
            if key not in self._done:
                self._done[key] = key_positions(self.keys, num_hashes, bit_size)
            return self._done[key]


@dataclass(frozen=True)
class _Probe:
    """What every file's candidate test needs: the files and the incoming keys by group
    (a partition's rows, or all rows under a global index)."""

    storage: Storage
    files: list[BaseFile]
    is_global: bool
    trust_filters: bool
    range_ok: bool  # Arrow's string order is Java's for these keys
    groups: dict[str, np.ndarray]  # rows of the incoming keys each file is tested with
    group_keys: dict[str, pa.Array]
    hashes: dict[str, _KeyHashes]  # when a full test needs them


@dataclass(frozen=True)
class _Confirm:
    """What every file's confirmation needs: its candidates, how many files claim each row."""

    files: list[BaseFile]
    keys: pa.Array
    found: list[tuple[np.ndarray, bool]]
    claims: np.ndarray
    key_reader: KeyReader


def tag(storage: Storage, files: list[BaseFile], keys: pa.Array, partitions: pa.Array, *,
        is_global: bool, key_reader: KeyReader, engine: Engine, trust_filters: bool = False) -> Tags:
    file_index = np.full(len(keys), -1, dtype=np.int64)
    if not files or len(keys) == 0:
        return Tags(file_index, files)
    groups: dict[str, np.ndarray] = {}
    if is_global:
        groups[""] = np.arange(len(keys))
    else:
        codes = partitions.dictionary_encode()
        idx = codes.indices.to_numpy(zero_copy_only=False)
        for c, name in enumerate(codes.dictionary.to_pylist()):
            groups[name] = np.nonzero(idx == c)[0]
    group_keys = {name: keys.take(pa.array(rows)) for name, rows in groups.items()}
    probe = _Probe(storage, files, is_global, trust_filters, _java_order_safe(keys), groups, group_keys,
                   {name: _KeyHashes(k) for name, k in group_keys.items()})
    found = engine.map(partial(_candidates, probe), range(len(files)))
    claims = np.bincount(np.concatenate([rows for rows, _ in found]), minlength=len(keys))
    confirm = partial(_confirmed, _Confirm(files, keys, found, claims, key_reader))
    for i, hit in enumerate(engine.map(confirm, range(len(files)))):
        file_index[hit[file_index[hit] < 0]] = i
    return Tags(file_index, files)


def _candidates(probe: _Probe, i: int) -> tuple[np.ndarray, bool]:
    """Rows that may be in file i, and whether a positive test can stand for the file."""
    f = probe.files[i]
    group = "" if probe.is_global else f.partition
    rows = probe.groups.get(group, np.zeros(0, np.int64))
    if not len(rows):
        return rows, False
    storage = probe.storage
    local = np.arange(len(rows))
    footer = read_footer(storage, f.path)
    lo, hi = footer.get(MIN_KEY), footer.get(MAX_KEY)
    if lo is not None and hi is not None and probe.range_ok and max(lo + hi, default="") < "\ue000":
        sub = probe.group_keys[group]
        local = np.nonzero(pc.and_(pc.greater_equal(sub, lo), pc.less_equal(sub, hi))
                           .to_numpy(zero_copy_only=False))[0]
    bloom = file_bloom(storage, f.path)
    if bloom is None or not len(local):
        return rows[local], False
    trusted = (probe.trust_filters and not probe.is_global
               and bloom.false_positive_rate(file_num_rows(storage, f.path)) <= TRUSTED_FPP)
    if not trusted and len(local) > _SAMPLE:
        sample = probe.group_keys[group].take(pa.array(local[:_SAMPLE]))
        if bloom.might_contain(sample).mean() >= _DIRECT_SHARE:
            return rows[local], False  # many hits: every candidate is checked exactly
    positions = probe.hashes[group].positions(bloom.num_hashes, bloom.bit_size)[:, local]
    return rows[local[bloom.contains_positions(positions)]], trusted


def _confirmed(spec: _Confirm, i: int) -> np.ndarray:
    """The candidate rows of file i that it really holds (a trusted filter's sole claims as they are)."""
    rows, trusted = spec.found[i]
    sure = spec.claims[rows] == 1 if trusted else np.zeros(len(rows), dtype=bool)
    check = rows[~sure]
    if not len(check):
        return rows
    stored = spec.key_reader(spec.files[i])
    # hash the few candidates and probe the file's many keys, not the other way round
    wanted = spec.keys.take(pa.array(check))
    present = stored.filter(pc.is_in(stored, value_set=wanted))
    return np.concatenate([rows[sure], check[pc.is_in(wanted, value_set=present).to_numpy(zero_copy_only=False)]])
