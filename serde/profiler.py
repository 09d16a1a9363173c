"""Where does a scan spend its time after the storage layer hands rows over?

:func:`profile_serde` runs a real scan (``table.scan_batches``) through a
SerDe along up to three paths and times every stage and every column:

``row``    fetch the row batch, assemble happybase-style rows (a dict per
           row), decode each column row by row with the SerDe's scalar
           decoders, build the row tuples, apply the predicate, hand each
           row to the consumer;
``naive``  the same with ``serde.row.dates=naive``: text dates and
           timestamps parsed with ``datetime.strptime`` per row, the classic
           SerDe hotspot;
``batch``  fetch, decode each column with its vectorized kernel, build the
           record batch, filter it, hand the batch to the consumer.

Per-column time on the row path is measured column by column over a whole
batch of assembled rows (the same scalar decoders ``deserialize`` calls),
so a slow column shows up with its own share instead of being smeared over
the row loop.  The result is a :class:`ProfileReport`: a ranked table of
hotspots (``render_text``), a speedscope flame-graph file
(``to_speedscope``) and, with matplotlib installed (the ``charts`` extra),
a chart as an HTML page with the hotspot tables (``to_html``), SVG
(``to_svg``) or PNG (``to_png``).
"""

from __future__ import annotations

import operator
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Mapping, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from serde._profile_chart import write_profile_chart
from serde._profile_output import render_speedscope, render_text
from serde.base import SerDe
from serde.registry import create_serde
from serde.rowbatch import batch_to_rows
from storage.errors import InvalidArgument
from storage.names import nearest_name

__all__ = ["PATHS", "StageTiming", "PathProfile", "Hotspot", "ProfileReport", "profile_serde"]

PATHS = ("row", "naive", "batch")

STAGES = ("fetch cells", "assemble rows", "decode", "build rows", "predicate", "hand-off")
"""Stage names in pipeline order; ``decode`` is split per column."""

_OPS: dict[str, tuple[Callable[[Any, Any], bool], Callable]] = {
    "==": (operator.eq, pc.equal),
    "!=": (operator.ne, pc.not_equal),
    "<": (operator.lt, pc.less),
    "<=": (operator.le, pc.less_equal),
    ">": (operator.gt, pc.greater),
    ">=": (operator.ge, pc.greater_equal),
}


@dataclass
class StageTiming:
    """Time spent in one stage (and, for ``decode``, one column) of one path."""

    stage: str
    column: str | None
    seconds: float

    @property
    def label(self) -> str:
        """``"decode d"`` for a column, else the stage name."""
        return self.stage if self.column is None else f"{self.stage} {self.column}"


@dataclass
class PathProfile:
    """The timings of one path over the profiled scan."""

    path: str
    serde: str
    rows: int = 0
    batches: int = 0
    rows_kept: int = 0
    timings: list[StageTiming] = field(default_factory=list)
    stats: dict[str, Any] = field(default_factory=dict)

    @property
    def total_seconds(self) -> float:
        """Sum of all stage times."""
        return sum(t.seconds for t in self.timings)

    @property
    def rows_per_second(self) -> float:
        """Rows through the whole path per second of stage time."""
        total = self.total_seconds
        return self.rows / total if total > 0 else 0.0


@dataclass(frozen=True)
class Hotspot:
    """One ranked entry: a stage or column of a path with its share of that path's time."""

    path: str
    stage: str
    column: str | None
    seconds: float
    share: float
    micros_per_row: float


