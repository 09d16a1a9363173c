"""Counting a region's rows, from the block indexes when they can answer.

A version 2 store file keeps each block's row count in its index, so the
rows of a clean file (no delete markers) are counted without reading a data
block; only the blocks at the ends of a row range are read, for their keys.
The region's count is the sum over its files when that sum is exact:

* nothing in the memstore for the range (unflushed puts or deletes);
* no family has a TTL (expired cells would still be counted);
* no file holds a delete marker (a version 1 file without a recorded count
  is taken as having some);
* the files' row ranges do not overlap, so no row is counted twice.

Otherwise the region is scanned with ``FirstKeyOnlyFilter() AND
KeyOnlyFilter()``, which resolves versions, deletes and TTL and returns one
empty-valued cell per row.

The same goes for row-key lengths (:func:`row_key_lengths`,
:func:`first_key_not_of_length`): a reader that maps keys to a fixed-width
type and answers from the indexes or a byte seek must know that every key
has that width.  Store files record their shortest and longest key in the
file info; the memstore's keys and files written before that are measured
by one length kernel over their key columns.
"""

from __future__ import annotations

import numpy as np
import pyarrow.compute as pc

from ..region.view import RegionView
from ..keys import clip_bounds
from .batch_scan import scan_region_batches
from .region_plan import RegionReadPlan

__all__ = ["ROW_COUNT_FILTER", "count_region_rows", "index_countable", "row_key_lengths", "first_key_not_of_length"]

ROW_COUNT_FILTER = "FirstKeyOnlyFilter() AND KeyOnlyFilter()"
"""One empty-valued cell per row: the cheapest scan that still sees every row."""


def index_countable(view: RegionView, low: bytes, high: bytes | None) -> list | None:
    """The readers whose index row counts add up to the region's rows in
    ``[low, high)``, or None when the indexes alone cannot answer (see the
    module docstring)."""
    readers = []
    for store in view.stores.values():
        if store.settings.ttl is not None:
            return None
        if not store.memstore.is_empty() and store.memstore_batch(low, high).num_rows:
            return None
        for f in store.files:
            info = f.reader.info
            if info.cell_count == 0:
                continue
            if info.delete_count != 0:
                return None
            readers.append(f.reader)
    readers.sort(key=lambda r: r.info.first_cell[0])
    for a, b in zip(readers, readers[1:]):
        if a.info.last_cell[0] >= b.info.first_cell[0]:
            return None  # overlapping row ranges: a row may sit in both files
    return readers


def count_region_rows(view: RegionView, low: bytes = b"", high: bytes | None = None) -> int:
    """Visible rows of the region in ``[low, high)`` (clipped to the region)."""
    from ..filters import coerce_filter

    low, high = clip_bounds(view.start, view.end, low, high)
    if high is not None and low >= high:
        return 0
    readers = index_countable(view, low, high)
    if readers is not None:
        return sum(r.count_rows(low or None, high) for r in readers)
    flt = coerce_filter(ROW_COUNT_FILTER)
    scan = RegionReadPlan(low=low, high=high, filter=flt, output="cells")
    # the filter leaves exactly one cell per row
    return sum(batch.num_rows for batch in scan_region_batches(view, scan))


def _widen(bounds: tuple[int, int] | None, lo: int, hi: int) -> tuple[int, int]:
    return (lo, hi) if bounds is None else (min(bounds[0], lo), max(bounds[1], hi))


def row_key_lengths(view: RegionView) -> tuple[int, int] | None:
    """``(shortest, longest)`` row key stored in the region (its files and memstore, deleted
    rows included), or None when the region stores no row or a file of it does not record
    its key lengths (a file written before the file info had them).

    Files answer from their info; the memstore's keys are measured by one kernel.
    """
    bounds = None
    for store in view.stores.values():
        for f in store.files:
            info = f.reader.info
            if info.cell_count == 0:
                continue
            lengths = info.row_lengths
            if lengths is None:
                return None
            bounds = _widen(bounds, *lengths)
        if not store.memstore.is_empty():
            cells = store.memstore_batch(view.start, view.end)
            if cells.num_rows:
                got = pc.min_max(pc.binary_length(cells.column("row"))).as_py()
                bounds = _widen(bounds, got["min"], got["max"])
    return bounds


def first_key_not_of_length(view: RegionView, width: int) -> bytes | None:
    """The first visible row key of the region whose length is not ``width``, or None when
    every row key is ``width`` bytes long.

    Where :func:`row_key_lengths` says every stored key has the width, nothing is read.
    Otherwise the region's rows are scanned with the row-counting filter (key sections
    only; versions and deletes resolved, so a deleted row of another width is not one)
    and each batch's keys are tested by one length kernel.
    """
    from ..filters import coerce_filter

    if row_key_lengths(view) == (width, width):
        return None
    scan = RegionReadPlan(low=view.start, high=view.end, filter=coerce_filter(ROW_COUNT_FILTER), output="cells")
    for batch in scan_region_batches(view, scan):
        if not batch.num_rows:
            continue
        rows = batch.column(0)
        wrong = pc.not_equal(pc.binary_length(rows), width).to_numpy(zero_copy_only=False)
        if wrong.any():
            return rows[int(np.flatnonzero(wrong)[0])].as_py()
    return None
