"""Reads to Arrow: snapshot (base + logs merged), read-optimized, time travel (`as_of`) and
incremental, with column projection, filters and partition pruning. Replaced file groups,
uncommitted files and blocks of uncommitted or rolled-back instants are never read.

A read is planned on the driver from metadata only (`Reader.plan_snapshot`,
`Reader.plan_incremental` -> `ReadPlan`: one `SliceRead` task per file group) and each task is
read by `read_slice` over the one file-group reader (`slice_reader.read_file_group`), wherever
it runs (threads, Spark executors)."""

from __future__ import annotations

import decimal
import itertools
import logging
from dataclasses import dataclass
from functools import cached_property, partial

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from .config import MetadataOptions
from .engine import Engine
from .errors import InvalidOptionError, LakeError
from .index.column_stats import (
    COLUMN_STATS,
    PARTITION_STATS,
    column_stats_key,
    indexed_columns,
    may_match,
    partition_stats_key,
    read_stats,
)
from .index.secondary_index import matching_groups
from .keys import parse_partition_path
from .metadata_table import FILES, RECORD_INDEX, listed_partitions
from .model import FileGroup
from .schema import arrow_schema_with_meta
from .slice_reader import (
    SliceQuery,
    SliceRead,
    Visibility,
    expression,
    group_read,
    projected,
    read_group_records,
    read_slice,
)
from .timeline.archived import has_archived
from .timeline.clock import as_of_instant
from .timeline.instant import COMMIT_ACTIONS, SAVEPOINT, check_instant_time
from .view import FileSystemView
from .vocabulary import HOLES_POLICIES

log = logging.getLogger(__name__)
# an incremental read from None: from before the first instant (a sensor's first watermark)
BEGINNING = "0" * 17
QUERY_TYPES = ("snapshot", "read_optimized")


def removed_while_reading(uri: str, as_of: str | None, error: FileNotFoundError) -> LakeError:
    """The error for a file a read planned on and that is gone (a clean or another writer)."""
    return LakeError(f"table {uri}: {error.filename or error} was removed while reading (a clean or another "
                     f"writer); {'time travel to ' + as_of if as_of else 'retry'} may need files outside the "
                     "retained window")


@dataclass(frozen=True)
class ReadPlan:
    """A read planned on the driver from metadata only (timeline, listings, schema): one task
    per file group, partitions pruned; `schema` is the table schema with meta fields and
    `output` the schema of the rows `read_slice` returns for every task."""

    uri: str
    schema: pa.Schema
    output: pa.Schema
    tasks: tuple[SliceRead, ...]
    as_of: str | None = None

    def run(self, ctx, engine: Engine, *, timeline=None) -> pa.Table:
        """Read every task with `engine` and concatenate (the local read)."""
        try:
            parts = engine.map(partial(_read_task, ctx, self.schema, timeline), self.tasks)
        except FileNotFoundError as e:
            raise removed_while_reading(self.uri, self.as_of, e) from e
        parts = [p for p in parts if p.num_rows]
        return pa.concat_tables(parts) if parts else self.output.empty_table()


def _read_task(ctx, schema: pa.Schema, timeline, task: SliceRead) -> pa.Table:
    """One task of a `ReadPlan` (the engine's task function: a `TableContext` and values)."""
    return read_slice(ctx, task, schema, timeline=timeline)


