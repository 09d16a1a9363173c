"""Streaming scan against RPC scan of a region server over loopback, and both against the embedded scan.

Data: the sample table of ``regionscan demo`` (``--rows`` rows, 1M by
default, a 4-byte big-endian int key, an int column and a 100-byte string
column, ``--regions`` regions), flushed.  A region server runs in a child
process on a loopback port; the client reads the whole table as Arrow row
batches (the vectorized path) and, with ``--dicts``, as happybase dicts.

Measured in the same run, each the best of ``--repeat`` interleaved rounds:

* embedded: ``Table.scan_batches`` in this process (no server);
* stream: one do_get, batches streamed by the server;
* rpc caching=100 and caching=1000: open, next(caching) round trips, close.

Ratios are "stream speed / other speed".  Run from the repository root::

    python benchmarks/bench_server.py --rows 1000000 --repeat 3
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from typing import Callable

from harness import COLUMNS, interleaved, prepare_table  # puts the checkout on sys.path

import storage
from storage.scanner.metrics import ScanMetrics
from storage.server.process import ServerProcess

__all__ = ["main", "run_benchmark"]

TABLE = "bench_server"  # harness.prepare_table's default: bench_parallel and bench_thrift read it too


def _arrow_scan(table, **kwargs) -> Callable[[], tuple[int, int]]:
    def run() -> tuple[int, int]:
        metrics = ScanMetrics() if kwargs else None
        extra = {"metrics": metrics} if metrics is not None else {}
        rows = sum(b.num_rows for b in table.scan_batches(columns=COLUMNS, **kwargs, **extra))
        return rows, metrics.rpc_calls if metrics is not None else 0
    return run


def _dict_scan(table, **kwargs) -> Callable[[], tuple[int, int]]:
    def run() -> tuple[int, int]:
        return sum(1 for _ in table.scan(columns=COLUMNS, **kwargs)), 0
    return run


def _rpc_read_counters(conn, remote) -> dict:
    """One RPC scan at caching=100: its next() calls hop between the server's handler threads,
    yet each block is read once, with no separate header read (the shared prefetched header)."""
    conn.read_counters(TABLE, reset=True)
    scanner = remote.open_scanner(columns=COLUMNS, caching=100)
    while scanner.more:
        scanner.next()
    threads = next(s["handler_threads"] for s in conn.list_scanners()["scanners"] if s["id"] == scanner.scanner_id)
    scanner.close()
    stats = conn.read_counters(TABLE)
    out = {"next_calls": scanner.seq, "handler_threads": threads, "blocks": stats["blocks"],
           "blocks_read": stats["counters"]["blocks_read"], "extra_header_reads": stats["counters"]["extra_header_reads"]}
    print(f"rpc scan caching=100: {out['next_calls']} next() calls served by {threads} handler threads;"
          f" {out['blocks_read']} block reads for {out['blocks']} blocks, {out['extra_header_reads']} extra header reads")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--regions", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--root", help="table root to reuse (default: a temporary directory, removed after)")
    parser.add_argument("--dicts", action="store_true", help="also measure the happybase-dict scan")
    parser.add_argument("--json", help="write the figures to this file")
    args = parser.parse_args(argv)
    root = args.root or tempfile.mkdtemp(prefix="bench-server-")
    try:
        prepare_table(root, args.rows, args.regions)
        results = run_benchmark(root, args.repeat, args.dicts)
    finally:
        if not args.root:
            shutil.rmtree(root, ignore_errors=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)
    return 0


def run_benchmark(root: str, repeat: int, dicts: bool) -> dict:
    """Measure every scan API on the table under ``root``; print and return the figures."""
    results: dict = {}
    # No block cache on either side: every scan reads and decodes every block, so the
    # embedded and remote figures do the same storage work, and the read counters show reads.
    with ServerProcess(root, "--block-cache-size", "0") as server, \
            storage.connect(root, read_only=True, block_cache_size=0) as local, \
            storage.connect(server.location) as conn:
        embedded = local.table(TABLE)
        remote = conn.table(TABLE)
        cases = {
            "embedded": _arrow_scan(embedded),
            "stream": _arrow_scan(remote, mode="stream"),
            "rpc caching=1000": _arrow_scan(remote, mode="rpc", caching=1000),
            "rpc caching=100": _arrow_scan(remote, mode="rpc", caching=100),
        }
        if dicts:
            cases.update({
                "dicts embedded": _dict_scan(embedded),
                "dicts stream": _dict_scan(remote, mode="stream"),
                "dicts rpc caching=1000": _dict_scan(remote, mode="rpc", caching=1000),
                "dicts rpc caching=100": _dict_scan(remote, mode="rpc", caching=100),
            })
        print(f"{'scan':<26} {'rows':>10} {'calls':>7} {'seconds':>8} {'rows/s':>12}")
        for name, timed in interleaved(cases, repeat).items():
            seconds, (rows, calls) = timed.wall, timed.result
            results[name] = {"seconds": seconds, "rows": rows, "calls": calls, "rows_per_s": rows / seconds}
            print(f"{name:<26} {rows:>10,} {calls:>7} {seconds:>8.3f} {rows / seconds:>12,.0f}", flush=True)
        results["rpc read counters"] = _rpc_read_counters(conn, remote)
    print()
    prefix_sets = [""] + (["dicts "] if dicts else [])
    for prefix in prefix_sets:
        stream = results[f"{prefix}stream"]["rows_per_s"]
        for other in ("rpc caching=100", "rpc caching=1000", "embedded"):
            ratio = stream / results[f"{prefix}{other}"]["rows_per_s"]
            results[f"ratio {prefix}stream/{other}"] = ratio
            print(f"{prefix}stream vs {other:<18} {ratio:6.2f}x")
        for other in ("rpc caching=100", "rpc caching=1000"):
            ratio = results[f"{prefix}embedded"]["rows_per_s"] / results[f"{prefix}{other}"]["rows_per_s"]
            results[f"ratio {prefix}embedded/{other}"] = ratio
            print(f"{prefix}embedded vs {other:<16} {ratio:6.2f}x")
    return results


if __name__ == "__main__":
    sys.exit(main())
