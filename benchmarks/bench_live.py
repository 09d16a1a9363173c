"""Live-table benchmark: scans of a table with a quarter of its rows unflushed,
against the same table flushed.

Data: ``--rows`` rows (200K by default) of the sample table (4-byte key,
``cf:n`` and a 100-byte ``cf:s``) in 3 regions.  The flushed table holds every
row in one compacted store file per region.  The live tables hold three
quarters of the rows in such files and the last quarter only in the memstore
and the WAL, laid out two ways: ``interleaved`` (every fourth row, so the
memstore's rows fall between the file's everywhere) and ``tail`` (the last
quarter of the key space, as appended time series are).

Two read paths are timed: the embedded ``Table.scan_batches`` (rows of
``cf:n`` and ``cf:s``) and the connector's partition read (files mode:
``TableInputFormat.get_splits()`` once, then each split's batch reader, which
opens its pinned store files and decodes its pinned WAL records), without
Spark.  The ratio is live speed divided by flushed speed; the target is 0.67
or more.  Runs alternate between the tables and the best of ``--repeat`` is
kept (``--clock cpu`` by default: CPU seconds, steadier on a shared machine).
Run from the repository root::

    python benchmarks/bench_live.py --rows 200000 --repeat 5
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import shutil
import sys
import tempfile
import time

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
for path in (_ROOT, os.path.dirname(os.path.abspath(__file__))):
    if path not in sys.path:
        sys.path.insert(0, path)

import bench_scan  # noqa: E402
import storage  # noqa: E402
from connector import TableInputFormat  # noqa: E402
from jobs.demo import sample_row, split_keys_for  # noqa: E402

__all__ = ["main"]

COLUMNS = [b"cf:n", b"cf:s"]
LAYOUTS = {
    "interleaved": lambda i, rows: i % 4 == 3,
    "tail": lambda i, rows: i >= rows - rows // 4,
}


def build(conn: storage.Connection, name: str, rows: int, unflushed) -> storage.Table:
    """Load ``rows`` sample rows; those ``unflushed(i, rows)`` picks stay in the memstore and WAL."""
    table = conn.create_table(
        name, {"cf": {"max_versions": 1}}, split_keys=split_keys_for(rows, 3),
        settings={"wal_sync": "none", "memstore_flush_size": 1 << 40},
    )
    late = []
    with table.batch(batch_size=10_000) as batch:
        for i in range(rows):
            if unflushed is not None and unflushed(i, rows):
                late.append(i)
                continue
            key, data = sample_row(i, 100)
            batch.put(key, data)
    table.compact(major=True)
    with table.batch(batch_size=10_000) as batch:
        for i in late:
            key, data = sample_row(i, 100)
            batch.put(key, data)
    return table


def embedded(table: storage.Table):
    def run() -> int:
        return sum(b.num_rows for b in table.scan_batches(columns=COLUMNS))
    return run


def connector(root: str, name: str):
    fmt = TableInputFormat({"regionscan.root": root, "hbase.mapreduce.inputtable": name,
                            "hbase.mapreduce.scan.columns": "cf:n cf:s"})
    splits = fmt.get_splits()

    def run() -> int:
        n = 0
        for split in splits:
            reader = fmt.create_batch_reader(split)
            for batch in reader:
                n += batch.num_rows
            reader.close()
        return n
    return run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--clock", choices=sorted(bench_scan.CLOCKS), default="cpu")
    parser.add_argument("--root", default=None, help="folder for the tables (default: a temporary one)")
    parser.add_argument("--profile", choices=["embedded", "connector"], default=None,
                        help="print a cProfile of one live (interleaved) run of this path and stop")
    args = parser.parse_args(argv)
    bench_scan._clock = bench_scan.CLOCKS[args.clock]
    root = args.root or tempfile.mkdtemp(prefix="bench-live-")
    shutil.rmtree(root, ignore_errors=True)
    conn = storage.connect(root, block_cache_size=256 << 20)
    try:
        t0 = time.perf_counter()
        flushed = build(conn, "flushed", args.rows, None)
        live = {layout: build(conn, f"live_{layout}", args.rows, pick) for layout, pick in LAYOUTS.items()}
        print(f"built the flushed table and {len(live)} live tables of {args.rows:,} rows "
              f"in {time.perf_counter() - t0:.1f}s (clock: {args.clock})")
        if args.profile:
            fn = embedded(live["interleaved"]) if args.profile == "embedded" else connector(root, "live_interleaved")
            fn()
            prof = cProfile.Profile()
            prof.enable()
            fn()
            prof.disable()
            pstats.Stats(prof).sort_stats("cumulative").print_stats(30)
            return 0
        failed = False
        for path in ("embedded", "connector"):
            runs = [embedded(flushed) if path == "embedded" else connector(root, "flushed")]
            for layout in LAYOUTS:
                runs.append(embedded(live[layout]) if path == "embedded" else connector(root, f"live_{layout}"))
            results = bench_scan.best_of(args.repeat, *runs)
            (base_s, base_n), *others = results
            print(f"{path:<10} flushed              {base_s:8.4f} s  {base_n / base_s:>12,.0f} rows/s")
            for layout, (secs, n) in zip(LAYOUTS, others):
                ratio = base_s / secs
                ok = ratio >= 0.67 and n == base_n
                failed |= not ok
                print(f"{path:<10} live ({layout:<11}) {secs:8.4f} s  {n / secs:>12,.0f} rows/s  "
                      f"{ratio:5.2f}x of flushed  {'meets' if ok else 'MISSES'} >= 0.67x"
                      + ("" if n == base_n else f"  ROW COUNT {n} != {base_n}"))
        return 1 if failed else 0
    finally:
        conn.close()
        if args.root is None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
