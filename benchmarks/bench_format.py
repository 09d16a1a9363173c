"""Store file format 2: scans, counts, bulk load and file sizes against their peers.

    python benchmarks/bench_format.py --rows 1000000 --block-size 65536 --root /tmp/bench/fmt
    python benchmarks/bench_format.py --rows 300000 --value-size 1000 --root /tmp/bench/seed000
    PYTHONPATH=/path/to/older/checkout python benchmarks/bench_format.py --only bulkload ...

The sample table (``jobs.demo.sample_row``: 4-byte key, ``cf:n``, ``cf:s`` of
``--value-size`` bytes, ``--regions`` regions) is bulk loaded (timed: the
bulk-load figure), then major-compacted so each region has one version 2
file written by compaction.  Measured, each the best of ``--repeat`` runs
after a warm-up, CPU seconds by default (the machine may be shared):

* full scan into Arrow rows (``scan_batches(columns=[cf:n, cf:s])``) against
  ``pyarrow.parquet.read_table`` of the same rows from one uncompressed file,
  one thread each, with the block cache warm (decoded blocks: the scan
  slices them) and with no block cache (every block read, verified and
  decoded);
* row count by ``scan_batches(filter="FirstKeyOnlyFilter() AND
  KeyOnlyFilter()")`` (every row key comes back) and by ``Table.count()``
  (block indexes only);
* bytes of the table's version 2 files against the same cells written as
  version 1 files.

``--only bulkload`` times only the bulk load, with whatever code is first on
``PYTHONPATH``: run it once with an older checkout to get the older speed.
``--only count`` measures only the row counts; with ``--reuse`` it reads the
table a previous run left under ``--root`` (no bulk load, no compaction), and
it also counts through a connection without a block cache (every key section
read and verified on each pass).
"""

from __future__ import annotations

import argparse
import os
import shutil
import time

import pyarrow as pa
import pyarrow.parquet as pq

import harness  # the shared timing and sample tables; puts the checkout on sys.path
from harness import COLUMNS, COUNT_FILTER, best_of, bulk_load, sample_batches

import storage

TABLE = "bench_format"


