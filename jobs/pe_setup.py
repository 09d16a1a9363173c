"""What ``regionscan pe`` and its distributed mode share: hbase pe's options and
their parsing, and the benchmark tables (created, recreated when their settings
differ, and loaded for read commands)."""

from __future__ import annotations

import argparse
import time
from typing import Sequence

import numpy as np

import storage
from serde.charts import check_chart_path
from storage import FamilySettings, InvalidArgument
from storage.engine import validate_table_name

from ._writable import check_writable_file, check_writable_folder
from .pe_workloads import (
    COLUMN,
    COMMANDS,
    FAMILY,
    META_FAMILY,
    PeOptions,
    format_row,
    meta_row,
    value_offsets,
    value_pool,
)

__all__ = ["add_arguments", "options_from_args", "parse_command_tokens"]


_COMPRESSIONS = ("NONE", "LZ4", "ZSTD")
_BLOOMS = ("ROW", "NONE")
_META_BLOCK_SIZE = 8192  # hbase:meta's block size


def _bool_option(parser: argparse.ArgumentParser, name: str, default: bool, help_text: str) -> None:
    """A boolean option spelled as hbase pe spells them: ``--opt``, ``--opt=true`` or ``--opt=false``.

    The ``=value`` forms are registered as option strings of their own, so a
    bare ``--opt`` never swallows the command that follows it.
    """
    dest = name.lstrip("-")
    parser.add_argument(name, dest=dest, action="store_const", const=True, default=default, help=help_text)
    for word, value in (("true", True), ("false", False)):
        for spelling in (word, word.capitalize(), word.upper()):
            parser.add_argument(f"{name}={spelling}", dest=dest, action="store_const", const=value,
                                help=argparse.SUPPRESS)


def add_arguments(parser: argparse.ArgumentParser, tasks: bool = False) -> None:
    """Add pe's options (hbase pe's names) to ``parser``; ``tasks``: clients are Spark tasks (pe-distributed)."""
    client = "client Spark tasks" if tasks else "client threads"
    names = ", ".join(COMMANDS)
    parser.add_argument(
        "commands", nargs="+", metavar="COMMAND",
        help=f"one or more of: {names}; a trailing number is the client count, as in 'pe randomRead 10'",
    )
    parser.add_argument("--rows", type=int, default=100_000, help="rows (operations) per client (default 100000)")
    parser.add_argument("--valueSize", type=int, default=1024, help="bytes per value (default 1024)")
    parser.add_argument("--presplit", type=int, default=None,
                        help="regions to pre-split a new table into (default: 1 region)")
    parser.add_argument("--caching", type=int, default=30, help="scanner caching: rows per scanner batch (default 30)")
    parser.add_argument("--blockSize", type=int, default=None, help="store file block size in bytes (default 65536)")
    parser.add_argument("--compress", default="NONE", help="store file compression: NONE, LZ4 or ZSTD")
    parser.add_argument("--bloomFilter", default="ROW", help="row bloom filter: ROW or NONE")
    parser.add_argument("--clients", type=int, default=None, help=f"{client} (or a trailing number)")
    _bool_option(parser, "--filterAll", False,
                 "add a filter that drops every row server-side to each read (hbase's FilterAllFilter)")
    parser.add_argument("--sampleRate", type=float, default=1.0,
                        help="fraction of --rows each client operates on (default 1.0)")
    _bool_option(parser, "--autoFlush", False, "send each put on its own instead of buffering them (=true/=false)")
    _bool_option(parser, "--writeToWAL", True,
                 "sync the write-ahead log on each write of a new table (default true; =false to skip syncs)")
    parser.add_argument("--bufferSize", type=int, default=2 << 20, help="write buffer in bytes (default 2 MiB)")
    parser.add_argument("--table", default="TestTable", help="table name (default TestTable)")
    parser.add_argument("--metaTable", default=None, help="meta-like table of the meta commands (default <table>-meta)")
    parser.add_argument("--root", default="./regionscan-data", help="where the tables live (path or URI)")
    parser.add_argument("--flush", action="store_true", help="flush memstores to store files after write commands")
    parser.add_argument("--compact", action="store_true",
                        help="flush and major-compact after write commands (one store file per region)")
    parser.add_argument("--seed", type=int, default=None, help="random seed, for repeatable key sequences")
    parser.add_argument("--json", default=None, metavar="PATH", help="write the results as JSON to PATH")
    parser.add_argument("--chart", default=None, metavar="PATH",
                        help="draw latency percentiles and throughput to PATH: .png, .svg or .html (needs matplotlib)")
    _bool_option(parser, "--nomapred", True,
                 "ignored: every client is a Spark task" if tasks else
                 "true (default): clients are threads of this process; false: each client a Spark task "
                 "(as pe-distributed)")
    _bool_option(parser, "--oneCon", True,
                 "ignored: each client task opens its own connection" if tasks else
                 "accepted for hbase pe compatibility: the client threads always share one connection "
                 "(=false is refused)")
    parser.add_argument("--multiGet", type=int, default=0, metavar="N",
                        help="randomRead: get the rows in batches of N keys, one multi-get per operation "
                             "(default 0: one get per operation)")
    parser.add_argument("--columns", type=int, default=1,
                        help="columns per row: only 1 (info:0) is supported, as hbase pe's default")


