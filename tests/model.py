"""A plain-Python model of a Hudi table: the third judge (see shared/design/TESTING.md).

Rows are dicts keyed by record key (and partition, unless the index is global), with the
merge semantics of ARCHITECTURE.md: DefaultHoodieRecordPayload when there is an ordering
field (the larger value wins, ties go to the later write), deletes by key always win.
"""

from __future__ import annotations

import copy


class Model:
    def __init__(self, key_fields: list[str], partition_of, ordering, is_global: bool = False):
        self.key_fields = key_fields
        self.partition_of = partition_of  # row -> partition path
        # one ordering field, or several compared as a tuple (Hudi 1.x `ordering.fields=a,b`)
        self.ordering = (ordering,) if isinstance(ordering, str) else tuple(ordering or ()) or None
        self.is_global = is_global
        self.rows: dict[tuple, dict] = {}
        self.history: list[tuple[str, dict[tuple, dict]]] = []

    def order(self, row: dict) -> tuple:
        """The row's ordering value; a null sorts first (as Java's and our comparisons do)."""
        return tuple((0,) if row[f] is None else (1, row[f]) for f in self.ordering)

    def key(self, row: dict) -> tuple:
        k = tuple(row[f] for f in self.key_fields)
        return k if self.is_global else (self.partition_of(row), k)

    def _combine(self, batch: list[dict]) -> list[dict]:
        best: dict[tuple, dict] = {}
        for row in batch:
            k = self.key(row)
            held = best.get(k)
            if held is None or self.ordering is None or self.order(row) >= self.order(held):
                best[k] = row
        return list(best.values())

    def commit(self, instant: str) -> None:
        self.history.append((instant, copy.deepcopy(self.rows)))

    def upsert(self, instant: str, batch: list[dict]) -> None:
        for row in self._combine(batch):
            k = self.key(row)
            old = self.rows.get(k)
            if old is not None and self.ordering is not None and self.order(row) < self.order(old):
                continue
            if row.get("_hoodie_is_deleted"):  # a delete that respects the ordering value
                self.rows.pop(k, None)
                continue
            # under a global index a key arriving in another partition moves there
            self.rows[k] = {**row, "_hoodie_commit_time": instant}
        self.commit(instant)

    def insert(self, instant: str, batch: list[dict]) -> None:
        for row in batch:
            self.rows[self.key(row)] = {**row, "_hoodie_commit_time": instant}
        self.commit(instant)

    def delete(self, instant: str, batch: list[dict]) -> None:
        for row in batch:
            self.rows.pop(self.key(row), None)
        self.commit(instant)

    def insert_overwrite(self, instant: str, batch: list[dict], *, whole_table: bool) -> None:
        parts = {self.partition_of(r) for r in batch}
        if whole_table:
            self.rows = {}
        else:
            self.rows = {k: v for k, v in self.rows.items() if self.partition_of(v) not in parts}
        for row in batch:
            self.rows[self.key(row)] = {**row, "_hoodie_commit_time": instant}
        self.commit(instant)

    def as_of(self, instant: str) -> list[dict]:
        state: dict = {}
        for t, rows in self.history:
            if t <= instant:
                state = rows
        return list(state.values())

    def incremental(self, start: str, end: str) -> list[dict]:
        return [r for r in self.as_of(end) if start < r["_hoodie_commit_time"] <= end]
