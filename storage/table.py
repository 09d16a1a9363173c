"""Tables: the happybase-shaped embedded API over an ordered list of regions.

Rows are routed to the region whose [start, end) holds them.  Row data is a
dict of ``b"family:qualifier" -> bytes`` as in happybase.  Writes go through
each region's WAL; a region is flushed past the memstore flush size,
compacted past the compaction threshold and split past max_filesize.

Reads are consistent (see docs/architecture.md, "What a reader sees"): a
scan fixes the table's read point (:mod:`storage.mvcc`) and takes a leased
view of every region its key range covers when it opens, all under the
table's lease lock (:mod:`storage.leases`), so later writes, flushes,
compactions and splits change nothing it returns.
"""

from __future__ import annotations

import bisect
import dataclasses
import struct
import threading
import time
import weakref
from collections import OrderedDict
from typing import Any, Iterable, Iterator, Sequence

import pyarrow as pa

from . import kernels
from .batch_scan import BatchScan, scan_region_batches
from .mutation_batch import Batch
from .rows import cells_to_dicts
from .bulkload import JOURNAL_DIR, pending_entries, recover
from .pins import clean_archive, retire_dir
from .cells import LATEST_TIMESTAMP, Cell, CellType, check_cell
from .errors import InvalidArgument, RegionNotFound, StorageError, clip
from .filters import coerce_filter
from .filters.base import scan_copy
from .fs import FileSystem
from .manifest import RegionInfo, TableManifest
from .leases import Leases
from .mvcc import Mvcc
from .region import Region, RegionView
from .scanner import ScanSpec, TableScanner
from .scanner.metrics import ScanMetrics
from .columns import parse_column
from .schema import FamilySettings, TableSettings

__all__ = ["Table", "Batch", "ReadSnapshot", "row_range"]


