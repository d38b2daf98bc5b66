"""A table's health as a value (`TableHealth`), from its timeline and file listing alone (no
data file is read): the compaction backlog per file slice, pending compaction plans and their
age, pending instants and whether their writers are alive (heartbeats), what archival and a
clean would do, the latest commit's age, the table's and its metadata table's versions.

`doctor` shows it, `TableHealthOperator` returns it as XCom, the maintenance manager decides
by it. Ages are seconds at `checked_at_ms`; `as_dict` is JSON-ready."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from . import properties
from .config import ServiceOptions, WriteOptions
from .metadata_table import MDT, MdtStorage, has_files_partition
from .services import archive as archive_service
from .services import compaction
from .timeline.clock import instant_at_ms, instant_epoch_ms
from .timeline.instant import COMMIT, COMMIT_ACTIONS, COMPACTION, DELTA_COMMIT, LOG_COMPACTION, REPLACE_COMMIT, State
from .timeline.payloads import CompactionPlan
from .txn.heartbeat import is_expired, last_beat_ms
from .txn.undo import is_compaction
from .view import FileSystemView
from .vocabulary import COMPACTION_TRIGGERS


@dataclass
class PendingInstant:
    """A requested or inflight instant: how old, and whether its writer is alive."""

    instant: str
    action: str
    state: str
    age_s: float | None
    last_heartbeat_age_s: float | None
    heartbeat_expired: bool | None  # None: nothing beats for it (a compaction plan not started)
    file_groups: int | None = None  # a compaction plan's


@dataclass
class SliceBacklog:
    """A file group's latest slice on a MOR table: log files and delta commits since its base."""

    partition: str
    file_id: str
    base_instant: str
    log_files: int
    delta_commits: int


