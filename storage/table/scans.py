"""Scan planning over a table: a scan's arguments checked once, its key range
cut into region views, and the batch, row and cell scanners built on them."""

from __future__ import annotations

import dataclasses
import time
import weakref
from typing import Any, Iterator, Sequence

import pyarrow as pa

from .. import kernels
from ..cells import LATEST_TIMESTAMP
from ..columns import parse_column
from ..errors import InvalidArgument, clip
from ..filters import coerce_filter
from ..filters.base import scan_copy
from ..keys import intersect
from ..read.batch_scan import BatchScan, scan_region_batches
from ..read.python_rows import cells_to_dicts, rows_to_dicts
from ..read.raw import check_raw, raw_dicts
from ..read.snapshot import ReadSnapshot, release_views
from ..region.region import Region
from ..region.view import RegionView
from ..scanner import ScanSpec, TableScanner
from ..scanner.metrics import ScanMetrics
from .arguments import _check_bytes, row_range


def _read_counters(view) -> dict[str, int]:
    """Summed read counters of the store files a region view reads."""
    total: dict[str, int] = {}
    for store in view.stores.values():
        for f in store.files:
            for name, value in f.reader.counters.snapshot().items():
                total[name] = total.get(name, 0) + value
    return total


def _add_read_counters(metrics: ScanMetrics, before: dict[str, int], after: dict[str, int]) -> None:
    """Charge a scan with what its region's readers read meanwhile, once per region.

    Readers are shared, so a concurrent scan of the same files is counted
    here too; the counters are exact for a scan that runs alone.
    """
    delta = {k: v - before.get(k, 0) for k, v in after.items()}
    metrics.blocks_read_from_disk += delta.get("blocks_read", 0)
    metrics.bytes_read_from_disk += delta.get("bytes_read", 0)
    metrics.read_requests += delta.get("reads", 0)
    metrics.blocks_read_from_cache += delta.get("cache_hits", 0)
    metrics.seeks += delta.get("seeks", 0)


