"""`doctor`: what is wrong or stuck on a table, and what to do about it.

Shows the table's health figures (`core.health`; all of them under `--json`: "health") and
checks hoodie.properties (checksum, a leftover backup), the table lock, every pending instant
(is its writer alive: heartbeat), compaction plans waiting, what stops archival and what the
cleaner must keep, data files no completed instant references, and the archived timeline.
Exit code 0 when nothing is at `warn` or `error`, 3 otherwise (1 stays "the command failed").
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from typing import Any

import click

from ..core.clean_planner import savepointed_files
from ..core.config import ServiceOptions, TableOptions, WriteOptions
from ..core.errors import LakeError
from ..core.health import TableHealth, table_health
from ..core.index.record_index import RecordIndex, check_record_index, located_keys
from ..core.index.secondary_index import SecondaryIndex, scan_values
from ..core.index.secondary_index import check as check_secondary
from ..core.index.secondary_index import definitions as secondary_definitions
from ..core.lock import LOCK_PATH
from ..core.metadata_table import RECORD_INDEX, has_files_partition, listed_partitions, read_file_listing
from ..core.metadata_writer import how_to_rebuild, unmaintained_partitions
from ..core.model import BaseFile, LogFile
from ..core.properties import PROPERTIES, PROPERTIES_BACKUP, parse_properties, table_checksum
from ..core.read import Reader
from ..core.services import archive as archive_service
from ..core.storage import open_storage
from ..core.table import Table
from ..core.timeline.active import ActiveTimeline
from ..core.timeline.archived import ArchivedTimeline
from ..core.timeline.instant import CLEAN, COMMIT_ACTIONS, COMPACTION, RESTORE, ROLLBACK, SAVEPOINT, State
from ..core.timeline.payloads import CleanerPlan, CompactionPlan
from ..core.txn.heartbeat import is_expired, last_beat_ms
from ..core.view import FileSystemView, emptied_commits, list_partition_files, unreferenced_files
from ..core.vocabulary import KEEP_LATEST_COMMITS
from . import render
from .app import common, open_table, split_options

LEVELS = ("ok", "info", "warn", "error")
STUCK_PLAN_MS = 3_600_000  # a compaction plan waiting longer than this is worth a warning


@dataclass
class Finding:
    check: str
    level: str
    message: str
    advice: str = ""
    instant: str | None = None


def check_properties(path: str, storage_options: dict[str, Any]) -> list[Finding]:
    """hoodie.properties: present, checksum matches (CRC-32 of database.table), no backup left."""
    storage = open_storage(path, storage_options or None)
    found = []
    if not storage.exists(PROPERTIES):
        found.append(Finding("properties", "error", f"{PROPERTIES} is missing",
                             "restore it from hoodie.properties.backup if present, else from a copy"))
    else:
        props = parse_properties(storage.read(PROPERTIES).decode("latin-1"))
        given = props.get("hoodie.table.checksum")
        if "hoodie.table.name" not in props:
            found.append(Finding("properties", "error", "hoodie.table.name is missing from hoodie.properties"))
        elif given != table_checksum(props):
            found.append(Finding("properties", "error", f"hoodie.table.checksum is {given}, expected "
                                 f"{table_checksum(props)} for {props.get('hoodie.database.name', '')}."
                                 f"{props['hoodie.table.name']}",
                                 "the file was edited or torn: Hudi refuses it; restore the backup or fix the name"))
        else:
            found.append(Finding("properties", "ok", f"hoodie.properties checksum {given} matches"))
    if storage.exists(PROPERTIES_BACKUP):
        found.append(Finding("properties", "warn", "hoodie.properties.backup is left over (an update was "
                             "interrupted)", "the next properties update restores it; compare both files"))
    return found


def check_version(table: Table) -> list[Finding]:
    """The table version and layout, and whether airflow-lake writes it (`check_writable`)."""
    cfg = table.config
    what = f"table version {cfg.version} (timeline layout {cfg.timeline_layout}" + \
        (", Hudi 1.x)" if cfg.version >= 8 else ")")
    partitions = cfg.get(TableOptions.METADATA_PARTITIONS).strip()
    try:
        cfg.check_writable(table.storage.uri)
    except LakeError as e:
        why = str(e).split(": ", 1)[-1].removesuffix("; nothing was changed")
        return [Finding("version", "info", f"{what}: read, not written", why)]
    mdt = f"; metadata table: {partitions}" if partitions else "; no metadata table"
    return [Finding("version", "ok", f"{what}: read and written{mdt}")]


def check_metadata_table(table: Table, timeline: ActiveTimeline) -> list[Finding]:
    """A Hudi 1.x table whose readers list files through the metadata table: does its `files`
    partition list exactly the data files on storage? (A stale listing hides rows.)"""
    if table.config.version < 8:
        return []
    found = [Finding("metadata", "info", f"the first write or service switches off the metadata table's {p} "
                     "partition (airflow-lake keeps files, a global record_index, column_stats and "
                     "partition_stats current)",
                     f"Hudi rebuilds it with {how_to_rebuild(p)}")
             for p in unmaintained_partitions(table.storage, table.config.props)]
    if not has_files_partition(table.config.props):
        return found
    try:
        listing = read_file_listing(table.storage, timeline)
    except (LakeError, OSError, ValueError, KeyError, EOFError) as e:
        return found + [Finding("metadata", "error", f"the metadata table's files partition is unreadable ({e})",
                                "Hudi readers list files through it: restore .hoodie/metadata or rebuild it with Hudi")]
    on_disk = {p: {st.name for st in sts} for p, sts in list_partition_files(table.storage).items()}
    listed = {p: set(files) for p, files in listing.files.items()}
    pending = {i.time for i in timeline.pending()}
    unlisted = [(p, f) for p, names in on_disk.items() for f in names - listed.get(p, set())]
    # (a pending instant's files are listed when it completes; a dead writer's are rolled back)
    missing = sorted(f"{p}/{f}".lstrip("/") for p, f in unlisted if _writer(p, f) not in pending)
    waiting = len(unlisted) - len(missing)
    if waiting:
        found.append(Finding("metadata", "info", f"{waiting} data files of pending instants are not listed yet "
                             "(listed when their instant completes; a dead writer's are rolled back by the next "
                             "writer or service)"))
    gone = [(p, f) for p, names in listed.items() for f in names - on_disk.get(p, set())]
    # (a pending clean's deletions are unlisted when it completes: the next clean finishes it)
    cleaning = _pending_clean_files(timeline)
    extra = sorted(f"{p}/{f}".lstrip("/") for p, f in gone if (p, f) not in cleaning)
    if len(gone) > len(extra):
        found.append(Finding("metadata", "info", f"{len(gone) - len(extra)} files a pending clean deleted are still "
                             "listed (unlisted when the clean completes; the next clean finishes it)"))
    if not missing and not extra:
        count = sum(len(n) for n in on_disk.values()) - waiting
        found.append(Finding("metadata", "ok", f"the metadata table's files partition lists the {count} data "
                             "files on storage"))
    else:
        found.append(Finding("metadata", "warn", f"the metadata table's files partition misses {len(missing)} "
                             f"data files on storage ({', '.join(missing[:3])}) and lists {len(extra)} that are "
                             f"not there ({', '.join(extra[:3])})",
                             "Hudi 1.x readers and hudi-rs list files through it: rows of unlisted files are not "
                             "read"))
    return found + check_record_index_partition(table, timeline) + check_secondary_index_partitions(table, timeline)


def _pending_clean_files(timeline: ActiveTimeline) -> set[tuple[str, str]]:
    """(partition, file name) of every file a pending clean's plan deletes."""
    out: set[tuple[str, str]] = set()
    for instant in timeline.actions(CLEAN).pending():
        try:
            plan = CleanerPlan.from_bytes(timeline.read_details(instant.to(State.REQUESTED)))
        except (LakeError, OSError, ValueError, KeyError, TypeError, AttributeError):  # (the pending check says)
            continue
        for partition, paths in plan.files.items():
            out.update((partition, path.rsplit("/", 1)[-1]) for path in paths)
    return out


