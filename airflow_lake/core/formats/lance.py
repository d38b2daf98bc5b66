"""Lance base files (Hudi 1.1 tables with `hoodie.table.base.file.format=LANCE`), read with the
`pylance` package (the `lance` extra). Read only: a write to such a table is refused before it
starts (table versions 8 and 9 are read, not written)."""

from __future__ import annotations

import os
import tempfile

import pyarrow as pa

from ..errors import InvalidTableError, UnsupportedFeatureError
from ..install import install_hint
from ..storage import Storage

EXTENSION = ".lance"


def read_lance_file(storage: Storage, path: str, columns: list[str] | None = None) -> pa.Table:
    """The rows of one Lance base file, only the `columns` it has (None: all)."""
    return _with_reader(storage, path, lambda reader, local: _read(reader, local, columns))


def lance_num_rows(storage: Storage, path: str) -> int:
    """The number of rows of one Lance base file, from its metadata."""
    return _with_reader(storage, path, lambda reader, local: reader(local).metadata().num_rows)


def _with_reader(storage: Storage, path: str, use):
    """`use(LanceFileReader, local path)` on the file at `path` (a local copy of an object store's)."""
    try:
        from lance.file import LanceFileReader
    except ImportError as e:
        raise UnsupportedFeatureError(f"table {storage.uri}: base file {path} is a Lance file; reading it needs "
                                      f"the pylance package: {install_hint('pylance', 'lance')}") from e
    try:
        if storage.is_local:
            return use(LanceFileReader, storage.full(path))
        with tempfile.TemporaryDirectory() as folder:  # an object store: read through a local copy
            local = os.path.join(folder, os.path.basename(path))
            with open(local, "wb") as f:
                f.write(storage.read(path))
            return use(LanceFileReader, local)
    except FileNotFoundError:
        raise
    except (OSError, ValueError, RuntimeError) as e:
        if not storage.exists(path):
            raise FileNotFoundError(path) from e
        raise InvalidTableError(f"table {storage.uri}: Lance base file {path} is unreadable ({e})") from e


def _read(reader_class, local: str, columns: list[str] | None) -> pa.Table:
    names = reader_class(local).metadata().schema.names if columns is not None else None
    wanted = None if columns is None else [c for c in columns if c in names]
    return reader_class(local, columns=wanted).read_all().to_table()
