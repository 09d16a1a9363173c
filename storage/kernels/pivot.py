"""Pivot resolved cells into a row batch: one row per row key, one column per spec.

Column specs are parsed by :func:`storage.columns.parse_column` (HBase's
rules): ``b"family:qualifier"`` is one column, ``b"family:"`` the column
with the empty qualifier, ``b"family"`` the whole family.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pyarrow as pa

from ..cells import CellType
from ..columns import parse_column
from ..errors import InvalidArgument
from .cell_columns import CellColumns, as_cell_table, group_ids, one_array

__all__ = ["cells_to_rows", "FAMILY_MAP_TYPE"]

FAMILY_MAP_TYPE = pa.map_(pa.binary(), pa.binary())
"""Arrow type of a whole-family column: qualifier -> value."""


def cells_to_rows(
    cells: pa.Table, columns: Sequence[bytes], *, include_timestamp: bool = False
) -> pa.RecordBatch:
    """Pivot cells into a row batch.

    The batch's first column is ``key`` (binary, not null), then one column
    per spec of ``columns``, in that order:

    * ``b"family:qualifier"`` (``b"family:"``: the empty qualifier) -> a
      binary column ``"family:qualifier"``, null where the row lacks the
      cell; with ``include_timestamp`` it is followed by an int64 column
      ``"family:qualifier@ts"`` (null likewise);
    * ``b"family"`` -> a ``map<binary, binary>`` column
      ``"family"`` of qualifier -> value in qualifier order, **null** (not an
      empty map) where the row has no cell of the family.

    Cells are expected resolved (see :func:`resolve`), but where a column has
    several versions the first (newest) is taken, and delete markers are
    ignored.  Rows without any requested column are not emitted: a row exists
    only through its cells.
    """
    table = as_cell_table(cells)
    if isinstance(columns, (bytes, str)):
        raise InvalidArgument(f"columns must be a sequence of column specs, got {columns!r}")
    specs = [parse_column(spec) for spec in columns]
    if not specs:
        raise InvalidArgument("columns must name at least one column")
    names = [spec.name for spec in specs]
    if len(set(names)) != len(names):
        duplicates = sorted({name for name in names if names.count(name) > 1})
        raise InvalidArgument(f"columns names a column more than once: {duplicates}")

    cols = CellColumns(table)
    types = cols.numpy("type")
    if len(types) and (int(types.max()) != CellType.PUT or int(types.min()) != CellType.PUT):
        table = table.filter(pa.array(types == CellType.PUT))
        cols = CellColumns(table)
    row_start = cols.row_starts()
    row_first = np.flatnonzero(row_start)  # first cell of each row
    row_count = len(row_first)
    row_id = group_ids(row_start)

    # The cells each spec takes and the rows they belong to; family
    # comparisons are shared by the specs of one family.
    family_masks: dict[bytes, np.ndarray] = {}
    picks = []
    for spec in specs:
        if spec.family not in family_masks:
            family_masks[spec.family] = cols.equals("family", spec.family)
        mask = family_masks[spec.family]
        if spec.qualifier is None:
            # The first (newest) cell of each column of the family.
            picked = np.flatnonzero(mask & cols.column_starts())
            rows = row_id[picked]
            row_hits = _distinct_count(rows)
        else:
            picked = np.flatnonzero(mask & cols.equals("qualifier", spec.qualifier))
            rows = row_id[picked]
            # Versions of one column are adjacent, newest first: keep the
            # first match in each row.
            first = np.ones(len(picked), dtype=bool)
            np.not_equal(rows[1:], rows[:-1], out=first[1:])
            if not first.all():
                picked, rows = picked[first], rows[first]
            row_hits = len(rows)
        picks.append((picked, rows, row_hits))

    # Output rows: those holding at least one requested column.
    if any(row_hits == row_count for _, _, row_hits in picks):
        out_count, out_first, position = row_count, row_first, None
    else:
        present = np.zeros(row_count, dtype=bool)
        for _, rows, _ in picks:
            present[rows] = True
        out_first = row_first[present]
        out_count = len(out_first)
        position = group_ids(present)

    fields = [pa.field("key", pa.binary(), nullable=False)]
    arrays = [cols.array("row") if out_count == cols.n else cols.take_binary("row", out_first)]
    value = one_array(table.column("value"))
    for spec, (picked, rows, _) in zip(specs, picks):
        slots = rows if position is None else position[rows]
        if spec.qualifier is None:
            fields.append(pa.field(spec.name, FAMILY_MAP_TYPE))
            arrays.append(_family_map(cols, value, picked, slots, out_count))
            continue
        fields.append(pa.field(spec.name, pa.binary()))
        arrays.append(_scatter(value, picked, slots, out_count))
        if include_timestamp:
            fields.append(pa.field(f"{spec.name}@ts", pa.int64()))
            arrays.append(_scatter(cols.numpy("timestamp"), picked, slots, out_count))
    return pa.RecordBatch.from_arrays(arrays, schema=pa.schema(fields))


def _distinct_count(sorted_values: np.ndarray) -> int:
    """Number of distinct values in an ascending array."""
    if len(sorted_values) == 0:
        return 0
    return int(np.count_nonzero(sorted_values[1:] != sorted_values[:-1])) + 1


def _scatter(
    values: pa.Array | np.ndarray, picked: np.ndarray, slots: np.ndarray, size: int
) -> pa.Array:
    """An array of ``size`` with ``values[picked[i]]`` at ``slots[i]`` and nulls elsewhere.

    ``slots`` ascends, so when every output row has a value it is 0..size-1.
    """
    if isinstance(values, np.ndarray):
        if len(picked) == size:
            return pa.array(values[picked])
        out = np.zeros(size, dtype=values.dtype)
        out[slots] = values[picked]
        missing = np.ones(size, dtype=bool)
        missing[slots] = False
        return pa.array(out, mask=missing)
    if len(picked) == size:
        return values.take(picked)
    indices = np.zeros(size, dtype=np.int64)
    indices[slots] = picked
    missing = np.ones(size, dtype=bool)
    missing[slots] = False
    return values.take(pa.array(indices, mask=missing))


def _family_map(
    cols: CellColumns,
    value: pa.Array,
    picked: np.ndarray,
    slots: np.ndarray,
    size: int,
) -> pa.MapArray:
    """A map column of qualifier -> value per output row, null where a row has none."""
    counts = np.bincount(slots, minlength=size)
    offsets = np.zeros(size + 1, dtype=np.int32)
    np.cumsum(counts, out=offsets[1:])
    if len(picked) == cols.n:
        # Every cell belongs to the map (one family, one version each): reuse
        # the cell columns as the map's keys and items without copying.
        keys, items = cols.array("qualifier"), value
    else:
        keys, items = cols.take_binary("qualifier", picked), value.take(picked)
    mask = None if len(picked) and counts.all() else pa.array(counts == 0)
    return pa.MapArray.from_arrays(pa.array(offsets), keys, items, type=FAMILY_MAP_TYPE, mask=mask)