def _writer(partition: str, name: str) -> str | None:
    """The instant that wrote a data file of a Hudi 1.x table: a base file's, or the one a log
    file is named by."""
    base = BaseFile.parse(partition, name)
    if base is not None:
        return base.instant
    log = LogFile.parse(partition, name)
    return log.base_instant if log is not None else None


def check_secondary_index_partitions(table: Table, timeline: ActiveTimeline) -> list[Finding]:
    """Each listed secondary index: does it hold exactly one cell per live record (its value
    and key), in the file group its version names? (A stale one makes Hudi's equality
    queries miss rows.)"""
    found = []
    definitions = secondary_definitions(table.storage, table.config.props)
    if not definitions:
        return found
    schema = Reader(table).full_schema
    try:  # (one scan of the table for every index)
        rows = scan_values(table.context(), FileSystemView(table.storage, timeline),
                           [d.column for d in definitions if d.column in schema.names], schema, table.engine)
    except (LakeError, OSError, ValueError, KeyError, EOFError) as e:
        return [Finding("metadata", "error", f"the table's rows could not be scanned to check its secondary "
                        f"indexes ({e})", "fix what the other findings say, then run doctor again")]
    for defn in definitions:
        try:
            expected, missing, stray = check_secondary(SecondaryIndex.open(table.storage, defn, timeline), rows)
        except (LakeError, OSError, ValueError, KeyError, EOFError) as e:
            found.append(Finding("metadata", "error", f"secondary index {defn.partition} is unreadable ({e})",
                                 f"Hudi's queries on {defn.column} use it: drop and create it again "
                                 "(airflow-lake index drop / create)"))
            continue
        if not missing and not stray:
            found.append(Finding("metadata", "ok", f"secondary index {defn.partition} holds the {expected} cells of "
                                 f"the live records' {defn.column} values"))
        else:
            found.append(Finding("metadata", "warn", f"secondary index {defn.partition} is stale: {len(missing)} "
                                 f"cells missing ({', '.join(missing[:3])}), {len(stray)} no record implies "
                                 f"({', '.join(stray[:3])})",
                                 f"Hudi's queries on {defn.column} miss rows: drop and create it again "
                                 "(airflow-lake index drop / create)"))
    return found


