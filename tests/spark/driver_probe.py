"""Run a job file as `spark-submit` runs it, with test-only probes in the Python driver.

Usage: spark-submit [...] tests/spark/driver_probe.py JOB ARGS  (JOB: a name for `job_path`)

Environment (all optional):
- `AIRFLOW_LAKE_PROBE_RSS=FILE`: at exit, write the driver's peak RSS in KiB (VmHWM) to FILE.
- `AIRFLOW_LAKE_PROBE_KILL=REGEX`: SIGKILL the driver right before it writes, creates or
  deletes a path matching REGEX (e.g. `\\.deltacommit$`: every data file written, the commit not).
- `AIRFLOW_LAKE_PROBE_KILL_FILES=N` with `AIRFLOW_LAKE_PROBE_TABLE=PATH`: SIGKILL the driver as
  soon as N new data files (executors write them) exist under PATH; if the driver reaches the
  `AIRFLOW_LAKE_PROBE_KILL` mutation first, it dies there.
Only this driver process is probed: executors are other processes and run unchanged.
"""

from __future__ import annotations

import atexit
import os
import re
import runpy
import signal
import sys
import threading
import time
from pathlib import Path

from airflow_lake.core.storage import Storage

# the checkout's job files (in the driver, airflow_lake is imported from the --py-files zip)
JOBS = Path(__file__).resolve().parents[2] / "spark_jobs"


def peak_rss_kb() -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))


def _kill(why: str) -> None:
    print(f"PROBE KILL {why}", file=sys.stderr, flush=True)
    os.kill(os.getpid(), signal.SIGKILL)


def _kill_at(pattern: re.Pattern) -> None:
    for name in ("write", "create", "delete", "delete_dir"):
        original = getattr(Storage, name)

        def mutate(self, path, *args, _original=original, _name=name, **kwargs):
            if pattern.search(str(path)):
                _kill(f"before {_name} {path}")
            return _original(self, path, *args, **kwargs)

        setattr(Storage, name, mutate)


def _data_files(root: str) -> set[str]:
    found = set()
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        found.update(os.path.join(folder, f) for f in files if ".parquet" in f or ".log." in f)
    return found


def _kill_after_files(root: str, count: int) -> None:
    before = _data_files(root)

    def watch() -> None:
        while len(new := _data_files(root) - before) < count:
            time.sleep(0.01)
        _kill(f"after data files {sorted(new)}")

    threading.Thread(target=watch, daemon=True, name="probe-files").start()


def main() -> None:
    name, args = sys.argv[1], sys.argv[2:]
    rss_file = os.environ.get("AIRFLOW_LAKE_PROBE_RSS")
    if rss_file:
        atexit.register(lambda: open(rss_file, "w").write(str(peak_rss_kb())))
    if os.environ.get("AIRFLOW_LAKE_PROBE_KILL"):
        _kill_at(re.compile(os.environ["AIRFLOW_LAKE_PROBE_KILL"]))
    if os.environ.get("AIRFLOW_LAKE_PROBE_KILL_FILES"):
        _kill_after_files(os.environ["AIRFLOW_LAKE_PROBE_TABLE"], int(os.environ["AIRFLOW_LAKE_PROBE_KILL_FILES"]))
    path = str(JOBS / f"{name}.py")
    sys.argv = [path, *args]
    runpy.run_path(path, run_name="__main__")


if __name__ == "__main__":
    main()
