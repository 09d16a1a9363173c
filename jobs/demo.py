"""The main job on the embedded default: a pre-split sample table, loaded, flushed and scanned.

It prints what it did and how fast, stage by stage, the way ``hbase pe``
reports: rows, bytes, seconds and rows/s.
"""

from __future__ import annotations

import argparse
import os
import struct
import time

import storage

from jobs._writable import check_writable_folder

__all__ = ["add_arguments", "run", "load_sample_table"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--root", default="./regionscan-data", help="where the tables live (path or URI)")
    parser.add_argument("--table", default="sample", help="table name")
    parser.add_argument("--rows", type=int, default=200_000, help="rows to load")
    parser.add_argument("--regions", type=int, default=10, help="regions to pre-split into")
    parser.add_argument("--value-size", type=int, default=100, help="bytes of the string column")
    parser.add_argument("--keep", action="store_true", help="keep an existing table instead of recreating it")


def sample_row(i: int, value_size: int) -> tuple[bytes, dict]:
    """Row i of the sample table: 4-byte big-endian key, an int column, a string column."""
    text = (b"value-%010d-" % i) * (value_size // 17 + 1)
    return struct.pack(">I", i), {b"cf:n": struct.pack(">i", i * 7 - 1000), b"cf:s": text[:value_size]}


def split_keys_for(rows: int, regions: int) -> list[bytes]:
    return [struct.pack(">I", rows * k // regions) for k in range(1, regions)]


def load_sample_table(conn: storage.Connection, name: str, rows: int, regions: int, value_size: int = 100,
                      block_size: int = 65536) -> storage.Table:
    """Create and load the sample table (also used by benchmarks and tests)."""
    table = conn.create_table(
        name, {"cf": {"max_versions": 1, "block_size": block_size}},
        split_keys=split_keys_for(rows, regions), settings={"wal_sync": "none"},
    )
    with table.batch(batch_size=10_000) as batch:
        for i in range(rows):
            key, data = sample_row(i, value_size)
            batch.put(key, data)
    return table


def _stage(name: str, rows: int, seconds: float, nbytes: int | None = None) -> None:
    rate = rows / seconds if seconds > 0 else float("inf")
    extra = f"  {nbytes / seconds / 1e6:8.1f} MB/s" if nbytes else ""
    print(f"  {name:<28} {rows:>10,} rows  {seconds:8.3f} s  {rate:>12,.0f} rows/s{extra}")


def run(args: argparse.Namespace) -> int:
    if args.rows < 1 or args.regions < 1:
        raise ValueError("--rows and --regions must be positive")
    root = args.root
    check_writable_folder(root, "--root")  # a file in the way, a read-only place: before any work
    print(f"regionscan demo: table {args.table!r} under {os.path.abspath(root) if '://' not in root else root}")
    conn = storage.connect(root)
    if conn.is_table_available(args.table) and not args.keep:
        conn.delete_table(args.table)
    t0 = time.perf_counter()
    if conn.is_table_available(args.table):
        table = conn.table(args.table)
    else:
        table = load_sample_table(conn, args.table, args.rows, args.regions, args.value_size)
    _stage("load (WAL + memstore)", args.rows, time.perf_counter() - t0)
    t0 = time.perf_counter()
    table.flush()
    size = sum(r["size"] for r in table.regions())
    _stage("flush to store files", args.rows, time.perf_counter() - t0, size)
    print(f"  regions: {len(table.regions())}, store file bytes: {size:,}")

    t0 = time.perf_counter()
    n = sum(b.num_rows for b in table.scan_batches(columns=[b"cf:n", b"cf:s"]))
    _stage("scan -> Arrow row batches", n, time.perf_counter() - t0, size)
    t0 = time.perf_counter()
    m = sum(1 for _ in table.scan())
    _stage("scan -> happybase dicts", m, time.perf_counter() - t0)
    t0 = time.perf_counter()
    r = sum(1 for _ in table.scan(reverse=True))
    _stage("reverse scan -> dicts", r, time.perf_counter() - t0)
    t0 = time.perf_counter()
    count = sum(b.num_rows for b in table.scan_batches(filter="FirstKeyOnlyFilter() AND KeyOnlyFilter()", output="cells"))
    _stage("row count (FirstKeyOnly)", count, time.perf_counter() - t0)
    if not (n == m == r == count == args.rows):
        print(f"MISMATCH: expected {args.rows} rows, got {n}, {m}, {r}, {count}")
        return 1
    print("ok: every scan returned every row")
    conn.close()
    return 0
