"""Scans of a table: a checked :class:`~storage.read.scan_request.ScanRequest`
cut into leased region views at one read point, and the batch, row and cell
scanners run on them.

:class:`TableScans` is the collaborator a :class:`~storage.table.table.Table`
holds for its scans; the table hands it its region map, read point, leases,
its checks (open, and a family's name) and itself as the snapshots' owner."""

from __future__ import annotations

import dataclasses
import weakref
from collections import OrderedDict
from functools import partial
from typing import Callable, Iterator, Sequence

import pyarrow as pa

from ..columns import parse_column
from ..errors import InvalidArgument
from ..keys import key_after
from ..mvcc import Mvcc, views_at_read_point
from ..read.region_plan import RegionReadPlan
from ..read.raw import raw_dicts
from ..read.region_runner import TableScanner, count_regions, live_cell_scanner, live_reads, reading_order, run_regions
from ..read.scan_request import ScanRequest, plan_batch_scan
from ..read.snapshot import ReadSnapshot, SnapshotTable, release_views
from ..region.reader_leases import Leases
from ..region.view import RegionView
from ..scanner import CellScanSpec
from ..scanner.metrics import ScanMetrics
from .arguments import row_range
from .region_map import RegionMap
from .scan_api import ScanCalls

__all__ = ["TableScans"]


