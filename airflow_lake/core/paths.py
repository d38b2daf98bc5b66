"""Table file paths as timeline payloads store them (absolute: `file:/...`, `s3://...`) and
as `Storage` takes them (relative to the table root)."""

from __future__ import annotations

from .storage import Storage


def absolute_path(storage: Storage, path: str) -> str:
    """The absolute form of a table-relative path (how plans and metadata record files)."""
    return storage.full(path) if storage.is_local else f"{storage.uri.split('://')[0]}://{storage.full(path)}"


def relative_path(storage: Storage, path: str) -> str:
    """A recorded (absolute) path made relative to the table root."""
    path = path.split("://", 1)[-1]
    root = storage.root.split("://", 1)[-1]
    return path[len(root) :].lstrip("/") if path.startswith(root) else path