_PUT = int(CellType.PUT)
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def _check_counter(value: Any, what: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not _INT64_MIN <= value <= _INT64_MAX:
        raise InvalidArgument(f"{what} must be an int in the signed 64-bit range, got {clip(repr(value), 60)}")
    return value


def _now_ms() -> int:
    return int(time.time() * 1000)


def _check_bytes(value: Any, what: str) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    raise InvalidArgument(f"{what} must be bytes, got {type(value).__name__} {clip(repr(value), 60)}")


def _check_row(row: Any) -> bytes:
    """A row key of a mutation: non-empty bytes (HBase refuses an empty row)."""
    row = _check_bytes(row, "row key")
    if not row:
        raise InvalidArgument("row key must not be empty")
    return row


def prefix_stop(prefix: bytes) -> bytes | None:
    """The smallest key greater than every key starting with ``prefix`` (None: unbounded)."""
    trimmed = prefix.rstrip(b"\xff")
    if not trimmed:
        return None
    return trimmed[:-1] + bytes([trimmed[-1] + 1])


def row_range(
    row_start: bytes | None, row_stop: bytes | None, row_prefix: bytes | None, reverse: bool
) -> tuple[bytes, bytes | None]:
    """Turn happybase/HBase scan bounds into [low, high).

    Forward: row_start inclusive, row_stop exclusive.  Reverse (as HBase's
    reversed Scan): row_start is the highest row, inclusive, and row_stop the
    lower bound, exclusive.
    """
    if row_prefix is not None:
        if row_start is not None or row_stop is not None:
            raise InvalidArgument("row_prefix cannot be combined with row_start or row_stop")
        row_prefix = _check_bytes(row_prefix, "row_prefix")
        return row_prefix, prefix_stop(row_prefix)
    if row_start is not None:
        row_start = _check_bytes(row_start, "row_start")
    if row_stop is not None:
        row_stop = _check_bytes(row_stop, "row_stop")
    if not reverse:
        return row_start or b"", row_stop or None
    low = b"" if not row_stop else row_stop + b"\x00"
    high = None if not row_start else row_start + b"\x00"
    return low, high


class Table:
    """A table of a :class:`storage.connection.Connection`; get one from ``connection.table(name)``."""

    def __init__(self, name: str, fs: FileSystem, manifest: TableManifest, cache, read_only: bool, lock=None):
        self.name = name
        self.fs = fs
        self.read_only = read_only
        self._manifest = manifest
        self._cache = cache
        self._lock = lock
        self._mutex = threading.RLock()
        self.families_settings = {
            name: FamilySettings(**opts) for name, opts in manifest.families.items()
        }
        self.settings = TableSettings(**{k: v for k, v in manifest.settings.items()})
        self._regions: list[Region] = []
        self._starts: list[bytes] = []
        self._columns: dict[bytes, tuple[bytes, bytes]] = {}
        self.closed = False
        self._closed_why = "is closed"
        self.mvcc = Mvcc()
        self.leases = Leases()
        self._open_regions()

    # -- regions ---------------------------------------------------------
    def _open_regions(self) -> None:
        # A committed bulk load whose commit was cut short is finished first
        # (by a writer) or applied in memory (by a reader), before regions
        # decide which files are orphans.
        pending = {}
        if self.read_only:
            pending = pending_entries(self.fs)
        else:
            recover(self.fs)
        regions = []
        for info in self._manifest.regions:
            region = self._new_region(info)
            region.pending_loads = pending.get(info.region_id, [])
            regions.append(region.open())
        self._set_regions(regions)
        if not self.read_only:
            for folder in ("", JOURNAL_DIR):  # leftovers of failed atomic writes (pins clean their own)
                self.fs.remove_temporaries(folder)
            live = {r.region_id for r in self._manifest.regions}
            for entry in self.fs.listdir("regions"):
                if entry not in live:  # a split that crashed before or after its commit
                    retire_dir(self.fs, f"regions/{entry}")
            clean_archive(self.fs)

    def _new_region(self, info: RegionInfo) -> Region:
        return Region(
            self.fs, self.name, info, self.families_settings, self.settings, self._cache, self.read_only,
            self.mvcc, self.leases,
        )

    def _set_regions(self, regions: list[Region]) -> None:
        with self.leases.lock:
            self._regions = regions
            self._starts = [r.info.start for r in regions]

    def _views(self, spans: Sequence[tuple[bytes, bytes | None]]) -> list[tuple[RegionView, bytes, bytes | None]]:
        """Leased views, at one read point, of the regions each span covers, in key order.

        Taken together under the lease lock, so the region list, each
        region's files and memstores and the read point belong to one moment.
        """
        with self.leases.lock:
            self._check_readable()
            point = self.mvcc.read_point
            views: dict[str, RegionView] = {}
            plan = []
            try:
                for lo, hi in spans:
                    regions = [self._region_for(lo)] if hi == lo + b"\x00" else self._regions_for_range(lo, hi)
                    for region in regions:
                        view = views.get(region.info.region_id)
                        if view is None:
                            view = views[region.info.region_id] = region.view(point)
                        plan.append((view, lo, hi))
            except BaseException:
                for view in views.values():
                    view.release()
                raise
        return plan

    def _region_for(self, row: bytes) -> Region:
        i = bisect.bisect_right(self._starts, row) - 1
        if i < 0:
            raise RegionNotFound(f"no region of {self.name} holds row {row!r}")
        return self._regions[i]

    def _regions_for_range(self, low: bytes, high: bytes | None) -> list[Region]:
        regions = self._regions
        out = []
        for r in regions:
            if high is not None and r.info.start >= high:
                break
            if r.info.end is not None and r.info.end <= low:
                continue
            out.append(r)
        return out

    def regions(self) -> list[dict]:
        """The table's regions in key order, as happybase's ``Table.regions()``."""
        self._check_readable()
        return [
            {
                "name": f"{self.name},{r.info.name}".encode(),
                "id": r.info.region_id,
                "start_key": r.info.start,
                "end_key": r.info.end or b"",
                "version": 1,
                "size": r.size,
                "memstore_size": r.memstore_size,
                "store_files": sum(len(s.files) for s in r.stores.values()),
            }
            for r in self._regions
        ]

    def region_infos(self) -> list[RegionInfo]:
        """The regions' ids and key ranges, in key order."""
        self._check_readable()
        return [r.info for r in self._regions]

    def families(self) -> dict[bytes, dict]:
        """Column families and their settings, as happybase's ``Table.families()``."""
        self._check_readable()
        return {name.encode(): s.to_dict() for name, s in self.families_settings.items()}

    # -- writes ----------------------------------------------------------
    def _check_readable(self) -> None:
        if self.closed:
            raise StorageError(f"table {self.name} {self._closed_why}")

    def _check_open(self) -> None:
        self._check_readable()
        if self.read_only:
            raise StorageError(f"table {self.name} is open read-only")

    def _put_cells(self, row: bytes, data: dict, timestamp: int | None) -> list[Cell]:
        if type(row) is not bytes or not row:
            row = _check_row(row)
        if not isinstance(data, dict):
            raise InvalidArgument(f"put data must be a dict of b'family:qualifier' -> bytes, got {type(data).__name__}")
        if not data:
            # HBase refuses an empty Put ("No columns to insert"); a silent no-op hides a bug
            raise InvalidArgument(f"put of row {clip(repr(row))} names no columns")
        ts = _now_ms() if timestamp is None else self._check_ts(timestamp)
        column = self._put_column
        cells = []
        for name, value in data.items():
            family, qualifier = column(name)
            if type(value) is not bytes:
                value = _check_bytes(value, f"value of {name!r}")
            cells.append((row, family, qualifier, ts, _PUT, value))
        return cells

    def _put_column(self, name: bytes) -> tuple[bytes, bytes]:
        """(family, qualifier) of a put's column, checked once per distinct name."""
        hit = self._columns.get(name)
        if hit is None:
            family, qualifier = parse_column(name)
            if qualifier is None:
                raise InvalidArgument(f"column {clip(repr(name))} needs a qualifier (b'family:qualifier')")
            self._check_family(family)
            hit = (family, qualifier)
            if isinstance(name, bytes) and len(self._columns) < 65536:
                self._columns[name] = hit
        return hit

    def _check_family(self, family: bytes) -> None:
        if family.decode("ascii", "replace") not in self.families_settings:
            raise InvalidArgument(f"table {self.name} has no column family {clip(repr(family))}")

    @staticmethod
    def _check_ts(timestamp: Any) -> int:
        if not isinstance(timestamp, int) or isinstance(timestamp, bool) or not 0 <= timestamp < LATEST_TIMESTAMP:
            raise InvalidArgument(f"timestamp must be an int in [0, 2**63-1), got {timestamp!r}")
        return timestamp

    def _delete_cells(self, row: bytes, columns: Iterable | None, timestamp: int | None) -> list[Cell]:
        row = _check_row(row)
        ts = _now_ms() if timestamp is None else self._check_ts(timestamp)
        cells = []
        if columns is None:
            for family in self.families_settings:
                cells.append(Cell(row, family.encode(), b"", ts, CellType.DELETE_FAMILY, b""))
            return cells
        for column in columns:
            family, qualifier = parse_column(column)
            self._check_family(family)
            if qualifier is None:
                cells.append(Cell(row, family, b"", ts, CellType.DELETE_FAMILY, b""))
            else:
                cells.append(Cell(row, family, qualifier, ts, CellType.DELETE_COLUMN, b""))
        return cells

    def _write(self, cells: Sequence[Cell]) -> None:
        self._check_open()
        if not cells:
            return
        with self._mutex:
            by_region: dict[int, list] = {}
            for cell in cells:
                i = bisect.bisect_right(self._starts, cell[0]) - 1
                by_region.setdefault(i, []).append(cell)
            for i, group in by_region.items():
                self._regions[i].mutate(group)
            for i in by_region:
                self._maintain(self._regions[i])

    def _maintain(self, region: Region) -> None:
        """Flush, compact and split a region past its thresholds (HBase's automatic policies)."""
        if region.needs_flush():
            region.flush()
            if region.needs_compaction():
                region.compact(major=False)
            if region.needs_split():
                key = region.midkey()
                if key is not None:
                    self._split_region(region, key)

    def put(self, row: bytes, data: dict, timestamp: int | None = None, wal: bool = True) -> None:
        """Store ``data`` (``{b"cf:q": value}``) in ``row``, at ``timestamp`` (ms; now by default)."""
        self._write(self._put_cells(row, data, timestamp))

    def delete(self, row: bytes, columns: Iterable | None = None, timestamp: int | None = None, wal: bool = True) -> None:
        """Delete a whole row, or the given columns (``b"cf:q"``: all versions; ``b"cf"``: the family).

        With ``timestamp``, only versions at or before it are deleted.
        """
        self._write(self._delete_cells(row, columns, timestamp))

    def delete_version(self, row: bytes, column: bytes, timestamp: int) -> None:
        """Delete exactly one version of a column (HBase ``Delete.addColumn(f, q, ts)``)."""
        family, qualifier = parse_column(column)
        if qualifier is None:
            raise InvalidArgument(f"column {column!r} needs a qualifier")
        self._check_family(family)
        self._write([Cell(_check_row(row), family, qualifier, self._check_ts(timestamp), CellType.DELETE, b"")])

    def batch(self, timestamp: int | None = None, batch_size: int | None = None, transaction: bool = False, wal: bool = True) -> "Batch":
        """A happybase-style batch: mutations are sent together (one WAL record per region)."""
        return Batch(self, timestamp, batch_size, transaction)

    def put_cells(self, cells: Sequence[Cell]) -> None:
        """Write raw cells (puts and delete markers) as one group per region."""
        checked = [check_cell(c) for c in cells]
        for cell in checked:
            self._check_family(cell[1])
        self._write(checked)

    # -- counters --------------------------------------------------------
    def counter_get(self, row: bytes, column: bytes) -> int:
        """The 8-byte big-endian counter in ``column`` (0 if unset), as HBase stores it."""
        value = self.row(row, columns=[column]).get(column)
        if value is None:
            return 0
        if len(value) != 8:
            raise InvalidArgument(f"column {column!r} of row {row!r} holds {len(value)} bytes, not an 8-byte counter")
        return struct.unpack(">q", value)[0]

    def counter_set(self, row: bytes, column: bytes, value: int = 0) -> None:
        """Store ``value`` as the 8-byte big-endian counter in ``column``."""
        self.put(row, {column: struct.pack(">q", _check_counter(value, "counter value"))})

    def counter_inc(self, row: bytes, column: bytes, value: int = 1) -> int:
        """Atomically add ``value`` to the counter and return the new value.

        A result outside the signed 64-bit range HBase counters hold raises
        InvalidArgument and leaves the counter as it was.
        """
        _check_counter(value, "counter increment")
        with self._mutex:
            current = self.counter_get(row, column)
            new = current + value
            if not _INT64_MIN <= new <= _INT64_MAX:
                raise InvalidArgument(
                    f"counter {clip(repr(column), 60)} of row {clip(repr(row), 60)} would overflow a signed 64-bit"
                    f" integer ({current} + {value})"
                )
            self.counter_set(row, column, new)
            return new

    def counter_dec(self, row: bytes, column: bytes, value: int = 1) -> int:
        return self.counter_inc(row, column, -value)

    # -- reads -----------------------------------------------------------
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
    ) -> tuple[BatchScan, list[tuple[bytes, bytes | None]]]:
        low, high = row_range(row_start, row_stop, row_prefix, reverse)
        min_ts, max_ts = self._time_bounds(timestamp, time_range)
        columns = self._scan_columns(columns)
        if not isinstance(max_versions, int) or max_versions < 1:
            raise InvalidArgument(f"max_versions must be a positive int, got {max_versions!r}")
        if limit is not None and (not isinstance(limit, int) or limit < 0):
            raise InvalidArgument(f"limit must be a non-negative int, got {limit!r}")
        flt = coerce_filter(filter)
        spans = [(low, high)]
        if flt is not None:
            flt = scan_copy(flt, reverse)
            ranges = flt.row_ranges()
            if ranges is not None:
                # seek to each range the filter allows instead of filtering the gaps
                spans = _intersect_spans(low, high, ranges)
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
    ) -> Iterator[pa.RecordBatch]:
        """Scan as Arrow record batches: ``output="rows"`` (key + one column per
        requested column) or ``"cells"`` (the six cell columns).  The vectorized path.

        The scan fixes its read point and leases its region views here, when
        called; ``snapshot`` (from :meth:`snapshot`) makes it read that
        snapshot's views instead, so several scans share one read point.
        """
        if output not in ("rows", "cells"):
            raise InvalidArgument(f"output must be 'rows' or 'cells', got {output!r}")
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
            raise InvalidArgument(f"batch_size must be a positive int, got {batch_size!r}")
        scan, spans = self._batch_scan(
            row_start, row_stop, row_prefix, columns, filter, timestamp, time_range, None,
            max_versions, limit, reverse, output, include_timestamp, batch_size,
        )
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
        weakref.finalize(batches, _release_views, owned)
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
                        rows = batch.num_rows if scan.output == "rows" else len(kernels.row_boundaries(batch))
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
            _release_views(owned)
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
    ) -> Iterator[tuple[bytes, dict]]:
        """Scan rows as ``(row_key, {b"cf:q": value})`` pairs, as happybase does.

        ``include_timestamp`` makes values ``(value, timestamp)`` pairs;
        ``sorted_columns`` gives OrderedDicts in column order; ``reverse``
        scans from ``row_start`` (highest, inclusive) down to ``row_stop``
        (exclusive); ``scan_batching`` caps cells per yielded chunk of a wide row.
        ``path="cell"`` runs the cell-at-a-time scanners instead of the batch
        kernels (same results; the tests hold the two paths to each other).
        """
        if path not in ("batch", "cell"):
            raise InvalidArgument(f"path must be 'batch' or 'cell', got {path!r}")
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
        for batch in self.scan_batches(
            row_start, row_stop, row_prefix, columns, filter, timestamp, time_range, max_versions,
            limit, reverse, "cells", include_timestamp,
        ):
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
        scanner = TableScanner(factories, spec, metrics, on_close=lambda: _release_views(views))
        weakref.finalize(scanner, _release_views, views)  # a scanner never closed
        return scanner

    def row(self, row: bytes, columns: Sequence[bytes] | None = None, timestamp: int | None = None, include_timestamp: bool = False) -> dict:
        """One row as ``{b"cf:q": value}`` ({} if absent); a cell-path point read."""
        row = _check_bytes(row, "row key")
        columns = self._scan_columns(columns)
        _, max_ts = self._time_bounds(timestamp, None)
        spec = ScanSpec(start_row=row, stop_row=row + b"\x00", columns=columns, max_timestamp=max_ts) if max_ts else None
        if spec is None:
            return {}
        ((view, _, _),) = self._views([(row, row + b"\x00")])
        try:
            cells = Region.get_of(view, row, spec)
        finally:
            view.release()
        if not cells:
            return {}
        if include_timestamp:
            return {c[1] + b":" + c[2]: (c[5], c[3]) for c in cells}
        return {c[1] + b":" + c[2]: c[5] for c in cells}

    def _scan_cells(
        self, row_start, row_stop, row_prefix, columns, filter, timestamp, include_timestamp,
        batch_size, scan_batching, limit, sorted_columns, reverse, time_range, max_versions,
    ) -> Iterator[tuple[bytes, dict]]:
        make = OrderedDict if sorted_columns else dict
        with self.scanner(
            row_start, row_stop, row_prefix, columns, filter, timestamp, time_range, max_versions,
            limit, reverse, scan_batching, batch_size or 100,
        ) as scanner:
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

    def rows(self, rows: Sequence[bytes], columns: Sequence[bytes] | None = None, timestamp: int | None = None, include_timestamp: bool = False) -> list[tuple[bytes, dict]]:
        """Several rows, as ``[(row, data)]`` for the rows that exist, in the order asked."""
        out = []
        for r in rows:
            data = self.row(r, columns, timestamp, include_timestamp)
            if data:
                out.append((r, data))
        return out

    def cells(self, row: bytes, column: bytes, versions: int | None = None, timestamp: int | None = None, include_timestamp: bool = False) -> list:
        """The versions of one cell, newest first (values, or (value, ts) pairs)."""
        family, qualifier = parse_column(column)
        if qualifier is None:
            raise InvalidArgument(f"column {column!r} needs a qualifier")
        if versions is not None and (not isinstance(versions, int) or versions < 1):
            raise InvalidArgument(f"versions must be a positive int, got {versions!r}")
        row = _check_bytes(row, "row key")
        out = []
        for batch in self.scan_batches(
            row_start=row, row_stop=row + b"\x00", columns=[column], timestamp=timestamp,
            max_versions=versions or (1 << 31), output="cells",
        ):
            values = batch.column("value").to_pylist()
            stamps = batch.column("timestamp").to_pylist()
            out.extend(zip(values, stamps) if include_timestamp else values)
        return out

    # -- maintenance -----------------------------------------------------
    def flush(self) -> None:
        """Flush every region's memstore to store files."""
        self._check_open()
        with self._mutex:
            for r in self._regions:
                r.flush()

    def compact(self, major: bool = True) -> None:
        """Compact every region (major by default, as ``major_compact`` in the HBase shell)."""
        self._check_open()
        with self._mutex:
            for r in self._regions:
                r.flush()
                r.compact(major=major)
            clean_archive(self.fs)

    def split(self, split_key: bytes | None = None) -> list[RegionInfo]:
        """Split the region holding ``split_key`` at it, or every region at its midkey."""
        self._check_open()
        with self._mutex:
            if split_key is not None:
                split_key = _check_bytes(split_key, "split_key")
                region = self._region_for(split_key)
                if split_key == region.info.start:
                    raise InvalidArgument(f"split key {split_key!r} is the start of region {region.info.region_id}")
                self._split_region(region, split_key)
            else:
                for region in list(self._regions):
                    region.flush()
                    key = region.midkey()
                    if key is not None:
                        self._split_region(region, key)
            return self.region_infos()

    def _split_region(self, region: Region, key: bytes) -> None:
        region.flush()
        manifest = self._manifest
        lo_id = f"{manifest.next_region_id:08d}"
        hi_id = f"{manifest.next_region_id + 1:08d}"
        lo = RegionInfo(lo_id, region.info.start, key)
        hi = RegionInfo(hi_id, key, region.info.end)
        region.write_daughter(lo, self.fs)
        region.write_daughter(hi, self.fs)
        index = self._regions.index(region)
        new_infos = list(manifest.regions)
        new_infos[index : index + 1] = [lo, hi]
        new_manifest = TableManifest(
            manifest.name, manifest.families, manifest.settings, new_infos,
            manifest.next_region_id + 2, manifest.generation,
        )
        new_manifest.save(self.fs)  # the commit point of the split
        self._manifest = new_manifest
        daughters = [self._new_region(lo).open(), self._new_region(hi).open()]
        regions = list(self._regions)
        regions[index : index + 1] = daughters
        self._set_regions(regions)
        # scans that took a view of the parent keep reading its files; its
        # directory goes once the last of them ends
        parent_dir = f"regions/{region.info.region_id}"
        region.close(done=lambda: retire_dir(self.fs, parent_dir))

    def count(self, row_start: bytes | None = None, row_stop: bytes | None = None, row_prefix: bytes | None = None) -> int:
        """The number of rows in ``[row_start, row_stop)`` (or with ``row_prefix``),
        as a full scan would see them.

        Where a region's store files are clean (no delete markers), its families
        have no TTL, its memstore holds nothing for the range and the files'
        row ranges do not overlap, the count comes from the version 2 block
        indexes without reading data blocks (see :mod:`storage.row_count`);
        otherwise the region is scanned with the row-counting filter.
        """
        from .row_count import count_region_rows

        self._check_readable()
        low, high = row_range(row_start, row_stop, row_prefix, False)
        if high is not None and low >= high:
            return 0
        return sum(count_region_rows(region.view(), low, high) for region in self._regions_for_range(low, high))

    def store_file_readers(self) -> list:
        """The open :class:`storage.storefile.StoreFileReader` of every live store file."""
        return [f.reader for r in self._regions for s in r.stores.values() for f in s.files]

    def read_counters(self, reset: bool = False) -> dict[str, int]:
        """Block read counters summed over the table's store files (blocks and
        bytes read, extra header reads, cache hits and misses, seeks)."""
        from .storefile.counters import ReadCounters

        total = dict.fromkeys(ReadCounters.FIELDS, 0)
        for reader in self.store_file_readers():
            for name, value in reader.counters.snapshot().items():
                total[name] = total.get(name, 0) + value
            if reset:
                reader.counters.reset()
        return total

    def check(self) -> None:
        """Verify every invariant of the table's manifests and store files."""
        self._manifest.check()
        for r in self._regions:
            r.check()

    def close(self, why: str = "is closed", done=None) -> None:
        """Close the table: later calls raise ``StorageError("table <name> <why>")``.

        Scans already open finish on the files they leased; each file is
        closed when the last of them ends, and ``done`` (optional) runs then.
        """
        with self.leases.lock:
            if self.closed:
                return
            self.closed = True
            self._closed_why = why
        # Every region closes and the lock is released even when one region
        # fails (a WAL that failed earlier): a failed table must not stay locked.
        files, errors = [], []
        for r in self._regions:
            got, error = r.detach()
            files += got
            if error is not None:
                errors.append(error)
        if self._lock is not None:
            self._lock.release()
        self.leases.retire(files, lambda f: f.reader.close(), done)
        if errors:
            raise errors[0]

    def __repr__(self) -> str:
        return f"<Table {self.name!r} regions={len(self._regions)}>"


