"""import_tsv: load delimited text files into a table, as HBase's ImportTsv.

    regionscan import_tsv --root R -Dimporttsv.columns=HBASE_ROW_KEY,cf:a,cf:b TABLE INPUT [INPUT ...]
    spark-submit jobs/import_tsv.py --root R '-Dimporttsv.columns=...' TABLE INPUT ...

Settings (``-Dkey=value`` or ``-D key=value``), with ImportTsv's names:

* ``importtsv.columns`` (required): one entry per field, ``HBASE_ROW_KEY``
  (exactly once), ``HBASE_TS_KEY`` (at most once: the cell timestamp in
  ms), or ``family:qualifier`` (``family`` alone is the empty qualifier);
* ``importtsv.separator``: one byte, default tab (``\\t`` may be written);
* ``importtsv.skip.bad.lines``: default true: bad lines are counted and
  reported and the rest is loaded; false: the first bad line fails the job;
* ``importtsv.timestamp``: timestamp of every cell without ``HBASE_TS_KEY``
  (default: the time the job starts);
* ``importtsv.skip.empty.columns``: default false: an empty field writes an
  empty value; true: it writes no cell;
* ``create.table``: default yes: a missing table is created with the
  families the columns name.

Any other ``-D`` key is refused, naming the nearest known one.  When every
line is bad (a wrong separator or column list, most likely) nothing is
committed, a table the job created is dropped, and the job fails.

A line is bad when it has more fields than columns, no row key or an empty
one, or (with ``HBASE_TS_KEY``) no timestamp or one that is not a
non-negative integer.  Missing trailing fields just write no cell.

One Spark task per input file parses it with Arrow kernels (no Python loop
per line) and stages store files through the bulk loader; the driver
commits all of them at once when every task has succeeded, so a failed
job leaves the table as it was.
"""

if __name__ == "__main__":  # spark-submit jobs/import_tsv.py: make the repository importable
    import os as _os
    import sys as _sys

    _here = _os.path.dirname(_os.path.abspath(__file__))
    _sys.path[:] = [p for p in _sys.path if _os.path.abspath(p or ".") != _here]
    _sys.path.insert(0, _os.path.dirname(_here))

import argparse
import sys
import time
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

import storage
from storage import InvalidArgument
from storage.engine import check_known_names, validate_family_name

from jobs._args import add_root_argument, guarded, parse_bool, parse_defines, script_main
from jobs._bulk import LoadTarget, StageResult, drop_created_table, prepare_target, run_load
from jobs._inputs import InputFile, list_inputs, read_line_chunks
from jobs._progress import Progress
from jobs._spark import JobFailed, TaskFailure, add_spark_arguments, parse_conf_pairs, spark_session
from jobs._writable import check_writable_folder

__all__ = ["add_arguments", "run", "main", "TsvSpec", "BadLine", "ParsedChunk", "parse_spec", "parse_tsv",
           "ROW_KEY", "TS_KEY"]

ROW_KEY = "HBASE_ROW_KEY"
TS_KEY = "HBASE_TS_KEY"
_UNSUPPORTED = ("HBASE_ATTRIBUTES_KEY", "HBASE_CELL_VISIBILITY", "HBASE_CELL_TTL")
_KNOWN = {"importtsv.columns", "importtsv.separator", "importtsv.skip.bad.lines", "importtsv.timestamp",
          "importtsv.skip.empty.columns", "create.table"}
_SAMPLES = 20  # bad lines kept per task for the report


@dataclass(frozen=True)
class TsvSpec:
    """The parsed ImportTsv settings."""

    columns: tuple[str, ...]  # as given, ROW_KEY / TS_KEY / "family:qualifier"
    separator: bytes = b"\t"
    skip_bad_lines: bool = True
    skip_empty_columns: bool = False
    timestamp: int | None = None
    create_table: bool = True

    @property
    def key_index(self) -> int:
        return self.columns.index(ROW_KEY)

    @property
    def ts_index(self) -> int | None:
        return self.columns.index(TS_KEY) if TS_KEY in self.columns else None

    @property
    def cell_columns(self) -> list[tuple[int, str]]:
        """(field index, ``family:qualifier``) of every field that becomes a cell."""
        return [(i, c) for i, c in enumerate(self.columns) if c not in (ROW_KEY, TS_KEY)]

    @property
    def families(self) -> list[str]:
        return sorted({c.split(":", 1)[0] for _, c in self.cell_columns})


