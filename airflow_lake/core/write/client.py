"""The write client: what a write asks of the transaction and the table, for the write
pipeline (`pipeline.py`, on every engine).

begin (under the lock: repair, the schema check, partition claims, the requested instant, the
heartbeat) -> inflight (the workload) -> commit (under the lock: conflict checks, the completed
instant; markers and heartbeat removed); and the rules both engines share: the action of an
operation, whether it looks keys up, the groups an overwrite replaces, the groups a
concurrent writer may not touch, the record size estimate, partition metadata files.
"""
from __future__ import annotations

import json
import logging
from collections.abc import Callable, Collection
from dataclasses import dataclass, field

from ..config import DEFAULT_PAYLOAD, WriteOptions, pyarrow_codec
from ..engine import Engine
from ..errors import InvalidOptionError
from ..formats.parquet import BloomSettings
from ..index import check_index_type
from ..metadata_writer import stats_columns, written_ranges
from ..model import WriteStat
from ..read import SliceRead, group_read
from ..schema import from_avro
from ..timeline import tokens
from ..timeline.active import ActiveTimeline
from ..timeline.instant import COMMIT, COMMIT_ACTIONS, COMPACTION, DELTA_COMMIT, REPLACE_COMMIT, Instant, State
from ..timeline.metadata import CommitMetadata, requested_replace_bytes, workload_metadata
from ..txn.conflicts import ConflictCheck, KeyClash
from ..txn.heartbeat import Heartbeat
from ..view import PARTITION_METAFILE, FileSystemView, list_partition_files
from ..vocabulary import LOOKUP_OPERATIONS, OVERWRITE_OPERATIONS
from .files import WriteContext
from .partitions import check_partition_nesting

log = logging.getLogger(__name__)

OPERATION_TYPES = {
    "insert": "INSERT", "upsert": "UPSERT", "bulk_insert": "BULK_INSERT", "delete": "DELETE",
    "insert_overwrite": "INSERT_OVERWRITE", "insert_overwrite_table": "INSERT_OVERWRITE_TABLE",
}
TOKEN_KEY = tokens.TOKEN_KEY


@dataclass
class WriteResult:
    """What one write did. `instant` is the commit's instant time."""

    instant: str
    operation: str
    num_inserts: int = 0
    num_updates: int = 0
    num_deletes: int = 0
    num_writes: int = 0
    files: list[str] = field(default_factory=list)
    replaced_file_groups: int = 0
    # how the index found stored keys, where the engine reports it (the Spark write: `file_groups`
    # the index could look in, `in_key_range` of incoming keys, `keys_read`: groups whose keys
    # were read after their bloom filter claimed some)
    index_stats: dict[str, int] = field(default_factory=dict)
    already_done: bool = False  # an earlier attempt with this run token committed it

    @property
    def partitions(self) -> list[str]:
        return sorted({f.rsplit("/", 1)[0] if "/" in f else "" for f in self.files})


