"""Deterministic benchmark data: N-row base and upsert batches (~120 bytes/row, 10 partitions)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

PARTITIONS = 10


def rows(start: int, n: int, *, seed: int, ts: int = 0) -> pa.Table:
    """Rows with keys `key-<start..start+n>`, an int64 ordering field and ~10 payload columns."""
    rng = np.random.default_rng(seed)
    ids = np.arange(start, start + n)
    keys = pa.array(np.char.add("key-", np.char.zfill(ids.astype(str), 10)).astype(object), pa.string())
    cities = np.array([f"city_{i}" for i in range(PARTITIONS)], dtype=object)
    return pa.table({
        "key": keys,
        "ts": pa.array(np.full(n, ts, dtype=np.int64)),
        "city": pa.array(cities[ids % PARTITIONS], pa.string()),
        "i1": rng.integers(0, 1_000_000, n),
        "i2": rng.integers(0, 1_000, n),
        "i3": rng.integers(-(2**40), 2**40, n),
        "d1": rng.random(n),
        "d2": rng.random(n) * 1000,
        "d3": rng.normal(size=n),
        "s1": pa.array(np.array(["alpha", "beta", "gamma", "delta"], dtype=object)[rng.integers(0, 4, n)]),
        "s2": pa.array(np.char.add("v", rng.integers(0, 10_000, n).astype(str)).astype(object), pa.string()),
        "flag": rng.random(n) < 0.5,
    })


def upsert_batch(base_rows: int, n: int, update_fraction: float, *, seed: int, ts: int = 1) -> pa.Table:
    """`n` rows: `update_fraction` of them existing keys spread over all partitions, the rest new."""
    rng = np.random.default_rng(seed)
    n_upd = int(n * update_fraction)
    updated = np.sort(rng.choice(base_rows, n_upd, replace=False))
    upd = rows(0, base_rows, seed=seed, ts=ts).take(pa.array(updated)) if n_upd else None
    new = rows(base_rows + 10_000_000, n - n_upd, seed=seed + 1, ts=ts) if n > n_upd else None
    return pa.concat_tables([t for t in (upd, new) if t is not None])