def check_record_index_partition(table: Table, timeline: ActiveTimeline) -> list[Finding]:
    """A table with a record index (`record_index` listed): does it hold exactly the live keys,
    each at the file group that has it, in the index file group its hash names? (A key missing
    from it is written again by Hudi's upserts: a duplicate.)"""
    if RECORD_INDEX not in listed_partitions(table.config.props):
        return []
    try:
        check = check_record_index(RecordIndex.open(table.storage, table.config.props, timeline),
                                   located_keys(table.context(), timeline, table.engine))
    except (LakeError, OSError, ValueError, KeyError, EOFError) as e:
        return [Finding("metadata", "error", f"the record index is unreadable ({e})",
                        "Hudi's upserts route keys through it: rebuild it with Hudi "
                        f"({how_to_rebuild(RECORD_INDEX)})")]
    if check.ok:
        return [Finding("metadata", "ok", f"the record index locates each of the {check.keys} live keys in the "
                        "file group holding it")]
    parts = [f"{len(keys)} {what} ({', '.join(keys[:3])})" for what, keys in (
        ("live keys missing", check.missing), ("keys no row has", check.stale),
        ("keys in another file group", check.moved), ("keys in the wrong index file group", check.misplaced),
        ("keys live in several file groups of the table", check.duplicated)) if keys]
    return [Finding("metadata", "warn", f"the record index is stale: {'; '.join(parts)}",
                    "Hudi's upserts route keys through it (a missing key is inserted again: a duplicate); "
                    f"rebuild it with Hudi ({how_to_rebuild(RECORD_INDEX)})")]


def check_lock(table: Table) -> list[Finding]:
    status = table.storage.status(LOCK_PATH)
    if status is None:
        return [Finding("lock", "ok", "the table lock is free")]
    expire = table.option(WriteOptions.LOCK_EXPIRE_MINUTES) * 60_000
    held = time.time() * 1000 - status.mtime_ms
    try:
        owner = json.loads(table.storage.read(LOCK_PATH)).get("owner")
    except (OSError, ValueError):
        owner = "unknown"
    if expire > 0 and held > expire:
        return [Finding("lock", "warn", f"the table lock is held by {owner} for {render.age(status.mtime_ms)} "
                        f"(expiry {render.age(time.time() * 1000 - expire)})",
                        "its holder died; the next writer takes it over")]
    return [Finding("lock", "info", f"the table lock is held by {owner} since {render.age(status.mtime_ms)}")]


