"""What each packaged job (`spark_jobs/<name>.py`) does, one function per job: a job file only
declares its flags and hands its parsed `JobRun` to its function here, which opens the table
on a `SparkEngine`, calls the core service and returns the job's JSON result.
"""

from __future__ import annotations

import os
from typing import Any

from airflow_lake.core.config import ServiceOptions
from airflow_lake.core.errors import InvalidOptionError, TableNotFoundError
from airflow_lake.core.services.compaction import check_merge_on_read
from airflow_lake.core.services.runs import (
    CLEAN,
    COMMIT,
    RESTORE,
    ROLLBACK,
    SAVEPOINT,
    plan_token,
    savepoint_exists,
    select_plan,
    token_done,
)
from airflow_lake.core.settings import check_table_settings
from airflow_lake.core.storage import open_storage
from airflow_lake.core.table import Table
from airflow_lake.core.write.client import WriteResult
from airflow_lake.spark.job import JobRun, log

MIN_COMMITS = ServiceOptions.KEEP_MIN_COMMITS
MAX_COMMITS = ServiceOptions.KEEP_MAX_COMMITS
SOURCE_FORMATS = ("parquet", "json", "csv", "orc", "avro", "sql", "table")


# -- archive -----------------------------------------------------------------------------------
def archive(run: JobRun) -> dict[str, Any]:
    """Archive the oldest completed instants (`--min-commits`, `--max-commits`, `--batch`,
    defaulting to the table's `hoodie.keep.*` options)."""
    a = run.args
    table = run.open_table()
    log.info("archive: selecting instants (keep %s, archive beyond %s)",  # (the table checks the values)
             f"the table's {MIN_COMMITS.key}" if a.min_commits is None else a.min_commits,
             f"the table's {MAX_COMMITS.key}" if a.max_commits is None else a.max_commits)
    result = table.archive(min_commits=a.min_commits, max_commits=a.max_commits, batch=a.batch,
                           extra_metadata=run.extra_metadata)
    log.info("archive: archived %d instants%s", len(result.archived),
             f"; stopped by {result.blocked_by}" if result.blocked_by else "")
    return run.result(instant=None, action=None, operation="archive", archived=len(result.archived),
                      archived_instants=result.archived, archive_file=result.archive_file,
                      blocked_by=result.blocked_by, merged_files=len(result.merged_files),
                      metadata_table_archived=len(result.metadata_table_archived), already_done=result.already_done)


# -- clean -------------------------------------------------------------------------------------
def clean(run: JobRun) -> dict[str, Any]:
    """Clean by `--policy` (default the table's `hoodie.cleaner.policy`), `--retained`, `--dry-run`."""
    a = run.args
    table = run.open_table()
    log.info("clean: %s (%s, retained %s)", "planning (dry run)" if a.dry_run else "cleaning",
             a.policy or "the table's policy", a.retained if a.retained is not None else "from the table's options")
    result = table.clean(policy=a.policy, retained=a.retained, dry_run=a.dry_run, extra_metadata=run.extra_metadata)
    files = result.total_files
    log.info("clean: %s %d files in %d partitions", "would delete" if a.dry_run else "deleted", files,
             len(result.files))
    return run.result(instant=result.instant, action=CLEAN if result.instant else None, operation="clean",
                      policy=result.policy, earliest_instant_to_retain=result.earliest_instant_to_retain,
                      dry_run=a.dry_run, files_planned=files, files_deleted=0 if a.dry_run else files,
                      partitions=len(result.files), files=result.files, already_done=result.already_done)