@dataclass
class TableHealth:
    table: str
    table_type: str
    table_version: int
    metadata_table_version: int | None
    metadata_partitions: list[str]
    checked_at_ms: int
    latest_commit: str | None
    latest_commit_age_s: float | None
    latest_compaction: str | None
    delta_commits_since_compaction: int  # MOR: completed delta commits after the latest compaction
    seconds_since_compaction: float  # since the latest compaction, else the first delta commit
    delta_commits_since_request: int  # after the latest compaction requested or done
    seconds_since_request: float
    compaction_trigger: str  # the table's trigger (hoodie.compact.inline.trigger.strategy)
    compactable_slices: int  # MOR: latest slices with log files a new plan may take (in no pending plan)
    compaction_due: bool  # MOR: the trigger holds and some slice is compactable: scheduling makes a plan
    slices_with_logs: int
    log_files: int
    max_log_files_per_slice: int
    max_delta_commits_per_slice: int
    pending_compactions: list[PendingInstant]
    oldest_pending_compaction_age_s: float | None
    pending: list[PendingInstant]  # every other requested or inflight instant
    stale_instants: list[str]  # pending writes and compactions whose heartbeat expired
    active_commits: int  # completed commits not yet archived
    archivable_commits: int  # the commits an archive with the table's bounds would move now
    archivable_instants: int  # every instant it would move (cleans and rollbacks too)
    archival_blocked_by: str | None
    clean_policy: str
    clean_would_delete: int  # files
    backlog: list[SliceBacklog] = field(default_factory=list)  # the slices with the most logs first (20)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def table_health(table, *, clock=time.time, top: int = 20) -> TableHealth:
    """The health of `table` (a core `Table`) now, by `clock`."""
    now_ms = int(clock() * 1000)
    cfg = table.config
    storage = table.storage
    timeline = table.timeline
    zone = "UTC" if cfg.timezone == "UTC" else "LOCAL"
    interval = table.option(WriteOptions.HEARTBEAT_INTERVAL_MS)
    misses = table.option(WriteOptions.HEARTBEAT_TOLERABLE_MISSES)

    def age(instant: str | None) -> float | None:
        return None if instant is None else max(0.0, (now_ms - instant_epoch_ms(instant, zone)) / 1000)

    def pending(i) -> PendingInstant:
        beat = last_beat_ms(storage, i.time)
        groups = None
        if i.action in (COMPACTION, LOG_COMPACTION):
            groups = len(CompactionPlan.from_bytes(timeline.read_details(i.to(State.REQUESTED))).operations)
        # judged by heartbeat: writes, and compactions being executed; not a plan waiting (a
        # compaction's, a clustering's) nor what no writer beats for (Java's cleans, restores, ...)
        beats = i.action in (COMMIT, DELTA_COMMIT) or (
            i.state == State.INFLIGHT and i.action in (REPLACE_COMMIT, COMPACTION, LOG_COMPACTION)) or beat is not None
        expired = is_expired(storage, i.time, interval, misses, clock) if beats else None
        return PendingInstant(i.time, i.action, i.state.name, age(i.time),
                              None if beat is None else max(0.0, (now_ms - beat) / 1000), expired, groups)

    compactions = [pending(i) for i in timeline.pending() if i.action in (COMPACTION, LOG_COMPACTION)]
    others = [pending(i) for i in timeline.pending() if i.action not in (COMPACTION, LOG_COMPACTION)]
    completed = timeline.commits().completed()
    if completed.last is not None:  # every read starts from it: damaged, the table is unreadable
        timeline.commit_metadata(completed.last)
    compacted = [i.time for i in timeline.actions(COMMIT).completed() if is_compaction(timeline, i.time)]
    latest_compaction = compacted[-1] if compacted else None
    deltas = [i for i in timeline.actions(DELTA_COMMIT).completed()
              if latest_compaction is None or i.time > latest_compaction]
    view = FileSystemView(storage, timeline) if cfg.is_mor else None  # one listing for both figures
    backlog = _backlog(view, timeline, deltas) if view else []
    now = instant_at_ms(now_ms, zone)
    commits, seconds, _ = compaction.trigger_figures(timeline, now)
    requested, since_request, _ = compaction.trigger_figures(timeline, now, after_request=True)
    trigger = COMPACTION_TRIGGERS.parse(table.option(ServiceOptions.COMPACTION_TRIGGER), f"table {storage.uri}",
                                        ServiceOptions.COMPACTION_TRIGGER.key)
    after_request = trigger == "NUM_COMMITS_AFTER_LAST_REQUEST"
    compactable = len(compaction.compactable_slices(view, table.option(compaction.LOG_SIZE_THRESHOLD))) if view else 0
    due = compactable > 0 and compaction.trigger_holds(
        trigger, requested if after_request else commits, since_request if after_request else seconds,
        table.option(ServiceOptions.MAX_DELTA_COMMITS), table.option(ServiceOptions.MAX_DELTA_SECONDS))
    bounds = table.option(ServiceOptions.KEEP_MIN_COMMITS), table.option(ServiceOptions.KEEP_MAX_COMMITS)
    chosen, blocked_by = archive_service.select(table.context(), timeline, *bounds)
    archivable = [i for i in chosen if i.comparable_action in COMMIT_ACTIONS]
    clean = table.clean(dry_run=True)
    mdt_version = None
    if storage.exists(f"{MDT}/.hoodie/hoodie.properties"):
        mdt_version = int(properties.load(MdtStorage(storage)).props.get("hoodie.table.version") or 0) or None
    listed = [p.strip() for p in cfg.props.get("hoodie.table.metadata.partitions", "").split(",") if p.strip()]
    latest = completed.last
    return TableHealth(
        table=storage.uri, table_type=cfg.table_type, table_version=cfg.version,
        metadata_table_version=mdt_version if has_files_partition(cfg.props) or mdt_version else None,
        metadata_partitions=listed, checked_at_ms=now_ms,
        latest_commit=latest.time if latest else None, latest_commit_age_s=age(latest.time if latest else None),
        latest_compaction=latest_compaction, delta_commits_since_compaction=len(deltas) if cfg.is_mor else 0,
        seconds_since_compaction=seconds if cfg.is_mor else 0.0,
        delta_commits_since_request=requested if cfg.is_mor else 0,
        seconds_since_request=since_request if cfg.is_mor else 0.0, compaction_trigger=trigger,
        compactable_slices=compactable, compaction_due=due,
        slices_with_logs=len(backlog), log_files=sum(b.log_files for b in backlog),
        max_log_files_per_slice=max((b.log_files for b in backlog), default=0),
        max_delta_commits_per_slice=max((b.delta_commits for b in backlog), default=0),
        pending_compactions=compactions,
        oldest_pending_compaction_age_s=max((c.age_s or 0.0 for c in compactions), default=None),
        pending=others,
        stale_instants=[p.instant for p in compactions + others if p.heartbeat_expired],
        active_commits=len(completed.instants), archivable_commits=len(archivable),
        archivable_instants=len(chosen), archival_blocked_by=blocked_by,
        clean_policy=clean.policy, clean_would_delete=clean.total_files,
        backlog=sorted(backlog, key=lambda b: (-b.log_files, -b.delta_commits, b.partition, b.file_id))[:top])


