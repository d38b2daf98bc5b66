"""The test run's Spark home: hard links to the installed pyspark's files in a folder of the
user cache named after those files' identity, so that every checkout whose virtualenv holds the
same files (uv links them from its cache) runs Spark from the same paths.

The jobs' class-data archive records the paths of the jars it was made from, and the JVM maps it
only while they exist (`airflow_lake.spark.startup`): made from a checkout's own virtualenv, it
dies with the checkout, so each clean clone (as CI makes) wrote a new one (one job ~22 CPU-s
more) and ran its first jobs and its SparkSession without one. Made from these paths, it serves
the next clone. Spark's Python zips here are the installed package's own files, so its Python
processes still take the compiled package (`airflow_lake.spark.pythonpath`).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import os
import shutil
from pathlib import Path

KEEP_HOMES = 2
COMPLETE = ".complete"


def installed_spark_home() -> Path | None:
    """The pip pyspark's folder (Spark's home when `SPARK_HOME` is unset), found, not imported."""
    spec = importlib.util.find_spec("pyspark")
    home = Path(spec.origin).parent if spec and spec.origin else None
    return home if home and (home / "jars").is_dir() and (home / "bin").is_dir() else None


def identity(home: Path) -> str:
    """What the linked folder is made of: the jars', scripts' and zips' names and file identity."""
    h = hashlib.sha256()
    for sub in ("bin", "jars", "python/lib"):
        folder = home / sub
        for path in sorted(folder.iterdir()) if folder.is_dir() else ():
            if not path.is_file():
                continue
            st = path.stat()
            h.update(f"{sub}/{path.name}\0{st.st_dev}\0{st.st_ino}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return h.hexdigest()[:16]


def linked_spark_home(cache: Path) -> Path | None:
    """The linked Spark home under `cache` for the installed pyspark (made once, atomically), or
    None where there is no pip pyspark or its files cannot be linked there (another file system)."""
    home = installed_spark_home()
    if home is None:
        return None
    root = cache / "spark-home"
    target = root / f"pyspark-{identity(home)}"
    if (target / COMPLETE).is_file():
        with contextlib.suppress(OSError):  # (in use: pruned last; a read-only cache serves as it is)
            os.utime(target)
        return target
    partial = root / f".{target.name}.{os.getpid()}.tmp"
    try:
        root.mkdir(parents=True, exist_ok=True)
        shutil.copytree(home, partial, copy_function=os.link, ignore=shutil.ignore_patterns("__pycache__"))
        (partial / COMPLETE).touch()
        try:
            partial.rename(target)
        except OSError:  # another run made it first
            if not (target / COMPLETE).is_file():
                raise
    except OSError:
        return None
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    _prune(root, keep=target)
    return target


def _prune(root: Path, keep: Path) -> None:
    """Keep the `KEEP_HOMES` most recently used linked homes (other pysparks' go)."""
    homes = sorted((p for p in root.glob("pyspark-*") if p.is_dir()), key=lambda p: p.stat().st_mtime, reverse=True)
    for old in homes[KEEP_HOMES:]:
        if old != keep:
            shutil.rmtree(old, ignore_errors=True)
