"""pe-distributed: ``regionscan pe`` with each client a Spark task, as hbase pe's MapReduce mode.

    regionscan pe-distributed [pe options] COMMAND [COMMAND ...] [CLIENTS] [--master M]
    spark-submit jobs/pe_distributed.py --root R randomRead 8

Takes every option of ``regionscan pe`` (hbase pe's names) and runs the
same client loops (:mod:`jobs.pe_workloads`), but client *i* runs in Spark
task *i* instead of a thread: with 8 clients on 2 executors of 4 cores
they run side by side in separate processes, as hbase pe's mappers do.
The driver prepares the table (a read command on a missing table first
loads, flushes and compacts it, as ``pe`` does) and gathers every
client's timings and latencies into pe's report, ``--json`` and
``--chart``.

Read commands read the table's files directly (each task opens the root
read-only), so any number of processes can read at once.  Write commands
need many writers, and a table folder has one writer process at a time:
give ``--root grpc://host:port`` (a ``regionscan serve`` region server)
and the tasks write through it.  The command's wall time spans the first
task's start to the last task's end by the wall clock, so on a cluster
it is as good as the nodes' clock sync.
"""

if __name__ == "__main__":  # spark-submit jobs/pe_distributed.py: make the repository importable
    import os as _os
    import sys as _sys

    _here = _os.path.dirname(_os.path.abspath(__file__))
    _sys.path[:] = [p for p in _sys.path if _os.path.abspath(p or ".") != _here]
    _sys.path.insert(0, _os.path.dirname(_here))

import argparse
import copy
import json
import os
import sys
import time
import zlib
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

import storage
from connector.scanning import is_remote_root
from jobs import pe_setup
from jobs._args import guarded, script_main
from jobs._progress import Progress
from jobs._spark import add_spark_arguments, parse_conf_pairs, run_tasks, spark_session
from jobs.pe_chart import write_chart
from jobs.pe_stats import ClientResult, CommandResult, format_command
from jobs.pe_workloads import COMMANDS, FAMILY, PeOptions, run_client
from storage import InvalidArgument

__all__ = ["add_arguments", "run", "main", "run_distributed", "ClientRun"]


@dataclass
class ClientRun:
    """What one client task measured (wall-clock bounds for the command's wall time)."""

    client: int
    start_row: int
    ops: int
    rows: int
    nbytes: int
    elapsed_ns: int
    wall_begin_ns: int
    wall_end_ns: int
    latencies_ns: np.ndarray = field(repr=False)


@dataclass(frozen=True)
class _ClientTask:
    """The task: one pe client of one command against the table under ``root``."""

    root: str
    command: str
    table: str
    opts: PeOptions
    read_only: bool

    def __call__(self, item: tuple[int, Any]) -> ClientRun:
        client, seed = item
        conn = storage.connect(self.root, read_only=True) if self.read_only else storage.connect(self.root)
        try:
            table = conn.table(self.table)
            wall0, perf0 = time.time_ns(), time.perf_counter_ns()
            c = run_client(COMMANDS[self.command], table, self.opts, client, np.random.default_rng(seed))
        finally:
            conn.close()
        # the client timed itself with perf_counter_ns: place its span on the wall clock
        begin = wall0 + (c.t_begin - perf0)
        end = wall0 + (c.t_end - perf0)
        return ClientRun(c.client, c.start_row, c.done, c.rows, c.nbytes, c.t_end - c.t_begin, begin, end,
                         c.latencies[: c.done].copy())


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """pe's options plus ``--master`` and ``--conf``."""
    pe_setup.add_arguments(parser, tasks=True)
    add_spark_arguments(parser)


def _check_writers(root: str, command: str) -> None:
    """A write command needs a region server: its client tasks write from many processes at once."""
    if COMMANDS[command].kind in ("write", "meta_write") and not is_remote_root(root):
        raise InvalidArgument(
            f"{command} writes from many processes at once, but a table folder has one writer process at a time: "
            "give --root grpc://host:port (a regionscan serve region server), or run it with regionscan pe (threads)")


