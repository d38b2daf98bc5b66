"""User values in error messages: any Arrow scalar (or Python value) rendered as short text by
code that cannot fail. Describing a refusal must never raise instead (pyarrow converts
nanosecond timestamps and durations to Python only with pandas, which the core does not need)."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

LIMIT = 80  # characters of a rendered value
_ITEMS = 5  # elements of a list or map, fields of a struct


def describe_value(value: Any, limit: int = LIMIT) -> str:
    """`value` (an Arrow scalar, or a Python value) as text of at most about `limit`
    characters; never raises."""
    try:
        text = _render(value, limit) if isinstance(value, pa.Scalar) else repr(value)
    except Exception:  # noqa: BLE001 (a message must not fail)
        text = f"<a {getattr(value, 'type', type(value).__name__)} value>"
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


def _render(value: pa.Scalar, limit: int) -> str:
    if not value.is_valid:
        return "null"
    t = value.type
    if isinstance(t, pa.BaseExtensionType):
        return _render(value.value, limit)
    if pa.types.is_dictionary(t):
        return _render(value.value, limit)
    if pa.types.is_struct(t):
        fields = [f"{t.field(i).name}: {_render(value[i], limit)}" for i in range(min(t.num_fields, _ITEMS))]
        return "{" + ", ".join(fields) + (", ..." if t.num_fields > _ITEMS else "") + "}"
    if pa.types.is_map(t):
        entries = value.values  # struct array of key and value
        shown = [f"{_render(e[0], limit)}: {_render(e[1], limit)}" for e in entries.slice(0, _ITEMS)]
        return "{" + ", ".join(shown) + (", ..." if len(entries) > _ITEMS else "") + "}"
    if _is_list(t):
        items = value.values
        shown = [_render(e, limit) for e in items.slice(0, _ITEMS)]
        return "[" + ", ".join(shown) + (", ..." if len(items) > _ITEMS else "") + "]"
    if pa.types.is_decimal(t):
        return str(value.as_py())
    if pa.types.is_duration(t):  # Python's timedelta has no nanoseconds
        return f"{value.cast(pa.int64()).as_py()} {t.unit}"
    if pa.types.is_timestamp(t) or pa.types.is_time(t) or pa.types.is_date(t):
        return value.cast(pa.string()).as_py()  # Arrow's own ISO text: every unit, no pandas
    return repr(value.as_py())


def _is_list(t: pa.DataType) -> bool:
    return pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t) \
        or pa.types.is_list_view(t) or pa.types.is_large_list_view(t)

