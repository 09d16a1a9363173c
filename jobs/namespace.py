"""Namespaces of a root, as HBase's shell manages them: create, list, drop, list tables.

    regionscan namespace create NS        (HBase shell: create_namespace 'NS')
    regionscan namespace list             (list_namespace)
    regionscan namespace tables NS        (list_namespace_tables 'NS')
    regionscan namespace drop NS          (drop_namespace 'NS': only an empty one)

Tables in a namespace are then named ``NS:table`` by every command, the
embedded API, the region server, the Thrift gateway and the Spark source.
"""

from __future__ import annotations

import argparse
import sys
from typing import Sequence

import storage

from ._args import add_root_argument, guarded, script_main

__all__ = ["add_arguments", "run", "main"]

_ACTIONS = ("create", "list", "tables", "drop")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The namespace command's arguments."""
    parser.add_argument("action", choices=_ACTIONS, help="what to do")
    parser.add_argument("name", nargs="?", default=None, help="the namespace (create, tables, drop)")
    add_root_argument(parser)


@guarded("namespace")
def run(args: argparse.Namespace) -> int:
    """Carry out one namespace action and print its outcome."""
    if args.action != "list" and args.name is None:
        raise storage.InvalidArgument(f"namespace {args.action} needs the namespace's name")
    if args.action == "list" and args.name is not None:
        raise storage.InvalidArgument("namespace list takes no name (use: namespace tables NAME)")
    with storage.connect(args.root, read_only=args.action in ("list", "tables")) as conn:
        if args.action == "create":
            conn.create_namespace(args.name)
            print(f"created namespace {args.name}")
        elif args.action == "drop":
            conn.delete_namespace(args.name)
            print(f"dropped namespace {args.name}")
        elif args.action == "list":
            for name in conn.list_namespaces():
                print(name)
        else:
            for table in conn.tables(namespace=args.name):
                print(table.decode())
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run as ``python -m jobs.namespace``."""
    return script_main(sys.modules[__name__], "namespace", argv)


if __name__ == "__main__":
    sys.exit(main())
