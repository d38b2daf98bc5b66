"""Table services: `compaction schedule|run|show|list`, `clean`, `archive`, `rollback`,
`savepoint create|list|delete`, `restore`. Each runs on the local engine, or with `--spark` as its
Spark job through spark-submit (then the job's JSON result is the command's)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import click
from rich.console import Console

from ..core.errors import InstantNotFoundError
from ..core.services.compaction import no_pending_plan
from ..core.table import Table
from ..core.timeline.active import ActiveTimeline, Timeline
from ..core.timeline.instant import COMMIT, COMPACTION, SAVEPOINT, Instant, State, check_instant_time
from ..core.timeline.metadata import read_avro
from ..core.timeline.payloads import CompactionPlan, SavepointMetadata
from ..core.txn.heartbeat import last_beat_ms
from ..core.txn.undo import is_compaction
from ..core.vocabulary import CLEAN_POLICIES, COMPACTION_ORDERS, COMPACTION_TRIGGERS
from . import render
from .app import LakeGroup, common, open_table
from .spark import spark_options, submit


def _spark_or_local(use_spark: bool, job: str, path: str, args: list[str], options: dict[str, str],
                    master: str | None, conf: tuple[str, ...], local: Callable[[], dict],
                    fields: tuple[str, ...], from_job: Callable[[dict], dict] = dict) -> dict:
    """The command's result, `local()`'s or with --spark the job's (through `from_job`), with
    the same `fields` on both engines (the job's result line has more, the job frame's: they
    are left out)."""
    doc = from_job(submit(job, path, args, options, master=master, conf=conf)) if use_spark else local()
    return {"engine": "spark" if use_spark else "local", **{key: doc.get(key) for key in fields}}


# each command's result fields, the same on both engines
SCHEDULE_FIELDS = ("table", "instant", "scheduled", "reason", "file_groups")
RUN_FIELDS = ("table", "instant", "operations", "records_written", "log_records", "files", "already_done")
CLEAN_FIELDS = ("table", "instant", "policy", "dry_run", "earliest_instant_to_retain", "files_planned",
                "files_deleted", "files")
ARCHIVE_FIELDS = ("table", "archived", "archived_instants", "archive_file", "blocked_by", "merged_files",
                  "metadata_table_archived")
ROLLBACK_FIELDS = ("table", "instant", "rolled_back", "rolled_back_action", "files_deleted", "deleted")


def _flags(**values) -> list[str]:
    out: list[str] = []
    for key, value in values.items():
        if value is None or value is False:
            continue
        flag = "--" + key.replace("_", "-")
        out += [flag] if value is True else [flag, str(value)]
    return out


def _summary(doc: dict, headline: str) -> Callable[[Console], None]:
    """Print the headline, then the result's fields as key/value lines."""
    def human(out) -> None:
        out.print(headline)
        details = [(k.replace("_", " "), v) for k, v in doc.items()
                   if k not in ("table", "job") and v not in (None, [], {}, "")]
        out.print(render.pairs(None, [(k, "\n".join(map(str, v)) if isinstance(v, list) else v)
                                      for k, v in details]))
    return human


# -- compaction ----------------------------------------------------------------------------
@click.group("compaction", cls=LakeGroup)
def compaction_group() -> None:
    """MERGE_ON_READ compaction: schedule a plan, run it, inspect plans."""


@compaction_group.command("schedule")
@common
@spark_options
@click.option("--strategy", type=click.Choice(COMPACTION_TRIGGERS.names, case_sensitive=False),
              help="trigger (default hoodie.compact.inline.trigger.strategy, else NUM_COMMITS)")
@click.option("--max-delta-commits", type=int, help="delta commits that trigger it (default 5)")
@click.option("--max-delta-seconds", type=int, help="seconds that trigger it (default 3600)")
@click.option("--target-io-mb", type=int, help="IO budget of one plan")
def compaction_schedule(path: str, options: dict[str, str], as_json: bool, use_spark: bool,
                        master: str | None, spark_conf: tuple[str, ...], strategy: str | None,
                        max_delta_commits: int | None, max_delta_seconds: int | None, target_io_mb: int | None) -> None:
    """Write a compaction plan (`T.compaction.requested`) if the trigger holds; "not now" is
    an answer (no plan, and why), not an error."""
    def local() -> dict:
        d = open_table(path, options).plan_compaction(strategy=strategy, max_delta_commits=max_delta_commits,
                                                      max_delta_seconds=max_delta_seconds, target_io_mb=target_io_mb)
        return {"table": path, "instant": d.instant, "scheduled": d.instant is not None, "reason": d.reason,
                "file_groups": d.operations}

    doc = _spark_or_local(use_spark, "compaction_schedule", path,
                          _flags(strategy=strategy, max_delta_commits=max_delta_commits,
                                 max_delta_seconds=max_delta_seconds, target_io_mb=target_io_mb),
                          options, master, spark_conf, local, SCHEDULE_FIELDS)
    render.emit(as_json, doc, _summary(doc, f"scheduled compaction {doc['instant']} of {doc['file_groups']} file "
                                            "groups" if doc["instant"] else f"nothing scheduled: {doc['reason']}"))


