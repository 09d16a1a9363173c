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
import sys
import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(1, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import bench_scan  # noqa: E402  (best_of: warm-up, alternating runs, best time)
import storage  # noqa: E402
from jobs.demo import split_keys_for  # noqa: E402

TABLE = "bench_format"
COLUMNS = [b"cf:n", b"cf:s"]
COUNT_FILTER = "FirstKeyOnlyFilter() AND KeyOnlyFilter()"
CLOCKS = bench_scan.CLOCKS


def sample_batches(rows: int, value_size: int, batch_rows: int = 100_000) -> list[pa.RecordBatch]:
    """The sample table's rows as the row batches a SerDe hands to a bulk load."""
    out = []
    for lo in range(0, rows, batch_rows):
        hi = min(lo + batch_rows, rows)
        idx = np.arange(lo, hi)
        keys = pa.FixedSizeBinaryArray.from_buffers(
            pa.binary(4), hi - lo, [None, pa.py_buffer(idx.astype(">u4").tobytes())]
        ).cast(pa.binary())
        ns = pa.FixedSizeBinaryArray.from_buffers(
            pa.binary(4), hi - lo, [None, pa.py_buffer((idx * 7 - 1000).astype(">i4").tobytes())]
        ).cast(pa.binary())
        texts = pa.array([((b"value-%010d-" % i) * (value_size // 17 + 1))[:value_size] for i in range(lo, hi)],
                         pa.binary())
        out.append(pa.RecordBatch.from_arrays([keys, ns, texts], names=["key", "cf:n", "cf:s"]))
    return out


def bulk_load(root: str, rows: int, regions: int, value_size: int, block_size: int, batches) -> tuple[float, float]:
    """Create the table and bulk load ``batches`` in one task; returns the wall
    and CPU seconds it took (fsyncs count in the wall time only)."""
    from connector.bulkload import BulkLoadTask, commit_load, table_regions
    from storage.vfs.fs import FileSystem

    shutil.rmtree(root, ignore_errors=True)
    conn = storage.connect(root)
    conn.create_table(TABLE, {"cf": {"max_versions": 1, "block_size": block_size}},
                      split_keys=split_keys_for(rows, regions), settings={"wal_sync": "none"})
    conn.close()
    fs = FileSystem(root).sub(TABLE)
    t0, c0 = time.perf_counter(), time.process_time()
    regions_, families = table_regions(fs)
    task = BulkLoadTask(fs, "bench", "p0", regions_, families, timestamp=1_000)
    for b in batches:
        task.add(b)
    commit_load(fs, "bench", task.finish())
    return time.perf_counter() - t0, time.process_time() - c0


def v1_bytes(table) -> int:
    """Bytes of the table's cells written as version 1 files (same block size, codec, bloom)."""
    from storage.vfs.fs import FileSystem
    from storage.storefile import StoreFileWriter

    total = 0
    tmp = "/tmp/bench_format_v1"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    fs = FileSystem(tmp)
    for i, reader in enumerate(table.store_file_readers()):
        info = reader.info
        w = StoreFileWriter(fs, f"{i}.sf", family=info.family, block_size=info.block_size,
                            compression=info.compression, bloom=info.has_bloom, format_version=1)
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
    p.add_argument("--clock", choices=sorted(CLOCKS), default="cpu")
    p.add_argument("--only", choices=["bulkload", "count"], default=None)
    p.add_argument("--reuse", action="store_true",
                   help="with --only count: read the table an earlier run left under --root")
    args = p.parse_args(argv)
    bench_scan._clock = CLOCKS[args.clock]
    rows = args.rows
    root = os.path.join(args.root, "tables")
    if args.reuse and args.only == "count" and os.path.isdir(os.path.join(root, TABLE)):
        return count_only(root, rows, args.repeat)
    batches = sample_batches(rows, args.value_size)
    wall, cpu = bulk_load(root, rows, args.regions, args.value_size, args.block_size, batches)
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

    (t_ours, n), (t_pq, n_pq) = bench_scan.best_of(
        args.repeat, ours_arrow, lambda: pq.read_table(parquet, use_threads=False).num_rows
    )
    assert n == n_pq == rows, (n, n_pq)
    print(f"full scan -> Arrow rows: {n / t_ours:,.0f} rows/s; parquet read_table (1 thread): "
          f"{n / t_pq:,.0f} rows/s: {t_pq / t_ours:.2f}x (target >= 1.2x)")

    # the same scan with no block cache: every block read, verified and decoded each time
    cold_conn = storage.connect(root, read_only=True, block_cache_size=0)
    cold = cold_conn.table(TABLE)
    (t_cold, n), (t_pq, n_pq) = bench_scan.best_of(
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
    (t_cnt, n_cnt), (t_cold, n_cold), (t_idx, n_idx) = bench_scan.best_of(
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
