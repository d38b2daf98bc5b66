"""Table and write options with their real `hoodie.*` keys, and `TableConfig` (pure values:
`hoodie.properties` I/O is in `properties.py`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .errors import InvalidOptionError, UnsupportedFeatureError, UnsupportedTableVersionError
from .vocabulary import (
    CLEAN_POLICIES,
    COMPACTION_TRIGGERS,
    COPY_ON_WRITE,
    INDEX_TYPES,
    KEEP_LATEST_BY_HOURS,
    KEEP_LATEST_COMMITS,
    KEEP_LATEST_FILE_VERSIONS,
    MERGE_ON_READ,
    NUM_COMMITS,
    TABLE_TYPES,
)

TABLE_VERSION = 6
TIMELINE_LAYOUT_VERSION = 1

SIMPLE_KEYGEN = "org.apache.hudi.keygen.SimpleKeyGenerator"
COMPLEX_KEYGEN = "org.apache.hudi.keygen.ComplexKeyGenerator"
NONPARTITIONED_KEYGEN = "org.apache.hudi.keygen.NonpartitionedKeyGenerator"
TIMESTAMP_KEYGEN = "org.apache.hudi.keygen.TimestampBasedKeyGenerator"
CUSTOM_KEYGEN = "org.apache.hudi.keygen.CustomKeyGenerator"
DEFAULT_PAYLOAD = "org.apache.hudi.common.model.DefaultHoodieRecordPayload"
OVERWRITE_PAYLOAD = "org.apache.hudi.common.model.OverwriteWithLatestAvroPayload"
SUPPORTED_PAYLOADS = (DEFAULT_PAYLOAD, OVERWRITE_PAYLOAD)
EVENT_TIME_ORDERING = "EVENT_TIME_ORDERING"
COMMIT_TIME_ORDERING = "COMMIT_TIME_ORDERING"
# `hoodie.table.keygenerator.type` (Hudi 1.x) -> the key generator class it stands for
KEYGEN_TYPES = {"SIMPLE": SIMPLE_KEYGEN, "COMPLEX": COMPLEX_KEYGEN, "NON_PARTITION": NONPARTITIONED_KEYGEN,
                "TIMESTAMP": TIMESTAMP_KEYGEN, "CUSTOM": CUSTOM_KEYGEN}
MERGER_STRATEGY = "eeb8d96f-b1e4-49fd-bbf8-28ac514178e5"
AVRO_RECORD_MERGER = "org.apache.hudi.common.model.HoodieAvroRecordMerger"


# -- typed options ------------------------------------------------------------------------


# every `Option` by key, as defined (`check_option_values` parses what a caller gives)
OPTIONS: dict[str, Option] = {}


@dataclass(frozen=True, slots=True)
class Option:
    """One `hoodie.*` option: its key, default and value type, and what values it takes (at
    least `minimum`; one of `choices`, in any case)."""

    key: str
    default: Any
    kind: type = str
    doc: str = ""
    minimum: float | None = None
    choices: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        OPTIONS.setdefault(self.key, self)

    def get(self, props: dict[str, str]) -> Any:
        raw = props.get(self.key)
        if raw is None or raw == "":
            return self.default
        return self.parse(raw)

    def parse(self, raw: Any, where: str | None = None, argument: str | None = None) -> Any:
        """`raw` (text, or a value of the option's type) as the option's value, else an
        `InvalidOptionError` naming `where` (the table), the option (or the `argument` that
        stands for it) and the value."""
        what = f"{argument}={raw!r}" if argument else f"option {self.key}={raw!r}"
        prefix = f"{where}: " if where else ""
        try:
            value = _typed(self.kind, raw)
        except (TypeError, ValueError):
            raise InvalidOptionError(f"{prefix}{what} is not a valid {self.kind.__name__}") from None
        if self.minimum is not None and value < self.minimum:
            raise InvalidOptionError(f"{prefix}{what} is below its minimum {self.minimum:g}")
        if self.choices and str(value).strip().lower() not in (c.lower() for c in self.choices):
            raise InvalidOptionError(f"{prefix}{what} is not one of {', '.join(self.choices)}")
        return value


def _typed(kind: type, raw: Any) -> Any:
    """`raw` as a `kind` (bool, int, float or str): text as Hudi's properties hold it, or a
    value of that type (not a bool for a number, not a fraction for an int)."""
    if kind is str:
        if not isinstance(raw, (str, int, float)):
            raise TypeError(raw)
        return str(raw)
    if kind is bool:
        if isinstance(raw, bool):
            return raw
        if not isinstance(raw, str) or raw.strip().lower() not in ("true", "false"):
            raise ValueError(raw)
        return raw.strip().lower() == "true"
    if isinstance(raw, bool) or not isinstance(raw, (str, int, float)):
        raise TypeError(raw)
    if kind is int and isinstance(raw, float):
        if not raw.is_integer():
            raise ValueError(raw)
        return int(raw)
    value = kind(raw.strip() if isinstance(raw, str) else raw)
    if kind is float and value != value:  # NaN
        raise ValueError(raw)
    return value


def check_option_values(where: str, *sources: dict[str, Any] | None) -> None:
    """Refuse, naming `where` (the table), the key and the value, any known option among
    `sources` whose value is not one it takes, before anything is written."""
    for source in sources:
        for key, value in (source or {}).items():
            option = OPTIONS.get(key)
            if option is not None and value is not None and value != "":
                option.parse(value, where)


# `hoodie.*` keys read besides the `Option`s (Hudi's aliases, table properties, secrets); keys
# under `READ_KEY_FAMILIES` are read by prefix (`keygen_timestamp.py`)
READ_KEYS = frozenset({
    "hoodie.aws.access.key", "hoodie.aws.secret.key", "hoodie.aws.session.token",
    "hoodie.compaction.record.merger.strategy", "hoodie.datasource.write.keygenerator.class",
    "hoodie.datasource.write.keygenerator.consistent.logical.timestamp.enabled",
    "hoodie.datasource.write.keygenerator.type", "hoodie.datasource.write.partitionpath.field",
    "hoodie.datasource.write.payload.class", "hoodie.datasource.write.precombine.field",
    "hoodie.datasource.write.record.merger.impls", "hoodie.datasource.write.record.merger.strategy",
    "hoodie.datasource.write.recordkey.field", "hoodie.datasource.write.table.name",
    "hoodie.datasource.write.table.type", "hoodie.index.bucket.engine", "hoodie.legacy.payload.class",
    "hoodie.metadata.enable", "hoodie.metadata.global.record.level.index.enable", "hoodie.payload.ordering.field",
    "hoodie.record.merge.strategy.id", "hoodie.table.format", "hoodie.table.index.defs.path",
    "hoodie.table.initial.version", "hoodie.table.metadata.partitions.inflight", "hoodie.timeline.history.path",
    "hoodie.timeline.path", "hoodie.write.record.merger.impls", "hoodie.write.table.version",
    "hoodie.keygen.datetime.parser.class", "hoodie.deltastreamer.keygen.datetime.parser.class",
})
READ_KEY_FAMILIES = ("hoodie.keygen.timebased.", "hoodie.deltastreamer.keygen.timebased.")


# Hudi's keys within two letters of one airflow-lake reads, which it does not read itself
NOT_READ_NEIGHBOURS = frozenset({"hoodie.combine.before.upsert", "hoodie.combine.before.delete"})


def misspelt_options(options: dict[str, Any] | None) -> list[tuple[str, str]]:
    """(key, the key it is likely a misspelling of) for each `hoodie.*` key of `options` that
    airflow-lake does not read and that is at most two letters (inserted, deleted or changed)
    away from one it reads (Hudi ignores a key it does not know: a misspelt one silently leaves
    the default)."""
    known = sorted(set(OPTIONS) | READ_KEYS)
    out = []
    for key in options or {}:
        if not isinstance(key, str) or not key.startswith("hoodie.") or key in OPTIONS or key in READ_KEYS \
                or key in NOT_READ_NEIGHBOURS or key.startswith(READ_KEY_FAMILIES):
            continue
        close = [k for k in known if abs(len(k) - len(key)) <= 2 and _edits(key, k) <= 2]
        if close:
            out.append((key, min(close, key=lambda k: _edits(key, k))))
    return out


def _edits(a: str, b: str) -> int:
    """The Levenshtein distance of `a` and `b` (characters inserted, deleted or changed)."""
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i]
        for j, cb in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb)))
        previous = current
    return previous[-1]


def pyarrow_codec(codec: str) -> str:
    """pyarrow's name of a parquet codec as Hudi names it (`uncompressed` is `none`)."""
    name = codec.strip().lower()
    return "none" if name == "uncompressed" else name


class MetadataOptions:
    """Write options of a Hudi 1.x table's metadata table."""

    COMPACT_MAX_DELTA_COMMITS = Option("hoodie.metadata.compact.max.delta.commits", 10, int, minimum=1)
    # the record-level index: true builds it (from a scan), false switches it off (Java's keys;
    # 1.2 also reads `hoodie.metadata.global.record.level.index.*`)
    RECORD_INDEX_ENABLE = Option("hoodie.metadata.record.index.enable", "")
    RECORD_INDEX_MIN_GROUPS = Option("hoodie.metadata.record.index.min.filegroup.count", 10, int, minimum=1)
    RECORD_INDEX_MAX_GROUPS = Option("hoodie.metadata.record.index.max.filegroup.count", 10000, int,
                                     minimum=1)
    RECORD_INDEX_GROWTH = Option("hoodie.metadata.record.index.growth.factor", 2.0, float)
    RECORD_INDEX_MAX_GROUP_BYTES = Option("hoodie.metadata.record.index.max.filegroup.size", 1 << 30, int,
                                          minimum=1)
    # the partitioned record index (Hudi 1.1's RECORD_LEVEL_INDEX): file groups per data partition
    PARTITIONED_RECORD_INDEX_ENABLE = Option("hoodie.metadata.record.level.index.enable", "")
    PARTITIONED_RECORD_INDEX_MIN_GROUPS = Option("hoodie.metadata.record.level.index.min.filegroup.count", 1, int,
                                                 minimum=1)
    PARTITIONED_RECORD_INDEX_MAX_GROUPS = Option("hoodie.metadata.record.level.index.max.filegroup.count", 10, int,
                                                 minimum=1)
    # column and partition stats: true builds them (from the latest file slices), false switches
    # them off; the columns indexed: the list, else the first `max.columns.to.index` and the
    # record key, partition path and commit time
    COLUMN_STATS_ENABLE = Option("hoodie.metadata.index.column.stats.enable", "")
    PARTITION_STATS_ENABLE = Option("hoodie.metadata.index.partition.stats.enable", "")
    COLUMN_STATS_COLUMNS = Option("hoodie.metadata.index.column.stats.column.list", "")
    COLUMN_STATS_MAX_COLUMNS = Option("hoodie.metadata.index.column.stats.max.columns.to.index", 32, int,
                                      minimum=0)
    COLUMN_STATS_GROUPS = Option("hoodie.metadata.index.column.stats.file.group.count", 2, int,
                                 minimum=1)
    PARTITION_STATS_GROUPS = Option("hoodie.metadata.index.partition.stats.file.group.count", 1, int,
                                    minimum=1)
    # column stats asked for at creation, before there is a schema to choose their columns from:
    # kept in hoodie.properties until the first write that has one builds them (then removed)
    STATS_ASKED_AT_CREATE = ("hoodie.metadata.index.column.stats.enable",
                             "hoodie.metadata.index.partition.stats.enable",
                             "hoodie.metadata.index.column.stats.column.list",
                             "hoodie.metadata.index.column.stats.max.columns.to.index")
    # reads: skip partitions and file groups by the column and partition stats (Hudi's Spark option)
    DATA_SKIPPING = Option("hoodie.enable.data.skipping", True, bool)


class TableOptions:
    """Keys persisted in `hoodie.properties`."""

    NAME = Option("hoodie.table.name", None)
    DATABASE = Option("hoodie.database.name", "")
    TYPE = Option("hoodie.table.type", COPY_ON_WRITE)
    VERSION = Option("hoodie.table.version", TABLE_VERSION, int)
    TIMELINE_LAYOUT = Option("hoodie.timeline.layout.version", TIMELINE_LAYOUT_VERSION, int)
    RECORD_KEY_FIELDS = Option("hoodie.table.recordkey.fields", "")
    PRECOMBINE_FIELD = Option("hoodie.table.precombine.field", "")
    ORDERING_FIELDS = Option("hoodie.table.ordering.fields", "")  # v9: replaces the precombine field
    MERGE_MODE = Option("hoodie.record.merge.mode", "")  # v8 and v9
    KEYGEN_TYPE = Option("hoodie.table.keygenerator.type", "")  # v8 and v9: a KeyGeneratorType name
    PARTITION_FIELDS = Option("hoodie.table.partition.fields", "")
    KEYGEN = Option("hoodie.table.keygenerator.class", "")
    HIVE_STYLE = Option("hoodie.datasource.write.hive_style_partitioning", False, bool)
    URL_ENCODE = Option("hoodie.datasource.write.partitionpath.urlencode", False, bool)
    DROP_PARTITION_COLUMNS = Option("hoodie.datasource.write.drop.partition.columns", False, bool)
    ARCHIVE_FOLDER = Option("hoodie.archivelog.folder", "archived")
    BASE_FILE_FORMAT = Option("hoodie.table.base.file.format", "PARQUET")
    PAYLOAD_CLASS = Option("hoodie.compaction.payload.class", OVERWRITE_PAYLOAD)
    POPULATE_META_FIELDS = Option("hoodie.populate.meta.fields", True, bool)
    METADATA_PARTITIONS = Option("hoodie.table.metadata.partitions", "")
    TIMEZONE = Option("hoodie.table.timeline.timezone", "LOCAL")
    CREATE_SCHEMA = Option("hoodie.table.create.schema", "")
    CHECKSUM = Option("hoodie.table.checksum", "")


class WriteOptions:
    """Write-time options (not persisted): passed as `options=` to create or write."""

    INDEX_TYPE = Option("hoodie.index.type", "BLOOM", choices=INDEX_TYPES.spellings)
    BUCKET_NUM = Option("hoodie.bucket.index.num.buckets", 256, int, minimum=1)
    BUCKET_HASH_FIELD = Option("hoodie.bucket.index.hash.field", "")
    LOG_BLOCK_FORMAT = Option("hoodie.logfile.data.block.format", "parquet", choices=("parquet", "avro"))
    SIMPLE_UPDATE_PARTITION_PATH = Option("hoodie.simple.index.update.partition.path", True, bool)
    BLOOM_UPDATE_PARTITION_PATH = Option("hoodie.bloom.index.update.partition.path", True, bool)
    RECORD_INDEX_UPDATE_PARTITION_PATH = Option("hoodie.record.index.update.partition.path", False, bool)
    MAX_FILE_SIZE = Option("hoodie.parquet.max.file.size", 120 * 1024 * 1024, int, minimum=1)
    SMALL_FILE_LIMIT = Option("hoodie.parquet.small.file.limit", 100 * 1024 * 1024, int, minimum=0)
    RECORD_SIZE_ESTIMATE = Option("hoodie.copyonwrite.record.size.estimate", 1024, int, minimum=1)
    # Deliberate deviation: Hudi 0.14 defaults to gzip; snappy is several times faster and
    # every reader accepts it. Set the key to `gzip` to match Spark byte for byte.
    COMPRESSION = Option("hoodie.parquet.compression.codec", "snappy", choices=(
        "snappy", "gzip", "zstd", "lz4", "lz4_raw", "brotli", "uncompressed", "none"))
    COMBINE_BEFORE_INSERT = Option("hoodie.combine.before.insert", False, bool)
    # an upsert whose batch lacks table columns: refused, unless they may become null (Java's key)
    NULL_FOR_MISSING_COLUMNS = Option("hoodie.write.set.null.for.missing.columns", False, bool)
    INSERT_DROP_DUPLICATES = Option("hoodie.datasource.write.insert.drop.duplicates", False, bool)
    BLOOM_NUM_ENTRIES = Option("hoodie.index.bloom.num_entries", 60000, int, minimum=1)
    BLOOM_FPP = Option("hoodie.index.bloom.fpp", 1e-9, float)
    BLOOM_FILTER_TYPE = Option("hoodie.bloom.index.filter.type", "DYNAMIC_V0", choices=("DYNAMIC_V0", "SIMPLE"))
    BLOOM_DYNAMIC_MAX_ENTRIES = Option("hoodie.bloom.index.filter.dynamic.max.entries", 100000, int, minimum=1)
    HEARTBEAT_INTERVAL_MS = Option("hoodie.client.heartbeat.interval_in_ms", 60000, int, minimum=1)
    HEARTBEAT_TOLERABLE_MISSES = Option("hoodie.client.heartbeat.tolerable.misses", 2, int, minimum=0)
    LOCK_EXPIRE_MINUTES = Option("hoodie.write.lock.filesystem.expire", 1.0, float, minimum=0)
    LOCK_WAIT_MS = Option("hoodie.write.lock.wait_time_ms", 60000, int, minimum=0)
    # several writers at once (OPTIMISTIC_CONCURRENCY_CONTROL) need an atomic create-if-absent
    # from the store, or a lock provider outside it (lock.table_lock)
    CONCURRENCY_MODE = Option("hoodie.write.concurrency.mode", "SINGLE_WRITER")
    LOCK_PROVIDER = Option("hoodie.write.lock.provider", "")
    PARALLELISM = Option("airflow_lake.parallelism", 0, int, minimum=0)
    DROP_METADATA_TABLE = Option("airflow_lake.metadata.table.drop", True, bool)
    # new naive timestamp columns: false = Avro timestamp-* (UTC instants, Spark's TimestampType,
    # read by every engine), true = local-timestamp-* (hudi-rs 0.5 cannot read those)
    TIMESTAMP_WITHOUT_TIMEZONE = Option("airflow_lake.timestamp.without.timezone", False, bool)
    # a write whose index finds keys elsewhere than the table's own index (global <-> per
    # partition, bucket <-> key lookup, another bucket layout) is refused unless this is true
    INDEX_SWITCH_FORCE = Option("airflow_lake.index.switch.force", False, bool)


class ServiceOptions:
    """Table service options (cleaner, compaction trigger): a call's own argument wins, then
    the table's options, then Hudi's default."""

    CLEAN_POLICY = Option("hoodie.cleaner.policy", KEEP_LATEST_COMMITS, choices=CLEAN_POLICIES.spellings)
    RETAINED = {
        KEEP_LATEST_COMMITS: Option("hoodie.cleaner.commits.retained", 10, int, minimum=1),
        KEEP_LATEST_FILE_VERSIONS: Option("hoodie.cleaner.fileversions.retained", 3, int, minimum=1),
        KEEP_LATEST_BY_HOURS: Option("hoodie.cleaner.hours.retained", 24, int, minimum=0),
    }
    COMPACTION_TRIGGER = Option("hoodie.compact.inline.trigger.strategy", NUM_COMMITS,
                                choices=COMPACTION_TRIGGERS.spellings)
    MAX_DELTA_COMMITS = Option("hoodie.compact.inline.max.delta.commits", 5, int, minimum=0)
    MAX_DELTA_SECONDS = Option("hoodie.compact.inline.max.delta.seconds", 3600, int, minimum=0)
    KEEP_MIN_COMMITS = Option("hoodie.keep.min.commits", 20, int, minimum=1)  # archival: keep this many active
    KEEP_MAX_COMMITS = Option("hoodie.keep.max.commits", 30, int, minimum=2)  # archive once more are active


# Writer settings given at create time become the table's defaults: kept in hoodie.properties
# under their own keys (Spark's Hudi writer, too, fills the options a write leaves unset from
# hoodie.properties); a write's own options still win, for that write.
TABLE_WRITE_DEFAULTS = frozenset(option.key for option in (
    WriteOptions.INDEX_TYPE, WriteOptions.BUCKET_NUM, WriteOptions.BUCKET_HASH_FIELD,
    WriteOptions.SIMPLE_UPDATE_PARTITION_PATH, WriteOptions.BLOOM_UPDATE_PARTITION_PATH,
    WriteOptions.RECORD_INDEX_UPDATE_PARTITION_PATH, WriteOptions.BLOOM_NUM_ENTRIES, WriteOptions.BLOOM_FPP,
    WriteOptions.BLOOM_FILTER_TYPE,
    WriteOptions.BLOOM_DYNAMIC_MAX_ENTRIES, WriteOptions.MAX_FILE_SIZE, WriteOptions.SMALL_FILE_LIMIT,
    WriteOptions.RECORD_SIZE_ESTIMATE, WriteOptions.COMPRESSION, WriteOptions.LOG_BLOCK_FORMAT,
    WriteOptions.COMBINE_BEFORE_INSERT, WriteOptions.INSERT_DROP_DUPLICATES,
    WriteOptions.TIMESTAMP_WITHOUT_TIMEZONE)) | {"hoodie.index.bucket.engine"}


# -- table config --------------------------------------------------------------------


class TableConfig:
    """The parsed `hoodie.properties` of one table."""

    def __init__(self, props: dict[str, str]):
        self.props = props

    def get(self, option: Option) -> Any:
        return option.get(self.props)

    @property
    def name(self) -> str:
        return self.props["hoodie.table.name"]

    @property
    def table_type(self) -> str:
        raw = self.get(TableOptions.TYPE)
        return TABLE_TYPES.find(raw) or raw

    @property
    def is_mor(self) -> bool:
        return self.table_type == MERGE_ON_READ

    @property
    def version(self) -> int:
        return self.get(TableOptions.VERSION)

    @property
    def timeline_layout(self) -> int:
        """`hoodie.timeline.layout.version`; when absent, 2 from table version 8 on (as hudi-rs
        infers it), else 1."""
        raw = self.props.get(TableOptions.TIMELINE_LAYOUT.key, "").strip()
        return int(raw) if raw else (2 if self.version >= 8 else 1)

    def check_writable(self, uri: str) -> None:
        """Refuse, before anything is touched, to write or run a service on a table we read but
        do not write: a version other than 6, 8 and 9, a layout not its own, base files other
        than parquet (Lance: read only)."""
        layout = TIMELINE_LAYOUT_VERSION if self.version == TABLE_VERSION else 2
        if self.version not in (TABLE_VERSION, 8, 9) or self.timeline_layout != layout:
            raise UnsupportedTableVersionError(
                f"table {uri}: table version {self.version} (timeline layout {self.timeline_layout}) is read by "
                "airflow-lake, not written: writes and table services need table version 6 (timeline layout 1), "
                "8 or 9 (layout 2); nothing was changed")
        base_format = self.get(TableOptions.BASE_FILE_FORMAT).strip().upper()
        if base_format != "PARQUET":
            raise UnsupportedFeatureError(
                f"table {uri}: its base files are {base_format} (hoodie.table.base.file.format); airflow-lake "
                f"reads {'Lance' if base_format == 'LANCE' else base_format} base files but writes parquet only, so "
                "it does not write this table; nothing was changed")

    @property
    def record_key_fields(self) -> list[str]:
        return _split(self.get(TableOptions.RECORD_KEY_FIELDS))

    @property
    def partition_fields(self) -> list[str]:
        """Partition field names (a `:SIMPLE` / `:TIMESTAMP` suffix, as Hudi 1.0 writes for the
        CustomKeyGenerator, is not part of the name)."""
        return [f.split(":", 1)[0].strip() for f in _split(self.get(TableOptions.PARTITION_FIELDS))]

    def get_raw_partition_fields(self) -> str:
        return self.get(TableOptions.PARTITION_FIELDS)

    @property
    def ordering_fields(self) -> list[str]:
        """The ordering (precombine) fields: `hoodie.table.ordering.fields` (v9), else
        `hoodie.table.precombine.field`."""
        return _split(self.get(TableOptions.ORDERING_FIELDS)) or _split(self.get(TableOptions.PRECOMBINE_FIELD))

    @property
    def precombine_field(self) -> str | None:
        fields = self.ordering_fields
        return fields[0] if fields else None

    @property
    def merge_mode(self) -> str:
        """`hoodie.record.merge.mode` (v8, v9); tables without it merge by their payload class:
        EVENT_TIME_ORDERING for DefaultHoodieRecordPayload, else COMMIT_TIME_ORDERING."""
        return merge_mode(self.props)

    @property
    def hive_style(self) -> bool:
        return self.get(TableOptions.HIVE_STYLE)

    @property
    def url_encode(self) -> bool:
        return self.get(TableOptions.URL_ENCODE)

    @property
    def keygen_class(self) -> str:
        """`hoodie.table.keygenerator.class`, else the class of `hoodie.table.keygenerator.type`
        (what Hudi 1.x tables name instead)."""
        return self.get(TableOptions.KEYGEN) or KEYGEN_TYPES.get(self.get(TableOptions.KEYGEN_TYPE).strip().upper(), "")

    @property
    def populate_meta_fields(self) -> bool:
        return self.get(TableOptions.POPULATE_META_FIELDS)

    @property
    def payload_class(self) -> str:
        """The payload class whose merge the table's records follow: on v8/v9 tables the one of
        its merge mode (`hoodie.compaction.payload.class` is gone from v9 tables)."""
        if self.props.get(TableOptions.MERGE_MODE.key):
            return DEFAULT_PAYLOAD if self.merge_mode == EVENT_TIME_ORDERING else OVERWRITE_PAYLOAD
        return self.get(TableOptions.PAYLOAD_CLASS)

    @property
    def timezone(self) -> str:
        return self.get(TableOptions.TIMEZONE).upper()

    @property
    def archive_folder(self) -> str:
        """Where archived instants go: `hoodie.archivelog.folder` (layout 1), or the LSM history
        `.hoodie/<hoodie.timeline.path>/<hoodie.timeline.history.path>` (layout 2)."""
        if self.timeline_layout == 2:
            timeline = (self.props.get("hoodie.timeline.path") or "timeline").strip("/")
            return f".hoodie/{timeline}/{(self.props.get('hoodie.timeline.history.path') or 'history').strip('/')}"
        folder = self.get(TableOptions.ARCHIVE_FOLDER)
        return folder if folder.startswith(".hoodie") else f".hoodie/{folder}"


# -- payloads and merge options --------------------------------------------------------

_WRITE_PAYLOAD_KEYS = ("hoodie.datasource.write.payload.class", "hoodie.compaction.payload.class")
_MERGER_STRATEGY_KEYS = ("hoodie.compaction.record.merger.strategy", "hoodie.datasource.write.record.merger.strategy")
_MERGER_IMPL_KEYS = ("hoodie.datasource.write.record.merger.impls", "hoodie.write.record.merger.impls")
_PRECOMBINE_KEYS = ("hoodie.datasource.write.precombine.field", "hoodie.payload.ordering.field")


def _payload_name(name: str) -> str:
    return name.strip().replace("com.uber.hoodie", "org.apache.hudi")  # as HoodieTableConfig reads it


def merge_mode(props: dict[str, str]) -> str:
    """A table's record merge mode (see `TableConfig.merge_mode`)."""
    mode = (props.get(TableOptions.MERGE_MODE.key) or "").strip().upper()
    if mode:
        return mode
    payload = _payload_name(props.get(TableOptions.PAYLOAD_CLASS.key) or OVERWRITE_PAYLOAD)
    return EVENT_TIME_ORDERING if payload == DEFAULT_PAYLOAD else COMMIT_TIME_ORDERING


def unsupported_merge(props: dict[str, str], options: dict[str, Any] | None, *, write: bool) -> str | None:
    """What makes this table's (or this write's) record merging differ from what we implement
    (DefaultHoodieRecordPayload, OverwriteWithLatestAvroPayload, the default merger; on v8/v9
    tables the EVENT_TIME_ORDERING and COMMIT_TIME_ORDERING merge modes), or None."""
    if props.get(TableOptions.MERGE_MODE.key):
        mode = merge_mode(props)
        if mode not in (EVENT_TIME_ORDERING, COMMIT_TIME_ORDERING):
            payload = props.get("hoodie.legacy.payload.class") or props.get(TableOptions.PAYLOAD_CLASS.key)
            return (f"merge mode {mode} ({TableOptions.MERGE_MODE.key} in hoodie.properties"
                    + (f", payload {payload}" if payload else "") + ")")
        return None
    payload = _payload_name(props.get(TableOptions.PAYLOAD_CLASS.key) or OVERWRITE_PAYLOAD)
    if payload not in SUPPORTED_PAYLOADS:
        return f"payload class {payload} ({TableOptions.PAYLOAD_CLASS.key} in hoodie.properties)"
    strategy = (props.get(_MERGER_STRATEGY_KEYS[0]) or MERGER_STRATEGY).strip()
    if strategy != MERGER_STRATEGY:
        return f"record merger strategy {strategy} ({_MERGER_STRATEGY_KEYS[0]} in hoodie.properties)"
    if not write:
        return None
    opts = {k: str(v) for k, v in (options or {}).items() if v is not None and str(v).strip()}
    for key in _WRITE_PAYLOAD_KEYS:
        if key in opts and _payload_name(opts[key]) != payload:
            kind = "is not implemented" if _payload_name(opts[key]) not in SUPPORTED_PAYLOADS else \
                f"differs from the table's {payload}"
            return f"payload class {opts[key].strip()} (write option {key}; it {kind})"
    for key in _MERGER_STRATEGY_KEYS:
        if key in opts and opts[key].strip() != MERGER_STRATEGY:
            return f"record merger strategy {opts[key].strip()} (write option {key})"
    for key in _MERGER_IMPL_KEYS:
        impls = [i.strip() for i in opts.get(key, "").split(",") if i.strip()]
        other = [i for i in impls if i != AVRO_RECORD_MERGER]
        if other:
            return f"record merger {other[0]} (write option {key})"
    precombine = props.get(TableOptions.PRECOMBINE_FIELD.key, "").strip()
    for key in _PRECOMBINE_KEYS:
        if key in opts and opts[key].strip() != precombine:
            return (f"ordering field {opts[key].strip()!r} (write option {key}) differing from the table's "
                    f"precombine field {precombine or None!r}")
    return None


def _split(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


def options_value(options: dict[str, Any] | None, option: Option, props: dict[str, str] | None = None) -> Any:
    """Resolve a write option from call options, then table properties, then its default."""
    merged: dict[str, str] = dict(props or {})
    for k, v in (options or {}).items():
        merged[k] = str(v).lower() if isinstance(v, bool) else str(v)
    return option.get(merged)
