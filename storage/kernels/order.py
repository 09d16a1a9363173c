"""Row structure and order of cells, the one set of these kernels: row starts
(of a row column or a cell table), the reverse-scan order, and sortedness (a
yes/no check and the first cell out of order)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from ..cells import CellType
from .cell_columns import CellColumns, as_cell_table
from .gather import take_cells

_PUT = int(CellType.PUT)

__all__ = [
    "row_starts",
    "row_boundaries",
    "column_boundaries",
    "reverse_rows_order",
    "reverse_rows",
    "is_sorted",
    "first_unsorted",
    "is_clean",
]


def row_starts(rows: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """Index of the first entry of each row in a row column grouped by row
    (int64, ascending, 0 included; empty for no entries)."""
    return np.flatnonzero(CellColumns(pa.table({"row": rows})).adjacent_ne("row")).astype(np.int64, copy=False)


def row_boundaries(cells: pa.Table | pa.RecordBatch) -> np.ndarray:
    """Index of the first cell of each row (int64, ascending; empty for no cells).

    Rows are runs of equal row keys, so the cells must be grouped by row
    (cell order guarantees it).
    """
    return row_starts(as_cell_table(cells).column("row"))


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
    starts = row_boundaries(table)
    if len(starts) == 1:
        return table
    return take_cells(table, reverse_rows_order(starts, n))


def reverse_rows_order(starts: np.ndarray, n: int) -> np.ndarray:
    """A take-permutation of ``n`` entries whose rows begin at ``starts`` that
    reverses the rows but keeps each row's entries in order."""
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    lengths = np.diff(np.append(starts, n))
    rev_starts, rev_lengths = starts[::-1], lengths[::-1]
    # Output position p inside reversed row r reads rev_starts[r] + (p - begin_r).
    begins = np.cumsum(rev_lengths) - rev_lengths
    return np.arange(n, dtype=np.int64) + np.repeat(rev_starts - begins, rev_lengths)


def is_sorted(cells: pa.Table | pa.RecordBatch, *, strict: bool = False) -> bool:
    """True when the cells are in cell order.

    Cell order is row, family, qualifier ascending, timestamp descending,
    type descending.  With ``strict`` two cells with the same (row, family,
    qualifier, timestamp, type) also count as out of order, as they must not
    both sit in one store file.
    """
    table = as_cell_table(cells)
    if _rows_go_down(table):
        return False
    return bool(_pairs_in_order(table, strict).all())


_PEEK = 16


def _rows_go_down(table: pa.Table) -> bool:
    """Whether a row key among the first :data:`_PEEK` cells is below the one before: a log of
    hashed or salted keys is told unsorted from a few cells, not from a pass over all of them."""
    rows = table.column("row").slice(0, _PEEK).to_pylist()
    return any(b < a for a, b in zip(rows, rows[1:]))


def first_unsorted(cells: pa.Table | pa.RecordBatch) -> int | None:
    """Index ``i`` of the first cell that sorts before cell ``i - 1``, or None.

    Order is :func:`storage.cells.sort_key` order; equal keys are allowed
    (the non-strict order of :func:`is_sorted`).
    """
    bad = np.flatnonzero(~_pairs_in_order(as_cell_table(cells), False))
    return int(bad[0]) + 1 if len(bad) else None


def _pairs_in_order(table: pa.Table, strict: bool) -> np.ndarray:
    """For each adjacent pair of cells, whether the second sorts after the first."""
    if table.num_rows < 2:
        return np.ones(0, dtype=bool)
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
    return ok


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
