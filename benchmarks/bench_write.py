"""Write benchmark: ``regionscan pe``'s write loops and ``batch()`` against rocksdict.

What it times, CPU seconds of the process (every thread), best of ``--repeat``
runs, our runs and the peer's alternating, each run on a fresh table / database:

* ``sequentialWrite`` and ``randomWrite`` as ``regionscan pe`` runs them
  (``jobs.pe_workloads``: 26-byte keys, one ``info:0`` column of
  ``--value-size`` bytes, puts buffered in a ``table.batch()`` of the 2 MiB
  write buffer, WAL on with the ``each`` sync policy: one fsync per sent
  buffer), against rocksdict's ``put`` per row (WAL on, its default
  ``sync=False``: each put is written to the OS, none fsynced, so ours is the
  more durable side), the peer's background memtable flush waited for inside
  its timed part as ours runs inside the loop;
* one ``batch()`` of ``--batch-rows`` rows of ``--batch-value`` bytes (10K
  rows of 1,000 B by default), against rocksdict ``put`` per row of the same rows;
* group commit: ``--threads`` threads each doing single ``put()`` calls on
  one table with the ``each`` policy, printing how many WAL syncs served how
  many puts.

Run from the repository root::

    python benchmarks/bench_write.py --rows 100000 --repeat 3
"""

from __future__ import annotations

import argparse
import gc
import os
import shutil
import sys
import threading
import time
from typing import Callable

import numpy as np

from harness import best_of_self_timed, clock  # puts the checkout on sys.path

import storage
from jobs.pe_workloads import COLUMN, FAMILY, PeOptions, format_row, value_offsets, value_pool

__all__ = ["main"]


def _fresh(path: str) -> str:
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)
    return path


def _rows(keys: list[bytes], value_size: int, seed: int) -> list[tuple[bytes, bytes]]:
    rng = np.random.default_rng(seed)
    pool = value_pool(value_size, rng)
    return [(k, pool[o : o + value_size]) for k, o in zip(keys, value_offsets(pool, value_size, len(keys), rng))]


def ours_pe(root: str, rows: list[tuple[bytes, bytes]], value_size: int) -> Callable[[], float]:
    """pe's write loop: puts into a ``table.batch(batch_size=write buffer rows)``."""

    def run() -> float:
        conn = storage.connect(_fresh(root))
        table = conn.create_table("w", {FAMILY: {"max_versions": 1}}, settings={"wal_sync": "each"})
        size = PeOptions(value_size=value_size).write_batch_rows
        gc.collect()
        t0 = clock()
        batch = table.batch(batch_size=size)
        put = batch.put
        col = COLUMN
        for key, value in rows:
            put(key, {col: value})
        batch.send()
        took = clock() - t0
        conn.close()
        return took

    return run


def ours_batch(root: str, rows: list[tuple[bytes, bytes]]) -> Callable[[], float]:
    """One ``with table.batch()`` of every row."""

    def run() -> float:
        conn = storage.connect(_fresh(root))
        table = conn.create_table("w", {FAMILY: {"max_versions": 1}}, settings={"wal_sync": "each"})
        col = COLUMN
        gc.collect()
        t0 = clock()
        with table.batch() as batch:
            put = batch.put
            for key, value in rows:
                put(key, {col: value})
        took = clock() - t0
        conn.close()
        return took

    return run


def rocks_put(root: str, rows: list[tuple[bytes, bytes]]) -> Callable[[], float]:
    """rocksdict ``put`` per row, WAL on (its default write options), until a memtable
    flush the puts started has ended."""
    from rocksdict import Options, Rdict

    def run() -> float:
        db = Rdict(_fresh(root), Options(raw_mode=True))
        col = COLUMN
        gc.collect()
        t0 = clock()
        put = db.put
        for key, value in rows:
            put(key + col, value)
        # RocksDB flushes a full memtable on a background thread; ours flushes in the writer's
        # thread, inside the timed loop.  Wait for a flush the loop started, so its CPU counts
        # on both sides (the close's own flush of the rest stays out, as ours keeps the rest).
        while db.property_int_value("rocksdb.num-running-flushes") or db.property_int_value(
                "rocksdb.mem-table-flush-pending"):
            time.sleep(0.001)
        took = clock() - t0
        db.close()
        return took

    return run


