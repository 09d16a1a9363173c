"""copy_table: copy a table's cells into another table, as HBase's CopyTable.

    regionscan copy_table --root R [--new.name=NAME] [--peer.adr=ROOT2] [--families=a:b,c]
                          [--startrow=K] [--stoprow=K] [--starttime=MS] [--endtime=MS] [--versions=N]
                          [--all.cells] [--create] TABLE
    spark-submit jobs/copy_table.py --root R --new.name=NAME TABLE

``--new.name`` names the target table (default: the same name, which then
needs ``--peer.adr``: another root, where HBase would name another
cluster).  ``--families`` picks families and renames them:
``src:dst`` copies family src into dst, a bare ``cf`` copies cf as is;
several are comma-separated.  ``--versions`` copies up to N versions of
each column (default 1), ``--starttime``/``--endtime`` only cells in
``[start, end)``, ``--startrow``/``--stoprow`` only rows in ``[start, stop)``.
The target table must exist, unless ``--create`` makes it with the source's
(renamed) families and split keys.

``--all.cells`` (HBase's option) copies what a raw scan of the source sees
(:mod:`storage.read.raw`): the delete markers, with their types and
timestamps, and the cells they delete, so the target resolves as the source
does (scans, time ranges, reads of the past of a family keeping deleted
cells).  It copies every version unless ``--versions=N`` is given, which
then limits the raw scan as HBase's ``VERSIONS => N`` does (markers do not
count).  HBase's CopyTable leaves its scan at one version unless told; here
``--all.cells`` alone copies the whole history, which is what makes the
target resolve as the source.

One Spark task per source region split scans its cells (timestamps kept)
and stages them as store files of the target; the driver commits them all
at once, so a failed copy leaves the target as it was.  HBase's
``--bulkload`` is therefore accepted and changes nothing.  With
``--all.cells`` a task stages each cell type (puts, and each kind of
marker) as files of their own: within one staged file cells are keyed by
row, qualifier and timestamp, and a marker shares those with the put it
deletes.
"""

if __name__ == "__main__":  # spark-submit jobs/copy_table.py: make the repository importable
    import os as _os
    import sys as _sys

    _here = _os.path.dirname(_os.path.abspath(__file__))
    _sys.path[:] = [p for p in _sys.path if _os.path.abspath(p or ".") != _here]
    _sys.path.insert(0, _os.path.dirname(_here))

import argparse
import os
import sys
import time
from dataclasses import dataclass
from typing import Any, Sequence

import pyarrow as pa
import pyarrow.compute as pc

import storage
from storage import InvalidArgument, ScanMetrics, ScanRequest, TableNotFound
from storage.engine import validate_family_name, validate_table_name

from connector.scanning import is_remote_root

from jobs._args import add_root_argument, add_time_arguments, guarded, parse_row_key, script_main, time_range_of
from jobs._bulk import LoadTarget, StageResult, drop_created_table, prepare_target, run_load
from jobs._progress import Progress
from jobs._spark import add_spark_arguments, parse_conf_pairs, spark_session
from jobs._splits import SplitRequest, scan_split, scan_split_raw, scanned_bytes, table_splits

__all__ = ["add_arguments", "run", "main", "parse_families", "rename_families"]


def parse_families(text: str | None) -> dict[str, str] | None:
    """``"a:b,c"`` -> ``{"a": "b", "c": "c"}`` (source -> target); None copies every family."""
    if text is None:
        return None
    out: dict[str, str] = {}
    for item in text.split(","):
        item = item.strip()
        if not item:
            raise InvalidArgument(f"--families has an empty entry: {text!r}")
        src, sep, dst = item.partition(":")
        dst = dst if sep else src
        for name in (src, dst):
            try:
                validate_family_name(name)
            except InvalidArgument as exc:
                raise InvalidArgument(f"--families entry {item!r}: {exc}") from None
        if src in out:
            raise InvalidArgument(f"--families names source family {src!r} twice")
        out[src] = dst
    return out


def rename_families(cells: pa.Table | pa.RecordBatch, renames: dict[bytes, bytes]) -> pa.Table:
    """Cells with their family names mapped through ``renames`` (a vectorized lookup)."""
    table = cells if isinstance(cells, pa.Table) else pa.Table.from_batches([cells])
    if not renames or not table.num_rows:
        return table
    families = table.column("family").combine_chunks()
    present = pc.unique(families)
    renamed = pa.array([renames.get(f, f) for f in present.to_pylist()], pa.binary())
    index = pc.index_in(families, value_set=present)
    return table.set_column(table.schema.get_field_index("family"), "family", renamed.take(index))


