"""`LakeInstantTrigger`: the deferrable half of `InstantSensor`."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from datetime import datetime, timezone
from typing import Any

from airflow.sdk import BaseHook
from airflow.sdk.exceptions import AirflowNotFoundException
from airflow.triggers.base import BaseTrigger, TriggerEvent

from airflow_lake.core.errors import InstantNotFoundError, TableNotFoundError
from airflow_lake.core.objectstore import is_secret_option, scrub
from airflow_lake.core.storage import Storage, open_storage
from airflow_lake.hooks.lake import LakeHook
from airflow_lake.location import LakeSettings
from airflow_lake.watch import Baseline, TimelineWatch, is_permanent, normalize_actions

RETRY_TIMEOUT = 1800.0  # seconds of storage errors in a row before the trigger gives up
MAX_BACKOFF = 300.0


def refuse_secrets(where: str, storage_options: dict[str, Any] | None) -> None:
    """Secret storage options would be serialised with the trigger (Airflow stores its
    kwargs): refuse them, pointing to the connection, which the triggerer resolves itself."""
    secrets = sorted(k for k in (storage_options or {}) if is_secret_option(k))
    if secrets:
        raise ValueError(f"{where}: storage_options holds the secret option(s) {', '.join(secrets)}; a deferred "
                         "sensor's arguments are stored by Airflow: put credentials in the lake connection "
                         "(lake_conn_id), which the triggerer reads itself")


async def lake_settings(lake_conn_id: str | None, storage_options: dict[str, Any] | None) -> LakeSettings:
    """The lake connection's settings, read in the triggerer (`lake_default` may be undefined)."""
    try:
        conn = await BaseHook.aget_connection(lake_conn_id) if lake_conn_id else None
    except AirflowNotFoundException:
        if lake_conn_id != LakeHook.default_conn_name:
            raise
        conn = None
    return LakeSettings.from_connection(conn, lake_conn_id, storage_options)


