"""Spark puts its own copy of pyspark (`pyspark.zip`, and py4j's zip) first on the path of
every Python process it starts: the job's driver and the executors' worker daemon. Python
keeps no bytecode for modules imported from a zip, so each of those processes compiles
pyspark from source, about 1 s on two cores.

When the zip is the pip-installed pyspark's own (`<site-packages>/pyspark/python/lib/`, the
same `version.py`) and that site-packages folder is on the path, the installed package is the
same code with compiled bytecode: `prefer_installed_pyspark` moves the zips behind it, also
when they are reached by another path (a Spark home of hard links to that package's files: the
same files). A pyspark whose files were replaced by another version's (pyspark-client's trap,
see docs/quickstart.md) has another `version.py` and keeps the zip. Imports no pyspark: it runs
before pyspark is imported.
"""

from __future__ import annotations

import os
import sys
import zipfile


def prefer_installed_pyspark(path: list[str] | None = None) -> bool:
    """Move Spark's pyspark and py4j zips behind the installed packages they duplicate, in
    `path` (default `sys.path`); False when nothing moved (or pyspark is already imported)."""
    if path is None:
        if "pyspark" in sys.modules:
            return False
        path = sys.path
    folders = {os.path.abspath(p) for p in path if p and os.path.isdir(p)}
    moved = [entry for entry in path if _duplicated(entry, folders)]
    for entry in moved:
        path.remove(entry)
        path.append(entry)
    return bool(moved)


def _duplicated(entry: str, folders: set[str]) -> bool:
    """`entry` is the pip pyspark's own pyspark or py4j zip (that file, under any path), and
    the installed package it duplicates is in one of `folders`."""
    name = os.path.basename(entry)
    if not entry.endswith(".zip") or not (name == "pyspark.zip" or name.startswith("py4j-")):
        return False
    for site in sorted(folders):
        lib = os.path.join(site, "pyspark", "python", "lib")
        if not _same_file(entry, os.path.join(lib, name)):
            continue
        if name.startswith("py4j-") and not os.path.isfile(os.path.join(site, "py4j", "__init__.py")):
            return False
        return _same_version(os.path.join(lib, "pyspark.zip"), os.path.join(site, "pyspark"))
    return False


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.abspath(a) == os.path.abspath(b) or os.path.samefile(a, b)
    except OSError:
        return False


def _same_version(zip_path: str, package: str) -> bool:
    try:
        with zipfile.ZipFile(zip_path) as z:
            zipped = z.read("pyspark/version.py")
        with open(os.path.join(package, "version.py"), "rb") as f:
            return f.read() == zipped
    except (OSError, KeyError, zipfile.BadZipFile):
        return False