@compaction_group.command("run")
@common
@spark_options
@click.option("--instant", help="the plan to run (default: the oldest pending, see --order)")
@click.option("--order", type=click.Choice(COMPACTION_ORDERS.names, case_sensitive=False), default="FIFO",
              show_default=True)
def compaction_run(path: str, options: dict[str, str], as_json: bool, use_spark: bool, master: str | None,
                   spark_conf: tuple[str, ...], instant: str | None, order: str) -> None:
    """Execute a pending compaction plan (merge each slice's base and log files into a new
    base file, `T.commit`); a progress bar counts the file groups."""
    def local() -> dict:
        r = open_table(path, options, progress="compacting file groups").run_compaction(instant, order=order.upper())
        return {"table": path, **dataclasses.asdict(r)}

    def from_job(doc: dict) -> dict:
        if doc.get("instant") is None:  # the job's "nothing to run" is the core's error
            raise no_pending_plan(path)
        return {**doc, "operations": doc.get("file_groups")}

    doc = _spark_or_local(use_spark, "compaction_execute", path, _flags(instant=instant, order=order.upper()),
                          options, master, spark_conf, local, RUN_FIELDS, from_job)
    render.emit(as_json, doc, _summary(doc, f"compaction {doc['instant']}: {doc.get('operations')} file groups, "
                                            f"{doc.get('records_written')} records written"
                                            + (" (already done)" if doc.get("already_done") else "")))


def plan_doc(table: Table, timeline: Timeline, instant: Instant) -> dict:
    """A compaction instant with its plan (operations, sizes) and, once done, its commit."""
    plan = CompactionPlan.from_bytes(timeline.read_details(Instant(instant.time, COMPACTION, State.REQUESTED)))
    ops = plan.operations
    zone = "UTC" if table.config.timezone == "UTC" else "LOCAL"
    return {
        "instant": instant.time, "state": instant.state.name,
        "waiting_for": render.age(render.instant_epoch_ms(instant.time, zone)) if instant.is_pending else None,
        "heartbeat_ms": last_beat_ms(table.storage, instant.time) if instant.state == State.INFLIGHT else None,
        "file_groups": len(ops),
        "log_files": sum(len(op.delta_files) for op in ops),
        "log_bytes": int(sum(op.log_files_size for op in ops)),
        "operations": [{"partition": op.partition, "file_id": op.file_id, "base_instant": op.base_instant,
                        "base_file": op.data_file, "log_files": list(op.delta_files), "metrics": dict(op.metrics)}
                       for op in ops],
        "extra_metadata": dict(plan.extra_metadata or {}),
    }


def _compactions(timeline: ActiveTimeline) -> list[Instant]:
    """Compaction instants (pending plans, and completed commits that were compactions)."""
    pending = list(timeline.actions(COMPACTION).pending())
    done = [i for i in timeline.actions(COMMIT).completed() if is_compaction(timeline, i.time)]
    return sorted(pending + done, key=lambda i: i.time)


@compaction_group.command("list")
@common
def compaction_list(path: str, options: dict[str, str], as_json: bool) -> None:
    """Compaction plans on the active timeline: pending (since when) and completed."""
    table = open_table(path, options)
    timeline = table.timeline
    plans = [plan_doc(table, timeline, i) for i in _compactions(timeline)]
    for p in plans:
        p.pop("operations")
    doc = {"table": table.storage.uri, "compactions": plans}
    render.emit(as_json, doc, lambda out: out.print(render.grid(
        f"{len(plans)} compactions", ["instant", "state", "waiting for", "file groups", "log files", "log size"],
        [(p["instant"], p["state"], p["waiting_for"] or "", p["file_groups"], p["log_files"],
          render.size(p["log_bytes"])) for p in plans], right=["file groups", "log files", "log size"])))


