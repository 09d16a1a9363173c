"""Row structure of a cell batch, computed once and shared by all filters.

A batch holds whole rows, each a run of adjacent cells with the same row
key (rows may come in reverse order, cells within a row in forward order).
:class:`RowBatch` finds the runs with one adjacent-inequality kernel;
filters then make row-level decisions on per-row arrays and broadcast them
back to cells with :meth:`RowBatch.broadcast` (``np.repeat`` over the run
lengths, cheaper than a cumulative sum and a gather on large batches).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..cells import CELL_SCHEMA
from ..errors import InvalidArgument

__all__ = ["RowBatch", "as_cell_table"]


def as_cell_table(cells: pa.Table | pa.RecordBatch) -> pa.Table:
    """Check that ``cells`` has the cell columns and return it as a table."""
    if isinstance(cells, pa.RecordBatch):
        cells = pa.Table.from_batches([cells])
    if not isinstance(cells, pa.Table):
        raise InvalidArgument(f"cells must be a pyarrow Table or RecordBatch, got {type(cells).__name__}")
    if cells.schema.names != CELL_SCHEMA.names:
        raise InvalidArgument(f"cells must have the columns {CELL_SCHEMA.names}, got {cells.schema.names}")
    return cells


class RowBatch:
    """A cell table plus its row runs.

    ``starts[r]`` is the index of row ``r``'s first cell and ``lengths[r]``
    its number of cells (rows numbered in batch order).  Columns are single
    Arrow arrays (chunks combined once).  A batch made by
    :meth:`select_rows` filters its parent's columns only when a filter
    asks for them, so filters deciding on row keys alone copy no cells.
    """

    def __init__(self, table: pa.Table | None, starts: np.ndarray | None = None, lengths: np.ndarray | None = None):
        self._table = table.combine_chunks() if table is not None else None
        self._parent: RowBatch | None = None
        self._cell_filter: pa.Array | None = None
        self._columns: dict[str, pa.Array] = {}
        self._keys: pa.Array | None = None
        self._row_ids: np.ndarray | None = None
        if starts is None:
            rows = self.column("row")
            n = len(rows)
            boundary = np.ones(n, dtype=bool)
            if n > 1:
                boundary[1:] = pc.not_equal(rows.slice(1), rows.slice(0, n - 1)).to_numpy(zero_copy_only=False)
            starts = np.flatnonzero(boundary)
            lengths = np.diff(starts, append=n)
        self.starts = starts
        self.lengths = lengths

    @property
    def num_cells(self) -> int:
        """Number of cells in the batch."""
        return int(self.starts[-1] + self.lengths[-1]) if len(self.starts) else 0

    @property
    def table(self) -> pa.Table:
        """The cells as a table."""
        if self._table is None:
            self._table = self._parent.table.filter(self._cell_filter)
        return self._table

    @property
    def num_rows(self) -> int:
        """Number of rows in the batch."""
        return len(self.starts)

    def column(self, name: str) -> pa.Array:
        """One cell column as a single Arrow array."""
        col = self._columns.get(name)
        if col is None:
            if self._table is None:
                col = self._parent.column(name).filter(self._cell_filter)
            else:
                chunked = self._table.column(name)  # one chunk after combine_chunks
                col = chunked.chunk(0) if chunked.num_chunks else pa.array([], chunked.type)
            self._columns[name] = col
        return col

    @property
    def keys(self) -> pa.Array:
        """The row keys, one per row, in batch order."""
        if self._keys is None:
            self._keys = self.column("row").take(pa.array(self.starts, pa.int64()))
        return self._keys

    @property
    def row_ids(self) -> np.ndarray:
        """The row number of every cell."""
        if self._row_ids is None:
            self._row_ids = np.repeat(np.arange(self.num_rows), self.lengths)
        return self._row_ids

    def row_of(self, positions: np.ndarray) -> np.ndarray:
        """The row numbers of the cells at ``positions``."""
        return np.searchsorted(self.starts, positions, side="right") - 1

    def broadcast(self, per_row: np.ndarray) -> np.ndarray:
        """A per-row array repeated for every cell of the row."""
        return np.repeat(per_row, self.lengths)

    def column_cells(self, family: bytes, qualifier: bytes) -> np.ndarray:
        """Mask of the cells in column ``family:qualifier``."""
        return pc.and_(
            pc.equal(self.column("family"), pa.scalar(family, pa.binary())),
            pc.equal(self.column("qualifier"), pa.scalar(qualifier, pa.binary())),
        ).to_numpy(zero_copy_only=False)

    def first_rows(self, count: int) -> np.ndarray:
        """Mask of the cells of the first ``count`` rows."""
        mask = np.zeros(self.num_cells, dtype=bool)
        end = self.num_cells if count >= self.num_rows else int(self.starts[count])
        mask[:end] = True
        return mask

    def first_cells(self) -> np.ndarray:
        """Mask of the first cell of every row."""
        mask = np.zeros(self.num_cells, dtype=bool)
        mask[self.starts] = True
        return mask

    def row_any(self, mask: np.ndarray) -> np.ndarray:
        """Per row: does any of its cells have ``mask`` set."""
        if self.num_rows == 0:
            return np.zeros(0, dtype=bool)
        return np.logical_or.reduceat(mask, self.starts)

    def row_all(self, mask: np.ndarray) -> np.ndarray:
        """Per row: do all of its cells have ``mask`` set."""
        if self.num_rows == 0:
            return np.zeros(0, dtype=bool)
        return np.logical_and.reduceat(mask, self.starts)

    def select_rows(self, keep_rows: np.ndarray) -> "RowBatch":
        """A batch of the rows where ``keep_rows`` (per row) is set."""
        lengths = self.lengths[keep_rows]
        starts = np.zeros(len(lengths), dtype=np.int64)
        np.cumsum(lengths[:-1], out=starts[1:])
        sub = RowBatch(None, starts, lengths)
        sub._parent = self
        sub._cell_filter = pa.array(self.broadcast(keep_rows))
        if self._keys is not None:
            sub._keys = self._keys.filter(pa.array(keep_rows))
        return sub

    def cell_positions(self, keep_rows: np.ndarray) -> np.ndarray:
        """Indices of the cells of the rows where ``keep_rows`` is set."""
        return np.flatnonzero(self.broadcast(keep_rows))
