"""Vectorized kernels over cell batches used by the store file writer and reader.

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
    "first_unsorted",
    "row_starts",
    "reverse_rows_order",
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


def first_unsorted(batch: pa.RecordBatch) -> int | None:
    """Index ``i`` of the first cell that sorts before cell ``i - 1``, or None.

    Order is :func:`storage.cells.sort_key` order; equal keys are allowed.
    The family column is compared too, so the check holds for any batch.
    """
    n = batch.num_rows
    if n < 2:
        return None
    bad = np.zeros(n - 1, dtype=bool)
    tie = np.ones(n - 1, dtype=bool)
    for name, descending in (("row", False), ("family", False), ("qualifier", False), ("timestamp", True), ("type", True)):
        col = batch.column(name)
        prev, cur = col.slice(0, n - 1), col.slice(1)
        worse = pc.greater(cur, prev) if descending else pc.less(cur, prev)
        bad |= tie & _np(worse)
        tie &= _np(pc.equal(cur, prev))
    hits = np.flatnonzero(bad)
    return int(hits[0]) + 1 if len(hits) else None


def row_starts(rows: pa.Array) -> np.ndarray:
    """Indices (int64) where a new row begins in a sorted row column, 0 included."""
    n = len(rows)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    changed = _np(pc.not_equal(rows.slice(1), rows.slice(0, n - 1)))
    return np.concatenate(([0], np.flatnonzero(changed) + 1)).astype(np.int64)


def reverse_rows_order(starts: np.ndarray, n: int) -> np.ndarray:
    """A take-permutation that reverses the rows but keeps each row's cells in order."""
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    ends = np.append(starts[1:], n)
    rs, re = starts[::-1], ends[::-1]
    lengths = re - rs
    # Position k of the output belongs to reversed run r(k); its source index is
    # rs[r] + (k - first output position of run r).
    run_of = np.repeat(np.arange(len(rs)), lengths)
    out_first = np.cumsum(lengths) - lengths
    return (rs[run_of] + (np.arange(n) - out_first[run_of])).astype(np.int64)


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
