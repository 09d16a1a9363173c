"""Pivot resolved cells into a row batch: one row per row key, one column per spec.

Column specs follow HBase / happybase: ``b"family:qualifier"`` is one
column, ``b"family"`` or ``b"family:"`` the whole family.
"""

from __future__ import annotations

from typing import NamedTuple, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..cells import CellType
from ..errors import InvalidArgument
from ._arrays import as_cell_table, column_starts, group_ids, key_array, numpy_column, row_starts

__all__ = ["cells_to_rows", "ColumnSpec", "parse_column", "FAMILY_MAP_TYPE"]

FAMILY_MAP_TYPE = pa.map_(pa.binary(), pa.binary())
"""Arrow type of a whole-family column: qualifier -> value."""


class ColumnSpec(NamedTuple):
    """A parsed column spec; ``qualifier`` is None for a whole family."""

    family: bytes
    qualifier: bytes | None
    name: str


def parse_column(spec: bytes | str) -> ColumnSpec:
    """Parse ``b"family:qualifier"``, ``b"family:"`` or ``b"family"``.

    The column name is the spec decoded as UTF-8 with ``surrogateescape``
    (``"family:qualifier"``, or ``"family"`` for a whole family).
    """
    if isinstance(spec, str):
        spec = spec.encode("utf-8", "surrogateescape")
    if not isinstance(spec, (bytes, bytearray, memoryview)):
        raise InvalidArgument(f"column spec must be bytes, got {spec!r}")
    spec = bytes(spec)
    family, sep, qualifier = spec.partition(b":")
    if not family:
        raise InvalidArgument(f"column spec {spec!r} has an empty family")
    family_name = family.decode("utf-8", "surrogateescape")
    if not sep or not qualifier:
        return ColumnSpec(family, None, family_name)
    return ColumnSpec(family, qualifier, f"{family_name}:{qualifier.decode('utf-8', 'surrogateescape')}")


def cells_to_rows(
    cells: pa.Table, columns: Sequence[bytes], *, include_timestamp: bool = False
) -> pa.RecordBatch:
    """Pivot cells into a row batch.

    The batch's first column is ``key`` (binary, not null), then one column
    per spec of ``columns``, in that order:

    * ``b"family:qualifier"`` -> a binary column ``"family:qualifier"``, null
      where the row lacks the cell; with ``include_timestamp`` it is followed
      by an int64 column ``"family:qualifier@ts"`` (null likewise);
    * ``b"family"`` or ``b"family:"`` -> a ``map<binary, binary>`` column
      ``"family"`` of qualifier -> value in qualifier order, **null** (not an
      empty map) where the row has no cell of the family.

    Cells are expected resolved (see :func:`resolve`), but where a column has
    several versions the first (newest) is taken, and delete markers are
    ignored.  Rows without any requested column are not emitted: a row exists
    only through its cells.
    """
    table = as_cell_table(cells)
    specs = [parse_column(spec) for spec in columns]
    if not specs:
        raise InvalidArgument("columns must name at least one column")
    names = [spec.name for spec in specs]
    if len(set(names)) != len(names):
        duplicates = sorted({name for name in names if names.count(name) > 1})
        raise InvalidArgument(f"columns names a column more than once: {duplicates}")

    types = numpy_column(table, "type")
    if len(types) and (int(types.max()) != CellType.PUT or int(types.min()) != CellType.PUT):
        table = table.filter(pa.array(types == CellType.PUT))
    n = table.num_rows

    row = key_array(table, "row")
    family = key_array(table, "family")
    qualifier = key_array(table, "qualifier")
    row_start = row_starts(table)
    row_id = group_ids(row_start)

    # Which cells each spec matches; family comparisons are shared by specs.
    family_masks: dict[bytes, np.ndarray] = {}
    matches = []
    for spec in specs:
        if spec.family not in family_masks:
            family_masks[spec.family] = _equals(family, spec.family)
        mask = family_masks[spec.family]
        if spec.qualifier is not None:
            mask = mask & _equals(qualifier, spec.qualifier)
        matches.append(mask)

    # Rows that hold at least one requested column, and their output position.
    any_match = np.logical_or.reduce(matches) if len(matches) > 1 else matches[0]
    present = np.zeros(int(row_id[-1]) + 1 if n else 0, dtype=bool)
    present[row_id[any_match]] = True
    out_rows = np.flatnonzero(present)
    out_count = len(out_rows)
    out_position = np.cumsum(present, dtype=np.int64) - 1

    fields = [pa.field("key", pa.binary(), nullable=False)]
    arrays = [row.take(np.flatnonzero(row_start)[out_rows])]
    value = table.column("value")
    column_start = None
    for spec, mask in zip(specs, matches):
        if spec.qualifier is None:
            if column_start is None:
                column_start = column_starts(table)
            # The newest cell of each column of the family.
            picked = np.flatnonzero(mask & column_start)
            fields.append(pa.field(spec.name, FAMILY_MAP_TYPE))
            arrays.append(
                _family_map(qualifier, value, picked, out_position[row_id[picked]], out_count)
            )
            continue
        matched = np.flatnonzero(mask)
        matched_rows = row_id[matched]
        # Versions of one column are adjacent, newest first: keep the first
        # match of each row.
        first = np.ones(len(matched), dtype=bool)
        np.not_equal(matched_rows[1:], matched_rows[:-1], out=first[1:])
        picked = matched[first]
        slots = out_position[matched_rows[first]]
        fields.append(pa.field(spec.name, pa.binary()))
        arrays.append(_scatter(value, picked, slots, out_count))
        if include_timestamp:
            ts = numpy_column(table, "timestamp")
            fields.append(pa.field(f"{spec.name}@ts", pa.int64()))
            arrays.append(_scatter(pa.array(ts), picked, slots, out_count))
    return pa.RecordBatch.from_arrays(arrays, schema=pa.schema(fields))


