"""One exception hierarchy for the core. Messages name the table, the instant and the value."""

from __future__ import annotations


class LakeError(Exception):
    """Base class of every error raised by airflow_lake.core."""


class TableNotFoundError(LakeError):
    """The path holds no Hudi table (no `.hoodie/hoodie.properties`)."""


class InvalidTableError(LakeError):
    """The table's metadata is unreadable or inconsistent (bad checksum, torn file...)."""


class UnsupportedTableVersionError(LakeError):
    """The table version (or timeline layout) is one we cannot write."""


class UnsupportedFeatureError(LakeError):
    """The table (or the write's options) uses a key generator, payload class or merge option
    airflow-lake does not implement; refused rather than guessed."""


class TableExistsError(LakeError):
    """`Table.create` found a table already there."""


class InvalidOptionError(LakeError):
    """An option or argument has a value we cannot accept."""


class SchemaError(LakeError):
    """The data's schema cannot be merged with the table's schema."""


class RecordKeyError(LakeError):
    """A record key is null, empty or missing, or would be held twice where the table's keys
    are unique (a global record index)."""


class MissingFieldError(LakeError):
    """A record key, precombine or partition field is absent from the data."""


class PartitionPathError(LakeError):
    """A partition value would escape the table's base path."""


class PathEscapeError(LakeError):
    """A path read from the table (a plan, commit metadata, a marker) or given by a caller
    resolves outside the table's base path; refused before anything is read or deleted."""


class StorageError(LakeError, OSError):
    """A storage call on a path of the table failed (denied, unreachable...); an OSError too,
    so code that handles I/O errors still does."""


class StorageUnavailableError(StorageError):
    """A transient storage failure (network, throttling, a 5xx) that outlasted the retries."""


class StorageNotFoundError(StorageError, FileNotFoundError):
    """A file is gone: absent, or removed (by another writer) between listing or HEAD and GET."""


class InstantNotFoundError(LakeError):
    """The named instant is not on the timeline."""


class TimelineError(LakeError):
    """A timeline transition could not be made (the file exists, the previous state is missing)."""


class LockError(LakeError):
    """The table lock could not be taken in time."""


class WriteConflictError(LakeError):
    """Another writer committed a conflicting change; this write did not land."""


class CorruptLogError(InvalidTableError):
    """A log block of a completed instant is damaged (framing or payload); names the file."""


def note_instant(error: BaseException, instant: str) -> BaseException:
    """Record on `error` the instant the failed operation had created (since rolled back or
    left pending), so that the error's report names it; an instant noted earlier is kept."""
    if getattr(error, "instant", None) is None:
        try:
            error.instant = instant  # type: ignore[attr-defined]
        except (AttributeError, TypeError):  # an exception type without a __dict__
            pass
    return error


def noted_instant(error: BaseException | None) -> str | None:
    """The instant `note_instant` recorded on `error` or on an error it was raised from."""
    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        instant = getattr(error, "instant", None)
        if isinstance(instant, str):
            return instant
        error = error.__cause__ or error.__context__
    return None
