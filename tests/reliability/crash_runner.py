"""Run one table operation in this process and SIGKILL it at its N-th storage mutation.

Usage: python -m tests.reliability.crash_runner <table path> <operation> <crash at (0: never)>
[<storage options as JSON>]
Prints the number of storage mutations when it was not killed. Every write, create and delete
counts (each data file, marker, timeline transition, lock file), except the periodic heartbeat
refreshes, whose number depends on timing.

`--serve` makes it a fork server: it imports everything once, then reads one JSON request a
line (`[path, operation, crash_at, storage options or null]`) and forks a child that runs it as
above (so each run skips the interpreter's start and the imports, about 1.5 s of CPU); it
answers with one JSON line: the child's exit code (-9 when killed), stdout and stderr.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import tempfile
import threading

import pyarrow as pa

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


def _operate(path: str, operation: str, crash_at: int, storage_options: dict | None) -> None:
    global _count, _crash_at
    _count, _crash_at = 0, crash_at
    OPERATIONS[operation].run(open_table(path, storage_options))
    print(_count, flush=True)


def _child(request: list, out: str, err: str) -> None:
    """In the forked child: its stdout and stderr go to files, it never returns."""
    code = 1
    try:
        for fd, name in ((1, out), (2, err)):
            os.dup2(os.open(name, os.O_WRONLY | os.O_TRUNC), fd)
        _operate(*request)
        code = 0
    except BaseException:  # noqa: BLE001 - reported through stderr and the exit code
        import traceback

        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def serve() -> None:
    """The fork server (see the module docstring)."""
    # pyarrow imports pandas the first time it builds an array from Python values (to tell
    # whether they are a pandas object): once here, not in every child (0.3 s of CPU each)
    pa.array(["warm"])
    for line in sys.stdin:
        request = json.loads(line)
        with tempfile.NamedTemporaryFile() as out, tempfile.NamedTemporaryFile() as err:
            pid = os.fork()
            if pid == 0:
                _child(request, out.name, err.name)
            _, status = os.waitpid(pid, 0)
            code = os.waitstatus_to_exitcode(status)
            answer = {"returncode": code, "stdout": open(out.name).read(), "stderr": open(err.name).read()}
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()


def main() -> None:
    for name in ("write", "create", "delete", "delete_dir"):
        _wrap(name)
    if sys.argv[1:] == ["--serve"]:
        serve()
        return
    path, operation, crash_at = sys.argv[1], sys.argv[2], int(sys.argv[3])
    _operate(path, operation, crash_at, json.loads(sys.argv[4]) if len(sys.argv) > 4 else None)


if __name__ == "__main__":
    main()
