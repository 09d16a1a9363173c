"""row_counter: count the rows of a table, as HBase's RowCounter.

    regionscan row_counter --root R TABLE [--range a,b [--range c,d]] [--starttime MS] [--endtime MS]
                           [--expected-count N] [--all.cells | --countDeleteMarkers] [COLUMN ...]
    spark-submit jobs/row_counter.py --root R TABLE ...

One Spark task per region split.  Without columns or a time range a task
counts from the store files' block indexes where they can answer
(``connector.scanning.split_row_count``: clean version 2 files, nothing in
the memstore); otherwise it scans its split with
``FirstKeyOnlyFilter() AND KeyOnlyFilter()``: the engine hands over one
empty-valued cell per row, so no value leaves the store files and nothing
but a count leaves the task.  ``--range`` takes ``[start],[stop]`` (stop
exclusive, either side may be empty, keys in ``Bytes.toBytesBinary`` form);
several ranges, or ``a,b;c,d`` in one, are counted together.  With
columns (``cf:q`` or ``cf``) only rows holding one of them count.
``--expected-count N`` exits with status 1 when the count differs.

``--all.cells`` counts the rows a raw scan sees (HBase's ``Scan.setRaw``:
delete markers and deleted cells too), so a row holding only deleted cells
or markers counts; ``--countDeleteMarkers`` (HBase's RowCounter option) does
the same raw scan and also prints HBase's counters: the markers of each type
(``DELETE=``, ``DELETE_COLUMN=``, ``DELETE_FAMILY=``; there is no
DeleteFamilyVersion marker here) and ``ROWS_WITH_DELETE_MARKER=``.  Both
read every version and take columns as a raw scan does (``cf`` every cell of
the family, ``cf:q`` that column's puts and Delete / DeleteColumn markers,
``cf:`` the empty qualifier's, DeleteFamily markers among them), from a
directory root or through a region server (``grpc://``: its raw scan, wire
protocol 2).
"""

if __name__ == "__main__":  # spark-submit jobs/row_counter.py: make the repository importable
    import os as _os
    import sys as _sys

    _here = _os.path.dirname(_os.path.abspath(__file__))
    _sys.path[:] = [p for p in _sys.path if _os.path.abspath(p or ".") != _here]
    _sys.path.insert(0, _os.path.dirname(_here))

import argparse
import sys
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from storage import CellType, InvalidArgument, ScanMetrics, ScanRequest
from storage.engine import ROW_COUNT_FILTER, row_boundaries
from storage.keys import KeyRange, normalize

from jobs._args import add_root_argument, add_time_arguments, guarded, parse_row_key, script_main, time_range_of
from jobs._progress import Progress
from jobs._spark import add_spark_arguments, parse_conf_pairs, run_tasks, spark_session
from connector.scanning import split_row_count
from jobs._splits import (SplitRequest, column_list, require_table, scan_split, scan_split_raw, scanned_bytes,
                          table_splits)

__all__ = ["add_arguments", "run", "main", "parse_ranges", "count_rows", "count_raw", "SplitRequest", "SplitCount",
           "RawCount", "ROW_COUNT_FILTER", "MARKER_NAMES"]



@dataclass(frozen=True)
class SplitCount:
    """What one task counted."""

    index: int
    rows: int
    nbytes: int


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """RowCounter's options (``--expectedCount`` is accepted for ``--expected-count``)."""
    parser.add_argument("table", metavar="TABLE", help="table to count")
    parser.add_argument("columns", nargs="*", metavar="COLUMN",
                        help="count only rows with one of these columns (cf:q or cf)")
    add_root_argument(parser)
    parser.add_argument("--range", dest="ranges", action="append", default=[], metavar="START,STOP",
                        help="row range [START,STOP) (either side may be empty; a;b for several); repeatable")
    add_time_arguments(parser)
    parser.add_argument("--expected-count", "--expectedCount", dest="expected_count", type=int, default=None,
                        metavar="N", help="exit with status 1 unless exactly N rows are counted")
    parser.add_argument("--countDeleteMarkers", dest="count_delete_markers", action="store_true",
                        help="raw scan: count rows holding any cell or marker, and print the delete markers by type")
    parser.add_argument("--all.cells", dest="all_cells", action="store_true",
                        help="raw scan: count rows holding any cell, deleted cells and delete markers included")
    add_spark_arguments(parser)


def parse_ranges(values: Sequence[str]) -> list[KeyRange] | None:
    """``["a,b", "c,;,d"]`` -> normalized ``[start, stop)`` ranges; None when no range is given."""
    ranges: list[KeyRange] = []
    for value in values:
        for part in str(value).split(";"):
            if not part.strip():
                continue
            pieces = part.split(",")
            if len(pieces) != 2:
                raise InvalidArgument(f"--range {part!r}: expected START,STOP (escape a comma in a key as \\x2C)")
            start = parse_row_key(pieces[0], "--range start") if pieces[0] else b""
            stop = parse_row_key(pieces[1], "--range stop") if pieces[1] else None
            if stop is not None and stop <= start:
                raise InvalidArgument(f"--range {part!r}: the stop row must sort after the start row")
            ranges.append((start, stop))
    if not values:
        return None
    if not ranges:
        raise InvalidArgument(f"--range {values!r} names no range")
    return normalize(ranges)


