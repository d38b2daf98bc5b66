"""Secondary indexes created and dropped on an existing Hudi 1.x table, as Hudi's
`CREATE INDEX name ON table (column)` and `DROP INDEX name ON table` do (v8 spec §5.5c): a
build is the `indexing` action on the timeline; a drop removes the index's definition, its
listing and its metadata-table partition."""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Any

from ..errors import InvalidOptionError, LakeError, UnsupportedFeatureError, WriteConflictError
from ..index.record_index import is_partitioned
from ..index.secondary_index import PREFIX, SecondaryIndexDef, definitions, supported_type
from ..metadata_table import RECORD_INDEX, inflight_partitions, listed_partitions
from ..metadata_writer import maintained_partitions
from ..timeline import tokens
from ..timeline.instant import COMMIT_ACTIONS, COMPACTION, INDEXING
from ..txn.transaction import Transaction

log = logging.getLogger(__name__)


@dataclass
class IndexResult:
    """What CREATE INDEX did: the `indexing` instant, the index's MDT partition, its entries."""

    instant: str
    partition: str
    column: str
    entries: int


def partition_of(name: str) -> str:
    """The MDT partition of index `name` (given with or without `secondary_index_`)."""
    return name if name.startswith(PREFIX) else PREFIX + name


def _checked_partition(uri: str, name: Any) -> str:
    """The MDT partition of index `name`, refused unless the name is letters, digits and _."""
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9_]+", partition_of(name)[len(PREFIX):] or "-"):
        raise InvalidOptionError(f"table {uri}: index name {name!r} must be letters, digits and _")
    return partition_of(name)


def create_index(txn: Transaction, name: str, column: str, *,
                 extra_metadata: dict[str, str] | None = None) -> IndexResult:
    """Build secondary index `name` on `column` from the table's latest snapshot (refused,
    with nothing changed, on a table without the record index, on a column we cannot index,
    on a name taken, or while another write is in flight). A retry with the same run token
    returns the first call's build."""
    uri = txn.storage.uri
    partition = _checked_partition(uri, name)
    token = tokens.token_of(extra_metadata, f"table {uri}")
    with txn.start(token, (INDEXING,)) as (timeline, done):
        if done is not None:
            return IndexResult(done.time, partition, column, 0)
        cfg = txn.config
        if cfg.version < 8:
            raise UnsupportedFeatureError(f"table {uri}: secondary indexes need a Hudi 1.x table (version 8 or 9); "
                                          f"this one is version {cfg.version}")
        if RECORD_INDEX not in maintained_partitions(txn.storage, cfg.props):
            raise LakeError(f"table {uri}: index {partition}: a secondary index is resolved through the record index, "
                            "which this table has not: write once with hoodie.metadata.record.index.enable=true")
        if is_partitioned(txn.storage, cfg.props):
            # its cells `value$key` cannot tell one key's rows in two partitions apart: deleting
            # one would drop the other's cell, and reads would skip a matching row
            raise UnsupportedFeatureError(f"table {uri}: index {partition}: airflow-lake keeps secondary indexes "
                                          "with the global record index only, and this table's record index is "
                                          "partitioned (hoodie.metadata.record.level.index.enable); nothing was "
                                          "changed")
        defined = any(d.partition == partition for d in definitions(txn.storage, cfg.props, listed_only=False))
        building = partition in inflight_partitions(cfg.props)  # (a dead build's instant: undone by the repair)
        if partition in listed_partitions(cfg.props) or (defined and building):
            raise LakeError(f"table {uri}: index {partition} exists already (drop it first)")
        if defined:  # (neither listed nor being built: a build that died before its instant; built now)
            log.info("table %s: index %s is defined but was never built; building it", uri, partition)
        schema = txn.table_schema()
        if column not in schema.names or column.startswith("_hoodie_"):
            raise InvalidOptionError(f"table {uri}: index {partition}: no data column {column!r} (columns: "
                                     f"{[c for c in schema.names if not c.startswith('_hoodie_')]})")
        if not supported_type(schema.field(column).type):
            raise UnsupportedFeatureError(f"table {uri}: index {partition}: column {column!r} is "
                                          f"{schema.field(column).type}; secondary indexes are supported on strings, "
                                          "integers, booleans and dates")
        busy = [i.time for i in timeline.pending()
                if i.action in (*COMMIT_ACTIONS, COMPACTION) and not txn.is_expired(i.time)]
        if busy:
            raise WriteConflictError(f"table {uri}: index {partition}: writes are in flight ({', '.join(busy[:3])}); "
                                     "an index is built when none is (their files would miss it)")
        defn = SecondaryIndexDef(partition, column, "V2" if cfg.version >= 9 else "V1")
        instant, entries = txn.build_secondary_index(timeline, defn, token)
    return IndexResult(instant, partition, column, entries)


def drop_index(txn: Transaction, name: str) -> str:
    """Drop secondary index `name` (its definition, listing and MDT partition); returns its
    partition. Refused when the table has no such index."""
    partition = _checked_partition(txn.storage.uri, name)
    with txn.start(None) as _:
        cfg = txn.config
        known = {d.partition for d in definitions(txn.storage, cfg.props, listed_only=False)}
        if partition not in known and partition not in listed_partitions(cfg.props):
            raise LakeError(f"table {txn.storage.uri}: no secondary index {partition} (indexes: {sorted(known)})")
        txn.drop_secondary_index(partition)
    return partition


def list_indexes(txn: Transaction) -> list[dict]:
    """The table's secondary indexes: name, column, version, whether listed (readable) and kept."""
    cfg = txn.config
    listed, kept = listed_partitions(cfg.props), maintained_partitions(txn.storage, cfg.props)
    return [{"name": d.name, "partition": d.partition, "column": d.column, "version": d.version,
             "listed": d.partition in listed, "maintained": d.partition in kept}
            for d in definitions(txn.storage, cfg.props, listed_only=False)]
