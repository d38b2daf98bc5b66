"""Deterministic benchmark data: N-row base and upsert batches (~120 bytes/row, 10 partitions)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

PARTITIONS = 10
NEW_KEYS_FROM = 10_000_000_000  # ids of inserted keys: past any base table


def rows_for(ids: np.ndarray, *, seed: int, ts: int = 0) -> pa.Table:
    """Rows with keys `key-<id>` (zero-padded), an int64 ordering field and ~10 payload columns."""
    rng = np.random.default_rng(seed)
    n = len(ids)
    keys = pa.array(np.char.add("key-", np.char.zfill(ids.astype(str), 11)).astype(object), pa.string())
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


def rows(start: int, n: int, *, seed: int, ts: int = 0) -> pa.Table:
    """Rows for ids start..start+n."""
    return rows_for(np.arange(start, start + n), seed=seed, ts=ts)


def upsert_batch(base_rows: int, n: int, update_fraction: float, *, seed: int, ts: int = 1) -> pa.Table:
    """`n` rows: `update_fraction` of them existing keys spread over all partitions (newer
    ordering value, new payload), the rest new keys. Only the batch is generated, never the base."""
    rng = np.random.default_rng(seed)
    n_upd = int(n * update_fraction)
    updated = np.sort(rng.choice(base_rows, n_upd, replace=False)) if n_upd else np.zeros(0, np.int64)
    fresh = np.arange(NEW_KEYS_FROM, NEW_KEYS_FROM + n - n_upd)
    return rows_for(np.concatenate([updated, fresh]).astype(np.int64), seed=seed, ts=ts)
