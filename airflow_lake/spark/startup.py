"""Driver JVM options that cut a short job's start-up: `spark-submit` in client mode spends
most of a small job starting Spark's JVM (class loading and JIT compilation on few cores).

- `-XX:TieredStopAtLevel=1 -XX:+UseSerialGC`: quick (C1) compilation only and one GC thread,
  so start-up does not compete with the job for cores. The driver schedules; with a `local`
  master it also runs the tasks' JVM side (reading, shuffling and joining rows, Arrow to and
  from the Python workers), which for a large batch needs the optimising (C2) compiler: a
  driver that will move many rows (`driver_moves_rows`) keeps C2 for its hottest code only
  (`BALANCED_JIT`). Measured on 2 cores, `local[2]`, MOR upserts into bloom-indexed tables:
  1M rows (47 MB of parquet) into 5M 46.3 s quick, 29.1 s balanced (34.1 s with the JVM's
  default thresholds); 300k rows (15 MB) into 1M about even (19.4-22.6 s against 20.0-20.2 s);
  100k (5.5 MB) 12.7-13.2 s quick, 13.9-15.6 s balanced; 100 rows 7.2 s quick, 7.1-8.2 s and
  1-2 CPU-s more balanced.
- A class-data sharing archive of the classes Spark loads (`-XX:SharedArchiveFile`): the first
  upsert on a machine writes it at exit (`-XX:ArchiveClassesAtExit`, about 190 MB, under
  `$AIRFLOW_LAKE_CACHE` or `~/.cache/airflow-lake/jvm/`); later jobs map it instead of
  loading classes one by one. An upsert loads the most (Spark SQL, Arrow, the Python runner):
  until one has run, the first other job writes a partial archive that other jobs map (an
  upsert mapping one written by a compaction plan spent 7.6 CPU-s, 6.3 with its own). It is
  keyed by the Java binary and Spark's jars; a stale or damaged archive is ignored by the JVM,
  which then starts as usual.
- JVM log lines go to stderr, never after the job's JSON line on stdout.
- Not a JVM option, decided by the upsert job from the source it lists: below
  `SMALL_INPUT_BYTES`, Spark SQL interprets expressions (`INTERPRETED_SQL`, `interprets_sql`).

Measured on 2 cores (load 7-8): a `spark-submit` that starts a session, runs two small jobs
and stops took 50-56 s plain, 27-30 s with the first two options, 18-21 s with the archive.

    spark-submit --driver-java-options "$(python -m airflow_lake.spark.startup --create)" ...

runs a job by hand with them (`--create`: the first such job writes the archive;
`--moves-rows`: the balanced JIT, for a large upsert on a `local` master).
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import sys
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

QUICK_JIT = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")
# C1 first, C2 only for code 30 times hotter than the JVM's default thresholds ask (3 and 10
# times: a large upsert 31.4 s and a small job's CPU higher; 100 times: 34.6 s)
BALANCED_JIT = ("-XX:Tier4InvocationThreshold=150000", "-XX:Tier4CompileThreshold=450000",
                "-XX:Tier4BackEdgeThreshold=1200000", "-XX:+UseSerialGC")
# a job input from which C2 pays for itself in a local-master driver (where the measurements cross)
LARGE_INPUT_BYTES = 16 << 20
# the jobs whose tasks move rows through the JVM (the others work on the timeline or delete
# files; a compaction merges its file groups in the Python workers: of a 1M-row MOR table
# 4.6 s quick, 5.2 s balanced, medians of 3)
ROW_JOBS = frozenset({"upsert"})
# an upsert input below which Spark SQL interprets expressions rather than generating and
# compiling Java for each query (`INTERPRETED_SQL`): a small write plans dozens of queries over
# few rows. Measured on 2 cores, `local[2]`, MOR upserts (bloom index), generated / interpreted:
# 100 rows into 100, 7.9-8.3 / 6.8-7.4 s; into 1M rows: 20k rows (1.1 MB) 8.9 / 8.5 s; 100k
# rows (5.4 MB) 11.9-12.3 / 12.3-12.4 s; 300k rows (14 MB) 20.0 / 21.8 s
SMALL_INPUT_BYTES = 2 << 20
INTERPRETED_SQL = {"spark.sql.codegen.wholeStage": "false", "spark.sql.codegen.factoryMode": "NO_CODEGEN"}
JVM_LOG = ("-Xlog:disable", "-Xlog:all=warning,cds*=off:stderr")  # stdout stays the job's
DRIVER_OPTION_KEYS = ("spark.driver.extraJavaOptions", "spark.driver.defaultJavaOptions")
ARCHIVE_AT_EXIT = "-XX:ArchiveClassesAtExit"
KEEP_ARCHIVES = 2
# the jobs whose JVM loads the most classes: an archive one of them wrote serves every job
FULL_ARCHIVE_JOBS = frozenset({"upsert"})
PARTIAL = ".partial"


def cache_dir() -> Path:
    """Where the archives live: `$AIRFLOW_LAKE_CACHE/jvm`, else `$XDG_CACHE_HOME/airflow-lake/jvm`
    (default `~/.cache/airflow-lake/jvm`)."""
    root = os.environ.get("AIRFLOW_LAKE_CACHE")
    if root:
        return Path(root) / "jvm"
    xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(xdg) / "airflow-lake" / "jvm"


def java_binary() -> Path | None:
    """The `java` spark-submit runs: `$JAVA_HOME/bin/java`, else the one on PATH (resolved)."""
    home = os.environ.get("JAVA_HOME")
    found = os.path.join(home, "bin", "java") if home else shutil.which("java")
    return Path(found).resolve() if found and os.path.exists(found) else None


def spark_jars() -> Path | None:
    """Spark's jars folder: `$SPARK_HOME/jars`, else the pip pyspark's (found, not imported)."""
    home = os.environ.get("SPARK_HOME")
    if not home:
        spec = importlib.util.find_spec("pyspark")
        home = os.path.dirname(spec.origin) if spec and spec.origin else None
    jars = Path(home) / "jars" if home else None
    return jars if jars and jars.is_dir() else None


def fingerprint(java: Path, jars: Path) -> str:
    """What an archive was made for: the Java binary and Spark's jars (paths, sizes, times).
    By path, not by file identity: the JVM opens the jars by the paths the archive recorded, so
    an archive serves only while the folder that wrote it exists (keyed by identity, a new
    checkout whose venv hard-links the same jars took the archive of a deleted one, and every
    job silently ran without: 150 CPU-s more over the tests). The tests run Spark from a home
    of links that outlives checkouts instead (tests/spark_home.py)."""
    h = hashlib.sha256()
    for path in [java, *sorted(jars.glob("*.jar"))]:
        st = path.stat()
        h.update(f"{path}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return h.hexdigest()[:16]


@dataclass
class DriverStartup:
    """The driver's JVM options for one `spark-submit`, and the archive it uses or writes.
    Call `finish(ok)` once spark-submit has exited: a written archive is moved into place
    (atomically: concurrent jobs may each write one) only when the job succeeded."""

    java_options: str
    archive: Path | None = None
    writing: Path | None = None

    def settle(self, exited_ok: bool, result_written: bool) -> bool:
        """After spark-submit exited: whether the job succeeded, which it also did when it wrote
        its result and only its JVM failed writing the archive at exit (later jobs then start
        without one, and do not try again)."""
        archive_failed = not exited_ok and self.writing is not None and result_written
        self.finish(exited_ok, archive_failed=archive_failed)
        return exited_ok or archive_failed

    def finish(self, ok: bool, *, archive_failed: bool = False) -> None:
        """`archive_failed`: the job completed but its JVM failed writing the archive at exit
        (the exit code says so): later jobs do not try again."""
        if self.writing is None:
            return
        if archive_failed:
            _failed_marker(self.archive).touch()
        try:
            if ok and self.writing.is_file() and self.writing.stat().st_size > 0:
                os.replace(self.writing, self.archive)
                if _partial_of(self.archive) != self.archive:  # the full one replaces the partial
                    _partial_of(self.archive).unlink(missing_ok=True)
                _prune(self.archive.parent, keep=self.archive)
        finally:
            self.writing.unlink(missing_ok=True)
            self.writing = None


def archive_path(*, partial: bool = False) -> Path | None:
    """The class-data archive for this machine's Java and Spark (it may not exist yet), or None
    when either cannot be found; `partial`: the one a job other than `FULL_ARCHIVE_JOBS` writes
    while there is no full one."""
    java, jars = java_binary(), spark_jars()
    if java is None or jars is None:
        return None
    full = cache_dir() / f"spark-{fingerprint(java, jars)}.jsa"
    return _partial_of(full) if partial else full


def class_path_folders(env: Mapping[str, str]) -> list[Path]:
    """Folders spark-submit puts on the driver's class path before Spark's jars: the Spark
    conf folder (`SPARK_CONF_DIR`, else `$SPARK_HOME/conf`), Hadoop's and YARN's."""
    conf = env.get("SPARK_CONF_DIR") or (os.path.join(env["SPARK_HOME"], "conf") if env.get("SPARK_HOME") else None)
    if conf is None and (jars := spark_jars()) is not None:
        conf = str(jars.parent / "conf")
    return [Path(p) for p in (conf, env.get("HADOOP_CONF_DIR"), env.get("YARN_CONF_DIR")) if p]


def archive_possible(env: Mapping[str, str]) -> bool:
    """The JVM archives classes only from a class path without non-empty folders (a Spark conf
    folder holding `spark-defaults.conf` rules it out), and a failed attempt is not repeated."""
    if any(p.is_dir() and any(p.iterdir()) for p in class_path_folders(env)):
        return False
    target = archive_path()
    return target is not None and not _failed_marker(target).exists()


def driver_moves_rows(job: str | None, master: str | None, argv: Sequence[str],
                      storage_options: Mapping[str, Any] | None = None) -> bool:
    """Whether the driver's JVM will move many rows: a `local` master's (None: spark-submit's
    default, local) running a job of `ROW_JOBS` (with arguments `argv`) on a source of at least
    `LARGE_INPUT_BYTES`, or of a size not known before it runs (a query or table source). A
    cluster's driver only schedules: its executors' JVMs start with their own options. The
    source is listed (with `storage_options`) only when the rest holds."""
    if master is not None and not master.strip().lower().startswith("local"):
        return False
    if job not in ROW_JOBS:
        return False
    size = source_bytes_of(argv, storage_options)
    return size is None or size >= LARGE_INPUT_BYTES


def source_bytes_of(argv: Sequence[str], storage_options: Mapping[str, Any] | None = None) -> int | None:
    """`source_bytes` of the `--source` (and `--source-format`) an upsert is run with; 0 without one."""
    given = {flag: value for flag, value in zip(argv, argv[1:], strict=False)
             if flag in ("--source", "--source-format")}
    source = given.get("--source")
    return source_bytes(source, given.get("--source-format"), storage_options) if source else 0


def interprets_sql(input_bytes: int | None) -> bool:
    """Whether a job reading `input_bytes` (None: not known) runs its queries with
    `INTERPRETED_SQL`: below `SMALL_INPUT_BYTES` only."""
    return input_bytes is not None and input_bytes < SMALL_INPUT_BYTES


def source_bytes(source: str, fmt: str | None = None, storage_options: Mapping[str, Any] | None = None,
                 *, unlisted: int | None = 0) -> int | None:
    """The size of an upsert's source: a file, or a folder's files (names starting with `_` or
    `.` left out, as the job reads them); None for a query or table source. A source that
    cannot be listed here (missing, or a store these options do not reach) counts as
    `unlisted`, asked once: the job reports what is wrong with it, or reads it with its own
    settings (0, the default: small for the driver's JIT, which may not wait for a large source
    it cannot see; None: not known)."""
    if fmt in ("sql", "table"):
        return None
    from airflow_lake.core.errors import LakeError
    from airflow_lake.core.storage import open_storage

    try:
        storage = open_storage(source.rstrip("/") or "/", dict(storage_options or {}))
        storage.retry_delays = ()  # (an estimate: not worth waiting out a store's transient errors)
        if storage.is_dir(""):
            return sum(f.size or 0 for f in storage.walk_files("") if not f.name.startswith(("_", ".")))
        status = storage.status("")
        return status.size if status is not None else unlisted
    except (OSError, ValueError, LakeError):
        return unlisted


def driver_startup(*, archive: bool = True, create: bool = True, env: Mapping[str, str] | None = None,
                   job: str | None = None, moves_rows: bool = False) -> DriverStartup:
    """The options for a driver started on this machine (with spark-submit's environment `env`,
    default this process's) to run `job`: the quick JIT, or with `moves_rows`
    (`driver_moves_rows`) the balanced one. With `archive`, the class-data archive for this Java
    and Spark is used when it exists, else (with `create`) written by this run, where the class
    path allows. Until a job of `FULL_ARCHIVE_JOBS` (or one not named) has written it, other
    jobs use, or write, the partial archive; such a job then writes the full one, starting
    without the partial once."""
    options = [*(BALANCED_JIT if moves_rows else QUICK_JIT), *JVM_LOG]
    full = archive_path() if archive and archive_possible(os.environ if env is None else env) else None
    if full is None:
        return DriverStartup(" ".join(options))
    if full.is_file():
        return DriverStartup(" ".join([*options, f"-XX:SharedArchiveFile={full}"]), full)
    partial = _partial_of(full)
    writes_full = job is None or job in FULL_ARCHIVE_JOBS
    if not writes_full and partial.is_file():
        return DriverStartup(" ".join([*options, f"-XX:SharedArchiveFile={partial}"]), partial)
    target = full if writes_full else partial
    if not create:
        return DriverStartup(" ".join(options))
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError:  # no writable cache: start without an archive
        return DriverStartup(" ".join(options))
    writing = target.parent / f".{target.name}.{uuid.uuid4().hex}.tmp"
    return DriverStartup(" ".join([*options, f"{ARCHIVE_AT_EXIT}={writing}"]), target, writing)


def user_java_options(conf: dict[str, object], defaults_file: str | None = None) -> str | None:
    """The key among `DRIVER_OPTION_KEYS` that is free for these options, or None when the
    user set both (in `conf` or in the spark-defaults file `spark-submit` reads): a `--conf`
    would replace the file's value, so a key set there is left alone."""
    taken = {k for k in DRIVER_OPTION_KEYS if k in conf}
    path = defaults_file or _spark_defaults()
    if path and os.path.isfile(path):
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                words = line.split(None, 1)
                if words and words[0] in DRIVER_OPTION_KEYS:
                    taken.add(words[0])
    free = [k for k in DRIVER_OPTION_KEYS if k not in taken]
    return free[0] if free else None


def _spark_defaults() -> str | None:
    conf_dir = os.environ.get("SPARK_CONF_DIR")
    if not conf_dir and os.environ.get("SPARK_HOME"):
        conf_dir = os.path.join(os.environ["SPARK_HOME"], "conf")
    return os.path.join(conf_dir, "spark-defaults.conf") if conf_dir else None


def _partial_of(archive: Path) -> Path:
    """The partial archive beside the full `archive` (itself when `archive` is partial)."""
    return archive if archive.name.endswith(PARTIAL + ".jsa") else archive.with_name(
        archive.name.removesuffix(".jsa") + PARTIAL + ".jsa")


def _failed_marker(target: Path) -> Path:
    """(One for the full and the partial archive: the JVM here cannot write either.)"""
    return target.with_name(f".{target.name.replace(PARTIAL, '')}.failed")


def _prune(folder: Path, keep: Path) -> None:
    """Keep the newest `KEEP_ARCHIVES` archives (older Java or Spark versions' go)."""
    archives = sorted(folder.glob("spark-*.jsa"), key=lambda p: p.stat().st_mtime, reverse=True)
    for old in archives[KEEP_ARCHIVES:]:
        if old != keep:
            old.unlink(missing_ok=True)


def main(argv: list[str] | None = None) -> int:
    """Print the options (with `--moves-rows`, the balanced JIT's); with `--create` and no
    archive yet, options that write it (at the exit of the job they are given to)."""
    args = sys.argv[1:] if argv is None else argv
    startup = driver_startup(create=False, moves_rows="--moves-rows" in args)
    options = startup.java_options
    target = archive_path()
    if "--create" in args and startup.archive is None and target is not None:
        target.parent.mkdir(parents=True, exist_ok=True)
        options += f" {ARCHIVE_AT_EXIT}={target}"
    print(options)
    return 0


if __name__ == "__main__":
    sys.exit(main())
