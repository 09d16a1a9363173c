"""import: load Parquet, Avro or CSV files back into a table (the other half of ``export``).

    regionscan import --root R TABLE INPUT [INPUT ...] [--format parquet|avro|csv]
                      [--mapping MAPPING [--serde NAME] [-Dprop=value ...]] [--create]
    spark-submit jobs/import_.py --root R TABLE INPUT ...

An INPUT is a file or a folder (its files, skipping ``_*`` and ``.*``).
An export folder's ``_regionscan.json`` supplies the defaults: the mode
(raw cells or a mapping), the mapping and SerDe, the format, and, with
``--create``, the families and split keys of a missing table.  Without
it, files are raw cells ``(row, family, qualifier, timestamp, value)``
unless ``--mapping`` is given, and the format comes from ``--format`` or
each file's extension.

One Spark task per file stages store files through the bulk loader; the
driver commits them all at once after every task has succeeded, so a
failed import leaves the table as it was.  Raw cells keep their
timestamps; mapped rows get the job's start time (or their mapped
``:timestamp`` column).
"""

if __name__ == "__main__":  # spark-submit jobs/import_.py: make the repository importable
    import os as _os
    import sys as _sys

    _here = _os.path.dirname(_os.path.abspath(__file__))
    _sys.path[:] = [p for p in _sys.path if _os.path.abspath(p or ".") != _here]
    _sys.path.insert(0, _os.path.dirname(_here))

import argparse
import json
import sys
import time
from dataclasses import dataclass
from typing import Any, Sequence

import pyarrow as pa

import storage
from connector.options import to_bytes_binary
from connector.source_config import SourceConfig
from storage import CELL_SCHEMA, CellType, InvalidArgument, TableNotFound
from storage.engine import FileSystem, parse_column

from jobs._args import add_root_argument, guarded, parse_defines, script_main
from jobs._bulk import LoadTarget, StageResult, drop_created_table, prepare_target, run_load
from jobs._formats import FORMATS, check_format, format_of, read_part
from jobs._inputs import InputFile, list_inputs
from jobs._mapping import mapping_text, serde_of, source_config
from jobs._progress import Progress
from jobs._spark import add_spark_arguments, parse_conf_pairs, spark_session
from jobs.export import CELL_RECORD, METADATA

__all__ = ["add_arguments", "run", "main", "read_metadata", "cells_of"]


def read_metadata(paths: Sequence[str]) -> dict[str, Any] | None:
    """The first ``_regionscan.json`` among the input folders, or None."""
    for path in paths:
        fs = FileSystem(path)
        if fs.is_dir("") and fs.exists(METADATA):
            try:
                return json.loads(fs.read_bytes(METADATA))
            except ValueError as exc:
                raise InvalidArgument(f"{fs.uri(METADATA)} is not valid JSON: {exc}") from None
    return None


def cells_of(records: pa.Table) -> pa.Table:
    """Raw-cell records -> put cells in the engine's cell schema."""
    kind = CELL_SCHEMA.field("type").type
    puts = pa.repeat(pa.scalar(int(CellType.PUT), kind), records.num_rows).cast(kind)
    return pa.Table.from_arrays(
        [records.column("row"), records.column("family"), records.column("qualifier"), records.column("timestamp"),
         puts, records.column("value")],
        schema=CELL_SCHEMA,
    )


@dataclass(frozen=True)
class _ImportTask:
    """The task: read one file, stage its cells or rows."""

    target: LoadTarget
    fmt: str | None  # None: from each file's extension
    config: SourceConfig | None  # None: raw cells

    def __call__(self, item: InputFile) -> StageResult:
        fmt = self.fmt or format_of(item.name)
        serde = serde_of(self.config) if self.config is not None else None
        schema = serde.arrow_schema if serde is not None else CELL_RECORD
        result = StageResult(nbytes=item.size)
        task = self.target.open_task(f"import-{item.index:05d}")
        try:
            with item.open() as source:
                for table in read_part(fmt, source, schema):
                    if not table.num_rows:
                        continue
                    if serde is None:
                        if table.column("row").null_count or table.column("family").null_count:
                            raise InvalidArgument(f"{item.path}: a cell record has a null row or family")
                        task.add_cells(cells_of(table))
                    else:
                        task.add(serde.serialize_batch(table))
                    result.rows += table.num_rows
            result.files = task.finish()
        except (InvalidArgument, ValueError, pa.ArrowInvalid) as exc:
            task.abandon()  # bad data: no retry can fix it
            raise InvalidArgument(f"{item.path}: {exc}") from None
        except OSError as exc:
            task.abandon()  # maybe transient: Spark retries the task, and the message names the file
            raise OSError(f"{item.path}: {exc}") from exc
        except BaseException:
            task.abandon()
            raise
        result.cells = sum(f.cells for f in result.files)
        return result


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Import's arguments."""
    parser.add_argument("table", metavar="TABLE", help="table to load into")
    parser.add_argument("inputs", nargs="+", metavar="INPUT", help="files or folders (paths or URIs)")
    add_root_argument(parser)
    parser.add_argument("--format", default=None, choices=FORMATS,
                        help="file format (default: the export's, or each file's extension)")
    parser.add_argument("--mapping", default=None, help="column mapping of typed files (default: the export's)")
    parser.add_argument("--serde", default=None, help="SerDe for the mapping (default: the export's)")
    parser.add_argument("-D", dest="defines", action="append", default=[], metavar="KEY=VALUE",
                        help="a SerDe property (repeatable)")
    parser.add_argument("--create", action="store_true",
                        help="create a missing table (families and splits from the export, else from the mapping)")
    add_spark_arguments(parser)


