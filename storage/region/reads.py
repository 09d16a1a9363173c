"""Reads of one region: leased views at a read point, the cell scanner over a
view and point gets."""

from __future__ import annotations

from ..cells import LATEST_TIMESTAMP, Cell
from ..errors import StorageError
from ..mvcc import views_at_read_point
from ..keys import clip_bounds
from .view import RegionView


class RegionReads:
    """Views, cell scanners and gets of a :class:`~storage.region.region.Region`."""

    def view(self, read_point: int | None = None) -> RegionView:
        """A read view at ``read_point`` (default: the table's read point now)
        that later writes, flushes, compactions and splits do not change.

        The view leases its store files; call :meth:`RegionView.release`.
        At a given ``read_point`` it may raise
        :class:`~storage.mvcc.ReadPointTooOld` (see
        :func:`~storage.mvcc.views_at_read_point`, which callers use).
        A caller capturing views of several regions at one read point holds
        ``leases.lock`` around the calls (see :mod:`storage.region.reader_leases`).
        """
        if self.offline is not None:  # it did not open: see Region.open
            raise self.offline_error()
        if read_point is None:
            return views_at_read_point(self.leases.lock, self.mvcc, self.view)
        with self.leases.lock:
            if self.closed:
                raise StorageError(f"region {self.info.region_id} of {self.table_name} is closed")
            point = read_point
            stores = {}
            try:
                for name, store in self.stores.items():
                    stores[name] = store.view(point)
            except BaseException:
                for opened in stores.values():
                    opened.memstore.release()
                raise
            self.leases.acquire([f for v in stores.values() for f in v.files])
        return RegionView(self.info, stores, self.table_name, self.leases)

    @staticmethod
    def cell_scanner_of(view: RegionView, spec, metrics=None, low: bytes = b"", high: bytes | None = None):
        """A cell-at-a-time :class:`storage.scanner.RegionScanner` over ``[low, high)``
        of a region view (the caller releases the view after the scanner)."""
        from ..scanner import RegionScanner, StoreScanner

        read_spec = spec.with_filter_columns()
        wanted = read_spec.families()
        stores = []
        for name, sview in view.stores.items():
            family = name.encode()
            if wanted is not None and family not in wanted:
                continue
            stores.append(
                StoreScanner(
                    sview.scanners(metrics),
                    family,
                    read_spec,
                    max_versions=sview.settings.max_versions,
                    ttl=sview.settings.ttl,
                    metrics=metrics,
                    min_versions=sview.settings.min_versions,
                    keep_deleted_cells=sview.settings.keep_deleted_cells,
                    flushed_from=1,  # sview.scanners(): the memstore, then the store files
                )
            )
        start, end = clip_bounds(view.info.start, view.info.end, low, high)
        return RegionScanner(stores, spec, start_row=start, end_row=end, metrics=metrics, shared_filter=True)

    def get(self, row: bytes, spec) -> list[Cell]:
        """The visible cells of one row (a point read), in cell order.

        Each source hands over the row's cells directly (memstore lookup;
        bloom filter, index bisect and block bisect in store files).  A row
        found in one store file that holds one version per column and no
        delete markers needs no resolution; anything else goes through the
        same :class:`StoreScanner` rules as scans.
        """
        view = self.view()
        try:
            return self.get_of(view, row, spec)
        finally:
            view.release()

    @staticmethod
    def get_of(view: RegionView, row: bytes, spec) -> list[Cell]:
        """The visible cells of ``row`` in a region view (see :meth:`get`)."""
        wanted = spec.families()
        out: list[Cell] = []
        for name in sorted(view.stores):
            family = name.encode()
            if wanted is not None and family not in wanted:
                continue
            sview = view.stores[name]
            mem = sview.memstore.row_cells(row)
            found = [(f, f.reader.row_cells(row)) for f in sview.files]
            out.extend(_store_row(sview.settings, family, spec, mem, found))
        return out

    @staticmethod
    def rows_of(view: RegionView, rows: list[bytes], spec) -> dict[bytes, list[Cell]]:
        """:meth:`get_of` of many rows of the region at once (distinct, ascending):
        each store file looks all of them up in one pass over its blocks
        (:meth:`StoreFileReader.rows_cells`).  Rows without a visible cell are left out."""
        wanted = spec.families()
        out: dict[bytes, list[Cell]] = {}
        for name in sorted(view.stores):
            family = name.encode()
            if wanted is not None and family not in wanted:
                continue
            sview = view.stores[name]
            memstore = sview.memstore
            mem = {} if memstore.is_empty() else {r: c for r in rows for c in (memstore.row_cells(r),) if c}
            per_file = [(f, f.reader.rows_cells(rows)) for f in sview.files]
            present = set(mem)
            for _, hits in per_file:
                present.update(hits)
            settings = sview.settings
            for row in sorted(present):
                found = [(f, hits.get(row, ())) for f, hits in per_file]
                cells = _store_row(settings, family, spec, mem.get(row, ()), found)
                if cells:
                    out.setdefault(row, []).extend(cells)
        return out


def _store_row(settings, family: bytes, spec, mem, found) -> list[Cell]:
    """The visible cells of one row in one store: its memstore cells ``mem``
    and ``found``, ``(file, cells)`` per store file, newest first.

    A row found in one store file that holds one version per column and no
    delete markers needs no resolution (a filter of its cells by column and
    time); anything else goes through the same :class:`StoreScanner` rules
    as scans.
    """
    hits = [(f, cells) for f, cells in found if cells]
    if not mem and not hits:
        return []
    if not mem and len(hits) == 1 and not hits[0][0].reader.info.needs_resolution and settings.ttl is None:
        qualifiers = spec.qualifiers(family)
        lo, hi = spec.min_timestamp, spec.max_timestamp
        cells = hits[0][1]
        if qualifiers is None and lo == 0 and hi == LATEST_TIMESTAMP:
            return cells
        return [c for c in cells if (qualifiers is None or c[2] in qualifiers) and lo <= c[3] < hi]
    from ..scanner import ListScanner, StoreScanner  # the scanner package imports this module

    sources = [ListScanner(list(mem))] + [ListScanner(list(cells)) for _, cells in found]
    store = StoreScanner(sources, family, spec, max_versions=settings.max_versions, ttl=settings.ttl,
                         min_versions=settings.min_versions, keep_deleted_cells=settings.keep_deleted_cells,
                         flushed_from=1)  # the memstore's cells, then each file's
    out = store.read_row() or []
    store.close()
    return out
