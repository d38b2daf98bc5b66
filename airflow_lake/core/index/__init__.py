"""Indexes: tag incoming record keys with the file group that holds them.

`hoodie.index.type`: BLOOM (default), SIMPLE, GLOBAL_BLOOM, GLOBAL_SIMPLE, BUCKET, RECORD_INDEX
(the metadata table's record-level index: global), RECORD_LEVEL_INDEX (its partitioned form).
"""

from __future__ import annotations

from typing import Any

from ..config import WriteOptions, options_value
from ..errors import InvalidOptionError
from ..vocabulary import INDEX_TYPES
from . import bloom, simple
from .simple import Tags


def check_index_type(index_type: str, where: str) -> str:
    return INDEX_TYPES.parse(index_type, where, WriteOptions.INDEX_TYPE.key)


def is_global(index_type: str) -> bool:
    """Whether the index finds a key in any partition (a key lives once in the table)."""
    return index_type.startswith("GLOBAL") or index_type == "RECORD_INDEX"


def update_partition_path_option(index_type: str):
    """The option saying whether a key arriving in another partition moves there (a global
    index), else is updated where it is."""
    if index_type == "RECORD_INDEX":
        return WriteOptions.RECORD_INDEX_UPDATE_PARTITION_PATH
    return WriteOptions.BLOOM_UPDATE_PARTITION_PATH if "BLOOM" in index_type else \
        WriteOptions.SIMPLE_UPDATE_PARTITION_PATH


def _placement(options: dict[str, Any] | None, props: dict[str, str], where: str) -> tuple:
    """Where an index finds a key: in any partition, in its own partition by lookup, or in a
    bucket computed from the key (which depends on the bucket count and hash fields)."""
    index = check_index_type(options_value(options, WriteOptions.INDEX_TYPE, props), where)
    if index == "BUCKET":
        return ("BUCKET", options_value(options, WriteOptions.BUCKET_NUM, props),
                options_value(options, WriteOptions.BUCKET_HASH_FIELD, props).replace(" ", ""))
    return ("GLOBAL",) if is_global(index) else ("PARTITION",)


def _describe(placement: tuple, index: str) -> str:
    if placement[0] == "BUCKET":
        return f"{index} with {placement[1]} buckets{f' hashed on {placement[2]}' if placement[2] else ''}"
    return f"{index} ({'global' if placement[0] == 'GLOBAL' else 'per partition'})"


def check_index_switch(uri: str, props: dict[str, str], options: dict[str, Any] | None) -> None:
    """Refuse a write whose index would look for keys elsewhere than the index the table
    records in hoodie.properties (global against per-partition, bucket against key lookup,
    another bucket layout): keys written under one would be written again under the other.
    `airflow_lake.index.switch.force=true` in the write's options allows it."""
    recorded = props.get(WriteOptions.INDEX_TYPE.key)
    if not recorded or options_value(options, WriteOptions.INDEX_SWITCH_FORCE):
        return
    where = f"table {uri}"
    table = _placement(None, props, where)
    write = _placement(options, props, where)
    if table != write:
        given = options_value(options, WriteOptions.INDEX_TYPE, props).upper()
        raise InvalidOptionError(
            f"{where}: this write's index {_describe(write, given)} differs from the table's "
            f"{_describe(table, recorded.upper())} (hoodie.properties): keys already written would be found in "
            f"the wrong place and written twice; write without index options to use the table's, or set "
            f"{WriteOptions.INDEX_SWITCH_FORCE.key}=true to switch anyway")


def tagger(index_type: str):
    """The tag function of a key-lookup index (BUCKET needs none)."""
    return bloom.tag if index_type.endswith("BLOOM") else simple.tag


__all__ = ["INDEX_TYPES", "Tags", "check_index_switch", "check_index_type", "is_global", "tagger",
           "update_partition_path_option"]
