"""Daily maintenance of the `trips` table: clean file slices no query needs any more, then
archive the oldest instants of the timeline (its XCom says what stopped archival, if
anything). Both are `spark-submit` jobs.
"""

from __future__ import annotations

import os
import tempfile
from datetime import datetime

from airflow.sdk import DAG

from airflow_lake.operators import ArchiveOperator, CleanOperator

BASE = os.environ.get("AIRFLOW_LAKE_BASE") or os.path.join(tempfile.gettempdir(), "airflow-lake")
TABLE = os.path.join(BASE, "trips")

with DAG("lake_maintenance", schedule="@daily", start_date=datetime(2025, 1, 1), catchup=False,
         max_active_runs=1, tags=["airflow-lake", "example"], doc_md=__doc__) as dag:
    clean = CleanOperator(task_id="clean", table_path=TABLE, policy="KEEP_LATEST_COMMITS", retained=10)
    archive = ArchiveOperator(task_id="archive", table_path=TABLE, min_commits=20, max_commits=30)
    clean >> archive