@dataclass(frozen=True)
class _CopyTask:
    """The task: scan one source split, stage its cells into the target.

    ``raw`` (``--all.cells``): the split's raw scan, markers included,
    ``versions`` puts per column (None: all)."""

    target: LoadTarget
    renames: dict[bytes, bytes]
    raw: bool = False
    versions: int | None = None

    def __call__(self, split: Any) -> StageResult:
        result = StageResult()
        metrics = ScanMetrics()
        task = self.target.open_task(f"copy-{split.index:05d}")
        try:
            batches = scan_split_raw(split, metrics, self.versions) if self.raw else scan_split(split, "cells", metrics)
            for batch in batches:
                if not batch.num_rows:
                    continue
                # a raw scan's markers keep their type: the loader sorts and de-duplicates whole cell keys
                task.add_cells(rename_families(batch, self.renames))
                result.cells += batch.num_rows
                result.rows += batch.num_rows
            result.files.extend(task.finish())
        except BaseException:
            task.abandon()
            raise
        result.nbytes = scanned_bytes(metrics, split)
        return result


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """CopyTable's options (HBase's spellings)."""
    parser.add_argument("table", metavar="TABLE", help="source table")
    add_root_argument(parser)
    parser.add_argument("--new.name", dest="new_name", default=None, help="target table (default: TABLE)")
    parser.add_argument("--peer.adr", dest="peer_adr", default=None,
                        help="root of the target table (default: --root)")
    parser.add_argument("--families", default=None, help="families to copy: src:dst renames, cf copies as is")
    parser.add_argument("--startrow", default=None, help="first row to copy (inclusive)")
    parser.add_argument("--stoprow", default=None, help="row to stop at (exclusive)")
    add_time_arguments(parser)
    parser.add_argument("--versions", type=int, default=None,
                        help="versions of each column to copy (default 1; with --all.cells every version)")
    parser.add_argument("--create", action="store_true",
                        help="create a missing target with the source's (renamed) families and split keys")
    parser.add_argument("--bulkload", action="store_true",
                        help="accepted for HBase's CopyTable: the copy always stages store files and bulk-loads them")
    parser.add_argument("--all.cells", dest="all_cells", action="store_true",
                        help="copy delete markers and deleted cells too (a raw scan), so the target resolves as the source")
    add_spark_arguments(parser)


def _same_place(a: str, b: str) -> bool:
    norm = (lambda r: r.rstrip("/") if "://" in r else os.path.abspath(r))
    return norm(a) == norm(b)


def _source_layout(root: str, table: str) -> tuple[dict[str, dict], list[bytes]]:
    # a region server root (grpc://) is read through the server, which has no read_only option
    conn = storage.connect(root) if is_remote_root(root) else storage.connect(root, read_only=True)
    try:
        handle = conn.table(table)
        families = {name.decode(): dict(opts) for name, opts in handle.families().items()}
        return families, [r["start_key"] for r in handle.regions()][1:]
    finally:
        conn.close()


def _ensure_target(root: str, table: str, families: dict[str, dict], splits: list[bytes], create: bool) -> bool:
    conn = storage.connect(root)
    try:
        created = False
        if not conn.is_table_available(table):
            if not create:
                raise TableNotFound(f"target {conn.missing_table(table)}; create it, or pass --create")
            conn.create_table(table, families, split_keys=splits or None)
            created = True
        have = {f.decode() for f in conn.table(table).families()}
    finally:
        conn.close()  # release the writer lock: the commit takes it
    missing = sorted(set(families) - have)
    if missing:
        raise InvalidArgument(f"target table {table} lacks families {missing} (it has {sorted(have)}); "
                              "map them with --families=src:dst")
    return created


@guarded("copy_table")
def run(args: argparse.Namespace) -> int:
    """Copy; print the summary."""
    if args.versions is not None and args.versions < 1:
        raise InvalidArgument(f"--versions must be a positive integer, got {args.versions}")
    target_root = args.peer_adr or args.root
    target_name = args.new_name or args.table
    validate_table_name(target_name)
    if target_name == args.table and _same_place(target_root, args.root):
        raise InvalidArgument("the target is the source table: give --new.name or --peer.adr")
    renames = parse_families(args.families)
    families, splits = _source_layout(args.root, args.table)
    if renames is not None:
        unknown = sorted(set(renames) - set(families))
        if unknown:
            raise InvalidArgument(f"--families: table {args.table} has no families {unknown} "
                                  f"(it has {sorted(families)})")
        families = {renames[name]: families[name] for name in renames}
    request = SplitRequest(args.root, args.table, ScanRequest(
        columns=tuple(renames) if renames is not None else None,
        time_range=time_range_of(args.starttime, args.endtime),
        max_versions=args.versions or 1,  # a raw copy takes its versions from the task
        row_start=parse_row_key(args.startrow, "--startrow") if args.startrow else None,
        row_stop=parse_row_key(args.stoprow, "--stoprow") if args.stoprow else None,
    ))
    created = _ensure_target(target_root, target_name, families, splits, args.create)
    byte_renames = {s.encode(): d.encode() for s, d in (renames or {}).items() if s != d}
    progress = Progress(f"copy_table {args.table} -> {target_name}", unit="cells")
    started = time.perf_counter()
    try:
        target = prepare_target(target_root, target_name)
        with spark_session(f"copy_table {args.table}", args.master, parse_conf_pairs(args.conf),
                           verbose=args.verbose) as spark:
            with table_splits(request) as source_splits:
                progress.total_tasks = len(source_splits)
                task = _CopyTask(target, byte_renames, raw=args.all_cells, versions=args.versions)
                report, results = run_load(spark, target, task, source_splits, progress)
    except BaseException:
        if created:
            drop_created_table(target_root, target_name)
        raise
    progress.finish()
    if created:
        print(f"created table {target_name} under {target_root}")
    what = "cells and delete markers" if args.all_cells else "cells"
    print(f"copied {sum(r.cells for r in results):,} {what} of {args.table} into {target_name}: "
          f"{report.files} store file(s) over {len(report.regions)} region(s), {time.perf_counter() - started:.2f} s")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``spark-submit jobs/copy_table.py ...``"""
    return script_main(sys.modules[__name__], "copy_table", argv)


if __name__ == "__main__":
    from jobs.copy_table import main as _main  # run under the package name, so tasks pickle by reference

    sys.exit(_main())
