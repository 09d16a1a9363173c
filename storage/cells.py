"""Cells, their types and their order, as in HBase.

A cell is the tuple ``(row, family, qualifier, timestamp, type, value)``.
Cells sort by row, family and qualifier ascending, then timestamp
descending, then type descending, so that for one coordinate and timestamp
the delete markers come before the put they hide.  :func:`sort_key` gives
that order as a tuple Python compares in C.

The batch form of cells is an Arrow record batch with :data:`CELL_SCHEMA`;
the same six columns in the same order.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Iterable, NamedTuple

import pyarrow as pa

__all__ = [
    "CellType",
    "Cell",
    "CELL_SCHEMA",
    "LATEST_TIMESTAMP",
    "sort_key",
    "cells_to_batch",
    "batch_to_cells",
    "is_delete",
]

LATEST_TIMESTAMP = (1 << 63) - 1
"""The largest timestamp; a put without one gets the current time in ms."""


class CellType(IntEnum):
    """Type codes of cells.

    DO NOT CHANGE THESE VALUES: they are written into store files and WAL
    records.  They are HBase's own codes, and the sort order depends on them
    (higher code first for equal coordinates and timestamp).
    """

    PUT = 4
    DELETE = 8  # hides the one version with exactly this timestamp
    DELETE_COLUMN = 12  # hides every version of the column at or before the timestamp
    DELETE_FAMILY = 14  # hides every column of the family at or before the timestamp


class Cell(NamedTuple):
    """One cell; a plain tuple, so building and comparing them stays cheap."""

    row: bytes
    family: bytes
    qualifier: bytes
    timestamp: int
    type: int
    value: bytes


CELL_SCHEMA = pa.schema(
    [
        pa.field("row", pa.binary(), nullable=False),
        pa.field("family", pa.binary(), nullable=False),
        pa.field("qualifier", pa.binary(), nullable=False),
        pa.field("timestamp", pa.int64(), nullable=False),
        pa.field("type", pa.uint8(), nullable=False),
        pa.field("value", pa.binary(), nullable=False),
    ]
)
"""Arrow schema of a batch of cells, in cell order."""


def sort_key(cell: tuple) -> tuple:
    """Return the key that sorts cells in HBase order."""
    return (cell[0], cell[1], cell[2], -cell[3], -cell[4])


def is_delete(cell_type: int) -> bool:
    """True for the delete marker types."""
    return cell_type != CellType.PUT


def cells_to_batch(cells: Iterable[tuple]) -> pa.RecordBatch:
    """Build a :data:`CELL_SCHEMA` batch from cell tuples (kept in their order)."""
    cells = list(cells)
    if not cells:
        return pa.RecordBatch.from_pylist([], schema=CELL_SCHEMA)
    rows, families, qualifiers, timestamps, types, values = zip(*cells)
    return pa.RecordBatch.from_arrays(
        [
            pa.array(rows, pa.binary()),
            pa.array(families, pa.binary()),
            pa.array(qualifiers, pa.binary()),
            pa.array(timestamps, pa.int64()),
            pa.array(types, pa.uint8()),
            pa.array(values, pa.binary()),
        ],
        schema=CELL_SCHEMA,
    )


def batch_to_cells(batch: pa.RecordBatch | pa.Table) -> list[Cell]:
    """Turn a :data:`CELL_SCHEMA` batch back into cell tuples."""
    columns = [batch.column(i).to_pylist() for i in range(6)]
    return [Cell(*c) for c in zip(*columns)]
