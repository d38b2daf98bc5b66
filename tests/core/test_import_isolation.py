"""Layering rules (ARCHITECTURE.md): `airflow_lake.core` imports neither Airflow nor pyspark;
inside the core, lower layers do not reach up into the table services, `config.py` does no
I/O, and no module imports another module's private (`_name`) names."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "airflow_lake"
CORE = PACKAGE / "core"


def test_core_imports_neither_airflow_nor_pyspark():
    code = (
        "import sys, airflow_lake.core, airflow_lake.core.table, airflow_lake.core.read;"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('airflow', 'pyspark'));"
        "print(','.join(bad)); sys.exit(1 if bad else 0)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, f"core imported: {proc.stdout} {proc.stderr}"


def test_the_core_and_the_command_line_start_without_pandas():
    """Importing pandas costs a process about 0.25 s of CPU (pyarrow's dataset module imports
    it): the core, the command line and the jobs' driver module start without it."""
    code = ("import sys, airflow_lake.core, airflow_lake.core.table, airflow_lake.cli, airflow_lake.spark.job;"
            "sys.exit(1 if 'pandas' in sys.modules else 0)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, f"pandas was imported {proc.stderr}"


def test_the_hook_imports_no_pyspark():
    """The Airflow worker builds spark-submit commands (job paths, the package zip, the
    driver's start-up options) without importing pyspark; `airflow_lake.spark`'s names still
    resolve to its functions, also after their submodules were imported directly."""
    code = (
        "import sys, airflow_lake.hooks.lake, airflow_lake.spark.packaging, airflow_lake.spark.startup;"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] == 'pyspark');"
        "import airflow_lake.spark.write, airflow_lake.spark.session, airflow_lake.spark as s;"
        "assert callable(s.write) and s.write.__module__ == 'airflow_lake.spark.write', s.write;"
        "assert callable(s.session) and s.session.__name__ == 'session', s.session;"
        "from airflow_lake.spark import SparkEngine, read_table, write;"
        "print(','.join(bad)); sys.exit(1 if bad else 0)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, f"imported: {proc.stdout} {proc.stderr}"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> list[tuple[str, list[str], int]]:
    """(absolute module, imported names, line) of every import in `path`, nested ones too."""
    package = _module_name(path) if path.name == "__init__.py" else _module_name(path).rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(a.name, [], node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")
            if node.level:
                base = base[: len(base) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            names = [a.name for a in node.names]
            found.append((module, names, node.lineno))
            # `from . import x`: x is a module too
            found += [(f"{module}.{n}", [], node.lineno) for n in names if not node.module or node.level]
    return found


def _sources(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*.py") if "__pycache__" not in p.parts)


def test_the_checker_sees_relative_and_nested_imports():
    """The rules below must be able to fail: a planted violation is found."""
    fake = PACKAGE / "core" / "write" / "client.py"
    found = {(m, tuple(n)) for m, n, _ in _imports(fake)}
    assert any(m == "airflow_lake.core.engine" and "Engine" in n for m, n in found)  # `from ..engine import Engine`
    assert any(m == "airflow_lake.core.read" for m, _ in found)  # imported inside a method


def test_no_module_imports_another_modules_private_names():
    bad = []
    for path in _sources(PACKAGE):
        for module, names, line in _imports(path):
            if not module.startswith("airflow_lake"):
                continue
            private = [n for n in names if n.startswith("_") and not n.startswith("__")]
            if private and module != _module_name(path):
                bad.append(f"{path.relative_to(PACKAGE.parent)}:{line} imports {private} from {module}")
    assert not bad, "\n".join(bad)


def _importers_of(prefix: str, paths: list[Path]) -> list[str]:
    return [f"{p.relative_to(PACKAGE.parent)}:{line} imports {module}"
            for p in paths for module, _, line in _imports(p)
            if module == prefix or module.startswith(prefix + ".")]


def test_writes_reads_views_and_the_timeline_do_not_import_the_services():
    lower = _sources(CORE / "write") + _sources(CORE / "timeline") + _sources(CORE / "txn") + [
        CORE / "read.py", CORE / "view.py"]
    bad = _importers_of("airflow_lake.core.services", lower)
    assert not bad, "\n".join(bad)


def test_the_timeline_does_not_import_writes_or_services():
    bad = [b for prefix in ("airflow_lake.core.write", "airflow_lake.core.services", "airflow_lake.core.table")
           for b in _importers_of(prefix, _sources(CORE / "timeline"))]
    assert not bad, "\n".join(bad)


def test_config_does_no_io():
    """Option values and `TableConfig` are pure: `properties.py` reads and writes them."""
    imports = {module for module, _, _ in _imports(CORE / "config.py")}
    io = {"airflow_lake.core.storage", "airflow_lake.core.properties", "os", "io", "pathlib", "pyarrow.fs",
          "fsspec", "shutil"}
    assert not (imports & io), imports & io