def check_pending(table: Table, timeline: ActiveTimeline, path: str) -> list[Finding]:
    """Every pending instant: whose it is, whether its writer beats, what to do."""
    interval = table.option(WriteOptions.HEARTBEAT_INTERVAL_MS)
    misses = table.option(WriteOptions.HEARTBEAT_TOLERABLE_MISSES)
    zone = "UTC" if table.config.timezone == "UTC" else "LOCAL"
    found = []
    for i in timeline.pending():
        since = render.instant_epoch_ms(i.time, zone)
        beat = last_beat_ms(table.storage, i.time)
        beat_text = f"last heartbeat {render.age(beat)} ago" if beat else "no heartbeat"
        label = f"{i.action} {i.time} ({i.state.name.lower()}, started {render.age(since)} ago)"
        if i.action in COMMIT_ACTIONS:
            if is_expired(table.storage, i.time, interval, misses):
                found.append(Finding("pending", "warn", f"{label}: its writer is dead ({beat_text})",
                                     f"the next write or service rolls it back; now: airflow-lake rollback {path} "
                                     f"{i.time}", i.time))
            else:
                found.append(Finding("pending", "info", f"{label}: its writer is alive ({beat_text})", "", i.time))
        elif i.action == COMPACTION:
            groups = len(CompactionPlan.from_bytes(timeline.read_details(i.to(State.REQUESTED))).operations)
            if i.state == State.REQUESTED:
                level = "warn" if time.time() * 1000 - since > STUCK_PLAN_MS else "info"
                found.append(Finding("compaction", level, f"compaction plan {i.time} of {groups} file groups is "
                                     f"waiting for an executor since {render.when(since)} ({render.age(since)})",
                                     f"airflow-lake compaction run {path} --instant {i.time}", i.time))
            elif is_expired(table.storage, i.time, interval, misses):
                found.append(Finding("compaction", "warn", f"{label}: its executor is dead ({beat_text})",
                                     f"airflow-lake compaction run {path} --instant {i.time} (rolls the attempt "
                                     "back, keeps the plan, runs it again)", i.time))
            else:
                found.append(Finding("compaction", "info", f"{label}: executing ({beat_text})", "", i.time))
        elif i.action in (CLEAN, ROLLBACK, RESTORE):
            found.append(Finding("pending", "warn", f"{label}: interrupted",
                                 f"the next {'clean' if i.action == CLEAN else 'write or service'} finishes it from "
                                 "its plan" + (f": airflow-lake clean {path}" if i.action == CLEAN else ""), i.time))
        else:
            found.append(Finding("pending", "info", label, "", i.time))
    if not found:
        found.append(Finding("pending", "ok", "no pending instants"))
    return found


def check_archival(table: Table, timeline: ActiveTimeline, path: str, min_commits: int | None = None,
                   max_commits: int | None = None) -> list[Finding]:
    """What stops archival; a warning when it is due (more than `max_commits` active commits,
    default the table's `hoodie.keep.max.commits`, as `archive` takes it) and stopped short."""
    if max_commits is None:
        max_commits = table.option(ServiceOptions.KEEP_MAX_COMMITS)
    if min_commits is None:
        min_commits = table.option(ServiceOptions.KEEP_MIN_COMMITS)
    commits = timeline.commits().completed().instants
    blockers = archive_service.blockers(table.context(), timeline)
    due = len(commits) > max_commits
    text = "; ".join(why for _, why in blockers)
    if not due:
        return [Finding("archival", "ok", f"{len(commits)} active commits (archival starts above {max_commits})"
                        + (f"; would stop at: {text}" if text else ""))]
    candidates = commits[: len(commits) - min_commits]
    bound = blockers[0][0] if blockers else None
    stuck = [c for c in candidates if bound is not None and c.time >= bound]
    if not stuck:
        return [Finding("archival", "info", f"{len(commits)} active commits: archival would move {len(candidates)}",
                        f"airflow-lake archive {path}")]
    return [Finding("archival", "warn", f"{len(commits)} active commits, {len(stuck)} of the {len(candidates)} due "
                    f"for archival are held by: {blockers[0][1]}", _unblock(blockers, path),
                    blockers[0][0])]