def parse_command_tokens(tokens: Sequence[str], clients: int | None) -> tuple[list[str], int]:
    """Split positional tokens into commands and the client count (a trailing number)."""
    tokens = list(tokens)
    count = None
    if tokens and tokens[-1].lstrip("-").isdigit():
        count = int(tokens.pop())
        if clients is not None and clients != count:
            raise InvalidArgument(f"--clients={clients} disagrees with the trailing client count {count}")
    if count is None:
        count = 1 if clients is None else clients
    if not tokens:
        raise InvalidArgument(f"COMMAND missing: give one of {', '.join(COMMANDS)}")
    by_lower = {name.lower(): name for name in COMMANDS}
    commands = []
    for tok in tokens:
        name = by_lower.get(tok.lower())
        if name is None:
            raise InvalidArgument(f"unknown command {tok!r}: expected one of {', '.join(COMMANDS)}")
        commands.append(name)
    if count < 1:
        raise InvalidArgument(f"client count must be a positive integer, got {count}")
    return commands, count


def options_from_args(args: argparse.Namespace) -> tuple[list[str], PeOptions]:
    """Validate the parsed arguments; each error names its option."""
    commands, clients = parse_command_tokens(args.commands, args.clients)
    if args.rows < 1:
        raise InvalidArgument(f"--rows must be a positive integer, got {args.rows}")
    if args.valueSize < 1:
        raise InvalidArgument(f"--valueSize must be a positive integer, got {args.valueSize}")
    if args.presplit is not None and args.presplit < 0:
        raise InvalidArgument(f"--presplit must be 0 or more regions, got {args.presplit}")
    if args.presplit is not None and args.presplit > args.rows * clients:
        raise InvalidArgument(f"--presplit={args.presplit} is more regions than rows ({args.rows * clients})")
    if args.caching < 1:
        raise InvalidArgument(f"--caching must be a positive integer, got {args.caching}")
    if args.blockSize is not None and args.blockSize < 256:
        raise InvalidArgument(f"--blockSize must be at least 256 bytes, got {args.blockSize}")
    compress = str(args.compress).upper()
    if compress not in _COMPRESSIONS:
        raise InvalidArgument(f"--compress must be one of {', '.join(_COMPRESSIONS)}, got {args.compress!r}")
    bloom = str(args.bloomFilter).upper()
    if bloom not in _BLOOMS:
        raise InvalidArgument(f"--bloomFilter must be ROW or NONE, got {args.bloomFilter!r}")
    if not 0.0 < args.sampleRate <= 1.0:
        raise InvalidArgument(f"--sampleRate must be in (0, 1], got {args.sampleRate}")
    if args.bufferSize < 1:
        raise InvalidArgument(f"--bufferSize must be a positive integer, got {args.bufferSize}")
    for option, name in (("--table", args.table), ("--metaTable", args.metaTable)):
        if name is not None:
            try:
                validate_table_name(name)
            except InvalidArgument as exc:
                raise InvalidArgument(f"{option}: {exc}") from None
    if args.oneCon is False and args.nomapred is not False:
        raise InvalidArgument("--oneCon=false is not supported: the client threads share one connection "
                              "(a connection is thread-safe); pe-distributed runs each client in a process of its own")
    if args.columns != 1:
        raise InvalidArgument(f"--columns={args.columns} is not supported: pe writes and reads one column (info:0) "
                              "per row; use --valueSize to change the bytes per row")
    if args.multiGet < 0:
        raise InvalidArgument(f"--multiGet must be 0 or a positive integer, got {args.multiGet}")
    if args.multiGet and "randomRead" not in commands:
        raise InvalidArgument(f"--multiGet applies to randomRead only, not to {', '.join(commands)}")
    if args.multiGet and args.filterAll:
        raise InvalidArgument("--multiGet cannot be combined with --filterAll: a multi-get takes no filter")
    check_writable_folder(args.root, "--root")  # the tables go there: a file in the way, a read-only place
    for option, path in (("--json", args.json), ("--chart", args.chart)):
        check_writable_file(path, option)  # before the run: its results must not be lost
    if args.chart is not None:
        check_chart_path(args.chart, "--chart")  # before the run, not after it
    opts = PeOptions(
        table=args.table,
        meta_table=args.metaTable or f"{args.table}-meta",
        rows=args.rows,
        value_size=args.valueSize,
        presplit=args.presplit or 0,
        caching=args.caching,
        block_size=args.blockSize or 65536,
        compress=compress,
        bloom_filter=bloom,
        clients=clients,
        filter_all=bool(args.filterAll),
        sample_rate=args.sampleRate,
        auto_flush=bool(args.autoFlush),
        write_to_wal=bool(args.writeToWAL),
        buffer_size=args.bufferSize,
        seed=args.seed,
        multi_get=args.multiGet,
    )
    return commands, opts


