"""`LakeInstantTrigger`: the deferrable half of `InstantSensor`."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from airflow.sdk import BaseHook
from airflow.triggers.base import BaseTrigger, TriggerEvent

from airflow_lake.core.errors import InstantNotFoundError
from airflow_lake.core.storage import open_storage
from airflow_lake.location import LakeSettings
from airflow_lake.watch import Baseline, TimelineWatch, normalize_actions


class LakeInstantTrigger(BaseTrigger):
    """Polls a table's timeline until `min_new_instants` watched instants completed after the
    baseline, then yields one event and stops.

    Timeline reads run in a worker thread (`asyncio.to_thread`): the triggerer's event loop
    is never blocked. The event is `{"status": "success", "table": uri, "result": {...}}` (the
    sensor's XCom) or `{"status": "error", "table": ..., "message": ...}`.

    :param table_path: absolute path or URI, or a path relative to the connection's base path.
    :param baseline: a previous result dict, an instant time, or None (from the beginning).
    :param actions: watched actions; None for data writes (compactions excluded).
    :param min_new_instants: how many new instants to wait for.
    :param poll_interval: seconds between timeline scans.
    :param lake_conn_id: a `lake` connection, fetched in the triggerer (secrets stay out of
        the serialised trigger).
    :param storage_options: explicit file-system options (serialised with the trigger: prefer
        the connection for credentials).
    """

    def __init__(self, table_path: str, baseline: dict | str | None = None, actions: list[str] | None = None,
                 min_new_instants: int = 1, poll_interval: float = 60.0, lake_conn_id: str | None = None,
                 storage_options: dict[str, Any] | None = None) -> None:
        super().__init__()
        self.table_path = table_path
        self.baseline = Baseline.parse(baseline, f"table {table_path}").to_dict() if baseline else None
        norm = normalize_actions(actions)
        self.actions = list(norm) if norm is not None else None
        self.min_new_instants = int(min_new_instants)
        self.poll_interval = float(poll_interval)
        self.lake_conn_id = lake_conn_id
        self.storage_options = dict(storage_options or {})

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
            },
        )

    async def _settings(self) -> LakeSettings:
        conn = await BaseHook.aget_connection(self.lake_conn_id) if self.lake_conn_id else None
        return LakeSettings.from_connection(conn, self.lake_conn_id, self.storage_options)

    async def run(self) -> AsyncIterator[TriggerEvent]:
        table = self.table_path
        try:
            settings = await self._settings()
            table = settings.resolve(self.table_path)
            storage = await asyncio.to_thread(open_storage, table, settings.storage_options)
            if not await asyncio.to_thread(storage.exists, ".hoodie"):
                raise FileNotFoundError(f"{table} is not a Hudi table: no .hoodie folder")
            watch = TimelineWatch(storage, self.actions)
            baseline = Baseline.parse(self.baseline, f"table {table}")
            while True:
                try:
                    seen = await asyncio.to_thread(watch.observe, baseline)
                except InstantNotFoundError as e:  # archived or rolled back while listed: look again
                    self.log.info("table %s: timeline changed while reading (%s); polling again", table, e)
                else:
                    if len(seen.new) >= self.min_new_instants:
                        result = {"table": table, **seen.result()}
                        self.log.info("table %s: %d new instant(s): %s", table, len(seen.new),
                                      [i["instant"] for i in seen.new])
                        yield TriggerEvent({"status": "success", "table": table, "result": result})
                        return
                    self.log.debug("table %s: %d of %d new instant(s); waiting %.0fs", table, len(seen.new),
                                   self.min_new_instants, self.poll_interval)
                await asyncio.sleep(self.poll_interval)
        except Exception as e:  # reported to the task, which fails with the message
            yield TriggerEvent({"status": "error", "table": table, "message": f"{type(e).__name__}: {e}"})