def group_commit(root: str, threads: int, puts: int) -> tuple[int, int, float]:
    """``threads`` threads doing ``puts`` single puts each; (puts, WAL syncs, wall seconds)."""
    conn = storage.connect(_fresh(root))
    table = conn.create_table("w", {FAMILY: {"max_versions": 1}}, settings={"wal_sync": "each"})

    def work(t: int) -> None:
        for i in range(puts):
            table.put(format_row(t * puts + i), {COLUMN: b"x" * 100})

    before = table.wal_sync_count()
    workers = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
    t0 = time.perf_counter()
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    wall = time.perf_counter() - t0
    syncs = table.wal_sync_count() - before
    conn.close()
    return threads * puts, syncs, wall


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=100_000, help="rows of the pe loops (default 100,000)")
    parser.add_argument("--value-size", type=int, default=1024, help="value bytes of the pe loops (default 1024)")
    parser.add_argument("--batch-rows", type=int, default=10_000, help="rows of the batch() test (default 10,000)")
    parser.add_argument("--batch-value", type=int, default=1000, help="value bytes of the batch() test (default 1000)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per measurement; the best counts (default 3)")
    parser.add_argument("--threads", type=int, default=8, help="writer threads of the group-commit test (default 8)")
    parser.add_argument("--root", default="./bench-write", help="scratch folder")
    parser.add_argument("--only", nargs="+", default=None, choices=["sequential", "random", "batch", "group"])
    args = parser.parse_args(argv)
    for name in ("rows", "value_size", "batch_rows", "batch_value", "repeat", "threads"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be a positive integer")
    want = lambda what: not args.only or what in args.only  # noqa: E731
    ours_dir, peer_dir = os.path.join(args.root, "ours"), os.path.join(args.root, "rocks")
    print(f"bench_write: best of {args.repeat}, CPU seconds of the process, under {args.root}")
    lines = []
    rng = np.random.default_rng(7)
    for kind, keys in (
        ("sequential", [format_row(i) for i in range(args.rows)]),
        ("random", [format_row(int(i)) for i in rng.integers(0, args.rows, size=args.rows)]),
    ):
        if not want(kind):
            continue
        rows = _rows(keys, args.value_size, 1)
        t_ours, t_peer = best_of_self_timed(args.repeat, ours_pe(ours_dir, rows, args.value_size), rocks_put(peer_dir, rows))
        lines.append((f"pe {kind}Write, WAL on ({args.rows:,} x {args.value_size} B)", len(rows) / t_ours,
                      len(rows) / t_peer, ">= 1.0x"))
    if want("batch"):
        rows = _rows([format_row(i) for i in range(args.batch_rows)], args.batch_value, 2)
        t_ours, t_peer = best_of_self_timed(args.repeat, ours_batch(ours_dir, rows), rocks_put(peer_dir, rows))
        lines.append((f"one batch() of {args.batch_rows:,} x {args.batch_value} B", len(rows) / t_ours,
                      len(rows) / t_peer, ">= 3.0x"))
    print()
    print(f"{'measurement':<52} {'ours rows/s':>14} {'rocksdict put/row':>18} {'ratio':>7}  target")
    for name, ours, peer, target in lines:
        print(f"{name:<52} {ours:>14,.0f} {peer:>18,.0f} {ours / peer:>6.2f}x  {target}")
    if want("group"):
        puts, syncs, wall = group_commit(ours_dir, args.threads, max(1, args.rows // (10 * args.threads)))
        print(f"\ngroup commit: {args.threads} threads, {puts:,} single put()s, {syncs:,} WAL syncs "
              f"({puts / max(syncs, 1):.1f} puts per sync), {puts / wall:,.0f} puts/s wall")
    shutil.rmtree(args.root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
