"""Create-if-absent's temp files do not leak: a process killed between writing the temp file
and linking it into place leaves one behind, and the next write's repair removes it once it is
older than a temp file of a live creator can be (`STALE_TEMP_MS`), never a younger one."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time

import pyarrow as pa

from airflow_lake.core import Table
from airflow_lake.core.storage import STALE_TEMP_MS, TEMP_FOLDER, Storage
from tests.conftest import REPO

BATCH = pa.table({"id": ["a", "b"], "ts": [1, 1]})


def temp_files(root: str) -> list[str]:
    """Temp files of `create` under the table: in TEMP_FOLDER, or `.tmp-*` anywhere."""
    found = []
    for folder, _, names in os.walk(root):
        inside = os.path.relpath(folder, root) == TEMP_FOLDER
        found += [os.path.join(folder, n) for n in names if inside or n.startswith(".tmp-")]
    return sorted(found)


def age(path: str, ms: int) -> None:
    """Make `path` look last modified `ms` ago (the clock is injected, not waited for)."""
    then = time.time() - ms / 1000
    os.utime(path, (then, then))


def kill_inside_create(root: str) -> int:
    """A process killed (SIGKILL) after writing create's temp file, before linking it."""
    script = textwrap.dedent(f"""
        import os, signal
        from airflow_lake.core.storage import Storage
        os.link = lambda *a: os.kill(os.getpid(), signal.SIGKILL)
        Storage({root!r}).create(".hoodie/20200101000000000.rollback.requested", b"plan")
    """)
    return subprocess.run([sys.executable, "-c", script], cwd=REPO).returncode


def test_a_temp_file_left_by_a_killed_creator_is_removed_by_the_next_write(tmp_path):
    root = str(tmp_path / "t")
    table = Table.create(root, name="t", record_key="id", precombine_field="ts")
    table.write(BATCH)
    assert temp_files(root) == []
    assert kill_inside_create(root) == -9
    (left,) = temp_files(root)
    table.write(BATCH)  # the leftover is too young to be told from a live creator's: kept
    assert temp_files(root) == [left]
    age(left, STALE_TEMP_MS + 60_000)
    table.write(BATCH)
    assert temp_files(root) == []
    assert len(table.read()) == 2


def test_only_stale_temp_files_are_swept(tmp_path):
    root = str(tmp_path / "t")
    table = Table.create(root, name="t", record_key="id")
    storage = Storage(root)
    folder = os.path.join(root, TEMP_FOLDER)
    os.makedirs(folder, exist_ok=True)
    live, dead = os.path.join(folder, "live.tmp"), os.path.join(folder, "dead.tmp")
    legacy_dead, legacy_live = os.path.join(root, ".hoodie", ".tmp-0a1b"), os.path.join(root, ".hoodie", ".tmp-2c3d")
    for path in (live, dead, legacy_dead, legacy_live):
        open(path, "wb").close()
    age(dead, STALE_TEMP_MS + 1)
    age(legacy_dead, 2 * STALE_TEMP_MS)
    removed = storage.sweep_temp_files()
    assert sorted(removed) == sorted([f"{TEMP_FOLDER}/dead.tmp", ".hoodie/.tmp-0a1b"])
    assert temp_files(root) == sorted([live, legacy_live])
    # with the clock moved on (injected), the rest goes too; the table is untouched
    assert len(storage.sweep_temp_files(now_ms=time.time() * 1000 + STALE_TEMP_MS + 1)) == 2
    assert temp_files(root) == [] and table.storage.exists(".hoodie/hoodie.properties")
