"""`--spark`: run a table service as its Spark job through `spark-submit` (a subprocess of
the virtualenv's `spark-submit`, the package shipped with `--py-files`). The job's JSON last
line is the result; its `ERROR ...` line is the failure."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections import deque
from pathlib import Path

import click

from ..core import errors
from ..core.install import install_hint
from ..core.objectstore import split_secrets
from ..core.vocabulary import split_options
from ..spark.options import encode
from . import render
from .app import CommandError

# a job's one-line error (airflow_lake.spark.job.JobError)
_JOB_ERROR = re.compile(r"\w+ failed: table .*?, instant \S+: (?P<kind>\w+): (?P<reason>.*)")


def spark_options(fn):
    """`--spark`, `--master`, `--conf`: where a service command runs."""
    fn = click.option("--conf", "spark_conf", multiple=True, metavar="KEY=VALUE",
                      help="with --spark: a Spark setting for spark-submit (repeatable)")(fn)
    fn = click.option("--master", help="with --spark: the Spark master (default: spark-submit's, else local[*])")(fn)
    return click.option("--spark", "use_spark", is_flag=True,
                        help="run as the Spark job through spark-submit instead of on the local engine")(fn)


def spark_submit_binary() -> Path:
    """The virtualenv's `spark-submit`, else pyspark's own."""
    beside = Path(sys.executable).parent / "spark-submit"
    if beside.exists():
        return beside
    import importlib.util

    spec = importlib.util.find_spec("pyspark")
    if spec is None or spec.origin is None:
        raise CommandError(f"--spark needs pyspark ({install_hint('pyspark', 'provider')}): no spark-submit found")
    return Path(spec.origin).parent / "bin" / "spark-submit"


def submit(job: str, table: str, args: list[str], options: dict[str, str], *, master: str | None,
           conf: tuple[str, ...]) -> dict:
    """Run job `job` on `table` with spark-submit; its JSON result, or a `CommandError`
    carrying the job's one-line error."""
    from ..spark.packaging import job_path, package_zip  # (imports pyspark: only under --spark)
    from ..spark.startup import driver_moves_rows, driver_startup, user_java_options

    command = [str(spark_submit_binary())]
    if master:
        command += ["--master", master]
    for c in conf:
        command += ["--conf", c]
    settings = dict(c.split("=", 1) for c in conf if "=" in c)
    public, secret = split_secrets(options)
    env = {**os.environ, **encode(secret)}  # secrets in the job's environment, never on its command line
    env.setdefault("PYSPARK_PYTHON", sys.executable)
    # a driver on this machine starts as the provider's do (quick JIT, the class-data archive)
    # unless the user set its Java options
    key = user_java_options(settings) if settings.get("spark.submit.deployMode", "client") == "client" else None
    startup = None
    if key is not None:
        moves = driver_moves_rows(job, master or settings.get("spark.master"), args, split_options(options)[1])
        startup = driver_startup(env=env, job=job, moves_rows=moves)
    if startup is not None:
        command += ["--conf", f"{key}={startup.java_options}"]
    command += ["--py-files", str(package_zip()), str(job_path(job)), "--table", table, *args]
    for name, value in public.items():
        command += ["--option", f"{name}={value}"]
    tail: deque[str] = deque(maxlen=40)
    status = render.console(stderr=True)
    proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.stdout is not None
    with status.status(f"spark-submit {job} ...") if status.is_terminal else _nothing():
        for line in proc.stdout:
            line = line.rstrip("\n")
            tail.append(line)
    code = proc.wait()
    lines = list(tail)
    result = _json_line(lines[-1] if lines else "")
    if startup is not None and startup.settle(code == 0, result is not None) and code != 0:
        return result  # (only the archive could not be written)
    if code != 0:
        error = next((ln for ln in reversed(lines) if ln.startswith("ERROR ")), None)
        raise CommandError(job_error(error[len("ERROR "):]) if error else
                           f"table {table}: spark-submit {job} exited {code}: " + " | ".join(lines[-5:]))
    if result is None:
        last = lines[-1] if lines else ""
        raise CommandError(f"table {table}: spark-submit {job} printed no JSON result (last line {last!r})")
    return result


def _json_line(line: str) -> dict | None:
    try:
        doc = json.loads(line)
    except ValueError:
        return None
    return doc if isinstance(doc, dict) else None


def job_error(line: str) -> str:
    """A job's one-line error as the local engine words it: a `LakeError`'s own message (it
    names the table and the instant), else the job's whole line."""
    match = _JOB_ERROR.fullmatch(line)
    kind = getattr(errors, match["kind"], None) if match else None
    if isinstance(kind, type) and issubclass(kind, errors.LakeError):
        return match["reason"]
    return line


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False
