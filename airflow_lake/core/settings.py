"""Table settings a caller gives (to create a table, or to write to it) against the settings
the table already has: every difference is refused, naming both values, as Apache Hudi's
writer does (`HoodieWriterUtils.validateTableConfig`). Pure values, no I/O."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from .config import TableConfig, TableOptions
from .errors import InvalidOptionError
from .keys import (
    KEYGEN_CLASSES,
    KEYGEN_TYPES,
    WRITE_KEYGEN_CLASS,
    WRITE_KEYGEN_TYPE,
    WRITE_PARTITION_FIELD,
    declared_keygen,
    split_typed_fields,
)
from .vocabulary import TABLE_TYPES


def _fields(value: Any) -> str:
    """A field list as Hudi stores it: names without spaces, comma separated."""
    items = value.split(",") if isinstance(value, str) else [str(v) for v in value]
    return ",".join(n for n, _ in split_typed_fields(",".join(items)))


def table_type_name(value: Any) -> str:
    """The table type `value` spells (`MOR`, `mor`, `merge_on_read`...), else its upper case."""
    return TABLE_TYPES.find(value) or str(value).strip().upper()


def _keygen(value: Any) -> str:
    text = str(value).strip()
    return KEYGEN_CLASSES.get(text, text)


def _keygen_type(value: Any) -> str:
    return _keygen(KEYGEN_TYPES.get(str(value).strip().upper(), str(value)))


def _flag(value: Any) -> str:
    return str(value).strip().lower()


def _text(value: Any) -> str:  # Hudi compares other settings with Spark's case-insensitive resolver
    return str(value).strip().lower()


# setting -> (how a value is compared, the table's value from its config or None when it records none)
_SETTINGS: dict[str, tuple[Callable[[Any], str], Callable[[TableConfig], Any]]] = {
    "name": (_text, lambda c: c.props.get(TableOptions.NAME.key)),
    "table_type": (table_type_name, lambda c: c.table_type),
    "record_key": (_fields, lambda c: c.record_key_fields),
    "partition_fields": (_fields, lambda c: c.partition_fields),
    "precombine_field": (_fields, lambda c: c.precombine_field or ""),
    "hive_style_partitioning": (_flag, lambda c: c.hive_style),
    "url_encode_partitions": (_flag, lambda c: c.url_encode),
    "drop_partition_columns": (_flag, lambda c: c.get(TableOptions.DROP_PARTITION_COLUMNS)),
    "key_generator": (_keygen, lambda c: declared_keygen(c.props) or None),
    "key_generator_type": (_keygen_type, lambda c: declared_keygen(c.props) or None),
    "populate_meta_fields": (_flag, lambda c: c.populate_meta_fields),
    "base_file_format": (_text, lambda c: c.props.get(TableOptions.BASE_FILE_FORMAT.key)),
}
# option keys (the table's own and the Spark writer's) naming a setting
OPTION_SETTINGS = {
    TableOptions.NAME.key: "name", "hoodie.datasource.write.table.name": "name",
    TableOptions.TYPE.key: "table_type", "hoodie.datasource.write.table.type": "table_type",
    TableOptions.RECORD_KEY_FIELDS.key: "record_key", "hoodie.datasource.write.recordkey.field": "record_key",
    TableOptions.PARTITION_FIELDS.key: "partition_fields", WRITE_PARTITION_FIELD: "partition_fields",
    TableOptions.PRECOMBINE_FIELD.key: "precombine_field",
    "hoodie.datasource.write.precombine.field": "precombine_field",
    TableOptions.HIVE_STYLE.key: "hive_style_partitioning", TableOptions.URL_ENCODE.key: "url_encode_partitions",
    TableOptions.DROP_PARTITION_COLUMNS.key: "drop_partition_columns",
    TableOptions.KEYGEN.key: "key_generator", WRITE_KEYGEN_CLASS: "key_generator",
    "hoodie.table.keygenerator.type": "key_generator_type", WRITE_KEYGEN_TYPE: "key_generator_type",
    TableOptions.POPULATE_META_FIELDS.key: "populate_meta_fields",
    TableOptions.BASE_FILE_FORMAT.key: "base_file_format",
}


def contradictions(config: TableConfig, given: Sequence[tuple[str, str, Any]]) -> list[str]:
    """Each (label, setting, value) given whose value differs from the table's, described."""
    found = []
    for label, setting, value in given:
        same, table_value = _SETTINGS[setting]
        ours = table_value(config)
        if value is None or ours is None or same(value) == same(ours):
            continue
        found.append(f"{label}={value!r} but the table has {same(ours) or 'none'!r}")
    return found


def check_table_settings(uri: str, config: TableConfig, *, options: dict[str, Any] | None = None,
                         **settings: Any) -> None:
    """Refuse, before anything is written, table settings (keywords of `_SETTINGS`, None when not
    given, and table keys among `options`) that differ from the table's, naming each value
    given and the table's."""
    given = [(name, name, value) for name, value in settings.items()]
    given += [(key, OPTION_SETTINGS[key], value) for key, value in (options or {}).items() if key in OPTION_SETTINGS]
    found = contradictions(config, given)
    if found:
        raise InvalidOptionError(f"table {uri}: settings given that contradict the table's own ({'; '.join(found)}); "
                                 "an existing table keeps the settings it was created with")
