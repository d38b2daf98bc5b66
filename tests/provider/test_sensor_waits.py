"""What the InstantSensor and its trigger wait through (issue 23, items 5 and 20): storage
errors that may pass are retried with back-off, those that will not end the wait at once,
a bounded time of errors ends it saying so; secret storage options are refused in deferrable
mode; `wait_for_table` waits for a table to be created. Real triggers run in an event loop
against a local S3 server behind a proxy that refuses connections while "down"."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import struct
import threading
import uuid

import pytest

from airflow_lake.core.errors import (
    LakeError,
    StorageError,
    StorageNotFoundError,
    StorageUnavailableError,
    TableNotFoundError,
)
from airflow_lake.core.storage import Storage
from airflow_lake.core.table import Table
from airflow_lake.sensors import InstantSensor
from airflow_lake.triggers import LakeInstantTrigger
from airflow_lake.watch import is_permanent
from tests.provider.conftest import batch


class FlakyProxy:
    """A TCP proxy to `target`; while down it resets every connection (and has cut the open ones)."""

    def __init__(self, target: tuple[str, int]):
        self.target = target
        self.down = threading.Event()
        self.refused = 0
        self.changed = threading.Condition()
        self.live: set[socket.socket] = set()
        self.server = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.server.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            if self.down.is_set():
                client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                client.close()
                with self.changed:
                    self.refused += 1
                    self.changed.notify_all()
                continue
            upstream = socket.create_connection(self.target)
            self.live |= {client, upstream}
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(a: socket.socket, b: socket.socket) -> None:
        try:
            while data := a.recv(65536):
                b.sendall(data)
        except OSError:
            pass
        finally:
            for s in (a, b):
                with contextlib.suppress(OSError):
                    s.close()

    def set_down(self) -> None:
        self.down.set()
        for s in list(self.live):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
        self.live.clear()

    def wait_refused(self, count: int, timeout: float = 120) -> bool:
        with self.changed:
            return self.changed.wait_for(lambda: self.refused >= count, timeout)

    def close(self) -> None:
        self.server.close()


@pytest.fixture(scope="module")
def s3_endpoint(tmp_path_factory):
    pytest.importorskip("moto", reason="needs moto[server] (the dev extra)")
    from tests.s3.server import moto_server

    with moto_server(str(tmp_path_factory.mktemp("moto") / "moto.log")) as url:
        yield url


@pytest.fixture
def s3(s3_endpoint, monkeypatch):
    """(table URI, options to write it directly, the lake connection reaching it through the
    proxy (credentials in login/password, as the sensor asks), proxy)."""
    from urllib.parse import urlsplit

    from tests.s3.server import KEYS, REGION, create_bucket

    bucket = f"lake-{uuid.uuid4().hex[:12]}"
    create_bucket(s3_endpoint, bucket)
    direct = {**KEYS, "aws_region": REGION, "aws_endpoint_url": s3_endpoint, "aws_allow_http": "true"}
    parts = urlsplit(s3_endpoint)
    proxy = FlakyProxy((parts.hostname, parts.port))
    through = {"aws_region": REGION, "aws_endpoint_url": proxy.url, "aws_allow_http": "true",
               "request_timeout": 5, "connect_timeout": 2}
    conn = {"conn_type": "lake", "login": KEYS["aws_access_key_id"], "password": KEYS["aws_secret_access_key"],
            "extra": {"storage_options": through}}
    monkeypatch.setenv("AIRFLOW_CONN_LAKE_PROXY", json.dumps(conn))
    yield f"s3://{bucket}/lake/t", direct, "lake_proxy", proxy
    proxy.close()


async def first_event(trigger: LakeInstantTrigger, limit: float = 120):
    async for event in trigger.run():
        return event.payload
    return None


def test_trigger_retries_storage_errors_that_pass(s3):
    uri, direct, conn, proxy = s3
    t = Table.create(uri, name="t", record_key="id", precombine_field="ts", storage_options=direct)
    first = t.write(batch([1])).instant
    proxy.set_down()

    async def scenario():
        waiting = asyncio.create_task(first_event(LakeInstantTrigger(
            uri, baseline=first, poll_interval=0.05, lake_conn_id=conn)))
        assert await asyncio.to_thread(proxy.wait_refused, 6)  # several scans failed, the trigger kept going
        assert not waiting.done()
        later = await asyncio.to_thread(lambda: t.write(batch([2])).instant)
        proxy.down.clear()
        return later, await asyncio.wait_for(waiting, 120)

    later, event = asyncio.run(scenario())
    assert event["status"] == "success", event
    assert event["result"]["instants"] == [{"instant": later, "action": "commit"}]


def test_trigger_gives_up_after_retry_timeout_saying_so(s3, monkeypatch):
    uri, direct, conn, proxy = s3
    Table.create(uri, name="t", record_key="id", storage_options=direct)
    # each storage call asked once (its own retries, 4.4 s apart in all, would only make the
    # first failed scan, and so the test, last ~25 s)
    monkeypatch.setattr(Storage, "retry_delays", ())
    proxy.set_down()
    event = asyncio.run(asyncio.wait_for(first_event(LakeInstantTrigger(
        uri, poll_interval=0.05, lake_conn_id=conn, retry_timeout=0.5)), 120))
    assert event["status"] == "error"
    assert f"table {uri}: storage errors for" in event["message"] and "retry_timeout 0.5 s" in event["message"]
    assert "in a row" in event["message"] and proxy.refused >= 1


class SlowFailingWatch:
    """A timeline watch whose every scan fails after `seconds` (its storage retries), with an
    error that may pass."""

    def __init__(self, seconds: float):
        self.seconds, self.scans = seconds, 0

    def observe(self, baseline):
        import time

        self.scans += 1
        time.sleep(self.seconds)
        raise ConnectionResetError(104, "Connection reset by peer")


def test_retry_timeout_counts_from_the_start_of_the_first_failed_scan(table_path, monkeypatch):
    """A scan that fails after 0.6 s of its own retries already used up a 0.5 s retry_timeout:
    both the trigger and a poking sensor give up after that one scan, not after a second."""
    Table.create(table_path, name="t", record_key="id").write(batch([1]))
    watch = SlowFailingWatch(0.6)
    monkeypatch.setattr(LakeInstantTrigger, "_observe", lambda self, table, _, baseline: watch.observe(baseline))
    event = asyncio.run(asyncio.wait_for(first_event(LakeInstantTrigger(
        table_path, poll_interval=0.05, retry_timeout=0.5)), 60))
    assert event["status"] == "error" and "(1 in a row" in event["message"], event
    assert watch.scans == 1

    sensor = InstantSensor(task_id="wait", table_path=table_path, retry_timeout=0.5, track_watermark=False)
    sensor.watch = SlowFailingWatch(0.6)
    with pytest.raises(ConnectionResetError):
        sensor._observe(None)
    assert sensor.watch.scans == 1


def test_errors_that_will_not_pass_end_the_wait_at_once(table_path, tmp_path):
    t = Table.create(table_path, name="t", record_key="id")
    t.write(batch([1]))
    import shutil

    shutil.rmtree(table_path)  # the table is gone
    event = asyncio.run(asyncio.wait_for(first_event(LakeInstantTrigger(table_path, poll_interval=0.05)), 60))
    assert event["status"] == "error" and f"{table_path} is not a Hudi table" in event["message"]
    assert "wait_for_table=True" in event["message"]
    # access denied, a missing bucket: permanent; a network error, a file replaced while read: may pass
    for error in (PermissionError(13, "Permission denied"),
                  OSError("When reading information for key 'lake/t/.hoodie' in bucket 'b': AWS Error ACCESS_DENIED "
                          "during HeadObject operation: No response body."),
                  OSError("AWS Error NO_SUCH_BUCKET during ListObjectsV2 operation: The specified bucket does not "
                          "exist"),
                  OSError("HTTP 403 Forbidden"), TableNotFoundError("gone"), LakeError("bad baseline"),
                  StorageError("table t: listing .hoodie: failed: AWS Error ACCESS_DENIED")):
        assert is_permanent(error), error
    for error in (OSError("AWS Error NETWORK_CONNECTION during HeadObject operation: curlCode: 7, Couldn't connect "
                          "to server (http://127.0.0.1:40321)"), ConnectionResetError(104, "reset"),
                  TimeoutError("timed out"), FileNotFoundError(2, "No such file", ".hoodie/1.commit"),
                  StorageUnavailableError("table t: reading .hoodie: failed: SLOW_DOWN"),
                  StorageNotFoundError("table t: reading .hoodie/1.commit: the file is not there")):
        assert not is_permanent(error), error


def test_deferrable_sensor_refuses_secret_storage_options(table_path):
    secret = "SeCrEt-" + uuid.uuid4().hex
    for make in (
        lambda: InstantSensor(task_id="w", table_path=table_path, track_watermark=False, deferrable=True,
                              storage_options={"aws_secret_access_key": secret, "aws_region": "x"}),
        lambda: LakeInstantTrigger(table_path, storage_options={"token": secret}),
    ):
        with pytest.raises(ValueError, match="put credentials in the lake connection") as caught:
            make()
        assert secret not in str(caught.value)
    # non-secret options, or secrets in poke mode (never serialised), are fine
    InstantSensor(task_id="w", table_path=table_path, track_watermark=False, deferrable=True,
                  storage_options={"aws_region": "x"})
    InstantSensor(task_id="w", table_path=table_path, track_watermark=False, storage_options={"secret_key": secret})
    assert LakeInstantTrigger(table_path, wait_for_table=True).serialize()[1]["wait_for_table"] is True


def test_wait_for_table_in_poke_mode(table_path):
    strict = InstantSensor(task_id="w", table_path=table_path, track_watermark=False, poke_interval=0.05)
    with pytest.raises(TableNotFoundError, match="is not a Hudi table.*pass wait_for_table=True"):
        strict.poke({})
    patient = InstantSensor(task_id="w", table_path=table_path, track_watermark=False, poke_interval=0.05,
                            wait_for_table=True)
    assert patient.poke({}) is False
    t = Table.create(table_path, name="t", record_key="id")
    assert patient.poke({}) is False  # a table, no commit yet
    done = t.write(batch([1])).instant
    assert patient.poke({}).xcom_value["instants"] == [{"instant": done, "action": "commit"}]


def test_wait_for_table_in_the_trigger(table_path):
    scans = []

    class Counting(LakeInstantTrigger):
        def _observe(self, table, watch, baseline):
            scans.append(table)
            return super()._observe(table, watch, baseline)

    async def scenario():
        waiting = asyncio.create_task(first_event(Counting(table_path, poll_interval=0.05, wait_for_table=True)))
        while len(scans) < 3:  # the trigger looked several times and is still waiting
            await asyncio.sleep(0.01)
        assert not waiting.done()
        # a table being created: its .hoodie folder exists before its hoodie.properties
        os.makedirs(os.path.join(table_path, ".hoodie"))
        while len(scans) < 6 and not waiting.done():
            await asyncio.sleep(0.01)
        assert not waiting.done(), waiting.result()

        def create():
            t = Table.create(table_path, name="t", record_key="id")
            return t.write(batch([1])).instant

        done = await asyncio.to_thread(create)
        return done, await asyncio.wait_for(waiting, 60)

    done, event = asyncio.run(scenario())
    assert event["status"] == "success" and event["result"]["instants"] == [{"instant": done, "action": "commit"}]