def _prepare(root: str, command: str, opts: PeOptions, args: argparse.Namespace, say) -> str:
    """Create or load what the command needs (on the driver); return the table it runs on."""
    kind = COMMANDS[command].kind
    _check_writers(root, command)
    conn = storage.connect(root)
    try:
        if kind == "write":
            return pe_setup.data_table(conn, opts, say).name
        if kind == "meta_write":
            return pe_setup.meta_table(conn, opts, args.blockSize is not None).name
        if kind == "read":
            if not conn.is_table_available(opts.table):
                table = pe_setup.create(conn, opts.table, FAMILY, pe_setup.family_options(opts, opts.block_size),
                                   pe_setup.split_keys(opts), opts)
                pe_setup.load_for_reads(table, opts, say)
            return opts.table
        missing = not conn.is_table_available(opts.meta_table)
        table = pe_setup.meta_table(conn, opts, args.blockSize is not None)
        if missing:
            pe_setup.load_meta_for_reads(table, opts, say)
        return opts.meta_table
    finally:
        conn.close()  # readers in other processes open it read-only; the lock must not outlive this


def run_distributed(spark: Any, root: str, commands: Sequence[str], opts: PeOptions, args: argparse.Namespace,
                    out=None) -> list[CommandResult]:
    """Run ``commands`` in order, each as ``opts.clients`` Spark tasks; print and return the results."""
    out = out or sys.stdout

    def say(line: str) -> None:
        print(line, file=out)

    results = []
    for name in commands:
        command = COMMANDS[name]
        table = _prepare(root, name, opts, args, say)
        run_opts = opts.for_kind(command.kind)
        entropy = None if opts.seed is None else [opts.seed, zlib.crc32(command.name.encode())]
        seeds = np.random.SeedSequence(entropy).spawn(opts.clients)
        say(f"[{command.test_name}] starting: {opts.clients} client task(s) x {run_opts.ops_label(name)} on "
            f"{table} (Spark master {spark.sparkContext.master}, default parallelism "
            f"{spark.sparkContext.defaultParallelism})")
        read_only = command.kind in ("read", "meta_read") and not is_remote_root(root)
        task = _ClientTask(root, name, table, run_opts, read_only)
        progress = Progress(f"[{command.test_name}]", total_tasks=opts.clients, unit="rows")
        runs = run_tasks(spark, task, list(enumerate(seeds)), progress, description=f"pe {name}")
        progress.close()
        clients = [ClientResult(r.client, r.start_row, r.ops, r.rows, r.nbytes, r.elapsed_ns, r.latencies_ns)
                   for r in runs]
        wall = max(r.wall_end_ns for r in runs) - min(r.wall_begin_ns for r in runs)
        result = CommandResult(command.name, command.test_name, clients, wall)
        result.notes.append(f"clients ran as Spark tasks (master {spark.sparkContext.master})")
        say(format_command(result))
        results.append(result)
    return results


@guarded("pe-distributed")
def run(args: argparse.Namespace) -> int:
    """Entry point of ``regionscan pe-distributed``."""
    args = copy.copy(args)
    args.nomapred = True  # pe's validation rejects MapReduce mode; here it is the point
    args.oneCon = True  # each task has a connection of its own: hbase pe's oneCon does not apply
    commands, opts = pe_setup.options_from_args(args)
    root = args.root
    for name in commands:
        _check_writers(root, name)  # before Spark starts: it takes tens of seconds to say no otherwise
    where = os.path.abspath(root) if "://" not in root else root
    print(f"regionscan pe-distributed: {' '.join(commands)} with {opts.clients} client task(s), "
          f"{opts.rows:,} rows each, valueSize {opts.value_size}, table {opts.table!r} under {where}")
    # getattr: pe's own parser (a --nomapred=false hook) has no --master / --conf
    master, conf = getattr(args, "master", None), parse_conf_pairs(getattr(args, "conf", None))
    with spark_session("regionscan pe-distributed", master, conf, verbose=getattr(args, "verbose", False)) as spark:
        results = run_distributed(spark, root, commands, opts, args)
    if args.json:
        options = {k: getattr(opts, k) for k in opts.__dataclass_fields__}
        options.update(root=root, total_rows=opts.total_rows, ops_per_client=opts.ops_per_client, mode="spark tasks")
        doc = {"tool": "regionscan pe-distributed", "options": options, "results": [r.to_dict() for r in results]}
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump(doc, handle, indent=2)
        print(f"results written to {args.json}")
    if args.chart:
        write_chart(results, args.chart)
        print(f"chart written to {args.chart}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``spark-submit jobs/pe_distributed.py ...``"""
    return script_main(sys.modules[__name__], "pe-distributed", argv)


if __name__ == "__main__":
    from jobs.pe_distributed import main as _main  # run under the package name, so tasks pickle by reference

    sys.exit(_main())
