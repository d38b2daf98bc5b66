"""The benchmark suite: our Hudi writes, reads and services against delta-rs, hudi-rs and the
raw pyarrow floor, on the same data and machine. Each case runs in a fresh subprocess (so its
peak RSS is its own); figures are medians of several runs. Prints a table with ratios and the
targets, and saves JSON under bench/results/.

`make bench` (1M base + 100k batch) and `make bench-large` (10M + 1M).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import pyarrow.parquet as pq

from bench.data import rows, upsert_batch

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PART_OPTS = {"hoodie.parquet.small.file.limit": 0}


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def _hudi_table(path: str, table_type: str, index: str, base):
    from airflow_lake.core import Table

    options = {**PART_OPTS, "hoodie.index.type": index}
    if index == "BUCKET":
        options["hoodie.bucket.index.num.buckets"] = 16
    t = Table.create(path, name="bench", table_type=table_type, record_key="key", precombine_field="ts",
                     partition_fields="city", hive_style_partitioning=True, options=options)
    t.write(base, operation="insert")
    return t


def case(name: str, base_rows: int, batch_rows: int, folder: str) -> dict:
    """One measurement; runs in its own process. One-time interpreter start-up is not timed:
    pyarrow imports pandas lazily on its first `pa.array(...)` (about 0.4 s), so the case
    triggers it before the clock starts, for every engine alike."""
    import pyarrow as pa

    import airflow_lake.core  # noqa: F401  (every case, the floors too, uses the pool the core picks)

    pa.array([0])
    base = rows(0, base_rows, seed=1)
    batch = upsert_batch(base_rows, batch_rows, 0.5, seed=2)
    path = f"{folder}/t"
    out: dict = {}
    if name.startswith(("cow_upsert", "mor_upsert")):
        table_type = "COPY_ON_WRITE" if name.startswith("cow") else "MERGE_ON_READ"
        index = name.split("_")[-1].upper()
        t = _hudi_table(path, table_type, index, base)
        out["seconds"] = _timed(lambda: t.write(batch))
    elif name in ("mor_snapshot", "mor_read_optimized", "mor_incremental", "hudi_rs_snapshot", "compaction",
                  "clean", "archive"):
        t = _hudi_table(path, "MERGE_ON_READ", "BLOOM", base)
        first = t.timeline.commits().completed().last.time
        t.write(batch)
        if name == "mor_snapshot":
            out["seconds"] = _timed(lambda: t.read())
        elif name == "mor_read_optimized":
            out["seconds"] = _timed(lambda: t.read(query_type="read_optimized"))
        elif name == "mor_incremental":
            out["seconds"] = _timed(lambda: t.read_incremental(first))
        elif name == "hudi_rs_snapshot":
            from hudi import HudiReadOptions, HudiTableBuilder

            out["seconds"] = _timed(lambda: HudiTableBuilder.from_base_uri(path).build().read(HudiReadOptions()))
        elif name == "compaction":
            plan = t.schedule_compaction(max_delta_commits=1)
            out["seconds"] = _timed(lambda: t.run_compaction(plan))
        elif name == "clean":
            t.run_compaction(t.schedule_compaction(max_delta_commits=1))
            t.write(batch)
            out["seconds"] = _timed(lambda: t.clean(policy="KEEP_LATEST_FILE_VERSIONS", retained=1))
        else:  # 30 more commits and a compaction, then archive down to 10
            for i in range(30):
                t.write(batch.slice(i * 100, 100))
            t.run_compaction(t.schedule_compaction(max_delta_commits=1))
            t.clean(retained=10)
            out["seconds"] = _timed(lambda: t.archive(min_commits=10, max_commits=20))
    elif name.startswith("delta_"):
        from deltalake import DeltaTable, write_deltalake

        write_deltalake(path, base, partition_by=["city"])
        dt = DeltaTable(path)
        if name == "delta_merge":
            out["seconds"] = _timed(lambda: dt.merge(
                source=batch, predicate="t.key = s.key AND t.city = s.city", source_alias="s",
                target_alias="t").when_matched_update_all().when_not_matched_insert_all().execute())
        elif name == "delta_read":
            dt.merge(source=batch, predicate="t.key = s.key AND t.city = s.city", source_alias="s",
                     target_alias="t").when_matched_update_all().when_not_matched_insert_all().execute()
            out["seconds"] = _timed(lambda: DeltaTable(path).to_pyarrow_table())
        else:
            for i in range(5):
                write_deltalake(path, batch.slice(i * 1000, 1000), mode="append", partition_by=["city"])
            out["seconds"] = _timed(lambda: DeltaTable(path).optimize.compact())
    elif name == "pyarrow_write":
        out["seconds"] = _timed(lambda: pq.write_to_dataset(base, path, partition_cols=["city"]))
    elif name == "pyarrow_read":
        pq.write_to_dataset(base, path, partition_cols=["city"])
        out["seconds"] = _timed(lambda: pq.read_table(path))
    else:
        raise SystemExit(f"unknown case {name}")
    out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return out


CASES = ["cow_upsert_bloom", "mor_upsert_bloom", "mor_upsert_simple", "mor_upsert_bucket", "mor_snapshot",
         "mor_read_optimized", "mor_incremental", "compaction", "clean", "archive", "hudi_rs_snapshot",
         "delta_merge", "delta_read", "delta_optimize", "pyarrow_write", "pyarrow_read"]


def measure(name: str, base_rows: int, batch_rows: int, repeats: int) -> dict:
    runs = []
    for _ in range(repeats):
        folder = tempfile.mkdtemp(prefix="bench-")
        try:
            proc = subprocess.run([sys.executable, "-m", "bench.suite", "--case", name, str(base_rows),
                                   str(batch_rows), folder], capture_output=True, text=True, cwd=REPO,
                                  env={**os.environ, "PYTHONPATH": REPO}, timeout=3600)
            lines = proc.stdout.strip().splitlines()
            if not lines or not lines[-1].startswith("{"):  # (delta-rs may abort at exit: the
                raise RuntimeError(f"case {name} failed: {proc.stderr[-2000:]}")  # figure is in)
            runs.append(json.loads(lines[-1]))
        finally:
            shutil.rmtree(folder, ignore_errors=True)
    return {"seconds": statistics.median(r["seconds"] for r in runs),
            "peak_rss_mb": max(r["peak_rss_mb"] for r in runs), "runs": [r["seconds"] for r in runs]}


def report(results: dict, base_rows: int, batch_rows: int) -> list[str]:
    s = {k: v["seconds"] for k, v in results.items()}
    lines = [f"airflow-lake benchmark: {base_rows:,} base rows, {batch_rows:,}-row batch (half updates), "
             f"10 partitions, {os.cpu_count()} cores; medians",
             f"{'case':<22}{'seconds':>9}{'peak MB':>9}  comparison"]
    compare = {
        "cow_upsert_bloom": ("delta_merge", "vs delta-rs merge", 1.0),
        "mor_upsert_bloom": ("delta_merge", "vs delta-rs merge", 0.33),
        "mor_upsert_simple": ("delta_merge", "vs delta-rs merge", None),
        "mor_upsert_bucket": ("delta_merge", "vs delta-rs merge", None),
        "mor_snapshot": ("hudi_rs_snapshot", "vs hudi-rs on the same table", 1.0),
        "mor_read_optimized": ("pyarrow_read", "vs pyarrow read", None),
        "delta_read": ("mor_snapshot", "(our snapshot / delta read)", None),
        "compaction": ("floor", "vs pyarrow read + write floor", 1.5),
        "delta_optimize": (None, "", None),
    }
    floor = s.get("pyarrow_read", 0) + s.get("pyarrow_write", 0)
    for name, r in results.items():
        ref, label, target = compare.get(name, (None, "", None))
        text = ""
        if ref == "floor" and floor:
            ratio = r["seconds"] / floor
            text = f"{ratio:.2f}x {label}"
        elif ref in s and name != "delta_read":
            ratio = r["seconds"] / s[ref]
            text = f"{ratio:.2f}x {label}"
        elif name == "delta_read" and "mor_snapshot" in s:
            text = f"our snapshot is {s['mor_snapshot'] / r['seconds']:.2f}x of this"
        if target is not None and text:
            text += f"  (target <= {target}: {'met' if ratio <= target else 'NOT met'})"
        lines.append(f"{name:<22}{r['seconds']:>9.3f}{r['peak_rss_mb']:>9.0f}  {text}")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--case", nargs=4, metavar=("NAME", "BASE", "BATCH", "FOLDER"))
    parser.add_argument("--large", action="store_true")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--only", nargs="*", default=CASES)
    args = parser.parse_args()
    if args.case:
        name, base_rows, batch_rows, folder = args.case
        print(json.dumps(case(name, int(base_rows), int(batch_rows), folder)))
        return
    base_rows, batch_rows = (10_000_000, 1_000_000) if args.large else (1_000_000, 100_000)
    results = {}
    for name in args.only:
        results[name] = measure(name, base_rows, batch_rows, args.repeats if not args.large else 1)
        print(f"  {name:<22}{results[name]['seconds']:.3f} s", flush=True)
    if args.large:
        results["mor_upsert_100k_into_10m"] = measure("mor_upsert_bloom", base_rows, 100_000, 1)
    lines = report(results, base_rows, batch_rows)
    print("\n".join(lines))
    os.makedirs(f"{REPO}/bench/results", exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    with open(f"{REPO}/bench/results/{'large' if args.large else 'default'}-{stamp}.json", "w") as f:
        json.dump({"base_rows": base_rows, "batch_rows": batch_rows, "results": results, "report": lines}, f, indent=2)


if __name__ == "__main__":
    main()