# -- compaction --------------------------------------------------------------------------------
def compaction_schedule(run: JobRun) -> dict[str, Any]:
    """Plan a compaction if the trigger holds (`--strategy`, `--max-delta-commits`,
    `--max-delta-seconds`, `--target-io-mb`); "not now" is `instant` null and the reason."""
    a = run.args
    table = run.open_table()
    done = token_done(table, run.token, COMMIT, pending=True)
    log.info("compaction_schedule: planning (strategy %s)", a.strategy or "from the table's options")
    decision = table.plan_compaction(strategy=a.strategy, max_delta_commits=a.max_delta_commits,
                                     max_delta_seconds=a.max_delta_seconds, target_io_mb=a.target_io_mb,
                                     extra_metadata=run.extra_metadata)
    log.info("compaction_schedule: %s", f"planned {decision.instant} ({decision.operations} file groups)"
             if decision.instant else f"nothing planned: {decision.reason}")
    return run.result(instant=decision.instant, action="compaction" if decision.instant else None,
                      operation="compaction_schedule", scheduled=decision.instant is not None,
                      reason=decision.reason, file_groups=decision.operations, already_done=bool(done))


def compaction_execute(run: JobRun) -> dict[str, Any]:
    """Execute `--instant`, or up to `--max-plans` pending plans in `--order` (`select_plan`)."""
    a = run.args
    table = run.open_table()
    check_merge_on_read(table.config, table.storage.uri)  # (refused as on the local engine, plan or none)
    results = []
    for n in range(1 if a.instant else a.max_plans):
        extra = plan_token(run.token, n)
        target = select_plan(table, instant=a.instant, order=a.order, extra=extra,
                             first_already_done=bool(results and results[0].already_done))
        if target is None:
            break
        run.instant = target
        log.info("compaction_execute: plan %s", target)
        result = table.run_compaction(target, extra_metadata=extra)
        log.info("compaction_execute: %s %s: %d file groups, %d files written",
                 "found done" if result.already_done else "completed", result.instant, result.operations,
                 len(result.files))
        results.append(result)
    if not results:
        log.info("compaction_execute: no pending compaction plan")
        return run.result(instant=None, action=None, operation="compact", reason="no pending compaction plan",
                          plans=[], file_groups=0, records_written=0, log_records=0, already_done=False)
    first = results[0]
    return run.result(
        instant=first.instant, action=COMMIT, operation="compact", files_written=sum(len(r.files) for r in results),
        plans=[r.instant for r in results], file_groups=sum(r.operations for r in results),
        records_written=sum(r.records_written for r in results), log_records=sum(r.log_records for r in results),
        files=[f for r in results for f in r.files], already_done=all(r.already_done for r in results),
        completed_elsewhere=all(r.completed_elsewhere for r in results))


# -- rollback, savepoint, restore ----------------------------------------------------------------
def rollback(run: JobRun) -> dict[str, Any]:
    """Roll back `--instant`."""
    a = run.args
    table = run.open_table()
    log.info("rollback: rolling back %s", a.instant)
    result = table.rollback(a.instant, extra_metadata=run.extra_metadata)
    log.info("rollback: %s rolled back %s, %d files deleted", result.instant, result.rolled_back,
             len(result.files_deleted))
    return run.result(instant=result.instant, action=ROLLBACK, operation="rollback", rolled_back=result.rolled_back,
                      rolled_back_action=result.action or None, files_deleted=len(result.files_deleted),
                      deleted=result.files_deleted, already_done=result.already_done)


def savepoint(run: JobRun) -> dict[str, Any]:
    """Savepoint `--instant` (`--user`, `--comments`)."""
    a = run.args
    table = run.open_table()
    done = savepoint_exists(table, a.instant)
    log.info("savepoint: savepointing %s", a.instant)
    instant = table.savepoint(a.instant, user=a.user, comments=a.comments, extra_metadata=run.extra_metadata)
    return run.result(instant=instant, action=SAVEPOINT, operation="savepoint", already_done=done)


def restore(run: JobRun) -> dict[str, Any]:
    """Restore to the savepoint `--instant`."""
    a = run.args
    table = run.open_table()
    done = token_done(table, run.token, RESTORE)
    log.info("restore: restoring to savepoint %s", a.instant)
    result = table.restore(a.instant, extra_metadata=run.extra_metadata)
    log.info("restore: %s undid %d instants", result.instant, len(result.rolled_back))
    return run.result(instant=result.instant, action=RESTORE, operation="restore", savepoint=result.savepoint,
                      rolled_back=result.rolled_back, already_done=done)


