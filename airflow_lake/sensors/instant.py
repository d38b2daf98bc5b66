"""`InstantSensor`: waits for instants completed on a table's timeline since a baseline."""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import timedelta
from functools import cached_property
from typing import TYPE_CHECKING, Any

from airflow.sdk import Asset, BaseSensorOperator, PokeReturnValue, conf
from airflow.sdk.exceptions import AirflowException, AirflowSensorTimeout, AirflowSkipException

from airflow_lake.core.errors import InstantNotFoundError, InvalidOptionError, LakeError, TableNotFoundError
from airflow_lake.hooks.lake import LakeHook, table_asset, with_asset
from airflow_lake.location import is_absolute
from airflow_lake.operators.base import TimelineReadLineage, as_flag, count, flag, seconds
from airflow_lake.triggers.instant import RETRY_TIMEOUT, LakeInstantTrigger, refuse_secrets
from airflow_lake.watch import Baseline, Observation, TimelineWatch, actions_key, is_permanent, normalize_actions

if TYPE_CHECKING:
    from airflow.sdk import Context

STATE_PREFIX = "airflow_lake.instant_sensor"


class InstantSensor(TimelineReadLineage, BaseSensorOperator):
    """Waits until the table's timeline has completed instants that were not completed at the
    baseline; returns `{"table", "instants": [{"instant", "action"}], "watermark",
    "previous_watermark", "completed_after_watermark"}` as XCom (docs/sensor.md).

    Reads only the timeline, never data files. Works in poke, reschedule and deferrable mode.

    :param table_path: absolute path or URI, or a path relative to the lake connection's base path.
    :param baseline: where "new" starts: a previous result (e.g. the last run's XCom), an
        instant time (a watermark), or None: the watermark kept in the table Asset's state
        store (`track_watermark`), else the beginning of the timeline.
    :param actions: watched actions (`commit`, `deltacommit`, `replacecommit`, `compaction`,
        `logcompaction`, `clean`, ...); None means data writes: commits that are not compactions.
    :param min_new_instants: how many new instants to wait for.
    :param lake_conn_id: a `lake` connection; default `lake_default`, which may be left undefined
        for absolute local paths and URIs with ambient credentials.
    :param storage_options: file-system options overriding the connection's.
    :param track_watermark: with `baseline=None`, read the baseline from the table Asset's
        state store and store the new one when the sensor fires.
    :param asset: the Asset keeping the watermark; by default `hudi:/...` (`hudi+s3://...`) of `table_path`
        (which must then be absolute or a URI). It is added to the task's inlets.
    :param state_key: the key in the Asset's state store; by default one per DAG, task and
        actions filter, so several consumers of one table keep their own watermarks.
    :param deferrable: wait in the triggerer (`LakeInstantTrigger`) instead of a worker slot;
        `storage_options` may then hold no secret (they would be stored with the trigger): give
        credentials in the lake connection.
    :param wait_for_table: a path that holds no table yet is waited on (until the sensor's
        timeout) instead of failing at once.
    :param retry_timeout: storage errors that may pass (network, throttling) are retried for
        up to this many seconds in a row (with back-off in deferrable mode); errors that will
        not pass (access denied, the table gone) fail at once.
    """

    template_fields: Sequence[str] = ("table_path", "baseline", "lake_conn_id")
    ui_color = "#f0e4d0"

    def __init__(self, *, table_path: str, baseline: dict | str | None = None,
                 actions: Sequence[str] | str | None = None, min_new_instants: int = 1,
                 lake_conn_id: str | None = "lake_default", storage_options: dict[str, Any] | None = None,
                 track_watermark: bool = True, asset: Asset | None = None, state_key: str | None = None,
                 deferrable: bool = conf.getboolean("operators", "default_deferrable", fallback=False),
                 wait_for_table: bool = False, retry_timeout: float = RETRY_TIMEOUT, **kwargs) -> None:
        where = f"{type(self).__name__} {kwargs.get('task_id')}: table {table_path}"
        if as_flag(deferrable):
            refuse_secrets(where, storage_options)
        try:
            self.actions = normalize_actions(actions)
        except LakeError as e:
            raise InvalidOptionError(f"{where}: actions: {e}") from None
        if as_flag(track_watermark) and asset is None:
            asset = _default_asset(table_path, kwargs.get("task_id"))
        if asset is not None:
            with_asset(kwargs, "inlets", asset)
        super().__init__(**kwargs)
        self.table_path = table_path
        self.baseline = baseline
        self.min_new_instants = count(self, "min_new_instants", min_new_instants, minimum=1)
        if self.min_new_instants is None:
            raise self.invalid("min_new_instants must be a whole number of at least 1, got None")
        self.lake_conn_id = lake_conn_id
        self.storage_options = storage_options
        self.track_watermark = flag(self, "track_watermark", track_watermark)
        self.asset = asset
        self.state_key = state_key
        self.deferrable = flag(self, "deferrable", deferrable)
        self.wait_for_table = flag(self, "wait_for_table", wait_for_table)
        self.retry_timeout = seconds(self, "retry_timeout", retry_timeout) or 0.0
        self._failing_since: float | None = None

    @cached_property
    def hook(self) -> LakeHook:
        return LakeHook(self.lake_conn_id, self.storage_options)

    def invalid(self, message: str) -> InvalidOptionError:
        """A bad argument, naming the task and the table."""
        return InvalidOptionError(f"{type(self).__name__} {self.task_id}: table {self.table_path}: {message}")

    @cached_property
    def watch(self) -> TimelineWatch:
        try:
            return self.hook.watch(self.table_path, self.actions)
        except TableNotFoundError as e:
            raise TableNotFoundError(f"{e} (pass wait_for_table=True to wait until one is created)") from None

    # -- baseline and its state --------------------------------------------------------------
    def _uses_state(self) -> bool:
        return self.baseline in (None, "") and self.track_watermark and self.asset is not None

    def _state_key(self) -> str:
        return self.state_key or f"{STATE_PREFIX}/{self.dag_id}/{self.task_id}/{actions_key(self.actions)}"

    def _baseline(self, context: Context) -> Baseline:
        where = f"table {self.table_path}"
        if not self._uses_state():
            return Baseline.parse(self.baseline, where)
        stored = context["asset_state_store"][self.asset].get(self._state_key())
        self.log.info("baseline of %s from asset %s, key %s: %s", self.table_path, self.asset.uri,
                      self._state_key(), stored)
        return Baseline.parse(stored, where)

    def _store(self, context: Context, result: dict[str, Any]) -> None:
        if self._uses_state():
            state = Baseline.parse(result, f"table {self.table_path}").to_dict()
            context["asset_state_store"][self.asset].set(self._state_key(), state)

    # -- poke, reschedule -------------------------------------------------------------------
    def _observe(self, baseline: Baseline) -> Observation | None:
        """One scan; None for "look again": no table yet (`wait_for_table`), a timeline file
        gone while read, a storage error that may pass (within `retry_timeout`, counted from
        the start of the first failed scan: its own storage retries take time)."""
        started = time.monotonic()
        try:
            seen = self.watch.observe(baseline)
        except TableNotFoundError:
            if not self.wait_for_table:
                raise
            self.log.info("table %s: no table yet (wait_for_table): waiting", self.table_path)
            return None
        except InstantNotFoundError as e:  # archived or rolled back while listed: look again
            self.log.info("table %s: timeline changed while reading (%s)", self.table_path, e)
            return None
        except Exception as e:
            if is_permanent(e):
                raise
            self._failing_since = self._failing_since or started
            if time.monotonic() - self._failing_since >= self.retry_timeout:
                raise
            self.log.warning("table %s: storage error (%s: %s); looking again", self.table_path, type(e).__name__, e)
            return None
        self._failing_since = None
        return seen

    def _check(self, baseline: Baseline) -> dict[str, Any] | None:
        """The result if enough new instants completed after `baseline`, else None."""
        seen = self._observe(baseline)
        if seen is None:
            return None
        if len(seen.new) < self.min_new_instants:
            self.log.info("table %s: %d of %d new instant(s) after %s%s", self.watch.storage.uri, len(seen.new),
                          self.min_new_instants, seen.previous_watermark or "the beginning",
                          f"; pending: {seen.pending}" if seen.pending else "")
            return None
        result = {"table": self.watch.storage.uri, **seen.result()}
        self.log.info("table %s: new instants %s; watermark %s", result["table"],
                      [i["instant"] for i in seen.new], seen.watermark)
        return result

    def poke(self, context: Context) -> bool | PokeReturnValue:
        result = self._check(self._baseline(context))
        if result is None:
            return False
        self._store(context, result)
        return PokeReturnValue(True, result)

    # -- deferrable --------------------------------------------------------------------------
    def execute(self, context: Context) -> Any:
        if not self.deferrable:
            return super().execute(context)
        baseline = self._baseline(context)
        result = self._check(baseline)
        if result is not None:
            self._store(context, result)
            return result
        self.defer(
            trigger=LakeInstantTrigger(
                table_path=self.table_path,
                baseline=baseline.to_dict(),
                actions=list(self.actions) if self.actions is not None else None,
                min_new_instants=self.min_new_instants,
                poll_interval=self.poke_interval,
                lake_conn_id=self.lake_conn_id,
                storage_options=self.storage_options,
                wait_for_table=self.wait_for_table,
                retry_timeout=self.retry_timeout,
                deadline=time.time() + self.timeout,
            ),
            method_name="execute_complete",
            timeout=timedelta(seconds=self.timeout),
        )

    def execute_complete(self, context: Context, event: dict[str, Any] | None = None) -> dict[str, Any]:
        if event and event.get("status") == "timeout":  # the trigger's own deadline: the sensor's timeout
            message = f"InstantSensor {self.task_id}: table {event.get('table', self.table_path)}: {event['message']}"
            raise AirflowSkipException(message) if self.soft_fail else AirflowSensorTimeout(message)
        if not event or event.get("status") != "success":
            table = (event or {}).get("table", self.table_path)
            message = (event or {}).get("message", "the trigger sent no event")
            raise AirflowException(f"InstantSensor {self.task_id}: table {table}: {message}")
        result = event["result"]
        self._store(context, result)
        return result


def _default_asset(table_path: str, task_id: str | None) -> Asset:
    if not isinstance(table_path, str) or "{{" in table_path or not is_absolute(table_path):
        raise InvalidOptionError(
            f"InstantSensor {task_id}: table_path {table_path!r} is relative or templated, so the table's "
            "Asset (which keeps the watermark) cannot be named when the DAG is parsed (a relative path is joined "
            "to the lake connection's base_path only when the task runs); pass asset=table_asset('<the table's "
            "absolute path or URI>') from airflow_lake.hooks, or an explicit baseline=, or track_watermark=False "
            "(every run then starts from the beginning); see docs/operators.md, 'Relative or templated table paths'")
    return table_asset(table_path)