class Reader:
    """Plans reads of a table (`plan_snapshot`, `plan_incremental`) and runs them locally."""

    def __init__(self, table, engine: Engine | None = None, timeline=None):
        self.table = table
        self.storage = table.storage
        self.engine = engine if engine is not None else table.engine
        self._timeline = timeline
        self.skipping: dict[str, int] = {}  # the latest snapshot plan's data skipping (`_skip`)

    @property
    def timeline(self):
        """The timeline this Reader works with: listed once, on first use (or given)."""
        if self._timeline is None:
            self._timeline = self.table.timeline
        return self._timeline

    @cached_property
    def full_schema(self) -> pa.Schema:
        """The table schema with the meta fields, resolved once per Reader (from its timeline
        and the latest commit)."""
        return arrow_schema_with_meta(self.table.schema_avro(self.timeline))

    def snapshot(self, *, as_of: str | None, columns: list[str] | None, filters,
                 query_type: str = "snapshot") -> pa.Table:
        plan, timeline = self._snapshot_plan(as_of, columns, filters, query_type)
        return plan.run(self.table.context(), self.engine, timeline=timeline)

    def incremental(self, start: str, end: str | None, *, columns=None, filters=None,
                    holes: str = "FAIL") -> pa.Table:
        """Rows whose latest write is a commit in (start, end]."""
        plan, timeline = self._incremental_plan(start, end, columns, filters, holes)
        return plan.run(self.table.context(), self.engine, timeline=timeline)

    def plan_snapshot(self, *, as_of: str | None = None, columns: list[str] | None = None, filters=None,
                      query_type: str = "snapshot") -> ReadPlan:
        """The tasks of a snapshot, as-of or read-optimized read."""
        return self._snapshot_plan(as_of, columns, filters, query_type)[0]

    def plan_incremental(self, start: str, end: str | None = None, *, columns: list[str] | None = None,
                         filters=None, holes: str = "FAIL") -> ReadPlan:
        """The tasks of an incremental read: rows whose latest write is a commit in (start, end]."""
        return self._incremental_plan(start, end, columns, filters, holes)[0]

    def _snapshot_plan(self, as_of, columns, filters, query_type):
        if query_type not in QUERY_TYPES:
            raise InvalidOptionError(f"table {self.storage.uri}: unknown query_type {query_type!r}; "
                                     f"one of {QUERY_TYPES}")
        filters = check_filters(filters, self.full_schema, self.storage.uri)
        columns = check_columns(columns, self.storage.uri)
        timeline = self.timeline
        as_of = self.as_of(as_of)
        view = FileSystemView(self.storage, timeline, as_of)
        groups = self._skip(view, self._prune(view, view.file_groups(), filters), filters,
                            query_type == "read_optimized")
        return self._plan(view, groups, columns, filters, query_type == "read_optimized"), timeline

    def as_of(self, as_of: str | None) -> str | None:
        """The instant time travel to `as_of` (an instant, a date or a date-time) goes to,
        refused where the cleaner removed the file versions it needs (a savepoint keeps
        them); None stays None."""
        if as_of is None:
            return None
        timeline = self.timeline
        as_of = as_of_instant(as_of, self.table.config.timezone, self.storage.uri)
        if not timeline.actions(SAVEPOINT).completed().contains(as_of):  # a savepoint keeps its files
            self._check_retained(timeline, as_of, "time travel to")
        self._warn_before_first_commit(timeline, as_of)
        return as_of

    def _warn_before_first_commit(self, timeline, as_of: str) -> None:
        """Time travel to before the table's first commit reads no rows, as in Hudi: said, not
        silent (a date means its midnight: today's date reads the table before today's commits)."""
        first = timeline.commits().completed().first
        if first is not None and as_of < first.time and not has_archived(
                self.storage, self.table.config.archive_folder):
            log.warning("table %s: as of %s is before the table's first commit %s: the read has no rows",
                        self.storage.uri, as_of, first.time)

    def _incremental_plan(self, start, end, columns, filters, holes):
        start = BEGINNING if start is None else check_instant_time(start, self.storage.uri)
        filters = check_filters(filters, self.full_schema, self.storage.uri)
        columns = check_columns(columns, self.storage.uri)
        policy = HOLES_POLICIES.parse(holes, f"table {self.storage.uri}", "holes")
        timeline = self.timeline
        first = timeline.commits().first
        archived = []  # commits archived after `start`: read from the archived timeline (LSM history)
        if (first is None or start < first.time) and has_archived(self.storage, self.table.config.archive_folder):
            history = self.table.archived_timeline
            if history.corrupt_blocks:  # rows of the commits in them would be missing: refuse
                raise LakeError(f"table {self.storage.uri}: an incremental read from {start} needs archived commits, "
                                f"and {history.corrupt_blocks} blocks of the archived timeline are unreadable")
            archived = [e for e in history.entries
                        if e.instant.is_completed and e.instant.comparable_action in COMMIT_ACTIONS]
        commits = timeline.commits()
        completed = commits.completed()
        by_completion = timeline.layout == 2  # (start, end] are completion times (v8 spec §7.2)
        if end is None:
            last = max((i.completion or i.time for i in completed), default=None) if by_completion else \
                (completed.last.time if completed.last else None)
            end = last or start
        check_instant_time(end, self.storage.uri)
        pending = [i for i in timeline.writes().pending()
                   if start < i.time <= end and i.action != "compaction"]
        if pending:
            if policy == "FAIL":
                raise LakeError(f"table {self.storage.uri}: instant {pending[0].time} in ({start}, {end}] is "
                                "still pending; retry later or use holes='BLOCK'")
            earlier = [i.time for i in completed if i.time < pending[0].time]  # BLOCK
            end = min(end, earlier[-1]) if earlier else start
        touched: set[tuple[str, str]] = set()
        selected = [i for i in completed if start < (i.completion or i.time) <= end] if by_completion else \
            completed.between(start, end).instants
        for instant in selected:
            touched |= timeline.commit_metadata(instant).file_ids()
        for entry in archived:
            moment = (entry.instant.completion or entry.instant.time) if by_completion else entry.instant.time
            if start < moment <= end:
                selected.append(entry.instant)
                if not isinstance(entry.payload, dict) or "partitionToWriteStats" not in entry.payload:
                    raise LakeError(f"table {self.storage.uri}: an incremental read needs archived commit "
                                    f"{entry.instant.time}, whose metadata the archived timeline does not hold")
                stats = entry.payload.get("partitionToWriteStats") or {}
                touched |= {(p, s["fileId"]) for p, items in stats.items() for s in items or () if s.get("fileId")}
        view = FileSystemView(self.storage, timeline, None if by_completion else end,
                              completed_by=end if by_completion else None)
        if selected:  # (the rows are read from the file versions as of `end`: those the cleaner must have kept)
            self._check_retained(timeline, view.as_of, f"an incremental read ({start}, {end}], as of")
        groups = [g for g in view.file_groups() if (g.partition, g.file_id) in touched]
        groups = self._prune(view, groups, filters)
        # without meta fields there is no per-row commit time: as hudi-rs does, a row's is that
        # of the file or log block it is read from (a compaction's base file: the compaction's)
        by_file = not self.table.config.populate_meta_fields
        commit_times = frozenset(i.time for i in selected) if by_completion else None
        return self._plan(view, groups, columns, filters, False, window=(start, end), by_file=by_file,
                          commits=commit_times), timeline

    def _check_retained(self, timeline, instant: str, what: str) -> None:
        bound = timeline.latest_clean_bound()
        if bound and instant < bound:
            raise LakeError(f"table {self.storage.uri}: {what} {instant} is not possible: the cleaner kept only "
                            f"file versions needed from {bound} on")

    def _plan(self, view: FileSystemView, groups: list[FileGroup], columns: list[str] | None, filters,
              read_optimized: bool, window: tuple[str, str] | None = None, by_file: bool = False,
              commits: frozenset[str] | None = None) -> ReadPlan:
        schema = self.full_schema
        if columns is not None:
            unknown = [c for c in columns if c not in schema.names]
            if unknown:
                raise InvalidOptionError(f"table {self.storage.uri}: no column {unknown[0]!r}; "
                                         f"columns: {schema.names}")
        read_cols = None
        if columns is not None:
            extra = sorted(_filter_columns(filters))
            if window is not None and not by_file:
                extra.append("_hoodie_commit_time")
            read_cols = tuple(dict.fromkeys(list(columns) + extra))
        query = SliceQuery(None if columns is None else tuple(columns), read_cols, filters, read_optimized,
                           window, by_file, commits)
        visibility = Visibility.of(view)
        tasks = tuple(SliceRead.of(view, g, visibility, query) for g in groups)
        return ReadPlan(self.storage.uri, schema, projected(schema, columns), tasks, view.as_of)

    # -- one group, for writers ------------------------------------------------------------
    def read_group(self, view: FileSystemView, group: FileGroup, columns: list[str] | None) -> pa.Table:
        """One file group's current records (base and visible logs merged). Without meta fields
        `_hoodie_record_key` holds the keys derived from the key fields (for index lookups and
        ordering checks), not the stored nulls."""
        task = group_read(view, group)
        return read_group_records(self.table, task, self.full_schema, columns, timeline=view.timeline)

    def _skip(self, view: FileSystemView, groups: list[FileGroup], filters, read_optimized: bool) -> list[FileGroup]:
        """Data skipping by the metadata table's statistics (v8 spec §5.5a, §5.5b readers), on
        a Hudi 1.x table that keeps them: a partition whose partition stats, then a file group
        none of whose slice's files (base and log files) has column stats that may hold a row
        passing the filters (in DNF), is not read. A file without statistics, a column not
        indexed or a predicate the statistics cannot decide keeps its file. The counts are
        logged and kept in `self.skipping`."""
        self.skipping = {}
        cfg = self.table.config
        if isinstance(filters, pc.Expression) or not filters or cfg.version < 8 or not groups \
                or not self.table.option(MetadataOptions.DATA_SKIPPING):
            return groups
        listed = listed_partitions(cfg.props)
        if FILES not in listed:
            return groups
        all_disjuncts = filters if isinstance(filters[0], list) else [filters]
        types = {f.name: f.type for f in self.full_schema}
        if view.as_of is None and not read_optimized and RECORD_INDEX in listed:  # (they index the latest snapshot)
            hits = matching_groups(self.storage, cfg.props, view.timeline, all_disjuncts, types)
            if hits is not None:
                kept = [g for g in groups if (g.partition, g.file_id) in hits]
                pruned = len(groups) - len(kept)
                self.skipping = {"file_groups": len(groups), "partitions_pruned": 0, "file_groups_pruned": pruned,
                                 "secondary_index_pruned": pruned}
                log.info("table %s: data skipping read %d of %d file groups (%d pruned by secondary indexes)",
                         self.storage.uri, len(kept), len(groups), len(groups) - len(kept))
                groups = kept
        if COLUMN_STATS not in listed or not groups:
            return groups
        columns = set(indexed_columns(self.storage, cfg.props, self.full_schema) or ())
        disjuncts = [[(c, _SKIP_OPS[op], _in_values(v, types[c]) if _SKIP_OPS[op] == "in" else v)
                      for c, op, v in conj if c in columns and op in _SKIP_OPS] for conj in all_disjuncts]
        if any(not conj for conj in disjuncts):  # a disjunct the statistics say nothing of: it may match
            return groups
        wanted = sorted({c for conj in disjuncts for c, _, _ in conj})
        partitions = sorted({g.partition for g in groups})
        kept_partitions = set(partitions)
        if PARTITION_STATS in listed and view.as_of is None:  # (they bound the latest slices only)
            keys = {(c, p): partition_stats_key(c, p) for c in wanted for p in partitions}
            stats = read_stats(self.storage, PARTITION_STATS, view.timeline, sorted(set(keys.values())), types)
            kept_partitions = {p for p in partitions if _may_hold(disjuncts, lambda c, p=p: [stats.get(keys[c, p])])}
        slices: dict[tuple[str, str], list[str]] = {}
        for g in groups:
            if g.partition in kept_partitions:
                base, logs = view.read_slice(g)
                slices[g.partition, g.file_id] = ([base.name] if base else []) + \
                    ([] if read_optimized and base else [lf.name for lf in logs])
        keys = {(p, name, c): column_stats_key(c, p, name) for (p, _), names in slices.items() for name in names
                for c in wanted}
        stats = read_stats(self.storage, COLUMN_STATS, view.timeline, sorted(set(keys.values())), types)
        kept = [g for g in groups if (g.partition, g.file_id) in slices and any(
            _may_hold(disjuncts, lambda c, g=g, name=name: [stats.get(keys.get((g.partition, name, c)))])
            for name in slices[g.partition, g.file_id] or [None])]
        pruned = self.skipping.get("secondary_index_pruned", 0)
        self.skipping = {"file_groups": len(groups) + pruned,
                         "partitions_pruned": len(partitions) - len(kept_partitions),
                         "file_groups_pruned": len(groups) - len(kept) + pruned, "secondary_index_pruned": pruned}
        log.info("table %s: data skipping read %d of %d file groups (%d partitions pruned by partition stats, "
                 "%d file groups by column stats)", self.storage.uri, len(kept), len(groups),
                 self.skipping["partitions_pruned"], len(groups) - len(kept) - sum(
                     1 for g in groups if g.partition not in kept_partitions))
        return kept

    def _prune(self, view: FileSystemView, groups: list[FileGroup], filters) -> list[FileGroup]:
        """Drop groups whose partition provably cannot match the filters on partition columns.

        Each partition path gives, per field, the values it may stand for (decoded, null or
        "" for the default partition); a partition is kept when any combination of them
        passes, or when a field's value cannot be told from the path. The row filter decides
        the rest."""
        cfg = self.table.config
        fields = list(cfg.partition_fields)
        if isinstance(filters, pc.Expression) or not filters or not fields \
                or not self.table.keygen.partition_values_are_fields:
            return groups
        disjuncts = filters if isinstance(filters[0], list) else [filters]
        parts_only = [[c for c in conj if c[0] in fields] for conj in disjuncts]
        if any(not conj for conj in parts_only):
            return groups
        schema = self.full_schema
        if any(f not in schema.names for f in fields):
            return groups
        try:
            expr = pq.filters_to_expression(parts_only)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, KeyError, ValueError, TypeError):
            return groups
        partitions = sorted({g.partition for g in groups})
        kept: set[str] = set()
        columns: dict[str, list] = {f: [] for f in fields}
        owner: list[int] = []
        for i, p in enumerate(partitions):
            parsed = parse_partition_path(p, fields, cfg.hive_style, cfg.url_encode)
            typed = {f: _typed_candidates(parsed.get(f), schema.field(f).type) for f in fields}
            if any(v is None for v in typed.values()):  # a value we cannot tell: keep
                kept.add(p)
                continue
            for combo in itertools.product(*(typed[f] for f in fields)):
                for f, v in zip(fields, combo, strict=True):
                    columns[f].append(v)
                owner.append(i)
        if owner:
            candidates = pa.table({**{f: pa.array(v, schema.field(f).type) for f, v in columns.items()},
                                   "__i": pa.array(owner, pa.int64())})
            try:
                hits = candidates.filter(expr).column("__i").to_pylist()
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, KeyError, ValueError, TypeError):
                return groups
            kept |= {partitions[i] for i in hits}
        return [g for g in groups if g.partition in kept]


