"""Data-aware scheduling: runs whenever the `trips` table gets new data, i.e. when a writer
(`UpsertOperator` in `lake_ingest`, or any task declaring the table's Asset as an outlet)
emits an event on the table's Asset (`hudi:/<path>`), instead of polling.

`InstantSensor` turns "what is new since my last run" into an instant range: its watermark is
kept in the Asset's state store, so each run sees each commit once, even when several events
were folded into one run. Compactions and cleans emit events on the Asset too but bring no
new data: the sensor watches data commits only, so such a run is skipped after half a minute.
`summarize` reads only the rows written in that range (an incremental pull, no Spark:
increments are small) and writes fares per city to `$AIRFLOW_LAKE_BASE/reports/`.
"""

from __future__ import annotations

import os
import tempfile
from datetime import datetime

from airflow.sdk import DAG, task

from airflow_lake.hooks import LakeHook, table_asset
from airflow_lake.sensors import InstantSensor

BASE = os.environ.get("AIRFLOW_LAKE_BASE") or os.path.join(tempfile.gettempdir(), "airflow-lake")
TABLE = os.path.join(BASE, "trips")
REPORTS = os.path.join(BASE, "reports", "trips")

with DAG("lake_on_new_data", schedule=[table_asset(TABLE)], start_date=datetime(2025, 1, 1), catchup=False,
         max_active_runs=1, tags=["airflow-lake", "example"], doc_md=__doc__) as dag:
    new = InstantSensor(task_id="new_commits", table_path=TABLE, poke_interval=10, timeout=30, soft_fail=True)

    @task
    def summarize(new: dict, triggering_asset_events=None) -> dict:
        """Fares per city of the rows written by the new commits, as a parquet report."""
        import pyarrow.parquet as pq

        for asset, events in (triggering_asset_events or {}).items():
            for event in events:
                print(f"event on {asset.uri}: {event.extra}")
        table = LakeHook().get_table(TABLE)
        start, end = new["previous_watermark"], new["watermark"]
        if end is None:  # the new commits completed above a write still pending: next run
            return {"report": None, "start": start, "end": end, "rows": 0}
        columns = ["city", "fare"]
        rows = table.read_incremental(start, end, columns=columns) if start else table.read(as_of=end, columns=columns)
        summary = rows.group_by("city").aggregate([("fare", "count"), ("fare", "sum")]).sort_by("city")
        os.makedirs(REPORTS, exist_ok=True)
        path = os.path.join(REPORTS, f"after_{end}.parquet")
        pq.write_table(summary, path)
        return {"report": path, "start": start, "end": end, "rows": rows.num_rows}

    summarize(new.output)