@compaction_group.command("show")
@common
@click.argument("instant")
def compaction_show(path: str, options: dict[str, str], as_json: bool, instant: str) -> None:
    """The plan of compaction INSTANT: the file slices it merges."""
    check_instant_time(instant)
    table = open_table(path, options)
    timeline = table.timeline
    found = next((i for i in _compactions(timeline) if i.time == instant), None)
    if found is None:
        raise InstantNotFoundError(f"table {table.storage.uri}: no compaction {instant} on the active timeline")
    doc = {"table": table.storage.uri, **plan_doc(table, timeline, found)}

    def human(out) -> None:
        out.print(f"compaction {instant} {doc['state']}: {doc['file_groups']} file groups, {doc['log_files']} log "
                  f"files ({render.size(doc['log_bytes'])})" + (f", waiting for {doc['waiting_for']}"
                                                                 if doc["waiting_for"] else ""))
        out.print(render.grid(None, ["partition", "file id", "base instant", "base file", "log files"],
                              [(o["partition"] or "(none)", o["file_id"], o["base_instant"], o["base_file"] or "-",
                                "\n".join(o["log_files"])) for o in doc["operations"]]))

    render.emit(as_json, doc, human)


# -- clean, archive, rollback --------------------------------------------------------------
@click.command("clean")
@common
@spark_options
@click.option("--policy", type=click.Choice(CLEAN_POLICIES.names, case_sensitive=False),
              help="what to keep (default hoodie.cleaner.policy, else KEEP_LATEST_COMMITS)")
@click.option("--retained", type=int, help="commits, file versions or hours to keep")
@click.option("--dry-run", is_flag=True, help="plan only: list what would be deleted")
def clean(path: str, options: dict[str, str], as_json: bool, use_spark: bool, master: str | None,
          spark_conf: tuple[str, ...], policy: str | None, retained: int | None, dry_run: bool) -> None:
    """Delete file slices outside the retained window (plan, delete, `T.clean`)."""
    def local() -> dict:
        table = open_table(path, options, progress="deleting files (partitions)")
        r = table.clean(policy=policy, retained=retained, dry_run=dry_run)
        return {"table": path, "instant": r.instant, "policy": r.policy, "dry_run": dry_run,
                "earliest_instant_to_retain": r.earliest_instant_to_retain, "files_planned": r.total_files,
                "files_deleted": 0 if dry_run else r.total_files, "files": r.files}

    doc = _spark_or_local(use_spark, "clean", path, _flags(policy=policy and policy.upper(), retained=retained,
                                                           dry_run=dry_run), options, master, spark_conf, local,
                          CLEAN_FIELDS)
    verb = "would delete" if dry_run else "deleted"

    def human(out) -> None:
        out.print(f"clean {doc.get('instant') or '(no instant)'}: {verb} {doc['files_planned']} files, retaining "
                  f"commits from {doc.get('earliest_instant_to_retain') or 'the start'} ({doc['policy']})")
        for partition, names in sorted((doc.get("files") or {}).items()):
            for name in names:
                out.print(f"  {partition}/{name}" if partition else f"  {name}")

    render.emit(as_json, doc, human)


@click.command("archive")
@common
@spark_options
@click.option("--min-commits", type=int, help="active commits to keep (default: hoodie.keep.min.commits, else 20)")
@click.option("--max-commits", type=int,
              help="archive once more are active (default: hoodie.keep.max.commits, else 30)")
@click.option("--batch", type=int, help="instants per archive log block (default: hoodie.commits.archival.batch, "
              "else 10)")
def archive(path: str, options: dict[str, str], as_json: bool, use_spark: bool, master: str | None,
            spark_conf: tuple[str, ...], min_commits: int | None, max_commits: int | None, batch: int | None) -> None:
    """Move the oldest completed instants to the archived timeline; says what stopped it."""
    def local() -> dict:
        r = open_table(path, options).archive(min_commits=min_commits, max_commits=max_commits, batch=batch)
        return {"table": path, "archived": len(r.archived), "archived_instants": r.archived,
                "archive_file": r.archive_file, "blocked_by": r.blocked_by, "merged_files": len(r.merged_files),
                "metadata_table_archived": len(r.metadata_table_archived)}

    doc = _spark_or_local(use_spark, "archive", path, _flags(min_commits=min_commits, max_commits=max_commits,
                                                             batch=batch), options, master, spark_conf, local,
                          ARCHIVE_FIELDS)
    render.emit(as_json, doc, _summary(doc, f"archived {doc['archived']} instants"
                                            + (f"; stopped by {doc['blocked_by']}" if doc.get("blocked_by") else "")))


