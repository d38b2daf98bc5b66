"""The table lock: `.hoodie/lock` taken by create-if-absent, with owner and expiry.

Same file and semantics as Hudi's FileSystemBasedLockProvider, so Java writers configured
with it exclude us. Other providers implement `LockProvider`.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
import uuid
from typing import Protocol

from .errors import LockError
from .storage import Storage

LOCK_PATH = ".hoodie/lock"


class LockProvider(Protocol):
    def acquire(self) -> None: ...
    def release(self) -> None: ...


class FileSystemLock:
    """A lock file; a holder that outlives `expire_ms` is considered dead and replaced."""

    def __init__(self, storage: Storage, *, expire_ms: int = 60_000, wait_ms: int = 60_000):
        self.storage = storage
        self.expire_ms = expire_ms
        self.wait_ms = wait_ms
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{threading.get_ident()}:{uuid.uuid4().hex[:8]}"
        self._depth = 0

    def acquire(self) -> None:
        if self._depth:
            self._depth += 1
            return
        deadline = time.monotonic() + self.wait_ms / 1000
        delay = 0.005
        while True:
            info = json.dumps({"lockCreateTime": int(time.time() * 1000), "owner": self.owner}).encode()
            if self.storage.create(LOCK_PATH, info):
                self._depth = 1
                return
            status = self.storage.status(LOCK_PATH)
            if status is not None and self.expire_ms > 0 and time.time() * 1000 - status.mtime_ms > self.expire_ms:
                self.storage.delete(LOCK_PATH)  # the holder died; take over
                continue
            if time.monotonic() > deadline:
                raise LockError(f"table {self.storage.uri}: could not take {LOCK_PATH} within "
                                f"{self.wait_ms} ms (held: {self._holder()})")
            time.sleep(delay)
            delay = min(delay * 2, 0.2)

    def _holder(self) -> str:
        try:
            return self.storage.read(LOCK_PATH).decode(errors="replace")
        except OSError:
            return "unknown"

    def release(self) -> None:
        self._depth -= 1
        if self._depth == 0:
            try:
                holder = json.loads(self.storage.read(LOCK_PATH)).get("owner")
            except (OSError, ValueError):
                holder = None
            if holder == self.owner:
                self.storage.delete(LOCK_PATH)

    def __enter__(self) -> FileSystemLock:
        self.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.release()