@dataclass
class BadLine:
    """A rejected line: where, why, and its text (shortened)."""

    file: str
    line: int
    reason: str
    text: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.reason}: {self.text}"


@dataclass
class ParsedChunk:
    """The good lines of a chunk as a row batch, and the bad ones."""

    rows: pa.RecordBatch | None
    lines: int
    bad_count: int = 0
    bad: list[BadLine] = field(default_factory=list)


def _separator(text: str) -> bytes:
    # "\t" as typed in a shell means tab, as does the word "tab"
    raw = b"\t" if text in ("\\t", "tab", "TAB") else text.encode("utf-8")
    if len(raw) != 1 or raw in (b"\n", b"\r"):
        raise InvalidArgument(f"importtsv.separator must be a single byte other than a line end, got {text!r}")
    return raw


def parse_spec(defines: dict[str, str]) -> TsvSpec:
    """Check the ``-D`` settings and build the spec; errors name the setting."""
    if "importtsv.bulk.output" in defines:
        raise InvalidArgument("importtsv.bulk.output is not needed: import_tsv always stages store files and "
                              "commits them into the table atomically at the end")
    check_known_names(defines, _KNOWN, "setting -D")  # a misspelled key would otherwise be ignored
    text = defines.get("importtsv.columns")
    if not text:
        raise InvalidArgument("-Dimporttsv.columns is required, e.g. -Dimporttsv.columns=HBASE_ROW_KEY,cf:a,cf:b")
    columns = []
    for raw in text.split(","):
        name = raw.strip()
        if not name:
            raise InvalidArgument(f"importtsv.columns has an empty entry: {text!r}")
        if name in _UNSUPPORTED:
            raise InvalidArgument(f"importtsv.columns: {name} is not supported (regionscan has no cell attributes, "
                                  "visibility labels or per-cell TTLs)")
        if name not in (ROW_KEY, TS_KEY):
            family, _, qualifier = name.partition(":")
            try:
                validate_family_name(family)
            except InvalidArgument as exc:
                raise InvalidArgument(f"importtsv.columns entry {name!r}: {exc}") from None
            name = f"{family}:{qualifier}"
        if name in columns:
            raise InvalidArgument(f"importtsv.columns names {name!r} twice")
        columns.append(name)
    if ROW_KEY not in columns:
        raise InvalidArgument(f"importtsv.columns must contain {ROW_KEY} exactly once: {text!r}")
    if len([c for c in columns if c not in (ROW_KEY, TS_KEY)]) == 0:
        raise InvalidArgument(f"importtsv.columns names no family:qualifier column: {text!r}")
    timestamp = None
    if "importtsv.timestamp" in defines:
        given = defines["importtsv.timestamp"]
        try:
            timestamp = int(given)
        except ValueError:
            raise InvalidArgument(f"importtsv.timestamp must be milliseconds, got {given!r}") from None
        if timestamp < 0:
            raise InvalidArgument(f"importtsv.timestamp must not be negative, got {timestamp}")
    create = defines.get("create.table", "yes")
    return TsvSpec(
        columns=tuple(columns),
        separator=_separator(defines.get("importtsv.separator", "\t")),
        skip_bad_lines=parse_bool(defines.get("importtsv.skip.bad.lines", "true"), "importtsv.skip.bad.lines"),
        skip_empty_columns=parse_bool(defines.get("importtsv.skip.empty.columns", "false"),
                                      "importtsv.skip.empty.columns"),
        timestamp=timestamp,
        create_table=parse_bool(create, "create.table"),
    )


def _field(values: pa.Array, starts: np.ndarray, counts: np.ndarray, j: int) -> pa.Array:
    """Field ``j`` of every line (null where the line is shorter)."""
    valid = counts > j
    index = pa.array(starts + j, mask=~valid)
    return values.take(index)


def _line_text(lines: pa.Array, i: int) -> str:
    raw = lines[i].as_py()
    text = raw.decode("utf-8", "backslashreplace")
    return text if len(text) <= 200 else text[:200] + "..."


