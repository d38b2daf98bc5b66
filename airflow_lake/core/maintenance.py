"""Maintenance policies for many tables, and what is due on one of them now.

A `TablePolicy` says how a table is kept: its compaction trigger and how many pending plans a
run may execute, its clean policy and retention, its archival bounds, whether stale writes
are rolled back, its Spark settings and the health thresholds that fail its check.
`policies_from_config` reads them from a mapping (a parsed YAML file: `defaults` given to
every table, `tables` by name). `plan_maintenance` decides from a `TableHealth` alone what is
due; the table services themselves decide again when they run (a plan is made only if its
trigger still holds), so a stale decision does no harm.

The policy's settings reach the services as table options (`TablePolicy.service_options`), so
the health a decision reads is judged by the same trigger, clean policy and bounds the
services then run with.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any
from urllib.parse import urlsplit

from .config import ServiceOptions
from .errors import InvalidOptionError
from .health import TableHealth, breaches, check_thresholds
from .services.compaction import trigger_holds
from .timeline.instant import COMPACTION
from .vocabulary import CLEAN_POLICIES, COMPACTION_TRIGGERS, is_table_option

NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,199}")


@dataclass(frozen=True)
class CompactionPolicy:
    """When a plan is made (`trigger`, `max_delta_commits`, `max_delta_seconds`), how much it
    takes (`target_io_mb`), and how many pending plans one run executes (`max_plans`, oldest first)."""

    enabled: bool = True
    trigger: str = "NUM_COMMITS"
    max_delta_commits: int = 5
    max_delta_seconds: int = 3600
    target_io_mb: int | None = None
    max_plans: int = 4


@dataclass(frozen=True)
class CleanPolicy:
    enabled: bool = True
    policy: str = "KEEP_LATEST_COMMITS"
    retained: int | None = None  # None: the policy's default (10 commits, 3 versions, 24 hours)


@dataclass(frozen=True)
class ArchivePolicy:
    enabled: bool = True
    min_commits: int = 20
    max_commits: int = 30


@dataclass(frozen=True)
class TablePolicy:
    """How one table is maintained (the `tables` entries of a maintenance config)."""

    name: str
    path: str
    schedule: str | None = "@hourly"
    lake_conn_id: str | None = "lake_default"
    storage_options: dict[str, Any] = field(default_factory=dict)
    table_options: dict[str, Any] = field(default_factory=dict)
    rollback_stale: bool = True
    compaction: CompactionPolicy = CompactionPolicy()
    clean: CleanPolicy = CleanPolicy()
    archive: ArchivePolicy = ArchivePolicy()
    spark_conn_id: str = "spark_default"
    spark_conf: dict[str, Any] = field(default_factory=dict)
    spark_args: dict[str, Any] = field(default_factory=dict)
    thresholds: dict[str, float] = field(default_factory=dict)

    def service_options(self) -> dict[str, str]:
        """The table options the policy sets (over `table_options`): the compaction trigger,
        the clean policy and its retention, the archival bounds."""
        c, k, a = self.compaction, self.clean, self.archive
        options = {ServiceOptions.COMPACTION_TRIGGER.key: c.trigger,
                   ServiceOptions.MAX_DELTA_COMMITS.key: str(c.max_delta_commits),
                   ServiceOptions.MAX_DELTA_SECONDS.key: str(c.max_delta_seconds),
                   ServiceOptions.CLEAN_POLICY.key: k.policy,
                   ServiceOptions.KEEP_MIN_COMMITS.key: str(a.min_commits),
                   ServiceOptions.KEEP_MAX_COMMITS.key: str(a.max_commits)}
        if k.retained is not None:
            options[ServiceOptions.RETAINED[k.policy].key] = str(k.retained)
        return {**{key: str(v) for key, v in self.table_options.items()}, **options}

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Step:
    """One service's decision: due or not, and why."""

    due: bool
    reason: str


