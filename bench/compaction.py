"""Compaction of a 1M-row MOR table holding 100k logged updates, against the floor: reading
the same base and log files and rewriting the base files with plain pyarrow.

Run: `.venv/bin/python -m bench.compaction [base_rows] [updates]`.
"""

from __future__ import annotations

import glob
import shutil
import statistics
import sys
import tempfile
import time

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from airflow_lake.core import Table
from airflow_lake.core.formats.log import DataBlock, read_log_file
from bench.data import rows, upsert_batch


def floor(path: str) -> float:
    """Read every base and log file, merge updates by key with pyarrow, write new base files."""
    start = time.perf_counter()
    for base in glob.glob(f"{path}/*/*.parquet"):
        table = pq.read_table(base)
        logs = [b.records() for lf in glob.glob(f"{base.rsplit('/', 1)[0]}/.*.log.*")
                for b in read_log_file(open(lf, "rb").read()) if isinstance(b, DataBlock)]
        if logs:
            updates = pa.concat_tables(logs).select(table.column_names)
            keep = pc.invert(pc.is_in(table["_hoodie_record_key"], value_set=updates["_hoodie_record_key"]))
            table = pa.concat_tables([table.filter(keep), updates.cast(table.schema)])
        pq.write_table(table, base + ".floor", compression="snappy")
    return time.perf_counter() - start


def main(base_rows: int = 1_000_000, updates: int = 100_000, repeats: int = 3) -> None:
    base = rows(0, base_rows, seed=1)
    batch = upsert_batch(base_rows, updates, 1.0, seed=2)
    ours, floors = [], []
    for _ in range(repeats):
        folder = tempfile.mkdtemp(prefix="bench-compaction-")
        try:
            path = f"{folder}/t"
            table = Table.create(path, name="bench", table_type="MERGE_ON_READ", record_key="key",
                                 precombine_field="ts", partition_fields="city", hive_style_partitioning=True)
            table.write(base, operation="insert")
            table.write(batch)
            floors.append(floor(path))
            for f in glob.glob(f"{path}/*/*.floor"):
                shutil.os.remove(f)
            plan = table.schedule_compaction(max_delta_commits=1)
            start = time.perf_counter()
            table.run_compaction(plan)
            ours.append(time.perf_counter() - start)
        finally:
            shutil.rmtree(folder)
    a, b = statistics.median(ours), statistics.median(floors)
    print(f"compaction of {base_rows:,} rows + {updates:,} logged updates: {a:.2f} s; "
          f"pyarrow read+merge+write floor {b:.2f} s; ratio {a / b:.2f} (target <= 1.5)")


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:]))