def _unblock(blockers: list[tuple[str, str]], path: str) -> str:
    """What releases the first archival blocker (its reason as `archive.blockers` words it)."""
    why = blockers[0][1]
    plan = next((w for _, w in blockers if w.startswith("pending compaction")), None)
    if plan is not None and (why == plan or "compaction scheduling" in why):
        why = plan
    if why.startswith("pending compaction"):
        return f"run the plan: airflow-lake compaction run {path} --instant {why.split()[2]}"
    if why.startswith("pending"):
        return f"let the write finish, or roll it back: airflow-lake rollback {path} {why.split()[2]}"
    if why.startswith("savepoint"):
        return (f"the savepoint keeps everything after it active; archival resumes once it is deleted: "
                f"airflow-lake savepoint delete {path} {why.split()[1]}")
    if "compaction scheduling" in why:
        return f"compact those delta commits: airflow-lake compaction schedule {path}, then compaction run"
    return f"clean, then archive again: airflow-lake clean {path}"


def check_cleaning(table: Table, timeline: ActiveTimeline, path: str) -> list[Finding]:
    """What the cleaner must keep, and what it would delete now with the default policy."""
    found = []
    protected = savepointed_files(timeline)
    for sp in timeline.actions(SAVEPOINT).completed():
        found.append(Finding("cleaning", "info", f"savepoint {sp.time} keeps its files from clean and archive "
                             f"({len(protected)} files protected by savepoints)", "", sp.time))
    for plan in timeline.actions(COMPACTION).pending():
        found.append(Finding("cleaning", "info", f"pending compaction {plan.time} keeps the slices it merges",
                             "", plan.time))
    pending = timeline.commits().pending().first
    if pending is not None:
        found.append(Finding("cleaning", "info", f"pending {pending.action} {pending.time} holds the retained window "
                             "back (the cleaner retains from it)", "", pending.time))
    bound = timeline.latest_clean_bound()
    plan = table.clean(policy=KEEP_LATEST_COMMITS, dry_run=True)
    retained = table.option(ServiceOptions.RETAINED[KEEP_LATEST_COMMITS])
    found.append(Finding("cleaning", "info" if plan.total_files else "ok",
                         f"a clean now (KEEP_LATEST_COMMITS, retained {retained}) would delete "
                         f"{plan.total_files} files" + (f"; the latest clean retains from {bound}" if bound else ""),
                         f"airflow-lake clean {path}" if plan.total_files else ""))
    return found


def check_files(table: Table, timeline: ActiveTimeline) -> list[Finding]:
    files = list_partition_files(table.storage)
    found = [Finding("files", "error", f"the commit file of {t} is empty: what it wrote is no longer listed (queries "
                     "still read its files)", f"restore the file from a backup; do not delete files of {t}", t)
             for t in emptied_commits(timeline)]
    found += [Finding("files", "warn", f"{o.path} ({render.size(o.size)}) is referenced by no completed instant: "
                      f"{o.reason}", "no query reads it; delete it once no writer of its instant runs", o.instant)
              for o in unreferenced_files(table.storage, timeline, table.config.archive_folder, files)]
    return found or [Finding("files", "ok", f"every data file ({sum(len(v) for v in files.values())}) is referenced "
                             "by a completed instant or being written by a pending one")]


