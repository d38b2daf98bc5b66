"""A local S3 server for tests and `bench/s3.py`: moto in server mode, a subprocess on a
free port of 127.0.0.1, with a bucket maker."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator

KEYS = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing"}
REGION = "us-east-1"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def moto_server(log_path: str | None = None) -> Iterator[str]:
    """Start moto's S3 server, wait until it answers, yield its endpoint URL, stop it."""
    port = free_port()
    with open(log_path or os.devnull, "wb") as log:
        proc = subprocess.Popen([sys.executable, __file__, "-H", "127.0.0.1", "-p", str(port)],
                                stdout=log, stderr=subprocess.STDOUT)
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 120
            while True:
                try:
                    urllib.request.urlopen(f"{url}/moto-api/", timeout=5).close()
                    break
                except OSError:
                    if proc.poll() is not None or time.monotonic() > deadline:
                        raise RuntimeError(f"moto server did not start on {url} (log: {log_path})") from None
                    time.sleep(0.2)
            yield url
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()


def create_bucket(endpoint: str, name: str) -> None:
    import boto3

    boto3.client("s3", endpoint_url=endpoint, region_name=REGION, **KEYS).create_bucket(Bucket=name)


def serve(argv: list[str]) -> None:
    """moto's server (`python -m moto.server`), with what moto repeats for every request done
    once: the service a request host goes to looked up once per host (moto lists the folders
    of its own package and matches every service's URL patterns, a third of the server's CPU
    in the S3 tests); each stored time parsed once from its text (a listing parses every
    key's with dateutil: 9% of the server's CPU); no log line per request (5%)."""
    import functools
    import logging

    from moto import server
    from moto.core import serialize
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication

    lookup = DomainDispatcherApplication.get_backend_for_host
    DomainDispatcherApplication.get_backend_for_host = functools.lru_cache(maxsize=64)(lookup)
    serialize.parse_to_aware_datetime = functools.lru_cache(maxsize=65536)(serialize.parse_to_aware_datetime)
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    server.main(argv)


if __name__ == "__main__":
    serve(sys.argv[1:])