class TableScans:
    """Batch scans, row scans, scanners and counts of a :class:`~storage.table.table.Table`."""

    def _scan_columns(self, columns: Sequence | None) -> list[bytes] | None:
        """A scan's column list as bytes, each naming a family of the table."""
        if columns is None:
            return None
        if isinstance(columns, (bytes, str)):
            raise InvalidArgument(f"columns must be a list of b'family:qualifier' or b'family', got {columns!r}")
        columns = [c.encode() if isinstance(c, str) else _check_bytes(c, "column") for c in columns]
        for c in columns:
            self._check_family(parse_column(c)[0])
        return columns

    def _time_bounds(self, timestamp: int | None, time_range: tuple[int, int] | None) -> tuple[int, int]:
        """[min, max) of a scan: ``time_range``, capped below ``timestamp`` (happybase's meaning)."""
        if time_range is None:
            min_ts, max_ts = 0, LATEST_TIMESTAMP
        else:
            if not isinstance(time_range, (tuple, list)) or len(time_range) != 2:
                raise InvalidArgument(f"time_range must be a (min, max) pair of ints, got {clip(repr(time_range), 80)}")
            min_ts, max_ts = time_range
            for bound in time_range:
                if not isinstance(bound, int) or isinstance(bound, bool) or not 0 <= bound <= LATEST_TIMESTAMP:
                    raise InvalidArgument(
                        f"time_range bounds must be ints in [0, 2**63-1], got {clip(repr(time_range), 80)}"
                    )
            if min_ts > max_ts:
                raise InvalidArgument(f"time_range min {min_ts} is above its max {max_ts}")
        if timestamp is not None:
            max_ts = min(max_ts, self._check_ts(timestamp))
        return min_ts, max_ts

    def _batch_scan(
        self,
        row_start=None,
        row_stop=None,
        row_prefix=None,
        columns=None,
        filter=None,
        timestamp=None,
        time_range=None,
        timestamps=None,
        max_versions=1,
        limit=None,
        reverse=False,
        output="cells",
        include_timestamp=False,
        batch_cells=65536,
        raw=False,
    ) -> tuple[BatchScan, list[tuple[bytes, bytes | None]]]:
        low, high = row_range(row_start, row_stop, row_prefix, reverse)
        min_ts, max_ts = self._time_bounds(timestamp, time_range)
        columns = self._scan_columns(columns)
        if not isinstance(max_versions, int) or max_versions < 1:
            raise InvalidArgument(f"max_versions must be a positive int, got {max_versions!r}")
        if limit is not None and (not isinstance(limit, int) or limit < 0):
            raise InvalidArgument(f"limit must be a non-negative int, got {limit!r}")
        if raw:  # raw scans: the one place their arguments are checked (storage/read/raw.py)
            check_raw(output, columns, filter)
        flt = coerce_filter(filter)
        spans = [(low, high)]
        if flt is not None:
            flt = scan_copy(flt, reverse)
            ranges = flt.row_ranges()
            if ranges is not None:
                # seek to each range the filter allows instead of filtering the gaps
                spans = intersect([(low, high)], list(ranges))
        scan = BatchScan(
            low=low,
            high=high,
            reverse=reverse,
            columns=columns,
            min_timestamp=min_ts,
            max_timestamp=max_ts,
            timestamps=timestamps,
            max_versions=max_versions,
            filter=flt,
            limit=limit,
            batch_cells=batch_cells,
            output=output,
            include_timestamp=include_timestamp,
            raw=bool(raw),
        )
        return scan, spans

    def scan_batches(
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
        output: str = "rows",
        include_timestamp: bool = False,
        batch_size: int = 65536,
        metrics: ScanMetrics | None = None,
        snapshot: "ReadSnapshot | None" = None,
        raw: bool = False,
    ) -> Iterator[pa.RecordBatch]:
        """Scan as Arrow record batches: ``output="rows"`` (key + one column per
        requested column) or ``"cells"`` (the six cell columns).  The vectorized path.

        The scan fixes its read point and leases its region views here, when
        called; ``snapshot`` (from :meth:`snapshot`) makes it read that
        snapshot's views instead, so several scans share one read point.
        ``raw=True`` is HBase's raw scan (cells output: markers and deleted
        cells, every version; see :mod:`storage.read.raw`).
        """
        if output not in ("rows", "cells"):
            raise InvalidArgument(f"output must be 'rows' or 'cells', got {output!r}")
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
            raise InvalidArgument(f"batch_size must be a positive int, got {batch_size!r}")
        scan, spans = self._batch_scan(
            row_start, row_stop, row_prefix, columns, filter, timestamp, time_range, None,
            max_versions, limit, reverse, output, include_timestamp, batch_size, raw,
        )
        return self._open_batches(scan, spans, metrics, snapshot)

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
                before = _read_counters(view) if metrics is not None else None
                region_scan = dataclasses.replace(scan, low=lo, high=hi, limit=remaining)
                for batch in scan_region_batches(view, region_scan, metrics):
                    if remaining is not None or metrics is not None:
                        as_rows = scan.output == "rows" or batch.schema.names[0] == "key"  # row_dicts row batches
                        rows = batch.num_rows if as_rows else len(kernels.row_boundaries(batch))
                        if remaining is not None:
                            remaining -= rows
                        if metrics is not None:
                            metrics.rows_scanned += rows
                            metrics.bytes_in_results += batch.nbytes
                    yield batch
                if metrics is not None:
                    metrics.regions_scanned += 1
                    _add_read_counters(metrics, before, _read_counters(view))
                if remaining is not None and remaining <= 0:
                    break
                if scan.filter is not None and scan.filter.filter_all_remaining():
                    break
        finally:
            release_views(owned)
            if metrics is not None:
                metrics.time_ms += (time.perf_counter() - started) * 1000

    def scan(
        self,
        row_start: bytes | None = None,
        row_stop: bytes | None = None,
        row_prefix: bytes | None = None,
        columns: Sequence[bytes] | None = None,
        filter: Any = None,
        timestamp: int | None = None,
        include_timestamp: bool = False,
        batch_size: int = 1000,
        scan_batching: int | None = None,
        limit: int | None = None,
        sorted_columns: bool = False,
        reverse: bool = False,
        time_range: tuple[int, int] | None = None,
        max_versions: int = 1,
        path: str = "batch",
        raw: bool = False,
    ) -> Iterator[tuple[bytes, dict]]:
        """Scan rows as ``(row_key, {b"cf:q": value})`` pairs, as happybase does.

        ``include_timestamp`` makes values ``(value, timestamp)`` pairs;
        ``sorted_columns`` gives OrderedDicts in column order; ``reverse``
        scans from ``row_start`` (highest, inclusive) down to ``row_stop``
        (exclusive); ``scan_batching`` caps cells per yielded chunk of a wide row.
        ``path="cell"`` runs the cell-at-a-time scanners instead of the batch
        kernels (same results; the tests hold the two paths to each other).
        ``raw=True`` (HBase's raw scan) yields ``(row, {b"cf:q": [(value,
        timestamp, type name), ...]})`` with markers and every version
        (:mod:`storage.read.raw`).
        """
        if path not in ("batch", "cell"):
            raise InvalidArgument(f"path must be 'batch' or 'cell', got {path!r}")
        if raw:  # raw scans run on the batch path (storage/read/raw.py)
            scan, spans = self._batch_scan(row_start, row_stop, row_prefix, columns, filter, timestamp, time_range,
                                           None, max_versions, limit, reverse, "cells", True, 65536, True)
            for batch in self._open_batches(scan, spans, None):
                yield from raw_dicts(batch, sorted_columns)
            return
        if path == "cell":
            yield from self._scan_cells(
                row_start, row_stop, row_prefix, columns, filter, timestamp, include_timestamp,
                batch_size, scan_batching, limit, sorted_columns, reverse, time_range, max_versions,
            )
            return
        if batch_size is not None and (not isinstance(batch_size, int) or batch_size < 1):
            raise InvalidArgument(f"batch_size must be a positive int, got {batch_size!r}")
        if scan_batching is not None and (not isinstance(scan_batching, int) or scan_batching < 1):
            raise InvalidArgument(f"scan_batching must be a positive int, got {scan_batching!r}")
        scan, spans = self._batch_scan(
            row_start, row_stop, row_prefix, columns, filter, timestamp, time_range, None,
            max_versions, limit, reverse, "cells", include_timestamp,
        )
        if scan_batching is None:
            # dense blocks may come as row batches: dicts zipped from whole columns
            scan = dataclasses.replace(scan, row_dicts=True)
        for batch in self._open_batches(scan, spans, None):
            if batch.schema.names[0] == "key":
                yield from rows_to_dicts(batch, include_timestamp, sorted_columns)
            else:
                yield from cells_to_dicts(batch, include_timestamp, sorted_columns, scan_batching, max_versions > 1)

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
        low, high = row_range(row_start, row_stop, row_prefix, reverse)
        min_ts, max_ts = self._time_bounds(timestamp, time_range)
        columns = self._scan_columns(columns)
        # The key range is enforced through the region bounds given to each
        # region scanner, so one [low, high) form serves both directions.
        # One filter copy serves the whole scan (a PageFilter counts across regions).
        flt = coerce_filter(filter)
        if flt is not None:
            flt = scan_copy(flt, reverse)
        spec = ScanSpec(
            start_row=b"" if reverse else low,
            stop_row=None if reverse else high,
            reverse=reverse,
            columns=columns,
            min_timestamp=min_ts,
            max_timestamp=max_ts,
            max_versions=max_versions,
            filter=flt,
            limit=limit or None,
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
