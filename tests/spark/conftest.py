"""The Spark tests take the run's one SparkSession, the session-scoped `spark` fixture of tests/conftest.py
(re-exported here for conftests that import it from this module), and the run's one standalone
cluster (`cluster`, started by the first test that needs it)."""

import pytest

from tests.conftest import spark  # noqa: F401
from tests.spark.cluster import Cluster, alive


@pytest.fixture(scope="session")
def cluster(tmp_path_factory):
    """One standalone master and worker for every test that submits to a cluster (each start
    costs two JVMs and the worker's registration); stopped at the end of the run."""
    c = Cluster(tmp_path_factory.mktemp("standalone"))
    try:
        c.start()
        yield c
    finally:
        c.stop()  # also when starting or a test failed
    assert not any(alive(pid) for pid in c.pids()), "a daemon outlived stop"
