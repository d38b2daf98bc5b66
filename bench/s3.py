"""Object-store cost of an upsert and a compaction: a MERGE_ON_READ table on a local S3
server (moto, `tests/s3/server.py`, on 127.0.0.1, stopped at the end), timed, with the storage
calls each operation made (`Storage.calls`: list, head, get, open, put, create, delete) and
the folders it listed. Latency is the local server's, not a real store's: the call counts
are the figures that carry over.

`make bench-s3` (100k base rows, a 10k-row upsert batch, half updates).
"""

from __future__ import annotations

import argparse
import time
from collections import Counter

from bench.data import rows, upsert_batch
from tests.s3.server import KEYS, REGION, create_bucket, moto_server


def measure(table, what: str, fn) -> dict:
    storage = table.storage
    calls, listed = Counter(storage.calls), Counter(storage.listed)
    start = time.perf_counter()
    fn()
    seconds = time.perf_counter() - start
    made, folders = storage.calls - calls, storage.listed - listed
    return {"operation": what, "seconds": round(seconds, 2), "calls": sum(made.values()), "by_kind": dict(made),
            "listings": dict(folders)}


def main(base_rows: int, batch_rows: int) -> list[dict]:
    from airflow_lake.core import Table

    with moto_server() as endpoint:
        options = {**KEYS, "aws_region": REGION, "aws_endpoint_url": endpoint}
        create_bucket(endpoint, "lake-bench")
        table = Table.create("s3://lake-bench/trips", name="trips", table_type="MERGE_ON_READ", record_key="key",
                             precombine_field="ts", partition_fields="city", hive_style_partitioning=True,
                             options={"hoodie.parquet.small.file.limit": 0}, storage_options=options)
        results = [
            measure(table, f"insert {base_rows} rows", lambda: table.write(rows(0, base_rows, seed=1),
                                                                           operation="insert")),
            measure(table, f"upsert {batch_rows} rows", lambda: table.write(
                upsert_batch(base_rows, batch_rows, 0.5, seed=2))),
            measure(table, "schedule compaction", lambda: table.schedule_compaction(max_delta_commits=1)),
            measure(table, "run compaction", lambda: table.run_compaction()),
            measure(table, "snapshot read", lambda: table.read()),
        ]
    for r in results:
        kinds = " ".join(f"{k}={v}" for k, v in sorted(r["by_kind"].items()))
        listed = " ".join(f"{k or '/'}:{v}" for k, v in sorted(r["listings"].items()))
        print(f"{r['operation']:<22} {r['seconds']:>7.2f} s  {r['calls']:>4} calls  ({kinds})  listed: {listed}")
    return results


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-rows", type=int, default=100_000)
    parser.add_argument("--batch-rows", type=int, default=10_000)
    args = parser.parse_args()
    main(args.base_rows, args.batch_rows)
