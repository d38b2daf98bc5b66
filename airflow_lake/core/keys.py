"""Key generators and partition paths (spec §5.5), vectorised over Arrow columns.

Implemented (Java's behaviour, with their `...Avro...` twins): Simple, Complex,
Nonpartitioned, TimestampBased (see `keygen_timestamp`) and Custom (`field:SIMPLE` /
`field:TIMESTAMP` parts). Any other class is refused by name when a write needs it.
"""

from __future__ import annotations

from dataclasses import dataclass
from dataclasses import field as dataclass_field
from functools import cached_property
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .config import (
    COMPLEX_KEYGEN,
    CUSTOM_KEYGEN,
    NONPARTITIONED_KEYGEN,
    SIMPLE_KEYGEN,
    TIMESTAMP_KEYGEN,
    TableConfig,
)
from .errors import InvalidOptionError, MissingFieldError, PartitionPathError, RecordKeyError, UnsupportedFeatureError
from .keygen_timestamp import PERSISTED_KEYS, TimestampPartitioner

DEFAULT_PARTITION = "__HIVE_DEFAULT_PARTITION__"
NULL_KEY = "__null__"
EMPTY_KEY = "__empty__"
# '%' first, so that the escapes themselves are not escaped again
_URL_ESCAPE = ["%"] + [chr(c) for c in range(0x20)] + list("\"#'*/:=?\\\x7f{[]^")

_KEYGEN_PACKAGE = "org.apache.hudi.keygen."
# every class name Java 0.14/0.15 may record, mapped to the generator we run for it
KEYGEN_CLASSES = {
    SIMPLE_KEYGEN: SIMPLE_KEYGEN, _KEYGEN_PACKAGE + "SimpleAvroKeyGenerator": SIMPLE_KEYGEN,
    COMPLEX_KEYGEN: COMPLEX_KEYGEN, _KEYGEN_PACKAGE + "ComplexAvroKeyGenerator": COMPLEX_KEYGEN,
    NONPARTITIONED_KEYGEN: NONPARTITIONED_KEYGEN,
    _KEYGEN_PACKAGE + "NonpartitionedAvroKeyGenerator": NONPARTITIONED_KEYGEN,
    TIMESTAMP_KEYGEN: TIMESTAMP_KEYGEN, _KEYGEN_PACKAGE + "TimestampBasedAvroKeyGenerator": TIMESTAMP_KEYGEN,
    CUSTOM_KEYGEN: CUSTOM_KEYGEN, _KEYGEN_PACKAGE + "CustomAvroKeyGenerator": CUSTOM_KEYGEN,
}
# `hoodie.table.keygenerator.type` (Hudi 1.0's KeyGeneratorType) names of the same classes
KEYGEN_TYPES = {
    "SIMPLE": SIMPLE_KEYGEN, "SIMPLE_AVRO": _KEYGEN_PACKAGE + "SimpleAvroKeyGenerator",
    "COMPLEX": COMPLEX_KEYGEN, "COMPLEX_AVRO": _KEYGEN_PACKAGE + "ComplexAvroKeyGenerator",
    "NON_PARTITION": NONPARTITIONED_KEYGEN, "NON_PARTITION_AVRO": _KEYGEN_PACKAGE + "NonpartitionedAvroKeyGenerator",
    "TIMESTAMP": TIMESTAMP_KEYGEN, "TIMESTAMP_AVRO": _KEYGEN_PACKAGE + "TimestampBasedAvroKeyGenerator",
    "CUSTOM": CUSTOM_KEYGEN, "CUSTOM_AVRO": _KEYGEN_PACKAGE + "CustomAvroKeyGenerator",
}
WRITE_KEYGEN_CLASS = "hoodie.datasource.write.keygenerator.class"
WRITE_KEYGEN_TYPE = "hoodie.datasource.write.keygenerator.type"
WRITE_PARTITION_FIELD = "hoodie.datasource.write.partitionpath.field"
PARTITION_TYPES = ("SIMPLE", "TIMESTAMP")