def parse_tsv(data: bytes, spec: TsvSpec, file: str = "<input>", first_line: int = 1) -> ParsedChunk:
    """Parse whole lines into a row batch (``key``, ``cf:q`` [, ``cf:q@ts``]) with Arrow kernels."""
    lines = pc.split_pattern(pa.array([data], pa.large_binary()), pattern=b"\n").values
    if len(lines) and data.endswith(b"\n"):
        lines = lines.slice(0, len(lines) - 1)  # the empty piece after the last line end
    n = len(lines)
    if not n:
        return ParsedChunk(None, 0)
    # a CRLF line end leaves its CR on the line
    lines = pc.if_else(pc.ends_with(lines, pattern=b"\r"), pc.binary_slice(lines, 0, -1), lines)
    fields = pc.split_pattern(lines, pattern=spec.separator)
    counts = pc.list_value_length(fields).to_numpy(zero_copy_only=False).astype(np.int64)
    offsets = fields.offsets.to_numpy().astype(np.int64)[:-1]
    values = fields.values
    reasons = np.zeros(n, dtype=np.int8)  # 0 = good
    why = {1: "Excessive columns", 2: "No row key", 3: "Empty row key", 4: "No timestamp", 5: "Invalid timestamp"}
    reasons[counts > len(spec.columns)] = 1
    key = _field(values, offsets, counts, spec.key_index)
    key_len = pc.binary_length(key).fill_null(-1).to_numpy(zero_copy_only=False)
    reasons[(reasons == 0) & (key_len < 0)] = 2
    reasons[(reasons == 0) & (key_len == 0)] = 3
    stamps = None
    if spec.ts_index is not None:
        raw_ts = _field(values, offsets, counts, spec.ts_index)
        missing = raw_ts.is_null().to_numpy(zero_copy_only=False)
        ok = pc.match_substring_regex(raw_ts, r"^[0-9]{1,18}$").fill_null(False).to_numpy(zero_copy_only=False)
        reasons[(reasons == 0) & missing] = 4
        reasons[(reasons == 0) & ~ok] = 5
        digits = pc.if_else(pa.array(ok), raw_ts, pa.scalar(b"0", raw_ts.type))
        stamps = digits.cast(pa.large_string()).cast(pa.int64())
    bad_rows = np.flatnonzero(reasons)
    bad = [BadLine(file, first_line + int(i), why[int(reasons[i])], _line_text(lines, int(i)))
           for i in bad_rows[:_SAMPLES]]
    if len(bad_rows) and not spec.skip_bad_lines:
        raise TaskFailure(f"bad line (importtsv.skip.bad.lines=false): {bad[0]}")
    good = pa.array(reasons == 0)
    names, arrays = ["key"], [key.filter(good).cast(pa.binary())]
    stamp_column = stamps.filter(good) if stamps is not None else None
    for j, column in spec.cell_columns:
        value = _field(values, offsets, counts, j)
        if spec.skip_empty_columns:
            value = pc.if_else(pc.equal(pc.binary_length(value), 0), pa.scalar(None, value.type), value)
        names.append(column)
        arrays.append(value.filter(good).cast(pa.binary()))
        if stamp_column is not None:
            names.append(f"{column}@ts")
            arrays.append(stamp_column)
    rows = pa.RecordBatch.from_arrays(arrays, names=names)
    return ParsedChunk(rows, n, len(bad_rows), bad)


@dataclass(frozen=True)
class _TsvTask:
    """The task: parse one input file and stage its cells."""

    target: LoadTarget
    spec: TsvSpec

    def __call__(self, item: InputFile) -> StageResult:
        result = StageResult(extra={"bad_count": 0, "bad": [], "lines": 0})
        task = self.target.open_task(f"tsv-{item.index:05d}")
        try:
            line = 1
            with item.open() as source:
                for chunk in read_line_chunks(source):
                    parsed = parse_tsv(chunk, self.spec, item.path, line)
                    line += parsed.lines
                    result.extra["lines"] += parsed.lines
                    result.extra["bad_count"] += parsed.bad_count
                    room = _SAMPLES - len(result.extra["bad"])
                    result.extra["bad"].extend(parsed.bad[:max(room, 0)])
                    if parsed.rows is not None and parsed.rows.num_rows:
                        task.add(parsed.rows)
                        result.rows += parsed.rows.num_rows
                    result.nbytes += len(chunk)
            result.files = task.finish()
        except BaseException:
            task.abandon()
            raise
        result.cells = sum(f.cells for f in result.files)
        return result


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """ImportTsv's arguments: -D settings, the table, the inputs."""
    parser.add_argument("-D", dest="defines", action="append", default=[], metavar="KEY=VALUE",
                        help="an ImportTsv setting, e.g. -Dimporttsv.columns=HBASE_ROW_KEY,cf:a (repeatable)")
    parser.add_argument("table", metavar="TABLE", help="table to load into")
    parser.add_argument("inputs", nargs="+", metavar="INPUT", help="input files or folders (paths or URIs)")
    add_root_argument(parser)
    add_spark_arguments(parser)


