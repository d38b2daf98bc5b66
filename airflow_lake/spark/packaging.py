"""The zip of `airflow_lake` that `spark-submit --py-files` ships to executors."""

from __future__ import annotations

import hashlib
import os
import tempfile
import zipfile
from pathlib import Path

import airflow_lake

PACKAGE_ROOT = Path(airflow_lake.__file__).resolve().parent


def _sources() -> list[Path]:
    return sorted(p for p in PACKAGE_ROOT.rglob("*.py") if "__pycache__" not in p.parts)


def package_zip(cache_dir: str | os.PathLike | None = None) -> Path:
    """Build (once per content) `airflow_lake-<hash>.zip` holding the package's sources.

    The name carries a hash of every source file's path and bytes, so an unchanged package
    is zipped once and a changed one never reuses a stale zip.
    """
    files = _sources()
    digest = hashlib.sha256()
    for path in files:
        digest.update(str(path.relative_to(PACKAGE_ROOT.parent)).encode())
        digest.update(b"\0")
        digest.update(path.read_bytes())
    folder = Path(cache_dir or os.environ.get("AIRFLOW_LAKE_CACHE") or Path(tempfile.gettempdir()) / "airflow-lake")
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / f"airflow_lake-{digest.hexdigest()[:16]}.zip"
    if target.exists():
        return target
    partial = folder / f".{target.name}.{os.getpid()}"
    with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as z:
        for path in files:
            z.write(path, str(path.relative_to(PACKAGE_ROOT.parent)))
    os.replace(partial, target)  # atomic: a concurrent builder never sees half a zip
    return target
