"""happybase through the HBase Thrift gateway, against the region server's RPC and stream scans.

Data: the sample table of ``bench_server.py`` (``--rows`` rows, a 4-byte key,
an int column and a 100-byte string column, ``--regions`` regions),
flushed.  A Thrift gateway (``python -m storage.thrift``) and a region
server (``python -m storage.server``) run as child processes on loopback
over the same root, both read-only and without a block cache, so every
scan decodes every block.  Every case returns happybase-style rows
(``(key, {b"cf:q": value})``), the same scan, measured in the same run,
each the best of ``--repeat`` interleaved rounds:

* thrift: ``happybase.Table.scan(batch_size=1000)`` through the gateway,
  with its scanner read-ahead and without (``--no-prefetch``), and the same
  with a client that spends 10 ms on each batch (a sleep, standing for an
  application's own work), where the read-ahead overlaps the gateway's
  next batch with the client's work;
* stream / rpc caching=1000: ``storage.connect("grpc://...")`` scans;
* embedded: ``Table.scan`` in this process (no server).

Then get latency (``Table.row`` of random keys, p50/p99) through happybase
and through the region server client, and a breakdown of where a thrift
scan's time goes: the engine's row scan, building the Thrift structs,
encoding them (the gateway's Cython binary encoder) and decoding them
(happybase's side), each timed alone in this process over the same rows.
``--profile`` also prints the gateway's hottest functions (cProfile).
Run from the repository root::

    python benchmarks/bench_thrift.py --rows 200000 --repeat 3
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import shutil
import sys
import tempfile
import time

import happybase

from harness import COLUMNS, interleaved, prepare_table  # puts the checkout on sys.path

import storage
from storage.server.process import ServerProcess

TABLE = "bench_server"  # harness.prepare_table's table, shared with bench_server.py: one --root serves both

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
    gateway: the engine's scan produces cell batches, which become Thrift
    rows (row boundaries and column names by batch kernels, one struct per
    cell), which are encoded.  The client's stage decodes each answer and builds
    happybase's row dicts.
    """
    import itertools

    from thriftpy2.protocol.cybin import TCyBinaryProtocol
    from thriftpy2.transport.memory import TCyMemoryBuffer

    import Hbase_thrift  # happybase's copy of the IDL, as its client decodes answers
    from storage.thrift.convert import row_results
    from storage.thrift.idl import hbase

    out = dict.fromkeys(("engine scan (cell batches)", "batches to Thrift rows", "encode (gateway)",
                         "decode + rows (happybase)"), 0.0)
    encoded = []
    rows = 0

    def timed(batches):
        """The engine's batches, charging the time spent producing them to the engine stage."""
        while True:
            started = time.perf_counter()
            batch = next(batches, None)
            out["engine scan (cell batches)"] += time.perf_counter() - started
            if batch is None:
                return
            yield batch

    collect = gc.get_threshold()
    gc.set_threshold(100_000, 50, 100)  # as the gateway process runs (storage/thrift/cli.py)
    with storage.connect(root, read_only=True, block_cache_size=0) as conn:
        batches = conn.table(TABLE).scan_batches(columns=COLUMNS, output="cells")
        results = row_results(timed(batches), sort_columns=False)
        while True:
            engine_before = out["engine scan (cell batches)"]
            t1 = time.perf_counter()
            chunk = list(itertools.islice(results, 1000))
            t2 = time.perf_counter()
            if not chunk:
                break
            buf = TCyMemoryBuffer()
            proto = TCyBinaryProtocol(buf)
            proto.write_message_begin("scannerGetList", 2, 1)
            hbase.Hbase.scannerGetList_result(success=chunk).write(proto)
            proto.write_message_end()
            encoded.append(buf.getvalue())
            t3 = time.perf_counter()
            out["batches to Thrift rows"] += (t2 - t1) - (out["engine scan (cell batches)"] - engine_before)
            out["encode (gateway)"] += t3 - t2
            rows += len(chunk)
    gc.set_threshold(*collect)  # the client keeps Python's defaults
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


def _profile_gateway(root: str, top: int = 12) -> None:
    """cProfile of the gateway's side of a full scan: engine batches -> Thrift rows -> encoded answers."""
    import cProfile
    import itertools
    import pstats

    from thriftpy2.protocol.cybin import TCyBinaryProtocol
    from thriftpy2.transport.memory import TCyMemoryBuffer

    from storage.thrift.convert import row_results
    from storage.thrift.idl import hbase

    with storage.connect(root, read_only=True, block_cache_size=0) as conn:
        profiler = cProfile.Profile()
        profiler.enable()
        results = row_results(conn.table(TABLE).scan_batches(columns=COLUMNS, output="cells"), sort_columns=False)
        while True:
            chunk = list(itertools.islice(results, 1000))
            if not chunk:
                break
            hbase.Hbase.scannerGetList_result(success=chunk).write(TCyBinaryProtocol(TCyMemoryBuffer()))
        profiler.disable()
    print(f"\nthe gateway's hottest functions (cProfile, top {top} by own time):")
    pstats.Stats(profiler).sort_stats("tottime").print_stats(top)


