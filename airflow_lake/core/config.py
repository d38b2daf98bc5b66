"""Table and write options with their real `hoodie.*` keys, and `hoodie.properties` I/O."""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from .errors import InvalidOptionError, InvalidTableError, TableNotFoundError
from .storage import Storage

PROPERTIES = ".hoodie/hoodie.properties"
PROPERTIES_BACKUP = ".hoodie/hoodie.properties.backup"
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
MERGER_STRATEGY = "eeb8d96f-b1e4-49fd-bbf8-28ac514178e5"
AVRO_RECORD_MERGER = "org.apache.hudi.common.model.HoodieAvroRecordMerger"


# -- Java .properties ---------------------------------------------------------------------


def _escape(text: str, is_key: bool) -> str:
    out = []
    for i, ch in enumerate(text):
        code = ord(ch)
        if ch == "\\":
            out.append("\\\\")
        elif ch in ":=#!":
            out.append("\\" + ch)
        elif ch == " " and (is_key or i == 0):
            out.append("\\ ")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\f":
            out.append("\\f")
        elif code < 0x20 or code > 0x7E:
            if code > 0xFFFF:  # UTF-16 surrogate pair, as Java stores it
                code -= 0x10000
                out.append(f"\\u{0xD800 + (code >> 10):04X}\\u{0xDC00 + (code & 0x3FF):04X}")
            else:
                out.append(f"\\u{code:04X}")
        else:
            out.append(ch)
    return "".join(out)


def _unescape(text: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch != "\\" or i + 1 >= len(text):
            out.append(ch)
            i += 1
            continue
        nxt = text[i + 1]
        if nxt == "u" and i + 6 <= len(text):
            out.append(chr(int(text[i + 2 : i + 6], 16)))
            i += 6
            continue
        out.append({"t": "\t", "n": "\n", "r": "\r", "f": "\f"}.get(nxt, nxt))
        i += 2
    # re-join UTF-16 surrogate pairs
    return "".join(out).encode("utf-16", "surrogatepass").decode("utf-16")


def parse_properties(text: str) -> dict[str, str]:
    """Parse Java `.properties` text (logical lines, escapes, `=`/`:`/space separators)."""
    props: dict[str, str] = {}
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i].lstrip(" \t\f")
        i += 1
        if not line or line[0] in "#!":
            continue
        while _ends_with_continuation(line) and i < len(lines):
            line = line[:-1] + lines[i].lstrip(" \t\f")
            i += 1
        key_end = 0
        while key_end < len(line):
            c = line[key_end]
            if c == "\\":
                key_end += 2
                continue
            if c in "=: \t\f":
                break
            key_end += 1
        key = line[:key_end]
        rest = line[key_end:].lstrip(" \t\f")
        if rest[:1] in ("=", ":"):
            rest = rest[1:].lstrip(" \t\f")
        props[_unescape(key)] = _unescape(rest)
    return props


def _ends_with_continuation(line: str) -> bool:
    n = len(line) - len(line.rstrip("\\"))
    return n % 2 == 1


def render_properties(props: dict[str, str], *, now: datetime | None = None) -> str:
    now = now or datetime.now(timezone.utc)
    head = [
        f"#Properties saved on {now.strftime('%Y-%m-%dT%H:%M:%S.%f')[:-3]}Z",
        "#" + now.strftime("%a %b %d %H:%M:%S UTC %Y"),
    ]
    body = [f"{_escape(k, True)}={_escape(v, False)}" for k, v in props.items()]
    return "\n".join(head + body) + "\n"


def table_checksum(props: dict[str, str]) -> str:
    """CRC-32 of `<database>.<table>` (spec §1.3)."""
    db = props.get("hoodie.database.name", "")
    return str(zlib.crc32(f"{db}.{props['hoodie.table.name']}".encode()))


# -- typed options ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Option:
    """One `hoodie.*` option: its key, default and value type."""

    key: str
    default: Any
    kind: type = str
    doc: str = ""

    def get(self, props: dict[str, str]) -> Any:
        raw = props.get(self.key)
        if raw is None or raw == "":
            return self.default
        try:
            if self.kind is bool:
                if str(raw).lower() not in ("true", "false"):
                    raise ValueError(raw)
                return str(raw).lower() == "true"
            return self.kind(raw)
        except (TypeError, ValueError) as e:
            raise InvalidOptionError(f"option {self.key}={raw!r} is not a valid {self.kind.__name__}") from e