# filter operators (pyarrow's DNF spellings) -> the statistics' predicate names
_SKIP_OPS = {"=": "=", "==": "=", "!=": "!=", "<": "<", "<=": "<=", ">": ">", ">=": ">=", "in": "in"}


def _in_values(values, arrow_type: pa.DataType) -> list:
    """An `in` term's values as pyarrow's `is_in` compares them: cast to the column's type (a
    float32 column holds 0.1 as float32(0.1)); as given where they do not cast."""
    try:
        array = values if isinstance(values, pa.Array) else pa.array(list(values))
        return array.cast(arrow_type).to_pylist()
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, TypeError, ValueError):
        return values.to_pylist() if isinstance(values, pa.Array) else list(values)


def _may_hold(disjuncts: list[list[tuple[str, str, object]]], ranges_of) -> bool:
    """Whether some disjunct may hold for a file (or partition) whose statistics per column
    `ranges_of(column)` gives (a list: [None] when there are none, which decides nothing)."""
    for conj in disjuncts:
        if all(any(r is None or r.is_deleted or _may_match(r, op, value) for r in ranges_of(column))
               for column, op, value in conj):
            return True
    return False


def _may_match(r, op: str, value) -> bool:
    """`may_match`, kept conservative where statistics cannot decide: a null among the values
    (pyarrow's `in` matches null rows), `!=` on a float column (NaN is in no min/max), a value
    the column's type cannot take."""
    if value is None or (op == "in" and any(v is None for v in value)) or \
            (op == "!=" and isinstance(value, float)):
        return True
    try:
        return may_match(r, op, value)
    except (ValueError, TypeError, ArithmeticError, OverflowError):
        return True


