"""export: write a table to Parquet, Avro or CSV files, as raw cells or through a column mapping.

    regionscan export --root R TABLE OUTPUT_DIR [VERSIONS [STARTTIME [ENDTIME]]] [--format parquet|avro|csv]
                      [--mapping MAPPING [--serde NAME] [-Dprop=value ...]]
                      [--versions N] [--starttime MS] [--endtime MS] [--startrow K] [--stoprow K] [--overwrite]
    spark-submit jobs/export.py --root R TABLE OUTPUT_DIR ...

One Spark task per region split scans its rows and writes one part file
(``part-m-NNNNN.<ext>``; splits without rows write none).  Without
``--mapping`` every cell is a record ``(row, family, qualifier, timestamp,
value)`` (binary row, family, qualifier and value; ``--versions`` versions
per column, default 1), as HBase's Export writes Results.  With
``--mapping`` the rows are decoded by the SerDe into typed columns,
exactly as ``spark.read.format("regionscan")`` would.

Parts are written under ``OUTPUT_DIR/_temporary`` and moved into place
when every task has succeeded, with ``_SUCCESS`` and ``_regionscan.json``
(the table's families and split keys, the mode, mapping and format), which
``import`` reads to load the files back and to create a missing table.

As HBase's Export, ``VERSIONS STARTTIME ENDTIME`` may follow OUTPUT_DIR
(the same as ``--versions``, ``--starttime``, ``--endtime``), and
``-Dhbase.mapreduce.scan.row.start`` / ``.row.stop`` bound the rows (the same
as ``--startrow`` / ``--stoprow``); other ``-D`` keys are SerDe properties and
need ``--mapping``.
"""

if __name__ == "__main__":  # spark-submit jobs/export.py: make the repository importable
    import os as _os
    import sys as _sys

    _here = _os.path.dirname(_os.path.abspath(__file__))
    _sys.path[:] = [p for p in _sys.path if _os.path.abspath(p or ".") != _here]
    _sys.path.insert(0, _os.path.dirname(_here))

import argparse
import json
import sys
from dataclasses import dataclass
from typing import Any, Sequence

import pyarrow as pa

from connector.options import to_string_binary
from connector.source_config import SourceConfig
import storage
from storage import InvalidArgument, ScanMetrics, ScanRequest

from jobs._args import add_root_argument, add_time_arguments, guarded, parse_defines, parse_row_key, script_main, \
    time_range_of
from jobs._formats import EXTENSIONS, FORMATS, PartWriter, check_format
from jobs._mapping import mapping_text, serde_of, source_config
from jobs._output import OutputDir, Sink
from jobs._progress import Progress
from jobs._spark import add_spark_arguments, parse_conf_pairs, run_tasks, spark_session
from jobs._splits import SplitRequest, scan_split, scanned_bytes, table_splits

__all__ = ["add_arguments", "run", "main", "CELL_RECORD", "METADATA", "ExportResult", "table_metadata"]

CELL_RECORD = pa.schema([
    pa.field("row", pa.binary(), nullable=False),
    pa.field("family", pa.binary(), nullable=False),
    pa.field("qualifier", pa.binary(), nullable=False),
    pa.field("timestamp", pa.int64(), nullable=False),
    pa.field("value", pa.binary(), nullable=False),
])
"""The record of a raw-cell export: one per cell version."""

METADATA = "_regionscan.json"


@dataclass(frozen=True)
class ExportResult:
    """What one task wrote."""

    index: int
    part: str | None
    rows: int  # records written: cells in raw-cell mode, rows with a mapping
    nbytes: int


@dataclass(frozen=True)
class _ExportTask:
    """The task: scan one split, write its part file."""

    output: OutputDir
    fmt: str
    config: SourceConfig | None  # None: raw cells

    def __call__(self, split: Any) -> ExportResult:
        name = f"part-m-{split.index:05d}{EXTENSIONS[self.fmt]}"
        metrics = ScanMetrics()
        serde = serde_of(self.config) if self.config is not None else None
        schema = serde.arrow_schema if serde is not None else CELL_RECORD
        writer = None
        try:
            for batch in scan_split(split, "cells" if serde is None else "rows", metrics):
                if serde is None:
                    out = pa.RecordBatch.from_arrays([batch.column(n) for n in CELL_RECORD.names], schema=CELL_RECORD)
                else:
                    out = serde.deserialize_batch(batch)
                if writer is None:
                    writer = PartWriter(self.fmt, Sink(self.output.fs(), self.output.task_path(name)), schema)
                writer.write(out)
        finally:
            if writer is not None:
                writer.close()
        written = writer.rows if writer is not None else 0
        return ExportResult(split.index, name if writer is not None else None, written, scanned_bytes(metrics, split))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Export's arguments."""
    parser.add_argument("table", metavar="TABLE", help="table to export")
    parser.add_argument("output", metavar="OUTPUT_DIR", help="folder to write (a path or URI; must be empty)")
    parser.add_argument("positional", nargs="*", metavar="VERSIONS STARTTIME ENDTIME",
                        help="HBase Export's positional form of --versions, --starttime and --endtime")
    add_root_argument(parser)
    parser.add_argument("--format", default="parquet", choices=FORMATS, help="file format (default parquet)")
    parser.add_argument("--mapping", default=None,
                        help="column mapping (Hive, hbase-spark or JSON catalog; @FILE reads it): typed columns "
                             "instead of raw cells")
    parser.add_argument("--serde", default=None, help="SerDe for --mapping (default as the Spark source chooses)")
    parser.add_argument("-D", dest="defines", action="append", default=[], metavar="KEY=VALUE",
                        help="a SerDe property for --mapping (repeatable)")
    parser.add_argument("--versions", type=int, default=None,
                        help="versions per column in raw-cell mode (default 1)")
    add_time_arguments(parser)
    parser.add_argument("--startrow", default=None, help="first row (inclusive, Bytes.toBytesBinary form)")
    parser.add_argument("--stoprow", default=None, help="last row (exclusive)")
    parser.add_argument("--overwrite", action="store_true", help="replace what OUTPUT_DIR holds")
    add_spark_arguments(parser)


