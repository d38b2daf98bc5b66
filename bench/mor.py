"""MOR timings: a 100k-row upsert (half updates over all partitions) into a 1M-row,
10-partition table with the bloom index, and a snapshot read of it, ours vs hudi-rs.

Run: `.venv/bin/python -m bench.mor [base_rows] [batch_rows]`.
"""

from __future__ import annotations

import shutil
import statistics
import sys
import tempfile
import time


from airflow_lake.core import Table
from bench.data import rows, upsert_batch


def hudi_rs_read(path: str) -> int:
    from hudi import HudiReadOptions, HudiTableBuilder

    batches = HudiTableBuilder.from_base_uri(path).build().read(HudiReadOptions())
    return sum(b.num_rows for b in batches)


def main(base_rows: int = 1_000_000, batch_rows: int = 100_000, repeats: int = 3) -> None:
    base = rows(0, base_rows, seed=1)
    batch = upsert_batch(base_rows, batch_rows, 0.5, seed=2)
    for label, options in [("small.file.limit=0", {"hoodie.parquet.small.file.limit": 0}),
                           ("default sizing", {})]:
        upserts, ours, theirs = [], [], []
        for _ in range(repeats):
            folder = tempfile.mkdtemp(prefix="bench-mor-")
            try:
                path = f"{folder}/t"
                table = Table.create(path, name="bench", table_type="MERGE_ON_READ", record_key="key",
                                     precombine_field="ts", partition_fields="city",
                                     hive_style_partitioning=True, options=options)
                table.write(base, operation="insert")
                start = time.perf_counter()
                result = table.write(batch, operation="upsert")
                upserts.append(time.perf_counter() - start)
                assert result.num_updates == batch_rows // 2, result
                start = time.perf_counter()
                n = table.read().num_rows
                ours.append(time.perf_counter() - start)
                start = time.perf_counter()
                m = hudi_rs_read(path)
                theirs.append(time.perf_counter() - start)
                assert n == m == base_rows + batch_rows // 2, (n, m)
            finally:
                shutil.rmtree(folder)
        up, r1, r2 = (statistics.median(x) for x in (upserts, ours, theirs))
        print(f"MOR bloom, {label}: upsert {batch_rows:,} into {base_rows:,}: {up:.2f} s; "
              f"snapshot read {r1:.2f} s vs hudi-rs {r2:.2f} s (ratio {r1 / r2:.2f})")


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:]))