@dataclass
class ProfileReport:
    """Result of :func:`profile_serde`: per-path stage timings and ranked hotspots."""

    serde: str
    columns: list[str]
    column_types: dict[str, str]
    requested_rows: int | None
    paths: dict[str, PathProfile]

    def hotspots(self, path: str | None = None) -> list[Hotspot]:
        """Stages and columns ranked by time, each with its share of its path's total."""
        out = []
        for name, profile in self.paths.items():
            if path is not None and name != path:
                continue
            total = profile.total_seconds or 1.0
            for t in profile.timings:
                per_row = t.seconds * 1e6 / profile.rows if profile.rows else 0.0
                out.append(Hotspot(name, t.stage, t.column, t.seconds, t.seconds / total, per_row))
        return sorted(out, key=lambda h: h.seconds, reverse=True)

    def top(self, path: str) -> Hotspot:
        """The biggest hotspot of one path."""
        spots = self.hotspots(path)
        if not spots:
            raise InvalidArgument(f"no timings for path {path!r}; profiled paths: {list(self.paths)}")
        return spots[0]

    def render_text(self, top: int | None = 15) -> str:
        """A plain-text report: per-path totals and the ranked hotspot table."""
        return render_text(self, top)

    def to_speedscope(self, path: str) -> dict:
        """Write a speedscope flame-graph file (one sampled profile per path); return the document."""
        return render_speedscope(self, path)

    def to_html(self, path: str) -> str:
        """Write an HTML page: the chart (inline SVG) and the hotspot tables; return the HTML.  Needs matplotlib."""
        return write_profile_chart(self, path, "to_html")

    def to_svg(self, path: str) -> str:
        """Write the chart as SVG; return it.  Needs matplotlib (the ``charts`` extra)."""
        return write_profile_chart(self, path, "to_svg")

    def to_png(self, path: str) -> None:
        """Write the chart as PNG.  Needs matplotlib (the ``charts`` extra)."""
        write_profile_chart(self, path, "to_png")

    def write_chart(self, path: str, what: str = "write_chart") -> str | None:
        """Write the chart by the suffix of ``path`` (.png, .svg, .html); ``what`` names the caller in errors."""
        return write_profile_chart(self, path, what)

    def as_dict(self) -> dict[str, Any]:
        """Everything as plain data (for JSON output)."""
        return {
            "serde": self.serde,
            "columns": list(self.columns),
            "column_types": dict(self.column_types),
            "requested_rows": self.requested_rows,
            "paths": {
                name: {
                    "rows": p.rows,
                    "batches": p.batches,
                    "rows_kept": p.rows_kept,
                    "total_seconds": p.total_seconds,
                    "rows_per_second": p.rows_per_second,
                    "timings": [{"stage": t.stage, "column": t.column, "seconds": t.seconds} for t in p.timings],
                    "stats": p.stats,
                }
                for name, p in self.paths.items()
            },
        }


class _Clock:
    """Accumulates nanoseconds per (stage, column), keeping first-seen order."""

    def __init__(self) -> None:
        self.totals: dict[tuple[str, str | None], int] = {}

    def add(self, stage: str, column: str | None, nanos: int) -> None:
        key = (stage, column)
        self.totals[key] = self.totals.get(key, 0) + nanos

    def timings(self) -> list[StageTiming]:
        order = {s: i for i, s in enumerate(STAGES)}
        items = sorted(self.totals.items(), key=lambda kv: order.get(kv[0][0], len(order)))
        return [StageTiming(stage, column, nanos / 1e9) for (stage, column), nanos in items]


def _limited(batches: Iterator[pa.RecordBatch], rows: int | None, clock: _Clock) -> Iterator[pa.RecordBatch]:
    """Pull batches (timed as ``fetch cells``) until ``rows`` rows have been seen."""
    seen = 0
    now = time.perf_counter_ns
    while rows is None or seen < rows:
        start = now()
        try:
            batch = next(batches)
        except StopIteration:
            clock.add("fetch cells", None, now() - start)
            return
        if rows is not None and seen + batch.num_rows > rows:
            batch = batch.slice(0, rows - seen)
        clock.add("fetch cells", None, now() - start)
        seen += batch.num_rows
        if batch.num_rows:
            yield batch
    close = getattr(batches, "close", None)
    if close is not None:
        close()


def _predicate(serde: SerDe, spec: tuple[str, str, Any] | None):
    """(row-wise test, batch mask function) for ``(column, op, value)``; None for no predicate."""
    if spec is None:
        return None
    if not (isinstance(spec, (tuple, list)) and len(spec) == 3):
        raise InvalidArgument(f"predicate must be (column, op, value), got {spec!r}")
    column, op, value = spec
    if column not in serde.column_names:
        raise InvalidArgument(f"predicate column {column!r} is not in the mapping {serde.column_names}")
    if op not in _OPS:
        raise InvalidArgument(f"predicate op must be one of {list(_OPS)}, got {op!r}")
    index = serde.column_names.index(column)
    py_op, arrow_op = _OPS[op]

    def row_test(row: tuple) -> bool:
        v = row[index]
        return v is not None and py_op(v, value)

    def batch_mask(batch: pa.RecordBatch) -> pa.Array:
        return arrow_op(batch.column(index), pa.scalar(value, batch.schema.field(index).type))

    return row_test, batch_mask


