"""A table's stored column mapping: set, show or remove it.

    regionscan mapping set TABLE --root R --mapping 'key STRING :key, n INT cf:n' [--serde S] [-Dk=v]
    regionscan mapping show TABLE --root R
    regionscan mapping remove TABLE --root R

The mapping is stored with the table (a descriptor value, HBase's
``alter 't', METADATA => {...}``; connector/stored_mapping.py), so
``spark.read.format("regionscan")`` with only ``root`` and ``table``, and
the Spark catalog (``spark.sql.catalog.rs=regionscan.spark.RegionScanCatalog``),
read the table with it.  ``--mapping`` takes any form the SerDe layer parses,
or ``@FILE``; ``-D`` keys are SerDe properties stored with it
(``-Dserialization.null.format=\\N``).  ``set`` checks the mapping first and
needs the table's writer lock (no writer process may have the table open); it
says which SerDe the mapping is stored with, and so how the cells are read
(``binary`` by default for hbase-spark mappings and catalogs: an ``INT`` cell is
4 bytes, numbers stored as text need ``--serde string``).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Sequence

import storage
from connector import stored_mapping
from connector.options import normalize_conf
from connector.scanning import is_remote_root
from connector.source_config import SourceConfig, store_mapping
from storage.engine import validate_table_name

from ._args import add_root_argument, guarded, parse_defines, script_main
from ._mapping import mapping_text

__all__ = ["add_arguments", "run", "main"]

_ACTIONS = ("set", "show", "remove")
# what a built-in SerDe expects the cells to hold: a mapping that does not fit them fails reads
_ENCODINGS = {
    "binary": "values read as HBase Bytes encodings (an INT cell is 4 bytes; give --serde string "
              "for numbers stored as text) ",
    "string": "values read as text (an INT cell holds its digits; give --serde binary for HBase "
              "Bytes encodings) ",
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The mapping command's arguments."""
    parser.add_argument("action", choices=_ACTIONS, help="what to do")
    parser.add_argument("table", help="the table (ns:table for a namespace)")
    add_root_argument(parser)
    parser.add_argument("--mapping", default=None,
                        help="set: the column mapping (Hive ':key,cf:a', 'k STRING :key, a INT cf:a', a JSON "
                             "catalog) or @FILE")
    parser.add_argument("--serde", default=None, help="set: the SerDe (default: string for Hive mappings, else binary)")
    parser.add_argument("-D", dest="defines", action="append", default=[], metavar="KEY=VALUE",
                        help="set: a SerDe property stored with the mapping")


@guarded("mapping")
def run(args: argparse.Namespace) -> int:
    """Carry out one mapping action and print its outcome."""
    if args.action != "set" and (args.mapping is not None or args.serde is not None or args.defines):
        raise storage.InvalidArgument(f"mapping {args.action} takes no --mapping, --serde or -D")
    if is_remote_root(args.root):
        raise storage.InvalidArgument(f"a mapping is stored in the table's files: give its filesystem root, not {args.root}")
    table = validate_table_name(args.table)
    if args.action == "set":
        text = mapping_text(args.mapping)
        if text is None:
            raise storage.InvalidArgument("mapping set needs --mapping (the column mapping, or @FILE)")
        options = normalize_conf({**parse_defines(args.defines), "hbase.columns.mapping": text})
        if args.serde:
            options["serde"] = args.serde
        stored = store_mapping(args.root, table, options)
        serde = SourceConfig.from_options({**stored, "root": args.root, "table": table}).serde_name
        print(f"stored the mapping of table {table} with SerDe {serde}"
              f"{'' if args.serde else ' (the default for this mapping form)'}: {_ENCODINGS.get(serde, '')}"
              f"{json.dumps(stored, sort_keys=True)}")
    elif args.action == "show":
        stored = stored_mapping.stored_options(args.root, table)
        if stored is None:
            print(f"table {table} has no stored mapping", file=sys.stderr)
            return 1
        print(json.dumps(stored, sort_keys=True, indent=1))
    else:
        removed = stored_mapping.remove(args.root, table)
        print(f"removed the mapping of table {table}" if removed else f"table {table} had no stored mapping")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run as ``python -m jobs.mapping``."""
    return script_main(sys.modules[__name__], "mapping", argv)


if __name__ == "__main__":
    sys.exit(main())