def _families_of(config: SourceConfig | None, meta: dict | None) -> dict[str, dict]:
    if meta and meta.get("families"):
        return {name: dict(opts) for name, opts in meta["families"].items()}
    if config is not None:
        families = {parse_column(c.encode())[0].decode() for c in serde_of(config).scan_columns}
        return {f: {} for f in sorted(families)}
    raise InvalidArgument("--create needs the families: import an export folder (with _regionscan.json) "
                          "or give --mapping")


def _ensure_table(root: str, table: str, create: bool, config: SourceConfig | None, meta: dict | None) -> bool:
    conn = storage.connect(root)
    try:
        if conn.is_table_available(table):
            return False
        if not create:
            raise TableNotFound(f"{conn.missing_table(table)}; pass --create to create it")
        splits = [to_bytes_binary(k, "split key") for k in (meta or {}).get("split_keys", [])]
        conn.create_table(table, _families_of(config, meta), split_keys=splits or None)
        return True
    finally:
        conn.close()  # release the writer lock: the commit takes it


@guarded("import")
def run(args: argparse.Namespace) -> int:
    """Import; print the summary."""
    meta = read_metadata(args.inputs)
    mapping = mapping_text(args.mapping) or (meta or {}).get("mapping")
    fmt = args.format or (meta or {}).get("format")
    properties = dict((meta or {}).get("properties") or {})
    defines = parse_defines(args.defines)
    for key in defines:
        if key.startswith("import."):  # HBase Import's own settings (import.bulk.output, import.filter.class...)
            raise InvalidArgument(f"-D{key} is not supported: import always stages store files and commits "
                                  "them into the table atomically (no separate bulk-output step); -D gives SerDe "
                                  "properties")
    properties.update(defines)
    inputs = list_inputs(args.inputs)
    if fmt is not None:
        inputs = [i for i in inputs if format_of(i.name) in (fmt, None)]
        if not inputs:
            raise InvalidArgument(f"no {fmt} files under {', '.join(args.inputs)}")
    else:
        unknown = [i.path for i in inputs if format_of(i.name) is None]
        if unknown:
            raise InvalidArgument(f"cannot tell the format of {unknown[0]}: give --format")
    config = None
    if mapping is not None:
        serde = args.serde or (meta or {}).get("serde")
        config = source_config(args.root, args.table, mapping, serde, properties)
    for f in {fmt} if fmt else {format_of(i.name) for i in inputs}:
        check_format(f, serde_of(config).arrow_schema if config is not None else CELL_RECORD)
    created = _ensure_table(args.root, args.table, args.create, config, meta)
    # raw files hold one record per cell: the count is of cells, as the summary line says
    progress = Progress(f"import {args.table}", total_bytes=sum(i.size for i in inputs),
                        unit="cells" if config is None else "rows")
    started = time.perf_counter()
    try:
        target = prepare_target(args.root, args.table)
        with spark_session(f"import {args.table}", args.master, parse_conf_pairs(args.conf),
                           verbose=args.verbose) as spark:
            progress.total_tasks = len(inputs)
            report, results = run_load(spark, target, _ImportTask(target, fmt, config), inputs, progress)
    except BaseException:
        if created:
            drop_created_table(args.root, args.table)
        raise
    progress.finish()
    if created:
        print(f"created table {args.table}")
    what = "cells" if config is None else "rows"
    print(f"imported {sum(r.rows for r in results):,} {what} from {len(inputs)} file(s) into {args.table}: "
          f"{report.cells:,} cells in {report.files} store file(s) over {len(report.regions)} region(s), "
          f"{time.perf_counter() - started:.2f} s")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``spark-submit jobs/import_.py ...``"""
    return script_main(sys.modules[__name__], "import", argv)


if __name__ == "__main__":
    from jobs.import_ import main as _main  # run under the package name, so tasks pickle by reference

    sys.exit(_main())
