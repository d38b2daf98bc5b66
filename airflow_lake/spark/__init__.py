"""airflow_lake.spark: table operations as PySpark jobs. The only package importing pyspark.

`write(table, df, operation)` writes a DataFrame as one commit (rows stay in executors);
`read_table` reads a table as a DataFrame (file groups read in executors); `SparkEngine` runs
the core's per-file-group tasks in executors; `session()` builds the job's SparkSession without
overriding what `spark-submit` was given; `package_zip()` is the zip of `airflow_lake` that
`--py-files` ships to executors; `job_path(name)` is the installed job file `spark-submit`
runs (`airflow_lake.spark.job` is their shared frame).
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import TYPE_CHECKING, Any

# imported on first use: the hook (job paths, the package zip, driver start-up options) and the
# executors' Python workers (a few executor functions) need not import pyspark.sql and the rest
_EXPORTS = {"SparkEngine": ".engine", "job_path": ".packaging", "package_zip": ".packaging",
            "read_table": ".read", "session": ".session", "write": ".write"}
__all__ = ["SparkEngine", "job_path", "package_zip", "read_table", "session", "write"]

if TYPE_CHECKING:
    from .engine import SparkEngine
    from .packaging import job_path, package_zip
    from .read import read_table
    from .session import session
    from .write import write


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


class _Package(types.ModuleType):
    """`write` and `session` name both a submodule and its function: when the import system
    binds the submodule on the package, the function is bound instead (as eager imports did)."""

    def __setattr__(self, name: str, value: Any) -> None:
        if isinstance(value, types.ModuleType) and _EXPORTS.get(name) == f".{name}":
            value = getattr(value, name)
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
