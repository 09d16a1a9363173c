"""Value rewriting by KeyOnlyFilter, in both scan paths.

A filter reports, next to which cells it keeps, a value mode for them:
keep the value, replace it with its length (4-byte big-endian, HBase's
``Bytes.toBytes(int)``), or replace it with ``b""``.  When several filters
rewrite one cell the strongest mode (highest number) wins.
"""

from __future__ import annotations

import struct

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..cells import Cell

__all__ = ["KEEP", "LENGTH", "EMPTY", "rewrite_cell", "rewrite_values"]

KEEP = 0
LENGTH = 1
EMPTY = 2

_LENGTH = struct.Struct(">i")


def rewrite_cell(cell: Cell, mode: int) -> Cell:
    """The cell with its value rewritten for ``mode``."""
    if mode == EMPTY:
        return Cell(cell[0], cell[1], cell[2], cell[3], cell[4], b"")
    if mode == LENGTH:
        return Cell(cell[0], cell[1], cell[2], cell[3], cell[4], _LENGTH.pack(len(cell[5])))
    return cell


def _lengths(values: pa.Array) -> pa.Array:
    """Each value's length as a 4-byte big-endian binary value."""
    lengths = pc.binary_length(values).to_numpy(zero_copy_only=False).astype(">i4")
    data = pa.py_buffer(lengths.tobytes())
    offsets = pa.py_buffer(np.arange(0, 4 * len(values) + 1, 4, dtype=np.int32).tobytes())
    return pa.Array.from_buffers(pa.binary(), len(values), [None, offsets, data])


def rewrite_values(values: pa.Array, mode: int | np.ndarray) -> pa.Array:
    """Rewrite a binary value column; ``mode`` is one mode or one per value."""
    if isinstance(mode, (int, np.integer)):
        if mode == EMPTY:
            return _empties(len(values))
        if mode == LENGTH:
            return _lengths(values)
        return values
    out = values
    if (mode == LENGTH).any():
        out = pc.if_else(pa.array(mode == LENGTH), _lengths(values), out)
    if (mode == EMPTY).any():
        out = pc.if_else(pa.array(mode == EMPTY), pa.scalar(b"", pa.binary()), out)
    return out


def _empties(n: int) -> pa.Array:
    offsets = pa.py_buffer(np.zeros(n + 1, dtype=np.int32).tobytes())
    return pa.Array.from_buffers(pa.binary(), n, [None, offsets, pa.py_buffer(b"")])
