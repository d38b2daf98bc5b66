"""Metadata-table index benchmarks (run on demand: `make bench-indexes`): the same 100k-row
upsert (half updates spread over the table, half new keys) into 1M, 5M and 10M-row version 9 MOR
tables tagged by the record index, against the bloom index and a delta-rs merge at 10M rows;
and a point-filter read with and without data skipping by column stats.

Each table is built once, in its own process, its metadata table compacted (the index in base
HFiles, as a table lives most of the time), and copied for every measurement; each measurement
runs in a fresh process. Prints the figures and ratios, saves JSON under bench/results/.
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

from bench.data import rows, upsert_batch

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BATCH = 100_000
SIZES = {"1m": 1_000_000, "5m": 5_000_000, "10m": 10_000_000}
V9_MDT = {"hoodie.write.table.version": 9, "hoodie.metadata.enable": "true", "hoodie.parquet.small.file.limit": 0}
INDEXES = {
    "rli": {**V9_MDT, "hoodie.metadata.record.index.enable": "true", "hoodie.index.type": "RECORD_INDEX"},
    "bloom": {**V9_MDT, "hoodie.index.type": "BLOOM"},
    "skip": {**V9_MDT, "hoodie.metadata.index.column.stats.enable": "true", "hoodie.index.type": "BLOOM",
             "hoodie.parquet.max.file.size": 16 << 20},  # (smaller files: more of them to skip)
}
POINT_KEY = "key-00000123457"
DELTA_MERGE = {"predicate": "t.key = s.key AND t.city = s.city", "source_alias": "s", "target_alias": "t"}


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def setup(kind: str, base_rows: int, path: str) -> None:
    """A table of `base_rows` rows: `rli_*`/`bloom_*` (v9 MOR, metadata table compacted),
    `skip` (v9 COW with column stats), `delta`."""
    base = rows(0, base_rows, seed=1)
    if kind == "delta":
        from deltalake import write_deltalake

        write_deltalake(path, base, partition_by=["city"])
        return
    from airflow_lake.core import Table

    options = INDEXES[kind]
    t = Table.create(path, name="bench", table_type="MERGE_ON_READ", record_key="key", precombine_field="ts",
                     partition_fields="city", hive_style_partitioning=True, options=options)
    t.write(base, operation="insert")
    del base
    # a small write whose metadata-table commit compacts it (every index entry into base HFiles)
    Table.open(path, options={**options, "hoodie.metadata.compact.max.delta.commits": 1}).write(
        upsert_batch(base_rows, 10, 0.5, seed=99, ts=1))


def case(name: str, base_rows: int, path: str) -> dict:
    """One measurement in this process (its set-up was built in another)."""
    import pyarrow as pa

    import airflow_lake.core  # noqa: F401

    pa.array([0])  # (pyarrow's lazy pandas import, before the clock)
    batch = upsert_batch(base_rows, BATCH, 0.5, seed=2, ts=2)
    out: dict = {}
    if name.startswith("skip"):  # a point read, with and without skipping by the column stats
        from airflow_lake.core import Table

        t = Table.open(path, options={"hoodie.enable.data.skipping": str(name.endswith("_on")).lower()})
        result = {}
        out["seconds"] = _timed(lambda: result.update(rows=t.read(filters=[("key", "=", POINT_KEY)])))
        out["rows"] = result["rows"].num_rows
    elif name.startswith(("rli", "bloom")):
        from airflow_lake.core import Table

        t = Table.open(path, options=INDEXES[name.split("_")[0]])
        result = {}
        out["seconds"] = _timed(lambda: result.update(r=t.write(batch)))
        out["index_stats"] = result["r"].index_stats
    elif name.startswith("delta"):
        from deltalake import DeltaTable

        dt = DeltaTable(path)
        out["seconds"] = _timed(lambda: dt.merge(source=batch, **DELTA_MERGE).when_matched_update_all()
                                .when_not_matched_insert_all().execute())
    else:
        raise SystemExit(f"unknown case {name}")
    out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return out


def _run(args: list[str]) -> dict:
    proc = subprocess.run([sys.executable, "-m", "bench.indexes", *args], capture_output=True, text=True, cwd=REPO,
                          env={**os.environ, "PYTHONPATH": REPO})
    if proc.returncode:
        raise SystemExit(f"bench.indexes {' '.join(args)} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--case", nargs=3, metavar=("NAME", "BASE", "PATH"))
    parser.add_argument("--setup", nargs=3, metavar=("KIND", "BASE", "PATH"))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--only", nargs="*", help="cases to run (default: all)")
    args = parser.parse_args()
    if args.setup:
        kind, base_rows, path = args.setup
        setup(kind, int(base_rows), path)
        print("{}")
        return
    if args.case:
        name, base_rows, path = args.case
        print(json.dumps(case(name, int(base_rows), path)))
        return
    plan = [(f"rli_{size}", "rli", n) for size, n in SIZES.items()] + \
        [("bloom_10m", "bloom", SIZES["10m"]), ("delta_10m", "delta", SIZES["10m"]),
         ("skip_10m_off", "skip", SIZES["10m"]), ("skip_10m_on", "skip", SIZES["10m"])]
    plan = [p for p in plan if not args.only or p[0] in args.only]
    results: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="bench-indexes-") as scratch:
        for label, kind, base_rows in plan:
            template = f"{scratch}/{label}-template"
            start = time.perf_counter()
            _run(["--setup", kind, str(base_rows), template])
            built = time.perf_counter() - start
            runs = []
            for i in range(args.repeats):
                copy = f"{scratch}/{label}-{i}"
                shutil.copytree(template, copy)
                runs.append(_run(["--case", label, str(base_rows), copy]))
                shutil.rmtree(copy)
            shutil.rmtree(template)
            results[label] = {"seconds": statistics.median(r["seconds"] for r in runs),
                              "runs": [r["seconds"] for r in runs], "peak_rss_mb": max(r["peak_rss_mb"] for r in runs),
                              "setup_seconds": built, "index_stats": runs[0].get("index_stats")}
            print(f"  {label:<14}{results[label]['seconds']:.3f} s (runs {results[label]['runs']}, set-up "
                  f"{built:.0f} s)", flush=True)
    lines = report(results)
    print("\n".join(lines))
    os.makedirs(f"{REPO}/bench/results", exist_ok=True)
    with open(f"{REPO}/bench/results/indexes-{time.strftime('%Y%m%d-%H%M%S')}.json", "w") as f:
        json.dump({"batch_rows": BATCH, "results": results, "report": lines}, f, indent=2)


def report(results: dict) -> list[str]:
    def ratio(a: str, b: str) -> str:
        return f"{results[a]['seconds'] / results[b]['seconds']:.2f}" if a in results and b in results else "-"

    return ["", "100k-row upsert (half updates, half inserts) and a point read, v9 MOR, medians:",
            *(f"  {k:<14}{v['seconds']:.3f} s  peak {v['peak_rss_mb']:.0f} MB" for k, v in results.items()),
            f"  record index 5M / 1M:      {ratio('rli_5m', 'rli_1m')}  (target <= 1.3)",
            f"  record index 10M / 1M:     {ratio('rli_10m', 'rli_1m')}",
            f"  record index / bloom, 10M: {ratio('rli_10m', 'bloom_10m')}  (target <= 0.5)",
            f"  record index / delta-rs merge, 10M: {ratio('rli_10m', 'delta_10m')}",
            f"  point read, data skipping on / off, 10M: {ratio('skip_10m_on', 'skip_10m_off')}"]


if __name__ == "__main__":
    main()
