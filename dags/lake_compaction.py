"""Offline compaction of the `trips` table: `schedule` writes a compaction plan when enough
delta commits accumulated and returns its instant (or skips `execute` when none is due);
`execute` runs exactly that plan, its instant pulled from XCom. Both are `spark-submit` jobs.
"""

from __future__ import annotations

import os
import tempfile
from datetime import datetime, timedelta

from airflow.sdk import DAG

from airflow_lake.operators import CompactionExecuteOperator, CompactionScheduleOperator

BASE = os.environ.get("AIRFLOW_LAKE_BASE") or os.path.join(tempfile.gettempdir(), "airflow-lake")
TABLE = os.path.join(BASE, "trips")

with DAG("lake_compaction", schedule=timedelta(hours=1), start_date=datetime(2025, 1, 1), catchup=False,
         max_active_runs=1, tags=["airflow-lake", "example"], doc_md=__doc__) as dag:
    schedule = CompactionScheduleOperator(task_id="schedule", table_path=TABLE, strategy="NUM_COMMITS",
                                          max_delta_commits=2)
    execute = CompactionExecuteOperator(task_id="execute", table_path=TABLE,
                                        instant="{{ ti.xcom_pull(task_ids='schedule') }}")
    schedule >> execute
