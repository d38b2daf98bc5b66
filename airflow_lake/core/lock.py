"""The table lock: `.hoodie/lock` taken by create-if-absent, with owner and expiry.

Same file and semantics as Hudi's FileSystemBasedLockProvider, so Java writers configured
with it exclude us. Other providers implement `LockProvider` and are named by the writer's
`hoodie.write.lock.provider` option (`table_lock`); a table file never names code we import.

The file lock is only as good as the store's create-if-absent: atomic locally and on S3
(conditional PUT), a check then a PUT elsewhere. There, several writers
(`hoodie.write.concurrency.mode=OPTIMISTIC_CONCURRENCY_CONTROL`) need a lock provider
outside the store, and `table_lock` refuses to start without one.
"""

from __future__ import annotations

import importlib
import json
import logging
import os
import socket
import threading
import time
import uuid
from typing import Any, Protocol

from . import objectstore
from .errors import InvalidOptionError, LakeError, LockError
from .storage import Storage

LOCK_PATH = ".hoodie/lock"


SINGLE_WRITER = "SINGLE_WRITER"
MULTI_WRITER = "OPTIMISTIC_CONCURRENCY_CONTROL"
CONCURRENCY_MODES = (SINGLE_WRITER, MULTI_WRITER)
FILE_SYSTEM_PROVIDER = "org.apache.hudi.client.transaction.lock.FileSystemBasedLockProvider"
IN_PROCESS_PROVIDER = "org.apache.hudi.client.transaction.lock.InProcessLockProvider"
BUILT_IN_PROVIDERS = (FILE_SYSTEM_PROVIDER, IN_PROCESS_PROVIDER)
PROVIDER_KEY = "hoodie.write.lock.provider"
log = logging.getLogger(__name__)


class LockProvider(Protocol):
    """A table lock. A class named by the writer's `hoodie.write.lock.provider` option as
    `package.module:Class` (or `package.module.Class`) is called as `Class(storage, options)`
    for each operation and must be re-entrant within it (acquire/release nest)."""

    def acquire(self) -> None: ...
    def release(self) -> None: ...
    def __enter__(self) -> LockProvider: ...
    def __exit__(self, *exc) -> None: ...


class FileSystemLock:
    """A lock file; one not modified for `expire_ms` is a dead holder's and is replaced. While
    held, a keep-alive thread marks the file modified every `expire_ms / 3`, so a holder that
    holds longer than `expire_ms` (a long commit, a big rollback) is never taken for dead."""

    def __init__(self, storage: Storage, *, expire_ms: int = 60_000, wait_ms: int = 60_000):
        self.storage = storage
        self.expire_ms = expire_ms
        self.wait_ms = wait_ms
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{threading.get_ident()}:{uuid.uuid4().hex[:8]}"
        self.lost = False  # set when the keep-alive found the file no longer ours
        self._depth = 0
        self._keep_alive: tuple[threading.Event, threading.Thread] | None = None

    def acquire(self) -> None:
        if self._depth:
            self._depth += 1
            return
        deadline = time.monotonic() + self.wait_ms / 1000
        delay = 0.005
        while True:
            info = json.dumps({"lockCreateTime": int(time.time() * 1000), "owner": self.owner}).encode()
            if self.storage.create(LOCK_PATH, info) or (
                    self.expire_ms > 0 and self.storage.take_over(LOCK_PATH, info, self.expire_ms)):
                self._depth = 1  # (after a take-over: the holder died, its lock is ours now)
                self._start_keep_alive(info)
                return
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

    def _start_keep_alive(self, info: bytes) -> None:
        if self.expire_ms <= 0:
            return  # a lock that never expires needs no keep-alive
        stop = threading.Event()

        def beat() -> None:
            while not stop.wait(max(self.expire_ms / 3, 5) / 1000):
                try:
                    if self.storage.refresh(LOCK_PATH, info):
                        continue
                except Exception as e:  # noqa: BLE001 - the next beat tries again; expiry is 3 beats away
                    log.warning("table %s: could not refresh %s: %s", self.storage.uri, LOCK_PATH, e)
                    continue
                if not stop.is_set():
                    self.lost = True
                    log.error("table %s: %s is no longer held by %s (held: %s): another writer took it "
                              "for a dead holder's", self.storage.uri, LOCK_PATH, self.owner, self._holder())
                return

        thread = threading.Thread(target=beat, name=f"lock-keep-alive-{self.owner}", daemon=True)
        self._keep_alive = (stop, thread)
        thread.start()

    def _stop_keep_alive(self) -> None:
        if self._keep_alive is not None:
            stop, thread = self._keep_alive
            stop.set()
            thread.join()
            self._keep_alive = None

    def check_held(self) -> None:
        """Raise a `LockError` unless `.hoodie/lock` still holds this holder's content (read now).
        A holder frozen past the expiry (a long pause, a suspended process) may have been
        taken for dead and replaced: it must then complete nothing."""
        if self.expire_ms <= 0 and not self.lost:
            return  # a lock that never expires is never taken over
        try:
            holder = None if self.lost else json.loads(self.storage.read(LOCK_PATH)).get("owner")
        except (OSError, ValueError):
            holder = None
        if holder != self.owner:
            raise LockError(f"table {self.storage.uri}: {LOCK_PATH} is no longer held by this writer "
                            f"({self.owner}; held: {self._holder()}): another writer took it for a dead "
                            "holder's, so nothing was completed; the next writer rolls back what this one left")

    def release(self) -> None:
        self._depth -= 1
        if self._depth == 0:
            self._stop_keep_alive()
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


