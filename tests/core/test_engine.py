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
