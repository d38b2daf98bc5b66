"""Cost of a tiny write as the active timeline grows.

Grows one COPY_ON_WRITE table with one-row upserts and, at each checkpoint (10, 100, 400
completed commits by default), times tiny writes without a token, with a new token (the
lookup that finds nothing, paid by every first attempt) and a retry of the table's very
first tokened write (the lookup that finds an instant hundreds of commits back). A counting
`Storage` wrapper gives the storage calls of one write and how many of them list `.hoodie/`.
No archival runs, so the active timeline holds every commit.

Run: `.venv/bin/python -m bench.history [--sizes 10,100,400] [--repeats 7]`.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import threading
import time
from collections import Counter

import pyarrow as pa

from airflow_lake.core import Table
from airflow_lake.core.storage import Storage

TOKEN = "airflow_lake.token"
_COUNTED = ("exists", "is_dir", "read", "status", "list", "list_dirs", "open_input", "mkdirs", "write",
            "create", "delete", "delete_dir")


class CountingStorage(Storage):
    """A `Storage` that counts its calls (heartbeat refreshes excluded) and `.hoodie/` listings."""

    def __init__(self, uri: str):
        super().__init__(uri)
        self.calls: Counter[str] = Counter()
        self._guard = threading.Lock()

    def _count(self, name: str) -> None:
        if threading.current_thread().name.startswith("heartbeat-"):
            return
        with self._guard:
            self.calls[name] += 1

    def reset(self) -> Counter[str]:
        with self._guard:
            calls, self.calls = self.calls, Counter()
        return calls

    def list(self, path, *, recursive=False):
        self._count("list .hoodie/" if path.rstrip("/") == ".hoodie" and not recursive else "list")
        return super().list(path, recursive=recursive)

    def list_names(self, path):  # a names-only listing (newer cores list `.hoodie/` this way)
        self._count("list .hoodie/" if path.rstrip("/") == ".hoodie" else "list")
        return super().list_names(path)


def _counted(name: str):
    def method(self, *args, **kwargs):
        self._count(name)
        return getattr(Storage, name)(self, *args, **kwargs)

    method.__name__ = name
    return method


for _name in _COUNTED:
    if _name != "list":
        setattr(CountingStorage, _name, _counted(_name))


def row(i: int) -> pa.Table:
    return pa.table({"id": [f"k{i % 50:03d}"], "ts": [i], "part": [f"p{i % 2}"], "v": [float(i)]})


def _ms(times: list[float]) -> str:
    return f"{statistics.median(times):.1f} / {min(times):.1f}"


def main(sizes: list[int], repeats: int) -> None:
    folder = tempfile.mkdtemp(prefix="bench-history-")
    path = f"{folder}/t"
    try:
        Table.create(path, name="history", record_key="id", precombine_field="ts", partition_fields="part")
        table = Table.open(path)
        storage = CountingStorage(path)
        table.storage = storage
        n = 0
        first_token = "bench/first"
        table.write(row(n), extra_metadata={TOKEN: first_token})
        n += 1
        print("ms per write: median / best of the repeats (the best is steadier on a shared machine)")
        print(f"{'commits':>8} {'no token ms':>14} {'new token ms':>14} {'retry ms':>14} "
              f"{'calls/write':>12} {'.hoodie/ lists':>15}  calls by kind (one write, no token)")
        for size in sizes:
            while n < size:
                table.write(row(n))
                n += 1
            plain, tokened, retry, calls = [], [], [], Counter()
            for r in range(repeats):
                storage.reset()
                start = time.perf_counter()
                table.write(row(n))
                plain.append((time.perf_counter() - start) * 1000)
                calls = storage.reset()
                n += 1
                start = time.perf_counter()
                table.write(row(n), extra_metadata={TOKEN: f"bench/{size}/{r}"})
                tokened.append((time.perf_counter() - start) * 1000)
                n += 1
                start = time.perf_counter()
                again = table.write(row(n), extra_metadata={TOKEN: first_token})
                retry.append((time.perf_counter() - start) * 1000)
                assert again.num_writes == 1, "the retry must return the first write's stored result"
            kinds = ", ".join(f"{k} {v}" for k, v in sorted(calls.items()))
            print(f"{size:>8} {_ms(plain):>14} {_ms(tokened):>14} {_ms(retry):>14} "
                  f"{sum(calls.values()):>12} {calls['list .hoodie/']:>15}  {kinds}")
    finally:
        shutil.rmtree(folder)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10,100,400", help="comma-separated commit counts")
    parser.add_argument("--repeats", type=int, default=7, help="writes timed per case (median)")
    args = parser.parse_args()
    main([int(s) for s in args.sizes.split(",")], args.repeats)