def count_split(split: Any) -> SplitCount:
    """Count the rows of one split (runs in a Spark task)."""
    metrics = ScanMetrics()
    counted = split_row_count(split, metrics)
    if counted is not None:
        return SplitCount(split.index, counted, scanned_bytes(metrics, split))
    rows = 0
    for batch in scan_split(split, "cells", metrics):
        # FirstKeyOnlyFilter leaves exactly one cell per row
        rows += batch.num_rows
    return SplitCount(split.index, rows, scanned_bytes(metrics, split))


MARKER_NAMES = {int(CellType.DELETE): "DELETE", int(CellType.DELETE_COLUMN): "DELETE_COLUMN",
                int(CellType.DELETE_FAMILY): "DELETE_FAMILY"}
"""Cell type code -> the counter name ``--countDeleteMarkers`` prints (HBase's RowCounter counters)."""


@dataclass(frozen=True)
class RawCount:
    """What one task's raw scan counted: rows, markers per type code, rows holding a marker."""

    index: int
    rows: int
    markers: dict
    rows_with_marker: int = 0


def count_split_raw(split: Any) -> RawCount:
    """Rows and delete markers of one split as a raw scan sees them (a Spark task)."""
    rows = with_marker = 0
    markers: dict = {}
    for batch in scan_split_raw(split):
        if not batch.num_rows:
            continue
        starts = row_boundaries(batch)  # batches hold whole rows
        rows += len(starts)
        types = batch.column("type").to_numpy(zero_copy_only=False)
        counts = np.bincount(types, minlength=16)
        for code in MARKER_NAMES:
            markers[code] = markers.get(code, 0) + int(counts[code])
        # rows holding a marker: marker cells' row numbers, distinct
        row_of = np.searchsorted(starts, np.flatnonzero(types != int(CellType.PUT)), side="right")
        with_marker += len(np.unique(row_of))
    return RawCount(split.index, rows, markers, with_marker)


def count_raw(spark: Any, request: SplitRequest, progress: Progress | None = None) -> tuple[int, dict]:
    """Rows of ``request`` as a raw scan sees them, and its delete markers per type name
    (with ``ROWS_WITH_DELETE_MARKER``, HBase's counter of rows holding one)."""
    with table_splits(request) as splits:
        if progress is not None:
            progress.total_tasks = len(splits)
        results = run_tasks(spark, count_split_raw, splits, progress, description=f"row_counter {request.table}")
    markers = {name: sum(r.markers.get(code, 0) for r in results) for code, name in MARKER_NAMES.items()}
    markers["ROWS_WITH_DELETE_MARKER"] = sum(r.rows_with_marker for r in results)
    return sum(r.rows for r in results), markers


def count_rows(spark: Any, request: SplitRequest, progress: Progress | None = None) -> int:
    """Rows matched by ``request`` (its filter is replaced by the row-count filter)."""
    from dataclasses import replace

    request = replace(request, scan=request.scan.replace(filter=ROW_COUNT_FILTER, max_versions=1))
    with table_splits(request) as splits:
        if progress is not None:
            progress.total_tasks = len(splits)
        results = run_tasks(spark, count_split, splits, progress, description=f"row_counter {request.table}")
    return sum(r.rows for r in results)


@guarded("row_counter")
def run(args: argparse.Namespace) -> int:
    """Count the rows; print ``ROWS=N`` and a summary."""
    raw = args.count_delete_markers or args.all_cells
    ranges = parse_ranges(args.ranges)
    time_range = time_range_of(args.starttime, args.endtime)
    if args.expected_count is not None and args.expected_count < 0:
        raise InvalidArgument(f"--expected-count must not be negative, got {args.expected_count}")
    request = SplitRequest(
        args.root, args.table, ScanRequest(columns=column_list(args.columns), time_range=time_range),
        key_ranges=tuple(ranges) if ranges is not None else None,
    )
    conf = parse_conf_pairs(args.conf)
    require_table(args.root, args.table)
    progress = Progress(f"row_counter {args.table}")
    markers: dict = {}
    with spark_session(f"row_counter {args.table}", args.master, conf, verbose=args.verbose) as spark:
        if raw:
            rows, markers = count_raw(spark, request, progress)
        else:
            rows = count_rows(spark, request, progress)
    progress.finish()
    print(f"ROWS={rows}")
    if args.count_delete_markers:
        for name, count in markers.items():
            print(f"{name}={count}")
    if args.expected_count is not None and rows != args.expected_count:
        print(f"row_counter: expected {args.expected_count} rows but counted {rows}", file=sys.stderr)
        return 1
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``spark-submit jobs/row_counter.py ...``"""
    return script_main(sys.modules[__name__], "row_counter", argv)


if __name__ == "__main__":
    from jobs.row_counter import main as _main  # run under the package name, so tasks pickle by reference

    sys.exit(_main())
