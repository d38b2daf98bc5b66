"""A client-mode job's result file lives in a folder of the submitting process, removed when
that process exits: a submission built and never run (or a task killed mid-run) leaves
nothing in the temp folder."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import REPO

SCRIPT = """
import os, sys
from airflow_lake.hooks.submit import result_file
first, second = result_file("clean"), result_file("upsert")
assert first.parent == second.parent and first.exists() and first.name.startswith("clean-")
print(first.parent)
if os.fork() == 0:  # a forked child exiting normally leaves the parent's folder alone
    sys.exit(0)
os.wait()
assert first.parent.is_dir()
"""


def test_result_files_go_with_their_process(tmp_path):
    proc = subprocess.run([sys.executable, "-c", SCRIPT], cwd=REPO, capture_output=True, text=True, timeout=120,
                          env={"PATH": "/usr/bin:/bin", "TMPDIR": str(tmp_path)})
    assert proc.returncode == 0, proc.stderr
    folder = proc.stdout.strip()
    assert folder.startswith(str(tmp_path)) and list(tmp_path.iterdir()) == [], folder
