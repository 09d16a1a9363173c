"""Point reads of a table: one row, a list of rows, the versions of one cell."""

from __future__ import annotations

import bisect
from collections import OrderedDict
from typing import Iterable, Iterator, Sequence

from ..columns import parse_column
from ..mvcc import views_at_read_point
from ..errors import InvalidArgument, RegionNotFound, clip
from ..read.snapshot import release_views
from ..read.scan_request import ScanRequest
from ..region.region import Region
from ..scanner import ScanSpec
from .arguments import _check_bytes


class TableGets:
    """``row``, ``rows`` and ``cells`` of a :class:`~storage.table.table.Table`."""

    def row(self, row: bytes, columns: Sequence[bytes] | None = None, timestamp: int | None = None, include_timestamp: bool = False) -> dict:
        """One row as ``{b"cf:q": value}`` ({} if absent); a point read.

        Each store answers from its memstore and, per store file, from the
        bloom filter, the block index and a binary search of one block's row
        keys (:mod:`storage.storefile.point`); nothing else is built.
        """
        if type(row) is not bytes:
            row = _check_bytes(row, "row key")
        spec = self._point_spec(columns, timestamp)
        if spec is None:
            return {}
        def open_view(point: int):
            self._check_readable()
            return self._region_for(row).view(point)

        view = views_at_read_point(self.leases.lock, self.mvcc, open_view)
        try:
            cells = Region.get_of(view, row, spec)
        finally:
            view.release()
        if not cells:
            return {}
        if include_timestamp:
            return {c[1] + b":" + c[2]: (c[5], c[3]) for c in cells}
        return {c[1] + b":" + c[2]: c[5] for c in cells}

    def _point_spec(self, columns, timestamp) -> ScanSpec | None:
        """The checked column and time bounds of a point read as a ScanSpec, kept
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
        spec = ScanSpec(columns=None if request.columns is None else list(request.columns), max_timestamp=max_ts)
        if key is not None and (timestamp is None or type(timestamp) is int) and len(self._point_specs) < 256:
            self._point_specs[key] = spec
        return spec

    def _scan_cells(self, request: ScanRequest, batch_size: int | None) -> Iterator[tuple[bytes, dict]]:
        """``scan(path="cell")``: the request's rows through the cell-at-a-time scanners."""
        self._check_columns(request.columns)  # refused now; the scanner opens at the first next()
        return self._cell_dicts(request, batch_size or 100)

    def _cell_dicts(self, request: ScanRequest, caching: int) -> Iterator[tuple[bytes, dict]]:
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

    def rows(self, rows: Sequence[bytes], columns: Sequence[bytes] | None = None, timestamp: int | None = None, include_timestamp: bool = False) -> list[tuple[bytes, dict]]:
        """Several rows, as ``[(row, data)]`` for the rows that exist, in the order asked.

        A multi-get: the keys are sorted once, each region is read at one
        read point, and each store file looks all its keys up in one pass
        (one ``searchsorted`` of its block index, each block visited once).
        """
        if isinstance(rows, (bytes, str)) or not isinstance(rows, Iterable):
            raise InvalidArgument(f"rows must be a list of row keys, got {clip(repr(rows), 60)}")
        keys = [r if type(r) is bytes else _check_bytes(r, "row key") for r in rows]
        spec = self._point_spec(columns, timestamp)
        if spec is None or not keys:
            return []
        wanted = sorted(set(keys))
        found: dict[bytes, list] = {}

        def open_views(point: int) -> tuple[list, list]:
            self._check_readable()
            starts = self._starts
            groups: list[tuple[Region, list[bytes]]] = []
            i = 0
            while i < len(wanted):
                r = bisect.bisect_right(starts, wanted[i]) - 1
                if r < 0:
                    raise RegionNotFound(f"no region of {self.name} holds row {wanted[i]!r}")
                # the keys below the next region's start belong to this one
                j = len(wanted) if r + 1 >= len(starts) else bisect.bisect_left(wanted, starts[r + 1], i)
                groups.append((self._regions[r], wanted[i:j]))
                i = j
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
                found.update(Region.rows_of(view, group, spec))
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