def declared_keygen(props: dict[str, str]) -> str:
    """The key generator class a table declares (class, else Hudi 1.0's type), or ""."""
    cls = (props.get("hoodie.table.keygenerator.class") or "").strip()
    if cls:
        return cls
    kind = (props.get("hoodie.table.keygenerator.type") or "").strip().upper()
    return KEYGEN_TYPES.get(kind, f"hoodie.table.keygenerator.type={kind}" if kind else "")


def split_typed_fields(value: str) -> list[tuple[str, str | None]]:
    """`ts:TIMESTAMP,city:SIMPLE` (or plain names) as (field, type or None) pairs."""
    out = []
    for part in value.split(","):
        name, _, kind = part.strip().partition(":")
        if name.strip():
            out.append((name.strip(), kind.strip().upper() or None))
    return out


@dataclass(frozen=True)
class KeyGenerator:
    """Renders `_hoodie_record_key` and `_hoodie_partition_path` for a batch of rows."""

    table: str
    record_key_fields: tuple[str, ...]
    partition_fields: tuple[str, ...]
    keygen_class: str
    hive_style: bool = False
    url_encode: bool = False
    partition_types: tuple[str, ...] = ()  # SIMPLE or TIMESTAMP per partition field
    settings: dict[str, str] = dataclass_field(default_factory=dict, compare=False, repr=False)
    problem: tuple[type, str] | None = dataclass_field(default=None, compare=False)  # why writes are refused

    @staticmethod
    def for_table(cfg: TableConfig, uri: str, options: dict[str, Any] | None = None) -> KeyGenerator:
        """The table's key generator; write options fill settings hoodie.properties lacks."""
        opts = {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in (options or {}).items()}
        settings = {**cfg.props, **opts}
        keys, parts = tuple(cfg.record_key_fields), tuple(cfg.partition_fields)
        declared = declared_keygen(cfg.props)
        problem: tuple[type, str] | None = None
        written = (opts.get(WRITE_KEYGEN_CLASS) or KEYGEN_TYPES.get((opts.get(WRITE_KEYGEN_TYPE) or "").upper(), "")
                   or opts.get(WRITE_KEYGEN_TYPE, "")).strip()
        if not declared:
            declared = written or (NONPARTITIONED_KEYGEN if not parts
                                   else COMPLEX_KEYGEN if len(keys) > 1 else SIMPLE_KEYGEN)
        keygen = KEYGEN_CLASSES.get(declared)
        if keygen is None:
            problem = (UnsupportedFeatureError,
                       f"table {uri}: key generator {declared} is not implemented by airflow-lake (implemented: "
                       "Simple, Complex, Nonpartitioned, TimestampBased, Custom and their Avro variants); "
                       "refusing to write rather than guess its record keys and partition paths")
            keygen = declared
        elif written and KEYGEN_CLASSES.get(written) != keygen:
            problem = (InvalidOptionError, f"table {uri}: the write option {WRITE_KEYGEN_CLASS}={written} differs "
                                           f"from the table's key generator {declared}")
        for key in PERSISTED_KEYS:
            if key in opts and key in cfg.props and opts[key] != cfg.props[key] and problem is None:
                problem = (InvalidOptionError, f"table {uri}: the write option {key}={opts[key]!r} differs from "
                                               f"the table's {key}={cfg.props[key]!r}; partitions would be named "
                                               "differently from the existing ones")
        types: tuple[str, ...] = ("SIMPLE",) * len(parts)
        if keygen == TIMESTAMP_KEYGEN:
            types = ("TIMESTAMP",) * len(parts)
            if problem is None and (len(parts) != 1 or len(keys) != 1):
                problem = (InvalidOptionError,
                           f"table {uri}: TimestampBasedKeyGenerator takes one record key field and one "
                           f"partition field (Java refuses others); the table has record key fields {list(keys)} "
                           f"and partition fields {list(parts)}")
        elif keygen == CUSTOM_KEYGEN:
            types, custom_problem = _custom_types(uri, cfg, settings)
            problem = problem or custom_problem
        return KeyGenerator(uri, keys, parts, keygen, cfg.hive_style, cfg.url_encode, types, settings, problem)

    @property
    def is_complex(self) -> bool:
        return self.keygen_class.endswith("ComplexKeyGenerator") or len(self.record_key_fields) > 1

    @property
    def partition_values_are_fields(self) -> bool:
        """Whether partition path values are the partition columns' own values (so filters on
        those columns can prune partitions); not so for TIMESTAMP parts."""
        return all(t == "SIMPLE" for t in self.partition_types)

    @cached_property
    def _timestamp(self) -> TimestampPartitioner:
        return TimestampPartitioner.from_settings(self.settings, f"table {self.table}")

    def check_writable(self) -> None:
        """Raise the reason this key generator cannot render keys for a write, if any."""
        if self.problem is not None:
            raise self.problem[0](self.problem[1])
        if "TIMESTAMP" in self.partition_types:
            _ = self._timestamp

    def check_fields(self, data: pa.Table, *, partition: bool = True) -> None:
        needed = list(self.record_key_fields) + (list(self.partition_fields) if partition else [])
        missing = [f for f in needed if _column(data, f) is None]
        if missing:
            raise MissingFieldError(f"table {self.table}: the data has no column {missing[0]!r} "
                                    f"(record key fields {list(self.record_key_fields)}, partition fields "
                                    f"{list(self.partition_fields)}); columns: {data.column_names}")

    # -- record keys -----------------------------------------------------------------------
    def record_keys(self, data: pa.Table) -> pa.Array:
        """The record key of every row; a null or empty key is a `RecordKeyError`."""
        if self.problem is not None and self.problem[0] is UnsupportedFeatureError:
            raise UnsupportedFeatureError(self.problem[1])  # never guess another class's keys
        self.check_fields(data, partition=False)
        if not self.is_complex:
            field = self.record_key_fields[0]
            keys = _as_string(_column(data, field))
            bad = pc.or_kleene(pc.is_null(keys), pc.equal(keys, "")).fill_null(True)
            if pc.any(bad).as_py():
                row = pc.index(bad, True).as_py()
                raise RecordKeyError(f"table {self.table}: record key field {field!r} is "
                                     f"{'null' if keys[row].as_py() is None else 'empty'} in row {row}")
            return keys
        parts = []
        all_missing = None
        for field in self.record_key_fields:
            values = _as_string(_column(data, field))
            missing = pc.or_kleene(pc.is_null(values), pc.equal(values, "")).fill_null(True)
            all_missing = missing if all_missing is None else pc.and_(all_missing, missing)
            values = pc.if_else(pc.is_null(values), NULL_KEY, values)
            values = pc.if_else(pc.equal(values, ""), EMPTY_KEY, values)
            parts.append(pc.binary_join_element_wise(f"{field}:", values, ""))
        if pc.any(all_missing).as_py():
            row = pc.index(all_missing, True).as_py()
            raise RecordKeyError(f"table {self.table}: every record key field {list(self.record_key_fields)} "
                                 f"is null or empty in row {row}")
        return _combine(pc.binary_join_element_wise(*parts, ","))

    # -- partition paths -------------------------------------------------------------------
    def partition_paths(self, data: pa.Table) -> pa.Array:
        """The relative partition path of every row ("" when non-partitioned)."""
        if not self.partition_fields or self.keygen_class.endswith("NonpartitionedKeyGenerator"):
            return pa.repeat(pa.scalar("", pa.string()), len(data))
        self.check_writable()
        self.check_fields(data)
        parts = []
        types = self.partition_types or ("SIMPLE",) * len(self.partition_fields)
        for field, kind in zip(self.partition_fields, types, strict=True):
            if kind == "TIMESTAMP":
                # Java: a null becomes the epoch's first unit, never the default partition
                values = self._timestamp.render(_combine(_column(data, field)), field)
                if self.url_encode:
                    values = _url_encode(values)
                if self.hive_style:
                    values = pc.binary_join_element_wise(f"{field}=", values, "")
                parts.append(values)
                continue
            # each distinct value is rendered once (partition columns have few), then spread out
            col = _combine(_column(data, field))
            encoded = col if pa.types.is_dictionary(col.type) else col.dictionary_encode()
            distinct = pa.concat_arrays([encoded.dictionary, pa.nulls(1, encoded.dictionary.type)])
            values = _as_string(distinct)
            values = pc.if_else(pc.or_kleene(pc.is_null(values), pc.equal(values, "")).fill_null(True),
                                DEFAULT_PARTITION, values)
            if self.url_encode:
                values = _url_encode(values)
            if self.hive_style:
                values = pc.binary_join_element_wise(f"{field}=", values, "")
            parts.append(values.take(encoded.indices.fill_null(len(distinct) - 1)))
        paths = _combine(parts[0] if len(parts) == 1 else pc.binary_join_element_wise(*parts, "/"))
        check_partition_paths(self.table, pc.unique(paths), self.partition_fields, self.hive_style)
        return paths


