"""airflow_lake.spark: table operations as PySpark jobs. The only package importing pyspark.

`SparkEngine` runs the core's per-file-group tasks in executors; `read_table` reads a table
as a DataFrame (file groups read in executors); `session()` builds the job's SparkSession
without overriding what `spark-submit` was given; `package_zip()` is the zip of
`airflow_lake` that `--py-files` ships to executors.
"""

from .engine import SparkEngine
from .packaging import package_zip
from .read import read_table
from .session import session

__all__ = ["SparkEngine", "package_zip", "read_table", "session"]
