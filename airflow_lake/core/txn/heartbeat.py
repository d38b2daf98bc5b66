"""Writer heartbeats: `.hoodie/.heartbeat/<instant>`, refreshed while a write runs.

A pending instant whose heartbeat is older than interval * tolerable misses (or absent) is
a failed write that may be rolled back (Hudi's LAZY failed-writes policy). The clock that
judges the age is injectable (`Clock`: seconds since the epoch, `time.time` by default).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from ..errors import note_instant
from ..storage import Storage

FOLDER = ".hoodie/.heartbeat"
Clock = Callable[[], float]
"""Seconds since the epoch (`time.time`); tests pass another to move time without sleeping."""


class Heartbeat:
    """Refreshes the heartbeat file of one instant from a daemon thread until stopped."""

    def __init__(self, storage: Storage, instant: str, interval_ms: int, clock: Clock = time.time):
        self.storage = storage
        self.instant = instant
        self.path = f"{FOLDER}/{instant}"
        self.interval = interval_ms / 1000
        self.clock = clock
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> Heartbeat:
        self.beat()
        self._thread = threading.Thread(target=self._run, name=f"heartbeat-{self.path}", daemon=True)
        self._thread.start()
        return self

    def beat(self) -> None:
        self.storage.write(self.path, str(int(self.clock() * 1000)).encode())

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.beat()
            except OSError:
                pass

    def stop(self, *, delete: bool = True) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if delete:
            self.storage.delete(self.path)


@contextmanager
def beating(heartbeat: Heartbeat) -> Iterator[None]:
    """The work of a started `heartbeat`'s instant: the heartbeat stops after it; its error
    names the instant (`errors.note_instant`: a job's error line says which instant failed)."""
    try:
        yield
    except BaseException as e:
        note_instant(e, heartbeat.instant)
        raise
    finally:
        heartbeat.stop()


def is_expired(storage: Storage, instant: str, interval_ms: int, tolerable_misses: int,
               clock: Clock = time.time) -> bool:
    """No heartbeat of `instant`, or its last refresh (the file's modification time) is more
    than `interval_ms * tolerable_misses` before `clock()`."""
    status = storage.status(f"{FOLDER}/{instant}")
    if status is None:
        return True
    return clock() * 1000 - status.mtime_ms > interval_ms * tolerable_misses


def last_beat_ms(storage: Storage, instant: str) -> int | None:
    """When the writer of `instant` last refreshed its heartbeat (epoch ms), None without one."""
    status = storage.status(f"{FOLDER}/{instant}")
    return None if status is None else status.mtime_ms
