"""``regionscan pe``: performance evaluation, modelled on ``hbase pe --nomapred``.

Usage follows hbase pe: ``regionscan pe [options] COMMAND [COMMAND ...] [CLIENTS]``,
for example ``regionscan pe --rows=100000 --presplit=10 sequentialWrite 4`` or
``regionscan pe randomRead 10``.  Several commands run one after the other
on the same table.  Clients are threads of this process sharing one
connection (hbase pe's ``--nomapred`` and ``--oneCon`` modes);
``--nomapred=false`` runs each client as a Spark task instead (the same as
``regionscan pe-distributed``, hbase pe's MapReduce mode).

Write commands create the table when it is missing (and recreate it when
``--presplit`` or the family settings differ from an existing table's, as
hbase pe does for splits).  Read commands on a missing table first load it
the way ``sequentialWrite`` would for all clients, then flush and
major-compact it, so a read benchmark starts from one store file per region.

The report gives each client's time, rows/s, MB/s and latency percentiles,
then hbase pe's "Summary of timings (ms)" and the aggregate.  ``--json``
writes every figure, ``--chart`` draws them (see :mod:`jobs.pe_chart`).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
import zlib
from typing import Sequence

import numpy as np

import storage

from .pe_chart import write_chart
from .pe_setup import (
    add_arguments,
    create,
    data_table,
    family_options,
    load_for_reads,
    load_meta_for_reads,
    meta_table,
    options_from_args,
    split_keys,
)
from .pe_stats import ClientResult, CommandResult, format_command
from .pe_workloads import (
    COMMANDS,
    FAMILY,
    PeOptions,
    run_client,
)

__all__ = ["run", "main", "run_commands"]


# -- running --------------------------------------------------------------
def _run_clients(command, table, opts: PeOptions) -> CommandResult:
    """Run ``opts.clients`` threads of ``command`` together and gather their results."""
    # Each command draws its own streams: with one --seed, a read must not replay the very
    # values and keys the write before it drew.
    entropy = None if opts.seed is None else [opts.seed, zlib.crc32(command.name.encode())]
    seeds = np.random.SeedSequence(entropy).spawn(opts.clients)
    finished: list = [None] * opts.clients
    errors: list = []
    gate = threading.Barrier(opts.clients)

    def work(i: int) -> None:
        try:
            gate.wait()
            finished[i] = run_client(command, table, opts, i, np.random.default_rng(seeds[i]))
        except BaseException as exc:  # re-raised in the calling thread below
            errors.append(exc)
            gate.abort()

    if opts.clients == 1:
        work(0)
    else:
        threads = [threading.Thread(target=work, args=(i,), name=f"pe-client-{i}") for i in range(opts.clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    real = [e for e in errors if not isinstance(e, threading.BrokenBarrierError)]
    if real or errors:
        raise (real or errors)[0]
    clients = [
        ClientResult(c.client, c.start_row, c.done, c.rows, c.nbytes, c.t_end - c.t_begin, c.latencies[: c.done])
        for c in finished
    ]
    wall = max(c.t_end for c in finished) - min(c.t_begin for c in finished)
    result = CommandResult(command.name, command.test_name, clients, wall)
    if command.name in ("scan", "reverseScan"):
        short = [c for c in finished if c.rows < c.ops]
        if short:
            result.notes.append(
                f"{len(short)} scanner(s) ran out of rows before --rows operations (is the table loaded?)"
            )
    return result


def run_commands(conn: storage.Connection, commands: Sequence[str], opts: PeOptions, *,
                 block_size_given: bool = False, flush: bool = False, compact: bool = False,
                 out=None) -> list[CommandResult]:
    """Run ``commands`` in order on ``conn``; print each report to ``out`` and return the results."""
    out = out or sys.stdout

    def say(line: str) -> None:
        print(line, file=out)

    results = []
    for name in commands:
        command = COMMANDS[name]
        if command.kind == "write":
            table = data_table(conn, opts, say)
        elif command.kind == "read":
            if conn.is_table_available(opts.table):
                table = conn.table(opts.table)
            else:
                table = create(conn, opts.table, FAMILY, family_options(opts, opts.block_size),
                                split_keys(opts), opts)
                load_for_reads(table, opts, say)
        elif command.kind == "meta_write":
            table = meta_table(conn, opts, block_size_given)
        else:
            missing = not conn.is_table_available(opts.meta_table)
            table = meta_table(conn, opts, block_size_given)
            if missing:
                load_meta_for_reads(table, opts, say)
        run_opts = opts.for_kind(command.kind)
        ops = run_opts.ops_per_client
        if name == "filterScan" and ops * opts.total_rows > 50_000_000:
            say(f"[{command.test_name}] each operation scans the whole table ({opts.total_rows:,} rows) and there "
                f"are {ops:,} per client: this could take a very long time (see --sampleRate)")
        say(f"[{command.test_name}] starting: {opts.clients} client(s) x {run_opts.ops_label(name)} on "
            f"{table.name} ({len(table.regions())} regions)")
        result = _run_clients(command, table, run_opts)
        if command.kind in ("write", "meta_write") and (flush or compact):
            t0 = time.perf_counter()
            if compact:
                table.compact(major=True)
            else:
                table.flush()
            result.notes.append(f"{'flush + major compaction' if compact else 'flush'} after the run took "
                                f"{time.perf_counter() - t0:.3f}s")
        say(format_command(result))
        results.append(result)
    return results


def _options_dict(opts: PeOptions, root: str) -> dict:
    d = {k: getattr(opts, k) for k in opts.__dataclass_fields__}
    d["root"] = root
    d["total_rows"] = opts.total_rows
    d["ops_per_client"] = opts.ops_per_client
    return d


def run(args: argparse.Namespace) -> int:
    """Entry point of ``regionscan pe``; ``--nomapred=false`` runs the clients as Spark tasks."""
    if args.nomapred is False:
        from . import pe_distributed  # Spark is imported only for the distributed mode

        return pe_distributed.run(args)
    commands, opts = options_from_args(args)
    root = args.root
    where = os.path.abspath(root) if "://" not in root else root
    print(f"regionscan pe: {' '.join(commands)} with {opts.clients} client(s), {opts.rows:,} rows each, "
          f"valueSize {opts.value_size}, table {opts.table!r} under {where}")
    conn = storage.connect(root)
    try:
        results = run_commands(conn, commands, opts, block_size_given=args.blockSize is not None,
                               flush=args.flush, compact=args.compact)
    finally:
        conn.close()
    if args.json:
        doc = {"tool": "regionscan pe", "options": _options_dict(opts, root), "results": [r.to_dict() for r in results]}
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(doc, f, indent=2)
        print(f"results written to {args.json}")
    if args.chart:
        write_chart(results, args.chart)
        print(f"chart written to {args.chart}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="regionscan pe", description="performance evaluation, as hbase pe --nomapred")
    add_arguments(parser)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run pe as its own program (``python -m jobs.pe``), with the CLI's error handling."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(run(args) or 0)
    except ValueError as exc:  # InvalidArgument: a clear message, exit code 2 as argparse's errors
        print(f"regionscan pe: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
