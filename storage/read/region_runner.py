"""The region runner: the one loop over regions that every read runs.

A read is the engine's plan of a :class:`~storage.read.scan_request.ScanRequest`
(:func:`~storage.read.scan_request.plan_batch_scan`) and the regions it visits,
each a :class:`RegionRead`: how to open the region's view, and the key spans read
in it, in the order they are read.  Live views of a table (leased at one read point
by the table, :func:`live_reads`) and the pinned snapshot of a split (opened
read-only from exactly its pinned files and WAL records, :func:`pinned_reads`) are
both region reads, so the table, the connector and the jobs share this loop and
what it carries:

* the spans of each region, cut to it;
* the limit, counted across spans and regions (a region after the last row
  asked for is never opened);
* the metrics: ``REGIONS_SCANNED`` as each region opens, rows, result bytes
  and the store files' read counters (:mod:`storage.read.scan_counting`), and
  the scan's time;
* the multi-get of point spans: a region read whose spans are all single rows
  (an equality or ``IN`` on the key) looks them up in one pass over each store
  file (:func:`storage.region.reads.rows_of`) instead of seeking once per row;
* the early stop of a filter that is done with the table
  (``filter_all_remaining``).

The runner has two forms over one walk (:func:`reading_order`, then ``_Walk``: the
limit across regions, the stop of a done filter, the release once at the end):
:func:`run_regions` pushes the batches of the batch path, and :class:`TableScanner`
is pulled by the cell path (``next_rows(n)``: the region server's scanners, the
Thrift gateway, ``scan(path="cell")``) over one cell-at-a-time
:class:`~storage.scanner.RegionScanner` per region.

Nothing outside ``storage/read`` loops over regions or region scanners to read them
(``tests/storage/test_region_runner.py`` holds the tree to it); the pinned reads a
connector needs are in :mod:`storage.read.pinned_reads`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
import weakref
from dataclasses import dataclass
from functools import partial
from typing import Callable, ContextManager, Iterable, Iterator, Mapping, Sequence, TypeVar

import pyarrow as pa

from .. import kernels
from ..cells import Cell, cells_to_batch
from ..errors import InvalidArgument, ScannerError
from ..keys import KeyRange, intersect
from ..region.reads import cell_scanner_of, rows_of
from ..region.region_snapshots import PinnedRegion, RegionPin
from ..region.view import RegionView
from ..scanner.metrics import ScanMetrics
from ..scanner.protocol import ResultScanner
from ..scanner.region_scanner import RegionScanner
from ..scanner.scan_spec import CellScanSpec
from ..schema import FamilySettings
from ..storefile import BlockCache
from ..vfs.fs import FileSystem
from .batch_scan import scan_region_batches
from .hidden_columns import hidden_names, without_hidden
from .region_plan import RegionReadPlan
from .row_count import count_region_rows
from .scan_counting import counted_region_batches, result_bytes
from .snapshot import release_views

__all__ = ["RegionRead", "live_reads", "pinned_reads", "run_regions", "count_regions", "reading_order",
           "TableScanner", "RegionScannerFactory", "live_cell_scanner"]

_T = TypeVar("_T")

RegionScannerFactory = Callable[[CellScanSpec, ScanMetrics], RegionScanner]
"""Opens one region's cell scanner for a spec, counting into the given metrics.
The cell runner passes the scan's spec with ``limit`` lowered to the rows
still wanted."""


def reading_order(items: Sequence[_T], reverse: bool) -> list[_T]:
    """``items`` (regions, or what stands for them, in key order) in the order a scan
    reads them: a reverse scan walks from the last."""
    return list(reversed(items)) if reverse else list(items)


class _Walk:
    """What a read carries from region to region, for both forms of the runner: the
    rows still wanted (``remaining``; None: no limit), whether the read is ``over``
    (the limit reached, or a filter done with the table), and the release of what
    the read holds, run once however the read ends.  Charged once per span or
    region, never per row or batch."""

    __slots__ = ("remaining", "over", "_on_close")

    def __init__(self, limit: int | None, on_close: Callable[[], object] | None):
        self.remaining = limit
        self.over = False  # the first region opens even for a limit of 0 (the batch path's way)
        self._on_close = on_close

    def counted(self, rows: int, filter_done: bool) -> bool:
        """A span or region read ``rows`` rows, its filter done or not; True when the
        read is over."""
        if self.remaining is not None:
            self.remaining -= rows
            if self.remaining <= 0:
                self.over = True
        if filter_done:
            self.over = True
        return self.over

    def end(self) -> None:
        """The read is over: release what it holds (once)."""
        self.over = True
        on_close, self._on_close = self._on_close, None
        if on_close is not None:
            on_close()


@dataclass(frozen=True)
class RegionRead:
    """One region a read visits: ``opened()`` is a context manager that gives its
    view (and closes what it opened on exit, told of an error that passed through
    it), ``spans`` the key ranges read in it, in reading order."""

    opened: Callable[[], ContextManager[RegionView]]
    spans: Sequence[KeyRange]


def live_reads(plan: Sequence[tuple[RegionView, bytes, bytes | None]]) -> list[RegionRead]:
    """Region reads of leased live views (``(view, low, high)`` in reading order, as a
    table plans them): consecutive spans of one view make one region read; the
    views stay leased by their owner, who releases them after the read."""
    reads: list[RegionRead] = []
    last = None
    spans: list[KeyRange] = []
    for view, lo, hi in plan:
        if view is not last:
            if last is not None:
                reads.append(RegionRead(partial(contextlib.nullcontext, last), spans))
            last, spans = view, []
        spans.append((lo, hi))
    if last is not None:
        reads.append(RegionRead(partial(contextlib.nullcontext, last), spans))
    return reads


def pinned_reads(table_fs: FileSystem, table: str, pins: Sequence[RegionPin],
                 families: Mapping[str, FamilySettings], spans: Sequence[KeyRange],
                 cache: BlockCache | None = None, reverse: bool = False,
                 cache_results: bool | None = None) -> Iterator[RegionRead]:
    """Region reads of pinned regions (in key order; ``reverse``: the other way, spans
    too): each opens when the runner reaches it, from exactly its pinned files and WAL
    records (:class:`~storage.region.region_snapshots.PinnedRegion`).  Regions that no
    span reaches are left out.  ``cache_results``: keep each region's decoded WAL records
    for the next read of its pin (the scan's option; :mod:`storage.region.replay_memo`)."""
    for pin in reading_order(pins, reverse):
        region_spans = intersect(list(spans), [(pin.start, pin.end)])
        if not region_spans:
            continue
        if reverse:
            region_spans.reverse()
        yield RegionRead(partial(_pinned_view, table_fs, table, pin, dict(families), cache, cache_results),
                         region_spans)


@contextlib.contextmanager
def _pinned_view(table_fs: FileSystem, table: str, pin: RegionPin, families: dict[str, FamilySettings],
                 cache: BlockCache | None, cache_results: bool | None) -> Iterator[RegionView]:
    # an error of the read comes back in at the yield, so PinnedRegion discards its readers
    with PinnedRegion(table_fs, table, pin, families, cache, cache_results) as region:
        yield region.view


def run_regions(scan: RegionReadPlan, reads: Iterable[RegionRead], metrics: ScanMetrics | None = None,
                on_close: Callable[[], None] | None = None) -> Iterator[pa.RecordBatch]:
    """The batches of ``scan`` over ``reads``, region after region, span after span.

    ``scan.limit`` counts rows across all of them; ``metrics`` (None: nothing
    counted) is charged as the module docstring says.  A consumer that stops early
    closes the region it was reading (close the returned generator).  ``on_close``
    runs when the read ends, however it ends (a table releases the views it leased
    for the read; here rather than in a wrapping generator, which would cost a
    frame per batch)."""
    started = time.perf_counter()
    walk = _Walk(scan.limit, on_close)
    flt = scan.filter
    try:
        for read in reads:
            with read.opened() as view:
                if metrics is not None:
                    metrics.regions_scanned += 1
                points = _point_gets(scan, read.spans, walk.remaining)
                if points is not None:
                    yield from _multi_get(view, points, scan, metrics)
                    continue
                for lo, hi in read.spans:
                    span_scan = dataclasses.replace(scan, low=lo, high=hi, limit=walk.remaining)
                    rows_read = 0
                    if metrics is None and walk.remaining is None:
                        yield from scan_region_batches(view, span_scan, None)
                    else:
                        for batch, rows in counted_region_batches(view, span_scan, metrics):
                            rows_read += rows
                            yield batch
                    if walk.counted(rows_read, flt is not None and flt.filter_all_remaining()):
                        return
    finally:
        if metrics is not None:
            metrics.time_ms += (time.perf_counter() - started) * 1000
        walk.end()


def count_regions(reads: Iterable[RegionRead], metrics: ScanMetrics | None = None) -> int:
    """The visible rows of ``reads``' spans, region by region: from the version 2
    block indexes where they can answer, else by the row-counting scan
    (:func:`storage.read.row_count.count_region_rows`); ``metrics`` counts the
    regions opened."""
    total = 0
    for read in reads:
        with read.opened() as view:
            if metrics is not None:
                metrics.regions_scanned += 1
            total += sum(count_region_rows(view, lo, hi) for lo, hi in read.spans)
    return total


def _point_gets(scan: RegionReadPlan, spans: Sequence[KeyRange], remaining: int | None) -> list[bytes] | None:
    """The rows of ``spans`` when they are all single rows (more than one) that a
    multi-get can answer as the scan would (no filter, no limit, forward, resolved)."""
    if len(spans) < 2 or scan.filter is not None or scan.raw or scan.reverse or remaining is not None:
        return None
    points = [lo for lo, hi in spans if hi == lo + b"\x00"]
    return points if len(points) == len(spans) else None


def _multi_get(view: RegionView, keys: list[bytes], scan: RegionReadPlan,
               metrics: ScanMetrics | None) -> Iterator[pa.RecordBatch]:
    """The rows of ``keys`` (ascending) in a region as the batch scan would give them:
    the engine's multi-get (each store file looks every key up in one pass over its
    blocks), then the found cells as one cell or row batch, cut to ``batch_size``."""
    spec = CellScanSpec(columns=scan.columns, min_timestamp=scan.min_timestamp,
                        max_timestamp=scan.max_timestamp, max_versions=scan.max_versions)
    found = rows_of(view, keys, spec)
    if not found:
        return
    cells = cells_to_batch([c for key in sorted(found) for c in found[key]])
    if metrics is not None:
        metrics.rows_scanned += len(found)
        metrics.cells_scanned += cells.num_rows
    if scan.output == "rows":
        columns = list(scan.columns) if scan.columns else [name.encode() for name in view.stores]
        out = kernels.cells_to_rows(cells, columns, include_timestamp=scan.include_timestamp)
        if scan.hidden_columns:  # as scan_region_batches leaves them out
            out = without_hidden(out, hidden_names(scan.hidden_columns))
    else:
        out = cells
    if metrics is not None:
        metrics.bytes_in_results += result_bytes(out)
    for offset in range(0, out.num_rows, scan.batch_size):
        yield out.slice(offset, scan.batch_size)


class TableScanner(ResultScanner):
    """The runner's pull form: results of a cell-at-a-time scan over several regions.

    ``factories`` are in ascending region key order, one per region the scan
    touches, each opening that region's :class:`~storage.scanner.RegionScanner`
    when the scan reaches it; the walk is the batch form's (:class:`_Walk`: reading
    order, limit across regions, a done filter ends the table scan, ``on_close``
    run once when the scan ends or is closed).  ``next_rows(n)`` fills up to ``n``
    results across region boundaries (fewer when ``max_result_size`` ends a call
    early), ``[]`` at the end.
    """

    def __init__(
        self,
        factories: Sequence[RegionScannerFactory],
        spec: CellScanSpec,
        metrics: ScanMetrics | None = None,
        on_close: Callable[[], object] | None = None,
    ):
        self._factories = iter(reading_order(factories, spec.reverse))
        self._spec = spec
        self.metrics = metrics if metrics is not None else ScanMetrics()
        self._walk = _Walk(spec.limit, on_close)
        self._current: RegionScanner | None = None
        self._closed = False

    def _region(self) -> RegionScanner | None:
        """The region scanner to read from, opening the next one if the walk goes on."""
        if self._current is None and not self._walk.over:
            factory = next(self._factories, None)
            if factory is None:
                self._walk.end()
                return None
            spec = self._spec
            if self._walk.remaining is not None:
                spec = dataclasses.replace(spec, limit=self._walk.remaining)
            self._current = factory(spec, self.metrics)
        if self._current is None:
            self._walk.end()
        return self._current

    def _finish_region(self) -> None:
        region, self._current = self._current, None
        region.close()
        if self._walk.counted(region.rows_returned, region.filter_done):
            self._walk.end()

    def next_rows(self, n: int | None = None) -> list[list[Cell]]:
        """Up to ``n`` results (default ``spec.caching``); ``[]`` at the end."""
        if self._closed:
            raise ScannerError("table scanner used after close")
        if n is None:
            n = self._spec.caching
        elif not isinstance(n, int) or n < 1:
            raise InvalidArgument(f"n={n!r}: expected a positive number of results")
        out: list = []
        while len(out) < n:
            region = self._region()
            if region is None:
                break
            out += region.next_rows(n - len(out))
            if region.exhausted:
                self._finish_region()
            elif len(out) < n:
                break  # max_result_size ended the call
        return out

    def close(self) -> None:
        """Close the open region scanner; later calls raise :class:`ScannerError`."""
        if not self._closed:
            self._closed = True
            if self._current is not None:
                self._current.close()
                self._current = None
            self._walk.end()


def live_cell_scanner(views: Sequence[RegionView], spec: CellScanSpec, low: bytes, high: bytes | None,
                      metrics: ScanMetrics | None = None) -> TableScanner:
    """The cell runner over leased live views (in key order) of ``[low, high)``: each
    region's cell scanner opens when the scan reaches it, bounded to the range through
    its region bounds (one form for both directions); the views are released when the
    scan ends, is closed, or is dropped unclosed."""
    views = list(views)
    factories = [partial(_open_cell_region, view, low, high) for view in views]
    scanner = TableScanner(factories, spec, metrics, on_close=partial(release_views, views))
    weakref.finalize(scanner, release_views, views)  # a scanner never closed
    return scanner


def _open_cell_region(view: RegionView, low: bytes, high: bytes | None, spec: CellScanSpec,
                      metrics: ScanMetrics) -> RegionScanner:
    return cell_scanner_of(view, spec, metrics, low, high)
