"""The input stage of a frame write: the checks made from the input's schema alone (no rows),
and the executor functions computing every row's record key, partition path, delete flag and
sequence number with the table's key generator.

An engine builds the key frame from an `InputPlan` (a frame operation); the rules (which
columns, which checks, which types the table stores) are here, once.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..config import WriteOptions
from ..errors import RecordKeyError, SchemaError
from ..merge import KEY
from ..ordering import ORDER, ordering_key
from ..schema import IS_DELETED, META_FIELDS, conform, evolve, from_avro, resolve_names
from .execute import DEL, PART, SEQ
from .prepare import check_columns, resolvable_names

SOURCE_FILE = "_al_source_file"  # the file a row was read from (an engine's source position, if it has one)


@dataclass(frozen=True)
class KeySpec:
    """What the key functions need in an executor: the table context, the operation, the
    written columns conformed to the table schema, and the frame's output schema (the data
    columns and the work columns, as the engine declares them)."""

    ctx: object  # TableContext
    operation: str
    is_global: bool
    data_schema: pa.Schema
    out_schema: pa.Schema
    where: str
    ordering_fields: tuple[str, ...] = ()  # several: their key goes to the work column ORDER


@dataclass(frozen=True)
class InputPlan:
    """The input checked from its schema: column renames (case), the incoming columns, the
    table schema after this write (Avro), the key generator's input columns present, and
    whether every column already has its stored type (else the core casts and checks rows).
    `key_inputs`: the columns `key_paths` reads (the key generator's and `_hoodie_is_deleted`)."""

    renames: dict[str, str]
    table_avro: dict | None
    incoming: pa.Schema
    avro: dict
    spec: KeySpec
    key_inputs: tuple[str, ...]
    stored_as_is: bool

    @property
    def work_fields(self) -> list[pa.Field]:
        return [pa.field(KEY, pa.string()), pa.field(PART, pa.string()), pa.field(DEL, pa.bool_()),
                pa.field(SEQ, pa.int64())] + ([pa.field(ORDER, pa.binary())] if self.spec.ordering_fields else [])


def plan_input(table, schema: pa.Schema, operation: str, is_global: bool, table_avro: dict | None,
               where: str) -> InputPlan:
    """The input stage's checks on `schema` (the input's Arrow schema): key and partition
    fields, the ordering field, `_hoodie_is_deleted`'s type, and the schema evolution against
    `table_avro`. Raises before anything is touched."""
    cfg = table.config
    known = resolvable_names(table.keygen, cfg.ordering_fields, table_avro)  # ignoring case
    renames = resolve_names(schema.names, known, where)
    incoming = pa.schema([f.with_name(renames.get(f.name, f.name)) for f in schema if
                          renames.get(f.name, f.name) not in META_FIELDS])
    check_columns(table.keygen, cfg.ordering_fields, incoming, operation, is_global, where)
    local = table.option(WriteOptions.TIMESTAMP_WITHOUT_TIMEZONE)
    if operation == "delete":
        avro = table_avro or evolve(None, incoming, cfg.name, where, local_timestamps=local)
        data_schema = incoming
    else:
        avro = evolve(table_avro, incoming, cfg.name, where, local_timestamps=local)
        data_schema = from_avro(avro)
    if operation == "upsert" and table_avro is not None and not table.option(WriteOptions.NULL_FOR_MISSING_COLUMNS):
        missing = [f["name"] for f in table_avro["fields"] if f["name"] not in incoming.names
                   and not f["name"].startswith("_hoodie_")]  # (Hudi's own: meta fields, `_hoodie_is_deleted`)
        if missing:  # (an updated row would lose those values: Java refuses such a batch too)
            raise SchemaError(f"{where}: the batch has no column {', '.join(repr(m) for m in missing[:10])}"
                              f"{' ...' if len(missing) > 10 else ''} of the table: an upsert would set it to null "
                              f"in every row it updates. Nothing was written; add the column, or write with "
                              f"{WriteOptions.NULL_FOR_MISSING_COLUMNS.key}=true to store nulls")
    keygen = table.keygen
    fields = list(keygen.record_key_fields) + list(keygen.partition_fields)
    if operation != "delete":
        fields.append(IS_DELETED)
    inputs = tuple(c for c in dict.fromkeys(f.split(".")[0] for f in fields) if c in incoming.names)
    several = tuple(cfg.ordering_fields) if len(cfg.ordering_fields) > 1 and operation != "delete" else ()
    spec = KeySpec(table.context(), operation, is_global, data_schema, pa.schema([]), where, several)
    as_is = operation == "delete" or stored_as_is(incoming, data_schema)
    return InputPlan(renames, table_avro, incoming, avro, spec, inputs, as_is)


def stored_as_is(incoming: pa.Schema, data_schema: pa.Schema) -> bool:
    """Whether every incoming column already has the type the table stores (no cast to check)."""
    return all(f.name not in incoming.names or incoming.field(f.name).type.equals(f.type) for f in data_schema)


# -- executor functions (module level: they travel as values) -----------------------------------
_ROW = re.compile(r" in row (\d+)")


def row_named(error: RecordKeyError, row: int) -> RecordKeyError:
    """`error` (its message naming a row, "in row N") naming row `row` instead."""
    return RecordKeyError(_ROW.sub(f" in row {row}", str(error), count=1))


def named_row(error: RecordKeyError) -> int | None:
    """The row an error names ("in row N"), if it names one."""
    found = _ROW.search(str(error))
    return int(found.group(1)) if found else None


def _keys_and_parts_at(spec: KeySpec, data: pa.Table, seq: Callable[[int], int]) -> tuple[pa.Array, pa.Array]:
    """`keys_and_parts`, a key error naming its row by sequence number (`seq(row)`): the row's
    place in the whole input where the engine's batches are parts of it."""
    try:
        return keys_and_parts(spec, _stored_units(data, spec.data_schema))
    except RecordKeyError as e:
        row = named_row(e)
        if row is None:
            raise
        raise row_named(e, seq(row)) from None


def key_paths(spec: KeySpec, names: tuple[str, ...], *columns: pa.Array) -> pa.StructArray:
    """Record key, partition path and delete flag of every row, from the key generator's input
    columns (and `_hoodie_is_deleted`): `InputPlan.key_inputs`, then (if `names` ends with
    `SEQ`) the rows' sequence numbers, by which a key error names its row."""
    seqs = columns[-1] if names and names[-1] == SEQ else None
    if seqs is not None:
        names, columns = names[:-1], columns[:-1]
    data = pa.Table.from_arrays(list(columns), names=list(names))
    keys, parts = _keys_and_parts_at(spec, data, (lambda r: seqs[r].as_py()) if seqs is not None else (lambda r: r))
    return pa.StructArray.from_arrays([keys, parts, delete_flags(spec.operation, data)], names=[KEY, PART, DEL])


def _stored_units(data: pa.Table, schema: pa.Schema) -> pa.Table:
    """`data` with its timestamps in the units the table stores them in: a timestamp is keyed
    by the long it is stored as (milliseconds for timestamp-millis), and Spark hands every
    timestamp over in microseconds."""
    for i, name in enumerate(data.column_names):
        given, stored = data.schema.field(i).type, schema.field(name).type if name in schema.names else None
        if stored is None or not _units_differ(given, stored):
            continue
        target = pa.timestamp(stored.unit, given.tz) if pa.types.is_timestamp(given) else stored
        try:  # (in a struct or a list too: a nested key field, `s.at`)
            data = data.set_column(i, name, data.column(i).cast(target, safe=False))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
            pass  # (otherwise unlike the stored type: conformed, or refused, later)
    return data


def _units_differ(given: pa.DataType, stored: pa.DataType) -> bool:
    """Whether `given` is `stored` but for a timestamp's unit, at some depth."""
    if pa.types.is_timestamp(given) and pa.types.is_timestamp(stored):
        return given.unit != stored.unit
    if pa.types.is_struct(given) and pa.types.is_struct(stored):
        fields = {stored.field(j).name: stored.field(j).type for j in range(stored.num_fields)}
        return any(given.field(j).name in fields and _units_differ(given.field(j).type, fields[given.field(j).name])
                   for j in range(given.num_fields))
    if (pa.types.is_list(given) or pa.types.is_large_list(given)) and \
            (pa.types.is_list(stored) or pa.types.is_large_list(stored)):
        return _units_differ(given.value_type, stored.value_type)
    return False


def keys_and_parts(spec: KeySpec, data: pa.Table) -> tuple[pa.Array, pa.Array]:
    """The key generator's record keys and partition paths (a global delete by key without the
    partition fields: empty paths)."""
    keygen = spec.ctx.keygen
    keys = keygen.record_keys(data)
    if spec.operation == "delete" and spec.is_global and any(
            f not in data.column_names for f in keygen.partition_fields):
        return keys, pa.repeat(pa.scalar("", pa.string()), data.num_rows)
    return keys, keygen.partition_paths(data)


def delete_flags(operation: str, data: pa.Table) -> pa.Array:
    """Every row of a delete; else `_hoodie_is_deleted` (null: not deleted)."""
    n = data.num_rows
    if operation == "delete":
        return pa.repeat(pa.scalar(True), n)
    if IS_DELETED in data.column_names:
        return pc.fill_null(data.column(IS_DELETED), False).combine_chunks()
    return pa.repeat(pa.scalar(False), n)


def key_table(spec: KeySpec, data: pa.Table, seq_base: int = 0) -> pa.Table:
    """Record key, partition path, delete flag and sequence number (`seq_base` + the row's
    place) of every row, with the columns conformed to the table schema (the core's key
    generator and checks), in `spec.out_schema`."""
    n = data.num_rows
    keys, parts = _keys_and_parts_at(spec, data, lambda r: seq_base + r)
    flags = delete_flags(spec.operation, data)
    origin = [data.column(SOURCE_FILE)] if SOURCE_FILE in spec.out_schema.names else []
    if spec.operation != "delete":
        data = conform(data, spec.data_schema, spec.where)
    seq = pa.array(np.arange(n, dtype=np.int64) + seq_base)
    order = [ordering_key(data, spec.ordering_fields)] if spec.ordering_fields else []
    columns = list(data.select(spec.data_schema.names).columns) + [keys, parts, flags, seq, *order, *origin]
    return pa.Table.from_arrays(columns, names=spec.out_schema.names).cast(spec.out_schema)


def key_batches(spec: KeySpec, batches: Iterator[pa.RecordBatch], *, seq_base: int = 0) -> Iterator[pa.RecordBatch]:
    """`key_table` of each batch, the sequence numbers running on across batches."""
    offset = 0
    for batch in batches:
        yield from key_table(spec, pa.Table.from_batches([batch]), seq_base + offset).to_batches()
        offset += batch.num_rows
