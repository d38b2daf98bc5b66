"""Table versions: which we read and write, and the `hoodie.properties` of a new table of
version 8 or 9 (Hudi 1.0 / 1.1: timeline layout 2; v8 spec §1.2).

A new table is version 6 unless the write option `hoodie.write.table.version` says 8 or 9, as
in Java. A table is never upgraded or downgraded: every writer keeps its version."""

from __future__ import annotations

from .config import (
    COMPLEX_KEYGEN,
    CUSTOM_KEYGEN,
    DEFAULT_PAYLOAD,
    NONPARTITIONED_KEYGEN,
    SIMPLE_KEYGEN,
    TIMESTAMP_KEYGEN,
)
from .errors import InvalidOptionError

WRITE_TABLE_VERSION = "hoodie.write.table.version"
READ_VERSIONS = (6, 8, 9)
WRITE_VERSIONS = (6, 8, 9)
# Hudi's merge strategy ids (`hoodie.record.merge.strategy.id`), written by v8 tables
EVENT_TIME_STRATEGY = "eeb8d96f-b1e4-49fd-bbf8-28ac514178e5"
COMMIT_TIME_STRATEGY = "ce9acb64-bde0-424c-9b91-f6ebba25356d"
KEYGEN_TYPE_OF = {SIMPLE_KEYGEN: "SIMPLE", COMPLEX_KEYGEN: "COMPLEX", NONPARTITIONED_KEYGEN: "NON_PARTITION",
                  TIMESTAMP_KEYGEN: "TIMESTAMP", CUSTOM_KEYGEN: "CUSTOM"}
# v6 keys a Hudi 1.x table does not carry
_V6_ONLY = ("hoodie.compaction.record.merger.strategy",)


def write_table_version(uri: str, options: dict | None) -> int:
    """The table version a new table is created with (`hoodie.write.table.version`, default 6)."""
    raw = str((options or {}).get(WRITE_TABLE_VERSION, "6")).strip()
    if raw not in {str(v) for v in WRITE_VERSIONS}:
        raise InvalidOptionError(f"table {uri}: {WRITE_TABLE_VERSION}={raw!r} is not a table version airflow-lake "
                                 f"writes (one of {', '.join(map(str, WRITE_VERSIONS))})")
    return int(raw)


def hudi1x_properties(props: dict[str, str], version: int) -> dict[str, str]:
    """The properties of a new table of `version` (8 or 9) from those of a version 6 one:
    layout 2 with its timeline paths, the key generator by type, the merge mode (event time
    with an ordering field, else commit time) and, in v9, `hoodie.table.ordering.fields`
    instead of the precombine field and no payload class (as Hudi 1.0 and 1.1 write them)."""
    out = {k: v for k, v in props.items() if k not in _V6_ONLY}
    out.update({"hoodie.table.version": str(version), "hoodie.table.initial.version": str(version),
                "hoodie.timeline.layout.version": "2", "hoodie.timeline.path": "timeline",
                "hoodie.timeline.history.path": "history"})
    keygen = out.get("hoodie.table.keygenerator.class", "")
    if keygen in KEYGEN_TYPE_OF:
        out["hoodie.table.keygenerator.type"] = KEYGEN_TYPE_OF[keygen]
        del out["hoodie.table.keygenerator.class"]
    ordering = out.get("hoodie.table.precombine.field", "")
    event_time = bool(ordering) and out.get("hoodie.compaction.payload.class") == DEFAULT_PAYLOAD
    out["hoodie.record.merge.mode"] = "EVENT_TIME_ORDERING" if event_time else "COMMIT_TIME_ORDERING"
    if version == 8:
        out["hoodie.record.merge.strategy.id"] = EVENT_TIME_STRATEGY if event_time else COMMIT_TIME_STRATEGY
    else:
        out.pop("hoodie.compaction.payload.class", None)
        out.pop("hoodie.table.precombine.field", None)
        if ordering:
            out["hoodie.table.ordering.fields"] = ordering
        out["hoodie.table.format"] = "native"
    return out