class ReadSnapshot:
    """Leased region views of one key range at one read point (see :meth:`Table.snapshot`)."""

    def __init__(self, table: Table, low: bytes, high: bytes | None, views: list[RegionView]):
        self.table = table
        self.low = low
        self.high = high
        self.views = views  # in key order
        self.read_point = views[0].read_point if views else table.mvcc.read_point

    def plan(self, spans: Sequence[tuple[bytes, bytes | None]]) -> list[tuple[RegionView, bytes, bytes | None]]:
        """The snapshot's views that each span covers, in key order (spans cut to the snapshot's range)."""
        if self.views is None:
            raise StorageError(f"snapshot of table {self.table.name} is closed")
        plan = []
        for lo, hi in spans:
            lo = max(lo, self.low)
            if self.high is not None and (hi is None or hi > self.high):
                hi = self.high
            if hi is not None and lo >= hi:
                continue
            for view in self.views:
                if hi is not None and view.start >= hi:
                    break
                if view.end is not None and view.end <= lo:
                    continue
                plan.append((view, lo, hi))
        return plan

    def close(self) -> None:
        """Release the views (scans still reading them must be done)."""
        views, self.views = self.views, None
        if views:
            _release_views(views)

    def __enter__(self) -> "ReadSnapshot":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _release_views(views: list[RegionView]) -> None:
    for view in views:
        view.release()


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


def _intersect_spans(low: bytes, high: bytes | None, ranges) -> list[tuple[bytes, bytes | None]]:
    """[low, high) intersected with a filter's sorted, disjoint row ranges."""
    spans = []
    for start, stop in sorted(ranges, key=lambda r: r[0]):
        lo = max(low, start)
        if stop is None:
            hi = high
        elif high is None:
            hi = stop
        else:
            hi = min(high, stop)
        if hi is not None and lo >= hi:
            continue
        if spans and (spans[-1][1] is None or lo <= spans[-1][1]):
            prev_lo, prev_hi = spans[-1]
            spans[-1] = (prev_lo, None if hi is None or prev_hi is None else max(prev_hi, hi))
        else:
            spans.append((lo, hi))
    return spans
