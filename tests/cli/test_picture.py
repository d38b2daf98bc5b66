"""`timeline --svg/--png`: the picture is valid SVG with a lane per action, pending instants,
the archived boundary and the clean's retained window; it stays drawable at 2,000 instants."""

from __future__ import annotations

import random
import xml.etree.ElementTree as ET
from datetime import datetime, timezone
from pathlib import Path

import pyarrow as pa
import pytest

from airflow_lake.cli.history import InstantRecord
from airflow_lake.cli.picture import draw
from airflow_lake.core import Table
from airflow_lake.core.timeline.clock import format_instant
from tests.conftest import REPO

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
    assert "compaction (2, 1 pending)" in labels and "clean (1)" in labels
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
                  retained_from=records[1700].time, times_known=True, now_ms=ms + 60_000)
    ids, texts = svg_parts(target)
    assert {"lane-deltacommit", "lane-compaction", "lane-clean", f"pending-{records[1990].time}"} <= ids
    assert "deltacommit (1,800)" in texts
    labelled = sum(i.startswith("instant-label-") for i in ids)
    omitted = next(t for t in texts if t.endswith(" labels omitted where they would overlap; lanes show counts"))
    assert 0 < labelled < 2000 and int(omitted.split()[0].replace(",", "")) == 2000 - 1 - labelled  # one is pending


@pytest.mark.parametrize("version", [6, 9])
def test_fixture_copied_without_times(unzip_fixture, tmp_path, version):
    """Unpacked files carry the unpacking time: the picture says so and uses instant times
    (version 9 names completion times in the files, but its requested and inflight times came
    after them)."""
    from tests.core.test_hudi1x_read import TABLES, unpack

    path = str(unzip_fixture("quickstart_trips_table/mor/avro/v6_trips_8i1u.zip") if version == 6
               else unpack(TABLES["v9_mor_nonpart"], tmp_path / "v9"))
    doc = invoke_json("timeline", path, "--svg", tmp_path / "q.svg")
    assert not doc["state_times_known"]
    assert all(set(v for v in i["state_times_ms"].values()) == {None} for i in doc["instants"])
    ids, texts = svg_parts(tmp_path / "q.svg")
    assert "lane-deltacommit" in ids and any("state times unknown" in t for t in texts)


# -- the busy table of docs/timeline-busy.svg ----------------------------------------------------
BUSY_SVG = REPO / "docs" / "timeline-busy.svg"


def record(ms: int, action: str, waits: int, runs: int | None, *, archived: bool = False) -> InstantRecord:
    """An instant requested at `ms`, inflight `waits` ms later and completed `runs` ms after that
    (None: still inflight; a negative `waits`: still requested)."""
    times = {"REQUESTED": ms}
    if waits >= 0:
        times["INFLIGHT"] = ms + waits
        if runs is not None:
            times["COMPLETED"] = ms + waits + runs
    state = "COMPLETED" if "COMPLETED" in times else "INFLIGHT" if "INFLIGHT" in times else "REQUESTED"
    return InstantRecord(format_instant(datetime.fromtimestamp(ms / 1000, timezone.utc)), action, state,
                         archived=archived, start_ms=ms, state_ms=times)


