"""`make demo`: a core-only tour — create a table, insert, upsert, delete, read, show the timeline.

Runs on the local file system under a temporary folder (or the folder given as argument).
"""

from __future__ import annotations

import sys
import tempfile

import pyarrow as pa

from airflow_lake.core import Table


def main(base: str | None = None) -> None:
    base = base or tempfile.mkdtemp(prefix="airflow-lake-demo-")
    path = f"{base}/trips"
    table = Table.create(path, name="trips", record_key="uuid", precombine_field="ts",
                         partition_fields=["city"], hive_style_partitioning=True)
    print(f"created {table} at {path}")

    trips = pa.table({
        "uuid": ["t1", "t2", "t3", "t4"],
        "ts": [1, 1, 1, 1],
        "rider": ["A", "B", "C", "D"],
        "fare": [19.1, 27.7, 33.9, 17.8],
        "city": ["san_francisco", "san_francisco", "sao_paulo", "chennai"],
    })
    inserted = table.write(trips, operation="insert")
    print(f"insert  -> {inserted.instant}: {inserted.num_inserts} rows in {len(inserted.files)} files")

    changes = pa.table({"uuid": ["t3", "t5"], "ts": [2, 2], "rider": ["C", "E"], "fare": [25.0, 93.5],
                        "city": ["sao_paulo", "chennai"]})
    upserted = table.write(changes, operation="upsert")
    print(f"upsert  -> {upserted.instant}: {upserted.num_updates} updated, {upserted.num_inserts} inserted")

    deleted = table.write(pa.table({"uuid": ["t2"], "city": ["san_francisco"]}), operation="delete")
    print(f"delete  -> {deleted.instant}: {deleted.num_deletes} deleted")

    columns = ["_hoodie_commit_time", "uuid", "rider", "fare", "city"]
    print("\nsnapshot:")
    print(table.read(columns=columns).sort_by("uuid").to_pandas().to_string(index=False))
    print(f"\nas of the first commit ({inserted.instant}):")
    print(table.read(as_of=inserted.instant, columns=columns).sort_by("uuid").to_pandas().to_string(index=False))
    print(f"\nincremental after {inserted.instant}:")
    print(table.read_incremental(inserted.instant, columns=columns).sort_by("uuid").to_pandas().to_string(index=False))
    print("\ntimeline:")
    for instant in table.timeline:
        print(f"  {instant.time}  {instant.action:<14} {instant.state.name}")

    try:
        from hudi import HudiReadOptions, HudiTableBuilder

        batches = HudiTableBuilder.from_base_uri(path).build().read(HudiReadOptions())
        hudi_rows = sum(b.num_rows for b in batches)
        print(f"\nhudi-rs reads the same table: {hudi_rows} rows")
    except ImportError:
        pass


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else None)
