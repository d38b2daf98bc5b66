"""airflow_lake.core: Apache Hudi tables (versions 6, 8 and 9) in Python, on pyarrow and fastavro.

Imports neither Airflow nor pyspark. Importing it makes jemalloc pyarrow's default memory
pool unless ARROW_DEFAULT_MEMORY_POOL is set (see `memory`).
"""

from .memory import use_preferred_pool

use_preferred_pool()

from .errors import LakeError  # noqa: E402
from .table import Table  # noqa: E402
from .write.client import WriteResult  # noqa: E402

__all__ = ["LakeError", "Table", "WriteResult"]
