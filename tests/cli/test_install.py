"""Install hints name commands that work: airflow-lake is on no package index, so a hint never
says `pip install airflow-lake...`; it names the missing requirement as pyproject.toml pins it."""

from __future__ import annotations

import re
import sys

import pytest

from airflow_lake.cli.history import InstantRecord
from airflow_lake.cli.picture import draw
from airflow_lake.core.errors import LakeError
from airflow_lake.core.install import install_hint
from tests.conftest import REPO

PYPROJECT = (REPO / "pyproject.toml").read_text()
# `pip install` (or `pip install -e`) of a bare airflow-lake, an index name that does not exist
BARE_NAME = re.compile(r"pip3? install\s+(?:-\S+\s+)*['\"]?airflow-lake\b")


@pytest.mark.parametrize(("package", "extra"), [("matplotlib", "cli"), ("pyspark", "provider"), ("boto3", "s3"),
                                                  ("pylance", "lance")])
def test_a_hint_pins_the_requirement_as_pyproject_does(package, extra):
    extra_list = re.search(rf"^{extra} = \[(.*?)^\]", PYPROJECT, re.S | re.M).group(1)
    [requirement] = re.findall(rf'"({package}(?![\w.-])[^"]*)"', extra_list)
    assert install_hint(package, extra) == f"pip install '{requirement}' (airflow-lake's `{extra}` extra)"


def test_the_picture_without_matplotlib_says_what_to_install(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib raises ImportError
    with pytest.raises(LakeError) as error:
        draw([InstantRecord("20260105080000000", "commit", "COMPLETED")], tmp_path / "t.svg", fmt="svg", title="t",
             archived_until=None, retained_from=None, times_known=True, now_ms=0)
    assert str(error.value) == f"the timeline picture needs matplotlib: {install_hint('matplotlib', 'cli')}"
    assert "pip install 'matplotlib>=" in str(error.value)


def test_no_code_tells_to_install_airflow_lake_from_an_index():
    sources = [p for folder in ("airflow_lake", "spark_jobs", "dags") for p in (REPO / folder).rglob("*.py")]
    bad = [f"{p.relative_to(REPO)}: {m.group(0)}" for p in sources for m in BARE_NAME.finditer(p.read_text())]
    assert not bad