def _custom_types(uri: str, cfg: TableConfig, settings: dict[str, str]) -> tuple[tuple[str, ...], tuple | None]:
    """The `field:TYPE` list of a CustomKeyGenerator: from `hoodie.table.partition.fields` when it
    carries the types (Hudi 1.0 writes them), else from `hoodie.datasource.write.partitionpath.field`
    (Java 0.14/0.15 keeps them only in the writer's config)."""
    fields = list(cfg.partition_fields)
    typed = split_typed_fields(cfg.get_raw_partition_fields())
    if not any(kind for _, kind in typed):
        typed = split_typed_fields(settings.get(WRITE_PARTITION_FIELD, ""))
    simple = ("SIMPLE",) * len(fields)
    if not fields:
        return (), None
    example = ",".join(f"{f}:SIMPLE|TIMESTAMP" for f in fields)
    if not typed or any(kind is None for _, kind in typed):
        return simple, (InvalidOptionError,
                        f"table {uri}: CustomKeyGenerator needs each partition field's type, which the table's "
                        f"hoodie.properties does not hold; pass {WRITE_PARTITION_FIELD}={example} as an option")
    if [name for name, _ in typed] != fields:
        return simple, (InvalidOptionError,
                        f"table {uri}: {WRITE_PARTITION_FIELD}={settings.get(WRITE_PARTITION_FIELD)!r} names "
                        f"other fields than the table's partition fields {fields}")
    bad = [kind for _, kind in typed if kind not in PARTITION_TYPES]
    if bad:
        return simple, (InvalidOptionError,
                        f"table {uri}: CustomKeyGenerator partition type {bad[0]!r} is not SIMPLE or TIMESTAMP")
    return tuple(kind for _, kind in typed), None


