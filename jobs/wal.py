"""Check and repair the write-ahead logs of a table (HBase's ``hbck`` and ``WALPlayer`` for WAL damage).

    regionscan wal check TABLE --root R     report damage, torn tails and intact records per WAL file
    regionscan wal repair TABLE --root R    set each damaged WAL file aside and keep its intact records

A region whose WAL holds a damaged record stays offline (its reads and writes
fail with one line naming the file and offset) while the rest of the table
reads on.  ``check`` changes nothing; it also opens the table as a reader and
lists every region that stays offline, whatever file holds the damage, and
exits 1 when it finds any.
``repair`` needs the table's writer lock (no writer process may have the
table open); it moves each damaged file to ``<table>/corrupt/regions/...``
(never deletes it), writes a log of every record that still passes its
checksums in its place, says how many records, cells and rows could not be
kept, and opens the table to show every region comes back.
"""

from __future__ import annotations

import argparse
import sys
from typing import Sequence

import storage
from connector.scanning import is_remote_root
from storage import table_dir
from storage.engine import check_table_wals, repair_table_wals, table_exists, table_writer_lock, validate_table_name

from ._args import add_root_argument, guarded, script_main

__all__ = ["add_arguments", "run", "main"]

_ACTIONS = ("check", "repair")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The wal command's arguments."""
    parser.add_argument("action", choices=_ACTIONS, help="check: report only; repair: set damaged logs aside")
    parser.add_argument("table", help="the table (ns:table for a namespace)")
    add_root_argument(parser)


@guarded("wal")
def run(args: argparse.Namespace) -> int:
    """Check (or repair) every WAL of the table; print one block per file and a summary line."""
    if is_remote_root(args.root):
        raise storage.InvalidArgument(f"the WAL is in the table's files: give its filesystem root, not {args.root}")
    name = validate_table_name(args.table)
    with storage.connect(args.root, read_only=args.action == "check") as conn:
        tfs = conn.fs.sub(table_dir(name))
        if not table_exists(tfs):
            raise storage.TableNotFound(conn.missing_table(name))
        if args.action == "check":
            report = check_table_wals(tfs, name)
        else:
            with table_writer_lock(tfs):  # no writer appends to a log being repaired
                report = repair_table_wals(tfs, name)
        for file_report in report.files:
            for line in file_report.describe():
                print(line)
        print(report.summary())
        # the table opened as a reader (check) or writer (repair): which regions stay offline,
        # for damage in WALs or elsewhere (a store file's trailer, index or bloom, a region manifest)
        offline = conn.table(name).offline_regions()
        for why in offline.values():  # each says "region <id> of table <t> is offline: ..."
            print(why if args.action == "check" else f"after the repair, {why}")
        if not offline:
            print(f"table {name} opens: every region is online")
        return 1 if offline or (args.action == "check" and report.damaged) else 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run as ``python -m jobs.wal``."""
    return script_main(sys.modules[__name__], "wal", argv)


if __name__ == "__main__":
    sys.exit(main())