def _reader_label(names: Sequence[str]) -> str:
    return names[0] if len(names) == 1 else "+".join(names)


def _run_row_path(serde: SerDe, batches: Iterator[pa.RecordBatch], clock: _Clock, predicate, consumer) -> tuple[int, int, int]:
    now = time.perf_counter_ns
    readers = serde.readers
    fns = [r.row_fn() for r in readers]
    labels = [_reader_label(r.names) for r in readers]
    widths = [len(r.names) for r in readers]
    perm = serde._perm
    rows = batches_seen = kept = 0
    for batch in batches:
        start = now()
        assembled = [(r[0], r[1], r[2] if len(r) > 2 else None) for r in batch_to_rows(batch)]
        clock.add("assemble rows", None, now() - start)
        columns: list[list] = []
        for fn, label, width in zip(fns, labels, widths):
            start = now()
            out: list = []
            for key, cells, ts in assembled:
                fn(key, cells, ts, out)
            if width == 1:
                columns.append(out)
            else:
                columns.extend(out[i::width] for i in range(width))
            clock.add("decode", label, now() - start)
        start = now()
        if perm is not None:
            columns = [columns[i] for i in perm]
        tuples = list(zip(*columns))
        clock.add("build rows", None, now() - start)
        if predicate is not None:
            start = now()
            test = predicate[0]
            tuples = [t for t in tuples if test(t)]
            clock.add("predicate", None, now() - start)
        start = now()
        for t in tuples:
            consumer(t)
        clock.add("hand-off", None, now() - start)
        rows += len(assembled)
        kept += len(tuples)
        batches_seen += 1
    serde.stats.rows += rows
    serde.stats.batches += batches_seen
    return rows, batches_seen, kept


def _run_batch_path(serde: SerDe, batches: Iterator[pa.RecordBatch], clock: _Clock, predicate, consumer) -> tuple[int, int, int]:
    now = time.perf_counter_ns
    readers = serde.readers
    labels = [_reader_label(r.names) for r in readers]
    perm = serde._perm
    rows = batches_seen = kept = 0
    for batch in batches:
        start = now()
        keys = batch.column(batch.schema.get_field_index("key"))
        clock.add("assemble rows", None, now() - start)
        arrays: list = []
        for reader, label in zip(readers, labels):
            start = now()
            arrays.extend(reader.read_batch(batch, keys))
            clock.add("decode", label, now() - start)
        start = now()
        if perm is not None:
            arrays = [arrays[i] for i in perm]
        out = pa.RecordBatch.from_arrays(arrays, schema=serde.arrow_schema)
        clock.add("build rows", None, now() - start)
        if predicate is not None:
            start = now()
            out = out.filter(predicate[1](out))
            clock.add("predicate", None, now() - start)
        start = now()
        consumer(out)
        clock.add("hand-off", None, now() - start)
        rows += batch.num_rows
        kept += out.num_rows
        batches_seen += 1
    serde.stats.rows += rows
    serde.stats.batches += batches_seen
    return rows, batches_seen, kept


def _scan(table: Any, serde: SerDe, batch_size: int) -> Iterator[pa.RecordBatch]:
    if not hasattr(table, "scan_batches"):
        raise InvalidArgument(f"profile_serde needs a table with scan_batches(); got {type(table).__name__}")
    return iter(
        table.scan_batches(
            columns=serde.scan_columns,
            include_timestamp=serde.needs_timestamps,
            batch_size=batch_size,
        )
    )


