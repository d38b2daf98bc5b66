"""One write pipeline (ARCHITECTURE.md, "Rules once"): the Spark package supplies frame
operations only. It reads nothing from the timeline (the transaction and the core's services
do), and its write module raises no error of its own (every check is the core pipeline's)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "airflow_lake"
SPARK = PACKAGE / "spark"


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(("." * node.level) + node.module)
    return found


def test_the_spark_package_imports_nothing_from_the_timeline():
    offenders = {p.name: sorted(i for i in _imports(p) if "core.timeline" in i or i.startswith("..core.timeline"))
                 for p in sorted(SPARK.glob("*.py"))}
    offenders = {k: v for k, v in offenders.items() if v}
    assert not offenders, f"airflow_lake/spark reads the timeline directly: {offenders}"
    assert "airflow_lake.core.write.pipeline" in _imports(SPARK / "write.py")  # (the scan sees imports)


def test_the_spark_write_module_holds_frame_operations_only():
    tree = ast.parse((SPARK / "write.py").read_text())
    raises = [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Raise)]
    assert not raises, f"airflow_lake/spark/write.py raises errors of its own (lines {raises}): a write rule"
    names = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    assert "SparkFrames" in names
    assert not (SPARK / "bucket.py").exists()  # the bucket plan is the core's (`core/write/routing.py`)
