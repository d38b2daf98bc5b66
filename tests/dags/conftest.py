"""The example DAGs under `dag.test()`: the provider tests' throwaway AIRFLOW_HOME (SQLite), the
repository's `dags/` copied into its DAGs folder, tables under a per-test `AIRFLOW_LAKE_BASE`,
and `spark_default` submitting to `local[2]`."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import sys
from pathlib import Path

import pytest

from airflow_lake.demo import spark_submit_opts
from tests.conftest import REPO
from tests.provider.conftest import AIRFLOW_ENV, _remove_airflow_home, airflow_db  # noqa: F401 (Airflow env first)

DAGS_FOLDER = Path(AIRFLOW_ENV["AIRFLOW__CORE__DAGS_FOLDER"])
EXAMPLES = REPO / "dags"


@pytest.fixture
def lake(airflow_db, tmp_path, monkeypatch) -> Path:  # noqa: F811
    """The lake's base folder of this test; the example DAGs are in the DAGs folder."""
    base = tmp_path / "lake"
    base.mkdir()
    for dag_file in [*EXAMPLES.glob("*.py"), *EXAMPLES.glob("*.yaml")]:
        shutil.copy(dag_file, DAGS_FOLDER / dag_file.name)
    monkeypatch.setenv("AIRFLOW_LAKE_BASE", str(base))
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", json.dumps({"conn_type": "spark", "host": "local[2]"}))
    monkeypatch.setenv("AIRFLOW_CONN_FS_DEFAULT", json.dumps({"conn_type": "fs", "extra": {"path": "/"}}))
    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)
    monkeypatch.setenv("SPARK_LOCAL_IP", "127.0.0.1")
    monkeypatch.setenv("SPARK_SUBMIT_OPTS", spark_submit_opts(tmp_path / "spark-conf"))
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    return base


def load_example(dag_id: str, file: str | None = None):
    """Import `dags/<file or dag_id>.py` (as copied into the DAGs folder) with the current
    environment; its DAG `dag_id` (`dag` when the file is named so)."""
    name = file or dag_id
    spec = importlib.util.spec_from_file_location(f"example_{name}", DAGS_FOLDER / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.dag if file is None else getattr(module, dag_id)


def unpause(dag_id: str) -> None:
    """Serialise the DAGs folder to the DB (as `dag.test()` does) and unpause `dag_id`: Airflow
    queues runs of Asset-scheduled DAGs only when they are not paused (new DAGs are)."""
    from airflow.dag_processing.bundles.manager import DagBundlesManager
    from airflow.dag_processing.dagbag import BundleDagBag, sync_bag_to_db
    from airflow.models.dag import DagModel
    from airflow.utils.session import create_session
    from sqlalchemy import update

    manager = DagBundlesManager()
    manager.sync_bundles_to_db()
    for bundle in manager.get_all_dag_bundles():
        if not bundle.is_initialized:
            bundle.initialize()
        bag = BundleDagBag(dag_folder=bundle.path, bundle_path=bundle.path, bundle_name=bundle.name)
        sync_bag_to_db(bag, bundle.name, bundle.version)
    with create_session() as session:
        changed = session.execute(update(DagModel).where(DagModel.dag_id == dag_id).values(is_paused=False))
        assert changed.rowcount == 1, f"DAG {dag_id} is not in the DAGs folder"


def states(dag_run) -> dict[str, str]:
    return {ti.task_id: str(getattr(ti.state, "value", ti.state)) for ti in dag_run.get_task_instances()}


def xcom(dag_run, task_id: str):
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        query = XComModel.get_many(run_id=dag_run.run_id, dag_ids=dag_run.dag_id, task_ids=task_id,
                                   key="return_value")
        row = session.scalars(query).first()
        return XComModel.deserialize_value(row) if row is not None else None
