"""The SIMPLE index: read `_hoodie_record_key` of the latest base files and join (global or not)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..engine import Engine
from ..formats.parquet import read_base_file
from ..keys import KeyGenerator
from ..model import BaseFile
from ..storage import Storage

_SEP = "\x00"


@dataclass
class Tags:
    """Location of each incoming record: index into `files`, or -1 when the key is new."""

    file_index: np.ndarray
    files: list[BaseFile]

    def partitions(self) -> pa.Array:
        """Partition path of each tagged record's current location ("" for untagged)."""
        names = pa.array([f.partition for f in self.files] + [""], pa.string())
        return names.take(pa.array(np.where(self.file_index < 0, len(self.files), self.file_index)))


KeyReader = Callable[[BaseFile], pa.Array]
"""The live record keys of the file group whose latest base file is given."""


def read_keys(storage: Storage, base: BaseFile, keygen: KeyGenerator, populate_meta: bool) -> pa.Array:
    """The record keys of one base file, reading only the columns needed."""
    if populate_meta:
        col = read_base_file(storage, base.path, ["_hoodie_record_key"]).column(0)
        if col.null_count == 0:
            return col.combine_chunks()
    data = read_base_file(storage, base.path, list({f.split(".")[0] for f in keygen.record_key_fields}))
    return keygen.record_keys(data)


def tag(storage: Storage, files: list[BaseFile], keys: pa.Array, partitions: pa.Array, *,
        is_global: bool, key_reader: KeyReader, engine: Engine, trust_filters: bool = False) -> Tags:
    """Find, for each (key, partition) — or each key when global — the file group holding it.
    (`trust_filters` is the bloom index's; every key is looked up here.)"""
    if not files or len(keys) == 0:
        return Tags(np.full(len(keys), -1, dtype=np.int64), files)
    found = engine.map(key_reader, files)
    existing = pa.chunked_array(found, type=pa.string()).combine_chunks()
    owner = np.repeat(np.arange(len(files)), [len(k) for k in found])
    if len(owner) == 0:
        return Tags(np.full(len(keys), -1, dtype=np.int64), files)
    if is_global:
        probe, values = keys, existing
    else:
        part_of = pa.array([f.partition for f in files], pa.string()).take(pa.array(owner))
        probe = pc.binary_join_element_wise(partitions, keys, _SEP)
        values = pc.binary_join_element_wise(part_of, existing, _SEP)
    pos = pc.index_in(probe, value_set=values)
    pos_np = pos.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)
    file_index = np.where(pos_np >= 0, owner[np.maximum(pos_np, 0)], -1)
    return Tags(file_index, files)
