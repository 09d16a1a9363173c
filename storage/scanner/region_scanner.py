"""The region scanner: a region's rows, all families joined, filtered and
cut into results the way an HBase ``RegionScanner`` hands them out.

Per row it asks the filter (its own copy, reset as the scan starts) first
about the row key (``filter_row_key``; rows it rejects are skipped unread),
then about the assembled cells (``filter_row_cells``);
``filter_all_remaining`` ends the scan, and the filter's ``row_ranges`` are
used to seek over rows no range covers.  It
stops at the region's end, the scan's stop row and ``limit`` rows, splits
rows wider than ``batch`` cells into several results, and ends a
``next_rows`` call once its results reach ``max_result_size`` bytes.
"""

from __future__ import annotations

import time
from bisect import bisect_right
from collections import deque
from operator import itemgetter
from typing import Sequence

from ..cells import Cell
from ..errors import InvalidArgument, ScannerError
from ..keys import normalize as normalize_ranges
from .metrics import ScanMetrics
from .protocol import ResultScanner
from .scan_spec import CellScanSpec
from .store_scanner import StoreScanner

__all__ = ["RegionScanner", "result_size"]

_FAMILY = itemgetter(1)
_QUALIFIER = itemgetter(2)
_VALUE = itemgetter(5)
CELL_FIXED_BYTES = 13
"""Bytes a result counts per cell besides its row, family, qualifier and value: timestamp (8), type (1)
and length prefixes, as a serialized cell costs (``BYTES_IN_RESULTS``)."""


def result_size(cells: list) -> int:
    """Approximate serialized bytes of one result (cells of one row)."""
    if not cells:
        return 0
    return (
        len(cells) * (len(cells[0][0]) + CELL_FIXED_BYTES)
        + sum(map(len, map(_FAMILY, cells)))
        + sum(map(len, map(_QUALIFIER, cells)))
        + sum(map(len, map(_VALUE, cells)))
    )