@dataclass(frozen=True)
class MaintenancePlan:
    """What is due on a table now, by its policy (`plan_maintenance`)."""

    table: str
    dry_run: bool
    rollback: list[str]  # stale writes (expired heartbeat), oldest first
    execute: list[str]  # pending compaction plans, oldest first
    schedule: Step  # a new compaction plan
    clean: Step
    archive: Step
    breaches: list[str]  # one line per health figure above its threshold

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def lines(self) -> list[str]:
        """The decisions as log lines ("would" in a dry run)."""
        verb = "would " if self.dry_run else ""
        out = [f"table {self.table}: {verb}roll back stale write {t}" for t in self.rollback]
        out += [f"table {self.table}: {verb}execute compaction plan {t}" for t in self.execute]
        for name, step in (("schedule a compaction", self.schedule), ("clean", self.clean),
                           ("archive", self.archive)):
            out.append(f"table {self.table}: {verb if step.due else 'no need to '}{name}: {step.reason}")
        return out


def plan_maintenance(health: TableHealth, policy: TablePolicy, *, dry_run: bool = False) -> MaintenancePlan:
    """What `policy` asks of the table whose health (read with `policy.service_options()`)
    is `health`: stale writes to roll back, pending plans to execute (oldest first, those whose
    executor is alive left alone, at most `max_plans`), whether a new plan, a clean and an
    archive are due, and the thresholds broken."""
    table = health.table
    rollback = [p.instant for p in health.pending if p.heartbeat_expired] if policy.rollback_stale else []
    c = policy.compaction
    mor = health.table_type == "MERGE_ON_READ"
    # a plan inflight with a live heartbeat is being executed by another task: leave it
    runnable = sorted(p.instant for p in health.pending_compactions
                      if p.action == COMPACTION and not (p.state == "INFLIGHT" and p.heartbeat_expired is False))
    execute = runnable[:c.max_plans] if c.enabled and mor else []
    if not mor:
        schedule = Step(False, "a COPY_ON_WRITE table has no log files to compact")
    elif not c.enabled:
        schedule = Step(False, "compaction is off in the policy")
    elif health.compaction_due:
        schedule = Step(True, f"trigger {health.compaction_trigger} holds: {_trigger_figures(health)}; "
                              f"{health.compactable_slices} file slices to compact")
    elif (execute and len(execute) == len(health.pending_compactions) and health.delta_commits_since_request
          and trigger_holds(c.trigger, health.delta_commits_since_request, health.seconds_since_request,
                            c.max_delta_commits, c.max_delta_seconds)):
        # every slice with log files waits in a plan this run executes first; once they are
        # compacted, the delta commits made after the newest plan count for the trigger
        schedule = Step(True, f"after the {len(execute)} pending plan(s) executed first, trigger {c.trigger} holds "
                              f"for the {health.delta_commits_since_request} delta commits made after them "
                              f"({health.seconds_since_request:.0f} s since the newest plan)")
    elif not health.compactable_slices:
        schedule = Step(False, "no file slice has log files outside a pending plan")
    else:
        schedule = Step(False, f"trigger {health.compaction_trigger} does not hold: {_trigger_figures(health)}")
    k = policy.clean
    clean = (Step(False, "cleaning is off in the policy") if not k.enabled
             else Step(True, f"{health.clean_would_delete} files outside the retained window ({health.clean_policy})")
             if health.clean_would_delete else Step(False, f"nothing to delete ({health.clean_policy})"))
    a = policy.archive
    archive = (Step(False, "archival is off in the policy") if not a.enabled
               else Step(True, f"{health.archivable_instants} instants can move, {health.archivable_commits} of "
                               f"{health.active_commits} active commits among them (keep {a.min_commits}-"
                               f"{a.max_commits})") if health.archivable_instants
               else Step(False, f"{health.active_commits} active commits (keep {a.min_commits}-{a.max_commits})"
                                + (f"; held back by {health.archival_blocked_by}" if health.archival_blocked_by
                                   else "")))
    return MaintenancePlan(table, dry_run, rollback, execute, schedule, clean, archive,
                           breaches(health, policy.thresholds))


