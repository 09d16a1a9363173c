"""The table scanner: a scan across a table's regions, one region at a time.

Regions are opened lazily, in key order (reverse order for a reverse
scan), from factories the table supplies.  The scanner carries the scan's
row limit across regions and stops early when a region's filter reports
``filter_all_remaining``.  ``on_close`` runs once, when the scan ends or
is closed (the table releases the region views the scan read).
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Sequence

from ..cells import Cell
from ..errors import InvalidArgument, ScannerError
from .metrics import ScanMetrics
from .protocol import ResultScanner
from .region_scanner import RegionScanner
from .scan_spec import CellScanSpec

__all__ = ["TableScanner", "RegionScannerFactory"]

RegionScannerFactory = Callable[[CellScanSpec, ScanMetrics], RegionScanner]
"""Opens one region's scanner for a spec, counting into the given metrics.
The table scanner passes the scan's spec with ``limit`` lowered to the rows
still wanted."""


class TableScanner(ResultScanner):
    """Results of a scan over several regions.

    ``factories`` are in ascending region key order, one per region the scan
    touches; a reverse scan walks them from the last.  ``next_rows(n)``
    fills up to ``n`` results across region boundaries (fewer when
    ``max_result_size`` ends a call early), ``[]`` at the end.
    """

    def __init__(
        self,
        factories: Sequence[RegionScannerFactory],
        spec: CellScanSpec,
        metrics: ScanMetrics | None = None,
        on_close: Callable[[], object] | None = None,
    ):
        factories = list(factories)
        if spec.reverse:
            factories.reverse()
        self._factories = factories
        self._next_index = 0
        self._spec = spec
        self.metrics = metrics if metrics is not None else ScanMetrics()
        self._current: RegionScanner | None = None
        self._rows_done = 0  # rows returned by regions already finished
        self._done = False
        self._closed = False
        self._on_close = on_close  # releases what the scan holds (region views), once

    def _release(self) -> None:
        on_close, self._on_close = self._on_close, None
        if on_close is not None:
            on_close()

    def _region(self) -> RegionScanner | None:
        """The region scanner to read from, opening the next one if needed."""
        while self._current is None:
            if self._done or self._next_index >= len(self._factories):
                self._done = True
                self._release()
                return None
            spec = self._spec
            if spec.limit is not None:
                remaining = spec.limit - self._rows_done
                if remaining <= 0:
                    self._done = True
                    self._release()
                    return None
                spec = dataclasses.replace(spec, limit=remaining)
            factory = self._factories[self._next_index]
            self._next_index += 1
            self._current = factory(spec, self.metrics)
        return self._current

    def _finish_region(self) -> None:
        region = self._current
        self._current = None
        self._rows_done += region.rows_returned
        if region.filter_done:
            self._done = True
        region.close()

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
            self._done = True
            if self._current is not None:
                self._current.close()
                self._current = None
            self._release()

