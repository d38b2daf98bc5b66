"""Run one table operation in this process and SIGKILL it at its N-th storage mutation.

Usage: python -m tests.reliability.crash_runner <table path> <operation> <crash at (0: never)>
[<storage options as JSON>]
Prints the number of storage mutations when it was not killed. Every write, create and delete
counts (each data file, marker, timeline transition, lock file), except the periodic heartbeat
refreshes, whose number depends on timing.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading

from airflow_lake.core.storage import Storage
from tests.reliability.operations import OPERATIONS, open_table

_count = 0
_crash_at = 0


def _wrap(name: str) -> None:
    original = getattr(Storage, name)

    def mutate(self, *args, **kwargs):
        global _count
        if threading.current_thread().name.startswith("heartbeat-"):
            return original(self, *args, **kwargs)  # timing-dependent: not a crash point
        _count += 1
        if _count == _crash_at:
            os.kill(os.getpid(), signal.SIGKILL)
        return original(self, *args, **kwargs)

    setattr(Storage, name, mutate)


def main() -> None:
    global _crash_at
    path, operation, crash_at = sys.argv[1], sys.argv[2], int(sys.argv[3])
    storage_options = json.loads(sys.argv[4]) if len(sys.argv) > 4 else None
    _crash_at = crash_at
    for name in ("write", "create", "delete", "delete_dir"):
        _wrap(name)
    OPERATIONS[operation].run(open_table(path, storage_options))
    print(_count, flush=True)


if __name__ == "__main__":
    main()