def _ensure_table(root: str, table: str, spec: TsvSpec) -> bool:
    """Create the table when allowed and missing; True if created.  Check its families."""
    conn = storage.connect(root)
    try:
        created = False
        if not conn.is_table_available(table):
            if not spec.create_table:
                raise InvalidArgument(f"table {table} does not exist under {root} (and create.table=no)")
            conn.create_table(table, {f: {} for f in spec.families})
            created = True
        families = {f.decode() for f in conn.table(table).families()}
    finally:
        conn.close()  # release the writer lock: the commit takes it
    missing = [f for f in spec.families if f not in families]
    if missing:
        raise InvalidArgument(f"importtsv.columns names families {missing} that table {table} lacks "
                              f"(families: {sorted(families)})")
    return created


def _refuse_all_bad(results: list) -> None:
    """Commit nothing when every line was bad: a wrong separator or column list, not bad data."""
    lines = sum(r.extra["lines"] for r in results)
    bad = sum(r.extra["bad_count"] for r in results)
    if lines and bad == lines:
        first = next((b for r in results for b in r.extra["bad"]), None)
        raise JobFailed(f"all {lines} line(s) are bad, nothing was loaded (check importtsv.separator and "
                        f"importtsv.columns); the first: {first}")


@guarded("import_tsv")
def run(args: argparse.Namespace) -> int:
    """Parse, stage and commit; print the counts and the bad lines."""
    spec = parse_spec(parse_defines(args.defines))
    inputs = list_inputs(args.inputs)
    check_writable_folder(args.root, "--root")  # the load writes store files under it
    created = _ensure_table(args.root, args.table, spec)
    progress = Progress(f"import_tsv {args.table}", total_bytes=sum(i.size for i in inputs))
    started = time.perf_counter()
    try:
        target = prepare_target(args.root, args.table)
        if spec.timestamp is not None:
            target = LoadTarget(target.root, target.table, target.job_id, target.regions, target.families,
                                spec.timestamp)
        with spark_session(f"import_tsv {args.table}", args.master, parse_conf_pairs(args.conf),
                           verbose=args.verbose) as spark:
            progress.total_tasks = len(inputs)
            report, results = run_load(spark, target, _TsvTask(target, spec), inputs, progress,
                                       check=_refuse_all_bad)
    except BaseException:
        if created:
            drop_created_table(args.root, args.table)
        raise
    progress.finish()
    lines = sum(r.extra["lines"] for r in results)
    bad_count = sum(r.extra["bad_count"] for r in results)
    samples = [b for r in results for b in r.extra["bad"]]
    if created:
        print(f"created table {args.table} with families {', '.join(spec.families)}")
    print(f"Lines read={lines}")
    print(f"Bad Lines={bad_count}")
    print(f"Rows loaded={sum(r.rows for r in results)}, cells={report.cells}, store files={report.files}, "
          f"regions={len(report.regions)}, {time.perf_counter() - started:.2f} s")
    if bad_count:
        print(f"import_tsv: skipped {bad_count} bad line(s); the first {min(len(samples), _SAMPLES)}:", file=sys.stderr)
        for bad in samples[:_SAMPLES]:
            print(f"  {bad}", file=sys.stderr)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``spark-submit jobs/import_tsv.py ...``"""
    return script_main(sys.modules[__name__], "import_tsv", argv)


if __name__ == "__main__":
    from jobs.import_tsv import main as _main  # run under the package name, so tasks pickle by reference

    sys.exit(_main())
