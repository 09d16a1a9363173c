"""The parallel scanner (threads) against one process per region, doing the same per-row work.

This is the comparison of the Trafodion investigation (HBASE-9272): a
client-side parallel scanner against process-level parallelism (ESPs there,
one Spark task per region here) on a 10-region table.  Every variant scans
the whole table (``cf:n`` and ``cf:s``) and runs the same work on each row:
decode the 4-byte big-endian int, keep rows whose int is divisible by 3 and
whose string holds "5", and sum the kept ints.  The work comes in two forms:

* ``arrow``: one NumPy / Arrow compute call per batch (releases the GIL);
* ``python``: a Python loop per row (holds the GIL), as a row-wise SerDe does:
  get the row, build the typed tuple, apply the predicate, hand it on.

Variants, each the best of ``--repeat`` interleaved rounds:

* ``plain``: one thread, ``scan_batches`` then the work, no scanner machinery;
* ``threads=1/2/4``: :class:`storage.table.parallel.ParallelScanner` (arrival order);
* ``processes``: a warm pool of one process per region (``spawn``, started
  before timing), each scanning its region and returning its two sums.

Embedded connections have no block cache, so every variant reads and
decodes every block on every run (as one Spark task per region would).
Wall time is the figure; CPU time (all threads, and the pool's processes)
shows what each form costs in total, which the machine's load does not blur.

``--server`` runs the same against a region server in a child process (the
threads share one client; each process opens its own).  Run from the
repository root::

    python benchmarks/bench_parallel.py --rows 1000000 --repeat 3
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import shutil
import struct
import sys
import tempfile
import time
from typing import Any, Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from harness import COLUMNS, Spent, interleaved, prepare_table  # puts the checkout on sys.path

import storage
from storage.table.parallel import ParallelScanner, region_tasks

__all__ = ["main", "arrow_work", "python_work", "open_table", "run_benchmark"]

TABLE = "bench_server"  # harness.prepare_table's table, shared with bench_server.py: one --root serves both
_UNPACK = struct.Struct(">i").unpack


def _ints(col: pa.Array) -> np.ndarray:
    """The 4-byte big-endian values of a binary column, as int64 (no Python loop)."""
    data = np.frombuffer(col.buffers()[2], dtype=">i4", count=len(col) + col.offset)[col.offset:]
    return data.astype(np.int64)


def arrow_work(batch: pa.RecordBatch) -> tuple[int, int]:
    """The same work as batch kernels: decode both columns, predicate, keep the rows."""
    n = _ints(batch.column(1))
    text = batch.column(2).cast(pa.string())
    keep = pa.array((n % 3 == 0) & pc.match_substring(text, "5").to_numpy(zero_copy_only=False))
    kept = pa.record_batch([batch.column(0).filter(keep), pa.array(n).filter(keep), text.filter(keep)],
                           names=["key", "n", "s"])
    return kept.num_rows, int(pc.sum(kept.column(1)).as_py() or 0)


def python_work(batch: pa.RecordBatch) -> tuple[int, int]:
    """The same work row by row in Python, as a row-wise SerDe and executor do it: get the row,
    build the typed tuple (int decoded, string decoded to text), apply the predicate, hand it on."""
    kept = []
    for key, raw, text in zip(batch.column(0).to_pylist(), batch.column(1).to_pylist(), batch.column(2).to_pylist()):
        row = (key, _UNPACK(raw)[0], text.decode("ascii"))
        if row[1] % 3 == 0 and "5" in row[2]:
            kept.append(row)
    return len(kept), sum(r[1] for r in kept)


WORKS: dict[str, Callable[[pa.RecordBatch], tuple[int, int]]] = {"arrow": arrow_work, "python": python_work}

# -- process workers ----------------------------------------------------------------
_table: Any = None


def open_table(location: str) -> Any:
    """The benchmark table at ``location`` (a server URI, or a root opened read-only without a
    block cache, so every variant reads and decodes every block as a Spark task would)."""
    if location.startswith("grpc://"):
        return storage.connect(location).table(TABLE)
    return storage.connect(location, read_only=True, block_cache_size=0).table(TABLE)


def _open(location: str) -> None:
    global _table
    _table = open_table(location)


def _scan_region(task: tuple[bytes, bytes | None, str]) -> tuple[int, int, float]:
    lo, hi, work = task
    fn = WORKS[work]
    cpu = time.process_time()
    count = total = 0
    for batch in _table.scan_batches(row_start=lo, row_stop=hi, columns=COLUMNS):
        c, t = fn(batch)
        count += c
        total += t
    return count, total, time.process_time() - cpu


def _ping(_: int) -> int:
    return os.getpid()


# -- variants ------------------------------------------------------------------------
def _plain(table, work: str) -> tuple[int, int]:
    fn = WORKS[work]
    count = total = 0
    for batch in table.scan_batches(columns=COLUMNS):
        c, t = fn(batch)
        count += c
        total += t
    return count, total


def _threads(table, threads: int, work: str) -> tuple[int, int]:
    count = total = 0
    scanner = ParallelScanner(table, threads, ordered=False, transform=WORKS[work])
    for c, t in scanner.scan(columns=COLUMNS):
        count += c
        total += t
    return count, total


def _processes(pool, tasks: list, work: str) -> Spent:
    parts = pool.map(_scan_region, [(lo, hi, work) for lo, hi in tasks], chunksize=1)
    return Spent((sum(p[0] for p in parts), sum(p[1] for p in parts)), sum(p[2] for p in parts))


def run_benchmark(location: str, table, repeat: int, works: list[str]) -> dict:
    """Measure every variant for every work form; print and return the figures."""
    tasks = region_tasks(table.regions(), b"", None)
    ctx = multiprocessing.get_context("spawn")
    started = time.perf_counter()
    pool = ctx.Pool(len(tasks), initializer=_open, initargs=(location,))
    pool.map(_ping, range(len(tasks)), chunksize=1)
    startup = time.perf_counter() - started
    print(f"{len(tasks)} regions; process pool of {len(tasks)} started in {startup:.2f} s (not timed below);"
          f" {os.cpu_count()} CPUs", flush=True)
    results: dict = {"pool_startup_s": startup, "cpus": os.cpu_count(), "regions": len(tasks)}
    try:
        for work in works:
            cases = {
                "plain": lambda: _plain(table, work),
                "threads=1": lambda: _threads(table, 1, work),
                "threads=2": lambda: _threads(table, 2, work),
                "threads=4": lambda: _threads(table, 4, work),
                "processes": lambda: _processes(pool, tasks, work),
            }
            print(f"\nwork={work}")
            timed = interleaved(cases, repeat)
            answers = {a for t in timed.values() for a in t.answers}
            for name, t in timed.items():
                results[f"{work} {name}"] = t.wall
                results[f"{work} {name} cpu"] = t.cpu
                print(f"  {name:<12} {t.wall:8.3f} s wall  {t.cpu:8.3f} s CPU", flush=True)
            if len(answers) != 1:
                raise SystemExit(f"variants disagree on the answer: {answers}")
            base = results[f"{work} plain"]
            for name in ("threads=1", "threads=2", "threads=4", "processes"):
                print(f"  speed-up {name:<10} {base / results[f'{work} {name}']:5.2f}x over plain")
            ratio = results[f"{work} processes"] / results[f"{work} threads=4"]
            results[f"{work} threads=4 vs processes"] = ratio
            print(f"  threads=4 vs processes: {ratio:5.2f}x ({'threads' if ratio > 1 else 'processes'} faster)")
    finally:
        pool.close()
        pool.join()
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--regions", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--root", help="table root to reuse (default: a temporary directory, removed after)")
    parser.add_argument("--work", choices=sorted(WORKS), action="append", help="work forms (default: both)")
    parser.add_argument("--server", action="store_true", help="scan through a region server instead")
    parser.add_argument("--json", help="write the figures to this file")
    args = parser.parse_args(argv)
    root = args.root or tempfile.mkdtemp(prefix="bench-parallel-")
    try:
        prepare_table(root, args.rows, args.regions)
        works = args.work or ["arrow", "python"]
        if args.server:
            from storage.server.process import ServerProcess

            with ServerProcess(root) as server, storage.connect(server.location) as conn:
                results = run_benchmark(server.location, conn.table(TABLE), args.repeat, works)
        else:
            results = run_benchmark(root, open_table(root), args.repeat, works)
    finally:
        if not args.root:
            shutil.rmtree(root, ignore_errors=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