def _trigger_figures(health: TableHealth) -> str:
    if health.compaction_trigger == "NUM_COMMITS_AFTER_LAST_REQUEST":
        return f"{health.delta_commits_since_request} delta commits, {health.seconds_since_request:.0f} s " \
               "since the latest compaction requested"
    return f"{health.delta_commits_since_compaction} delta commits, {health.seconds_since_compaction:.0f} s " \
           f"since {health.latest_compaction or 'the first delta commit'}"


# -- reading a config ------------------------------------------------------------------------------
_TOP = {"defaults", "tables", "pool", "dag_id_prefix", "start_date", "dry_run", "tags", "base_path"}
_SECTIONS = {"compaction": CompactionPolicy, "clean": CleanPolicy, "archive": ArchivePolicy}
_FLAT = {f for f in TablePolicy.__dataclass_fields__ if f not in _SECTIONS and f != "name"}
_MAPPINGS = ("storage_options", "table_options", "spark_conf", "spark_args", "thresholds")
_FLAT_MAPPINGS = ("storage_options", "table_options", "spark_conf")


def check_config(config: Mapping[str, Any], where: str) -> None:
    """The top-level keys of a maintenance config (`tables` required)."""
    if not isinstance(config, Mapping):
        raise InvalidOptionError(f"{where}: a maintenance config is a mapping with 'tables', got "
                                 f"{type(config).__name__}")
    unknown = sorted(set(config) - _TOP)
    if unknown:
        raise InvalidOptionError(f"{where}: unknown key(s) {unknown}; known: {sorted(_TOP)}")
    if not isinstance(config.get("tables"), Mapping) or not config["tables"]:
        raise InvalidOptionError(f"{where}: 'tables' must map table names to their policies (at least one)")
    if config.get("dry_run") is not None:
        _flag(config["dry_run"], f"{where}: dry_run")
    for key in ("pool", "dag_id_prefix", "base_path"):
        value = config.get(key)
        if value is not None and (not isinstance(value, str) or not value.strip()):
            raise InvalidOptionError(f"{where}: {key} must be a non-empty string, got {value!r}")
    prefix = config.get("dag_id_prefix")
    if prefix is not None and not NAME.fullmatch(prefix):
        raise InvalidOptionError(f"{where}: dag_id_prefix {prefix!r} must be letters, digits, '_', '.', '-' (it "
                                 "starts every table's DAG id)")
    tags = config.get("tags")
    if tags is not None and not isinstance(tags, str) and not (
            isinstance(tags, list) and all(isinstance(t, str) for t in tags)):
        raise InvalidOptionError(f"{where}: tags must be a string or a list of strings, got {tags!r}")


def policies_from_config(config: Mapping[str, Any], where: str = "maintenance config") -> list[TablePolicy]:
    """The tables' policies of a config: each table's entry over `defaults` (sections such as
    `compaction` merged key by key). Every mistake is an `InvalidOptionError` naming the table
    and the key."""
    check_config(config, where)
    defaults = config.get("defaults") or {}
    if not isinstance(defaults, Mapping):
        raise InvalidOptionError(f"{where}: 'defaults' must be a mapping, got {type(defaults).__name__}")
    policies = [table_policy(name, _merge(defaults, entry or {}, f"{where}: table {name!r}"), where)
                for name, entry in config["tables"].items()]
    seen: dict[str, str] = {}
    base = config.get("base_path")
    for p in policies:  # (one table, however its path is spelled: `/lake/t/`, `/lake/./t`, `file:///lake/t`)
        place = _place(p.path, base if isinstance(base, str) else None)
        if place in seen:
            raise InvalidOptionError(f"{where}: tables {seen[place]!r} and {p.name!r} have the same path {p.path} "
                                     "(two DAGs would maintain one table)")
        seen[place] = p.name
    return policies