class TableOptions:
    """Keys persisted in `hoodie.properties`."""

    NAME = Option("hoodie.table.name", None)
    DATABASE = Option("hoodie.database.name", "")
    TYPE = Option("hoodie.table.type", "COPY_ON_WRITE")
    VERSION = Option("hoodie.table.version", TABLE_VERSION, int)
    TIMELINE_LAYOUT = Option("hoodie.timeline.layout.version", TIMELINE_LAYOUT_VERSION, int)
    RECORD_KEY_FIELDS = Option("hoodie.table.recordkey.fields", "")
    PRECOMBINE_FIELD = Option("hoodie.table.precombine.field", "")
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

    INDEX_TYPE = Option("hoodie.index.type", "BLOOM")
    BUCKET_NUM = Option("hoodie.bucket.index.num.buckets", 256, int)
    BUCKET_HASH_FIELD = Option("hoodie.bucket.index.hash.field", "")
    LOG_BLOCK_FORMAT = Option("hoodie.logfile.data.block.format", "parquet")
    SIMPLE_UPDATE_PARTITION_PATH = Option("hoodie.simple.index.update.partition.path", True, bool)
    BLOOM_UPDATE_PARTITION_PATH = Option("hoodie.bloom.index.update.partition.path", True, bool)
    MAX_FILE_SIZE = Option("hoodie.parquet.max.file.size", 120 * 1024 * 1024, int)
    SMALL_FILE_LIMIT = Option("hoodie.parquet.small.file.limit", 100 * 1024 * 1024, int)
    RECORD_SIZE_ESTIMATE = Option("hoodie.copyonwrite.record.size.estimate", 1024, int)
    # Deliberate deviation: Hudi 0.14 defaults to gzip; snappy is several times faster and
    # every reader accepts it. Set the key to `gzip` to match Spark byte for byte.
    COMPRESSION = Option("hoodie.parquet.compression.codec", "snappy")
    COMBINE_BEFORE_INSERT = Option("hoodie.combine.before.insert", False, bool)
    INSERT_DROP_DUPLICATES = Option("hoodie.datasource.write.insert.drop.duplicates", False, bool)
    BLOOM_NUM_ENTRIES = Option("hoodie.index.bloom.num_entries", 60000, int)
    BLOOM_FPP = Option("hoodie.index.bloom.fpp", 1e-9, float)
    BLOOM_FILTER_TYPE = Option("hoodie.bloom.index.filter.type", "DYNAMIC_V0")
    BLOOM_DYNAMIC_MAX_ENTRIES = Option("hoodie.bloom.index.filter.dynamic.max.entries", 100000, int)
    HEARTBEAT_INTERVAL_MS = Option("hoodie.client.heartbeat.interval_in_ms", 60000, int)
    HEARTBEAT_TOLERABLE_MISSES = Option("hoodie.client.heartbeat.tolerable.misses", 2, int)
    LOCK_EXPIRE_MINUTES = Option("hoodie.write.lock.filesystem.expire", 1.0, float)
    LOCK_WAIT_MS = Option("hoodie.write.lock.wait_time_ms", 60000, int)
    # several writers at once (OPTIMISTIC_CONCURRENCY_CONTROL) need an atomic create-if-absent
    # from the store, or a lock provider outside it (lock.table_lock)
    CONCURRENCY_MODE = Option("hoodie.write.concurrency.mode", "SINGLE_WRITER")
    LOCK_PROVIDER = Option("hoodie.write.lock.provider", "")
    PARALLELISM = Option("airflow_lake.parallelism", 0, int)
    DROP_METADATA_TABLE = Option("airflow_lake.metadata.table.drop", True, bool)
    # new naive timestamp columns: false = Avro timestamp-* (UTC instants, Spark's TimestampType,
    # read by every engine), true = local-timestamp-* (hudi-rs 0.5 cannot read those)
    TIMESTAMP_WITHOUT_TIMEZONE = Option("airflow_lake.timestamp.without.timezone", False, bool)


