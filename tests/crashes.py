"""A storage that dies (raises `Crash`, which nothing handles) at its N-th mutation: the
crash points of the crash tests."""

from __future__ import annotations

import threading
from collections.abc import Callable

from airflow_lake.core.storage import Storage


class Crash(BaseException):
    """Stands for the process dying: not an Exception, so nothing handles it."""


class Dies(Storage):
    """Dies at its `at`-th call of `ops` (write, create, delete) on a path `match` accepts (all
    by default; `at=0`: never), counting them in `count`. Heartbeat refreshes, whose number
    depends on timing, are not counted."""

    def __init__(self, uri: str, at: int = 1, *, ops: tuple[str, ...] = ("write", "create", "delete"),
                 match: Callable[[str], bool] | None = None):
        super().__init__(uri)
        self.at, self.ops, self.match, self.count = at, ops, match, 0

    def _tick(self, op: str, path: str) -> None:
        if op not in self.ops or (self.match is not None and not self.match(path)) \
                or threading.current_thread().name.startswith("heartbeat-"):
            return
        self.count += 1
        if self.count == self.at:
            raise Crash(f"{op} {path}")

    def write(self, path, data):
        self._tick("write", path)
        return super().write(path, data)

    def create(self, path, data=b""):
        self._tick("create", path)
        return super().create(path, data)

    def delete(self, path, *args, **kwargs):
        self._tick("delete", path)
        return super().delete(path, *args, **kwargs)
