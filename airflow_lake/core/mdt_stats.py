"""Column and partition stats in the metadata table (v8 spec §5.5a, §5.5b), written: the
records of one data-table action (each written file's statistics, tombstones of the files it
deleted, the written partitions' loose bounds), their log files, and a build from the latest
file slices. (The records' codec is `index.column_stats`.)"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass, replace

import fastavro
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from .config import TableConfig
from .formats.hfile import write_hfile
from .formats.log import DataBlock, encode_block, read_log_file
from .formats.log.framing import BlockType, HeaderKey
from .index.column_stats import (
    COLUMN_STATS,
    PARTITION_STATS,
    ColumnRange,
    column_stats_key,
    index_version,
    merge_ranges,
    partition_stats_key,
    ranges_of_parquet,
    ranges_of_records,
    stats_datum,
    tombstone,
)
from .index.record_index import file_group_index
from .mdt_files import INDEX_DEFS_PATH, empty_delete, index_base_hfile, jackson_pretty, partition_metafile, without_meta
from .metadata_table import INDEX_DEFS, MDT, parsed_schema
from .model import WriteStat
from .schema import META_FIELDS
from .storage import Storage
from .timeline.metadata import CommitMetadata
from .view import FileSystemView


@dataclass
class StatsLayout:
    """What encoding a table's stats records needs: the index version and each column's type."""

    version: str
    types: dict[str, pa.DataType]

    @classmethod
    def of(cls, storage: Storage, props: dict[str, str], schema: pa.Schema) -> StatsLayout:
        return cls(index_version(storage, props), {f.name: f.type for f in schema} |
                   {name: pa.string() for name in META_FIELDS})


def stats_groups(storage: Storage, partition: str) -> list[str]:
    """The file group ids of an MDT stats partition (fixed at initialisation; log-only ones
    count), in order."""
    names = {st.name for st in storage.list(f"{MDT}/{partition}")}
    ids = {n.lstrip(".").split("_")[0] for n in names if n.endswith(".hfile") or ".log." in n}
    return sorted(ids)


def stats_cells(keys_and_ranges: list[tuple[str, ColumnRange]], layout: StatsLayout, schema_text: str,
                partition_stats: bool, file_name: str | None = None) -> list[tuple[bytes, bytes]]:
    """HFile cells (sorted) of stats records: key -> the `HoodieMetadataRecord` datum."""
    schema = parsed_schema(schema_text)
    cells = []
    for key, r in keys_and_ranges:
        datum = stats_datum(r, layout.types.get(r.column), layout.version, partition_stats=partition_stats,
                            file_name_field=file_name)
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, schema, datum)
        cells.append((key.encode(), buf.getvalue()))
    return sorted(cells)


def stats_log_files(storage: Storage, instant: str, schema_text: str, partition: str,
                    records: list[tuple[str, ColumnRange]], layout: StatsLayout) -> list[tuple[str, bytes, WriteStat]]:
    """The log files of an MDT deltacommit at `instant` holding `records` (key, range) of stats
    `partition`: one HFILE_DATA block per file group their keys hash to (§5.5a)."""
    groups = stats_groups(storage, partition)
    if not groups or not records:
        return []
    where = file_group_index(pa.array([k for k, _ in records], pa.string()), len(groups))
    out = []
    for k in sorted(set(where.tolist())):
        cells = stats_cells([records[i] for i in np.flatnonzero(where == k)], layout, schema_text,
                            partition == PARTITION_STATS)
        header = {HeaderKey.SCHEMA: schema_text, HeaderKey.INSTANT_TIME: instant}
        block = encode_block(BlockType.HFILE_DATA, header, write_hfile(cells, {b"schema": schema_text.encode()}))
        name = f".{groups[k]}_{instant}.log.1_{k}-{int(instant[-9:])}-{k}"
        stat = WriteStat(groups[k], partition, f"{partition}/{name}", instant, num_writes=len(cells),
                         num_update_writes=len(cells), total_write_bytes=len(block), file_size=len(block),
                         delta={"logVersion": 1, "logOffset": 0, "baseFile": "", "logFiles": [name]})
        out.append((f"{MDT}/{partition}/{name}", block, stat))
    return out


def column_stats_records(deleted: dict[str, list[str]], ranges: dict[tuple[str, str], tuple], columns: tuple[str, ...],
                         ) -> list[tuple[str, ColumnRange]]:
    """The column_stats records of one data-table action: each written file's statistics
    (once), a tombstone per column of each file it deleted (a clean, a rollback)."""
    records = [(column_stats_key(r.column, partition, name), r) for (partition, name), rs in sorted(ranges.items())
               for r in rs]
    for partition, names in sorted(deleted.items()):
        records += [(column_stats_key(c, partition, name), tombstone(name, c)) for name in names for c in columns]
    return records


def partition_stats_records(partitions: list[str], new: list[tuple[str, ColumnRange]], columns: tuple[str, ...], *,
                            tight: bool = False) -> list[tuple[str, ColumnRange]]:
    """The partition stats records of `partitions` per column (§5.5b) from the column stats
    records `new` of their files: merged (min of the mins, max of the maxes, counts summed). A
    write's are not tight bounds: readers widen the partition's record by them, whatever order
    concurrent writers commit in (a loose bound, never a wrong one); a build's (`tight`, of
    every file) replace it."""
    by_prefix: dict[str, ColumnRange] = {}
    for key, r in new:
        if not r.is_deleted:
            prefix = key[:24]  # (column, partition): the key's first two hashes
            by_prefix[prefix] = r if prefix not in by_prefix else merge_ranges(by_prefix[prefix], r)
    out = []
    for partition in partitions:
        for column in columns:
            merged = by_prefix.get(column_stats_key(column, partition, "")[:24])
            if merged is not None:
                out.append((partition_stats_key(column, partition),
                            replace(merged, file_name=partition, is_tight_bound=tight, is_deleted=False)))
    return out


STATS_GROUP_PREFIX = {COLUMN_STATS: "col-stats-", PARTITION_STATS: "partition-stats-"}


ALWAYS_INDEXED = ("_hoodie_commit_time", "_hoodie_partition_path", "_hoodie_record_key")  # (Java's)


def chosen_stats_columns(schema: pa.Schema, listed: str, most: int) -> list[str]:
    """The columns a new column stats index covers (Java's choice): `listed` (comma
    separated), else the first `most` top-level scalar columns; with the record key,
    partition path and commit time meta fields first."""
    scalars = [f.name for f in schema if not pa.types.is_nested(f.type) and f.name not in META_FIELDS]
    chosen = [c.strip() for c in listed.split(",") if c.strip()] if listed.strip() else scalars[:most]
    unknown = [c for c in chosen if c not in scalars]
    if unknown:
        raise ValueError(f"no top-level scalar column {unknown[0]!r} to index (columns: {scalars})")
    return list(ALWAYS_INDEXED) + [c for c in chosen if c not in ALWAYS_INDEXED]


def define_column_stats(storage: Storage, config: TableConfig, columns: list[str]) -> None:
    """The `column_stats` entry of `index.json` as Hudi writes it (version V2 on v9 tables, none
    on v8); the caller saves the properties."""
    path = config.props.get(INDEX_DEFS) or INDEX_DEFS_PATH
    doc = json.loads(storage.read(path)) if storage.exists(path) else {"indexDefinitions": {}}
    entry = {"indexName": COLUMN_STATS, "indexType": COLUMN_STATS, "indexFunction": COLUMN_STATS,
             "sourceFields": columns, "indexOptions": {}}
    if config.version >= 9:
        entry["version"] = "V2"
    doc.setdefault("indexDefinitions", {})[COLUMN_STATS] = entry
    storage.write(path, jackson_pretty(doc).encode())
    config.props[INDEX_DEFS] = path


def file_stats_records(storage: Storage, view: FileSystemView, columns: list[str],
                       ) -> dict[str, tuple[str, ColumnRange]]:
    """The column stats records (key -> (partition, range)) of every file of `view`'s latest
    file slices: a base file's from its footer, a log file's from the records of its data
    blocks (a scan on the driver: a build)."""
    out: dict[str, tuple[str, ColumnRange]] = {}
    for group in view.file_groups():
        base, logs = view.read_slice(group)
        ranges: list[ColumnRange] = []
        if base is not None:
            with storage.open_input(base.path) as f:
                ranges += ranges_of_parquet(pq.read_metadata(f), base.name, columns)
        for lf in logs:
            blocks = [b for b in read_log_file(storage.read(lf.path), f"{storage.uri}/{lf.path}")
                      if isinstance(b, DataBlock)]
            records = pa.concat_tables([b.records() for b in blocks], promote_options="default") if blocks \
                else pa.table({c: pa.array([], pa.string()) for c in columns})
            ranges += ranges_of_records(records, lf.name, columns)
        for r in ranges:
            out[column_stats_key(r.column, group.partition, r.file_name)] = (group.partition, r)
    return out


def init_stats(instant: str, partition: str, records: list[tuple[str, ColumnRange]], groups: int,
               layout: StatsLayout, schema_text: str) -> tuple[dict[str, bytes], CommitMetadata]:
    """The files of a stats partition's initialisation at `instant` (relative to the table):
    per file group a base HFile of the records its keys hash to and the empty DELETE log Java
    starts a partition with; and the initialisation's commit metadata."""
    where = file_group_index(pa.array([k for k, _ in records], pa.string()), groups) if records \
        else np.zeros(0, np.int64)
    files = dict([partition_metafile(partition, instant)])
    stats = []
    for k in range(groups):
        file_id = f"{STATS_GROUP_PREFIX[partition]}{k:04d}-0"
        name = f"{file_id}_0-0-{k}_{instant}.hfile"
        cells = stats_cells([records[i] for i in np.flatnonzero(where == k)], layout, schema_text,
                            partition == PARTITION_STATS, name)
        base = index_base_hfile(pa.array([r for r, _ in cells], pa.binary()),
                                pa.array([v for _, v in cells], pa.binary()), schema_text)
        files[f"{MDT}/{partition}/{name}"] = base
        files[f"{MDT}/{partition}/.{file_id}_{instant}.log.1_0-0-0"] = empty_delete(instant)
        stats.append(WriteStat(file_id, partition, f"{partition}/{name}", None, num_writes=len(cells),
                               num_inserts=len(cells), total_write_bytes=len(base), file_size=len(base)))
    return files, CommitMetadata.from_stats("BULK_INSERT_PREPPED", stats, {"schema": without_meta(schema_text)})
