"""Shared pieces of the batch kernels: input checks and adjacent comparisons.

Every kernel works on whole columns.  A cell table is grouped by comparing
each cell's key columns with the previous cell's (Arrow ``not_equal`` on two
shifted slices), which yields boolean "group starts here" masks; NumPy then
numbers the groups with ``cumsum`` and reduces over them with ``reduceat``.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..cells import CELL_SCHEMA
from ..errors import InvalidArgument

__all__ = [
    "as_cell_table",
    "key_array",
    "numpy_column",
    "adjacent_ne",
    "row_starts",
    "family_starts",
    "column_starts",
    "group_ids",
    "empty_cells",
]

# Below this share of candidate positions, the row and family comparisons of
# column_starts are done on gathered positions instead of the whole column.
_SPARSE_SHARE = 0.25


def empty_cells() -> pa.Table:
    """An empty table with :data:`CELL_SCHEMA`."""
    return CELL_SCHEMA.empty_table()


def as_cell_table(cells: pa.Table | pa.RecordBatch, what: str = "cells") -> pa.Table:
    """Return ``cells`` as a Table with :data:`CELL_SCHEMA`, without copying.

    Raises InvalidArgument (naming ``what``) for other objects, other
    columns or types, or nulls.  Differences in field nullability or schema
    metadata are tolerated and normalised.
    """
    if isinstance(cells, pa.RecordBatch):
        cells = pa.Table.from_batches([cells])
    elif not isinstance(cells, pa.Table):
        raise InvalidArgument(
            f"{what} must be a pyarrow Table or RecordBatch, got {type(cells).__name__}"
        )
    schema = cells.schema
    if schema.names != CELL_SCHEMA.names or schema.types != CELL_SCHEMA.types:
        raise InvalidArgument(
            f"{what} must have the cell schema {CELL_SCHEMA.names} with types "
            f"{[str(t) for t in CELL_SCHEMA.types]}, got {schema.names} with "
            f"{[str(t) for t in schema.types]}"
        )
    for column, name in zip(cells.columns, schema.names):
        if column.null_count:
            raise InvalidArgument(f"{what}: column {name!r} holds {column.null_count} nulls")
    if not schema.equals(CELL_SCHEMA):
        cells = pa.Table.from_arrays(cells.columns, schema=CELL_SCHEMA)
    return cells


def key_array(table: pa.Table, name: str) -> pa.Array:
    """One column of ``table`` as a single Array (chunks concatenated if several).

    Used for the key columns, which are small next to the values.
    """
    column = table.column(name)
    if column.num_chunks == 1:
        return column.chunk(0)
    if column.num_chunks == 0:
        return pa.array([], column.type)
    return column.combine_chunks()


def numpy_column(table: pa.Table, name: str) -> np.ndarray:
    """A fixed-width column (timestamp, type) as a NumPy array."""
    return key_array(table, name).to_numpy(zero_copy_only=False)


def adjacent_ne(values: pa.Array | np.ndarray) -> np.ndarray:
    """Mask ``m`` with ``m[0] = True`` and ``m[i] = values[i] != values[i-1]``."""
    n = len(values)
    out = np.ones(n, dtype=bool)
    if n > 1:
        if isinstance(values, np.ndarray):
            np.not_equal(values[1:], values[:-1], out=out[1:])
        else:
            out[1:] = pc.not_equal(values.slice(1), values.slice(0, n - 1)).to_numpy(
                zero_copy_only=False
            )
    return out


def _ne_at(values: pa.Array, positions: np.ndarray) -> np.ndarray:
    """``values[p] != values[p-1]`` for each p in ``positions`` (all >= 1)."""
    if len(positions) == 0:
        return np.zeros(0, dtype=bool)
    here = values.take(positions)
    before = values.take(positions - 1)
    return pc.not_equal(here, before).to_numpy(zero_copy_only=False)


def row_starts(table: pa.Table) -> np.ndarray:
    """Mask of the cells that begin a new row."""
    return adjacent_ne(key_array(table, "row"))


def family_starts(table: pa.Table) -> np.ndarray:
    """Mask of the cells that begin a new (row, family) group."""
    return adjacent_ne(key_array(table, "row")) | adjacent_ne(key_array(table, "family"))


def column_starts(table: pa.Table) -> np.ndarray:
    """Mask of the cells that begin a new (row, family, qualifier) group.

    The qualifier is compared first; only where it equals the previous one
    can the cell continue a group, so row and family are compared at those
    positions alone when they are few (a table of one version per column
    never compares its row keys at all).
    """
    starts = adjacent_ne(key_array(table, "qualifier"))
    candidates = np.flatnonzero(~starts)
    if len(candidates) == 0:
        return starts
    if len(candidates) <= _SPARSE_SHARE * len(starts):
        differs = _ne_at(key_array(table, "family"), candidates)
        rest = candidates[~differs]
        differs_row = _ne_at(key_array(table, "row"), rest)
        starts[candidates[differs]] = True
        starts[rest[differs_row]] = True
        return starts
    return starts | family_starts(table)


def group_ids(starts: np.ndarray) -> np.ndarray:
    """Number the groups of a starts mask 0, 1, 2, ... for each element."""
    ids = np.cumsum(starts, dtype=np.int64)
    ids -= 1
    return ids