class LakeInstantTrigger(BaseTrigger):
    """Polls a table's timeline until `min_new_instants` watched instants completed after the
    baseline, then yields one event and stops.

    Timeline reads run in a worker thread (`asyncio.to_thread`): the triggerer's event loop
    is never blocked. The event is `{"status": "success", "table": uri, "result": {...}}` (the
    sensor's XCom) or `{"status": "error", "table": ..., "message": ...}`.

    Storage errors that may pass (network, throttling, a store restarting) are retried with
    back-off (the poll interval doubling up to 5 minutes) for up to `retry_timeout` seconds in
    a row; errors that will not pass (access denied, the table gone, a bad argument) end the
    wait at once. The error event says which.

    :param table_path: absolute path or URI, or a path relative to the connection's base path.
    :param baseline: a previous result dict, an instant time, or None (from the beginning).
    :param actions: watched actions; None for data writes (compactions excluded).
    :param min_new_instants: how many new instants to wait for.
    :param poll_interval: seconds between timeline scans.
    :param lake_conn_id: a `lake` connection, fetched in the triggerer (secrets stay out of
        the serialised trigger).
    :param storage_options: explicit, non-secret file-system options (serialised with the
        trigger; secret ones are refused: credentials belong in the connection).
    :param wait_for_table: a path without a table yet is polled until one is created.
    :param retry_timeout: seconds of consecutive storage errors before giving up.
    :param deadline: when the wait ends unmet (seconds since the epoch; the sensor's timeout from
        its deferral): the trigger then yields `{"status": "timeout", ...}`. Airflow's triggerer
        also times a trigger out, but `airflow dags test` and `dag.test()` run triggers without
        one; carrying the deadline here makes the sensor's timeout hold on every path.
    """

    def __init__(self, table_path: str, baseline: dict | str | None = None, actions: list[str] | None = None,
                 min_new_instants: int = 1, poll_interval: float = 60.0, lake_conn_id: str | None = "lake_default",
                 storage_options: dict[str, Any] | None = None, wait_for_table: bool = False,
                 retry_timeout: float = RETRY_TIMEOUT, deadline: float | None = None) -> None:
        super().__init__()
        refuse_secrets(f"LakeInstantTrigger: table {table_path}", storage_options)
        self.table_path = table_path
        self.baseline = Baseline.parse(baseline, f"table {table_path}").to_dict() if baseline else None
        norm = normalize_actions(actions)
        self.actions = list(norm) if norm is not None else None
        self.min_new_instants = int(min_new_instants)
        self.poll_interval = float(poll_interval)
        self.lake_conn_id = lake_conn_id
        self.storage_options = dict(storage_options or {})
        self.wait_for_table = bool(wait_for_table)
        self.retry_timeout = float(retry_timeout)
        self.deadline = None if deadline is None else float(deadline)

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "table_path": self.table_path,
                "baseline": self.baseline,
                "actions": self.actions,
                "min_new_instants": self.min_new_instants,
                "poll_interval": self.poll_interval,
                "lake_conn_id": self.lake_conn_id,
                "storage_options": self.storage_options,
                "wait_for_table": self.wait_for_table,
                "retry_timeout": self.retry_timeout,
                "deadline": self.deadline,
            },
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        table, options = self.table_path, dict(self.storage_options)
        try:
            settings = await lake_settings(self.lake_conn_id, self.storage_options)
            table, options = settings.resolve(self.table_path), settings.storage_options
            storage = await asyncio.to_thread(open_storage, table, options)
            async for event in self._poll(table, storage):
                yield event
                return
        except Exception as e:  # reported to the task, which fails with the message
            yield TriggerEvent({"status": "error", "table": table,
                                "message": scrub(f"{type(e).__name__}: {e}", options)})

    async def _poll(self, table: str, storage: Storage) -> AsyncIterator[TriggerEvent]:
        """Scan until enough new instants (one success event); storage errors that may pass
        are retried with back-off, the others raised."""
        watch = TimelineWatch(storage, self.actions)
        baseline = Baseline.parse(self.baseline, f"table {table}")
        failing_since: float | None = None
        failures = 0
        while True:
            delay = self.poll_interval
            started = time.monotonic()  # (a failed scan counts from its start: its own retries take time)
            try:
                seen = await asyncio.to_thread(self._observe, table, watch, baseline)
            except Exception as e:
                if is_permanent(e) or self.retry_timeout <= 0:
                    raise
                failures += 1
                failing_since = failing_since or started
                waited = time.monotonic() - failing_since
                if waited >= self.retry_timeout:
                    raise TimeoutError(f"table {table}: storage errors for {waited:.1f} s ({failures} in a row, "
                                       f"retry_timeout {self.retry_timeout:g} s); the last: "
                                       f"{type(e).__name__}: {e}") from e
                delay = min(self.poll_interval * 2 ** min(failures, 16), MAX_BACKOFF)
                self.log.warning("table %s: storage error %d (%s: %s); retrying in %.1f s", table, failures,
                                 type(e).__name__, e, delay)
            else:
                failing_since, failures = None, 0
                if seen is not None and len(seen.new) >= self.min_new_instants:
                    result = {"table": table, **seen.result()}
                    self.log.info("table %s: %d new instant(s): %s", table, len(seen.new),
                                  [i["instant"] for i in seen.new])
                    yield TriggerEvent({"status": "success", "table": table, "result": result})
                    return
                if seen is not None:
                    self.log.debug("table %s: %d of %d new instant(s); waiting %.0fs", table, len(seen.new),
                                   self.min_new_instants, self.poll_interval)
            left = self._time_left()
            if left is not None and left <= 0:
                yield TriggerEvent({"status": "timeout", "table": table,
                                    "message": self._timeout_message(seen if failures == 0 else None)})
                return
            await asyncio.sleep(delay if left is None else min(delay, left))

    def _time_left(self) -> float | None:
        """Seconds until the deadline (None: no deadline)."""
        return None if self.deadline is None else self.deadline - time.time()

    def _timeout_message(self, seen) -> str:
        found = ("no timeline read yet (no table, or storage errors)" if seen is None
                 else f"{len(seen.new)} of {self.min_new_instants} new instant(s)")
        until = datetime.fromtimestamp(self.deadline, timezone.utc).isoformat(timespec="seconds")
        return f"the sensor's timeout passed at {until} with {found}"

    def _observe(self, table: str, watch: TimelineWatch, baseline: Baseline):
        """One scan (in a thread): the observation, or None for "look again" (no table yet
        under `wait_for_table`, a timeline file gone while read)."""
        try:
            return watch.observe(baseline)
        except TableNotFoundError as e:  # (also a table being created: its .hoodie before its hoodie.properties)
            if not self.wait_for_table:
                raise TableNotFoundError(f"{e} (pass wait_for_table=True to wait until one is created)") from None
            self.log.info("table %s: no table yet (wait_for_table): polling", table)
            return None
        except InstantNotFoundError as e:  # archived or rolled back while listed: look again
            self.log.info("table %s: timeline changed while reading (%s); polling again", table, e)
            return None
