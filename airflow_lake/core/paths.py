"""Table file paths as timeline payloads store them (absolute: `file:/...`, `s3://...`) and
as `Storage` takes them (relative to the table root); deleting them as engine tasks."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

from .context import TableContext
from .engine import Engine
from .storage import Storage


def absolute_path(storage: Storage, path: str) -> str:
    """The absolute form of a table-relative path (how plans and metadata record files)."""
    return storage.full(path) if storage.is_local else f"{storage.uri.split('://')[0]}://{storage.full(path)}"


def relative_path(storage: Storage, path: str) -> str:
    """A recorded (absolute) path made relative to the table root."""
    path = path.split("://", 1)[-1]
    root = storage.root.split("://", 1)[-1]
    return path[len(root) :].lstrip("/") if path.startswith(root) else path


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