@click.command("rollback")
@common
@spark_options
@click.argument("instant")
def rollback(path: str, options: dict[str, str], as_json: bool, use_spark: bool, master: str | None,
             spark_conf: tuple[str, ...], instant: str) -> None:
    """Roll back INSTANT: a pending write or compaction, or the latest completed write."""
    check_instant_time(instant)

    def local() -> dict:
        r = open_table(path, options).rollback(instant)
        return {"table": path, "instant": r.instant, "rolled_back": r.rolled_back,
                "rolled_back_action": r.action or None, "files_deleted": len(r.files_deleted),
                "deleted": r.files_deleted}

    doc = _spark_or_local(use_spark, "rollback", path, _flags(instant=instant), options, master, spark_conf, local,
                          ROLLBACK_FIELDS)
    render.emit(as_json, doc, _summary(doc, f"rolled back {doc.get('rolled_back_action') or ''} {instant} at "
                                            f"{doc['instant']}: {doc['files_deleted']} files deleted"))


# -- savepoints ----------------------------------------------------------------------------
@click.group("savepoint", cls=LakeGroup)
def savepoint_group() -> None:
    """Protect a commit's files from clean and archive; list and delete savepoints."""


@savepoint_group.command("create")
@common
@spark_options
@click.argument("instant")
@click.option("--user", help="recorded as savepointedBy (default: the OS user)")
@click.option("--comments", default="", help="recorded with the savepoint")
def savepoint_create(path: str, options: dict[str, str], as_json: bool, use_spark: bool, master: str | None,
                     spark_conf: tuple[str, ...], instant: str, user: str | None, comments: str) -> None:
    """Savepoint the completed commit INSTANT."""
    check_instant_time(instant)

    def local() -> dict:
        return {"table": path, "instant": open_table(path, options).savepoint(instant, user=user, comments=comments)}

    doc = _spark_or_local(use_spark, "savepoint", path, _flags(instant=instant, user=user, comments=comments or None),
                          options, master, spark_conf, local, ("table", "instant"))
    render.emit(as_json, doc, lambda out: out.print(f"savepoint {doc['instant']} created"))


@savepoint_group.command("delete")
@common
@click.argument("instant")
def savepoint_delete(path: str, options: dict[str, str], as_json: bool, instant: str) -> None:
    """Delete the savepoint INSTANT: clean and archive treat its commit like any other."""
    check_instant_time(instant)
    doc = {"table": path, "instant": open_table(path, options).delete_savepoint(instant)}
    render.emit(as_json, doc, lambda out: out.print(f"savepoint {doc['instant']} deleted"))


@savepoint_group.command("list")
@common
def savepoint_list(path: str, options: dict[str, str], as_json: bool) -> None:
    """Savepoints on the active timeline: who, when, how many files they protect."""
    table = open_table(path, options)
    timeline = table.timeline
    points = []
    for sp in timeline.actions(SAVEPOINT):
        meta = SavepointMetadata.from_avro((read_avro(timeline.read_details(sp)) or {}) if sp.is_completed else {})
        points.append({"instant": sp.time, "state": sp.state.name, "by": meta.user or None,
                       "at_ms": meta.at_ms or None, "comments": meta.comments, "partitions": len(meta.files),
                       "files": len(meta.file_names())})
    doc = {"table": table.storage.uri, "savepoints": points}
    render.emit(as_json, doc, lambda out: out.print(render.grid(
        f"{len(points)} savepoints", ["instant", "state", "by", "at", "files", "comments"],
        [(p["instant"], p["state"], p["by"] or "", render.when(p["at_ms"]), p["files"], p["comments"] or "")
         for p in points], right=["files"])))


@click.command("restore")
@common
@spark_options
@click.argument("instant")
def restore(path: str, options: dict[str, str], as_json: bool, use_spark: bool, master: str | None,
            spark_conf: tuple[str, ...], instant: str) -> None:
    """Roll the table back to the savepoint INSTANT (every later write, compaction and plan
    is undone)."""
    check_instant_time(instant)

    def local() -> dict:
        r = open_table(path, options).restore(instant)
        return {"table": path, "instant": r.instant, "savepoint": r.savepoint, "rolled_back": r.rolled_back}

    doc = _spark_or_local(use_spark, "restore", path, _flags(instant=instant), options, master, spark_conf, local,
                          ("table", "instant", "savepoint", "rolled_back"))
    render.emit(as_json, doc, _summary(doc, f"restored to savepoint {instant} at {doc['instant']}: "
                                            f"{len(doc['rolled_back'])} instants undone"))


COMMANDS = [compaction_group, clean, archive, rollback, savepoint_group, restore]
