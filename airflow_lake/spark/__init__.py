"""airflow_lake.spark: table operations as PySpark jobs. The only package importing pyspark.

`write(table, df, operation)` writes a DataFrame as one commit (rows stay in executors);
`read_table` reads a table as a DataFrame (file groups read in executors); `SparkEngine` runs
the core's per-file-group tasks in executors; `session()` builds the job's SparkSession without
overriding what `spark-submit` was given; `package_zip()` is the zip of `airflow_lake` that
`--py-files` ships to executors; `job_path(name)` is the installed job file `spark-submit`
runs (`airflow_lake.spark.job` is their shared frame).
"""

from .engine import SparkEngine
from .packaging import job_path, package_zip
from .read import read_table
from .session import session
from .write import write

__all__ = ["SparkEngine", "job_path", "package_zip", "read_table", "session", "write"]
