"""Row structure and order of cell tables: row boundaries, reversal, sortedness."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from ..cells import CellType
from ._arrays import CellColumns, as_cell_table, take_cells

_PUT = int(CellType.PUT)

__all__ = ["row_boundaries", "column_boundaries", "reverse_rows", "is_sorted", "is_clean"]


def row_boundaries(cells: pa.Table | pa.RecordBatch) -> np.ndarray:
    """Index of the first cell of each row (int64, ascending; empty for no cells).

    Rows are runs of equal row keys, so the cells must be grouped by row
    (cell order guarantees it).
    """
    return np.flatnonzero(CellColumns(as_cell_table(cells)).row_starts())


def column_boundaries(cells: pa.Table | pa.RecordBatch) -> np.ndarray:
    """Index of the first (newest) cell of each column (row, family, qualifier),
    int64 ascending; the cells must be in cell order."""
    return np.flatnonzero(CellColumns(as_cell_table(cells)).column_starts())


def reverse_rows(cells: pa.Table | pa.RecordBatch) -> pa.Table:
    """The rows of ``cells`` in reverse order, cells within each row in forward order.

    This is the order a reverse scan returns: last row first, but each row's
    cells still sorted by family, qualifier and timestamp.
    """
    table = as_cell_table(cells)
    n = table.num_rows
    if n == 0:
        return table
    starts = np.flatnonzero(CellColumns(table).row_starts())
    if len(starts) == 1:
        return table
    lengths = np.diff(np.append(starts, n))
    rev_starts, rev_lengths = starts[::-1], lengths[::-1]
    # Output position p inside reversed row r reads rev_starts[r] + (p - begin_r).
    begins = np.cumsum(rev_lengths) - rev_lengths
    indices = np.arange(n, dtype=np.int64) + np.repeat(rev_starts - begins, rev_lengths)
    return take_cells(table, indices)


def is_sorted(cells: pa.Table | pa.RecordBatch, *, strict: bool = False) -> bool:
    """True when the cells are in cell order.

    Cell order is row, family, qualifier ascending, timestamp descending,
    type descending.  With ``strict`` two cells with the same (row, family,
    qualifier, timestamp, type) also count as out of order, as they must not
    both sit in one store file.
    """
    table = as_cell_table(cells)
    n = table.num_rows
    if n < 2:
        return True
    # Walk the key from its last part to its first: "in order from here on"
    # for each adjacent pair, refined by each more significant column.
    columns = CellColumns(table)
    ts = columns.numpy("timestamp")
    types = columns.numpy("type")
    ok = types[1:] < types[:-1] if strict else types[1:] <= types[:-1]
    ok = (ts[1:] < ts[:-1]) | ((ts[1:] == ts[:-1]) & ok)
    for name in ("qualifier", "family", "row"):
        greater, equal = columns.adjacent_order(name)
        ok = greater | (equal & ok)
    return bool(ok.all())


def is_clean(cells: pa.Table | pa.RecordBatch) -> bool:
    """True when sorted cells need no version or delete resolution: every
    cell is a put and no (row, family, qualifier) holds two cells."""
    cols = CellColumns(as_cell_table(cells))
    if cols.n == 0:
        return True
    types = cols.numpy("type")
    if int(types.min()) != _PUT or int(types.max()) != _PUT:
        return False
    return bool(cols.column_starts().all())