def family_options(opts: PeOptions, block_size: int) -> dict:
    return {
        "max_versions": 1,
        "block_size": block_size,
        "compression": opts.compress,
        "bloom_filter": opts.bloom_filter,
    }


def split_keys(opts: PeOptions) -> list[bytes]:
    """hbase pe's pre-split points: ``format(jump * k)`` with ``jump = total rows / regions``."""
    if opts.presplit <= 1:
        return []
    jump = opts.total_rows // opts.presplit
    return [format_row(jump * k) for k in range(1, opts.presplit)]


def create(conn: storage.Connection, name: str, family: str, family_opts: dict, split_keys: list[bytes],
            opts: PeOptions) -> storage.Table:
    return conn.create_table(
        name, {family: family_opts}, split_keys=split_keys or None,
        settings={"wal_sync": "each" if opts.write_to_wal else "none"},
    )


def _settings_differ(table: storage.Table, family: str, wanted: dict) -> list[str]:
    current = table.families().get(family.encode())
    if current is None:
        return [f"no family {family!r}"]
    wanted_settings = FamilySettings.from_options(wanted, family).to_dict()
    return [f"{k}={current.get(k)!r} (wanted {v!r})" for k, v in wanted_settings.items() if current.get(k) != v]


def data_table(conn: storage.Connection, opts: PeOptions, say) -> storage.Table:
    """The table for a write command: created, or recreated when its layout differs from the options."""
    fam = family_options(opts, opts.block_size)
    if conn.is_table_available(opts.table):
        table = conn.table(opts.table)
        reasons = []
        if opts.presplit and len(table.regions()) != opts.presplit:
            reasons.append(f"{len(table.regions())} regions (wanted --presplit={opts.presplit})")
        reasons += _settings_differ(table, FAMILY, fam)
        if not reasons:
            return table
        say(f"recreating table {opts.table}: " + "; ".join(reasons))
        conn.delete_table(opts.table)
    return create(conn, opts.table, FAMILY, fam, split_keys(opts), opts)


def meta_table(conn: storage.Connection, opts: PeOptions, block_size_given: bool) -> storage.Table:
    if conn.is_table_available(opts.meta_table):
        return conn.table(opts.meta_table)
    block = opts.block_size if block_size_given else _META_BLOCK_SIZE
    return create(conn, opts.meta_table, META_FAMILY, family_options(opts, block), [], opts)


def load_for_reads(table: storage.Table, opts: PeOptions, say) -> None:
    """Load every client's rows as sequentialWrite would, then flush and major-compact."""
    say(f"table {table.name} is missing: loading {opts.total_rows:,} rows (sequentialWrite layout) first")
    rng = np.random.default_rng(opts.seed)
    pool = value_pool(opts.value_size, rng)
    vs = opts.value_size
    t0 = time.perf_counter()
    with table.batch(batch_size=opts.write_batch_rows) as batch:
        offsets = value_offsets(pool, vs, opts.total_rows, rng)
        for i, o in enumerate(offsets):
            batch.put(format_row(i), {COLUMN: pool[o : o + vs]})
    table.compact(major=True)
    say(f"loaded, flushed and compacted {opts.total_rows:,} rows in {time.perf_counter() - t0:.2f}s")


def load_meta_for_reads(table: storage.Table, opts: PeOptions, say) -> None:
    say(f"table {table.name} is missing: loading {opts.total_rows:,} region rows (metaWrite layout) first")
    rng = np.random.default_rng(opts.seed)
    now = int(time.time() * 1000)
    with table.batch(batch_size=opts.write_batch_rows) as batch:
        for i in range(opts.total_rows):
            key, data = meta_row(opts.table, i, rng, now)
            batch.put(key, data)
    table.compact(major=True)
