"""cell_counter: count rows, families, columns and versions, as HBase's CellCounter.

    regionscan cell_counter --root R TABLE [OUTPUT_DIR [SEPARATOR [REGEX_OR_PREFIX]]]
                            [--starttime MS] [--endtime MS] [--countDeleteMarkers]
    spark-submit jobs/cell_counter.py --root R TABLE OUTPUT_DIR ...

One Spark task per region split scans its cells with ``KeyOnlyFilter()``
and every version (values never leave the store files) and counts them
with Arrow/NumPy kernels over whole batches.  The report uses CellCounter's
keys, one ``key<TAB>count`` line each:

* ``Total Families Across all Rows``: distinct families seen;
* ``Total Qualifiers across all Rows``: (row, column) pairs;
* ``Total ROWS``: rows;
* ``<family>``: rows holding the family;
* ``<family><SEP><qualifier>``: rows holding the column;
* ``<row><SEP><family><SEP><qualifier>_Versions``: versions of one cell of one row.

Names are written as ``Bytes.toStringBinary``; SEPARATOR defaults to ``:``.
A REGEX_OR_PREFIX starting with ``^`` is a row-key regular expression,
anything else a row-key prefix.  Without OUTPUT_DIR the summary lines
(all but the per-row ``_Versions`` lines) are printed; with it
``part-r-00000`` holds the summary lines, sorted, and ``part-m-NNNNN``
each split's per-row lines in row order.

``--countDeleteMarkers`` counts what a raw scan sees (HBase's
``Scan.setRaw``: delete markers and the cells they delete, every version;
from a directory root or through a region server's raw scan; a REGEX_OR_PREFIX
keeps or drops whole rows, markers included): markers count as cells of
their column (a DeleteFamily marker under the empty qualifier) and the
summary gains ``Total DELETE``, ``Total DELETE_COLUMN`` and
``Total DELETE_FAMILY`` lines, the markers of each type.
"""

if __name__ == "__main__":  # spark-submit jobs/cell_counter.py: make the repository importable
    import os as _os
    import sys as _sys

    _here = _os.path.dirname(_os.path.abspath(__file__))
    _sys.path[:] = [p for p in _sys.path if _os.path.abspath(p or ".") != _here]
    _sys.path.insert(0, _os.path.dirname(_here))

import argparse
import sys
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from storage import CellType, InvalidArgument, ScanMetrics, ScanRequest

from jobs._args import add_root_argument, add_time_arguments, guarded, script_main, time_range_of
from jobs._binary_text import escape_binary
from jobs._output import OutputDir, Sink
from jobs._progress import Progress
from jobs._spark import add_spark_arguments, parse_conf_pairs, run_tasks, spark_session
from jobs._splits import SplitRequest, require_table, scan_split, scan_split_raw, scanned_bytes, table_splits

__all__ = ["add_arguments", "run", "main", "CellCounts", "count_cells", "cell_counts", "row_filter", "report_lines",
           "TOTAL_FAMILIES", "TOTAL_QUALIFIERS", "TOTAL_ROWS"]

TOTAL_FAMILIES = "Total Families Across all Rows"
TOTAL_QUALIFIERS = "Total Qualifiers across all Rows"
TOTAL_ROWS = "Total ROWS"
_ALL_VERSIONS = (1 << 31) - 1
_MARKERS = {int(CellType.DELETE): "DELETE", int(CellType.DELETE_COLUMN): "DELETE_COLUMN",
            int(CellType.DELETE_FAMILY): "DELETE_FAMILY"}


