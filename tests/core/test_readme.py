"""The README's core example runs as written (copied into an empty folder)."""

from __future__ import annotations

import re

import pyarrow.compute as pc

from tests.conftest import REPO, hudi_read


def readme_blocks() -> list[str]:
    """The README's python blocks: the Airflow DAG, the core example, then the Spark one."""
    blocks = re.findall(r"```python\n(.*?)```", (REPO / "README.md").read_text(), re.S)
    assert len(blocks) == 3, "README.md should hold the DAG, the core and the Spark python examples"
    return blocks


def readme_examples() -> list[str]:
    """The README's core and Spark examples (tests/dags/test_docs.py runs the DAG)."""
    return readme_blocks()[1:]


def readme_example() -> str:
    return readme_examples()[0]


def test_readme_core_example_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    scope: dict = {}
    exec(compile(readme_example(), "README.md", "exec"), scope)
    table, plan = scope["table"], scope["plan"]
    assert plan.instant is not None, plan.reason  # the example does reach a compaction
    assert table.timeline.commits().completed().last.time == plan.instant
    fares = dict(zip(*[table.read().column(c).to_pylist() for c in ("uuid", "fare")], strict=True))
    assert fares == {"t1": 30.0, "t2": 20.0, "t3": 30.0}
    theirs = hudi_read(str(tmp_path / "lake" / "trips"))
    assert theirs.filter(pc.equal(theirs["uuid"], "t1"))["fare"].to_pylist() == [30.0]