def _typed_candidates(values: list[str | None] | None, arrow_type: pa.DataType) -> list | None:
    """Partition-path candidates as Python values of the column type; None when unknown."""
    if values is None:
        return None
    out = []
    for v in values:
        if v is None:
            out.append(None)
            continue
        try:
            out.append(pa.array([v], pa.string()).cast(arrow_type)[0].as_py())
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, ValueError):
            continue  # not a value of this type (e.g. "" for an int column)
    return out or None


FILTER_OPS = ("=", "==", "!=", "<", ">", "<=", ">=", "in", "not in")


def check_columns(columns, uri: str) -> list[str] | None:
    """The columns a read asks for (None: all), as a list: column names, in a list or tuple."""
    if columns is None:
        return None
    if isinstance(columns, (list, tuple)) and all(isinstance(c, str) for c in columns):
        return list(columns)
    raise InvalidOptionError(f"table {uri}: columns={columns!r} is not a list of column names")


def check_filters(filters, schema: pa.Schema, uri: str):
    """Row filters as the reads take them: pyarrow's DNF forms ([(column, op, value), ...], a
    list of such lists; terms as tuples or lists) as a list of lists of tuples, an expression as
    it is, None for none (`[]` too). Filters that cannot be applied to the table's rows are an
    `InvalidOptionError` naming the table and the filter, before any file is read: an unknown
    column or operator, a value of another type than its column's, `in` without a list."""
    if filters is None:
        return None
    if isinstance(filters, pc.Expression):
        return _bound(filters, filters, schema, uri)
    if not isinstance(filters, (list, tuple)):
        raise InvalidOptionError(f"table {uri}: filters {_shown(filters)} are not [(column, op, value), ...]")
    if not filters:
        return None
    first = filters[0]
    nested = isinstance(first, (list, tuple)) and len(first) > 0 and not isinstance(first[0], str)
    disjuncts = list(filters) if nested else [filters]  # (pyarrow's rule: a term starts with its column)
    for conj in disjuncts:
        if not isinstance(conj, (list, tuple)) or not conj:
            raise InvalidOptionError(f"table {uri}: filters {_shown(filters)} are not [(column, op, value), ...] "
                                     "or a list of such lists")
    for term in (t for conj in disjuncts for t in conj):
        if not isinstance(term, (list, tuple)) or len(term) != 3:
            raise InvalidOptionError(f"table {uri}: filter {_shown(term)} is not (column, op, value)")
        column, op, value = term
        if not isinstance(column, str) or column not in schema.names:
            raise InvalidOptionError(f"table {uri}: filter {_shown(term)} names no column of the table "
                                     f"({', '.join(schema.names)})")
        if not isinstance(op, str) or op.lower() not in FILTER_OPS:
            raise InvalidOptionError(f"table {uri}: filter {_shown(term)}: operator {_shown(op)} is not one of "
                                     f"{', '.join(FILTER_OPS)}")
        if op.lower() in ("in", "not in") and (isinstance(value, (str, bytes)) or not hasattr(value, "__iter__")):
            raise InvalidOptionError(f"table {uri}: filter {_shown(term)}: {op!r} needs a list of values")
    dnf = [[(c, op, _values(v, schema.field(c).type)) if op.lower() in ("in", "not in")
             else (c, op, _decimal_int(v, schema.field(c).type)) for c, op, v in conj] for conj in disjuncts]
    return _bound(dnf, filters, schema, uri)


