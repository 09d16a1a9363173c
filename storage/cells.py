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

from .errors import InvalidArgument

__all__ = [
    "CellType",
    "Cell",
    "CELL_SCHEMA",
    "LATEST_TIMESTAMP",
    "sort_key",
    "cells_to_batch",
    "batch_to_cells",
    "is_delete",
    "check_cell",
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

EMPTY_CELLS = CELL_SCHEMA.empty_table()
"""An empty table of :data:`CELL_SCHEMA`, built once: Arrow tables are immutable, and building one
cost 0.2 ms a region in a scan that asked whether an empty memstore held its range."""


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


_TYPES = frozenset(int(t) for t in CellType)
_DELETE_FAMILY = int(CellType.DELETE_FAMILY)


def check_cell(cell: tuple) -> Cell:
    """Validate one cell and return it as a :class:`Cell` of plain ints.

    Raises InvalidArgument naming the bad field; the engine's write paths
    call it on cells a caller built by hand.
    """
    if len(cell) != 6:
        raise InvalidArgument(f"cell {cell!r}: expected (row, family, qualifier, timestamp, type, value)")
    row, family, qualifier, timestamp, cell_type, value = cell
    if type(row) is not bytes or not row:
        raise InvalidArgument(f"cell row={row!r}: expected non-empty bytes")
    if type(family) is not bytes or not family:
        raise InvalidArgument(f"cell family={family!r}: expected non-empty bytes")
    if type(qualifier) is not bytes:
        raise InvalidArgument(f"cell qualifier={qualifier!r}: expected bytes")
    if type(value) is not bytes:
        raise InvalidArgument(f"cell value of type {type(value).__name__}: expected bytes")
    if not isinstance(timestamp, int) or not 0 <= timestamp <= LATEST_TIMESTAMP:
        raise InvalidArgument(f"cell timestamp={timestamp!r}: expected an int in [0, 2**63-1]")
    if cell_type not in _TYPES:
        raise InvalidArgument(f"cell type={cell_type!r}: expected a CellType code")
    if cell_type == _DELETE_FAMILY and qualifier:
        # Scanners find family markers at the start of the family's cells.
        raise InvalidArgument(f"cell qualifier={qualifier!r}: a DeleteFamily marker has an empty qualifier")
    return Cell(row, family, qualifier, int(timestamp), int(cell_type), value)