@dataclass
class CellCounts:
    """Counts of one split (or, merged, of the table)."""

    index: int = 0
    rows: int = 0
    cells: int = 0
    nbytes: int = 0
    families: Counter = field(default_factory=Counter)  # family -> rows holding it
    columns: Counter = field(default_factory=Counter)  # (family, qualifier) -> rows holding it
    part: str | None = None  # the per-row part file this split wrote
    markers: Counter = field(default_factory=Counter)  # marker type code -> count (raw scans)

    def merge(self, other: "CellCounts") -> None:
        """Add another split's counts."""
        self.rows += other.rows
        self.cells += other.cells
        self.nbytes += other.nbytes
        self.families.update(other.families)
        self.columns.update(other.columns)
        self.markers.update(other.markers)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """CellCounter's positional arguments and time range."""
    parser.add_argument("table", metavar="TABLE", help="table to count")
    parser.add_argument("output", nargs="?", default=None, metavar="OUTPUT_DIR",
                        help="folder for the report (part-r-00000 and per-row part-m-* files)")
    parser.add_argument("separator", nargs="?", default=":", metavar="SEPARATOR",
                        help="separator between row, family and qualifier in report keys (default ':')")
    parser.add_argument("row_filter", nargs="?", default=None, metavar="REGEX_OR_PREFIX",
                        help="only rows whose key matches ^REGEX, or starts with PREFIX")
    add_root_argument(parser)
    add_time_arguments(parser)
    parser.add_argument("--overwrite", action="store_true", help="replace the contents of OUTPUT_DIR")
    parser.add_argument("--countDeleteMarkers", dest="count_delete_markers", action="store_true",
                        help="raw scan: count delete markers and deleted cells too, with a total per marker type")
    add_spark_arguments(parser)


def row_filter(text: str | None) -> str:
    """The scan filter: ``KeyOnlyFilter()``, after a row regex (``^...``) or prefix filter."""
    if not text:
        return "KeyOnlyFilter()"
    quoted = text.replace("'", "''")
    if text.startswith("^"):
        return f"RowFilter(=, 'regexstring:{quoted}') AND KeyOnlyFilter()"
    return f"PrefixFilter('{quoted}') AND KeyOnlyFilter()"


def _changes(col: pa.Array) -> np.ndarray:
    """``out[i]``: cell i differs from cell i-1 in this column (cell 0 always does)."""
    n = len(col)
    out = np.ones(n, dtype=bool)
    if n > 1:
        out[1:] = pc.not_equal(col.slice(1), col.slice(0, n - 1)).to_numpy(zero_copy_only=False)
    return out


def _count_batch(cells: pa.RecordBatch, counts: CellCounts) -> tuple[pa.Array, pa.Array, pa.Array, np.ndarray] | None:
    """Fold one cell batch into ``counts``; return (rows, families, qualifiers, versions) per (row, column)."""
    n = cells.num_rows
    if not n:
        return None
    row, family, qualifier = cells.column("row"), cells.column("family"), cells.column("qualifier")
    row_start = _changes(row)
    family_start = row_start | _changes(family)
    column_start = family_start | _changes(qualifier)
    counts.rows += int(row_start.sum())
    counts.cells += n
    types = np.bincount(cells.column("type").to_numpy(zero_copy_only=False), minlength=16)
    for code in _MARKERS:
        if types[code]:
            counts.markers[code] += int(types[code])
    starts = np.flatnonzero(column_start)
    versions = np.diff(np.append(starts, n))
    take = pa.array(starts)
    col_fam, col_qual = family.take(take), qualifier.take(take)
    per_column = pa.table({"f": col_fam, "q": col_qual}).group_by(["f", "q"]).aggregate([([], "count_all")])
    for f, q, c in zip(per_column.column("f").to_pylist(), per_column.column("q").to_pylist(),
                       per_column.column("count_all").to_pylist()):
        counts.columns[(f, q)] += c
    fams = family.take(pa.array(np.flatnonzero(family_start))).value_counts()
    for item in fams.to_pylist():
        counts.families[item["values"]] += item["counts"]
    return row.take(take), col_fam, col_qual, versions


def _row_lines(rows: pa.Array, fams: pa.Array, quals: pa.Array, versions: np.ndarray, sep: str) -> bytes:
    """``row SEP fam SEP qual _Versions TAB n`` lines, built with Arrow string kernels."""
    text = pa.large_string()
    counts = pa.array(versions).cast(text)
    head = pc.binary_join_element_wise(escape_binary(rows), escape_binary(fams), escape_binary(quals),
                                       pa.scalar(sep, text))
    lines = pc.binary_join_element_wise(head, pa.scalar("_Versions\t", text), counts, pa.scalar("\n", text),
                                        pa.scalar("", text))
    buffers = lines.buffers()
    offsets = np.frombuffer(buffers[1], dtype=np.int64, count=lines.offset + len(lines) + 1)[lines.offset:]
    return pa.py_buffer(buffers[2])[int(offsets[0]):int(offsets[-1])].to_pybytes() if buffers[2] is not None else b""


