"""A local S3 server (moto in server mode, a subprocess on 127.0.0.1, a free port) for the
object-store tests: started once per session, a new bucket per test, stopped at the end.

Credentials, region and endpoint reach the code only as storage options (`s3_options`);
the AWS variables of the environment are cleared so nothing can fall back to a real account.
"""

from __future__ import annotations

import os
import uuid

import pytest

pytest.importorskip("moto", reason="the S3 tests need moto[server] (the dev extra)")
pytest.importorskip("boto3", reason="the S3 tests need boto3 (the s3 extra)")

from tests.s3.server import KEYS, REGION, create_bucket, moto_server  # noqa: E402


@pytest.fixture(scope="session")
def s3_endpoint(tmp_path_factory) -> str:
    """The endpoint URL of a moto S3 server running for this test session."""
    with moto_server(str(tmp_path_factory.mktemp("moto") / "moto.log")) as url:
        yield url


@pytest.fixture(autouse=True)
def no_aws_environment(monkeypatch):
    for key in list(os.environ):
        if key.startswith("AWS_"):
            monkeypatch.delenv(key)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


@pytest.fixture
def s3_options(s3_endpoint) -> dict[str, str]:
    """Storage options reaching the local server, named as delta-rs / object_store / hudi-rs
    name them (hudi-rs takes the same dict)."""
    return {**KEYS, "aws_region": REGION, "aws_endpoint_url": s3_endpoint, "aws_allow_http": "true"}


@pytest.fixture
def s3_bucket(s3_endpoint) -> str:
    """A new, empty bucket."""
    name = f"lake-{uuid.uuid4().hex[:12]}"
    create_bucket(s3_endpoint, name)
    return name


@pytest.fixture
def s3_table(s3_bucket) -> str:
    """The URI of a table in a new bucket."""
    return f"s3://{s3_bucket}/lake/table"
