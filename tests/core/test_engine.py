"""The local engine's keyed primitive: each target group's rows, in their order, to one call."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from airflow_lake.core.engine import LocalEngine, group_slices


def test_write_groups_hands_each_group_its_rows_in_order():
    rng = np.random.default_rng(7)
    target = rng.integers(0, 5, 1000)
    rows = pa.table({"target": target, "n": np.arange(1000), "s": [f"r{i}" for i in range(1000)]})

    def fn(group: pa.Table) -> tuple[int, list[int]]:
        assert len(set(group.column("target").to_pylist())) == 1
        assert group.column("s").to_pylist() == [f"r{i}" for i in group.column("n").to_pylist()]
        return group.column("target")[0].as_py(), group.column("n").to_pylist()

    out = LocalEngine(2).write_groups(fn, rows, "target")
    assert [t for t, _ in out] == sorted(set(target.tolist()))
    for t, ns in out:
        assert ns == np.flatnonzero(target == t).tolist()  # every row of the group, in row order


def test_group_slices_of_ordered_rows_are_views_and_of_no_rows_none():
    rows = pa.table({"target": [0, 0, 1, 3, 3, 3], "v": [1, 2, 3, 4, 5, 6]})
    groups = group_slices(rows, "target")
    assert [g.column("v").to_pylist() for g in groups] == [[1, 2], [3], [4, 5, 6]]
    assert groups[2].column("v").chunks[0].offset == 3  # a slice of the table, not a copy
    assert group_slices(rows.slice(0, 0), "target") == []


def test_map_runs_quick_tasks_in_this_thread_and_long_ones_in_the_pool(monkeypatch):
    import threading
    import time

    import pytest

    from airflow_lake.core import engine as engine_module

    # (a threshold no quick task reaches on a loaded machine; long tasks sleep twice as long)
    monkeypatch.setattr(engine_module, "QUICK_TASK_SECONDS", 0.3)
    main = threading.get_ident()
    engine = LocalEngine(parallelism=2)

    def task(item: tuple[int, float]) -> tuple[int, bool]:
        n, seconds = item
        time.sleep(seconds)
        return n, threading.get_ident() == main

    slow = 0.6
    # the first call's tasks go to the pool (nothing measured yet); they were quick: the next
    # call runs in this thread until a long task, after which the rest go to the pool
    assert [here for _, here in engine.map(task, [(0, 0), (1, 0)])] == [False, False]
    out = engine.map(task, [(0, 0), (1, 0), (2, slow), (3, 0), (4, 0)])
    assert [n for n, _ in out] == [0, 1, 2, 3, 4]
    assert [here for _, here in out] == [True, True, True, False, False]
    # (its last tasks were quick: the next call starts here again) a long task seen last: the
    # next call starts in the pool; errors still propagate
    assert [here for _, here in engine.map(task, [(0, 0), (1, slow)])] == [True, True]
    assert [here for _, here in engine.map(task, [(0, 0), (1, 0)])] == [False, False]
    assert [here for _, here in engine.map(task, [(0, 0), (1, 0)])] == [True, True]

    def boom(n: int) -> int:
        if n == 1:
            raise ValueError("boom")
        return n

    with pytest.raises(ValueError, match="boom"):
        engine.map(boom, [0, 1, 2])