# -- upsert --------------------------------------------------------------------------------------
def source_format(source: str, given: str | None) -> str:
    """`given`, else the format of the source's file extension, else parquet."""
    if given:
        return given
    ext = os.path.splitext(source.rstrip("/"))[1].lower().lstrip(".")
    return {"jsonl": "json", "ndjson": "json"}.get(ext, ext if ext in SOURCE_FORMATS else "parquet")


def upsert(run: JobRun) -> dict[str, Any]:
    """Write `--source` to the table with `--operation` (creating it with `--create-if-missing`)."""
    from airflow_lake.spark.session import interpret_small_input
    from airflow_lake.spark.sources import read_source
    from airflow_lake.spark.startup import source_bytes

    a = run.args
    spark = run.start_session()
    fmt = source_format(a.source, a.source_format)
    size = source_bytes(a.source, fmt, run.storage_options, unlisted=None)
    if interpret_small_input(spark, size):
        log.info("upsert: a source of %d bytes: Spark SQL interprets its expressions "
                 "(no whole-stage code generation)", size)
    created = False
    source = None
    if a.create_if_missing and not open_storage(a.table, run.storage_options).exists(".hoodie/hoodie.properties"):
        # a new table: the source is read (its files found, its schema taken) before the table
        # is created, so that a source that cannot be read leaves no empty table behind
        source = read_source(spark, a.source, fmt, storage_options=run.storage_options,
                             reader_options=dict(a.source_option), schema=a.source_schema, where=f"table {a.table}")
    settings = {"name": a.table_name, "table_type": a.table_type, "record_key": a.record_key,
                "precombine_field": a.precombine_field, "partition_fields": a.partition_fields,
                "hive_style_partitioning": a.hive_style_partitioning or None}
    if a.create_if_missing:
        try:  # an existing table must have the settings given; a new one is created from them
            new, created = Table.open_or_create(a.table, **settings, options=run.table_options,
                                                storage_options=run.storage_options)
        except TableNotFoundError:
            if a.record_key:
                raise
            raise InvalidOptionError(f"table {a.table}: --create-if-missing needs --record-key") from None
        if created:
            log.info("upsert: created %s table %s (%s)", new.config.table_type, a.table, new.config.name)
    table = run.open_table()
    check_table_settings(table.storage.uri, table.config, **settings)
    log.info("upsert: %s of %s source %s", a.operation, fmt, a.source)
    df = source if source is not None and not len(table.schema()) else read_source(
        spark, a.source, fmt, storage_options=run.storage_options, reader_options=dict(a.source_option),
        schema=a.source_schema, table_schema=table.schema(), where=f"table {table.storage.uri}")
    result = table.write(df, operation=a.operation, extra_metadata=run.extra_metadata)  # on the table's SparkEngine
    log.info("upsert: %s %s: %d inserts, %d updates, %d deletes in %d files", a.operation, result.instant,
             result.num_inserts, result.num_updates, result.num_deletes, len(result.files))
    return run.result(action=table.timeline.get(result.instant).action, operation=a.operation,
                      **write_counts(result), table_created=created)


def write_counts(result: WriteResult) -> dict[str, Any]:
    """The result line's account of one write: its instant and counts, with the file groups
    an insert_overwrite(_table) replaced (an overwrite by an empty source writes no record yet
    changes the table)."""
    return {"instant": result.instant, "inserts": result.num_inserts, "updates": result.num_updates,
            "deletes": result.num_deletes, "files_written": len(result.files), "records_written": result.num_writes,
            "replaced_file_groups": result.replaced_file_groups, "partitions": len(result.partitions),
            "already_done": result.already_done}