def busy_table() -> tuple[list[InstantRecord], dict]:
    """A MERGE_ON_READ table over six hours (seeded): a delta commit about every minute, a
    compaction every 20 (waiting, then running), a clean every 60, two rollbacks, a savepoint;
    everything up to the fifth compaction archived, then the writer paused for 40 minutes; at
    the end a compaction plan waiting for 90 delta commits, a clean requested and a delta commit
    inflight. Returns the records and draw()'s keyword arguments."""
    rng = random.Random(24)
    ms, records, compactions = 1_767_600_000_000, [], 0  # 2026-01-05 08:00 UTC
    for n in range(1, 331):
        ms += rng.randint(35_000, 75_000) + (2_400_000 if compactions == 5 and n % 20 == 1 else 0)
        records.append(record(ms, "deltacommit", rng.randint(200, 2_000), rng.randint(3_000, 15_000)))
        if n % 20 == 0 and n < 240:
            compactions += 1
            waits, runs = rng.randint(30_000, 240_000), rng.randint(60_000, 180_000)
            records.append(record(ms + 20_000, "compaction", waits, runs))
        if n == 240:
            plan = ms + 20_000  # scheduled, never executed
        if n % 60 == 0:
            records.append(record(ms + 30_000, "clean", rng.randint(100, 500), rng.randint(1_000, 6_000)))
        if n in (77, 203):
            records.append(record(ms + 10_000, "rollback", 50, 400))
    records.append(record(records[-1].start_ms - 3_000_000, "savepoint", 100, 300))
    archived_until = [r for r in records if r.action == "compaction"][4].time
    for r in records:
        r.archived = r.time <= archived_until
    records += [record(plan, "compaction", -1, None), record(ms + 40_000, "clean", -1, None),
                record(ms + 60_000, "deltacommit", 800, None)]
    records.sort(key=lambda r: (r.time, r.action))
    retained = [r for r in records if r.action == "deltacommit" and not r.pending][-40].time
    return records, {"title": "trips (MERGE_ON_READ)", "archived_until": archived_until, "retained_from": retained,
                     "times_known": True, "now_ms": ms + 600_000}


def draw_busy_table(target: Path) -> Path:
    records, arguments = busy_table()
    return draw(records, target, fmt="svg", **arguments)


def text_x(root: ET.Element, gid: str) -> float:
    [group] = [e for e in root.iter() if e.get("id") == gid]
    return float(next(group.iter(f"{SVG}text")).get("x"))


def tick_labels(root: ET.Element) -> list[str]:
    groups = [e for e in root.iter() if (e.get("id") or "").startswith("xtick_")]
    return ["".join(t.itertext()).strip() for g in groups for t in g.iter(f"{SVG}text")]


def test_busy_table_picture(tmp_path):
    """The picture in docs/cli.md, drawn again: the same parts and texts as the committed file;
    the archived line at the newest archived instant (not halfway to the next active one, 40
    minutes later), every instant of a sparse lane labelled, tick labels that are times of day,
    the legend as separate texts and no text with a run of spaces (SVG renderers collapse them)."""
    records, arguments = busy_table()
    target = draw_busy_table(tmp_path / "busy.svg")
    ids, texts = svg_parts(target)
    assert (ids, texts) == svg_parts(BUSY_SVG), "docs/timeline-busy.svg is stale: python -m tests.cli.test_picture"
    assert len(records) > 300 and sum(r.archived for r in records) > 100
    assert {f"pending-{r.time}" for r in records if r.pending} <= ids and sum(r.pending for r in records) == 3

    root = ET.parse(target).getroot()
    [boundary] = [e for e in root.iter() if e.get("id") == "archived-boundary"]
    line_x = float(next(boundary.iter(f"{SVG}path")).get("d").split()[1])
    assert abs(line_x - text_x(root, f"instant-label-{arguments['archived_until']}")) < 0.1

    sparse = [r for r in records if r.action in ("compaction", "clean", "rollback") and not r.pending]
    assert {f"instant-label-{r.time}" for r in sparse} <= ids
    ticks = tick_labels(root)
    assert ticks and all(":" in t or t.startswith("Jan") for t in ticks), ticks
    assert {"requested -> inflight", "inflight -> completed", "pending (to now)", "archived"} <= set(texts)
    assert not [t for t in texts if "  " in t]


def test_tick_labels_of_a_short_span_carry_the_time_of_day(tmp_path):
    """Instants seconds apart: ticks read 16:52:50, 16:53:00, 16:53:10 (not 50, 16:53, 10)."""
    start = 1_767_631_960_000  # 2026-01-05 16:52:40 UTC
    records = [record(start + 1_300 * n, "deltacommit", 100, 500) for n in range(30)]
    target = draw(records, tmp_path / "short.svg", fmt="svg", title="short", archived_until=None,
                  retained_from=None, times_known=True, now_ms=start + 40_000)
    root = ET.parse(target).getroot()
    ticks = tick_labels(root)
    assert ticks and all(len(t) == 8 and t[2] == t[5] == ":" for t in ticks), ticks
    assert "16:52:50" in ticks


if __name__ == "__main__":  # regenerate the committed picture
    print(draw_busy_table(BUSY_SVG))
