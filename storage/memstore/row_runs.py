"""The row form of a clean run of cells: what a memstore adds to a rows scan.

A memstore map (or a connector's decoded WAL, :mod:`storage.memstore.sorted_cells`)
whose cells are all puts with one version per column is, as rows, exactly
a dense block (:class:`storage.storefile.dense.DenseBlock`): its distinct
row keys and a value and timestamp column per qualifier.  :class:`RowRun`
pivots the cells into that form once (the owner keeps it beside its Arrow
copy of the cells: a memstore view, for the cells at its read point) and hands out zero-copy row-range
slices, which a rows scan merges with the store files' dense rows
(:mod:`storage.read.row_scan`).
"""

from __future__ import annotations

import pyarrow as pa

from ..kernels.cell_columns import CellColumns, as_cell_table
from ..kernels.merge import bisect_rows
from ..storefile.dense import DenseBlock, dense_from_cells

__all__ = ["RowRun"]


class RowRun:
    """One family's clean cells as rows (a :class:`DenseBlock`), sliced by row range."""

    __slots__ = ("dense",)

    def __init__(self, dense: DenseBlock):
        self.dense = dense

    @classmethod
    def of(cls, cells: pa.Table) -> "RowRun | None":
        """The row form of sorted cells of one family, or None when they are not
        all puts with one version per column (or too sparse or too wide for the
        dense form: see :func:`storage.storefile.dense.dense_from_cells`, which
        checks both)."""
        table = as_cell_table(cells)
        if table.num_rows == 0:
            return None
        if CellColumns(table).adjacent_ne("family")[1:].any():
            return None  # rows of one family only: the scan merges a family at a time
        batch = table.combine_chunks().to_batches()[0]
        dense = dense_from_cells(batch, min_rows=1)
        return None if dense is None else cls(dense)

    @property
    def num_rows(self) -> int:
        return self.dense.num_rows

    def slice(self, start_row: bytes, stop_row: bytes | None) -> DenseBlock | None:
        """The rows in ``[start_row, stop_row)`` (zero-copy), or None when there are none."""
        rows = self.dense.rows
        lo = bisect_rows(rows, start_row, right=False) if start_row else 0
        hi = len(rows) if stop_row is None else bisect_rows(rows, stop_row, right=False)
        if hi <= lo:
            return None
        return self.dense.slice(lo, hi)
