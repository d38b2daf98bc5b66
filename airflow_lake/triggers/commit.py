"""`TableCommitTrigger`: event-driven scheduling on a table (`AssetWatcher`), whoever writes it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseEventTrigger, TriggerEvent

from airflow_lake.core.errors import InstantNotFoundError
from airflow_lake.core.objectstore import scrub
from airflow_lake.core.storage import open_storage
from airflow_lake.triggers.instant import MAX_BACKOFF, lake_settings, refuse_secrets
from airflow_lake.watch import Baseline, Observation, TimelineWatch, actions_key, is_permanent, normalize_actions

STATE_PREFIX = "airflow_lake.table_commit_trigger"
START_FROM = ("latest", "beginning")


class TableCommitTrigger(BaseEventTrigger):
    """Fires each time instants complete on a table's timeline, for a DAG scheduled on the
    table's Asset through an `AssetWatcher`: any writer counts (an Airflow task, a Spark-Hudi
    job, Flink, the CLI), since only the table's timeline is read (`.hoodie/` listing and
    commit metadata, never data files), through the storage layer the sensor uses (object
    stores included).

    "New" is what `InstantSensor` means by it (docs/sensor.md): completed since the watermark,
    out-of-order completions included, never merely a larger instant time. One event per poll
    that found new instants: `{"table", "instants": [{"instant", "action"}], "watermark",
    "previous_watermark", "completed_after_watermark"}`, the Asset event's
    `extra["payload"]`.

    The watermark is kept in the watched Asset's state store (key `state_key`, default one per
    actions filter), written once the triggerer has taken the event and asks for the next: a
    restarted triggerer goes on from it, so commits made while it was down fire once, and what
    fired before does not fire again (a triggerer killed in the instant between taking an event
    and asking for the next fires that event again rather than lose it). Storage errors are
    retried with back-off (the poll interval doubling up to
    5 minutes), those that will not pass (access denied) logged as errors; a missing table is
    polled until it exists. The trigger never ends by itself.

    :param table_path: absolute path or URI, or a path relative to the lake connection's base path.
    :param actions: watched actions (as `InstantSensor`); None for data writes (commits that
        are not compactions).
    :param poll_interval: seconds between timeline scans.
    :param lake_conn_id: a `lake` connection, read in the triggerer (credentials stay there).
    :param storage_options: explicit non-secret file-system options (secret ones are refused:
        trigger arguments are stored by Airflow).
    :param start_from: with no stored watermark: `latest` (the default: what is on the timeline
        when the watcher first starts does not fire) or `beginning` (it fires once, together).
    :param state_key: the Asset state store key of the watermark.
    """

    def __init__(self, table_path: str, actions: list[str] | None = None, poll_interval: float = 60.0,
                 lake_conn_id: str | None = "lake_default", storage_options: dict[str, Any] | None = None,
                 start_from: str = "latest", state_key: str | None = None) -> None:
        super().__init__()
        refuse_secrets(f"TableCommitTrigger: table {table_path}", storage_options)
        if not float(poll_interval) > 0:
            raise ValueError(f"TableCommitTrigger: table {table_path}: poll_interval must be above 0 seconds, got "
                             f"{poll_interval!r}")
        if start_from not in START_FROM:
            raise ValueError(f"TableCommitTrigger: table {table_path}: start_from must be one of "
                             f"{', '.join(START_FROM)}, got {start_from!r}")
        self.table_path = table_path
        norm = normalize_actions(actions)
        self.actions = list(norm) if norm is not None else None
        self.poll_interval = float(poll_interval)
        self.lake_conn_id = lake_conn_id
        self.storage_options = dict(storage_options or {})
        self.start_from = start_from
        self.state_key = state_key or f"{STATE_PREFIX}/{actions_key(norm)}"

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (f"{type(self).__module__}.{type(self).__qualname__}",
                {"table_path": self.table_path, "actions": self.actions, "poll_interval": self.poll_interval,
                 "lake_conn_id": self.lake_conn_id, "storage_options": self.storage_options,
                 "start_from": self.start_from, "state_key": self.state_key})

    # -- the watermark ---------------------------------------------------------------------------
    async def _load(self) -> Baseline | None:
        store = self.asset_state_store
        if store is None:
            return None
        try:
            stored = await store.aget(self.state_key)
        except ValueError as e:  # watching several Assets: no single state store
            self.log.warning("table %s: %s; the watermark is kept in memory only (a restart starts again "
                             "from start_from)", self.table_path, e)
            self.asset_state_store = None
            return None
        try:
            return Baseline.parse(stored, f"table {self.table_path}") if stored else None
        except Exception as e:  # a damaged stored value: start again rather than die in a loop
            self.log.error("table %s: stored watermark %r is unreadable (%s); starting from %s", self.table_path,
                           stored, e, self.start_from)
            return None

    async def _save(self, baseline: Baseline) -> None:
        if self.asset_state_store is None:
            return
        try:
            await self.asset_state_store.aset(self.state_key, baseline.to_dict())
        except Exception as e:  # the next event saves again; a restart before it repeats this one
            self.log.warning("table %s: could not store the watermark %s: %s", self.table_path, baseline.watermark, e)

    # -- polling ---------------------------------------------------------------------------------
    async def run(self) -> AsyncIterator[TriggerEvent]:
        table = self.table_path
        options: dict[str, Any] = dict(self.storage_options)
        watch: TimelineWatch | None = None
        baseline: Baseline | None = None
        loaded = False
        failures = 0
        while True:
            delay = self.poll_interval
            try:
                if watch is None:  # (in the loop: a connection or store not reachable yet is waited out)
                    settings = await lake_settings(self.lake_conn_id, self.storage_options)
                    table, options = settings.resolve(self.table_path), settings.storage_options
                    watch = TimelineWatch(await asyncio.to_thread(open_storage, table, options), self.actions)
                if not loaded:
                    baseline, loaded = await self._load(), True
                    if baseline is not None:
                        self.log.info("table %s: watching from the stored watermark %s", table, baseline.watermark)
                exists, seen = await asyncio.to_thread(self._observe, watch, baseline)
            except Exception as e:
                failures += 1
                delay = max(self.poll_interval, min(self.poll_interval * 2 ** min(failures, 16), MAX_BACKOFF))
                message = scrub(f"{type(e).__name__}: {e}", options)
                if is_permanent(e):
                    self.log.error("table %s: %s (will not pass by waiting; retrying in %.0f s)", table, message,
                                   delay)
                else:
                    self.log.warning("table %s: storage error %d (%s); retrying in %.1f s", table, failures,
                                     message, delay)
            else:
                failures = 0
                if baseline is None and (seen is not None or not exists):  # the first look: where "new" starts
                    start = self.start_from == "latest" and exists
                    baseline = seen.baseline if start else Baseline()
                    await self._save(baseline)
                    self.log.info("table %s: watching from %s", table,
                                  f"watermark {baseline.watermark}" if start else "the beginning of its timeline")
                    if start:
                        seen = None
                if seen is not None and seen.new:
                    self.log.info("table %s: %d new instant(s): %s", table, len(seen.new),
                                  [i["instant"] for i in seen.new])
                    yield TriggerEvent({"table": table, **seen.result()})
                    # the triggerer took the event and asks for the next: only now is it stored (a
                    # restart before this repeats the event rather than lose it)
                    baseline = seen.baseline
                    await self._save(baseline)
            await asyncio.sleep(delay)

    def _observe(self, watch: TimelineWatch, baseline: Baseline | None) -> tuple[bool, Observation | None]:
        """One scan (in a thread): whether the table exists, and the observation (None: no
        table yet, or a timeline file gone while read: look again)."""
        if not watch.storage.exists(".hoodie"):
            return False, None
        try:
            return True, watch.observe(baseline)
        except InstantNotFoundError as e:  # archived or rolled back while listed
            self.log.info("table %s: timeline changed while reading (%s); polling again", self.table_path, e)
            return True, None
