"""Scan benchmark: regionscan's scan paths against peer stores on the same rows.

Data (the sample table of ``regionscan demo``): ``--rows`` rows (1M by
default), a 4-byte big-endian int key, an int column ``cf:n`` (4-byte
big-endian) and a 100-byte string column ``cf:s``, in 10 regions, flushed
and major-compacted to one store file per region.  The same rows go into an
uncompressed Parquet file, a sqlite3 table (INTEGER PRIMARY KEY), an LMDB
environment and a RocksDB (rocksdict) database; LMDB and RocksDB hold one
entry per cell (``row + column -> value``), as a key-value store holds
cells.

Every measurement is the best of ``--repeat`` runs.  Ratios are "ours
divided by the peer" in speed (above 1: regionscan is faster).  Run from the
repository root::

    python benchmarks/bench_scan.py --rows 1000000 --repeat 3 --json bench.json

Needs the ``bench`` extra (``pip install -e '.[bench]'``: rocksdict, lmdb).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import random
import shutil
import sqlite3
import struct
import sys
import time
from typing import Callable

import pyarrow as pa
import pyarrow.parquet as pq

import harness  # the shared timing, clocks and report table; puts the checkout on sys.path
from harness import COLUMNS, COUNT_FILTER, Measurement, best_of, format_table, kept_results

import storage
from jobs.demo import load_sample_table, sample_row
from storage.scanner.metrics import ScanMetrics
from storage.storefile import StoreFileReader

__all__ = ["Measurement", "main", "run_benchmark"]

TABLE = "bench_scan"


# -- data -----------------------------------------------------------------
def _columns(rows: int, value_size: int) -> tuple[list[bytes], list[bytes], list[bytes]]:
    keys, ns, ss = [], [], []
    for i in range(rows):
        key, data = sample_row(i, value_size)
        keys.append(key)
        ns.append(data[b"cf:n"])
        ss.append(data[b"cf:s"])
    return keys, ns, ss


def build_table(conn: storage.Connection, rows: int, regions: int, value_size: int, say, block_size: int = 65536) -> storage.Table:
    if conn.is_table_available(TABLE):
        table = conn.table(TABLE)
        count = sum(b.num_rows for b in table.scan_batches(filter=COUNT_FILTER, output="cells"))
        same_blocks = table.families()[b"cf"]["block_size"] == block_size
        if count == rows and len(table.regions()) == regions and same_blocks:
            say(f"reusing table {TABLE} ({rows:,} rows, {regions} regions)")
            return table
        conn.delete_table(TABLE)
    t0 = time.perf_counter()
    table = load_sample_table(conn, TABLE, rows, regions, value_size, block_size=block_size)
    table.compact(major=True)
    say(f"loaded, flushed and compacted {rows:,} rows into {regions} regions ({block_size:,}-byte blocks) "
        f"in {time.perf_counter() - t0:.1f}s")
    return table


class Peers:
    """The same rows in Parquet, sqlite3, LMDB and RocksDB under one folder."""

    def __init__(self, folder: str, rows: int, value_size: int, say):
        self.folder = folder
        self.rows = rows
        marker = os.path.join(folder, "rows.json")
        want = {"rows": rows, "value_size": value_size}
        fresh = True
        if os.path.exists(marker):
            with open(marker) as f:
                fresh = json.load(f) != want
        self.parquet = os.path.join(folder, "rows.parquet")
        self.sqlite = os.path.join(folder, "rows.sqlite")
        self.lmdb_path = os.path.join(folder, "rows.lmdb")
        self.rocks_path = os.path.join(folder, "rows.rocksdb")
        if fresh:
            shutil.rmtree(folder, ignore_errors=True)
            os.makedirs(folder)
            t0 = time.perf_counter()
            self._build(rows, value_size)
            with open(marker, "w") as f:
                json.dump(want, f)
            say(f"built Parquet, sqlite3, LMDB and RocksDB copies in {time.perf_counter() - t0:.1f}s")
        else:
            say("reusing the peer stores")

    def _build(self, rows: int, value_size: int) -> None:
        import lmdb
        from rocksdict import Options, Rdict, WriteBatch

        keys, ns, ss = _columns(rows, value_size)
        # The Parquet file holds exactly what our row scan returns: binary key and columns.
        arrow = pa.table({"key": pa.array(keys, pa.binary()), "cf:n": pa.array(ns, pa.binary()),
                          "cf:s": pa.array(ss, pa.binary())})
        pq.write_table(arrow, self.parquet, compression="NONE")
        db = sqlite3.connect(self.sqlite)
        db.execute("CREATE TABLE t (k INTEGER PRIMARY KEY, n INTEGER, s BLOB)")
        db.executemany("INSERT INTO t VALUES (?, ?, ?)",
                       ((i, struct.unpack(">i", n)[0], s) for i, (n, s) in enumerate(zip(ns, ss))))
        db.commit()
        db.close()
        env = lmdb.open(self.lmdb_path, map_size=max(1 << 30, rows * 600), subdir=True, lock=False)
        with env.begin(write=True) as txn:
            cur = txn.cursor()
            cur.putmulti(((k + c, v) for k, n, s in zip(keys, ns, ss) for c, v in ((b"cf:n", n), (b"cf:s", s))),
                         append=True)
        env.close()
        opts = Options(raw_mode=True)
        rdb = Rdict(self.rocks_path, opts)
        wb = WriteBatch(raw_mode=True)
        for k, n, s in zip(keys, ns, ss):
            wb.put(k + b"cf:n", n)
            wb.put(k + b"cf:s", s)
        rdb.write(wb)
        rdb.flush()
        rdb.compact_range(None, None)
        rdb.close()


# -- the peers' reads -----------------------------------------------------
def _group_cells(items) -> int:
    """Turn (row + column, value) pairs into (row, {column: value}) the way table.scan() yields them."""
    rows = 0
    current = None
    data: dict = {}
    for k, v in items:
        r = k[:4]
        if r != current:
            if current is not None:
                rows += 1
            current = r
            data = {}
        data[k[4:]] = v
    return rows + (current is not None)


def lmdb_readers(path: str) -> tuple[Callable[[], int], Callable[[], int]]:
    """Two reads of the LMDB copy: cells grouped into row dicts, and raw cell iteration."""
    import lmdb

    env = lmdb.open(path, readonly=True, lock=False, subdir=True)  # one handle per process

    def rows() -> int:
        with env.begin(buffers=False) as txn:
            return _group_cells(txn.cursor().iternext())

    def cells() -> int:
        with env.begin(buffers=False) as txn:
            return sum(1 for _ in txn.cursor().iternext())

    return rows, cells


def rocks_open(path: str):
    from rocksdict import AccessType, Options, Rdict

    return Rdict(path, Options(raw_mode=True), access_type=AccessType.read_only())


# -- the benchmark --------------------------------------------------------
def run_benchmark(args: argparse.Namespace, say=print) -> list[Measurement]:
    """Every measurement of ``args.only`` (all by default), in order; each also printed by ``say``.

    Every scan builds its batches from the (cached) blocks, as a scan of a range read for the
    first time does (a connection's scans keep no results unless asked), except the one line
    that measures the batches a clean file's scan keeps (``cache_results=True``): a scan
    answered from kept batches measures a cache lookup, not the scan path, and would make
    every ratio against it meaningless."""
    return _measure(args, say)


def _measure(args: argparse.Namespace, say) -> list[Measurement]:
    rows, repeat = args.rows, args.repeat
    os.makedirs(args.root, exist_ok=True)
    conn = storage.connect(os.path.join(args.root, "tables"))
    table = build_table(conn, rows, args.regions, args.value_size, say, args.block_size)
    peers = Peers(os.path.join(args.root, "peers"), rows, args.value_size, say)
    out: list[Measurement] = []

    def rate(seconds: float, count: int) -> float:
        return count / seconds if seconds > 0 else 0.0

    def check(count: int, what: str) -> None:
        if count != rows:
            raise RuntimeError(f"{what} returned {count} rows, expected {rows}")

    def want(what: str) -> bool:
        return not args.only or what in args.only

    def ours_arrow() -> int:
        return sum(b.num_rows for b in table.scan_batches(columns=COLUMNS))

    def ours_arrow_kept() -> int:
        # a repeated scan of the unchanged table that keeps results: the batches an earlier
        # scan built (storage/read/stream_memo.py); every other figure here builds its batches
        return sum(b.num_rows for b in table.scan_batches(columns=COLUMNS, cache_results=True))

    def ours_python() -> int:
        return sum(1 for _ in table.scan())

    sq = sqlite3.connect(peers.sqlite)
    rnd = random.Random(42)

    # 1. full scan into Arrow rows vs pyarrow.parquet.read_table (one thread each)
    if want("arrow"):
        (t_ours, n), (t_pq, n_pq), (t_pq_mt, _) = best_of(
            repeat, ours_arrow,
            lambda: pq.read_table(peers.parquet, use_threads=False).num_rows,
            lambda: pq.read_table(peers.parquet).num_rows,
        )
        check(n, "scan_batches")
        check(n_pq, "parquet")
        forward_arrow = rate(t_ours, n)
        # warm: slices of the decoded row groups the block cache holds (a lookup); the target is
        # on the first read below
        out.append(Measurement(
            "full scan -> Arrow rows (scan_batches), warm", forward_arrow, "rows/s", "pyarrow.parquet.read_table (1 thread)",
            rate(t_pq, n_pq), None, None,
            f"Parquet with threads: {rate(t_pq_mt, rows):,.0f} rows/s ({'per CPU-second' if args.clock == 'cpu' else 'wall'})",
        ))
        # the same scan as a first read: the block cache emptied before each run (the files stay in
        # the OS page cache, as Parquet's are), so the row groups are read, checked, decompressed
        # and decoded; the line above may slice row groups a warm block cache holds decoded
        cache = conn.block_cache

        def ours_arrow_first() -> int:
            if cache is not None:
                cache.clear()
            return ours_arrow()

        (t_first, n), (t_pq_first, _) = best_of(
            repeat, ours_arrow_first, lambda: pq.read_table(peers.parquet, use_threads=False).num_rows)
        check(n, "scan_batches, first read")
        out.append(Measurement(
            "full scan -> Arrow rows, first read (block cache emptied)", rate(t_first, n), "rows/s",
            "pyarrow.parquet.read_table (1 thread)", rate(t_pq_first, n_pq), ">= 1.0x",
            rate(t_first, n) >= rate(t_pq_first, n_pq), "the files in the OS page cache, nothing of them in ours",
        ))
        (t_kept, n), (t_built, _) = best_of(repeat, ours_arrow_kept, ours_arrow)
        check(n, "scan_batches, kept batches")
        out.append(Measurement(
            "repeated full scan -> Arrow rows, kept batches", rate(t_kept, n), "rows/s",
            "the same scan building its batches", rate(t_built, n), None, None,
            "a clean file's batches kept in the block cache between scans (storage/read/stream_memo.py)",
        ))

    # 2. full scan into Python rows vs iterating the same cells in LMDB and RocksDB
    if want("python"):
        rdb = rocks_open(peers.rocks_path)
        (t_py, n), (t_lm, n_lm), (t_lm_raw, c_lm), (t_rk, n_rk), (t_rk_raw, c_rk) = best_of(
            repeat, ours_python, *lmdb_readers(peers.lmdb_path),
            lambda: _group_cells(rdb.items()), lambda: sum(1 for _ in rdb.items()),
        )
        rdb.close()
        check(n, "scan")
        check(n_lm, "lmdb")
        check(n_rk, "rocksdict")
        forward_py = rate(t_py, n)
        out.append(Measurement(
            "full scan -> Python (row, dict) (scan)", forward_py, "rows/s", "LMDB cursor, cells grouped into dicts",
            rate(t_lm, n_lm), ">= 1.0x", forward_py >= rate(t_lm, n_lm), f"LMDB raw cell iteration: {rate(t_lm_raw, c_lm):,.0f} cells/s",
        ))
        out.append(Measurement(
            "full scan -> Python (row, dict) (scan)", forward_py, "rows/s", "rocksdict items(), cells grouped into dicts",
            rate(t_rk, n_rk), None, None, f"rocksdict raw cell iteration: {rate(t_rk_raw, c_rk):,.0f} cells/s",
        ))

    # 3. row count with FirstKeyOnly + KeyOnly, one core
    if want("count"):
        def ours_count() -> int:
            return sum(b.num_rows for b in table.scan_batches(filter=COUNT_FILTER, output="cells"))

        (t_cnt, n), (t_sq_cnt, n_sq) = best_of(
            repeat, ours_count, lambda: sq.execute("SELECT count(*) FROM t").fetchone()[0]
        )
        check(n, "row count")
        count_rate = rate(t_cnt, n)
        out.append(Measurement(
            "row count (FirstKeyOnlyFilter + KeyOnlyFilter)", count_rate, "rows/s", "sqlite3 SELECT count(*)",
            rate(t_sq_cnt, n_sq), ">= 10M rows/s", count_rate >= 10e6,
        ))

    # 4. reverse full scans against the forward ones, timed alternately.  Warm, a forward scan of a
    # clean file slices the decoded blocks the block cache holds (a lookup, no copy) where a
    # reverse one must build reversed arrays: that ratio is printed without a target.  The target
    # is on first reads, both sides reading, checking and decoding their blocks.
    if want("reverse"):
        (t_rev_arrow, n), (t_fwd_arrow, _) = best_of(
            repeat, lambda: sum(b.num_rows for b in table.scan_batches(columns=COLUMNS, reverse=True)), ours_arrow,
        )
        check(n, "reverse scan_batches")
        rev_arrow, fwd_arrow = rate(t_rev_arrow, n), rate(t_fwd_arrow, n)
        out.append(Measurement(
            "reverse full scan -> Arrow rows, warm", rev_arrow, "rows/s", "our forward scan_batches", fwd_arrow,
            None, None, "warm forward: slices of the cached blocks; a reverse scan copies every row",
        ))
        (t_rev_first, n), (t_fwd_first, _) = best_of(
            repeat, _first_read(conn, lambda: sum(b.num_rows for b in table.scan_batches(columns=COLUMNS, reverse=True))),
            _first_read(conn, ours_arrow),
        )
        check(n, "reverse scan_batches, first read")
        rev_first, fwd_first = rate(t_rev_first, n), rate(t_fwd_first, n)
        out.append(Measurement(
            "reverse full scan -> Arrow rows, first read", rev_first, "rows/s", "our forward scan_batches, first read",
            fwd_first, ">= 0.7x forward", rev_first >= 0.7 * fwd_first, "block cache emptied before each run",
        ))
        (t_rev_py, n), (t_fwd_py, _) = best_of(repeat, lambda: sum(1 for _ in table.scan(reverse=True)), ours_python)
        check(n, "reverse scan")
        rev_py, fwd_py = rate(t_rev_py, n), rate(t_fwd_py, n)
        out.append(Measurement(
            "reverse full scan -> Python rows", rev_py, "rows/s", "our forward scan", fwd_py,
            ">= 0.7x forward", rev_py >= 0.7 * fwd_py,
        ))

    # 5. random point reads vs sqlite3's primary-key lookups
    if want("gets"):
        picks = [rnd.randrange(rows) for _ in range(args.gets)]
        keys = [struct.pack(">I", i) for i in picks]

        def ours_gets() -> int:
            row = table.row
            return sum(1 for k in keys if row(k))

        def sqlite_gets() -> int:
            cur = sq.cursor()
            q = "SELECT n, s FROM t WHERE k = ?"
            return sum(1 for i in picks if cur.execute(q, (i,)).fetchone() is not None)

        (t_get, n_get), (t_sq_get, n_sq_get) = best_of(repeat, ours_gets, sqlite_gets)
        if n_get != len(keys):
            raise RuntimeError(f"table.row found {n_get} of {len(keys)} rows")
        get_rate, sq_get_rate = rate(t_get, n_get), rate(t_sq_get, n_sq_get)
        out.append(Measurement(
            "random point reads (table.row)", get_rate, "gets/s", "sqlite3 primary-key SELECT",
            sq_get_rate, ">= 0.5x", get_rate >= 0.5 * sq_get_rate, f"{len(keys):,} random keys",
        ))

    # 5b. multi-get: rows() of --multi random keys at once vs sqlite's per-key rate
    if want("gets"):
        many = [struct.pack(">I", rnd.randrange(rows)) for _ in range(args.multi)]
        many_ids = [struct.unpack(">I", k)[0] for k in many]

        def ours_multi() -> int:
            return len(table.rows(many))

        def sqlite_multi() -> int:
            cur = sq.cursor()
            q = "SELECT n, s FROM t WHERE k = ?"
            return sum(1 for i in many_ids if cur.execute(q, (i,)).fetchone() is not None)

        (t_multi, n_multi), (t_sq_multi, n_sq_multi) = best_of(max(repeat, 5), ours_multi, sqlite_multi)
        if n_multi != len(set(many)) and n_multi != len(many):
            raise RuntimeError(f"table.rows found {n_multi} of {len(many)} rows")
        multi_rate, sq_multi_rate = rate(t_multi, len(many)), rate(t_sq_multi, n_sq_multi)
        out.append(Measurement(
            f"rows() of {len(many):,} random keys", multi_rate, "keys/s", "sqlite3 primary-key SELECT per key",
            sq_multi_rate, ">= 2x", multi_rate >= 2 * sq_multi_rate,
        ))

    # 5c. block cache after a scan and after point reads that touch every block
    if want("cache"):
        cache = conn.block_cache
        if cache is not None:
            cache.clear()
            sum(b.num_rows for b in table.scan_batches(columns=COLUMNS))
            after_scan = cache.used_bytes
            evicted = cache.evictions
            for reader in store_file_readers(table):
                for first in reader.block_first_keys:
                    table.row(first[0])
            after_gets = cache.used_bytes
            extra = cache.evictions - evicted
            out.append(Measurement(
                "block cache evictions: point reads on every block after a scan", float(extra), "evictions",
                None, None, "0", extra == 0,
                f"cache {after_scan / 2**20:,.0f} MiB after the scan, {after_gets / 2**20:,.0f} MiB after the gets "
                f"(capacity {cache.capacity_bytes / 2**20:,.0f} MiB)",
            ))

    # 6. the batch path with metrics on vs off, timed alternately: first reads carry the target
    # (warm, a scan slices cached blocks, and the metrics' fixed cost a region scan is set against
    # that lookup: printed without a target)
    if want("metrics"):
        metrics = ScanMetrics()

        def with_metrics() -> int:
            return sum(b.num_rows for b in table.scan_batches(columns=COLUMNS, metrics=metrics))

        (t_on, n), (t_off, _) = best_of(max(repeat, 5), with_metrics, ours_arrow)
        check(n, "scan_batches with metrics")
        out.append(Measurement(
            "scan_batches with ScanMetrics, warm", rate(t_on, n), "rows/s", "scan_batches without metrics", rate(t_off, n),
            None, None, f"metrics counted {metrics.cells_scanned:,} cells over {metrics.regions_scanned} region scans",
        ))
        (t_on, n), (t_off, _) = best_of(max(repeat, 5), _first_read(conn, with_metrics), _first_read(conn, ours_arrow))
        check(n, "scan_batches with metrics, first read")
        out.append(Measurement(
            "scan_batches with ScanMetrics, first read", rate(t_on, n), "rows/s", "scan_batches without metrics, first read",
            rate(t_off, n), ">= 0.95x (within 5%)", t_on <= t_off * 1.05, "block cache emptied before each run",
        ))

    # 7. raw store file scans, cells/s: verify + decode every block (fresh readers, no block cache),
    if want("raw"):
        #    the same through the warm block cache, and the cell-at-a-time scanner on one file
        cached = store_file_readers(table)
        uncached = [StoreFileReader(r.fs, r.path, cache=None) for r in cached]
        (t_dec, cells), (t_hit, _) = best_of(
            repeat,
            lambda: sum(b.num_rows for r in uncached for b in r.scan_batches(cache_blocks=False)),
            lambda: sum(b.num_rows for r in cached for b in r.scan_batches()),
        )
        out.append(Measurement(
            "raw store file scan: read+verify+decode blocks", rate(t_dec, cells), "cells/s", None, None, None, None,
            f"{len(uncached)} files, {cells:,} cells, no block cache",
        ))
        out.append(Measurement(
            "raw store file scan: block cache hits", rate(t_hit, cells), "cells/s", None, None, None, None,
            f"{len(cached)} files, warm block cache",
        ))
        (t_cell, cells_one), = best_of(repeat, lambda: count_cells_one_at_a_time(uncached[0]))
        out.append(Measurement(
            "raw store file scan: cell scanner next()", rate(t_cell, cells_one), "cells/s",
            "batch path (read+verify+decode)", rate(t_dec, cells), None, None,
            f"one file, {cells_one:,} cells: one Python call per cell",
        ))
        for r in uncached:
            r.close()
    sq.close()
    conn.close()
    return out


def store_file_readers(table: storage.Table) -> list:
    """Every store file reader of the table's regions (one per region after a major compaction)."""
    return table.store_file_readers()


def count_cells_one_at_a_time(reader) -> int:
    """Walk a store file with its cell scanner: the per-cell path, one Python call per cell."""
    scanner = reader.scanner()
    try:
        scanner.seek((b"",))
        n = 0
        nxt = scanner.next
        while nxt() is not None:
            n += 1
        return n
    finally:
        scanner.close()


def profile_slowest(args: argparse.Namespace, what: str, limit: int = 25) -> str:
    """cProfile one of our scan paths and return the top functions by cumulative and own time."""
    conn = storage.connect(os.path.join(args.root, "tables"))
    table = conn.table(TABLE)
    paths = {
        "scan": lambda: sum(1 for _ in table.scan()),
        "reverse": lambda: sum(1 for _ in table.scan(reverse=True)),
        "arrow": lambda: sum(b.num_rows for b in table.scan_batches(columns=COLUMNS)),
        "count": lambda: sum(b.num_rows for b in table.scan_batches(filter=COUNT_FILTER, output="cells")),
        "get": lambda: sum(1 for i in range(0, args.rows, max(1, args.rows // args.gets)) if table.row(struct.pack(">I", i))),
    }
    with kept_results(False, conn.block_cache):  # the scan path, not a lookup of the batches an earlier scan kept
        paths[what]()  # warm, as the benchmark measures: the profile shows the scan, not the first disk reads
        prof = cProfile.Profile()
        prof.enable()
        paths[what]()
        prof.disable()
    conn.close()
    buf = io.StringIO()
    stats = pstats.Stats(prof, stream=buf).strip_dirs()
    stats.sort_stats("cumulative").print_stats(limit)
    stats.sort_stats("tottime").print_stats(limit)
    return buf.getvalue()


def _first_read(conn, fn):
    """``fn`` as a first read: the connection's block cache emptied before each call (the
    emptying is timed with it: microseconds), the files left in the OS page cache."""
    cache = conn.block_cache

    def first() -> int:
        if cache is not None:
            cache.clear()
        return fn()
    return first


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000, help="rows (default 1,000,000)")
    parser.add_argument("--regions", type=int, default=10, help="regions (default 10)")
    parser.add_argument("--value-size", type=int, default=100, help="bytes of the string column (default 100)")
    parser.add_argument("--block-size", type=int, default=65536,
                        help="store file block size of the table (default 65536, HBase's default; scan-heavy tables use more)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per measurement; the best counts (default 3)")
    parser.add_argument("--gets", type=int, default=5_000, help="random point reads (default 5,000)")
    parser.add_argument("--only", nargs="+", default=None,
                        choices=["arrow", "python", "count", "reverse", "gets", "cache", "metrics", "raw"],
                        help="run only these measurements (default: all)")
    parser.add_argument("--multi", type=int, default=1_000, help="keys of one rows() call (default 1,000)")
    parser.add_argument("--root", default="./bench-data", help="folder for the table and the peer stores")
    parser.add_argument("--clock", choices=["cpu", "wall"], default="cpu",
                        help="cpu: process CPU seconds (default; steady on a shared machine), wall: elapsed seconds")
    parser.add_argument("--json", default=None, metavar="PATH", help="write the measurements as JSON")
    parser.add_argument("--profile", default=None, choices=["scan", "reverse", "arrow", "count", "get"],
                        help="after the run, cProfile this path of ours and print the top functions")
    args = parser.parse_args(argv)
    for name in ("rows", "regions", "value_size", "repeat", "gets", "multi"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be a positive integer")
    if args.regions > args.rows:
        parser.error("--regions must not exceed --rows")
    harness.set_clock(args.clock)
    print(f"bench_scan: {args.rows:,} rows, {args.regions} regions, best of {args.repeat} on the {args.clock} clock, "
          f"under {args.root}")
    results = run_benchmark(args)
    print()
    print(format_table(results))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": args.rows, "regions": args.regions, "repeat": args.repeat, "clock": args.clock,
                       "results": [m.to_dict() for m in results]}, f, indent=2)
        print(f"\nwritten to {args.json}")
    if args.profile:
        print()
        print(profile_slowest(args, args.profile))
    return 0


if __name__ == "__main__":
    sys.exit(main())
