"""What `spark-submit` is given: the job files (`job_path`) and the zip of `airflow_lake` that
`--py-files` ships to executors (`package_zip`)."""

from __future__ import annotations

import hashlib
import importlib.util
import os
import py_compile
import tempfile
import threading
import zipfile
from pathlib import Path

import airflow_lake

PACKAGE_ROOT = Path(airflow_lake.__file__).resolve().parent
# installed distribution: airflow_lake/spark/jobs/; source checkout (editable install): spark_jobs/
JOB_FOLDERS = (PACKAGE_ROOT / "spark" / "jobs", PACKAGE_ROOT.parent / "spark_jobs")


def job_folder() -> Path:
    """The folder holding the job files of this installation."""
    for folder in JOB_FOLDERS:
        if (folder / "__init__.py").is_file():
            return folder
    raise FileNotFoundError(f"airflow-lake's spark jobs are not installed: none of {[str(f) for f in JOB_FOLDERS]} "
                            "exists (reinstall airflow-lake)")


def job_names() -> list[str]:
    """Names of the jobs `job_path` knows (`compaction_execute`, `clean`, ...)."""
    return sorted(p.stem for p in job_folder().glob("*.py") if not p.stem.startswith("_"))


def job_path(name: str) -> Path:
    """The installed path of the job file `name` (e.g. `job_path("clean")`), what
    `spark-submit` runs: `spark-submit --py-files $(package_zip) $(job_path) ARGS`."""
    path = job_folder() / f"{name.removesuffix('.py')}.py"
    if name.startswith("_") or "/" in name or not path.is_file():
        raise ValueError(f"no spark job {name!r}; jobs: {', '.join(job_names())}")
    return path


def _bytecode(path: Path, name: str, scratch: str) -> bytes:
    """The `.pyc` of a source file (hash-based, unchecked: a zip's files never change)."""
    target = os.path.join(scratch, "module.pyc")
    py_compile.compile(str(path), cfile=target, dfile=name, doraise=True,
                       invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)
    with open(target, "rb") as f:
        return f.read()


def _sources() -> list[Path]:
    return sorted(p for p in PACKAGE_ROOT.rglob("*.py") if "__pycache__" not in p.parts)


def package_zip(cache_dir: str | os.PathLike | None = None) -> Path:
    """Build (once per content) `airflow_lake-<hash>.zip` holding the package's sources, each
    with its bytecode for this Python (`x.pyc` beside `x.py`: Python imports from a zip
    without writing bytecode, so each process would compile the package again; a Python of
    another version ignores these and compiles the sources).

    The name carries a hash of every source file's path and bytes, and of this Python's
    bytecode version, so an unchanged package is zipped once and a changed one never reuses
    a stale zip.
    """
    files = _sources()
    digest = hashlib.sha256(importlib.util.MAGIC_NUMBER)
    for path in files:
        digest.update(str(path.relative_to(PACKAGE_ROOT.parent)).encode())
        digest.update(b"\0")
        digest.update(path.read_bytes())
    folder = Path(cache_dir or os.environ.get("AIRFLOW_LAKE_CACHE") or Path(tempfile.gettempdir()) / "airflow-lake")
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / f"airflow_lake-{digest.hexdigest()[:16]}.zip"
    if target.exists():
        return target
    partial = folder / f".{target.name}.{os.getpid()}.{threading.get_ident()}"  # per builder, threads too
    with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as z, tempfile.TemporaryDirectory() as scratch:
        for path in files:
            name = str(path.relative_to(PACKAGE_ROOT.parent))
            z.write(path, name)
            z.writestr(name[:-3] + ".pyc", _bytecode(path, name, scratch))
    try:  # the first builder's zip stays: a Spark that fetched it rejects the same name with other bytes
        os.link(partial, target)  # (atomic, and fails where the name exists: never half a zip, never replaced)
    except FileExistsError:
        pass
    except OSError:  # (a file system without hard links: replaced atomically)
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)
    return target
