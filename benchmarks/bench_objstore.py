"""Object-store benchmark: the same table on a local S3-compatible server and on local disk.

Data: the sample table of ``regionscan demo`` (``--rows`` rows, 1M by
default: a 4-byte key, ``cf:n`` and a 100-byte ``cf:s``) in ``--regions``
regions, flushed and major-compacted, written on local disk.  Its files are
then uploaded byte for byte to a bucket of a local S3 server (moto's server
mode, a child process on 127.0.0.1), so both roots hold the same table.

Per root it measures (best of ``--repeat``, a fresh read-only connection
each run, so the block cache starts empty):

- open: opening the table (manifests, then each store file's trailer and
  meta sections by byte range);
- full scan: ``scan_batches`` of every column;
- count: the RowCounter scan (``FirstKeyOnlyFilter`` + ``KeyOnlyFilter``);
- repeat: the full scan again on the same connection (the block cache
  serves it);

with rows/s and the read requests and bytes each scan made (from the scan
metrics).  The S3 figures include moto's own cost: a Python HTTP server that
reads the WHOLE object for every ranged GET and then slices it, so a request
costs time in proportion to the store file's size, not the range's.  That is
why the defaults use 16 regions (small files) and 1 MiB blocks (few
requests); the figures bound what HTTP round trips cost here, not what AWS
costs.
Run from the repository root::

    python benchmarks/bench_objstore.py --rows 1000000 --repeat 3
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time

from harness import COUNT_FILTER, ROOT  # puts the checkout on sys.path

sys.path.insert(0, os.path.join(ROOT, "tests"))  # the local S3 server the tests use

import storage  # noqa: E402
from jobs.demo import load_sample_table  # noqa: E402
from s3_server import S3Server  # noqa: E402
from storage.scanner.metrics import ScanMetrics  # noqa: E402



def _build(local_root: str, rows: int, regions: int, block_size: int) -> None:
    with storage.connect(local_root) as conn:
        table = load_sample_table(conn, "bench", rows, regions, block_size=block_size)
        table.flush()
        table.compact(major=True)


def _upload(local_root: str, server: S3Server, bucket: str, prefix: str) -> int:
    client = server.client()
    total = 0
    for folder, _dirs, files in os.walk(local_root):
        for name in files:
            if name == ".lock":
                continue
            path = os.path.join(folder, name)
            key = f"{prefix}/{os.path.relpath(path, local_root)}"
            with open(path, "rb") as f:
                data = f.read()
            client.put_object(Bucket=bucket, Key=key, Body=data)
            total += len(data)
    return total


def _scan(table, flt=None) -> tuple[float, int, ScanMetrics]:
    metrics = ScanMetrics()
    start = time.perf_counter()
    rows = sum(b.num_rows for b in table.scan_batches(filter=flt, metrics=metrics))
    return time.perf_counter() - start, rows, metrics


def _measure(root: str, repeat: int) -> dict:
    best: dict[str, tuple] = {}

    def keep(name, seconds, rows, metrics):
        if name not in best or seconds < best[name][0]:
            best[name] = (seconds, rows, metrics)

    flt = COUNT_FILTER
    for _ in range(repeat):
        start = time.perf_counter()
        conn = storage.connect(root, read_only=True)
        table = conn.table("bench")
        opened = time.perf_counter() - start
        counters = table.read_counters()
        keep("open", opened, 0, _open_metrics(counters))
        keep("full scan", *_scan(table))
        conn.close()
        conn = storage.connect(root, read_only=True)
        table = conn.table("bench")
        keep("count", *_scan(table, flt))
        keep("repeat (cached)", *_scan(table))
        conn.close()
    return best


def _open_metrics(counters: dict) -> ScanMetrics:
    m = ScanMetrics()
    m.read_requests = counters.get("reads", 0)
    m.bytes_read_from_disk = counters.get("bytes_read", 0)
    return m


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--regions", type=int, default=16)
    parser.add_argument("--block-size", type=int, default=1 << 20,
                        help="store-file block size (default 1 MiB: one ranged GET per block)")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    work = tempfile.mkdtemp(prefix="bench-objstore-")
    server = S3Server().start()
    try:
        local_root = os.path.join(work, "local")
        start = time.perf_counter()
        _build(local_root, args.rows, args.regions, args.block_size)
        print(f"built {args.rows:,} rows in {args.regions} regions ({args.block_size:,}-byte blocks) on local disk "
              f"in {time.perf_counter() - start:.1f} s")
        bucket = server.new_bucket()
        nbytes = _upload(local_root, server, bucket, "tables")
        s3_root = server.root("tables", bucket=bucket)
        print(f"uploaded {nbytes / 1e6:.1f} MB to s3://{bucket}/tables on {server.endpoint}")
        results = {"local disk": _measure(local_root, args.repeat), "local S3 server": _measure(s3_root, args.repeat)}
        print()
        print(f"{'root':<16} {'step':<16} {'seconds':>8} {'rows/s':>12} {'requests':>9} {'MB read':>8}")
        for where, best in results.items():
            for step, (seconds, rows, m) in best.items():
                rate = f"{rows / seconds:,.0f}" if rows else "-"
                print(f"{where:<16} {step:<16} {seconds:8.3f} {rate:>12} {m.read_requests:>9} "
                      f"{m.bytes_read_from_disk / 1e6:8.1f}")
        print()
        for step in ("open", "full scan", "count", "repeat (cached)"):
            local, remote = results["local disk"][step][0], results["local S3 server"][step][0]
            print(f"{step:<16} S3 / local time: {remote / local:6.2f}x")
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