def _backlog(view: FileSystemView, timeline, deltas) -> list[SliceBacklog]:
    """The latest slice of every MOR file group that has log files: how many, and how many
    completed delta commits wrote to the group since the slice's base instant."""
    writes: dict[tuple[str, str], list[str]] = {}
    for instant in deltas:
        for stat in timeline.commit_metadata(instant).stats():
            writes.setdefault((stat.partition, stat.file_id), []).append(instant.time)
    out = []
    for group in view.file_groups():
        latest = group.latest_slice
        if latest is None or not latest.log_files:
            continue
        base = latest.base_instant  # (written by the slice's base instant: a log-only slice's first log)
        times = {t for t in writes.get((group.partition, group.file_id), [])
                 if t > base or (t == base and latest.base_file is None)}
        out.append(SliceBacklog(group.partition, group.file_id, latest.base_instant, len(latest.log_files),
                                len(times)))
    return out


# what to do about a figure over its threshold (the advice `breaches` gives)
ADVICE = {
    "delta_commits_since_compaction": "schedule and run a compaction (CompactionScheduleOperator, then "
                                      "CompactionExecuteOperator; CLI: airflow-lake compaction schedule / run)",
    "max_log_files_per_slice": "compact the table: readers merge every log file of a slice",
    "max_delta_commits_per_slice": "compact the table: readers merge every log file of a slice",
    "log_files": "compact the table: readers merge every log file of a slice",
    "pending_compactions": "run the pending plans oldest first (CompactionExecuteOperator; CLI: airflow-lake "
                           "compaction run)",
    "oldest_pending_compaction_age_s": "run the pending plans oldest first (CompactionExecuteOperator; CLI: "
                                       "airflow-lake compaction run)",
    "stale_instants": "their writers are dead: the next write or service rolls them back (CLI: airflow-lake "
                      "rollback <table> <instant>)",
    "pending": "see which writers still run (airflow-lake doctor)",
    "latest_commit_age_s": "no commit for a while: check the table's writers",
    "active_commits": "archive the table (ArchiveOperator); airflow-lake doctor says what holds archival back",
    "archivable_commits": "archive the table (ArchiveOperator; CLI: airflow-lake archive)",
    "archivable_instants": "archive the table (ArchiveOperator; CLI: airflow-lake archive)",
    "clean_would_delete": "clean the table (CleanOperator; CLI: airflow-lake clean)",
}


FIGURES = frozenset(("latest_commit_age_s", "delta_commits_since_compaction", "seconds_since_compaction",
                     "delta_commits_since_request", "seconds_since_request", "compactable_slices", "slices_with_logs",
                     "log_files", "max_log_files_per_slice", "max_delta_commits_per_slice", "pending_compactions",
                     "oldest_pending_compaction_age_s", "pending", "stale_instants", "active_commits",
                     "archivable_commits", "archivable_instants", "clean_would_delete"))
"""The figures of a `TableHealth` a threshold may name (numbers, and lists by their length)."""


def check_thresholds(thresholds: Any) -> dict[str, float]:
    """Thresholds as health figure -> the largest acceptable value, a number at least 0 (text
    holding one, as Airflow renders a template, is taken); else ValueError naming the figure
    and the value."""
    if not isinstance(thresholds, Mapping):
        raise ValueError(f"thresholds must map health figures to numbers, got {thresholds!r}")
    checked = {}
    for name, limit in thresholds.items():
        if name not in FIGURES:
            raise ValueError(f"{name!r} is not a health figure; known: {sorted(FIGURES)}")
        try:
            value = float(limit) if isinstance(limit, (int, float, str)) and not isinstance(limit, bool) else -1.0
        except ValueError:
            value = -1.0
        if not value >= 0:  # (NaN too)
            raise ValueError(f"thresholds[{name!r}] must be a number of at least 0, got {limit!r}")
        checked[name] = value
    return checked


def breaches(health: TableHealth, thresholds: dict[str, float]) -> list[str]:
    """One line per figure of `health` above its threshold (a list counts its items), naming
    the table, the figure, its value and what to do. Thresholds `check_thresholds` refuses
    raise ValueError."""
    lines = []
    checked = check_thresholds(thresholds)
    for name, limit in thresholds.items():
        value = getattr(health, name)
        figure = len(value) if isinstance(value, list) else value
        if isinstance(figure, (int, float)) and figure > checked[name]:
            shown = f"{figure}" + (f" ({', '.join(_names(value))})" if isinstance(value, list) and value else "")
            lines.append(f"table {health.table}: {name} is {shown}, above {limit}: "
                         f"{ADVICE.get(name, 'see airflow-lake doctor')}")
    return lines


def _names(items: list) -> list[str]:
    return [getattr(i, "instant", None) or str(i) for i in items[:5]] + (["..."] if len(items) > 5 else [])