class TableScans:
    """Batch scans, row scans, cell scanners, snapshots and counts of one
    :class:`~storage.table.table.Table` (which takes the happybase arguments,
    :class:`~storage.table.scan_api.ScanCalls`, and hands the checked request here)."""

    def __init__(self, owner: SnapshotTable, regions: RegionMap, mvcc: Mvcc, leases: Leases,
                 check_readable: Callable[[], None], check_family: Callable[[bytes], None]):
        self.owner = owner  # the table its snapshots belong to
        self.regions = regions
        self.mvcc = mvcc
        self.leases = leases
        self._check_readable = check_readable
        self._check_family = check_family

    def views(self, spans: Sequence[tuple[bytes, bytes | None]]) -> list[tuple[RegionView, bytes, bytes | None]]:
        """Leased views, at one read point, of the regions each span covers, in key order.

        Taken together under the lease lock, so the region list, each
        region's files and memstores and the read point belong to one moment.
        """
        regions = self.regions

        def open_views(point: int) -> list:
            self._check_readable()
            views: dict[str, RegionView] = {}
            plan = []
            try:
                for lo, hi in spans:
                    covered = [regions.region_for(lo)] if hi == key_after(lo) else regions.regions_for_range(lo, hi)
                    for region in covered:
                        view = views.get(region.info.region_id)
                        if view is None:
                            view = views[region.info.region_id] = region.view(point)
                        plan.append((view, lo, hi))
            except BaseException:
                for view in views.values():
                    view.release()
                raise
            return plan

        return views_at_read_point(self.leases.lock, self.mvcc, open_views)

    def check_columns(self, columns: Sequence[bytes] | None) -> None:
        """Refuse a column of no family of the table."""
        for column in columns or ():
            self._check_family(parse_column(column)[0])

    def _plan(self, request: ScanRequest, output: str | None = None) -> tuple[RegionReadPlan, list]:
        return plan_batch_scan(request, self._check_family, output)

    def run_scan(self, request: ScanRequest, metrics: ScanMetrics | None = None, *,
                 snapshot: "ReadSnapshot | None" = None) -> Iterator[pa.RecordBatch]:
        """The batches of a checked request (see :meth:`Table.run_scan`)."""
        scan, spans = self._plan(request)
        return self._open_batches(scan, spans, metrics, snapshot)

    def scan_rows(self, request: ScanRequest, batch_size: int | None, *,
                  path: str = "batch") -> Iterator[tuple[bytes, dict]]:
        """The ``(row, dict)`` pairs of a checked request of ``scan()``."""
        if path not in ("batch", "cell"):
            raise InvalidArgument(f"path must be 'batch' or 'cell', got {path!r}")
        if request.raw:  # raw scans run on the batch path's cell kernels (storage/read/raw.py)
            scan, spans = self._plan(request.replace(include_timestamp=True), "cells")
            return self._raw_dicts(self._lazy_batches(scan, spans), request.sorted_columns)
        if path == "cell":
            self.check_columns(request.columns)  # refused now; the scanner opens at the first next()
            return self._cell_dicts(request, batch_size or 100)
        scan, spans = self._plan(request, "cells")
        if request.scan_batching is None:
            # dense blocks may come as row batches: dicts zipped from whole columns
            scan = dataclasses.replace(scan, row_dicts=True)
        return ScanCalls._dicts(self._lazy_batches(scan, spans), request)

    @staticmethod
    def _raw_dicts(batches: Iterator[pa.RecordBatch], sorted_columns: bool) -> Iterator[tuple[bytes, dict]]:
        for batch in batches:
            yield from raw_dicts(batch, sorted_columns)

    def _cell_dicts(self, request: ScanRequest, caching: int) -> Iterator[tuple[bytes, dict]]:
        """``scan(path="cell")``: the request's rows through the cell-at-a-time scanners."""
        include_timestamp, max_versions = request.include_timestamp, request.versions()
        make = OrderedDict if request.sorted_columns else dict
        with self.cell_scanner(request, request.scan_batching, caching) as scanner:
            while True:
                results = scanner.next_rows()
                if not results:
                    return
                for cells in results:
                    if include_timestamp:
                        pairs = [(c[1] + b":" + c[2], (c[5], c[3])) for c in cells]
                    else:
                        pairs = [(c[1] + b":" + c[2], c[5]) for c in cells]
                    if max_versions > 1:
                        # one value per column: its newest (first) cell, in column order
                        pairs = [p for i, p in enumerate(pairs) if i == 0 or p[0] != pairs[i - 1][0]]
                    yield cells[0][0], make(pairs)

    def _lazy_batches(self, scan: RegionReadPlan, spans: list) -> Iterator[pa.RecordBatch]:
        """The batches of a planned scan, its views leased at the first ``next()`` (happybase's scan)."""
        batches = self._open_batches(scan, spans, None)
        try:
            yield from batches
        finally:
            batches.close()

    def _open_batches(self, scan: RegionReadPlan, spans, metrics: ScanMetrics | None,
                      snapshot: "ReadSnapshot | None" = None) -> Iterator[pa.RecordBatch]:
        """Open a checked batch scan: fix its read point and lease its views (or
        take ``snapshot``'s), and return its batches."""
        if snapshot is not None:
            plan = snapshot.plan(spans)
        else:
            self._check_readable()
            plan = self.views(spans)  # the scan opens here: read point and views fixed
        plan = reading_order(plan, scan.reverse)
        owned = [] if snapshot is not None else [view for view, _, _ in plan]
        # the region runner over the views in reading order; the views leased here are released when it ends
        batches = run_regions(scan, live_reads(plan), metrics, on_close=partial(release_views, owned))
        # a scan dropped before its first batch never runs its finally: release then
        weakref.finalize(batches, release_views, owned)
        return batches

    def snapshot(self, row_start: bytes | None = None, row_stop: bytes | None = None) -> ReadSnapshot:
        """Leased views of the regions of ``[row_start, row_stop)`` at one read point (see :meth:`Table.snapshot`)."""
        low, high = row_range(row_start, row_stop, None, False)
        return ReadSnapshot(self.owner, low, high, [view for view, _, _ in self.views([(low, high)])])

    def cell_scanner(self, request: ScanRequest, batch: int | None = None, caching: int = 100,
                     max_result_size: int | None = None, metrics: ScanMetrics | None = None) -> TableScanner:
        """The :class:`storage.read.region_runner.TableScanner` of a checked request (see :meth:`Table.cell_scanner`)."""
        self.check_columns(request.columns)
        low, high = request.bounds()
        min_ts, max_ts = request.time_bounds()
        reverse = request.reverse
        # The key range is enforced through the region bounds given to each
        # region scanner, so one [low, high) form serves both directions.
        # One filter copy serves the whole scan (a PageFilter counts across regions).
        flt = request.scan_filter()
        spec = CellScanSpec(
            row_start=b"" if reverse else low,
            row_stop=None if reverse else high,
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
        # the runner's pull form over the leased views, released when the scan ends; a limit
        # of 0 reads no region (as the batch path), where the spec's "no limit" would read all
        views = [] if request.limit == 0 else [view for view, _, _ in self.views([(low, high)])]
        return live_cell_scanner(views, spec, low, high, metrics)

    def count(self, row_start: bytes | None = None, row_stop: bytes | None = None,
              row_prefix: bytes | None = None) -> int:
        """The number of rows in the range (see :meth:`Table.count`)."""
        self._check_readable()
        low, high = row_range(row_start, row_stop, row_prefix, False)
        if high is not None and low >= high:
            return 0
        plan = self.views([(low, high)])  # one read point for every region, leased for the count
        try:
            return count_regions(live_reads(plan))
        finally:
            release_views([view for view, _, _ in plan])
