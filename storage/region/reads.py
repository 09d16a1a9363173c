"""Reads of one region view: the cell scanner over it, point gets and multi-gets
(:meth:`~storage.region.region.Region.view` takes the view)."""

from __future__ import annotations

from ..cells import LATEST_TIMESTAMP, Cell
from ..keys import clip_bounds
from ..scanner import ListScanner, RegionScanner, StoreScanner
from .view import RegionView

__all__ = ["cell_scanner_of", "get_of", "rows_of", "store_row"]


def cell_scanner_of(view: RegionView, spec, metrics=None, low: bytes = b"", high: bytes | None = None):
    """A cell-at-a-time :class:`storage.scanner.RegionScanner` over ``[low, high)``
    of a region view (the caller releases the view after the scanner)."""
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


def get_of(view: RegionView, row: bytes, spec) -> list[Cell]:
    """The visible cells of ``row`` in a region view, in cell order (a point read).

    Each source hands over the row's cells directly (memstore lookup;
    bloom filter, index bisect and block bisect in store files).  A row
    found in one store file that holds one version per column and no
    delete markers needs no resolution; anything else goes through the
    same :class:`StoreScanner` rules as scans.
    """
    wanted = spec.families()
    out: list[Cell] = []
    for name in sorted(view.stores):
        family = name.encode()
        if wanted is not None and family not in wanted:
            continue
        sview = view.stores[name]
        mem = sview.memstore.row_cells(row)
        found = [(f, f.reader.row_cells(row)) for f in sview.files]
        out.extend(store_row(sview.settings, family, spec, mem, found))
    return out


def rows_of(view: RegionView, rows: list[bytes], spec) -> dict[bytes, list[Cell]]:
    """:func:`get_of` of many rows of the region at once (distinct, ascending):
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
            cells = store_row(settings, family, spec, mem.get(row, ()), found)
            if cells:
                out.setdefault(row, []).extend(cells)
    return out


def store_row(settings, family: bytes, spec, mem, found) -> list[Cell]:
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
    sources = [ListScanner(list(mem))] + [ListScanner(list(cells)) for _, cells in found]
    store = StoreScanner(sources, family, spec, max_versions=settings.max_versions, ttl=settings.ttl,
                         min_versions=settings.min_versions, keep_deleted_cells=settings.keep_deleted_cells,
                         flushed_from=1)  # the memstore's cells, then each file's
    out = store.read_row() or []
    store.close()
    return out