def _values(values, arrow_type: pa.DataType):
    """The values of an `in` term as a list (any iterable taken once); an empty one typed as its
    column, so that it matches no row."""
    values = values if isinstance(values, pa.Array) else [_decimal_int(v, arrow_type) for v in values]
    return values if len(values) else pa.array([], arrow_type)


def _decimal_int(value, arrow_type: pa.DataType):
    """An integer compared with a decimal column as a value of the column's type (pyarrow
    compares an int64 with a decimal(15,2) only at a precision of 21, and casts an `in` list of
    ints to the column's type with a rescale it refuses); else the value as given."""
    if pa.types.is_decimal(arrow_type) and isinstance(value, int) and not isinstance(value, bool):
        try:
            return pa.scalar(decimal.Decimal(value), arrow_type).as_py()
        except (pa.ArrowInvalid, OverflowError):  # (too large for the column: compared as given)
            return value
    return value


def _bound(filters, given, schema: pa.Schema, uri: str):
    """`filters` once applied to one row of nulls of the table's schema (the values' types
    checked by the kernels that will compare them; an empty table skips them), no row read."""
    try:
        pa.table({f.name: pa.nulls(1, f.type) for f in schema}, schema=schema).filter(expression(filters))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, TypeError, ValueError,
            OverflowError) as e:
        text = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise InvalidOptionError(f"table {uri}: filters {_shown(given)} cannot be applied to its columns "
                                 f"({text[:300]})") from None
    return filters


def _shown(value) -> str:
    """A short repr of a user's value (an error message's; never fails)."""
    try:
        text = repr(value)
    except Exception:  # noqa: BLE001
        text = f"<{type(value).__name__}>"
    return text if len(text) <= 200 else text[:200] + "..."


def _filter_columns(filters) -> set[str]:
    if filters is None or (not isinstance(filters, pc.Expression) and not filters):
        return set()
    if isinstance(filters, pc.Expression):
        raise InvalidOptionError("pass filters as [(column, op, value), ...] when selecting columns")
    disjuncts = filters if isinstance(filters[0], list) else [filters]
    return {c[0] for conj in disjuncts for c in conj}


