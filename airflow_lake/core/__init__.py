"""airflow_lake.core: Apache Hudi (table version 6) tables in Python, on pyarrow and fastavro.

Imports neither Airflow nor pyspark.
"""

from .errors import LakeError
from .table import Table
from .write.client import WriteResult

__all__ = ["LakeError", "Table", "WriteResult"]
