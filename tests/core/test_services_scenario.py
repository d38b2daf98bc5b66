"""A long scenario: 30+ mixed writes with compaction, clean, archive and savepoints in
between, then a restore, on table versions 6 and 9; at every step our reader and the model
agree, at the end hudi-rs too, and the active timeline stays bounded."""

from __future__ import annotations

import copy
import random

import pyarrow as pa
import pytest

from airflow_lake.core import Table
from tests.conftest import hudi_read, rows
from tests.core.test_write_model import Layout, make_row, model_rows, to_arrow
from tests.model import Model

COLS = ["id", "k2", "ts", "part", "sub", "val", "name", "_hoodie_commit_time"]


@pytest.mark.slow  # a long random sequence of writes and every service
@pytest.mark.parametrize("version", [6, 9])
@pytest.mark.parametrize("table_type", ["MERGE_ON_READ", "COPY_ON_WRITE"])
def test_mixed_writes_and_services(table_path, table_type, version):
    services_scenario(table_path, table_type, version=version)


def services_scenario(table_path: str, table_type: str, storage_options: dict | None = None, *,
                      version: int = 6) -> None:
    """The scenario on a new table at `table_path` (a path, or a URI with its storage options)."""
    so = storage_options
    rng = random.Random(11)
    layout = Layout("scenario", ["id"], ["part"])
    table = Table.create(table_path, name="s", table_type=table_type, record_key="id", precombine_field="ts",
                         partition_fields="part", storage_options=so,
                         options={"hoodie.write.table.version": version})
    model = Model(["id"], layout.partition_of, "ts")
    parts: dict[int, str] = {}
    savepointed: list[str] = []
    next_key = 0
    max_commits = 8
    for step in range(34):
        op = "insert" if step == 0 else rng.choice(["upsert"] * 6 + ["delete", "insert"])
        if op == "insert":
            batch = [make_row(rng, k) for k in range(next_key, next_key + 20)]
            next_key += 20
        else:
            live = sorted(int(r["id"].split("-")[1]) for r in model.rows.values())
            batch = [make_row(rng, k) for k in rng.sample(live, min(len(live), 8 if op == "upsert" else 3))]
            if op == "upsert":
                batch += [make_row(rng, k) for k in range(next_key, next_key + 4)]
                next_key += 4
        for r in batch:
            key = int(r["id"].split("-")[1])
            r["part"] = parts.setdefault(key, r["part"])
        res = table.write(to_arrow(batch), operation=op)
        getattr(model, "insert" if op == "insert" else op)(res.instant, batch)
        if step % 5 == 4 and table_type == "MERGE_ON_READ":
            plan = table.schedule_compaction(max_delta_commits=3)
            if plan and step % 10 == 9:  # sometimes a write lands while the plan is pending
                extra = [make_row(rng, next_key)]
                extra[0]["part"] = parts.setdefault(next_key, extra[0]["part"])
                next_key += 1
                model.upsert(table.write(to_arrow(extra)).instant, extra)
            if plan:
                table.run_compaction(plan)
        if step % 6 == 5:
            table.clean(retained=4)
        if step % 7 == 6:
            table.archive(min_commits=5, max_commits=max_commits)
        if step % 8 == 3:
            # a savepoint of an older write, taken after a compaction may have rewritten its
            # files (a v9 savepoint shares its commit's requested time, not its completion)
            if savepointed:
                table.delete_savepoint(savepointed.pop())
            timeline = table.timeline
            written = dict(model.history)
            compacted = [i.time for i in timeline.completed() if i.action == "commit" and i.time not in written]
            active = set(timeline.commits().completed().times)
            bound = timeline.latest_clean_bound() or ""
            older = [t for t, _ in model.history[:-1]
                     if t in active and t >= bound and (not compacted or t < compacted[-1])]
            if older:
                savepointed.append(table.savepoint(older[-1]))
        if step == 27 and savepointed:  # back to the savepoint: every later write undone
            table.restore(savepointed[-1])
            model.history = [(t, r) for t, r in model.history if t <= savepointed[-1]]
            model.rows = copy.deepcopy(model.history[-1][1])
        # the model keeps only committed data instants; compaction commits are not data
        assert rows(table.read(), COLS) == model_rows(list(model.rows.values()), COLS), f"step {step}"
    for instant in savepointed:
        table.delete_savepoint(instant)
    table.archive(min_commits=5, max_commits=max_commits)
    final = rows(table.read(), COLS)
    assert final == model_rows(list(model.rows.values()), COLS)
    assert rows(hudi_read(table_path, so), COLS) == final
    active = table.timeline.commits().completed().times
    assert len(active) <= max_commits + 4  # min..max plus what the clean window protects
    for instant in active:
        if instant in dict(model.history):
            expected = model_rows(model.as_of(instant), COLS)
            assert rows(table.read(as_of=instant), COLS) == expected
            assert rows(hudi_read(table_path, so, **{"hoodie.read.as.of.timestamp": instant}), COLS) == expected
    assert table.archived_timeline.completed()
    assert table.read().num_rows == pa.table({"n": [len(model.rows)]})["n"][0].as_py()
