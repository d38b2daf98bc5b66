"""Ingestion: parquet files dropped into a landing folder are upserted into the `trips` table.

`FileSensor` (Airflow's standard provider, connection `fs_default`, whose default path is `/`)
waits for `*.parquet` in `$AIRFLOW_LAKE_BASE/landing/trips`; `claim` moves what is there into
a folder of its own for this run (files landing meanwhile wait for the next run, and a retry
finds the same files); `UpsertOperator` writes that folder as one commit with one
`spark-submit` (creating the MERGE_ON_READ table on first use) and emits an event on the
table's Asset, which schedules `lake_on_new_data`.
"""

from __future__ import annotations

import os
import tempfile
from datetime import datetime, timedelta

from airflow.providers.standard.sensors.filesystem import FileSensor
from airflow.sdk import DAG, task

from airflow_lake.operators import UpsertOperator

BASE = os.environ.get("AIRFLOW_LAKE_BASE") or os.path.join(tempfile.gettempdir(), "airflow-lake")
TABLE = os.path.join(BASE, "trips")
LANDING = os.path.join(BASE, "landing", "trips")
CLAIMED = os.path.join(BASE, "claimed", "trips")

with DAG("lake_ingest", schedule=timedelta(minutes=30), start_date=datetime(2025, 1, 1), catchup=False,
         max_active_runs=1, tags=["airflow-lake", "example"], doc_md=__doc__) as dag:
    wait = FileSensor(task_id="wait_for_files", filepath=os.path.join(LANDING, "*.parquet"),
                      mode="reschedule", poke_interval=60, timeout=25 * 60, soft_fail=True)

    @task
    def claim(run_id: str | None = None) -> str:
        """Move the landed files into `claimed/<run>/` and return that folder (a retry returns
        the folder it filled before)."""
        folder = os.path.join(CLAIMED, "".join(c if c.isalnum() or c in "-_." else "_" for c in run_id))
        os.makedirs(folder, exist_ok=True)
        for name in sorted(os.listdir(LANDING)):
            if name.endswith(".parquet"):
                os.replace(os.path.join(LANDING, name), os.path.join(folder, name))
        if not any(n.endswith(".parquet") for n in os.listdir(folder)):
            raise FileNotFoundError(f"no parquet file in {LANDING} nor in {folder}")
        return folder

    claimed = claim()
    wait >> claimed
    UpsertOperator(
        task_id="upsert", table_path=TABLE, source=claimed, source_format="parquet",
        create_if_missing=True, table_type="MERGE_ON_READ", record_key="uuid", precombine_field="ts",
        partition_fields=["city"],
    )
