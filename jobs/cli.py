"""The ``regionscan`` command line: one subcommand per job.

Each subcommand lives in its own module under ``jobs`` and exposes
``add_arguments(parser)`` and ``run(args) -> int``; this module only wires
them into argparse, so a job is imported only when it is run.
"""

from __future__ import annotations

import argparse
import importlib
import sys

__all__ = ["main", "COMMANDS"]

# command name -> (module, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "demo": ("jobs.demo", "create, load, flush and scan a pre-split sample table (the engine alone)"),
    "serve": ("storage.server.cli", "run a region server (Arrow Flight) over the tables under a root"),
    "pe": ("jobs.pe", "performance evaluation modelled on hbase pe --nomapred: latency percentiles and throughput per command"),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="regionscan", description="HBase-style table store built for scan throughput")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module, help_text) in COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.set_defaults(_module=module)
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
        return int(module.run(args) or 0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except ValueError as exc:  # InvalidArgument and friends: a clear message, no traceback
        print(f"regionscan {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