# -- hoodie.properties --------------------------------------------------------------------


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
        return self.get(TableOptions.TYPE)

    @property
    def is_mor(self) -> bool:
        return self.table_type == "MERGE_ON_READ"

    @property
    def version(self) -> int:
        return self.get(TableOptions.VERSION)

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
    def precombine_field(self) -> str | None:
        return self.get(TableOptions.PRECOMBINE_FIELD) or None

    @property
    def hive_style(self) -> bool:
        return self.get(TableOptions.HIVE_STYLE)

    @property
    def url_encode(self) -> bool:
        return self.get(TableOptions.URL_ENCODE)

    @property
    def keygen_class(self) -> str:
        return self.get(TableOptions.KEYGEN)

    @property
    def populate_meta_fields(self) -> bool:
        return self.get(TableOptions.POPULATE_META_FIELDS)

    @property
    def payload_class(self) -> str:
        return self.get(TableOptions.PAYLOAD_CLASS)

    @property
    def timezone(self) -> str:
        return self.get(TableOptions.TIMEZONE).upper()

    @property
    def archive_folder(self) -> str:
        folder = self.get(TableOptions.ARCHIVE_FOLDER)
        return folder if folder.startswith(".hoodie") else f".hoodie/{folder}"

    @staticmethod
    def load(storage: Storage) -> TableConfig:
        """Read `hoodie.properties` (falling back to the backup) and validate the checksum."""
        errors = []
        for path in (PROPERTIES, PROPERTIES_BACKUP):
            if not storage.exists(path):
                continue
            props = parse_properties(storage.read(path).decode("latin-1"))
            problem = _validate(props)
            if problem is None:
                return TableConfig(props)
            errors.append(f"{path}: {problem}")
        if not errors:
            raise TableNotFoundError(f"{storage.uri} is not a Hudi table: no {PROPERTIES}")
        raise InvalidTableError(f"table {storage.uri}: invalid table config ({'; '.join(errors)})")

    def save(self, storage: Storage, *, create: bool = False) -> None:
        """Write `hoodie.properties` with a fresh checksum (Java's backup protocol on update)."""
        self.props["hoodie.table.checksum"] = table_checksum(self.props)
        text = render_properties(self.props).encode("latin-1")
        if create:
            if not storage.create(PROPERTIES, text):
                raise InvalidTableError(f"table {storage.uri}: {PROPERTIES} already exists")
            return
        if storage.exists(PROPERTIES_BACKUP):
            storage.write(PROPERTIES, storage.read(PROPERTIES_BACKUP))
        storage.write(PROPERTIES_BACKUP, storage.read(PROPERTIES))
        storage.write(PROPERTIES, text)
        TableConfig.load(storage)
        storage.delete(PROPERTIES_BACKUP)


# -- payloads and merge options --------------------------------------------------------

_WRITE_PAYLOAD_KEYS = ("hoodie.datasource.write.payload.class", "hoodie.compaction.payload.class")
_MERGER_STRATEGY_KEYS = ("hoodie.compaction.record.merger.strategy", "hoodie.datasource.write.record.merger.strategy")
_MERGER_IMPL_KEYS = ("hoodie.datasource.write.record.merger.impls", "hoodie.write.record.merger.impls")
_PRECOMBINE_KEYS = ("hoodie.datasource.write.precombine.field", "hoodie.payload.ordering.field")


def _payload_name(name: str) -> str:
    return name.strip().replace("com.uber.hoodie", "org.apache.hudi")  # as HoodieTableConfig reads it


def unsupported_merge(props: dict[str, str], options: dict[str, Any] | None, *, write: bool) -> str | None:
    """What makes this table's (or this write's) record merging differ from what we implement
    (DefaultHoodieRecordPayload, OverwriteWithLatestAvroPayload, the default merger), or None."""
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


def _validate(props: dict[str, str]) -> str | None:
    if "hoodie.table.name" not in props:
        return "hoodie.table.name is missing"
    checksum = props.get("hoodie.table.checksum")
    if checksum is None:
        return "hoodie.table.checksum is missing"
    expected = table_checksum(props)
    if checksum != expected:
        return f"checksum {checksum} does not match {expected}"
    return None


def _split(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


def options_value(options: dict[str, Any] | None, option: Option, props: dict[str, str] | None = None) -> Any:
    """Resolve a write option from call options, then table properties, then its default."""
    merged: dict[str, str] = dict(props or {})
    for k, v in (options or {}).items():
        merged[k] = str(v).lower() if isinstance(v, bool) else str(v)
    return option.get(merged)
