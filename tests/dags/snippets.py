"""The fenced code blocks of README.md, dags/README.md and docs/*.md, and the checks of the
commands in their shell blocks against the real product: `airflow-lake` arguments parsed by the
command line itself, `make` targets, `python -m` modules and `--help` flags, spark-submit job
flags parsed by the job's own parser, `pip install` never naming airflow-lake as an index package,
`airflow dags test` DAG ids."""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import io
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from tests.cli.test_install import BARE_NAME
from tests.conftest import REPO

DOCS = [REPO / "README.md", REPO / "dags" / "README.md", *sorted((REPO / "docs").glob("*.md"))]
FENCE = re.compile(r"^(?P<indent> *)```(?P<lang>[^\n`]*)\n(?P<code>.*?)^(?P=indent)```[ \t]*$", re.S | re.M)
NOT_RUN = re.compile(r"<!-- not run: (?P<reason>[^>]*?) -->\s*$")
SHELL = {"sh", "bash", "console"}
SEPARATORS = {";", "&&", "||", "|", "&", "(", ")", "{", "}"}


@dataclass(frozen=True)
class Block:
    doc: Path
    line: int
    lang: str
    code: str
    not_run: str | None  # the reason of a `<!-- not run: reason -->` mark on the line before

    @property
    def where(self) -> str:
        return f"{self.doc.relative_to(REPO)}:{self.line}"

    def commands(self) -> list[str]:
        """The block's command lines, continuation lines joined (a console block: its `$ ` lines)."""
        lines, text = [], self.code.replace("\\\n", " ")
        for line in text.splitlines():
            if self.lang == "console":
                if line.startswith("$ "):
                    lines.append(line[2:])
            elif line.strip() and not line.lstrip().startswith("#"):
                lines.append(line)
        return lines


def blocks(doc: Path) -> list[Block]:
    text = doc.read_text()
    found = []
    for m in FENCE.finditer(text):
        before = text[:m.start()].rstrip("\n").rsplit("\n", 1)[-1]
        mark = NOT_RUN.search(before)
        code = "\n".join(ln[len(m["indent"]):] for ln in m["code"].splitlines()) + "\n"
        found.append(Block(doc, text.count("\n", 0, m.start()) + 1, m["lang"].strip(), code,
                           mark["reason"] if mark else None))
    return found


def all_blocks() -> list[Block]:
    return [b for doc in DOCS for b in blocks(doc)]


def marks(doc: Path) -> int:
    return len(re.findall(r"<!-- not run:", doc.read_text()))


# -- commands ------------------------------------------------------------------------------------
def simple_commands(line: str) -> list[list[str]]:
    """A shell line's simple commands (split at ; && || | & and braces), `VAR=value` prefixes
    dropped, comments removed."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|(){}")
    lexer.whitespace_split = True
    lexer.commenters = "#"
    commands, current = [], []
    for token in lexer:
        if token in SEPARATORS or set(token) <= set(";&|(){}"):
            commands.append(current)
            current = []
        else:
            current.append(token)
    commands.append(current)
    result = []
    for words in commands:
        while words and re.fullmatch(r"[A-Za-z_]\w*=.*", words[0]):
            words = words[1:]
        if words:
            result.append(words)
    return result


def check_command(words: list[str]) -> str | None:
    """What is wrong with one documented command, or None."""
    program = Path(words[0]).name
    if program == "airflow-lake":
        return check_cli(words[1:])
    if program == "make":
        return check_make(words[1:])
    if re.fullmatch(r"python(3(\.\d+)?)?", program):
        return check_python(words[1:])
    if program == "spark-submit":
        return check_spark_submit(words[1:])
    if re.fullmatch(r"pip3?", program) or words[1:3] == ["-m", "pip"]:
        return f"installs airflow-lake by name from an index: {' '.join(words)}" \
            if BARE_NAME.search(" ".join(words)) else None
    if program == "airflow" and words[1:3] == ["dags", "test"]:
        return check_dag_id(words[3])
    return None


def check_cli(args: list[str]) -> str | None:
    """Parse `airflow-lake ARGS` with the command line's own parser, down to the subcommand."""
    import click

    from airflow_lake.cli import cli

    try:
        with contextlib.redirect_stdout(io.StringIO()):
            ctx = cli.make_context("airflow-lake", list(args))
            command = cli
            while isinstance(command, click.Group) and (ctx.protected_args or ctx.args):
                name, command, rest = command.resolve_command(ctx, [*ctx.protected_args, *ctx.args])
                ctx = command.make_context(name, rest, parent=ctx)
    except click.exceptions.Exit:
        return None
    except click.UsageError as e:
        return f"airflow-lake {' '.join(args)}: {e.format_message()}"
    return None


def check_make(args: list[str]) -> str | None:
    makefile = (REPO / "Makefile").read_text()
    missing = [t for t in args if "=" not in t and not t.startswith("-")
               and not re.search(rf"^{re.escape(t)}:", makefile, re.M)]
    return f"make: no target {missing}" if missing else None


def check_python(args: list[str]) -> str | None:
    if args[:1] == ["-c"]:
        try:
            compile(args[1], "<python -c>", "exec")
        except SyntaxError as e:
            return f"python -c: {e}"
        return None
    if args[:1] != ["-m"]:
        return None
    module, flags = args[1], [a.split("=")[0] for a in args[2:] if a.startswith("--")]
    if importlib.util.find_spec(module) is None:
        return f"python -m {module}: no such module"
    if module.startswith("airflow_lake") and flags:
        usage = subprocess.run([sys.executable, "-m", module, "--help"], capture_output=True, text=True, cwd=REPO,
                               timeout=300).stdout
        unknown = [f for f in flags if f not in usage]
        return f"python -m {module}: unknown flags {unknown}" if unknown else None
    return None


def check_spark_submit(args: list[str]) -> str | None:
    """The job's own arguments (after the job file) parsed by the job's parser."""
    at = next((i for i, a in enumerate(args) if re.search(r"\$\(job (\w+)\)|/jobs/(\w+)\.py$", a)), None)
    if at is None:
        return None
    match = re.search(r"\$\(job (\w+)\)|/jobs/(\w+)\.py$", args[at])
    name = match[1] or match[2]
    if importlib.util.find_spec(f"spark_jobs.{name}") is None:
        return f"spark-submit: no job {name}"
    parser = importlib.import_module(f"spark_jobs.{name}").PARSER
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            parser.parse_args(args[at + 1:])
    except SystemExit as e:
        if e.code:
            return f"job {name} {' '.join(args[at + 1:])}: {err.getvalue().strip().splitlines()[-1]}"
    return None


def check_dag_id(dag_id: str) -> str | None:
    ids = {m for p in (REPO / "dags").glob("*.py") for m in re.findall(r'DAG\(\s*"(\w+)"', p.read_text())}
    return None if dag_id in ids else f"airflow dags test: no DAG {dag_id} in dags/"
