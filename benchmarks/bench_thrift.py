"""happybase through the HBase Thrift gateway, against the region server's RPC and stream scans.

Data: the sample table of ``bench_server.py`` (``--rows`` rows, a 4-byte key,
an int column and a 100-byte string column, ``--regions`` regions),
flushed.  A Thrift gateway (``python -m storage.thrift``) and a region
server (``python -m storage.server``) run as child processes on loopback
over the same root, both read-only and without a block cache, so every
scan decodes every block.  Every case returns happybase-style rows
(``(key, {b"cf:q": value})``), the same scan, measured in the same run,
each the best of ``--repeat`` interleaved rounds:

* thrift: ``happybase.Table.scan(batch_size=1000)`` through the gateway;
* stream / rpc caching=1000: ``storage.connect("grpc://...")`` scans;
* embedded: ``Table.scan`` in this process (no server).

Then get latency (``Table.row`` of random keys, p50/p99) through happybase
and through the region server client, and a breakdown of where a thrift
scan's time goes: the engine's row scan, building the Thrift structs,
encoding them (the gateway's Cython binary encoder) and decoding them
(happybase's side), each timed alone in this process over the same rows.
Run from the repository root::

    python benchmarks/bench_thrift.py --rows 200000 --repeat 3
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
import time

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
for _path in (_ROOT, os.path.dirname(os.path.abspath(__file__))):
    if _path not in sys.path:
        sys.path.insert(0, _path)

import happybase  # noqa: E402

import storage  # noqa: E402
from bench_server import COLUMNS, TABLE, _interleaved, prepare_table  # noqa: E402
from storage.server.process import ServerProcess  # noqa: E402

__all__ = ["main", "run_benchmark"]


def _percentile(sorted_values: list[float], q: float) -> float:
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))]


def _latency(get, keys: list[bytes]) -> dict:
    times = []
    for key in keys:
        started = time.perf_counter()
        get(key)
        times.append(time.perf_counter() - started)
    times.sort()
    return {"p50_ms": _percentile(times, 0.50) * 1000, "p99_ms": _percentile(times, 0.99) * 1000,
            "gets": len(keys)}


def _breakdown(root: str) -> dict:
    """CPU seconds of each stage of a thrift scan over the whole table, timed alone in this process.

    The gateway's stages run per ``scannerGetList`` of 1000 rows, as in the
    gateway: pull rows from the engine scan, build the Thrift structs,
    encode the answer.  The client's stage decodes each answer and builds
    happybase's row dicts.
    """
    import itertools

    from thriftpy2.protocol.cybin import TCyBinaryProtocol
    from thriftpy2.transport.memory import TCyMemoryBuffer

    import Hbase_thrift  # happybase's copy of the IDL, as its client decodes answers
    from storage.thrift.convert import row_results
    from storage.thrift.idl import hbase

    out = dict.fromkeys(("engine scan to rows", "rows to Thrift structs", "encode (gateway)",
                         "decode + rows (happybase)"), 0.0)
    encoded = []
    rows = 0
    with storage.connect(root, read_only=True, block_cache_size=0) as conn:
        scan = conn.table(TABLE).scan(columns=COLUMNS, include_timestamp=True)
        while True:
            t0 = time.perf_counter()
            chunk = list(itertools.islice(scan, 1000))
            t1 = time.perf_counter()
            if not chunk:
                break
            structs = list(row_results(iter(chunk), sort_columns=False))
            t2 = time.perf_counter()
            buf = TCyMemoryBuffer()
            proto = TCyBinaryProtocol(buf)
            proto.write_message_begin("scannerGetList", 2, 1)
            hbase.Hbase.scannerGetList_result(success=structs).write(proto)
            proto.write_message_end()
            encoded.append(buf.getvalue())
            t3 = time.perf_counter()
            out["engine scan to rows"] += t1 - t0
            out["rows to Thrift structs"] += t2 - t1
            out["encode (gateway)"] += t3 - t2
            rows += len(chunk)
    started = time.perf_counter()
    for data in encoded:
        proto = TCyBinaryProtocol(TCyMemoryBuffer(data), decode_response=False)
        proto.read_message_begin()
        result = Hbase_thrift.Hbase.scannerGetList_result()
        result.read(proto)
        for item in result.success:  # happybase's make_row
            {name: cell.value for name, cell in item.columns.items()}
    out["decode + rows (happybase)"] = time.perf_counter() - started
    out["rows"] = rows
    out["answer bytes"] = sum(len(d) for d in encoded)
    return out


def run_benchmark(root: str, repeat: int, gets: int) -> dict:
    """Measure thrift, stream, rpc and embedded scans and get latency; print and return the figures."""
    results: dict = {}
    with ServerProcess(root, "--read-only", "--block-cache-size", "0", module="storage.thrift") as gateway, \
            ServerProcess(root, "--read-only", "--block-cache-size", "0") as server, \
            storage.connect(root, read_only=True, block_cache_size=0) as local, \
            storage.connect(server.location) as remote_conn:
        hb = happybase.Connection("127.0.0.1", gateway.port)
        hb_table = hb.table(TABLE)
        remote = remote_conn.table(TABLE)
        embedded = local.table(TABLE)

        def count(rows) -> tuple[int, int]:
            return sum(1 for _ in rows), 0

        cases = {
            "thrift batch_size=1000": lambda: count(hb_table.scan(columns=COLUMNS, batch_size=1000)),
            "stream": lambda: count(remote.scan(columns=COLUMNS, mode="stream")),
            "rpc caching=1000": lambda: count(remote.scan(columns=COLUMNS, mode="rpc", caching=1000)),
            "embedded": lambda: count(embedded.scan(columns=COLUMNS)),
        }
        print(f"{'scan (happybase rows)':<26} {'rows':>10} {'seconds':>8} {'rows/s':>12}")
        for name, (seconds, rows, _) in _interleaved(cases, repeat).items():
            results[name] = {"seconds": seconds, "rows": rows, "rows_per_s": rows / seconds}
            print(f"{name:<26} {rows:>10,} {seconds:>8.3f} {rows / seconds:>12,.0f}", flush=True)
        thrift = results["thrift batch_size=1000"]["rows_per_s"]
        for other in ("stream", "rpc caching=1000", "embedded"):
            ratio = results[other]["rows_per_s"] / thrift
            results[f"ratio {other}/thrift"] = ratio
            print(f"{other} vs thrift: {ratio:5.2f}x")

        n = results["embedded"]["rows"]
        rng = random.Random(7)
        keys = [rng.randrange(n).to_bytes(4, "big") for _ in range(gets)]
        hb_table.row(keys[0])
        remote.row(keys[0])
        results["get thrift"] = _latency(lambda k: hb_table.row(k, columns=COLUMNS), keys)
        results["get region server"] = _latency(lambda k: remote.row(k, columns=COLUMNS), keys)
        for name in ("get thrift", "get region server"):
            r = results[name]
            print(f"{name:<20} p50 {r['p50_ms']:.3f} ms  p99 {r['p99_ms']:.3f} ms  ({r['gets']} gets)")
        hb.close()

    stages = _breakdown(root)
    results["breakdown"] = stages
    end_to_end = results["thrift batch_size=1000"]["seconds"]
    gateway_side = sum(stages[k] for k in ("engine scan to rows", "rows to Thrift structs", "encode (gateway)"))
    client_side = stages["decode + rows (happybase)"]
    print(f"\nwhere a thrift scan's time goes ({stages['rows']:,} rows, {stages['answer bytes'] / 1e6:.1f} MB of answers;"
          f" end to end {end_to_end:.3f} s):")
    for name in ("engine scan to rows", "rows to Thrift structs", "encode (gateway)", "decode + rows (happybase)"):
        share = stages[name] / (client_side if "happybase" in name else gateway_side) * 100
        side = "client" if "happybase" in name else "gateway"
        print(f"  {name:<28} {stages[name]:7.3f} s  {share:5.1f}% of the {side}'s CPU")
    # happybase asks for the next batch only after handling the previous one, so the two sides take turns
    print(f"  gateway CPU {gateway_side:.3f} s + client CPU {client_side:.3f} s (they take turns: happybase asks for the"
          f" next batch after handling the last); the other {max(0.0, end_to_end - gateway_side - client_side):.3f} s"
          f" is sockets, round trips and the gateway's per-call work")
    results["gateway cpu seconds"] = gateway_side
    results["client cpu seconds"] = client_side
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--regions", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--gets", type=int, default=2000)
    parser.add_argument("--root", help="table root to reuse (default: a temporary directory, removed after)")
    parser.add_argument("--json", help="write the figures to this file")
    args = parser.parse_args(argv)
    root = args.root or tempfile.mkdtemp(prefix="bench-thrift-")
    try:
        prepare_table(root, args.rows, args.regions)
        results = run_benchmark(root, args.repeat, args.gets)
    finally:
        if not args.root:
            shutil.rmtree(root, ignore_errors=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