NAME_MAX = 255  # bytes in one file or folder name (Linux, most object-store gateways)
_URL_ENCODE_KEY = "hoodie.datasource.write.partitionpath.urlencode"
# (regex over a whole partition path, why it is refused); only distinct paths are tested
_PATH_RULES = (
    (r"^/|//|/$", "an empty path segment or a leading '/' (a value is empty or starts or ends with '/')"),
    (r"(^|/)\.\.?(/|$)", "a '.' or '..' segment, which would leave its folder"),
    (r"^\.hoodie(/|$)", "'.hoodie', the table's metadata folder"),
    (r"\\", "a '\\', which some file systems read as a separator"),
    (r"[\x00-\x1f\x7f]", "a control character (0x00-0x1F, 0x7F), which hudi-rs refuses in paths"),
)


def check_partition_paths(table: str, paths: pa.Array | list[str], fields: tuple[str, ...] | list[str] = (),
                          hive_style: bool = False) -> None:
    """Refuse partition paths that would leave the base path, hide in `.hoodie`, carry
    characters readers refuse, or have a folder name longer than `NAME_MAX` UTF-8 bytes.
    `paths` are the distinct rendered (encoded) paths; the tests are vectorised."""
    paths = pa.array(paths, pa.string()) if isinstance(paths, list) else _combine(paths)
    if not len(paths):
        return
    for pattern, why in _PATH_RULES:
        bad = pc.match_substring_regex(paths, pattern).fill_null(False)
        if pc.any(bad).as_py():
            path = paths.filter(bad)[0].as_py()
            raise PartitionPathError(f"table {table}: {_which(path, fields, hive_style)} gives partition path "
                                     f"{_short(path)}, which has {why}; create the table with {_URL_ENCODE_KEY}=true "
                                     "to write such values encoded")
    segments = pc.list_flatten(pc.split_pattern(paths, "/"))
    sizes = pc.binary_length(segments)
    if pc.max(sizes).as_py() > NAME_MAX:
        segment = segments.filter(pc.greater(sizes, NAME_MAX))[0].as_py()
        path = next(p for p in paths.to_pylist() if segment in p.split("/"))
        raise PartitionPathError(f"table {table}: {_which(path, fields, hive_style)} gives a folder name "
                                 f"of {len(segment.encode())} bytes (UTF-8, after encoding); "
                                 f"file systems allow {NAME_MAX}: shorten or hash the partition value")


