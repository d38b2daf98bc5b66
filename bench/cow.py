"""COW write timings: a 1M-row insert and a 100k-row upsert (half updates) on this machine.

Run: `make bench` (or `.venv/bin/python -m bench.cow [base_rows] [batch_rows]`).
"""

from __future__ import annotations

import shutil
import statistics
import sys
import tempfile
import time

from airflow_lake.core import Table
from bench.data import rows, upsert_batch


def main(base_rows: int = 1_000_000, batch_rows: int = 100_000, repeats: int = 3) -> None:
    base = rows(0, base_rows, seed=1)
    batch = upsert_batch(base_rows, batch_rows, 0.5, seed=2)
    inserts, upserts = [], []
    for _ in range(repeats):
        folder = tempfile.mkdtemp(prefix="bench-cow-")
        try:
            table = Table.create(f"{folder}/t", name="bench", record_key="key", precombine_field="ts",
                                 partition_fields="city", hive_style_partitioning=True)
            start = time.perf_counter()
            table.write(base, operation="insert")
            inserts.append(time.perf_counter() - start)
            start = time.perf_counter()
            result = table.write(batch, operation="upsert")
            upserts.append(time.perf_counter() - start)
            assert result.num_updates == batch_rows // 2, result
        finally:
            shutil.rmtree(folder)
    print(f"COW insert  {base_rows:>9,} rows: median {statistics.median(inserts):.2f} s  (runs {inserts})")
    print(f"COW upsert  {batch_rows:>9,} rows into {base_rows:,}: median {statistics.median(upserts):.2f} s")


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:]))
