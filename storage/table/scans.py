"""Scan planning over a table: a checked :class:`~storage.read.scan_request.ScanRequest`
cut into region views, and the batch, row and cell scanners built on them."""

from __future__ import annotations

import dataclasses
import time
import weakref
from typing import Any, Iterator, Sequence

import pyarrow as pa

from ..columns import parse_column
from ..errors import InvalidArgument
from ..read.batch_scan import BatchScan, scan_region_batches
from ..read.raw import raw_dicts
from ..read.scan_counting import counted_region_batches
from ..read.scan_request import ScanRequest, plan_batch_scan
from ..read.snapshot import ReadSnapshot, release_views
from ..region.region import Region
from ..region.view import RegionView
from ..scanner import ScanSpec, TableScanner
from ..scanner.metrics import ScanMetrics
from .arguments import row_range
from .scan_api import ScanCalls, request_of


class TableScans(ScanCalls):
    """Batch scans, row scans, scanners and counts of a :class:`~storage.table.table.Table`.

    ``scan`` and ``scan_batches`` (:class:`~storage.table.scan_api.ScanCalls`)
    build the :class:`~storage.read.scan_request.ScanRequest`; here it is planned
    over the table's regions and run."""

    def _check_columns(self, columns: Sequence[bytes] | None) -> None:
        """Refuse a column of no family of the table."""
        for column in columns or ():
            self._check_family(parse_column(column)[0])

    def _plan(self, request: ScanRequest, output: str | None = None) -> tuple[BatchScan, list]:
        return plan_batch_scan(request, self._check_family, output)

    def run_scan(self, request: ScanRequest, metrics: ScanMetrics | None = None, *,
                 snapshot: "ReadSnapshot | None" = None) -> Iterator[pa.RecordBatch]:
        """The batches of a checked request (what ``scan_batches`` returns).

        The scan fixes its read point and leases its region views here, when
        called; ``snapshot`` (from :meth:`snapshot`) makes it read that
        snapshot's views instead, so several scans share one read point.
        """
        scan, spans = self._plan(request)
        return self._open_batches(scan, spans, metrics, snapshot)

    def _scan_rows(self, request: ScanRequest, batch_size: int | None, *,
                   path: str = "batch") -> Iterator[tuple[bytes, dict]]:
        if path not in ("batch", "cell"):
            raise InvalidArgument(f"path must be 'batch' or 'cell', got {path!r}")
        if request.raw:  # raw scans run on the batch path's cell kernels (storage/read/raw.py)
            scan, spans = self._plan(request.replace(include_timestamp=True), "cells")
            return self._raw_dicts(self._lazy_batches(scan, spans), request.sorted_columns)
        if path == "cell":
            return self._scan_cells(request, batch_size)
        scan, spans = self._plan(request, "cells")
        if request.scan_batching is None:
            # dense blocks may come as row batches: dicts zipped from whole columns
            scan = dataclasses.replace(scan, row_dicts=True)
        return self._dicts(self._lazy_batches(scan, spans), request)

    @staticmethod
    def _raw_dicts(batches: Iterator[pa.RecordBatch], sorted_columns: bool) -> Iterator[tuple[bytes, dict]]:
        for batch in batches:
            yield from raw_dicts(batch, sorted_columns)

    def _lazy_batches(self, scan: BatchScan, spans: list) -> Iterator[pa.RecordBatch]:
        """The batches of a planned scan, its views leased at the first ``next()`` (happybase's scan)."""
        batches = self._open_batches(scan, spans, None)
        try:
            yield from batches
        finally:
            batches.close()

    def _open_batches(self, scan: BatchScan, spans, metrics: ScanMetrics | None,
                      snapshot: "ReadSnapshot | None" = None) -> Iterator[pa.RecordBatch]:
        """Open a checked batch scan: fix its read point and lease its views (or
        take ``snapshot``'s), and return its batches."""
        reverse = scan.reverse
        if snapshot is not None:
            plan = snapshot.plan(spans)
        else:
            self._check_readable()
            plan = self._views(spans)  # the scan opens here: read point and views fixed
        if reverse:
            plan.reverse()
        owned = [] if snapshot is not None else [view for view, _, _ in plan]
        batches = self._plan_batches(scan, plan, metrics, owned)
        # a scan dropped before its first batch never runs its finally: release then
        weakref.finalize(batches, release_views, owned)
        return batches

    def snapshot(self, row_start: bytes | None = None, row_stop: bytes | None = None) -> "ReadSnapshot":
        """Leased views of the regions of ``[row_start, row_stop)`` at one read
        point, for several scans to share (``scan_batches(snapshot=...)``);
        close it when they are done."""
        low, high = row_range(row_start, row_stop, None, False)
        return ReadSnapshot(self, low, high, [view for view, _, _ in self._views([(low, high)])])

    @staticmethod
    def _plan_batches(scan: BatchScan, plan: list, metrics: ScanMetrics | None,
                      owned: list[RegionView]) -> Iterator[pa.RecordBatch]:
        started = time.perf_counter()
        remaining = scan.limit
        try:
            for view, lo, hi in plan:
                region_scan = dataclasses.replace(scan, low=lo, high=hi, limit=remaining)
                if metrics is None and remaining is None:
                    yield from scan_region_batches(view, region_scan, None)
                else:
                    for batch, rows in counted_region_batches(view, region_scan, metrics):
                        if remaining is not None:
                            remaining -= rows
                        yield batch
                if metrics is not None:
                    metrics.regions_scanned += 1
                if remaining is not None and remaining <= 0:
                    break
                if scan.filter is not None and scan.filter.filter_all_remaining():
                    break
        finally:
            release_views(owned)
            if metrics is not None:
                metrics.time_ms += (time.perf_counter() - started) * 1000

    def scanner(
        self,
        row_start: bytes | None = None,
        row_stop: bytes | None = None,
        row_prefix: bytes | None = None,
        columns: Sequence[bytes] | None = None,
        filter: Any = None,
        timestamp: int | None = None,
        time_range: tuple[int, int] | None = None,
        max_versions: int = 1,
        limit: int | None = None,
        reverse: bool = False,
        batch: int | None = None,
        caching: int = 100,
        max_result_size: int | None = None,
        metrics: ScanMetrics | None = None,
    ) -> TableScanner:
        """The cell-at-a-time scan: a :class:`storage.scanner.TableScanner` whose
        ``next_rows(n)`` returns up to ``n`` results, each a list of one row's cells.

        This is the path of point reads, RPC-style scanners and callers that
        want cells as Python objects; ``scan_batches`` is the vectorized path.
        """
        request = request_of(locals())  # the arguments above that are request fields
        return self.cell_scanner(request, batch, caching, max_result_size, metrics)

    def cell_scanner(self, request: ScanRequest, batch: int | None = None, caching: int = 100,
                     max_result_size: int | None = None, metrics: ScanMetrics | None = None) -> TableScanner:
        """The :class:`storage.scanner.TableScanner` of a checked request (what :meth:`scanner` returns)."""
        self._check_columns(request.columns)
        low, high = request.bounds()
        min_ts, max_ts = request.time_bounds()
        reverse = request.reverse
        # The key range is enforced through the region bounds given to each
        # region scanner, so one [low, high) form serves both directions.
        # One filter copy serves the whole scan (a PageFilter counts across regions).
        flt = request.scan_filter()
        spec = ScanSpec(
            start_row=b"" if reverse else low,
            stop_row=None if reverse else high,
            reverse=reverse,
            columns=None if request.columns is None else list(request.columns),
            min_timestamp=min_ts,
            max_timestamp=max_ts,
            max_versions=request.versions(),
            filter=flt,
            limit=request.limit or None,
            batch=batch,
            max_result_size=max_result_size,
            caching=caching,
        )
        plan = self._views([(low, high)])
        factories = [
            (lambda spec, m, view=view: Region.cell_scanner_of(view, spec, m, low, high))
            for view, _, _ in plan
        ]
        views = [view for view, _, _ in plan]
        scanner = TableScanner(factories, spec, metrics, on_close=lambda: release_views(views))
        weakref.finalize(scanner, release_views, views)  # a scanner never closed
        return scanner

    def count(self, row_start: bytes | None = None, row_stop: bytes | None = None, row_prefix: bytes | None = None) -> int:
        """The number of rows in ``[row_start, row_stop)`` (or with ``row_prefix``),
        as a full scan would see them.

        Where a region's store files are clean (no delete markers), its families
        have no TTL, its memstore holds nothing for the range and the files'
        row ranges do not overlap, the count comes from the version 2 block
        indexes without reading data blocks (see :mod:`storage.read.row_count`);
        otherwise the region is scanned with the row-counting filter.
        """
        from ..read.row_count import count_region_rows

        self._check_readable()
        low, high = row_range(row_start, row_stop, row_prefix, False)
        if high is not None and low >= high:
            return 0
        return sum(count_region_rows(region.view(), low, high) for region in self._regions_for_range(low, high))
