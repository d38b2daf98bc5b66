"""Engine conformance: every scenario of `scenarios.SCENARIOS` runs on LocalEngine (Arrow input)
and on SparkEngine (a DataFrame through `Table.write`, the distributed path); after each step
both give the same write statistics or the same error (class and message, the table's path
aside), an error leaves the table as it was (timeline and files), and the rows and the
file-group layout are equal, hudi-rs judging. The local engine's behaviour is the rule."""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pytest

from airflow_lake.core import LakeError, Table
from airflow_lake.core.write.client import WriteResult
from tests.conftest import hudi_read, rows

from .scenarios import SCENARIOS, Scenario

pytestmark = pytest.mark.spark
COLUMNS = ["_hoodie_record_key", "_hoodie_partition_path", "id", "ts", "val"]


@dataclass
class Outcome:
    """What one step did, in terms both engines must agree on."""

    result: tuple | None  # the write statistics
    error: tuple[str, str] | None  # class and message, the table's path as <table>
    layout: dict[str, list[int]]  # partition -> rows of each file group (sorted)
    hudi_rows: list[tuple]


def _stats(r: WriteResult) -> tuple:
    return (r.operation, r.num_inserts, r.num_updates, r.num_deletes, r.num_writes, len(r.files),
            r.partitions, r.replaced_file_groups, r.already_done)


def _listing(path: str) -> list[tuple[str, int]]:
    """Every file of the table (timeline included) with its size."""
    root = Path(path)
    return sorted((str(p.relative_to(root)), p.stat().st_size) for p in root.rglob("*") if p.is_file())


def _layout(table: Table) -> dict[str, list[int]]:
    names = table.read(columns=["_hoodie_partition_path", "_hoodie_file_name"]).to_pylist()
    groups = Counter((r["_hoodie_partition_path"], r["_hoodie_file_name"].split("_")[0]) for r in names)
    out: dict[str, list[int]] = {}
    for (partition, _), n in groups.items():
        out.setdefault(partition, []).append(n)
    return {p: sorted(ns) for p, ns in sorted(out.items())}


def _columns(table: pa.Table) -> list[str]:
    return [c for c in COLUMNS if c in table.column_names]


def run(scenario: Scenario, path: str, engine=None, frame=None) -> list[Outcome]:
    """Run the scenario's steps on a new table at `path`; `frame` turns an Arrow table into the
    engine's input (None: Arrow)."""
    Table.create(path, name="t", table_type=scenario.table_type, record_key=scenario.record_key,
                 precombine_field=scenario.precombine, partition_fields=scenario.partition_fields,
                 hive_style_partitioning=scenario.hive_style, options=scenario.options)
    table = Table.open(path, engine=engine)
    local = Table.open(path)  # our reader, on the local engine
    outcomes = []
    for step in scenario.steps:
        data = pa.table(step.data)
        before = _listing(path)
        result = error = None
        try:
            result = _stats(table.write(frame(data) if frame else data, operation=step.operation))
        except LakeError as e:
            error = (type(e).__name__, str(e).replace(os.path.abspath(path), "<table>"))
            assert _listing(path) == before, f"{step.operation} failed and left a trace: {error}"
        judged = hudi_read(path)
        outcomes.append(Outcome(result, error, _layout(local), rows(judged, _columns(judged))))
    ours = local.read()
    assert rows(ours, _columns(ours)) == outcomes[-1].hudi_rows
    return outcomes


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_engines_agree(spark, tmp_path, scenario):
    from airflow_lake.spark import SparkEngine

    expected = run(scenario, str(tmp_path / "local" / "t"))
    actual = run(scenario, str(tmp_path / "spark" / "t"), SparkEngine(spark), spark.createDataFrame)
    for i, (step, want, got) in enumerate(zip(scenario.steps, expected, actual, strict=True)):
        assert got == want, f"{scenario.name}: step {i} ({step.operation})"
