"""Key generators and partition paths (spec §5.5), vectorised over Arrow columns."""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from .config import COMPLEX_KEYGEN, NONPARTITIONED_KEYGEN, SIMPLE_KEYGEN, TableConfig
from .errors import MissingFieldError, PartitionPathError, RecordKeyError

DEFAULT_PARTITION = "__HIVE_DEFAULT_PARTITION__"
NULL_KEY = "__null__"
EMPTY_KEY = "__empty__"
# '%' first, so that the escapes themselves are not escaped again
_URL_ESCAPE = ["%"] + [chr(c) for c in range(0x20)] + list("\"#'*/:=?\\\x7f{[]^")


@dataclass(frozen=True)
class KeyGenerator:
    """Renders `_hoodie_record_key` and `_hoodie_partition_path` for a batch of rows."""

    table: str
    record_key_fields: tuple[str, ...]
    partition_fields: tuple[str, ...]
    keygen_class: str
    hive_style: bool = False
    url_encode: bool = False

    @staticmethod
    def for_table(cfg: TableConfig, uri: str) -> KeyGenerator:
        keygen = cfg.keygen_class or (
            NONPARTITIONED_KEYGEN if not cfg.partition_fields
            else COMPLEX_KEYGEN if len(cfg.record_key_fields) > 1 else SIMPLE_KEYGEN
        )
        return KeyGenerator(uri, tuple(cfg.record_key_fields), tuple(cfg.partition_fields),
                            keygen, cfg.hive_style, cfg.url_encode)

    @property
    def is_complex(self) -> bool:
        return self.keygen_class.endswith("ComplexKeyGenerator") or len(self.record_key_fields) > 1

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
        self.check_fields(data)
        parts = []
        for field in self.partition_fields:
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
    text = col.cast(pa.string())
    if pa.types.is_floating(col.type):
        # Java's Double.toString keeps ".0" on whole numbers (1.0, not 1)
        plain = pc.invert(pc.match_substring_regex(text, r"[.eEn]"))
        text = pc.if_else(pc.fill_null(plain, False), pc.binary_join_element_wise(text, ".0", ""), text)
    return text


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


def parse_partition_path(path: str, fields: list[str], hive_style: bool) -> dict[str, str | None]:
    """Partition values (as strings) from a relative partition path."""
    if not fields or not path:
        return {}
    segments = path.split("/")
    values: dict[str, str | None] = {}
    if hive_style:
        for seg in segments:
            k, _, v = seg.partition("=")
            values[k] = v
    elif len(segments) == len(fields):
        values = dict(zip(fields, segments, strict=True))
    for k, v in values.items():
        if v == DEFAULT_PARTITION:
            values[k] = None
    return values
