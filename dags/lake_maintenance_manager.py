"""The maintenance manager: one DAG per table of `lake_tables.yaml` (`lake_maintenance__trips`,
`lake_maintenance__trips_daily`), each reading its table's health and running the services
that are due (roll back stale writes, execute pending compaction plans oldest first, schedule
and execute a compaction, clean, archive) as `spark-submit` jobs, with `check_backlog` failing
when a figure is above its threshold. Trigger a run with `{"dry_run": true}` to see the
decisions without running them. Reference: docs/maintenance.md.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from airflow_lake.operators.maintenance import maintenance_dags

BASE = os.environ.get("AIRFLOW_LAKE_BASE") or os.path.join(tempfile.gettempdir(), "airflow-lake")

globals().update(maintenance_dags(Path(__file__).with_name("lake_tables.yaml"), base_path=BASE))
