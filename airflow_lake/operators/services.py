"""Table services as operators: clean, archive, rollback, savepoint, restore."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from airflow_lake.core.errors import InstantNotFoundError
from airflow_lake.core.timeline.instant import check_instant_time
from airflow_lake.core.vocabulary import CLEAN_POLICIES
from airflow_lake.operators.base import (
    COMMON_TEMPLATE_FIELDS,
    LakeJobOperator,
    as_flag,
    choice,
    count,
    flag,
    none_if_empty,
)

if TYPE_CHECKING:
    from airflow.sdk import Context



def _instant(op: LakeJobOperator, value: Any, *, required: bool = True) -> str | None:
    value = none_if_empty(value)
    if value is None:
        if required:
            raise op.invalid("instant is required")
        return None
    try:
        return check_instant_time(str(value))
    except Exception as e:
        raise op.invalid(f"instant {e}") from None  # (its text: the value and what an instant time is)


class CleanOperator(LakeJobOperator):
    """Deletes the file slices no query of the retained window needs, with the `clean` job
    (plan in `T.clean.requested`, deletions as Spark tasks, `T.clean`). Never deleted: the
    latest slice of a file group, savepointed files, slices of a pending compaction, files of
    pending writes.

    :param policy: `KEEP_LATEST_COMMITS`, `KEEP_LATEST_FILE_VERSIONS` or `KEEP_LATEST_BY_HOURS`
        (default: `hoodie.cleaner.policy`, else `KEEP_LATEST_COMMITS`).
    :param retained: commits, file versions or hours to keep (default: the table's options;
        templated).
    :param dry_run: plan only: report what would be deleted, write nothing.

    XCom: `{"instant" (None when nothing needed deleting or dry run), "policy",
    "earliest_instant_to_retain", "files_planned", "files_deleted", "dry_run"}`. The table's
    Asset is an outlet and gets an event (instant, files deleted) unless `dry_run`; a clean
    with nothing to delete succeeds without an event. A clean left half done is
    finished from its plan; a retry returns the clean its first try completed.
    """

    job = "clean"
    result_actions = ("clean",)
    template_fields: Sequence[str] = (*COMMON_TEMPLATE_FIELDS, "retained")

    def __init__(self, *, table_path: str, policy: str | None = None, retained: int | None = None,
                 dry_run: bool = False, **kwargs) -> None:
        if as_flag(dry_run) and kwargs.get("asset") is None:
            kwargs["asset"] = False  # a dry run changes nothing: no outlet, no event
        super().__init__(table_path=table_path, **kwargs)
        self.policy = choice(self, "policy", policy, CLEAN_POLICIES.spellings, CLEAN_POLICIES.find)
        self.retained = retained
        self.dry_run = flag(self, "dry_run", dry_run)
        if not isinstance(retained, str):
            count(self, "retained", retained, minimum=1)

    @property
    def writes_table(self) -> bool:
        return not self.dry_run  # a dry run lists what a clean would delete, and deletes nothing

    def job_args(self) -> list[str]:
        args = ["--policy", self.policy] if self.policy else []
        retained = count(self, "retained", self.retained, minimum=1)
        if retained is not None:
            args += ["--retained", str(retained)]
        return args + (["--dry-run"] if self.dry_run else [])

    def to_xcom(self, result: dict[str, Any], context: Context) -> dict[str, Any]:
        return {"instant": result.get("instant"), "policy": result.get("policy"),
                "earliest_instant_to_retain": result.get("earliest_instant_to_retain"),
                "files_planned": result.get("files_planned"), "files_deleted": result.get("files_deleted"),
                "dry_run": self.dry_run}

    def event_extra(self, result: dict[str, Any]) -> dict[str, Any]:
        return {"instant": result.get("instant"), "action": result.get("action"), "operation": "clean",
                "files_deleted": result.get("files_deleted")}


class ArchiveOperator(LakeJobOperator):
    """Moves the oldest completed instants from `.hoodie/` to the archived timeline with the
    `archive` job, keeping at least `min_commits` once more than `max_commits` are active.
    Archival stops at the cleaner's bound, at the first savepoint, before the oldest pending
    write, and keeps every delta commit after the latest compaction.

    :param min_commits: active commits to keep (default `hoodie.keep.min.commits`, else 20; templated).
    :param max_commits: archive once more are active (default `hoodie.keep.max.commits`, else 30; templated).

    XCom: `{"archived": number archived, "archived_instants": ["<time>.<action>", ...],
    "blocked_by": what stopped archival short (e.g. "pending deltacommit 2024...", a savepoint,
    the clean bound) or None}`. Writes no instant; a re-run archives only what became
    eligible, so a retry is harmless. No Asset event by default (no data changes).
    """

    job = "archive"
    result_actions = ()
    writes_files = False
    template_fields: Sequence[str] = (*COMMON_TEMPLATE_FIELDS, "min_commits", "max_commits")

    def __init__(self, *, table_path: str, min_commits: int | None = None, max_commits: int | None = None,
                 **kwargs) -> None:
        super().__init__(table_path=table_path, **kwargs)
        self.min_commits = min_commits
        self.max_commits = max_commits
        self._bounds()

    def _bounds(self) -> tuple[int | None, int | None]:
        if isinstance(self.min_commits, str) or isinstance(self.max_commits, str):
            return None, None  # templated: checked once rendered
        low = count(self, "min_commits", self.min_commits, minimum=1)
        high = count(self, "max_commits", self.max_commits, minimum=1)
        if low is not None and high is not None and high <= low:
            raise self.invalid(f"max_commits ({high}) must be greater than min_commits ({low})")
        return low, high

    def job_args(self) -> list[str]:
        self.min_commits = count(self, "min_commits", self.min_commits, minimum=1)
        self.max_commits = count(self, "max_commits", self.max_commits, minimum=1)
        low, high = self._bounds()
        return [*(["--min-commits", str(low)] if low else []), *(["--max-commits", str(high)] if high else [])]

    def to_xcom(self, result: dict[str, Any], context: Context) -> dict[str, Any]:
        return {"archived": result.get("archived", 0), "archived_instants": result.get("archived_instants", []),
                "blocked_by": result.get("blocked_by")}

    @classmethod
    def changed_table(cls, result: dict[str, Any]) -> bool:
        """Archival makes no instant: it changed the timeline when it archived any."""
        return bool(result.get("archived"))

    def event_extra(self, result: dict[str, Any]) -> dict[str, Any]:
        return {"operation": "archive", **self.to_xcom(result, {})}


class _OneInstantOperator(LakeJobOperator):
    """A service given one instant (`--instant`, required, templated)."""

    template_fields: Sequence[str] = (*COMMON_TEMPLATE_FIELDS, "instant")
    xcom_keys: tuple[str, ...] = ()

    def __init__(self, *, table_path: str, instant: str, **kwargs) -> None:
        super().__init__(table_path=table_path, **kwargs)
        self.instant = instant

    def job_args(self) -> list[str]:
        return ["--instant", _instant(self, self.instant)]

    def to_xcom(self, result: dict[str, Any], context: Context) -> dict[str, Any]:
        return {key: result.get(key) for key in self.xcom_keys}

    def event_extra(self, result: dict[str, Any]) -> dict[str, Any]:
        return {"action": self.job, "operation": self.job, **self.to_xcom(result, {})}


class RollbackOperator(_OneInstantOperator):
    """Rolls back one instant with the `rollback` job: a pending write or compaction whose
    heartbeat has expired, or the latest completed write. Deletes the files it wrote and
    records a new `R.rollback`; a rolled-back compaction keeps its plan.

    :param instant: the instant to roll back (templated).

    XCom: `{"instant": the rollback instant, "rolled_back", "rolled_back_action",
    "files_deleted"}`. Failure: an instant still running (live heartbeat) is refused, never
    rolled back; an unknown instant fails naming it. The table's Asset gets an event.
    """

    job = "rollback"
    result_actions = ("rollback",)
    change_counts = ()  # any rollback changes the table (one of an overwrite by an empty source deletes no file)
    xcom_keys = ("instant", "rolled_back", "rolled_back_action", "files_deleted")


class SavepointOperator(LakeJobOperator):
    """Savepoints a completed commit with the `savepoint` job: clean and archive keep its
    files, and `RestoreOperator` can roll the table back to it.

    :param instant: the completed commit (templated; default: the latest completed commit
        when the task runs).
    :param user: recorded as `savepointedBy` (default: the job's OS user).
    :param comments: recorded with the savepoint (templated).

    XCom: `{"instant": the savepointed commit, "already_done": it was already savepointed}`.
    Failure: an instant that is not a completed commit, or older than the latest clean's
    earliest retained commit. No Asset event by default (no data changes).
    """

    job = "savepoint"
    result_actions = ("savepoint",)
    writes_files = False
    template_fields: Sequence[str] = (*COMMON_TEMPLATE_FIELDS, "instant", "user", "comments")
    text_fields = (*LakeJobOperator.text_fields, "user", "comments")

    def __init__(self, *, table_path: str, instant: str | None = None, user: str | None = None, comments: str = "",
                 **kwargs) -> None:
        super().__init__(table_path=table_path, **kwargs)
        self.instant = instant
        self.user = user
        self.comments = comments

    def job_args(self) -> list[str]:
        instant = _instant(self, self.instant, required=False)
        if instant is None:
            last = self.hook.get_timeline(self.table_path).commits().completed().last
            if last is None:
                raise InstantNotFoundError(f"{type(self).__name__} {self.task_id}: table "
                                           f"{self.hook.resolve(self.table_path)} has no completed commit to savepoint")
            instant = last.time
        args = ["--instant", instant]
        if none_if_empty(self.user):
            args += ["--user", str(self.user)]
        return args + (["--comments", str(self.comments)] if self.comments else [])

    def to_xcom(self, result: dict[str, Any], context: Context) -> dict[str, Any]:
        return {"instant": result.get("instant"), "already_done": bool(result.get("already_done"))}

    @classmethod
    def changed_table(cls, result: dict[str, Any]) -> bool:
        """A savepoint made by this run (savepointing an instant again is a no-op)."""
        return bool(result.get("instant")) and not result.get("already_done")


class RestoreOperator(_OneInstantOperator):
    """Restores the table to a savepoint with the `restore` job: every write, compaction and
    plan after it is rolled back (a new `R.restore` records what was undone).

    :param instant: the savepoint to restore to (templated).

    XCom: `{"instant": the restore instant, "savepoint", "rolled_back": [undone instants]}`.
    Failure: refused while a later write is still running (live heartbeat); an instant that
    is not a savepoint fails naming it. The table's Asset gets an event.
    """

    job = "restore"
    result_actions = ("restore",)
    change_counts = ("rolled_back",)  # a restore to the latest instant undoes nothing
    xcom_keys = ("instant", "savepoint", "rolled_back")