def _place(path: str, base: str | None) -> str:
    """A table path in one spelling: a relative one under `base`, `file://` as a path, dots,
    doubled and trailing slashes gone, the scheme in lower case."""
    if "://" not in path and not path.startswith("/") and base:
        path = base.rstrip("/") + "/" + path
    if "://" not in path:
        return posixpath.normpath(path)
    parts = urlsplit(path)
    scheme = parts.scheme.lower()
    if scheme == "file":
        return posixpath.normpath(parts.path)
    return f"{scheme}://{parts.netloc}{posixpath.normpath(parts.path) if parts.path.strip('/') else ''}"


def _merge(defaults: Mapping[str, Any], entry: Any, where: str) -> dict[str, Any]:
    if not isinstance(entry, Mapping):
        raise InvalidOptionError(f"{where}: a table's policy is a mapping (path, compaction, clean, ...), got "
                                 f"{type(entry).__name__}")
    out = dict(defaults)
    for key, value in entry.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = {**out[key], **value}
        else:
            out[key] = value
    return out


def table_policy(name: str, doc: Mapping[str, Any], where: str = "maintenance config") -> TablePolicy:
    """One table's policy from its (merged) mapping."""
    here = f"{where}: table {name!r}"
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise InvalidOptionError(f"{where}: table name {name!r} must be letters, digits, '_', '.', '-' (it names "
                                 "the table's DAG)")
    unknown = sorted(set(doc) - _FLAT - set(_SECTIONS))
    if unknown:
        raise InvalidOptionError(f"{here}: unknown key(s) {unknown}; known: {sorted(_FLAT | set(_SECTIONS))}")
    path = doc.get("path")
    if not isinstance(path, str) or not path.strip():
        raise InvalidOptionError(f"{here}: 'path' (the table's path or URI) is required, got {path!r}")
    kwargs: dict[str, Any] = {"name": name, "path": path.strip()}
    for key in ("schedule", "lake_conn_id", "spark_conn_id"):
        if key in doc:
            value = doc[key]
            if value is not None and not isinstance(value, str):
                raise InvalidOptionError(f"{here}: {key} must be a string, got {value!r}")
            if key == "schedule" and value is not None and not _is_schedule(value):
                raise InvalidOptionError(f"{here}: schedule {value!r} is neither one of Airflow's presets "
                                         f"({', '.join(SCHEDULE_PRESETS)}) nor a cron expression (5 fields)")
            kwargs[key] = value
    if "rollback_stale" in doc:
        kwargs["rollback_stale"] = _flag(doc["rollback_stale"], f"{here}: rollback_stale")
    for key in _MAPPINGS:
        if key in doc and doc[key] is not None:
            if not isinstance(doc[key], Mapping) or not all(isinstance(k, str) for k in doc[key]):
                raise InvalidOptionError(f"{here}: {key} must be a mapping with string keys, got {doc[key]!r}")
            nested = next((k for k, v in doc[key].items() if isinstance(v, (Mapping, list))), None)
            if key in _FLAT_MAPPINGS and nested is not None:  # (key=value settings: a value is text or a number)
                raise InvalidOptionError(f"{here}: {key}.{nested} must be a single value, got {doc[key][nested]!r}")
            kwargs[key] = dict(doc[key])
    bad = next((k for k in kwargs.get("table_options", {}) if not is_table_option(k)), None)
    if bad is not None:  # (refused when the DAG file is read, not when a service is first due)
        raise InvalidOptionError(f"{here}: table_options key {bad!r} is not a hoodie.* or airflow_lake.* key "
                                 "(storage options go in storage_options)")
    bad = next((k for k in kwargs.get("storage_options", {}) if is_table_option(k)), None)
    if bad is not None:
        raise InvalidOptionError(f"{here}: storage_options key {bad!r} is a table option (it goes in table_options)")
    try:
        check_thresholds(kwargs.get("thresholds", {}))
    except ValueError as e:
        raise InvalidOptionError(f"{here}: thresholds: {e}") from None
    for key, cls in _SECTIONS.items():
        if key in doc:
            kwargs[key] = _section(cls, doc[key], f"{here}: {key}")
    policy = TablePolicy(**kwargs)
    if policy.archive.enabled and not 0 < policy.archive.min_commits < policy.archive.max_commits:
        raise InvalidOptionError(f"{here}: archive: min_commits ({policy.archive.min_commits}) must be at least 1 "
                                 f"and below max_commits ({policy.archive.max_commits})")
    k = policy.clean
    retained = k.retained if k.retained is not None else ServiceOptions.RETAINED[k.policy].default
    if policy.archive.enabled and k.enabled and k.policy == "KEEP_LATEST_COMMITS" and \
            policy.archive.min_commits <= retained:
        # Hudi's rule (a write config refusing it): archiving commits a clean retains would let an
        # incremental read that starts in the retained window miss instants
        raise InvalidOptionError(f"{here}: archive: min_commits ({policy.archive.min_commits}) must be above "
                                 f"clean.retained ({retained}): hoodie.keep.min.commits must exceed "
                                 "hoodie.cleaner.commits.retained")
    return policy


