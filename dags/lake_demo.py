"""The end-to-end demo (`make demo` runs it with `dag.test()`): three parquet batches upserted
into a MERGE_ON_READ table, the sensor seeing them, a compaction scheduled then executed (the
plan's instant passed by XCom), clean, archive. Every lake task is one `spark-submit` through
the `spark_default` connection.

Tables and landing files live under `$AIRFLOW_LAKE_BASE` (default: `<tmp>/airflow-lake`), here
`demo/trips` and `demo/landing`. The base may be an object-store URI (`s3://bucket/prefix`,
`gs://...`): every task then takes its storage options (endpoint, credentials, region) from the
`lake_default` connection's extra `{"storage_options": {...}}`, and the jobs pass them on to
Spark's executors.
"""

from __future__ import annotations

import os
import tempfile
from datetime import datetime

from airflow.sdk import DAG, chain, task

from airflow_lake.operators import (
    ArchiveOperator,
    CleanOperator,
    CompactionExecuteOperator,
    CompactionScheduleOperator,
    UpsertOperator,
)
from airflow_lake.sensors import InstantSensor

BASE = os.environ.get("AIRFLOW_LAKE_BASE") or os.path.join(tempfile.gettempdir(), "airflow-lake")
TABLE = os.path.join(BASE, "demo", "trips")
LANDING = os.path.join(BASE, "demo", "landing")
BATCHES = 3
# an object store needs its storage options: from the lake connection (local folders need none)
LAKE_CONN = "lake_default" if "://" in BASE else None

with DAG("lake_demo", schedule=None, start_date=datetime(2025, 1, 1), catchup=False,
         tags=["airflow-lake", "example"], doc_md=__doc__) as dag:

    @task
    def land() -> list[str]:
        """Write the source files (generated trips; half of each batch updates the previous one)."""
        from airflow_lake.demo import land_trips
        from airflow_lake.hooks.lake import LakeHook

        return land_trips(LANDING, BATCHES, storage_options=LakeHook(LAKE_CONN).settings.storage_options)

    upserts = [
        UpsertOperator(
            task_id=f"upsert_{n}", table_path=TABLE, source=os.path.join(LANDING, f"batch_{n}.parquet"),
            create_if_missing=True, table_type="MERGE_ON_READ", record_key="uuid", precombine_field="ts",
            partition_fields=["city"], lake_conn_id=LAKE_CONN,
        )
        for n in range(1, BATCHES + 1)
    ]
    # fires once the table has BATCHES data commits it had not seen (its watermark is kept in
    # the table Asset's state store, so a second run waits for three more)
    wait = InstantSensor(task_id="wait_for_commits", table_path=TABLE, min_new_instants=BATCHES,
                         poke_interval=5, timeout=600, lake_conn_id=LAKE_CONN)
    schedule = CompactionScheduleOperator(task_id="schedule_compaction", table_path=TABLE,
                                          strategy="NUM_COMMITS", max_delta_commits=2,
                                          lake_conn_id=LAKE_CONN)
    execute = CompactionExecuteOperator(task_id="execute_compaction", table_path=TABLE,
                                        instant="{{ ti.xcom_pull(task_ids='schedule_compaction') }}",
                                        lake_conn_id=LAKE_CONN)
    # `schedule_compaction` skips `execute_compaction` when no compaction is due: maintenance
    # runs anyway (none_failed: after a success or a skip, not after a failure)
    clean = CleanOperator(task_id="clean", table_path=TABLE, policy="KEEP_LATEST_FILE_VERSIONS", retained=1,
                          lake_conn_id=LAKE_CONN, trigger_rule="none_failed")
    archive = ArchiveOperator(task_id="archive", table_path=TABLE, min_commits=2, max_commits=3,
                              lake_conn_id=LAKE_CONN)

    chain(land(), *upserts, wait, schedule, execute, clean, archive)
