"""The DAGs shown in README.md and docs/quickstart.md parse as written into the DAG they describe
(the example DAGs of `dags/`, which run in test_example_dags.py, cover what they do)."""

from __future__ import annotations

import re
from datetime import datetime, timezone

import pytest

from airflow_lake.core import Table
from airflow_lake.demo import land_trips
from tests.conftest import REPO
from tests.core.test_readme import readme_blocks
from tests.dags.conftest import DAGS_FOLDER, load_example, states, xcom


def quickstart_dag() -> str:
    blocks = re.findall(r"```python\n(.*?)```", (REPO / "docs" / "quickstart.md").read_text(), re.S)
    return next(b for b in blocks if "with DAG(" in b)


@pytest.mark.parametrize("source", ["README.md", "docs/quickstart.md"])
def test_documented_dag_parses(source):
    code = readme_blocks()[0] if source == "README.md" else quickstart_dag()
    scope: dict = {}
    exec(compile(code, source, "exec"), scope)
    dag = scope["dag"]
    upsert, schedule, execute = (dag.get_task(t) for t in ("upsert", "schedule", "execute"))
    assert upsert.downstream_task_ids == {"schedule"} and schedule.downstream_task_ids == {"execute"}
    assert [a.uri for a in upsert.outlets] == ["hudi:/data/lake/trips"]
    assert execute.instant == "{{ ti.xcom_pull(task_ids='schedule') }}" and "instant" in execute.template_fields
    assert "{{ ds }}" in upsert.source and "source" in upsert.template_fields
    assert (upsert.record_key, upsert.partition_fields, upsert.table_type) == ("uuid", ["city"], "MERGE_ON_READ")


def test_readme_dag_cleans_when_no_compaction_is_due(lake):
    """The README's DAG, its paths moved under this test's lake, under `dag.test()`: the first
    run's upsert leaves one delta commit, so `schedule` skips `execute`, and clean still runs."""
    code = readme_blocks()[0].replace('"/data/', f'"{lake}/').replace('DAG("trips"', 'DAG("readme_trips"')
    (DAGS_FOLDER / "readme_trips.py").write_text(code)
    day = datetime(2025, 1, 2, tzinfo=timezone.utc)
    land_trips(str(lake / "landing" / "trips" / day.strftime("%Y-%m-%d")), batches=1)
    run = load_example("readme_trips").test(logical_date=day)
    assert states(run) == {"upsert": "success", "schedule": "skipped", "execute": "skipped", "clean": "success"}
    assert run.state == "success"
    table = Table.open(str(lake / "lake" / "trips"))
    assert [i.action for i in table.timeline.completed()] == ["deltacommit"]  # nothing to clean yet
    assert xcom(run, "clean")["instant"] is None


def test_demo_dag_cleans_whatever_compaction_did(lake):
    """`make demo`'s DAG has the README's shape: its clean runs after a skipped compaction too."""
    dag = load_example("lake_demo")
    assert dag.get_task("execute_compaction").downstream_task_ids == {"clean"}
    assert dag.get_task("clean").trigger_rule == "none_failed"
