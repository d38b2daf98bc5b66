"""Storage over `pyarrow.fs`: the only I/O layer of the core.

Local paths and URIs (`file://`, `s3://`, `gs://`, `hdfs://`) are accepted. There is no
rename and no append: object stores have neither, so every file is written whole, once.
`create` (create-if-absent) is the one atomic primitive the timeline and the lock need: a
hard link locally, a conditional PUT (`If-None-Match: *`) on S3 (`objectstore`).

Every call is counted by kind (`calls`); `counting(what)` logs an operation's calls at DEBUG.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import posixpath
import stat
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import pyarrow as pa
import pyarrow.fs as pafs

from . import objectstore
from .errors import (
    InvalidOptionError,
    LakeError,
    PathEscapeError,
    StorageError,
    StorageNotFoundError,
    StorageUnavailableError,
)

log = logging.getLogger(__name__)

TEMP_FOLDER = ".hoodie/.aux/airflow_lake/tmp"  # the temp files of `create` on local file systems
# a temp file lives for one write, fsync and link; an older one was left by a killed process
STALE_TEMP_MS = 10 * 60 * 1000


@dataclass(frozen=True, slots=True)
class FileStatus:
    """A listed file: path relative to the storage root, size in bytes, mtime in ms."""

    path: str
    size: int
    mtime_ms: int

    @property
    def name(self) -> str:
        return self.path.rpartition("/")[2]


class Storage:
    """A file system rooted at a table's base path; all paths are relative to the root.

    A failing call raises a StorageError naming the table and the path (StorageNotFoundError,
    also a FileNotFoundError, for a missing file); reads, listings and deletions are asked again
    after a transient failure, waiting `retry_delays` seconds between attempts."""

    retry_delays: tuple[float, ...] = (0.1, 0.3, 1.0, 3.0)

    def __init__(self, uri: str, filesystem: pafs.FileSystem | None = None, *,
                 conditional_put: objectstore.ConditionalPut | None | str = "auto"):
        if filesystem is None:
            if "://" not in uri:
                uri = os.path.abspath(uri)
                filesystem, root = pafs.LocalFileSystem(), uri
            else:
                filesystem, root = _filesystem_of(uri)
        else:
            root = uri
        self.uri = uri
        self.fs = filesystem
        self.root = root.rstrip("/") or "/"
        self.is_local = isinstance(filesystem, pafs.LocalFileSystem)
        # object stores have no folders: nothing to make, and a PUT needs no parent
        self.is_object_store = filesystem.type_name in ("s3", "gcs", "abfs")
        if conditional_put == "auto":  # a bare URI: boto3 finds credentials where pyarrow did (env, profile)
            conditional_put = objectstore.ConditionalPut(objectstore.S3Settings(
                {"region": filesystem.region}, None, True)) \
                if isinstance(filesystem, pafs.S3FileSystem) and objectstore.boto3_available() else None
        self.conditional_put: objectstore.ConditionalPut | None = conditional_put  # type: ignore[assignment]
        self.calls: Counter[str] = Counter()  # storage calls by kind: list, head, get, put, create...
        self.listed: Counter[str] = Counter()  # listings by folder (relative path)
        self._calls_lock = threading.Lock()
        self._counting = 0

    def __getstate__(self) -> dict[str, Any]:
        # travels to executors without this process's counters and lock
        return {k: v for k, v in self.__dict__.items() if k not in ("calls", "listed", "_calls_lock", "_counting")}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self.calls, self.listed = Counter(), Counter()
        self._calls_lock = threading.Lock()
        self._counting = 0

    @property
    def atomic_create(self) -> bool:
        """Whether `create` is atomic against other processes (a hard link, a conditional
        PUT); where not, only a lock provider outside the store makes several writers safe."""
        return self.is_local or self.conditional_put is not None

    def _count(self, kind: str, path: str | None = None) -> None:
        with self._calls_lock:
            self.calls[kind] += 1
            if path is not None:
                self.listed[path] += 1

    @contextlib.contextmanager
    def counting(self, what: str) -> Iterator[None]:
        """Log at DEBUG how many storage calls `what` made (the outermost of nested ones)."""
        self._counting += 1
        before = Counter(self.calls) if self._counting == 1 else None
        try:
            yield
        finally:
            self._counting -= 1
            if before is not None and log.isEnabledFor(logging.DEBUG):
                made = self.calls - before
                log.debug("table %s: %s made %d storage calls (%s)", self.uri, what, sum(made.values()),
                          ", ".join(f"{k}={v}" for k, v in sorted(made.items())))

    def full(self, path: str) -> str:
        """Absolute path inside the file system for a path relative to the root. A path that
        is absolute, whose `..` lead out of the root, or (locally) that a symbolic link inside
        the table leads out of it, is refused (PathEscapeError)."""
        if not path:
            return self.root
        rel = posixpath.normpath(path)
        if rel.startswith("/") or rel == ".." or rel.startswith("../"):
            raise PathEscapeError(f"table {self.uri}: path {path!r} resolves outside the table's base path "
                                  f"{self.root}; refused")
        full = self.root if rel == "." else posixpath.join(self.root, rel)
        if self.is_local and not self.really_inside(full):
            raise PathEscapeError(f"table {self.uri}: path {path!r} resolves outside the table's base path "
                                  f"{self.root} through a symbolic link; refused")
        return full

    def really_inside(self, full: str) -> bool:
        """Whether the local path `full` (under the root as text) stays under the root's real
        location once symbolic links are resolved (`os.path.realpath` of the existing prefix).
        The root's own real location is cached (and looked up again before saying no), so a
        table root that is itself a link works. No link below the root (each existing part of
        the path looked up once: two or three for a table's file, not every folder from `/`):
        inside by construction."""
        if self._no_link_below_root(full):
            return True
        real = os.path.realpath(full)
        for fresh in (False, True):
            if fresh or self.__dict__.get("_real_root") is None:
                self._real_root = os.path.realpath(self.root)
            root = self._real_root.rstrip("/")
            if real == self._real_root or real.startswith(root + "/"):
                return True
        return False

    def _no_link_below_root(self, full: str) -> bool:
        """Whether `full` is the root, or under it as text with no part from the root down a
        symbolic link (parts that do not exist are no links, nor is anything beneath them)."""
        root = self.root.rstrip("/")
        if full.rstrip("/") == root:
            return True
        if not full.startswith(root + "/"):
            return False
        path = root
        for part in full[len(root) + 1 :].split("/"):
            if not part or part in (".", ".."):
                return False
            path = f"{path}/{part}"
            try:
                if stat.S_ISLNK(os.lstat(path).st_mode):
                    return False
            except (FileNotFoundError, NotADirectoryError):
                return True
            except OSError:
                return False
        return True

    # -- errors ----------------------------------------------------------------------------
    def translate(self, error: OSError, path: str, what: str) -> OSError:
        """A file system's `error` while `what` (reading, listing...) `path` as a StorageError
        naming the table and the path; our own errors stay as they are."""
        if isinstance(error, LakeError):
            return error
        kind = objectstore.failure_kind(error)
        cls = {"missing": StorageNotFoundError, "transient": StorageUnavailableError}.get(kind, StorageError)
        gone = "the file is not there (or was removed meanwhile)" if kind == "missing" else "failed"
        return cls(f"table {self.uri}: {what} {path or '(the base path)'}: {gone}: {error}")

    def _io(self, what: str, path: str, call, *, retry: bool = True, missing_retries: bool = False):
        """`call()`, asked again after a transient failure (and after a missing file with
        `missing_retries`: a file another writer is replacing), `retry_delays` apart; errors
        translated."""
        delays = self.retry_delays if retry else ()
        for attempt in range(len(delays) + 1):
            try:
                return call()
            except OSError as e:
                kind = None if isinstance(e, LakeError) else objectstore.failure_kind(e)
                if attempt == len(delays) or not (kind == "transient" or (kind == "missing" and missing_retries)):
                    raise self.translate(e, path, what) from e
                log.debug("table %s: %s %s failed (%s), asking again", self.uri, what, path, e)
                time.sleep(delays[attempt])

    def _direct(self) -> objectstore.ConditionalPut | None:
        """The boto3 client that reads and deletes in one request each (S3), where boto3 is
        installed: a Spark executor without it gets the table's storage from a driver that
        has it, and then reads and deletes through pyarrow."""
        return self.conditional_put if self.conditional_put is not None and objectstore.boto3_available() else None

    @property
    def one_request_reads(self) -> bool:
        """Whether `read` fetches a whole file in one request (S3 through boto3), so a small
        file is cheaper read whole than opened for ranges (a HEAD, then GETs)."""
        return self._direct() is not None

    # -- reads -----------------------------------------------------------------------------
    def _info(self, path: str) -> pafs.FileInfo:
        self._count("head")
        full = self.full(path)
        return self._io("looking up", path, lambda: self.fs.get_file_info(full))

    def exists(self, path: str) -> bool:
        return self._info(path).type != pafs.FileType.NotFound

    def is_dir(self, path: str) -> bool:
        return self._info(path).type == pafs.FileType.Directory

    def read(self, path: str, *, replaced: bool = False) -> bytes:
        """The whole file. `replaced`: another writer may be replacing it (removed, then
        written again): a missing file is asked again too, a bounded number of times."""
        self._count("get")
        full = self.full(path)

        def get() -> bytes:
            if (direct := self._direct()) is not None:  # S3: one GET, no HEAD before it
                return direct.get(full)
            with self.fs.open_input_stream(full) as f:
                return f.read()

        return self._io("reading", path, get, missing_retries=replaced)

    def status(self, path: str) -> FileStatus | None:
        info = self._info(path)
        if info.type == pafs.FileType.NotFound:
            return None
        return self._status(info)

    def _status(self, info: pafs.FileInfo) -> FileStatus:
        rel = info.path[len(self.root) :].lstrip("/") if info.path.startswith(self.root) else info.path
        mtime = info.mtime_ns // 1_000_000 if info.mtime_ns is not None else 0
        return FileStatus(rel, info.size or 0, mtime)

    def list(self, path: str, *, recursive: bool = False) -> list[FileStatus]:
        """Files (not folders) under `path`; an absent folder lists as empty."""
        self._count("list", path)
        selector = pafs.FileSelector(self.full(path), allow_not_found=True, recursive=recursive)
        return [self._status(i) for i in self._io("listing", path, lambda: self.fs.get_file_info(selector))
                if i.is_file]

    def list_names(self, path: str) -> list[tuple[str, int | None]]:
        """(name, mtime in ms) of the files directly in `path`, the mtime None where it would
        cost a stat per file (a local folder: names only); an absent folder lists as empty."""
        if not self.is_local:
            return [(f.name, f.mtime_ms) for f in self.list(path)]
        self._count("list", path)
        try:
            with os.scandir(self.full(path)) as entries:
                return [(e.name, None) for e in entries if e.is_file()]
        except (FileNotFoundError, NotADirectoryError):
            return []

    def list_dirs(self, path: str) -> list[str]:
        return self.list_entries(path)[1]

    def list_entries(self, path: str) -> tuple[list[FileStatus], list[str]]:
        """(files, folders) directly in `path`, from one listing."""
        self._count("list", path)
        selector = pafs.FileSelector(self.full(path), allow_not_found=True)
        files: list[FileStatus] = []
        dirs: list[str] = []
        for info in self._io("listing", path, lambda: self.fs.get_file_info(selector)):
            if info.is_file:
                files.append(self._status(info))
            elif info.type == pafs.FileType.Directory:
                dirs.append(self._status(info).path)
        return files, dirs

    def walk_files(self, path: str = "") -> Iterator[FileStatus]:
        yield from self.list(path, recursive=True)

    def missing_bucket(self) -> str | None:
        """Object stores: the root's bucket when it does not exist (or cannot be seen with these
        credentials); else None."""
        if not self.is_object_store:
            return None
        bucket = self.root.lstrip("/").split("/", 1)[0]
        try:
            return bucket if self.fs.get_file_info(bucket).type == pafs.FileType.NotFound else None
        except OSError:  # (denied, unreachable: the caller's own error says enough)
            return None

    def file_in_the_way(self) -> str | None:
        """Local file systems: the root, or its nearest existing ancestor, when that is a
        regular file (no folder can be made there). Object stores have no such conflict."""
        if not self.is_local:
            return None
        path = self.root
        while True:
            kind = self.fs.get_file_info(path).type
            if kind == pafs.FileType.File:
                return path
            if kind != pafs.FileType.NotFound:
                return None
            parent = posixpath.dirname(path)
            if parent == path:
                return None
            path = parent

    def open_input(self, path: str) -> pa.NativeFile:
        self._count("open")
        full = self.full(path)
        return self._io("opening", path, lambda: self.fs.open_input_file(full))

    # -- writes ----------------------------------------------------------------------------
    def mkdirs(self, path: str) -> None:
        """Make a folder (and its parents); nothing on object stores, which have none."""
        if self.is_object_store:
            return
        self._count("mkdir")
        full = self.full(path)
        self._io("making the folder", path, lambda: self.fs.create_dir(full, recursive=True))

    def write(self, path: str, data: bytes) -> None:
        """Write a whole file (overwrite). Object stores make this one PUT."""
        self._count("put")
        self._ensure_parent(path)
        full = self.full(path)

        def put() -> None:
            with self.fs.open_output_stream(full) as f:
                f.write(data)

        self._io("writing", path, put)  # a whole-file PUT: asking again is safe

    def create(self, path: str, data: bytes = b"") -> bool:
        """Create the file only if it does not exist. Returns False when it already existed.

        Local file systems: the content goes to a temp file first, hard-linked into place, so
        exactly one of several racing creators wins and no reader sees a torn file. S3: one
        PUT with `If-None-Match: *`, refused (412) when the key exists. Elsewhere (GCS, HDFS,
        Azure through pyarrow) a check then a PUT: atomic only under a lock provider outside
        the store (`atomic_create` is False there; see `lock.table_lock`).
        """
        self._count("create")
        if self.is_local:
            # write a private temp file, then hard-link it into place: the link is atomic and
            # fails if the name exists, so a crash never leaves a torn or empty timeline file
            full = self.full(path)
            os.makedirs(os.path.dirname(full), exist_ok=True)
            tmp = self._temp_file()
            with open(tmp, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            try:
                os.link(tmp, full)
            except FileExistsError:
                return False
            finally:
                os.unlink(tmp)
            return True
        if self.conditional_put is not None:
            full = self.full(path)
            return self._io("creating", path, lambda: self.conditional_put.put_if_absent(full, data), retry=False)
        if self.exists(path):
            return False
        self.write(path, data)
        return True

    def _temp_file(self) -> str:
        """A new temp file name in TEMP_FOLDER (one folder `sweep_temp_files` cleans; a hard
        link from there into any folder of the table stays on the same file system)."""
        folder = self.full(TEMP_FOLDER)
        os.makedirs(folder, exist_ok=True)
        return os.path.join(folder, f"{uuid.uuid4().hex}.tmp")

    def sweep_temp_files(self, older_than_ms: int = STALE_TEMP_MS, now_ms: float | None = None) -> list[str]:
        """Delete the temp files of `create` that a killed process left: those in TEMP_FOLDER
        (and `.hoodie/.tmp-*`, where earlier versions put them) last modified more than
        `older_than_ms` before `now_ms`; a live creator's is younger. Returns their paths; object
        stores have none."""
        if not self.is_local:
            return []
        now = time.time() * 1000 if now_ms is None else now_ms
        removed = []
        for folder, prefix in ((TEMP_FOLDER, ""), (".hoodie", ".tmp-")):
            try:
                entries = list(os.scandir(self.full(folder)))
            except (FileNotFoundError, NotADirectoryError):
                continue
            for entry in entries:
                if not (entry.name.startswith(prefix) and entry.is_file()):
                    continue
                with contextlib.suppress(FileNotFoundError):  # another sweeper was quicker
                    if now - entry.stat().st_mtime * 1000 > older_than_ms:
                        os.unlink(entry.path)
                        removed.append(f"{folder}/{entry.name}")
        return removed

    def take_over(self, path: str, data: bytes, older_than_ms: int) -> bool:
        """Replace a file last modified more than `older_than_ms` ago (a dead holder's lock)
        with `data`. On S3 one PUT with `If-Match` its ETag: of several takers exactly one
        wins; on a local file system a take-over mark decides (`_take_over_local`). Elsewhere a
        delete then `create`: two takers that both saw the stale file could both delete (Hudi's
        file lock has the same window). A file gone since the caller looked is created, never
        deleted. False when the file is not stale or another taker won."""
        now = time.time() * 1000
        if self.conditional_put is not None:
            self._count("head")
            version = self.conditional_put.version(self.full(path))
            if version is None:
                return self.create(path, data)
            if now - version[1] <= older_than_ms:
                return False
            self._count("put")
            return self.conditional_put.put_if_match(self.full(path), data, version[0])
        status = self.status(path)
        if status is None:  # released since the caller looked: a plain create, never a delete
            return self.create(path, data)  # (deleting here could remove a lock just taken)
        if now - status.mtime_ms <= older_than_ms:
            return False
        if self.is_local:
            return self._take_over_local(path, data, status, older_than_ms, now)
        self.delete(path)
        return self.create(path, data)

    def refresh(self, path: str, data: bytes) -> bool:
        """Mark `path` as modified now if it still holds exactly `data` (a live holder's lock:
        so no waiter takes it for a dead one's). Locally its mtime is set; on S3 it is PUT again
        only if unchanged (`If-Match` its ETag); elsewhere read, compared and written. False
        when the file is gone or holds something else (another holder has it)."""
        self._count("refresh")
        if self.conditional_put is not None:
            version = self.conditional_put.version(self.full(path))
            if version is None or self._read_or_none(path) != data:
                return False
            return self.conditional_put.put_if_match(self.full(path), data, version[0])
        if self._read_or_none(path) != data:
            return False
        if self.is_local:
            try:
                os.utime(self.full(path))
            except FileNotFoundError:
                return False
            # a taker may have replaced the file between the read and the touch: the touched
            # file must still be ours (a taker that moves it aside after this sees its new
            # modification time and puts it back)
            return self._read_or_none(path) == data
        self.write(path, data)
        return True

    def _read_or_none(self, path: str) -> bytes | None:
        try:
            return self.read(path)
        except (FileNotFoundError, StorageNotFoundError):
            return None

    def _take_over_local(self, path: str, data: bytes, stale: FileStatus, older_than_ms: int, now: float) -> bool:
        """Of several takers that saw the same stale file, the one that creates its take-over
        mark (named by the file, its mtime and an attempt number, in TEMP_FOLDER, swept after
        STALE_TEMP_MS) wins; it moves the stale file aside (a rename) and creates `path`. A
        mark itself stale (its taker died before it finished) lets the next attempt number be
        tried. A file that changed meanwhile (its holder was alive after all and let go) goes
        back and the taker loses."""
        for attempt in itertools.count():
            mark = f"{TEMP_FOLDER}/takeover-{path.replace('/', '_')}-{stale.mtime_ms}-{attempt}"
            if self.create(mark):
                break
            taken = self.status(mark)
            if taken is not None and now - taken.mtime_ms <= older_than_ms:
                return False  # another taker is at it (or died less than older_than_ms ago)
        current = self.status(path)
        if current is None:
            return self.create(path, data)
        if current.mtime_ms != stale.mtime_ms:
            return False  # replaced since the caller looked
        full = self.full(path)
        aside = self._temp_file()
        try:
            os.rename(full, aside)
        except FileNotFoundError:
            return self.create(path, data)
        try:
            if os.stat(aside).st_mtime_ns // 1_000_000 != stale.mtime_ms:
                with contextlib.suppress(FileExistsError):
                    os.link(aside, full)
                return False
            return self.create(path, data)
        finally:
            os.unlink(aside)

    def delete(self, path: str, *, missing_ok: bool = True) -> None:
        self._count("delete")
        full = self.full(path)
        if missing_ok and (direct := self._direct()) is not None:  # S3: one DELETE, no folder marker left
            self._io("deleting", path, lambda: direct.delete(full))
            return
        try:
            self._io("deleting", path, lambda: self.fs.delete_file(full))
        except FileNotFoundError:
            if not missing_ok:
                raise

    def delete_dir(self, path: str) -> None:
        """Delete a folder and its content; an absent folder (or one deleted meanwhile) is fine."""
        try:
            if self.is_dir(path):
                self._count("delete")
                full = self.full(path)
                self._io("deleting the folder", path, lambda: self.fs.delete_dir(full))
        except FileNotFoundError:
            pass

    def _ensure_parent(self, path: str) -> None:
        if self.is_local:
            os.makedirs(os.path.dirname(self.full(path)), exist_ok=True)


def _filesystem_of(uri: str) -> tuple[pafs.FileSystem, str]:
    """pyarrow's file system for a URI given without storage options (credentials from the
    environment), and the path in it. An object store's key is the URI's path as written, as
    with storage options and as Hadoop takes it (`t%20x` is not `t x`; a space is a character),
    and `s3a://` is `s3://`."""
    parts = urlsplit(uri)
    scheme = parts.scheme.lower()
    family = {"s3a": "s3", "gcs": "gs"}.get(scheme, scheme)
    try:
        if family in ("s3", "gs"):
            filesystem, _ = pafs.FileSystem.from_uri(f"{family}://{parts.netloc}")
            return filesystem, posixpath.join(parts.netloc, parts.path.lstrip("/"))
        return pafs.FileSystem.from_uri(uri)
    except (pa.ArrowInvalid, ValueError) as e:
        raise InvalidOptionError(f"table {uri}: no file system for this URI: {e}") from None


def open_storage(uri: str, storage_options: dict[str, Any] | None = None) -> Storage:
    """A `Storage` at `uri`, its file system built from `storage_options` when given: S3 and
    GCS take delta-rs / object_store style keys (`aws_access_key_id`, `aws_region`,
    `aws_endpoint_url`, `aws_allow_http`...) or pyarrow's keywords (see `objectstore`)."""
    if not storage_options:
        return Storage(uri)
    parts = urlsplit(uri)
    scheme = parts.scheme.lower()
    opts = dict(storage_options)
    conditional = None
    if scheme in ("s3", "s3a"):
        settings = objectstore.s3_settings(uri, opts)
        fs: pafs.FileSystem = objectstore.s3_filesystem(uri, settings)
        if settings.conditional_put and objectstore.boto3_available():
            conditional = objectstore.ConditionalPut(settings)
    elif scheme in ("gs", "gcs"):
        fs = pafs.GcsFileSystem(**objectstore.gcs_options(uri, opts))
    elif scheme in ("abfs", "abfss"):
        fs = pafs.AzureFileSystem(**opts)
    elif scheme in ("hdfs", "viewfs"):
        fs = pafs.HadoopFileSystem(host=opts.pop("host", f"{scheme}://{parts.netloc}"), **opts)
        storage = Storage(parts.path, fs)
        storage.uri = uri
        return storage
    else:
        raise InvalidOptionError(f"table {uri}: storage options are supported for s3, gs, abfs and hdfs "
                                 f"tables, not {scheme or 'local'!r} ones")
    storage = Storage(posixpath.join(parts.netloc, parts.path.lstrip("/")), fs, conditional_put=conditional)
    storage.uri = uri  # errors name the table by its URI
    return storage