def _which(path: str, fields, hive_style: bool) -> str:
    """'partition field F value V' for an offending path, as far as the path tells."""
    segments = path.split("/")
    if len(fields) == 1:
        field = fields[0]
        value = path[len(field) + 1:] if hive_style and path.startswith(f"{field}=") else path
        return f"partition field {field!r} value {_short(value)}"
    if fields and len(segments) == len(fields):
        for field, seg in zip(fields, segments, strict=True):
            value = seg[len(field) + 1:] if hive_style and seg.startswith(f"{field}=") else seg
            if seg in ("", ".", "..") or seg == ".hoodie" or len(seg.encode()) > NAME_MAX \
                    or any(c == "\\" or ord(c) < 0x20 or c == "\x7f" for c in seg):
                return f"partition field {field!r} value {_short(value)}"
    return f"a value of partition fields {list(fields)}" if fields else "a partition value"


def _short(text: str, limit: int = 80) -> str:
    return repr(text) if len(text) <= limit else f"{text[:limit]!r}... ({len(text)} characters)"


def _column(data: pa.Table, field: str) -> pa.ChunkedArray | None:
    """A top-level or dotted nested column."""
    if field in data.column_names:
        return data.column(field)
    head, _, rest = field.partition(".")
    if not rest or head not in data.column_names:
        return None
    col = data.column(head)
    for part in rest.split("."):
        if not pa.types.is_struct(col.type) or col.type.get_field_index(part) < 0:
            return None
        col = pc.struct_field(col, part)
    return col


def _as_string(col: pa.ChunkedArray) -> pa.Array:
    col = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    if pa.types.is_dictionary(col.type):
        col = col.dictionary_decode()
    if pa.types.is_boolean(col.type):
        return pc.if_else(col, "true", "false")
    if pa.types.is_string(col.type):
        return col
    if pa.types.is_timestamp(col.type):
        return _timestamp_long(col).cast(pa.string())
    if pa.types.is_floating(col.type):
        return _java_floats(col)
    return col.cast(pa.string())


def _timestamp_long(col: pa.Array) -> pa.Array:
    """A timestamp as Java's Avro path keys it (`HoodieAvroUtils.getNestedFieldValAsString`,
    `...keygenerator.consistent.logical.timestamp.enabled=false`, the default): the long it
    is written as, milliseconds for `timestamp[ms]` (timestamp-millis), else microseconds
    (timestamp-micros). Independent of the column's (or a Spark session's) time zone."""
    longs = col.cast(pa.int64())
    if col.type.unit == "s":
        return pc.multiply(longs, 1_000_000)
    if col.type.unit == "ns":
        return pc.divide(longs, 1000)  # (nanoseconds are written only when whole microseconds)
    return longs


