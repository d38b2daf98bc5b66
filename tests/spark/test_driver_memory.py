"""The Python driver holds metadata, never rows: the peak RSS (VmHWM) of a real spark-submit
driver upserting 1M rows is that of one upserting 200k rows. `python -m bench.spark
driver-memory` measures 1M against 5M the same way (docs/benchmarks.md)."""

from __future__ import annotations

from bench.spark import driver_memory

# Rows through the driver would show: 800k more rows of ~120 bytes are ~100 MB as Arrow, far
# more as Python objects; the driver's own noise (py4j, listings, stats) stays within a few MB.
MARGIN_MB = 40


def test_driver_peak_rss_does_not_grow_with_the_batch():
    (small, small_mb, _), (large, large_mb, _) = driver_memory([200_000, 1_000_000])
    assert large == 5 * small
    assert large_mb - small_mb < MARGIN_MB, f"driver peak RSS {small_mb:.0f} MB -> {large_mb:.0f} MB"
