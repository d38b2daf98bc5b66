"""The Spark tests take the run's one SparkSession, the session-scoped `spark` fixture of tests/conftest.py
(re-exported here for conftests that import it from this module)."""

from tests.conftest import spark  # noqa: F401
