"""Per-block cell helpers of the store file writer and reader: cell sizes,
single cells and keys of a block, runs of equal keys, row counts below a key.

Everything here works on whole Arrow arrays with Arrow compute or NumPy;
nothing loops over cells in Python.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..cells import Cell

__all__ = [
    "CELL_OVERHEAD",
    "cell_sizes",
    "count_rows_below",
    "cell_at",
    "key_at",
    "key_run_end",
]

CELL_OVERHEAD = 8 + 1 + 4 * 4
"""Bytes a cell adds besides its row, family, qualifier and value: the
timestamp, the type and one 32-bit offset per binary column (Arrow layout)."""


def _np(arr: pa.Array | pa.ChunkedArray) -> np.ndarray:
    return arr.to_numpy(zero_copy_only=False)


def cell_sizes(batch: pa.RecordBatch) -> np.ndarray:
    """Uncompressed Arrow bytes of each cell, as int64 (what block sizes count)."""
    total = np.full(batch.num_rows, CELL_OVERHEAD, dtype=np.int64)
    for name in ("row", "family", "qualifier", "value"):
        total += _np(pc.binary_length(batch.column(name)))
    return total


def count_rows_below(rows: pa.Array, row: bytes) -> int:
    """How many entries of a sorted row column are < ``row``."""
    return int(pc.sum(pc.less(rows, pa.scalar(row, pa.binary()))).as_py() or 0)


def cell_at(batch: pa.RecordBatch, i: int) -> Cell:
    """Cell ``i`` of a batch (one scalar access per column: for per-block use)."""
    return Cell(*(batch.column(c)[i].as_py() for c in range(6)))


def key_at(batch: pa.RecordBatch, i: int) -> tuple:
    """Sort key of cell ``i`` of a batch."""
    c = cell_at(batch, i)
    return (c[0], c[1], c[2], -c[3], -c[4])


def key_run_end(batch: pa.RecordBatch, start: int) -> int:
    """The first index ``j >= max(start, 1)`` whose sort key differs from cell
    ``j - 1``'s, or ``num_rows``: where a run of equal keys ends."""
    n = batch.num_rows
    if start >= n:
        return n
    tail = batch.slice(start - 1 if start else 0)
    m = tail.num_rows
    tie = np.ones(max(m - 1, 0), dtype=bool)
    for name in ("row", "family", "qualifier", "timestamp", "type"):
        col = tail.column(name)
        tie &= _np(pc.equal(col.slice(1), col.slice(0, m - 1)))
    differ = np.flatnonzero(~tie)
    base = start - 1 if start else 0
    return base + int(differ[0]) + 1 if len(differ) else n