def _java_floats(col: pa.Array) -> pa.Array:
    """Floating values as Java's `Double.toString` / `Float.toString` print them: the shortest
    digits, plain with at least one decimal from 10^-3 to 10^7 (`1.0`, `0.001`), else
    `1.0E7` / `1.0E-4`; `NaN`, `Infinity`, `-Infinity`. Vectorised for plain values; the rare
    others are formatted one by one."""
    text = col.cast(pa.string())
    plain = pc.invert(pc.match_substring_regex(text, r"[.eEn]"))  # whole numbers: "1" -> "1.0"
    text = pc.if_else(pc.fill_null(plain, False), pc.binary_join_element_wise(text, ".0", ""), text)
    magnitude = pc.abs(col)
    other = pc.invert(pc.or_kleene(pc.and_(pc.greater_equal(magnitude, 1e-3), pc.less(magnitude, 1e7)),
                                   pc.equal(col, 0))).fill_null(False)
    if not pc.any(other).as_py():
        return text
    where = np.flatnonzero(other.to_numpy(zero_copy_only=False))
    values = col.to_numpy(zero_copy_only=False)
    out = text.to_pylist()
    for i in where:  # (outside Java's plain range: few values in practice)
        out[i] = _java_scientific(values[i])
    return pa.array(out, pa.string())


def _java_scientific(value: np.floating) -> str:
    if np.isnan(value):
        return "NaN"
    if np.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    mantissa, exponent = np.format_float_scientific(value, unique=True, trim="0").split("e")
    return f"{mantissa}E{int(exponent)}"


def _combine(arr) -> pa.Array:
    return arr.combine_chunks() if isinstance(arr, pa.ChunkedArray) else arr


def _url_encode(values: pa.Array) -> pa.Array:
    for ch in _URL_ESCAPE:
        values = pc.replace_substring(values, ch, f"%{ord(ch):02X}")
    # Java leaves '.', '..' and '.hoodie' as they are (folders that leave their parent or hide
    # in the metadata folder); their first dot is encoded here, which decoding undoes
    dots = pc.match_substring_regex(values, r"^\.(\.?|hoodie)$").fill_null(False)
    escaped = pc.binary_join_element_wise("%2E", pc.utf8_slice_codeunits(values, 1), "")
    return pc.if_else(dots, escaped, values)


def parse_partition_path(path: str, fields: list[str], hive_style: bool,
                         url_encoded: bool = False) -> dict[str, list[str | None]]:
    """The values a partition path may stand for, per partition field (as strings; None is
    null). A field absent from the answer could hold anything: the path cannot be mapped to
    it (more segments than fields, values holding `/` without URL encoding). Ambiguous
    renderings give several candidates: `__HIVE_DEFAULT_PARTITION__` is null or "" (or
    that very text), and without URL encoding `%XX` may be literal or an escape."""
    import re

    if not fields or not path:
        return {}
    segments = path.split("/")
    raw: dict[str, str] = {}
    if hive_style:
        if len(fields) == 1:  # one field: everything after `field=` is its value, `/` included
            if path.startswith(f"{fields[0]}="):
                raw[fields[0]] = path[len(fields[0]) + 1:]
        elif len(segments) == len(fields) and all(
                seg.startswith(f"{name}=") for seg, name in zip(segments, fields, strict=True)):
            raw = {name: seg[len(name) + 1:] for seg, name in zip(segments, fields, strict=True)}
    elif len(fields) == 1:
        raw[fields[0]] = path
    elif len(segments) == len(fields):
        raw = dict(zip(fields, segments, strict=True))

    def unescape(text: str) -> str:  # Java's PartitionPathEncodeUtils.unescapePathName
        return re.sub(r"%([0-9A-Fa-f]{2})", lambda m: chr(int(m.group(1), 16)), text)

    values: dict[str, list[str | None]] = {}
    for name, text in raw.items():
        if url_encoded:
            if "/" in text:  # an encoded value never holds `/`: the path is not ours to map
                continue
            found: list[str | None] = [unescape(text)]
        else:
            found = [text] + ([unescape(text)] if re.search(r"%[0-9A-Fa-f]{2}", text) else [])
        if text in (DEFAULT_PARTITION, "default"):
            found += [None, ""]
        values[name] = list(dict.fromkeys(found))
    return values
