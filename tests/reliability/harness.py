"""The kill harness: every operation is killed (SIGKILL) at every storage mutation, then
retried; after each kill and each recovery our reader and hudi-rs must show a state the model
allows (before or after the operation), and in the end exactly the state after it.

`make reliability` runs it large; the test suite runs it small. Prints: operations run,
kills injected, recoveries, rows compared, mismatches (must be 0). The tables live in a local
folder, or under an object-store URI with its storage options (tests/s3).
"""

from __future__ import annotations

import argparse
import json
import os
import posixpath
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field

import pyarrow.fs as pafs

from airflow_lake.core.formats.log.blocks import read_log_file
from airflow_lake.core.model import BaseFile, LogFile
from airflow_lake.core.storage import open_storage
from airflow_lake.core.view import list_partition_files
from tests.conftest import hudi_read, let_time_pass, rows
from tests.reliability.operations import OPERATIONS, build, open_table

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
COLS = ["id", "ts", "part", "v"]


@dataclass
class Report:
    operations: int = 0
    kills: int = 0
    recoveries: int = 0
    rows_compared: int = 0
    mismatches: list[str] = field(default_factory=list)

    def line(self) -> str:
        return (f"operations run: {self.operations}, kills injected: {self.kills}, recoveries: {self.recoveries}, "
                f"rows compared: {self.rows_compared}, mismatches: {len(self.mismatches)}")


class CrashRunner:
    """`crash_runner --serve` in a subprocess: each run is a child it forks (already imported),
    not a new interpreter."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen | None = None

    def run(self, path: str, operation: str, crash_at: int, so: dict | None = None) -> subprocess.CompletedProcess:
        if self.proc is None:
            self.proc = subprocess.Popen([sys.executable, "-m", "tests.reliability.crash_runner", "--serve"],
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=REPO,
                                         env={**os.environ, "PYTHONPATH": REPO})
        self.proc.stdin.write(json.dumps([path, operation, crash_at, so]) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        assert line, f"the crash runner died (exit {self.proc.poll()})"
        answer = json.loads(line)
        return subprocess.CompletedProcess([operation, str(crash_at)], answer["returncode"], answer["stdout"],
                                           answer["stderr"])

    def close(self) -> None:
        if self.proc is not None:
            self.proc.stdin.close()
            self.proc.wait(timeout=60)
            self.proc = None


_runner = CrashRunner()
_run = _runner.run


def _join(root: str, name: str) -> str:
    return posixpath.join(root, name) if "://" in root else os.path.join(root, name)


def _copy(src: str, dst: str, so: dict | None) -> None:
    if "://" not in src:
        shutil.copytree(src, dst)
        return
    source, target = open_storage(src, so), open_storage(dst, so)
    pafs.copy_files(source.root, target.root, source_filesystem=source.fs, destination_filesystem=target.fs)


def _remove(path: str, so: dict | None) -> None:
    if "://" not in path:
        shutil.rmtree(path, ignore_errors=True)
    else:
        open_storage(path, so).delete_dir("")


def _state(path: str, report: Report, label: str, so: dict | None = None) -> list[tuple]:
    ours = rows(open_table(path, so).read(), COLS)
    theirs = rows(hudi_read(path, so), COLS)
    report.rows_compared += len(ours) + len(theirs)
    if ours != theirs:
        report.mismatches.append(f"{label}: hudi-rs and our reader differ")
    return ours


def orphans(path: str, so: dict | None = None) -> list[str]:
    """Data files no completed instant wrote (nor one archived before the active timeline):
    what a rollback or restore left behind, which a later archive or compaction would bring
    back. A log file's writer is the instant in its name (timeline layout 2), else in its
    blocks' headers."""
    t = open_table(path, so)
    timeline = t.timeline
    done = set(timeline.completed().times)
    found = []
    for partition, statuses in list_partition_files(t.storage).items():
        for st in statuses:
            if (base := BaseFile.parse(partition, st.name)) is not None:
                writers = {base.instant}
            elif (lf := LogFile.parse(partition, st.name)) is not None:
                writers = {lf.base_instant} if timeline.layout >= 2 else \
                    {b.instant for b in read_log_file(t.storage.read(lf.path))} - {None}
            else:
                continue
            if any(w not in done and not timeline.is_before_start(w) for w in writers):
                found.append(f"{partition}/{st.name}")
    return sorted(found)


