"""Every code block of README.md, dags/README.md and docs/*.md is run or checked against the
product (tests/dags/snippets.py): python blocks run, shell blocks parse and their commands'
arguments are parsed by the real command line, Makefile, modules and Spark jobs; a block that
cannot run here carries a `<!-- not run: reason -->` mark, and such marks are few. The DAGs of
README.md and docs/quickstart.md are the DAGs they describe, and the README's runs."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import zipfile
from datetime import datetime, timezone
from pathlib import Path

import pytest

from airflow_lake.core import Table
from airflow_lake.demo import land_trips
from tests.conftest import REPO
from tests.core.test_readme import readme_blocks
from tests.dags import snippets
from tests.dags.conftest import DAGS_FOLDER, load_example, states, xcom

# README.md's python blocks run in their own tests: the DAG below, the core example in
# tests/core/test_readme.py, the Spark one in tests/spark/test_readme_spark.py
RUN_ELSEWHERE = {"README.md"}
MAX_NOT_RUN = 0.2  # at most this share of all blocks may be marked `not run`
CHECKED = {"python", "json", "yaml", "text", *snippets.SHELL}  # run (python) or checked; text is output


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


def test_every_block_names_its_language_and_not_run_marks_are_few_and_reasoned():
    blocks = snippets.all_blocks()
    assert not [b.where for b in blocks if not b.lang], "name the language of every block (`text` for output)"
    marked = [b for b in blocks if b.not_run]
    assert sum(snippets.marks(d) for d in snippets.DOCS) == len(marked), "a not-run mark not right before a block"
    assert len(marked) <= MAX_NOT_RUN * len(blocks), [b.where for b in marked]
    assert not [b.where for b in marked if len(b.not_run.split()) < 3], "say why a block cannot run"
    unchecked = [b.where for b in blocks if b.lang not in CHECKED and not b.not_run]
    assert not unchecked, "a block this test neither runs nor checks is marked `not run` with the reason"


@pytest.mark.parametrize("block", [b for b in snippets.all_blocks() if b.lang in snippets.SHELL],
                         ids=lambda b: b.where)
def test_shell_block_parses_and_its_commands_match_the_product(block):
    script = "\n".join(block.commands()) if block.lang == "console" else block.code
    syntax = subprocess.run(["bash", "-n"], input=script, capture_output=True, text=True)
    assert syntax.returncode == 0, syntax.stderr
    problems = [p for line in block.commands() for words in snippets.simple_commands(line)
                if (p := snippets.check_command(words))]
    assert not problems


@pytest.mark.parametrize("block", [b for b in snippets.all_blocks() if b.lang == "json"], ids=lambda b: b.where)
def test_json_block_parses(block):
    json.loads(block.code)


@pytest.mark.parametrize("block", [b for b in snippets.all_blocks() if b.lang == "yaml"], ids=lambda b: b.where)
def test_yaml_block_is_a_maintenance_config_the_manager_takes(block):
    import yaml

    from airflow_lake.operators.maintenance import managed_tables

    tables, _, _ = managed_tables(yaml.safe_load(block.code))
    assert tables


@pytest.mark.parametrize("doc", [d for d in snippets.DOCS if d.name not in RUN_ELSEWHERE
                                 and any(b.lang == "python" and not b.not_run for b in snippets.blocks(d))],
                         ids=lambda d: str(d.relative_to(REPO)))
def test_python_blocks_run(doc, tmp_path, monkeypatch):
    """A page's python blocks run in order in one namespace, in an empty folder; a block that
    reads `sys.argv[1]` (a script) gets a table path there."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["snippet.py", str(tmp_path / "table")])
    scope: dict = {"__name__": "__snippet__"}
    for block in snippets.blocks(doc):
        if block.lang == "python" and not block.not_run:
            exec(compile(block.code, block.where, "exec"), scope)


def test_make_dist_builds_the_wheel_the_docs_install(tmp_path):
    """`make dist` builds the wheel the docs name; installed alone (no airflow-lake source on
    the path) it has the console script, the provider entry point and the Spark jobs."""
    dist = tmp_path / "dist"
    made = subprocess.run(["make", "dist", f"DIST={dist}"], cwd=REPO, capture_output=True, text=True, timeout=900)
    assert made.returncode == 0, made.stdout[-3000:] + made.stderr[-3000:]
    [wheel] = dist.glob("*.whl")
    named = {n for d in snippets.DOCS for n in re.findall(r"airflow_lake-[\w.]+-py3-none-any\.whl", d.read_text())}
    assert named == {wheel.name}
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        entry_points = next(z.read(n).decode() for n in names if n.endswith(".dist-info/entry_points.txt"))
    assert "airflow-lake = airflow_lake.cli:main" in entry_points and "apache_airflow_provider" in entry_points
    assert {f"airflow_lake/spark/jobs/{p.name}" for p in (REPO / "spark_jobs").glob("*.py")} <= names
    sources = {p.relative_to(REPO).as_posix() for p in (REPO / "airflow_lake").rglob("*.py")}
    assert sources <= names, f"modules missing from the wheel: {sorted(sources - names)}"
    site = tmp_path / "site"
    installed = subprocess.run([str(Path(sys.executable).with_name("uv")), "pip", "install", "--no-deps", "--quiet",
                                "--target", str(site), str(wheel)], capture_output=True, text=True, timeout=300)
    assert installed.returncode == 0, installed.stderr
    # every module imports from the installed wheel alone (the CLI, the provider, the core)
    probe = ("import importlib, pkgutil, airflow_lake\n"
             "for m in pkgutil.walk_packages(airflow_lake.__path__, 'airflow_lake.'):\n"
             "    if not m.name.startswith('airflow_lake.spark.jobs') and not m.name.endswith('__main__'):\n"
             "        importlib.import_module(m.name)\n"
             "from airflow_lake.spark import job_path; print(job_path('clean'))")
    found = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                           env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(site),
                                "AIRFLOW_HOME": str(tmp_path / "airflow")})
    assert found.returncode == 0, found.stderr
    assert Path(found.stdout.strip()) == site / "airflow_lake" / "spark" / "jobs" / "clean.py"