def v1_bytes(table) -> int:
    """Bytes of the table's cells written as version 1 files (same block size, codec, bloom)."""
    from storage.vfs.fs import FileSystem
    from tests.golden.storefile_v1 import V1StoreFileWriter  # the engine writes version 2 only

    total = 0
    tmp = "/tmp/bench_format_v1"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    fs = FileSystem(tmp)
    for i, reader in enumerate(table.store_file_readers()):
        info = reader.info
        w = V1StoreFileWriter(fs, f"{i}.sf", family=info.family, block_size=info.block_size,
                              compression=info.compression, bloom=info.has_bloom)
        for b in reader.scan_batches(cache_blocks=False):
            w.append_batch(b)
        total += w.finish().file_size
    shutil.rmtree(tmp, ignore_errors=True)
    return total


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--regions", type=int, default=10)
    p.add_argument("--value-size", type=int, default=100)
    p.add_argument("--block-size", type=int, default=65536)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--root", default="./bench-data/format")
    p.add_argument("--clock", choices=["cpu", "wall"], default="cpu")
    p.add_argument("--only", choices=["bulkload", "count"], default=None)
    p.add_argument("--reuse", action="store_true",
                   help="with --only count: read the table an earlier run left under --root")
    args = p.parse_args(argv)
    harness.set_clock(args.clock)
    rows = args.rows
    root = os.path.join(args.root, "tables")
    if args.reuse and args.only == "count" and os.path.isdir(os.path.join(root, TABLE)):
        return count_only(root, rows, args.repeat)
    batches = sample_batches(rows, args.value_size)
    wall, cpu = bulk_load(root, rows, args.regions, args.block_size, batches, TABLE)
    print(f"bulk load: {rows:,} rows in {wall:.2f} s wall ({rows / wall:,.0f} rows/s), "
          f"{cpu:.2f} s CPU ({rows / cpu:,.0f} rows/s)")
    if args.only == "bulkload":
        return 0
    conn = storage.connect(root)
    table = conn.table(TABLE)
    if args.only == "count":
        t0 = time.perf_counter()
        table.compact(major=True)
        print(f"major compaction (rewrites every file as version 2): {time.perf_counter() - t0:.2f} s wall")
        conn.close()
        return count_only(root, rows, args.repeat)
    t0 = time.perf_counter()
    table.compact(major=True)
    print(f"major compaction (rewrites every file as version 2): {time.perf_counter() - t0:.2f} s wall")
    v2 = sum(r.info.file_size for r in table.store_file_readers())
    v1 = v1_bytes(table)
    print(f"table files: version 2 {v2:,} bytes, version 1 {v1:,} bytes: {v2 / v1:.3f}x (target <= 0.8x)")

    parquet = os.path.join(args.root, "rows.parquet")
    pq.write_table(pa.Table.from_batches(list(table.scan_batches(columns=COLUMNS))), parquet, compression="none")

    def ours_arrow() -> int:
        return sum(b.num_rows for b in table.scan_batches(columns=COLUMNS))

    (t_ours, n), (t_pq, n_pq) = best_of(
        args.repeat, ours_arrow, lambda: pq.read_table(parquet, use_threads=False).num_rows
    )
    assert n == n_pq == rows, (n, n_pq)
    print(f"full scan -> Arrow rows: {n / t_ours:,.0f} rows/s; parquet read_table (1 thread): "
          f"{n / t_pq:,.0f} rows/s: {t_pq / t_ours:.2f}x (target >= 1.2x)")

    # the same scan with no block cache: every block read, verified and decoded each time
    cold_conn = storage.connect(root, read_only=True, block_cache_size=0)
    cold = cold_conn.table(TABLE)
    (t_cold, n), (t_pq, n_pq) = best_of(
        args.repeat, lambda: sum(b.num_rows for b in cold.scan_batches(columns=COLUMNS)),
        lambda: pq.read_table(parquet, use_threads=False).num_rows,
    )
    assert n == n_pq == rows, (n, n_pq)
    print(f"full scan -> Arrow rows, no block cache: {n / t_cold:,.0f} rows/s; parquet read_table (1 thread): "
          f"{n / t_pq:,.0f} rows/s: {t_pq / t_cold:.2f}x")
    cold_conn.close()

    conn.close()
    return count_only(root, rows, args.repeat)


def scan_count(table) -> int:
    """Rows counted by the row-counting filter: every row key comes back."""
    return sum(b.num_rows for b in table.scan_batches(filter=COUNT_FILTER, output="cells"))


def count_only(root: str, rows: int, repeat: int) -> int:
    """The row-count lines: the row-counting scan through the block cache and
    without one, and ``Table.count()`` (block indexes)."""
    conn = storage.connect(root, read_only=True)
    table = conn.table(TABLE)
    cold_conn = storage.connect(root, read_only=True, block_cache_size=0)
    cold = cold_conn.table(TABLE)
    (t_cnt, n_cnt), (t_cold, n_cold), (t_idx, n_idx) = best_of(
        repeat, lambda: scan_count(table), lambda: scan_count(cold), table.count
    )
    assert n_cnt == n_cold == n_idx == rows, (n_cnt, n_cold, n_idx)
    print(f"row count, FirstKeyOnlyFilter() AND KeyOnlyFilter(): {rows / t_cnt:,.0f} rows/s (target >= 5M)")
    print(f"row count, FirstKeyOnlyFilter() AND KeyOnlyFilter(), no block cache: {rows / t_cold:,.0f} rows/s")
    print(f"row count, Table.count() (block indexes): {rows / max(t_idx, 1e-9):,.0f} rows/s (target >= 20M)")
    cold_conn.close()
    conn.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
