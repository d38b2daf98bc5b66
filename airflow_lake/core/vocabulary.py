"""Apache Hudi's names, defined once: table types, write operations, index types, cleaner
policies, compaction triggers and plan orders, with the spellings each accepts, and how a
caller's options split into table (`hoodie.*`, `airflow_lake.*`) and storage options. The
`hoodie.*` keys and defaults of these settings are `Option`s in `config.py`. Pure values."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .errors import InvalidOptionError

COPY_ON_WRITE = "COPY_ON_WRITE"
MERGE_ON_READ = "MERGE_ON_READ"
KEEP_LATEST_COMMITS = "KEEP_LATEST_COMMITS"
KEEP_LATEST_FILE_VERSIONS = "KEEP_LATEST_FILE_VERSIONS"
KEEP_LATEST_BY_HOURS = "KEEP_LATEST_BY_HOURS"
NUM_COMMITS = "NUM_COMMITS"
TABLE_PREFIXES = ("hoodie.", "airflow_lake.")


@dataclass(frozen=True)
class Names:
    """One of Hudi's enumerations: its canonical names, in Hudi's case, and other spellings
    of them. Any case of a name or an alias is accepted, as Hudi's writer and
    Spark SQL accept them (`MOR`, `mor`, `merge_on_read`, `MERGE_ON_READ`)."""

    what: str
    names: tuple[str, ...]
    aliases: Mapping[str, str] = field(default_factory=dict)

    @property
    def spellings(self) -> tuple[str, ...]:
        """Every spelling accepted, canonical names first (a CLI's case-insensitive choices)."""
        return self.names + tuple(self.aliases)

    def find(self, value: Any) -> str | None:
        """The canonical name `value` spells, else None."""
        if not isinstance(value, str):
            return None
        text = value.strip().upper()
        name = self.aliases.get(text, text)
        return next((n for n in self.names if n.upper() == name), None)

    def normalise(self, value: str) -> str:
        """The canonical name `value` spells, else `value` as given (an argparse `type`, its
        `choices` being `names`)."""
        return self.find(value) or value

    def parse(self, value: Any, where: str, key: str | None = None) -> str:
        """The canonical name `value` spells, else an `InvalidOptionError` naming `where` (the
        table) and the option `key` the value came from, if any."""
        name = self.find(value)
        if name is None:
            source = f" ({key})" if key else ""
            raise InvalidOptionError(f"{where}: {self.what} {value!r}{source} is not one of "
                                     f"{', '.join(self.spellings)}")
        return name

    def __contains__(self, value: object) -> bool:
        return self.find(value) is not None


TABLE_TYPES = Names("table type", (COPY_ON_WRITE, MERGE_ON_READ), {"COW": COPY_ON_WRITE, "MOR": MERGE_ON_READ})
OPERATIONS = Names("operation", ("insert", "upsert", "bulk_insert", "delete", "insert_overwrite",
                                 "insert_overwrite_table"))
# operations that combine a batch by key and look the keys up in the index (insert and
# bulk_insert do neither unless asked), and those that replace file groups
LOOKUP_OPERATIONS = ("upsert", "delete")
OVERWRITE_OPERATIONS = ("insert_overwrite", "insert_overwrite_table")
# RECORD_INDEX: the metadata table's global record-level index (Hudi 1.2 calls it
# GLOBAL_RECORD_LEVEL_INDEX)
INDEX_TYPES = Names("index type", ("BLOOM", "SIMPLE", "GLOBAL_BLOOM", "GLOBAL_SIMPLE", "BUCKET", "RECORD_INDEX",
                                   "RECORD_LEVEL_INDEX"),
                    {"GLOBAL_RECORD_LEVEL_INDEX": "RECORD_INDEX"})
CLEAN_POLICIES = Names("cleaner policy", (KEEP_LATEST_COMMITS, KEEP_LATEST_FILE_VERSIONS, KEEP_LATEST_BY_HOURS))
COMPACTION_TRIGGERS = Names("compaction trigger", (NUM_COMMITS, "NUM_COMMITS_AFTER_LAST_REQUEST", "TIME_ELAPSED",
                                                   "NUM_AND_TIME", "NUM_OR_TIME"))
COMPACTION_ORDERS = Names("compaction plan order", ("FIFO", "LIFO"))
# an incremental read over a pending instant: fail, or stop before it (Hudi's
# `hoodie.read.timeline.holes.resolution.policy`; its USE_TRANSITION_TIME is not implemented)
HOLES_POLICIES = Names("holes resolution policy", ("FAIL", "BLOCK"))


def is_table_option(key: str) -> bool:
    """Whether an option key is a table or write option (else a storage option)."""
    return str(key).startswith(TABLE_PREFIXES)


def split_options(options: Mapping[str, Any] | Iterable[tuple[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(table options, storage options) of one mixed set of options: `hoodie.*` and
    `airflow_lake.*` keys are table / write options, any other key a storage option (pyarrow
    file-system keyword), whose text values that are JSON literals are typed (`true`, `5`,
    `"0123"`)."""
    pairs = options.items() if isinstance(options, Mapping) else options
    table: dict[str, Any] = {}
    storage: dict[str, Any] = {}
    for key, value in pairs:
        if is_table_option(key):
            table[key] = value
        else:
            storage[key] = storage_value(value)
    return table, storage


def storage_value(value: Any) -> Any:
    """A storage option's value: text holding a JSON scalar is that scalar."""
    if not isinstance(value, str):
        return value
    try:
        parsed = json.loads(value)
    except ValueError:
        return value
    return parsed if parsed is None or isinstance(parsed, (bool, int, float, str)) else value