def check_operation(name: str, workdir: str, report: Report, *, size: int = 1, commits: int = 10,
                    points: int | None = None, storage_options: dict | None = None,
                    table_options: dict | None = None) -> None:
    so = storage_options
    op = OPERATIONS[name]
    base = _join(workdir, f"{name}-base")
    table = build(base, op.table_type, commits, size, so, table_options)
    op.prepare(table)
    before = _state(base, report, f"{name} before", so)
    allowed = [rows(table.read(as_of=i), COLS) for i in op.intermediate(table)]
    after_path = _join(workdir, f"{name}-after")
    _copy(base, after_path, so)
    counted = _run(after_path, name, 0, so)
    report.operations += 1
    if counted.returncode != 0:
        report.mismatches.append(f"{name}: the operation itself failed: {counted.stderr[-800:]}")
        return
    total = int(counted.stdout.split()[-1])
    after = _state(after_path, report, f"{name} after", so)
    crash_points = list(range(1, total + 1))
    if points is not None and len(crash_points) > points:
        step = len(crash_points) / points
        crash_points = sorted({crash_points[int(i * step)] for i in range(points)} | {1, total})
    for k in crash_points:
        path = _join(workdir, f"{name}-{k}")
        _copy(base, path, so)
        proc = _run(path, name, k, so)
        report.operations += 1
        if proc.returncode != -9:
            report.mismatches.append(f"{name} crash at {k}: expected SIGKILL, got {proc.returncode}: "
                                     f"{proc.stderr[-500:]}")
            continue
        report.kills += 1
        seen = _state(path, report, f"{name} killed at {k}", so)
        if seen not in [before, after, *allowed]:
            report.mismatches.append(f"{name} killed at {k}: a state that is neither before nor after")
        if "://" in path:  # an object store's modification times cannot be moved back: wait
            time.sleep(0.15)  # the dead process's heartbeat and lock expire
        else:
            let_time_pass(path, 60)
        try:
            op.retry(open_table(path, so))
        except Exception as e:  # noqa: BLE001 - recorded as a mismatch
            report.mismatches.append(f"{name} killed at {k}: retry failed: {type(e).__name__}: {e}")
            continue
        report.recoveries += 1
        final = _state(path, report, f"{name} recovered from {k}", so)
        if final != after:
            report.mismatches.append(f"{name} killed at {k}: after the retry the rows differ from the model")
        left = orphans(path, so)
        if left:
            report.mismatches.append(f"{name} killed at {k}: data files of no completed instant left: {left}")
        pending = [str(i) for i in open_table(path, so).timeline.pending()
                   if not (name == "compaction_schedule" and i.action == "compaction")]
        if pending:
            report.mismatches.append(f"{name} killed at {k}: pending instants left: {pending}")
        _remove(path, so)


def run(operations: list[str], *, size: int, commits: int, points: int | None, workdir: str | None = None,
        storage_options: dict | None = None, table_options: dict | None = None) -> Report:
    """The harness over `operations`, in a new temporary folder or under `workdir` (a URI
    with its `storage_options`, removed at the end), on tables created with `table_options`."""
    report = Report()
    workdir = workdir or tempfile.mkdtemp(prefix="airflow-lake-kill-")
    try:
        for name in operations:
            check_operation(name, workdir, report, size=size, commits=commits, points=points,
                            storage_options=storage_options, table_options=table_options)
            print(f"  {name:<20} {report.line()}", flush=True)
    finally:
        _runner.close()
        _remove(workdir, storage_options)
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--large", action="store_true", help="every crash point, bigger tables")
    parser.add_argument("--only", nargs="*", default=list(OPERATIONS))
    parser.add_argument("--stress-seconds", type=float, default=None, help="length of the stress run")
    args = parser.parse_args()
    size, commits, points = (20, 14, None) if args.large else (1, 10, 12)
    report = run(args.only, size=size, commits=commits, points=points)
    print(report.line())
    seconds = args.stress_seconds or (60 if args.large else 8)
    from tests.core.test_concurrency import stress

    folder = tempfile.mkdtemp(prefix="airflow-lake-stress-")
    try:
        counts = stress(os.path.join(folder, "table"), seconds)
    except AssertionError as e:
        report.mismatches.append(f"stress: {e}")
        counts = {}
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    print(f"stress ({seconds:.0f} s, 4 writers + services): {counts}")
    for m in report.mismatches:
        print("MISMATCH", m)
    sys.exit(1 if report.mismatches else 0)


if __name__ == "__main__":
    main()
