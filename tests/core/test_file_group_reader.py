"""One file-group reader (ARCHITECTURE.md, "The distributed write path"): reads, index lookups
(local and on Spark) and compaction read a file group through `slice_reader.read_file_group`,
and only it merges records (`merge.merge_slice`) or picks visible log blocks (`BlockFilter`)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "airflow_lake"
READER = PACKAGE / "core" / "slice_reader.py"
DEFINITIONS = {"merge_slice": PACKAGE / "core" / "merge.py", "BlockFilter": READER}


def _calls(name: str) -> set[str]:
    """Modules of the package (relative paths) that call `name` (plain or attribute call)."""
    found = set()
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Call):
                func = node.func
                called = getattr(func, "id", None) or getattr(func, "attr", None)
                if called == name:
                    found.add(str(path.relative_to(PACKAGE)))
    return found


def test_only_the_file_group_reader_merges_records_and_picks_log_blocks():
    for name in ("merge_slice", "BlockFilter"):
        assert _calls(name) == {str(READER.relative_to(PACKAGE))}, name


def test_reads_lookups_and_compaction_call_the_file_group_reader():
    assert _calls("read_file_group") == {
        "core/slice_reader.py",  # read_slice (snapshot, time travel, incremental) and the writers' group reads
        "core/index/live.py",  # the local key-lookup indexes
        "core/index/record_index.py",  # the scan a record index is built from (and checked against)
        "core/index/record_index_update.py",  # the keys of the file groups an overwrite replaces
        "core/index/secondary_index.py",  # a write's before/after cells, the scan an index is built from
        "core/services/compaction.py",
        "spark/tag.py",  # the Spark tagger's executor functions
    }
