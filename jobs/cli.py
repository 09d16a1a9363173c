"""The ``regionscan`` command line: one subcommand per job.

Each subcommand lives in its own module under ``jobs`` and exposes
``add_arguments(parser)`` and ``run(args) -> int``; this module only wires
them into argparse, so a job is imported only when it is run.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from jobs._args import JobParser

__all__ = ["main", "COMMANDS", "version_line"]

# command name -> (module, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "main": ("jobs.main_job", "the main job: a pre-split table read by Spark one partition per region, a filtered aggregate, timings and the SerDe profile"),
    "row_counter": ("jobs.row_counter", "count rows with first-key-only, key-only scans, one Spark task per region (HBase RowCounter)"),
    "cell_counter": ("jobs.cell_counter", "count rows, families, columns and versions (HBase CellCounter)"),
    "export": ("jobs.export", "write a table to Parquet, Avro or CSV, as raw cells or through a column mapping (HBase Export)"),
    "import": ("jobs.import_", "bulk-load exported Parquet, Avro or CSV files into a table (HBase Import)"),
    "import_tsv": ("jobs.import_tsv", "bulk-load delimited text, -Dimporttsv.columns=HBASE_ROW_KEY,cf:a (HBase ImportTsv)"),
    "copy_table": ("jobs.copy_table", "copy a table's cells into another table or root (HBase CopyTable)"),
    "pe-distributed": ("jobs.pe_distributed", "pe with each client a Spark task (hbase pe's MapReduce mode)"),
    "profile-serde": ("jobs.profile_serde", "profile a scan through a SerDe: ranked hotspots, speedscope JSON, HTML/PNG charts"),
    "build-jvm-source": ("jobs.build_jvm_source", "compile the JVM DataSource V2 and print the jar's path (for spark-submit --jars)"),
    "namespace": ("jobs.namespace", "create, list, drop a root's namespaces and list their tables (HBase shell's *_namespace)"),
    "wal": ("jobs.wal", "check a table's write-ahead logs for damage, or repair them: damaged logs set aside, intact records kept (HBase hbck/WALPlayer)"),
    "mapping": ("jobs.mapping", "set, show or remove the column mapping stored with a table (read by Spark when a read gives none)"),
    "demo": ("jobs.demo", "create, load, flush and scan a pre-split sample table (the engine alone)"),
    "serve": ("storage.server.cli", "run a region server (Arrow Flight) over the tables under a root"),
    "thrift": ("storage.thrift.cli", "run an HBase Thrift 1 gateway (happybase-compatible) over the tables under a root"),
    "pe": ("jobs.pe", "performance evaluation modelled on hbase pe --nomapred: latency percentiles and throughput per command"),
}


def _other_spellings(name: str) -> list[str]:
    """``row_counter`` also answers to ``row-counter``, ``profile-serde`` to ``profile_serde``."""
    others = {name.replace("_", "-"), name.replace("-", "_")} - {name}
    return sorted(others)


def version_line() -> str:
    """``regionscan <version>, native kernels: on`` (or ``off (REGIONSCAN_NATIVE=0)``, ``off (not built)``)."""
    from importlib.metadata import PackageNotFoundError, version

    from storage.engine import native_status

    try:
        number = version("regionscan")
    except PackageNotFoundError:  # run from a checkout that was never installed
        number = "(not installed)"
    return f"regionscan {number}, native kernels: {native_status()}"


def build_parser() -> argparse.ArgumentParser:
    parser = JobParser(prog="regionscan", description="HBase-style table store built for scan throughput")
    parser.add_argument("--version", action="version", version=version_line(),
                        help="print the version and whether the compiled kernels are in use, then exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module, help_text) in COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text, aliases=_other_spellings(name))
        # _parser: a misspelled option is refused with this command's usage and options (JobParser)
        p.set_defaults(_module=module, _parser=p)
        importlib.import_module(module).add_arguments(p)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "command", None):
        parser.print_help()
        return 2
    module = importlib.import_module(args._module)
    try:
        status = int(module.run(args) or 0)
        sys.stdout.flush()  # output still buffered is written here, where a closed pipe is caught
        return status
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader of our output went away (`regionscan profile-serde ... | head`): what it
        # did not read is nobody's, so stop quietly, as a shell tool does on SIGPIPE.  stdout
        # goes to /dev/null so the interpreter's flush at exit cannot raise again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141  # 128 + SIGPIPE, the status a shell reports for a tool killed by it
    except ValueError as exc:  # InvalidArgument and friends: a clear message, no traceback
        print(f"regionscan {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