def _check_columns_found(table: Any, serde: SerDe) -> None:
    """Refuse a mapping none of whose cell columns any row of a table with rows has:
    every path would profile no row at all, which says nothing about the SerDe.
    The message names the mapping's columns and, for each, the closest column the
    table's first rows hold."""
    columns = list(serde.scan_columns)
    if not hasattr(table, "scan_batches"):
        return  # _scan refuses it, naming what it is
    if not columns or any(b.num_rows for b in table.scan_batches(columns=columns, limit=1)):
        return
    present = set()
    for batch in table.scan_batches(output="cells", limit=100):
        if "family" in batch.schema.names:
            pairs = zip(batch.column("family").to_pylist(), batch.column("qualifier").to_pylist())
            present.update((f + b":" + q).decode("utf-8", "backslashreplace") for f, q in pairs)
        else:  # a source of row batches: its columns are named "cf:q"
            present.update(n for n in batch.schema.names[1:] if batch.num_rows)
        break  # the first rows are enough for a hint
    if not present:
        return  # an empty table: nothing to profile, and nothing wrong with the mapping
    named = []
    for column in columns:
        hint = nearest_name(column, present)
        named.append(f"{column} (did you mean {hint}?)" if hint else column)
    name = getattr(table, "name", None)
    raise InvalidArgument(
        f"no row of {'table ' + str(name) if name else 'the table'} has any of the mapping's columns: "
        f"{', '.join(named)}; "
        f"its rows hold {', '.join(sorted(present)[:8])}{' ...' if len(present) > 8 else ''}"
    )


def _discard(_: Any) -> None:
    """Default consumer: take the row or batch and drop it."""


def profile_serde(
    table: Any,
    mapping: Any,
    serde: str = "binary",
    rows: int | None = 100_000,
    properties: Mapping[str, Any] | None = None,
    paths: Sequence[str] = PATHS,
    predicate: tuple[str, str, Any] | None = None,
    batch_size: int = 8192,
    consumer: Callable[[Any], None] | None = None,
    warmup: bool = True,
) -> ProfileReport:
    """Profile a scan of ``table`` through a SerDe; see the module docs for the paths.

    ``table`` is a storage table (or anything with the same ``scan_batches``),
    ``mapping`` any mapping form, ``serde`` a SerDe name (or dotted path),
    ``rows`` the number of rows to scan per path (None = all).
    ``predicate`` is ``(column, op, value)`` with op one of ``== != < <= > >=``,
    applied to decoded values on each path; ``consumer`` receives each row
    (row paths) or batch (batch path) at hand-off.  With ``warmup`` one
    untimed scan runs first so that every path sees warm caches.
    """
    if rows is not None and (not isinstance(rows, int) or rows < 1):
        raise InvalidArgument(f"rows must be a positive int or None, got {rows!r}")
    if not isinstance(batch_size, int) or batch_size < 1:
        raise InvalidArgument(f"batch_size must be a positive int, got {batch_size!r}")
    unknown = [p for p in paths if p not in PATHS]
    if unknown or not paths:
        raise InvalidArgument(f"paths must be a non-empty selection of {PATHS}, got {list(paths)!r}")
    base_props = dict(properties or {})
    consumer = consumer or _discard
    reference = create_serde(serde, mapping, base_props)
    _check_columns_found(table, reference)
    if warmup:
        for _ in _limited(_scan(table, reference, batch_size), rows, _Clock()):
            pass
    results: dict[str, PathProfile] = {}
    for path in paths:
        props = dict(base_props)
        if path == "naive":
            props["serde.row.dates"] = "naive"
        sd = create_serde(serde, mapping, props)
        clock = _Clock()
        pred = _predicate(sd, predicate)
        batches = _limited(_scan(table, sd, batch_size), rows, clock)
        runner = _run_batch_path if path == "batch" else _run_row_path
        count, seen, kept = runner(sd, batches, clock, pred, consumer)
        results[path] = PathProfile(
            path=path,
            serde=sd.name,
            rows=count,
            batches=seen,
            rows_kept=kept,
            timings=clock.timings(),
            stats=sd.stats.as_dict(),
        )
    return ProfileReport(
        serde=reference.name,
        columns=reference.column_names,
        column_types={n: str(reference.column_type(n)) for n in reference.column_names},
        requested_rows=rows,
        paths=results,
    )