class InProcessLock:
    """Hudi's InProcessLockProvider: a lock per table URI, shared by this process's threads
    only (other processes are not excluded)."""

    _locks: dict[str, threading.RLock] = {}
    _guard = threading.Lock()

    def __init__(self, storage: Storage, options: dict[str, Any] | None = None):
        with self._guard:
            self._lock = self._locks.setdefault(storage.uri, threading.RLock())

    def acquire(self) -> None:
        self._lock.acquire()

    def release(self) -> None:
        self._lock.release()

    def __enter__(self) -> InProcessLock:
        self.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.release()


def lock_provider_name(uri: str, options: dict[str, Any], props: dict[str, str]) -> str:
    """The lock provider of a write: the writer's `hoodie.write.lock.provider` option; one in
    `hoodie.properties` (a file anyone who can write the table can change) only if it is a
    built-in name, never a class to import."""
    given = str(options.get(PROVIDER_KEY) or "").strip()
    if given:
        return given
    stored = str(props.get(PROVIDER_KEY) or "").strip()
    if stored and stored not in BUILT_IN_PROVIDERS:
        log.warning("table %s: ignoring %s=%r from hoodie.properties: a lock class is taken from the writer's "
                    "options only", uri, PROVIDER_KEY, stored)
        return ""
    return stored


def table_lock(storage: Storage, options: dict[str, Any], *, mode: str, provider: str,
               expire_ms: int, wait_ms: int) -> LockProvider:
    """The lock of one operation: the provider `hoodie.write.lock.provider` names (default the
    `.hoodie/lock` file). In multi-writer mode the file lock needs an atomic create-if-absent
    from the store; without one this refuses, naming the table and what to configure."""
    mode = (mode or SINGLE_WRITER).strip().upper()
    if mode not in CONCURRENCY_MODES:
        raise InvalidOptionError(f"table {storage.uri}: hoodie.write.concurrency.mode={mode!r} is not one of "
                                 f"{CONCURRENCY_MODES}")
    provider = (provider or FILE_SYSTEM_PROVIDER).strip()
    if provider == FILE_SYSTEM_PROVIDER:
        if mode == MULTI_WRITER and not storage.atomic_create:
            hint = " (or install boto3, the `s3` extra, for conditional PUTs)" \
                if storage.fs.type_name == "s3" and not objectstore.boto3_available() else ""
            raise LockError(
                f"table {storage.uri}: hoodie.write.concurrency.mode={MULTI_WRITER} refused: this store "
                f"({storage.fs.type_name}) has no atomic create-if-absent here, so the .hoodie/lock file and "
                "timeline files could be overwritten by a racing writer; set hoodie.write.lock.provider to a lock "
                f"outside the store (a Python class 'package.module:Class'){hint}, or write with a single writer")
        return FileSystemLock(storage, expire_ms=expire_ms, wait_ms=wait_ms)
    if provider == IN_PROCESS_PROVIDER:
        return InProcessLock(storage, options)
    return _provider_class(storage.uri, provider)(storage, options)


def _provider_class(uri: str, provider: str):
    """A constructor of the caller's lock class `package.module:Class` whose every failure
    (import, construction, acquire, release) is a one-line `LakeError`."""
    module, sep, name = provider.partition(":") if ":" in provider else provider.rpartition(".")
    if not sep or not module or not name or provider.startswith("org.apache."):
        raise InvalidOptionError(f"table {uri}: hoodie.write.lock.provider={provider!r}: airflow-lake "
                                 f"implements {FILE_SYSTEM_PROVIDER}, {IN_PROCESS_PROVIDER} and Python classes "
                                 "named 'package.module:Class'")
    try:
        cls = getattr(importlib.import_module(module), name)
    except Exception as e:  # noqa: BLE001 - whatever the module does, one line naming it
        raise InvalidOptionError(f"table {uri}: hoodie.write.lock.provider={provider!r} cannot be "
                                 f"imported: {type(e).__name__}: {_one_line(e)}") from None
    if not isinstance(cls, type):
        raise InvalidOptionError(f"table {uri}: hoodie.write.lock.provider={provider!r} names a "
                                 f"{type(cls).__name__}, not a class")

    def make(storage: Storage, options: dict[str, Any]) -> GuardedLock:
        return GuardedLock(uri, provider, _guarded(uri, provider, "construction", cls, storage, options))

    return make


def _one_line(e: BaseException) -> str:
    return " ".join(str(e).split())[:500]


def _guarded(uri: str, provider: str, what: str, fn, *args):
    try:
        return fn(*args)
    except LakeError:
        raise
    except Exception as e:  # noqa: BLE001 - a caller's lock class fails in one line naming it
        raise LockError(f"table {uri}: lock provider {provider}: {what} failed: "
                        f"{type(e).__name__}: {_one_line(e)}") from None


class GuardedLock:
    """A caller's lock provider instance: acquire and release nest as the protocol says, and
    every failure of the class is a one-line `LockError` naming the table and the provider."""

    def __init__(self, uri: str, name: str, provider: Any):
        self.uri, self.name, self.provider = uri, name, provider

    def acquire(self) -> None:
        _guarded(self.uri, self.name, "acquire", getattr(self.provider, "acquire", None))

    def release(self) -> None:
        _guarded(self.uri, self.name, "release", getattr(self.provider, "release", None))

    def __enter__(self) -> GuardedLock:
        self.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.release()
