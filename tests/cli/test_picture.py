"""`timeline --svg/--png`: the picture is valid SVG with a lane per action, pending instants,
the archived boundary and the clean's retained window; it stays drawable at 2,000 instants."""

from __future__ import annotations

import random
import xml.etree.ElementTree as ET
from datetime import datetime, timezone
from pathlib import Path

import pyarrow as pa

from airflow_lake.cli.history import InstantRecord
from airflow_lake.cli.picture import draw
from airflow_lake.core import Table
from airflow_lake.core.timeline.clock import format_instant

from .conftest import invoke, invoke_json

SVG = "{http://www.w3.org/2000/svg}"


def svg_parts(path: Path) -> tuple[set[str], list[str]]:
    """(ids of the SVG's groups, its texts): the file must parse as XML."""
    root = ET.parse(path).getroot()
    assert root.tag == f"{SVG}svg"
    ids = {e.get("id") for e in root.iter() if e.get("id")}
    texts = ["".join(e.itertext()) for e in root.iter(f"{SVG}text")]
    return ids, texts


def test_svg_and_png_of_a_table_with_archived_clean_and_pending_instants(tmp_path):
    table = Table.create(str(tmp_path / "mor"), name="mor", table_type="MERGE_ON_READ", record_key="k",
                         precombine_field="v")
    for v in range(5):
        table.write(pa.table({"k": ["a", "b"], "v": [v, v]}), operation="upsert")
    path = table.storage.uri
    compacted = table.schedule_compaction(max_delta_commits=2)
    table.run_compaction(compacted)
    table.write(pa.table({"k": ["a"], "v": [9]}), operation="upsert")
    table.clean(retained=1)
    table.archive(min_commits=2, max_commits=3)
    plan = table.schedule_compaction(max_delta_commits=1)
    svg, png = tmp_path / "t.svg", tmp_path / "t.png"
    doc = invoke_json("timeline", path, "--archived", "--svg", svg, "--png", png)
    assert doc["pictures"] == [str(svg), str(png)] and doc["state_times_known"]
    archived = [i["time"] for i in doc["instants"] if i["archived"]]
    assert archived and set(archived) == {i.time for i in table.archived_timeline.instants}
    ids, texts = svg_parts(svg)
    assert {"lane-deltacommit", "lane-compaction", "lane-clean"} <= ids
    assert {f"pending-{plan}", "archived-boundary", "clean-retained-window"} <= ids
    labels = [t for t in texts if t.startswith(("deltacommit", "compaction", "clean"))]
    assert "compaction  (2, 1 pending)" in labels and "clean  (1)" in labels
    assert f"{plan} requested" in texts
    assert any(t.startswith(f"archived up to {archived[-1]}") for t in texts)
    assert any(t.startswith("clean retains from ") for t in texts)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert f"wrote {svg}" in invoke("timeline", path, "--svg", svg).stdout


def test_two_thousand_instants(tmp_path):
    rng = random.Random(7)
    records, ms = [], 1_760_000_000_000
    for n in range(2000):
        ms += rng.randint(20_000, 400_000)
        action = "deltacommit" if n % 10 else ("compaction" if n % 20 == 0 else "clean")
        pending = n == 1990
        records.append(InstantRecord(format_instant(datetime.fromtimestamp(ms / 1000, timezone.utc)), action,
                                     "REQUESTED" if pending else "COMPLETED", archived=n < 1200, start_ms=ms,
                                     state_ms={"REQUESTED": ms} if pending else
                                     {"REQUESTED": ms, "INFLIGHT": ms + 5000, "COMPLETED": ms + 30_000}))
    target = draw(records, tmp_path / "big.svg", fmt="svg", title="big", archived_until=records[1199].time,
                  first_active=records[1200].time, retained_from=records[1700].time, times_known=True,
                  now_ms=ms + 60_000)
    ids, texts = svg_parts(target)
    assert {"lane-deltacommit", "lane-compaction", "lane-clean", f"pending-{records[1990].time}"} <= ids
    assert "deltacommit  (1,800)" in texts and "instant labels omitted (too many); lanes show counts" in texts
    assert sum(t.isdigit() and len(t) == 6 for t in texts) == 0  # no per-instant labels


def test_fixture_copied_without_times(unzip_fixture, tmp_path):
    """Unpacked files carry the unpacking time: the picture says so and uses instant times."""
    path = str(unzip_fixture("quickstart_trips_table/mor/avro/v6_trips_8i1u.zip"))
    doc = invoke_json("timeline", path, "--svg", tmp_path / "q.svg")
    assert not doc["state_times_known"]
    assert all(set(v for v in i["state_times_ms"].values()) == {None} for i in doc["instants"])
    ids, texts = svg_parts(tmp_path / "q.svg")
    assert "lane-deltacommit" in ids and any("state times unknown" in t for t in texts)
