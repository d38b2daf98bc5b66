"""A local S3 server (moto in server mode, a subprocess on 127.0.0.1, a free port) for the
object-store tests: started once per session, a new bucket per test, stopped at the end.

Credentials, region and endpoint reach the code only as storage options (`s3_options`);
the AWS variables of the environment are cleared so nothing can fall back to a real account.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
import uuid

import pytest

pytest.importorskip("moto", reason="the S3 tests need moto[server] (the dev extra)")
pytest.importorskip("boto3", reason="the S3 tests need boto3 (the s3 extra)")

# names as delta-rs / object_store / hudi-rs spell them; hudi-rs takes the same dict
CREDENTIALS = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing", "aws_region": "us-east-1"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def s3_endpoint(tmp_path_factory) -> str:
    """The endpoint URL of a moto S3 server running for this test session."""
    port = free_port()
    log = open(tmp_path_factory.mktemp("moto") / "moto.log", "wb")  # noqa: SIM115 (closed below)
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                            stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while True:
        try:
            urllib.request.urlopen(f"{url}/moto-api/", timeout=5).close()
            break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise RuntimeError(f"moto server did not start on {url} (see {log.name})") from None
            time.sleep(0.2)
    yield url
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
    log.close()


@pytest.fixture(autouse=True)
def no_aws_environment(monkeypatch):
    for key in list(os.environ):
        if key.startswith("AWS_"):
            monkeypatch.delenv(key)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


@pytest.fixture
def s3_options(s3_endpoint) -> dict[str, str]:
    """Storage options reaching the local server."""
    return {**CREDENTIALS, "aws_endpoint_url": s3_endpoint, "aws_allow_http": "true"}


@pytest.fixture
def s3_bucket(s3_endpoint) -> str:
    """A new, empty bucket."""
    import boto3

    name = f"lake-{uuid.uuid4().hex[:12]}"
    boto3.client("s3", endpoint_url=s3_endpoint, aws_access_key_id="testing", aws_secret_access_key="testing",
                 region_name="us-east-1").create_bucket(Bucket=name)
    return name


@pytest.fixture
def s3_table(s3_bucket) -> str:
    """The URI of a table in a new bucket."""
    return f"s3://{s3_bucket}/lake/table"