class WriteClient:
    """Writes one batch to a table as one commit."""

    def __init__(self, table, engine: Engine):
        self.table = table
        self.storage = table.storage
        self.engine = engine
        self.txn = table.transaction()  # lock, instants, heartbeat, commit and abort of this write
        self._reader = None
        self.listed_partitions: dict[str, list] = {}  # (begin's listing: `partition_files`)

    def opt(self, option):
        return self.table.option(option)

    @property
    def where(self) -> str:
        return f"table {self.storage.uri}"

    # -- rules both pipelines share ------------------------------------------------------------
    def action(self, operation: str) -> str:
        """The timeline action of `operation`: a replacecommit for the overwrites, else a
        deltacommit on MERGE_ON_READ, a commit on COPY_ON_WRITE."""
        if operation in OVERWRITE_OPERATIONS:
            return REPLACE_COMMIT
        return DELTA_COMMIT if self.table.config.is_mor else COMMIT

    def looks_up(self, operation: str) -> bool:
        """Whether `operation` tags its rows with the index (an insert only when it drops duplicates)."""
        return operation in LOOKUP_OPERATIONS or (
            operation == "insert" and bool(self.opt(WriteOptions.INSERT_DROP_DUPLICATES)))

    @staticmethod
    def seen(timeline: ActiveTimeline) -> set[str]:
        """The instants a write started after: what appears later is concurrent (conflict checks)."""
        return set(timeline.completed().times) | {i.time for i in timeline.actions(COMPACTION)}

    @staticmethod
    def replaced_groups(view: FileSystemView, operation: str, parts: Collection[str]) -> dict[str, list[str]] | None:
        """The file groups an overwrite replaces (the table's, or those of the partitions it
        writes); None for other operations."""
        if operation == "insert_overwrite_table":
            return _group_ids(view.file_groups())
        if operation == "insert_overwrite":
            wanted = set(parts)
            return _group_ids(g for g in view.file_groups() if g.partition in wanted)
        return None

    def inflight(self, timeline: ActiveTimeline, requested: Instant, operation: str, inserts: dict[str, int],
                 updates: dict[tuple[str, str], tuple[str, int]]) -> Instant:
        """The inflight instant with the write's workload."""
        workload = workload_metadata(OPERATION_TYPES[operation], inserts, updates)
        return self.txn.inflight(timeline, requested, workload.to_bytes())

    @staticmethod
    def touched(groups, replaced: dict[str, list[str]] | None, *, bucket: bool) -> set[tuple[str, str]]:
        """The file groups a concurrent writer may not have changed meanwhile: every group this
        write updates or replaces (BUCKET: also the groups it creates, a bucket being one group)."""
        out = {(g.partition, g.file_id) for g in groups if bucket or g.kind != "insert"}
        return out | {(p, f) for p, ids in (replaced or {}).items() for f in ids}

    def reader(self, view: FileSystemView):
        """One Reader per write (merged slices for key lookups and ordering checks), on the
        write's timeline (no listing of its own)."""
        if self._reader is None:
            from ..read import Reader

            self._reader = Reader(self.table, self.engine, view.timeline)
        return self._reader

    # -- phases ----------------------------------------------------------------------------
    def begin(self, action: str, token: str | None,
              check: Callable[[ActiveTimeline], Collection[str] | None] | None = None,
              *, partitions: Collection[str] = ()) -> tuple[Instant, Heartbeat | None, ActiveTimeline]:
        """Under the lock: repair the timeline, `check` the write against it (e.g. the batch's
        schema against the table's: an error leaves no trace of this write), check that the
        `partitions` it creates nest with none of the table's, claim them (their partition
        metadata files, which that check of a concurrent writer finds), then create the
        requested instant (recording the run token). Returns the instant, its heartbeat and the
        timeline this write goes on with (the one listing of this step); when the token is
        already committed (or another attempt with it commits meanwhile: `Transaction.start`
        waits for it), that commit and no heartbeat."""
        with self.txn.start(token, COMMIT_ACTIONS) as (timeline, done):
            if done is not None:
                return done, None, timeline
            if check is not None:  # (it may say which partitions the write creates: found under the lock)
                found = check(timeline)
                partitions = partitions if found is None else found
            # pending writes' partitions included; the view of this write takes its listing
            self.listed_partitions = check_partition_nesting(self.storage, partitions)
            self.txn.drop_metadata_table()
            time_ = self.txn.new_instant_time(timeline)
            self.write_partition_metadata(time_, set(partitions))
            requested = self.txn.request(timeline, Instant(time_, action, State.REQUESTED),
                                         requested_replace_bytes() if action == REPLACE_COMMIT else b"", token=token)
            heartbeat = self.txn.beat(time_)
        return requested, heartbeat, timeline

    def partition_files(self, parts: Collection[str]) -> dict[str, list]:
        """The files of these partitions as `list_partition_files` gives them: from the listing
        `begin` made under the lock when it covers them (every partition this write creates is
        claimed there), else listed now."""
        listed = self.listed_partitions
        if not set(parts) <= set(listed):
            return list_partition_files(self.storage, parts)
        return {p: [f for f in listed[p] if not f.name.startswith(PARTITION_METAFILE)] for p in parts}

    def write_context(self, instant: str, avro_schema: dict) -> WriteContext:
        """What every file-group task of this commit shares."""
        cfg = self.table.config
        bloom = BloomSettings(self.opt(WriteOptions.BLOOM_NUM_ENTRIES), self.opt(WriteOptions.BLOOM_FPP),
                              self.opt(WriteOptions.BLOOM_FILTER_TYPE).upper(),
                              self.opt(WriteOptions.BLOOM_DYNAMIC_MAX_ENTRIES)) if cfg.populate_meta_fields else None
        arrow = from_avro(avro_schema)
        codec = pyarrow_codec(self.opt(WriteOptions.COMPRESSION))
        return WriteContext(self.storage, instant, avro_schema, arrow, bloom, codec, cfg.populate_meta_fields,
                            tuple(cfg.ordering_fields), cfg.payload_class == DEFAULT_PAYLOAD, self.table.keygen,
                            log_by_instant=cfg.timeline_layout == 2,
                            stats_columns=stats_columns(self.storage, cfg.props, arrow) if cfg.version >= 8 else None)

    def commit(self, timeline: ActiveTimeline, inflight: Instant, seen: set[str], operation: str,
               stats: list[WriteStat], extra: dict[str, str], avro_schema: dict, touched: set[tuple[str, str]],
               key_clash: KeyClash, replaced: dict[str, list[str]] | None,
               index_stats: list[WriteStat] | None = None) -> WriteResult:
        """The transaction's commit: under the lock, conflict checks against what appeared
        since `seen` (a clash rolls this write back), then the completed instant. `key_clash`
        finds a key this write inserts in the base files of a concurrent commit (asked only
        when one wrote base files). `index_stats`: the MDT index log files the write's tasks
        wrote (its MDT deltacommit commits them)."""
        metadata = CommitMetadata.from_stats(OPERATION_TYPES[operation], stats,
                                             {**extra, "schema": json.dumps(avro_schema)})
        if replaced is not None:
            metadata.partition_to_replace_file_ids = replaced
        conflicts = ConflictCheck(frozenset(seen), frozenset(touched), key_clash, self.index_type() == "BUCKET")
        self.txn.commit(timeline, inflight, metadata.to_bytes(), conflicts=conflicts, index_stats=index_stats or (),
                        column_ranges=written_ranges(stats))
        result = WriteResult(inflight.time, operation)
        _add_stats(result, stats)
        result.replaced_file_groups = sum(len(v) for v in (replaced or {}).values())
        return result

    def bucket_hash_fields(self) -> list[str]:
        """The fields the BUCKET index hashes (`hoodie.bucket.index.hash.field`, else the record key)."""
        value = self.opt(WriteOptions.BUCKET_HASH_FIELD) or ",".join(self.table.config.record_key_fields)
        return [f.strip() for f in value.split(",") if f.strip()]

    def index_type(self) -> str:
        return check_index_type(self.opt(WriteOptions.INDEX_TYPE), f"table {self.storage.uri}")

    def delete_check_read(self, view: FileSystemView, group) -> SliceRead | None:
        """MOR under DefaultHoodieRecordPayload: the read of a group's current keys and ordering
        values that its task drops older `_hoodie_is_deleted` rows by (a delete block entry
        removes a base record whatever its ordering value); None where no check applies."""
        cfg = self.table.config
        field = cfg.precombine_field
        if not field or cfg.payload_class != DEFAULT_PAYLOAD:
            return None
        return group_read(view, group)

    # -- helpers ---------------------------------------------------------------------------
    def record_size_estimate(self, timeline: ActiveTimeline) -> int:
        """Average bytes per record of the latest commit, else the configured estimate."""
        timeline = timeline.commits().completed()
        for instant in reversed(timeline.instants[-5:]):
            stats = timeline.commit_metadata(instant).stats()
            size = sum(s.total_write_bytes for s in stats)
            rows = sum(s.num_writes for s in stats)
            if rows > 0 and size > 0:
                return max(1, size // rows)
        return self.opt(WriteOptions.RECORD_SIZE_ESTIMATE)

    def write_partition_metadata(self, instant: str, partitions: set[str]) -> None:
        for partition in partitions:
            path = f"{partition}/{PARTITION_METAFILE}" if partition else PARTITION_METAFILE
            if self.storage.exists(path):
                continue
            depth = 0 if not partition else partition.count("/") + 1
            text = f"#partition metadata\n#{_java_date()}\ncommitTime={instant}\npartitionDepth={depth}\n"
            self.storage.create(path, text.encode())

    def stored_result(self, timeline: ActiveTimeline, instant: Instant, operation: str) -> WriteResult:
        """The result of the earlier attempt that committed `instant` (active or archived); a
        run token that committed another operation is an error (a token names one write)."""
        metadata = timeline.stored_commit_metadata(instant)
        stored = metadata.operation_type
        if stored not in ("UNKNOWN", OPERATION_TYPES[operation]):
            token = (metadata.extra_metadata or {}).get(tokens.TOKEN_KEY)
            raise InvalidOptionError(f"{self.where}: run token {token!r} already committed {instant.time}, an "
                                     f"operation {stored}; this write is {OPERATION_TYPES[operation]}: nothing "
                                     "was written (a run token names one write: give this one its own)")
        result = WriteResult(instant.time, operation, already_done=True)
        _add_stats(result, metadata.stats())
        return result


def _add_stats(result: WriteResult, stats: list[WriteStat]) -> None:
    for s in stats:
        result.num_inserts += s.num_inserts
        result.num_updates += s.num_update_writes
        result.num_deletes += s.num_deletes
        result.num_writes += s.num_writes
        if s.path:
            result.files.append(s.path)


def _group_ids(groups) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for g in groups:
        out.setdefault(g.partition, []).append(g.file_id)
    return out


def _java_date() -> str:
    from datetime import datetime, timezone

    return datetime.now(timezone.utc).strftime("%a %b %d %H:%M:%S UTC %Y")