def table_metadata(root: str, table: str) -> dict[str, Any]:
    """The table's families (with settings) and split keys, for ``_regionscan.json``."""
    conn = storage.connect(root, read_only=True)
    try:
        handle = conn.table(table)
        families = {name.decode(): dict(opts) for name, opts in handle.families().items()}
        starts = [r["start_key"] for r in handle.regions()][1:]
    finally:
        conn.close()
    return {"table": table, "families": families, "split_keys": [to_string_binary(k) for k in starts]}


_ROW_START = "hbase.mapreduce.scan.row.start"
_ROW_STOP = "hbase.mapreduce.scan.row.stop"


def _merge_hbase_forms(args: argparse.Namespace) -> None:
    """Fold HBase Export's positional VERSIONS STARTTIME ENDTIME and -D row bounds into the options."""
    if len(args.positional) > 3:
        raise InvalidArgument(f"after OUTPUT_DIR come at most VERSIONS STARTTIME ENDTIME, got {args.positional}")
    given = dict(zip(("versions", "starttime", "endtime"), args.positional))
    for name, value in given.items():
        if getattr(args, name) is not None:
            raise InvalidArgument(f"{name} is given twice: as --{name} and as the positional {value!r}")
        if name == "versions":
            try:
                value = int(value)
            except ValueError:
                raise InvalidArgument(f"VERSIONS must be an integer, got {value!r}") from None
        setattr(args, name, value)
    if args.versions is None:
        args.versions = 1
    defines = parse_defines(args.defines)
    for key, option in ((_ROW_START, "startrow"), (_ROW_STOP, "stoprow")):
        if key in defines:
            if getattr(args, option) is not None:
                raise InvalidArgument(f"give -D{key} or --{option}, not both")
            setattr(args, option, defines.pop(key))
    args.defines = [f"{k}={v}" for k, v in defines.items()]


@guarded("export")
def run(args: argparse.Namespace) -> int:
    """Export; print the summary."""
    _merge_hbase_forms(args)
    if args.versions < 1:
        raise InvalidArgument(f"--versions must be a positive integer, got {args.versions}")
    mapping = mapping_text(args.mapping)
    if mapping is None and (args.serde or args.defines):
        raise InvalidArgument("--serde and -D SerDe properties need --mapping (row bounds: "
                              "-Dhbase.mapreduce.scan.row.start/stop or --startrow/--stoprow)")
    if mapping is not None and args.versions != 1:
        raise InvalidArgument("--versions applies to raw-cell exports; a mapping reads the latest version")
    meta = table_metadata(args.root, args.table)
    config = None
    schema = CELL_RECORD
    if mapping is not None:
        config = source_config(args.root, args.table, mapping, args.serde, parse_defines(args.defines))
        serde = serde_of(config)
        schema = serde.arrow_schema
        scan = ScanRequest(columns=tuple(serde.scan_columns), include_timestamp=serde.needs_timestamps)
    else:
        scan = ScanRequest(max_versions=args.versions)
    check_format(args.format, schema)
    request = SplitRequest(args.root, args.table, scan.replace(
        time_range=time_range_of(args.starttime, args.endtime),
        row_start=parse_row_key(args.startrow, "--startrow") if args.startrow else None,
        row_stop=parse_row_key(args.stoprow, "--stoprow") if args.stoprow else None,
    ))
    output = OutputDir(args.output)
    output.prepare(args.overwrite)
    progress = Progress(f"export {args.table}", unit="records")
    try:
        with spark_session(f"export {args.table}", args.master, parse_conf_pairs(args.conf),
                           verbose=args.verbose) as spark:
            with table_splits(request) as splits:
                progress.total_tasks = len(splits)
                results = run_tasks(spark, _ExportTask(output, args.format, config), splits, progress,
                                    description=f"export {args.table}")
        parts = [r.part for r in results if r.part]
        meta.update({
            "mode": "cells" if config is None else "mapped",
            "format": args.format,
            "mapping": mapping,
            "serde": config.serde_name if config is not None else None,
            "properties": parse_defines(args.defines),
            "records": sum(r.rows for r in results),
            "parts": parts,
        })
        output.fs().write_bytes(output.task_path(METADATA), json.dumps(meta, indent=2).encode())
        output.commit(parts + [METADATA], overwrite=args.overwrite)
    except BaseException:
        output.abort()
        raise
    progress.finish()
    what = "cells" if config is None else "rows"
    print(f"exported {sum(r.rows for r in results):,} {what} of {args.table} to {args.output} "
          f"as {args.format}: {len(parts)} part file(s)")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``spark-submit jobs/export.py ...``"""
    return script_main(sys.modules[__name__], "export", argv)


if __name__ == "__main__":
    from jobs.export import main as _main  # run under the package name, so tasks pickle by reference

    sys.exit(_main())
