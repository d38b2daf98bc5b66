"""The DAGs shown in README.md and docs/quickstart.md parse as written into the DAG they describe
(the example DAGs of `dags/`, which run in test_example_dags.py, cover what they do)."""

from __future__ import annotations

import re

import pytest

from tests.conftest import REPO
from tests.core.test_readme import readme_blocks


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