@dataclass(frozen=True)
class _CountTask:
    """The task: count one split, and write its per-row lines when there is an output folder."""

    separator: str
    output: OutputDir | None
    raw: bool = False

    def __call__(self, split: Any) -> CellCounts:
        counts = CellCounts(index=split.index)
        metrics = ScanMetrics()
        sink = None
        name = f"part-m-{split.index:05d}"
        try:
            if self.output is not None:
                sink = Sink(self.output.fs(), self.output.task_path(name))
            batches = scan_split_raw(split, metrics) if self.raw else scan_split(split, "cells", metrics)
            for batch in batches:
                per_cell = _count_batch(batch, counts)
                if sink is not None and per_cell is not None:
                    sink.write(_row_lines(*per_cell, self.separator))
        finally:
            if sink is not None:
                sink.close()
        counts.nbytes = scanned_bytes(metrics, split)
        counts.part = name if sink is not None else None
        return counts


def count_cells(split: Any, separator: str = ":") -> CellCounts:
    """Count one split without writing per-row lines (what a task does without OUTPUT_DIR)."""
    return _CountTask(separator, None)(split)


def cell_counts(spark: Any, request: SplitRequest, separator: str = ":", output: OutputDir | None = None,
                progress: Progress | None = None, raw: bool = False) -> tuple[CellCounts, list[str]]:
    """Count the table's cells in Spark tasks: the merged counts and the per-row part files written."""
    total = CellCounts()
    with table_splits(request) as splits:
        if progress is not None:
            progress.total_tasks = len(splits)
        results = run_tasks(spark, _CountTask(separator, output, raw), splits, progress,
                            description=f"cell_counter {request.table}")
    for r in results:
        total.merge(r)
    return total, [r.part for r in results if r.part]


def _text(value: bytes) -> str:
    return escape_binary(pa.array([value], pa.binary()))[0].as_py()


def report_lines(counts: CellCounts, separator: str = ":", raw: bool = False) -> list[tuple[str, int]]:
    """The summary lines (key, count), sorted by key as CellCounter's reducer output is
    (with ``raw``, the marker totals of ``--countDeleteMarkers`` too)."""
    lines = [
        (TOTAL_FAMILIES, len(counts.families)),
        (TOTAL_QUALIFIERS, sum(counts.columns.values())),
        (TOTAL_ROWS, counts.rows),
    ]
    lines += [(f"Total {name}", counts.markers.get(code, 0)) for code, name in _MARKERS.items() if raw]
    lines += [(_text(f), c) for f, c in counts.families.items()]
    lines += [(f"{_text(f)}{separator}{_text(q)}", c) for (f, q), c in counts.columns.items()]
    return sorted(lines, key=lambda kv: kv[0].encode())


@guarded("cell_counter")
def run(args: argparse.Namespace) -> int:
    """Count; print the summary, write the report folder when one is given."""
    if not args.separator:
        raise InvalidArgument("SEPARATOR must not be empty")
    raw = args.count_delete_markers
    request = SplitRequest(args.root, args.table, ScanRequest(
        filter=row_filter(args.row_filter), time_range=time_range_of(args.starttime, args.endtime),
        max_versions=_ALL_VERSIONS))
    require_table(args.root, args.table)
    output = OutputDir(args.output) if args.output else None
    if output is not None:
        output.prepare(args.overwrite)
    progress = Progress(f"cell_counter {args.table}")
    try:
        with spark_session(f"cell_counter {args.table}", args.master, parse_conf_pairs(args.conf),
                           verbose=args.verbose) as spark:
            counts, parts = cell_counts(spark, request, args.separator, output, progress, raw)
        lines = report_lines(counts, args.separator, raw)
        if output is not None:
            fs = output.fs()
            text = "".join(f"{k}\t{v}\n" for k, v in lines).encode()
            fs.write_bytes(output.task_path("part-r-00000"), text)
            output.commit(parts + ["part-r-00000"], overwrite=args.overwrite)
    except BaseException:
        if output is not None:
            output.abort()
        raise
    progress.finish()
    for key, value in lines:
        print(f"{key}\t{value}")
    if output is not None:
        print(f"report written to {args.output} (part-r-00000 and {len(parts)} per-row part file(s))")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``spark-submit jobs/cell_counter.py ...``"""
    return script_main(sys.modules[__name__], "cell_counter", argv)


if __name__ == "__main__":
    from jobs.cell_counter import main as _main  # run under the package name, so tasks pickle by reference

    sys.exit(_main())