def check_health(health: TableHealth) -> list[Finding]:
    """The table's health figures (`core.health`) in one line each: backlog, plans, archival."""
    h = health
    mdt = f"metadata table version {h.metadata_table_version} ({', '.join(h.metadata_partitions) or 'no partition'})" \
        if h.metadata_table_version else "no metadata table"
    age = f"{render.age(h.checked_at_ms - h.latest_commit_age_s * 1000)} ago" if h.latest_commit_age_s is not None \
        else "never"
    found = [Finding("health", "info", f"{h.table_type}, table version {h.table_version}, {mdt}; latest commit "
                     f"{h.latest_commit or '-'} ({age}); {h.active_commits} active commits, {h.archivable_commits} "
                     f"archivable now; a clean ({h.clean_policy}) would delete {h.clean_would_delete} files")]
    if h.table_type == "MERGE_ON_READ":
        found.append(Finding("health", "info", f"{h.delta_commits_since_compaction} delta commits since the latest "
                             f"compaction ({h.latest_compaction or 'none yet'}); {h.slices_with_logs} file slices "
                             f"hold {h.log_files} log files (at most {h.max_log_files_per_slice} in one, written by "
                             f"{h.max_delta_commits_per_slice} delta commits); {len(h.pending_compactions)} "
                             "compaction plans pending"))
    return found


def check_archive(table: Table, timeline: ActiveTimeline) -> list[Finding]:
    try:
        archived = ArchivedTimeline(table.storage, table.config.archive_folder)
    except LakeError as e:
        return [Finding("archive", "error", str(e), "readers of archived instants (time travel, run tokens) fail")]
    commits = [e.instant for e in archived.entries if e.instant.action in COMMIT_ACTIONS and e.instant.is_completed]
    if commits and not timeline.commits().completed().instants:
        # (readers count an archived commit's files as committed only before the first active commit)
        return [Finding("archive", "error", f"{len(commits)} commits are archived and none is left on the active "
                        "timeline: every reader (Java's, hudi-rs, ours) sees no row of the table",
                        "the archived commits' files count again once a commit follows them: any write brings "
                        "them back; until then reads return nothing")]
    if archived.corrupt_blocks:
        return [Finding("archive", "warn", f"{archived.corrupt_blocks} archived log blocks are unreadable",
                        "their instants are missing from the archived timeline")]
    return [Finding("archive", "ok", f"{len(archived.entries)} archived instant states readable")]


def _damaged(check: str, error: LakeError) -> Finding:
    return Finding(check, "error", str(error), "a file of the table (named above) cannot be read: restore it from a "
                   "backup, or roll back or remove the instant it belongs to; other checks were made")


@click.command("doctor")
@common
def doctor(path: str, options: dict, as_json: bool) -> None:
    """Diagnose the table at PATH: hoodie.properties checksum, lock, pending instants and
    whether their writers are alive, compaction plans waiting, what blocks archival and
    cleaning, files no completed instant references. Exit 3 when something needs action."""
    _, storage_opts = split_options(options)
    findings = check_properties(path, storage_opts)
    try:
        table = open_table(path, options)
    except LakeError as e:
        findings.append(Finding("open", "error", str(e)))
        table = None
    health = None
    if table is not None:
        timeline = table.timeline
        try:
            health = table_health(table)
        except LakeError as e:
            findings.append(_damaged("health", e))
        checks = [("version", check_version, (table,)), ("metadata", check_metadata_table, (table, timeline)),
                  ("lock", check_lock, (table,))] + ([("health", check_health, (health,))] if health else []) + [
            ("pending", check_pending, (table, timeline, path)), ("archival", check_archival, (table, timeline, path)),
            ("cleaning", check_cleaning, (table, timeline, path)), ("files", check_files, (table, timeline)),
            ("archive", check_archive, (table, timeline))]
        for name, check, args in checks:  # one that meets a damaged file reports it; the others still run
            try:
                findings += check(*args)
            except LakeError as e:
                findings.append(_damaged(name, e))
    worst = max((LEVELS.index(f.level) for f in findings), default=0)
    doc = {"table": path, "healthy": worst < LEVELS.index("warn"), "findings": [asdict(f) for f in findings],
           "health": health.as_dict() if health is not None else None}

    def human(out) -> None:
        style = {"ok": "green", "info": "blue", "warn": "yellow", "error": "red"}
        for f in findings:
            out.print(f"[{style[f.level]}]{f.level.upper():5}[/] {f.check:<11} {f.message}")
            if f.advice:
                out.print(f"{'':18}-> {f.advice}")
        out.print("healthy" if doc["healthy"] else "needs attention")

    render.emit(as_json, doc, human)
    if not doc["healthy"]:
        raise SystemExit(3)


COMMANDS = [doctor]