class RegionScanner(ResultScanner):
    """Rows of one region ``[start_row, end_row)`` (``end_row`` ``None`` or
    ``b""`` = unbounded) from one :class:`StoreScanner` per family.

    The stores should be opened with ``spec.with_filter_columns()`` (and
    one store per family it names), so the filter sees the columns it
    needs; this scanner is given ``spec`` itself and returns only the
    scan's columns.

    ``next()`` returns one result (a list of cells of one row, or a chunk
    of it when ``spec.batch`` is set) or ``None``; ``next_rows(n)`` up to
    ``n`` results (``spec.caching`` by default), an empty list at the end.
    ``metrics`` collects row counters (``regions_scanned`` is counted here).
    ``shared_filter`` uses ``spec.filter`` itself rather than a copy (the
    caller made one copy for the whole scan).
    """

    def __init__(
        self,
        stores: Sequence[StoreScanner],
        spec: CellScanSpec,
        *,
        start_row: bytes = b"",
        end_row: bytes | None = None,
        metrics: ScanMetrics | None = None,
        shared_filter: bool = False,
    ):
        if not stores:
            raise InvalidArgument("stores: a region scanner needs at least one store scanner")
        for s in stores:
            if s.reverse != spec.reverse:
                raise InvalidArgument(f"stores: the scanner of family {s.family!r} runs in the other direction")
        if not isinstance(start_row, bytes) or not (end_row is None or isinstance(end_row, bytes)):
            raise InvalidArgument(f"region bounds ({start_row!r}, {end_row!r}): expected bytes")
        self._stores = sorted(stores, key=lambda s: s.family)
        self._spec = spec
        self._reverse = spec.reverse
        self._region_start = start_row
        self._region_end = end_row or None
        self.metrics = metrics if metrics is not None else ScanMetrics()
        self.metrics.regions_scanned += 1
        self._filter = None
        if spec.filter is not None and shared_filter:
            # A table scan hands every region the same per-scan filter, so
            # state such as a PageFilter's count spans the whole scan.
            self._filter = spec.filter
        elif spec.filter is not None:
            # The spec's filter is a prototype: this region works on its own
            # copy, reset once as the scan starts (per-scan state such as a
            # PageFilter's count lives in it).
            self._filter = spec.filter.copy()
            self._filter.reset()
        if self._filter is not None and callable(getattr(self._filter, "oriented", None)):
            # the scan's direction, as HBase's setReversed (a no-op when the caller oriented it)
            self._filter = self._filter.oriented(self._reverse)
        # Columns read only for the filter's sake (stores opened with
        # spec.with_filter_columns()) are dropped again after filtering.
        self._project = bool(spec.filter_only_columns())
        ranges = None
        if self._filter is not None and callable(getattr(self._filter, "row_ranges", None)):
            ranges = self._filter.row_ranges()
        self._ranges = None if ranges is None else normalize_ranges(ranges)
        self._range_starts = None if self._ranges is None else [r[0] for r in self._ranges]
        self._pending: deque = deque()
        self._opened = False
        self._done = False
        self._filter_done = False
        self._closed = False
        self._limit = spec.limit
        self.rows_returned = 0

    @property
    def exhausted(self) -> bool:
        """True once every result has been handed out."""
        return self._done and not self._pending

    @property
    def filter_done(self) -> bool:
        """True when the filter's ``filter_all_remaining`` ended the scan
        (a table scan then stops instead of moving to the next region)."""
        return self._filter_done

    # -- positioning ------------------------------------------------------

    def _seek_all(self, row: bytes | None, inclusive: bool = True) -> None:
        for s in self._stores:
            s.seek_row(row, inclusive)

    def _open(self) -> None:
        self._opened = True
        spec = self._spec
        if not self._reverse:
            start = max(spec.row_start, self._region_start)
            if self._ranges:
                # Start at the first range that reaches past `start`.
                for lo, hi in self._ranges:
                    if hi is None or hi > start:
                        start = max(start, lo)
                        break
                else:
                    self._done = True
                    return
            self._seek_all(start)
        else:
            end = self._region_end
            if spec.row_start and (end is None or spec.row_start < end):
                self._seek_all(spec.row_start)
            elif end is not None:
                self._seek_all(end, inclusive=False)
            else:
                self._seek_all(None)

    def _current_row(self) -> bytes | None:
        stores = self._stores
        if len(stores) == 1:
            row = stores[0].peek_row()
        else:
            rows = [r for r in (s.peek_row() for s in stores) if r is not None]
            if not rows:
                return None
            row = max(rows) if self._reverse else min(rows)
        if row is None:
            return None
        if self._reverse:
            if row < self._region_start:
                return None
        elif self._region_end is not None and row >= self._region_end:
            return None
        return row

    def _out_of_ranges(self, row: bytes) -> bool:
        """If no filter range covers ``row``, move to the next row one does
        (ending the scan when none is left) and return True."""
        ranges = self._ranges
        i = bisect_right(self._range_starts, row) - 1
        if i >= 0 and (ranges[i][1] is None or row < ranges[i][1]):
            return False
        if self._reverse:
            if i < 0:
                self._done = True
            else:
                self._seek_all(ranges[i][1], inclusive=False)
        elif i + 1 < len(ranges):
            self._seek_all(ranges[i + 1][0])
        else:
            self._done = True
        return True

    # -- rows -------------------------------------------------------------

    def _next_row(self) -> list[Cell] | None:
        """The next row that survives deletes and the filter, or ``None``."""
        if not self._opened:
            self._open()
        metrics = self.metrics
        flt = self._filter
        stores = self._stores
        while not self._done:
            row = self._current_row()
            if row is None:
                self._done = True
                break
            if self._ranges is not None and self._out_of_ranges(row):
                continue
            if flt is not None:
                if flt.filter_all_remaining():
                    self._done = self._filter_done = True
                    break
                if flt.filter_row_key(row):
                    for s in stores:
                        if s.peek_row() == row:
                            s.skip_row()
                    metrics.rows_scanned += 1
                    metrics.rows_filtered += 1
                    continue
            if len(stores) == 1:
                cells = stores[0].read_row()
            else:
                cells = []
                for s in stores:
                    if s.peek_row() == row:
                        cells += s.read_row()
            metrics.rows_scanned += 1
            if not cells:
                continue
            metrics.cells_scanned += len(cells)
            if flt is not None:
                cells = flt.filter_row_cells(cells)
                if cells and self._project:
                    selects = self._spec.selects
                    cells = [c for c in cells if selects(c[1], c[2])]
                if not cells:
                    metrics.rows_filtered += 1
                    continue
            self.rows_returned += 1
            if self._limit is not None and self.rows_returned >= self._limit:
                self._done = True
            return cells
        return None

    def _next_result(self) -> list[Cell] | None:
        if self._pending:
            return self._pending.popleft()
        cells = self._next_row()
        if cells is None:
            return None
        batch = self._spec.batch
        if batch is not None and len(cells) > batch:
            self._pending.extend(cells[i : i + batch] for i in range(batch, len(cells), batch))
            cells = cells[:batch]
        return cells

    def next_rows(self, n: int | None = None) -> list[list[Cell]]:
        """Up to ``n`` results (default ``spec.caching``), fewer when the
        region ends or ``max_result_size`` is reached; ``[]`` at the end."""
        if self._closed:
            raise ScannerError("region scanner used after close")
        if n is None:
            n = self._spec.caching
        elif not isinstance(n, int) or n < 1:
            raise InvalidArgument(f"n={n!r}: expected a positive number of results")
        started = time.perf_counter()
        max_size = self._spec.max_result_size
        out: list = []
        size = 0
        while len(out) < n:
            result = self._next_result()
            if result is None:
                break
            out.append(result)
            size += result_size(result)
            if max_size is not None and size >= max_size:
                break
        self.metrics.bytes_in_results += size
        self.metrics.time_ms += (time.perf_counter() - started) * 1000.0
        return out

    def close(self) -> None:
        """Close every store scanner; later calls raise :class:`ScannerError`."""
        if not self._closed:
            self._closed = True
            self._done = True
            self._pending.clear()
            for s in self._stores:
                s.close()

