"""Storage over `pyarrow.fs`: the only I/O layer of the core.

Local paths and URIs (`file://`, `s3://`, `gs://`, `hdfs://`) are accepted. There is no
rename and no append: object stores have neither. `create` (create-if-absent) is the one
atomic primitive the timeline needs.
"""

from __future__ import annotations

import os
import posixpath
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import pyarrow as pa
import pyarrow.fs as pafs

from .errors import InvalidOptionError


@dataclass(frozen=True, slots=True)
class FileStatus:
    """A listed file: path relative to the storage root, size in bytes, mtime in ms."""

    path: str
    size: int
    mtime_ms: int

    @property
    def name(self) -> str:
        return self.path.rpartition("/")[2]


class Storage:
    """A file system rooted at a table's base path; all paths are relative to the root."""

    def __init__(self, uri: str, filesystem: pafs.FileSystem | None = None):
        if filesystem is None:
            if "://" not in uri:
                uri = os.path.abspath(uri)
                filesystem, root = pafs.LocalFileSystem(), uri
            else:
                filesystem, root = pafs.FileSystem.from_uri(uri)
        else:
            root = uri
        self.uri = uri
        self.fs = filesystem
        self.root = root.rstrip("/") or "/"
        self.is_local = isinstance(filesystem, pafs.LocalFileSystem)

    def full(self, path: str) -> str:
        """Absolute path inside the file system for a path relative to the root."""
        return posixpath.join(self.root, path) if path else self.root

    # -- reads -----------------------------------------------------------------------------
    def exists(self, path: str) -> bool:
        return self.fs.get_file_info(self.full(path)).type != pafs.FileType.NotFound

    def is_dir(self, path: str) -> bool:
        return self.fs.get_file_info(self.full(path)).type == pafs.FileType.Directory

    def read(self, path: str) -> bytes:
        with self.fs.open_input_stream(self.full(path)) as f:
            return f.read()

    def status(self, path: str) -> FileStatus | None:
        info = self.fs.get_file_info(self.full(path))
        if info.type == pafs.FileType.NotFound:
            return None
        return self._status(info)

    def _status(self, info: pafs.FileInfo) -> FileStatus:
        rel = info.path[len(self.root) :].lstrip("/") if info.path.startswith(self.root) else info.path
        mtime = info.mtime_ns // 1_000_000 if info.mtime_ns is not None else 0
        return FileStatus(rel, info.size or 0, mtime)

    def list(self, path: str, *, recursive: bool = False) -> list[FileStatus]:
        """Files (not folders) under `path`; an absent folder lists as empty."""
        selector = pafs.FileSelector(self.full(path), allow_not_found=True, recursive=recursive)
        return [self._status(i) for i in self.fs.get_file_info(selector) if i.is_file]

    def list_names(self, path: str) -> list[tuple[str, int | None]]:
        """(name, mtime in ms) of the files directly in `path`, the mtime None where it would
        cost a stat per file (a local folder: names only); an absent folder lists as empty."""
        if not self.is_local:
            return [(f.name, f.mtime_ms) for f in self.list(path)]
        try:
            with os.scandir(self.full(path)) as entries:
                return [(e.name, None) for e in entries if e.is_file()]
        except (FileNotFoundError, NotADirectoryError):
            return []

    def list_dirs(self, path: str) -> list[str]:
        selector = pafs.FileSelector(self.full(path), allow_not_found=True)
        return [
            self._status(i).path for i in self.fs.get_file_info(selector)
            if i.type == pafs.FileType.Directory
        ]

    def walk_files(self, path: str = "") -> Iterator[FileStatus]:
        yield from self.list(path, recursive=True)

    def file_in_the_way(self) -> str | None:
        """Local file systems: the root, or its nearest existing ancestor, when that is a
        regular file (no folder can be made there). Object stores have no such conflict."""
        if not self.is_local:
            return None
        path = self.root
        while True:
            kind = self.fs.get_file_info(path).type
            if kind == pafs.FileType.File:
                return path
            if kind != pafs.FileType.NotFound:
                return None
            parent = posixpath.dirname(path)
            if parent == path:
                return None
            path = parent

    def open_input(self, path: str) -> pa.NativeFile:
        return self.fs.open_input_file(self.full(path))

    # -- writes ----------------------------------------------------------------------------
    def mkdirs(self, path: str) -> None:
        self.fs.create_dir(self.full(path), recursive=True)

    def write(self, path: str, data: bytes) -> None:
        """Write a whole file (overwrite). Object stores make this one PUT."""
        self._ensure_parent(path)
        with self.fs.open_output_stream(self.full(path)) as f:
            f.write(data)

    def create(self, path: str, data: bytes = b"") -> bool:
        """Create the file only if it does not exist. Returns False when it already existed.

        On a local file system the content is written to a temp file first and hard-linked into
        place, so exactly one of several racing creators wins and no reader sees a torn file.
        On object stores a PUT is atomic but pyarrow offers no conditional PUT; there the check
        is made under the table lock, which every timeline transition holds.
        """
        if self.is_local:
            # write a private temp file, then hard-link it into place: the link is atomic and
            # fails if the name exists, so a crash never leaves a torn or empty timeline file
            full = self.full(path)
            folder = os.path.dirname(full)
            os.makedirs(folder, exist_ok=True)
            tmp = os.path.join(folder, f".tmp-{uuid.uuid4().hex}")
            with open(tmp, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            try:
                os.link(tmp, full)
            except FileExistsError:
                return False
            finally:
                os.unlink(tmp)
            return True
        if self.exists(path):
            return False
        self.write(path, data)
        return True

    def delete(self, path: str, *, missing_ok: bool = True) -> None:
        try:
            self.fs.delete_file(self.full(path))
        except FileNotFoundError:
            if not missing_ok:
                raise

    def delete_dir(self, path: str) -> None:
        """Delete a folder and its content; an absent folder (or one deleted meanwhile) is fine."""
        try:
            if self.is_dir(path):
                self.fs.delete_dir(self.full(path))
        except FileNotFoundError:
            pass

    def _ensure_parent(self, path: str) -> None:
        if self.is_local:
            os.makedirs(os.path.dirname(self.full(path)), exist_ok=True)


def open_storage(uri: str, storage_options: dict[str, Any] | None = None) -> Storage:
    """A `Storage` at `uri`, its file system built from `storage_options` when given."""
    if not storage_options:
        return Storage(uri)
    parts = urlsplit(uri)
    scheme = parts.scheme.lower()
    opts = dict(storage_options)
    if scheme in ("s3", "s3a"):
        fs: pafs.FileSystem = pafs.S3FileSystem(**opts)
    elif scheme in ("gs", "gcs"):
        fs = pafs.GcsFileSystem(**opts)
    elif scheme in ("abfs", "abfss"):
        fs = pafs.AzureFileSystem(**opts)
    elif scheme in ("hdfs", "viewfs"):
        fs = pafs.HadoopFileSystem(host=opts.pop("host", f"{scheme}://{parts.netloc}"), **opts)
        storage = Storage(parts.path, fs)
        storage.uri = uri
        return storage
    else:
        raise InvalidOptionError(f"table {uri}: storage options are supported for s3, gs, abfs and hdfs "
                                 f"tables, not {scheme or 'local'!r} ones")
    storage = Storage(posixpath.join(parts.netloc, parts.path.lstrip("/")), fs)
    storage.uri = uri  # errors name the table by its URI
    return storage