SCHEDULE_PRESETS = ("@once", "@continuous", "@hourly", "@daily", "@weekly", "@monthly", "@quarterly", "@yearly",
                    "@annually", "@midnight")
_CRON_FIELD = re.compile(r"^[0-9A-Za-z*/,?LW#-]+$")


def _is_schedule(value: str) -> bool:
    """Whether `value` can be a DAG's schedule: a preset, or five cron fields of cron's
    characters (Airflow takes a misspelt preset without a word, and the DAG never runs)."""
    text = value.strip()
    if text.startswith("@"):
        return text.lower() in SCHEDULE_PRESETS
    fields = text.split()
    if len(fields) != 5 or not all(_CRON_FIELD.match(f) for f in fields):
        return False
    try:  # (Airflow's cron parser, where installed: '61 25 * * *' has cron's characters but no time)
        from croniter import croniter
    except ImportError:
        return True
    return bool(croniter.is_valid(text))


def _section(cls, doc: Any, where: str):
    if isinstance(doc, bool):  # `clean: false`
        return cls(enabled=doc)
    if not isinstance(doc, Mapping):
        raise InvalidOptionError(f"{where}: must be a mapping or true/false, got {doc!r}")
    known = set(cls.__dataclass_fields__)
    unknown = sorted(set(doc) - known)
    if unknown:
        raise InvalidOptionError(f"{where}: unknown key(s) {unknown}; known: {sorted(known)}")
    kwargs: dict[str, Any] = {}
    for key, value in doc.items():
        if key == "enabled":
            kwargs[key] = _flag(value, f"{where}.enabled")
        elif key == "trigger":
            kwargs[key] = COMPACTION_TRIGGERS.parse(value, where, "trigger")
        elif key == "policy":
            kwargs[key] = CLEAN_POLICIES.parse(value, where, "policy")
        elif value is None and key in ("retained", "target_io_mb"):
            kwargs[key] = None
        else:
            if isinstance(value, bool) or not isinstance(value, int) or value < (0 if key == "max_delta_seconds"
                                                                                  else 1):
                raise InvalidOptionError(f"{where}: {key} must be a whole number of at least "
                                         f"{0 if key == 'max_delta_seconds' else 1}, got {value!r}")
            kwargs[key] = value
    return cls(**kwargs)


def _flag(value: Any, where: str) -> bool:
    if not isinstance(value, bool):
        raise InvalidOptionError(f"{where} must be true or false, got {value!r}")
    return value

