"""The transaction's place in the core (ARCHITECTURE.md, "The distributed write path"): it is
the only code that creates or completes timeline files, and the core's imports form no cycle,
neither between modules nor between its packages (`write/`, `txn/`, `services/`...)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "airflow_lake"
CORE = PACKAGE / "core"
TRANSACTION = CORE / "txn" / "transaction.py"
# (its metadata-table halves: mixins)
TRANSACTION_PARTS = (TRANSACTION, CORE / "txn" / "metadata_sync.py", CORE / "txn" / "metadata_builds.py")
DEFINITIONS = (CORE / "timeline" / "active.py", CORE / "storage.py")  # where `create` and `transition` live
# receivers of a `.create(...)` call that are not a timeline: a Storage (create-if-absent of a
# plain file) and the Table class (a new table)
NOT_A_TIMELINE = {"storage", "self.storage", "ctx.storage", "Table"}


def _sources(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*.py") if ".venv" not in p.parts)


def _timeline_writes(path: Path) -> list[str]:
    """`<receiver>.create(...)` / `<receiver>.transition(...)` calls in `path` whose receiver
    may be a timeline."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr in ("create", "transition"):
            receiver = ast.unparse(node.func.value)
            if node.func.attr == "transition" or receiver not in NOT_A_TIMELINE:
                found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno} {receiver}.{node.func.attr}(...)")
    return found


def test_only_the_transaction_creates_or_completes_timeline_files():
    callers = [c for p in _sources(PACKAGE) if p not in (*TRANSACTION_PARTS, *DEFINITIONS) for c in _timeline_writes(p)]
    assert not callers, "timeline files created outside the transaction:\n" + "\n".join(callers)
    assert _timeline_writes(TRANSACTION)  # (the scan does see the transaction's own calls)


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _module_level_imports(path: Path, modules: set[str]) -> set[str]:
    """The core modules `path` imports when it is imported (top-level statements, `if`
    and `try` blocks included; imports inside functions run later and are left out)."""
    own = _module_name(path)
    package = own if path.name == "__init__.py" else own.rpartition(".")[0]
    found: set[str] = set()
    statements = list(ast.parse(path.read_text(), str(path)).body)
    while statements:
        node = statements.pop()
        if isinstance(node, (ast.If, ast.Try)):
            statements += node.body + node.orelse + getattr(node, "finalbody", []) + \
                [s for h in getattr(node, "handlers", []) for s in h.body]
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parent + ([node.module] if node.module else []))
            submodules = {f"{base}.{a.name}" for a in node.names} & modules
            found |= submodules
            if len(submodules) < len(node.names) and not own.startswith(base + "."):
                found.add(base)  # (a module's own packages are imported before it anyway)
    return {m for m in found if m in modules and m != own}


def _graph(unit) -> dict[str, set[str]]:
    """Import edges between the units (`unit(module name)`) of the core's modules."""
    paths = _sources(CORE)
    modules = {_module_name(p) for p in paths}
    graph: dict[str, set[str]] = {}
    for path in paths:
        source = unit(_module_name(path))
        targets = {unit(m) for m in _module_level_imports(path, modules)} - {source}
        graph.setdefault(source, set()).update(targets)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected set of more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            members = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                members.append(member)
                if member == node:
                    break
            if len(members) > 1:
                found.append(sorted(members))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def _package_of(module: str) -> str:
    """A module's unit in the package picture: `airflow_lake.core.write.client` is part of
    `airflow_lake.core.write`; a top-level module such as `airflow_lake.core.table` is its own."""
    parts = module.split(".")
    if len(parts) > 3 and (CORE / parts[2]).is_dir():
        return ".".join(parts[:3])
    return module


def test_core_modules_import_each_other_without_a_cycle():
    cycles = _cycles(_graph(lambda m: m))
    assert not cycles, f"import cycles between core modules: {cycles}"


def test_core_packages_import_each_other_without_a_cycle():
    """`write/` and the rollback it once imported (`undo`) imported each other; now the
    transaction (`txn/`) sits under both the writes and the services."""
    cycles = _cycles(_graph(_package_of))
    assert not cycles, f"import cycles between core packages: {cycles}"