def run_benchmark(root: str, repeat: int, gets: int) -> dict:
    """Measure thrift, stream, rpc and embedded scans and get latency; print and return the figures."""
    results: dict = {}
    with ServerProcess(root, "--read-only", "--block-cache-size", "0", module="storage.thrift") as gateway, \
            ServerProcess(root, "--read-only", "--block-cache-size", "0", "--no-prefetch",
                          module="storage.thrift") as plain_gateway, \
            ServerProcess(root, "--read-only", "--block-cache-size", "0") as server, \
            storage.connect(root, read_only=True, block_cache_size=0) as local, \
            storage.connect(server.location) as remote_conn:
        hb = happybase.Connection("127.0.0.1", gateway.port)
        hb_table = hb.table(TABLE)
        hb_plain = happybase.Connection("127.0.0.1", plain_gateway.port)
        remote = remote_conn.table(TABLE)
        embedded = local.table(TABLE)

        def count(rows) -> tuple[int, int]:
            return sum(1 for _ in rows), 0

        def busy_client(table) -> tuple[int, int]:
            """A client that works 10 ms on each batch of 1000 rows (a sleep: it uses no CPU),
            as an application processing its rows would; read-ahead overlaps the gateway's
            next batch with it."""
            n = 0
            for n, _ in enumerate(table.scan(columns=COLUMNS, batch_size=1000), 1):
                if n % 1000 == 0:
                    time.sleep(0.01)
            return n, 0

        cases = {
            "thrift batch_size=1000": lambda: count(hb_table.scan(columns=COLUMNS, batch_size=1000)),
            "thrift batch_size=1000 no prefetch": lambda: count(
                hb_plain.table(TABLE).scan(columns=COLUMNS, batch_size=1000)),
            "thrift, client busy 10 ms/batch": lambda: busy_client(hb_table),
            "thrift, client busy 10 ms/batch, no prefetch": lambda: busy_client(hb_plain.table(TABLE)),
            "stream": lambda: count(remote.scan(columns=COLUMNS, mode="stream")),
            "rpc caching=1000": lambda: count(remote.scan(columns=COLUMNS, mode="rpc", caching=1000)),
            "embedded": lambda: count(embedded.scan(columns=COLUMNS)),
        }
        print(f"{'scan (happybase rows)':<46} {'rows':>10} {'seconds':>8} {'rows/s':>12}")
        for name, timed in interleaved(cases, repeat).items():
            seconds, rows = timed.wall, timed.result[0]
            results[name] = {"seconds": seconds, "rows": rows, "rows_per_s": rows / seconds}
            print(f"{name:<46} {rows:>10,} {seconds:>8.3f} {rows / seconds:>12,.0f}", flush=True)
        thrift = results["thrift batch_size=1000"]["rows_per_s"]
        for other in ("thrift batch_size=1000 no prefetch", "stream", "rpc caching=1000", "embedded"):
            ratio = results[other]["rows_per_s"] / thrift
            results[f"ratio {other}/thrift"] = ratio
            print(f"{other} vs thrift: {ratio:5.2f}x")
        busy = (results["thrift, client busy 10 ms/batch, no prefetch"]["seconds"]
                / results["thrift, client busy 10 ms/batch"]["seconds"])
        results["ratio busy client: no prefetch time / prefetch time"] = busy
        print(f"busy client: read-ahead saves {(1 - 1 / busy) * 100:.0f}% of the time ({busy:.2f}x)")

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
        hb_plain.close()

    stages = _breakdown(root)
    results["breakdown"] = stages
    end_to_end = results["thrift batch_size=1000"]["seconds"]
    gateway_side = sum(stages[k] for k in ("engine scan (cell batches)", "batches to Thrift rows", "encode (gateway)"))
    client_side = stages["decode + rows (happybase)"]
    print(f"\nwhere a thrift scan's time goes ({stages['rows']:,} rows, {stages['answer bytes'] / 1e6:.1f} MB of answers;"
          f" end to end {end_to_end:.3f} s):")
    for name in ("engine scan (cell batches)", "batches to Thrift rows", "encode (gateway)", "decode + rows (happybase)"):
        share = stages[name] / (client_side if "happybase" in name else gateway_side) * 100
        side = "client" if "happybase" in name else "gateway"
        print(f"  {name:<28} {stages[name]:7.3f} s  {share:5.1f}% of the {side}'s CPU")
    # happybase asks for the next batch only after handling the previous one, so the two sides take turns
    # happybase asks for the next batch only after handling the last one: without read-ahead the
    # two sides take turns (end to end ~ the sum), with it they overlap (~ the larger of the two)
    print(f"  gateway CPU {gateway_side:.3f} s, client CPU {client_side:.3f} s; end to end without read-ahead"
          f" {results['thrift batch_size=1000 no prefetch']['seconds']:.3f} s, with {end_to_end:.3f} s")
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
    parser.add_argument("--profile", action="store_true", help="also print a cProfile of the gateway's side of a scan")
    args = parser.parse_args(argv)
    root = args.root or tempfile.mkdtemp(prefix="bench-thrift-")
    try:
        prepare_table(root, args.rows, args.regions)
        results = run_benchmark(root, args.repeat, args.gets)
        if args.profile:
            _profile_gateway(root)
    finally:
        if not args.root:
            shutil.rmtree(root, ignore_errors=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
