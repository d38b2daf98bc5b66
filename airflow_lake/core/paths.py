"""Table file paths as timeline payloads store them (absolute: `file:/...`, `s3://...`) and
as `Storage` takes them (relative to the table root); deleting them as engine tasks."""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass
from functools import partial
from urllib.parse import urlsplit

from .context import TableContext
from .engine import Engine
from .errors import PathEscapeError
from .storage import Storage

# URI schemes naming the same kind of store (a path recorded as `s3a://` on an `s3://` table)
_SCHEME_FAMILY = {"s3a": "s3", "s3n": "s3", "gcs": "gs", "abfss": "abfs", "viewfs": "hdfs"}
_URI = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*):(.*)", re.DOTALL)


def absolute_path(storage: Storage, path: str) -> str:
    """The absolute form of a table-relative path (how plans and metadata record files)."""
    if storage.is_local or "://" not in storage.uri:
        return storage.full(path)
    return f"{storage.uri.split('://')[0]}://{storage.full(path)}"


def _family(scheme: str) -> str:
    scheme = scheme.lower()
    return _SCHEME_FAMILY.get(scheme, scheme)


def _table_scheme(storage: Storage) -> str:
    return "file" if storage.is_local or "://" not in storage.uri else _family(urlsplit(storage.uri).scheme)


def _under_root(storage: Storage, absolute: str) -> str | None:
    """`absolute` (a path in the file system, `..` and `.` normalised) relative to the root,
    None when it is not under the root."""
    norm = posixpath.normpath(absolute)
    root = storage.root.rstrip("/")
    if norm == root:
        return ""
    return norm[len(root) + 1 :] if norm.startswith(root + "/") else None


def inside_path(storage: Storage, path: str) -> str | None:
    """A recorded path (a URI, an absolute path or a path relative to the root) as a path
    relative to the table root, `..` and `.` resolved; None when it leads outside the table
    (another folder, bucket or scheme, or locally a symbolic link inside the table pointing
    out of it)."""
    rel = _inside_text(storage, path)
    if rel is None or not storage.is_local:
        return rel
    return rel if storage.really_inside(posixpath.join(storage.root, rel) if rel else storage.root) else None


def _inside_text(storage: Storage, path: str) -> str | None:
    """`inside_path` on the path's text alone (no symbolic link followed)."""
    m = _URI.fullmatch(path)
    if m is not None and (m.group(2).startswith("//") or m.group(1).lower() == "file"):
        if _family(m.group(1)) != _table_scheme(storage):
            return None
        scheme, rest = _family(m.group(1)), m.group(2)
        netloc, located = ("", rest) if not rest.startswith("//") else rest[2:].partition("/")[::2]
        located = "/" + located.lstrip("/")  # not urlsplit: `?` and `#` are file name characters here
        if scheme == "file":
            return _under_root(storage, located) if netloc in ("", "localhost") else None
        return _under_root(storage, located if scheme == "hdfs" else netloc + located)
    if path.startswith("/"):
        return _under_root(storage, path) if _table_scheme(storage) in ("file", "hdfs") else None
    if storage.is_object_store and "/" in storage.root.strip("/") and path.startswith(storage.root.rstrip("/") + "/"):
        # `bucket/prefix/key` recorded without its scheme; at a bucket's root a path starting
        # with the bucket's name is relative (a partition `acme` of table `s3://acme`)
        return _under_root(storage, path)
    norm = posixpath.normpath(path) if path else "."
    if norm == ".." or norm.startswith("../"):
        return None
    return "" if norm == "." else norm


def relative_path(storage: Storage, path: str, *, instant: str | None = None, what: str = "path") -> str:
    """A recorded path (absolute, a URI, or relative) made relative to the table root.

    Raises PathEscapeError naming the table, the instant and the path when it resolves
    outside the table: the caller refuses the plan before anything changes."""
    rel = inside_path(storage, path)
    if rel is None:
        at = f"instant {instant}: " if instant else ""
        raise PathEscapeError(f"table {storage.uri}: {at}{what} {path!r} resolves outside the table's base path "
                              f"{storage.root} (symbolic links followed); refused, nothing was changed")
    return rel


def delete_files(ctx: TableContext, paths: list[str]) -> int:
    """Delete these files (paths relative to the table); already gone counts as deleted."""
    for path in paths:
        ctx.storage.delete(path)
    return len(paths)


@dataclass(frozen=True)
class Deleter:
    """Deletes groups of table files (relative paths), one engine task per group: on Spark
    the deletions run in executors, not in the driver."""

    engine: Engine
    ctx: TableContext

    def __call__(self, groups: list[list[str]]) -> None:
        self.engine.map(partial(delete_files, self.ctx), [g for g in groups if g])
