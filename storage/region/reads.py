"""Reads of one region: leased views at a read point, the cell scanner over a
view and point gets."""

from __future__ import annotations

from ..cells import Cell
from ..errors import StorageError
from .view import RegionView


class RegionReads:
    """Views, cell scanners and gets of a :class:`~storage.region.region.Region`."""

    def view(self, read_point: int | None = None) -> RegionView:
        """A read view at ``read_point`` (default: the table's read point now)
        that later writes, flushes, compactions and splits do not change.

        The view leases its store files; call :meth:`RegionView.release`.
        A caller capturing views of several regions at one read point holds
        ``leases.lock`` around the calls (see :mod:`storage.region.reader_leases`).
        """
        with self.leases.lock:
            if self.closed:
                raise StorageError(f"region {self.info.region_id} of {self.table_name} is closed")
            point = self.mvcc.read_point if read_point is None else read_point
            stores = {n: s.view(point) for n, s in self.stores.items()}
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
                )
            )
        start = max(low, view.info.start)
        end = view.info.end
        if high is not None and (end is None or high < end):
            end = high
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
        from ..scanner import ListScanner, StoreScanner

        wanted = spec.families()
        out: list[Cell] = []
        for name in sorted(view.stores):
            family = name.encode()
            if wanted is not None and family not in wanted:
                continue
            sview = view.stores[name]
            settings = sview.settings
            mem = sview.memstore.row_cells(row)
            found = [(f, f.reader.row_cells(row)) for f in sview.files]
            hits = [(f, cells) for f, cells in found if cells]
            if not mem and not hits:
                continue
            if not mem and len(hits) == 1 and not hits[0][0].reader.info.needs_resolution and settings.ttl is None:
                qualifiers = spec.qualifiers(family)
                lo, hi = spec.min_timestamp, spec.max_timestamp
                out.extend(
                    c for c in hits[0][1] if (qualifiers is None or c[2] in qualifiers) and lo <= c[3] < hi
                )
                continue
            sources = [ListScanner(mem)] + [ListScanner(cells) for _, cells in found]
            store = StoreScanner(sources, family, spec, max_versions=settings.max_versions, ttl=settings.ttl)
            out.extend(store.read_row() or ())
            store.close()
        return out