def _equals(values: pa.Array, wanted: bytes) -> np.ndarray:
    """Mask of the elements equal to ``wanted``."""
    return pc.equal(values, pa.scalar(wanted, pa.binary())).to_numpy(zero_copy_only=False)


def _gather(values: pa.Array | pa.ChunkedArray, indices: np.ndarray) -> pa.Array:
    """``values.take(indices)`` as one Array."""
    taken = values.take(indices)
    if isinstance(taken, pa.ChunkedArray):
        taken = taken.combine_chunks()
    return taken


def _scatter(
    values: pa.Array | pa.ChunkedArray, picked: np.ndarray, slots: np.ndarray, size: int
) -> pa.Array:
    """An array of ``size`` with ``values[picked[i]]`` at ``slots[i]`` and nulls elsewhere."""
    if len(picked) == size:
        # Every output row has the column: slots is 0..size-1 in order.
        return _gather(values, picked)
    indices = np.zeros(size, dtype=np.int64)
    indices[slots] = picked
    missing = np.ones(size, dtype=bool)
    missing[slots] = False
    return _gather(values, pa.array(indices, mask=missing))


def _family_map(
    qualifier: pa.Array,
    value: pa.ChunkedArray,
    picked: np.ndarray,
    slots: np.ndarray,
    size: int,
) -> pa.MapArray:
    """A map column of qualifier -> value per output row, null where a row has none."""
    counts = np.bincount(slots, minlength=size)
    offsets = np.zeros(size + 1, dtype=np.int32)
    np.cumsum(counts, out=offsets[1:])
    if len(picked) == len(qualifier) and value.num_chunks == 1:
        # Every cell belongs to the map (one family, one version each): reuse
        # the cell columns as the map's keys and items without copying.
        keys, items = qualifier, value.chunk(0)
    else:
        keys, items = qualifier.take(picked), _gather(value, picked)
    mask = None if len(picked) and counts.all() else pa.array(counts == 0)
    return pa.MapArray.from_arrays(pa.array(offsets), keys, items, type=FAMILY_MAP_TYPE, mask=mask)
