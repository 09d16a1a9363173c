"""Point reads of a table: one row, or a list of rows, each region read at one
read point from its memstore, bloom filters and block indexes.

:class:`PointReads` is the collaborator a :class:`~storage.table.table.Table`
holds for ``row`` and ``rows``; the table hands it its region map, read
point and leases, and its checks (open, and the columns' families)."""

from __future__ import annotations

from bisect import bisect_right
from typing import Callable, Iterable, Sequence

from ..errors import InvalidArgument, check_bytes, clip
from ..mvcc import Mvcc, views_at_read_point
from ..read.scan_request import ScanRequest
from ..read.snapshot import release_views
from ..region.read_state import state_get, state_row_dict, state_rows, state_rows_dicts
from ..region.reader_leases import Leases
from ..region.reads import get_of, rows_of
from ..scanner import CellScanSpec
from ..storefile.point import POINT_ROW
from .region_map import RegionMap

__all__ = ["PointReads"]

# reads of a region's read state that a flush, compaction or first write may send
# back to start before one falls back to a region view (which waits for none of them)
_STATE_TRIES = 3


class PointReads:
    """``row`` and ``rows`` of one :class:`~storage.table.table.Table`."""

    def __init__(self, regions: RegionMap, mvcc: Mvcc, leases: Leases, check_readable: Callable[[], None],
                 check_columns: Callable[[Sequence[bytes] | None], None]):
        self.regions = regions
        self.mvcc = mvcc
        self.leases = leases
        self._check_readable = check_readable
        self._check_columns = check_columns
        self._point_specs: dict = {}  # (columns, timestamp) -> CellScanSpec of point reads
        self._all_columns: CellScanSpec | None = None  # point_spec(None, None), once made

    def row(self, row: bytes, columns: Sequence[bytes] | None = None, timestamp: int | None = None, include_timestamp: bool = False) -> dict:
        """One row as ``{b"cf:q": value}`` ({} if absent); a point read.

        Each store answers from its memstore and, per store file, from the
        bloom filter, the block index and a binary search of one block's row
        keys (:mod:`storage.storefile.point`); nothing else is built.  Where the
        row's memstores are empty it reads the region's published state, with
        no view, lock or lease (:mod:`storage.region.read_state`).
        """
        if type(row) is not bytes:
            row = check_bytes(row, "row key")
        spec = self._all_columns if columns is None and timestamp is None else None
        if spec is None:
            spec = self.point_spec(columns, timestamp)
            if spec is None:
                return {}
        if POINT_ROW is not None and spec is self._all_columns and not include_timestamp:
            got = self._state_get(row, spec, state_row_dict)
            if got is not None:
                return got
        cells = self._state_get(row, spec)
        if cells is None:
            def open_view(point: int):
                self._check_readable()
                return self.regions.region_for(row).view(point)

            view = views_at_read_point(self.leases.lock, self.mvcc, open_view)
            try:
                cells = get_of(view, row, spec)
            finally:
                view.release()
        if not cells:
            return {}
        if include_timestamp:
            return {c[1] + b":" + c[2]: (c[5], c[3]) for c in cells}
        return {c[1] + b":" + c[2]: c[5] for c in cells}

    def _state_get(self, row: bytes, spec, read=state_get):
        """The cells of ``row`` from its region's read state
        (:mod:`storage.region.read_state`), taking no view, lock or lease (``read``:
        what reads the state, :func:`state_get` or :func:`state_row_dict`); None
        when a view is needed (a memstore holds cells, the region is not open,
        or the state changed under every try)."""
        self._check_readable()
        for _ in range(_STATE_TRIES):
            starts, regions = self.regions.routing
            i = bisect_right(starts, row) - 1
            if i < 0:
                return None  # the view path names the missing region
            region = regions[i]
            state = region.read_state
            if state is None:
                return None
            try:
                cells = read(state, row, spec)
            except Exception:
                if region.read_state is state:
                    raise
                continue  # a file retired by a swap meanwhile: read the new state
            if region.read_state is state:
                return cells
        return None

    def _state_rows(self, wanted: list[bytes], spec, read=state_rows) -> dict[bytes, list] | None:
        """:meth:`_state_get` of many rows (distinct, ascending) over every region
        that holds them (``read``: :func:`state_rows` or :func:`state_rows_dicts`);
        the answer counts only if no region's state changed between the first
        state taken and the last read, so all of it is the table at one instant.
        None when a view is needed."""
        self._check_readable()
        for _ in range(_STATE_TRIES):
            groups = self.regions.keys_by_region(wanted)
            states = [region.read_state for region, _ in groups]
            if None in states:
                return None
            found: dict[bytes, list] = {}
            try:
                for state, (_, group) in zip(states, groups):
                    got = read(state, group, spec)
                    if got is None:
                        return None  # a memstore holds cells
                    found.update(got)
            except Exception:
                if all(region.read_state is state for (region, _), state in zip(groups, states)):
                    raise
                continue  # a file retired by a swap meanwhile: read the new states
            if all(region.read_state is state for (region, _), state in zip(groups, states)):
                return found
        return None

    def point_spec(self, columns, timestamp) -> CellScanSpec | None:
        """The checked column and time bounds of a point read as a CellScanSpec, kept
        for reuse by column list and bound (None: the bound excludes every cell)."""
        key = (None if columns is None else tuple(columns) if isinstance(columns, (list, tuple)) else columns, timestamp)
        try:
            # only plain ints are kept by timestamp: True == 1 must still be refused
            spec = self._point_specs.get(key) if timestamp is None or type(timestamp) is int else None
        except TypeError:  # an unhashable column list: checked below, not kept
            spec, key = None, None
        if spec is not None:
            return spec
        request = ScanRequest(columns=columns, timestamp=timestamp)
        self._check_columns(request.columns)
        _, max_ts = request.time_bounds()
        if not max_ts:
            return None
        spec = CellScanSpec(columns=None if request.columns is None else list(request.columns), max_timestamp=max_ts)
        if key is not None and (timestamp is None or type(timestamp) is int) and len(self._point_specs) < 256:
            self._point_specs[key] = spec
        if columns is None and timestamp is None:
            self._all_columns = spec
        return spec

    def rows(self, rows: Sequence[bytes], columns: Sequence[bytes] | None = None, timestamp: int | None = None, include_timestamp: bool = False) -> list[tuple[bytes, dict]]:
        """Several rows, as ``[(row, data)]`` for the rows that exist, in the order asked.

        A multi-get: the keys are sorted once, each region is read at one
        read point, and each store file looks all its keys up in one pass
        (one ``searchsorted`` of its block index, each block visited once).
        """
        if isinstance(rows, (bytes, str)) or not isinstance(rows, Iterable):
            raise InvalidArgument(f"rows must be a list of row keys, got {clip(repr(rows), 60)}")
        keys = [r if type(r) is bytes else check_bytes(r, "row key") for r in rows]
        spec = self.point_spec(columns, timestamp)
        if spec is None or not keys:
            return []
        wanted = sorted(set(keys))
        if POINT_ROW is not None and spec is self._all_columns and not include_timestamp:
            dicts = self._state_rows(wanted, spec, state_rows_dicts)
            if dicts is not None:
                if len(wanted) == len(keys):
                    return [(r, dicts[r]) for r in keys if r in dicts]
                out, given = [], set()
                for r in keys:
                    data = dicts.get(r)
                    if data:
                        if r in given:
                            data = data.copy()  # a key asked twice gets a dict of its own
                        given.add(r)
                        out.append((r, data))
                return out
        found = self._state_rows(wanted, spec)
        if found is None:
            found = {}

            def open_views(point: int) -> tuple[list, list]:
                self._check_readable()
                groups = self.regions.keys_by_region(wanted)
                views = []
                try:
                    for region, _ in groups:
                        views.append(region.view(point))
                except BaseException:
                    release_views(views)
                    raise
                return groups, views

            groups, views = views_at_read_point(self.leases.lock, self.mvcc, open_views)
            try:
                for view, (_, group) in zip(views, groups):
                    found.update(rows_of(view, group, spec))
            finally:
                release_views(views)
        out = []
        for r in keys:
            cells = found.get(r)
            if cells:
                if include_timestamp:
                    out.append((r, {c[1] + b":" + c[2]: (c[5], c[3]) for c in cells}))
                else:
                    out.append((r, {c[1] + b":" + c[2]: c[5] for c in cells}))
        return out
