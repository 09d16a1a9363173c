"""Shared pieces of the batch kernels: input checks and column comparisons.

Every kernel works on whole columns.  A cell table is grouped by comparing
each cell's key columns with the previous cell's, which yields boolean
"group starts here" masks; NumPy then numbers the groups with ``cumsum``
and reduces over them with ``reduceat``.

Binary key columns whose values all have one width of 1, 2, 4 or 8 bytes
(fixed-width row keys, families, qualifiers) are compared as NumPy unsigned
integers, several times faster than Arrow's byte-string kernels; other
columns go through Arrow compute.  :class:`CellColumns` caches what one
kernel call derives from a table (concatenated columns, widths, masks).
"""

from __future__ import annotations

import struct

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..cells import CELL_SCHEMA, EMPTY_CELLS
from ..errors import InvalidArgument

__all__ = [
    "one_array",
    "value_offsets",
    "data_span",
    "coded_bytes",
    "as_cell_table",
    "empty_cells",
    "bools",
    "group_ids",
    "pool_empty",
    "CellColumns",
]

# Below this share of candidate positions, column_starts compares row and
# family at the gathered positions only instead of over whole columns.
_SPARSE_SHARE = 0.25

UINT_BY_WIDTH = {1: "u1", 2: "u2", 4: "u4", 8: "u8"}


def empty_cells() -> pa.Table:
    """An empty table with :data:`CELL_SCHEMA`."""
    return EMPTY_CELLS


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


def bools(mask: pa.BooleanArray | pa.ChunkedArray) -> np.ndarray:
    """An Arrow boolean result as a NumPy bool array (nulls read as False)."""
    mask = one_array(mask)
    if mask.null_count == 0 and mask.offset == 0 and len(mask):
        # Unpacking the bitmap directly is ~15x faster than to_numpy().
        bitmap = np.frombuffer(mask.buffers()[1], dtype=np.uint8)
        return np.unpackbits(bitmap, count=len(mask), bitorder="little").view(bool)
    return mask.fill_null(False).to_numpy(zero_copy_only=False).astype(bool, copy=False)


def group_ids(starts: np.ndarray) -> np.ndarray:
    """Number the groups of a starts mask 0, 1, 2, ... for each element."""
    # int32 accumulates about twice as fast as int64; cell tables stay far
    # below 2**31 cells.
    ids = np.cumsum(starts, dtype=np.int32 if len(starts) < 2**31 else np.int64)
    ids -= 1
    return ids


_INT32 = struct.Struct("<i")
_INT64 = struct.Struct("<q")


def pool_empty(shape: int | tuple[int, ...], dtype) -> np.ndarray:
    """An uninitialized, writable NumPy array of ``shape`` and ``dtype`` whose memory comes from
    Arrow's memory pool instead of NumPy's allocator.

    A live scan makes arrays of a few hundred KB to a few MB per chunk (a merge's output, the
    gathered values); NumPy takes them from the C allocator, which maps such sizes afresh and
    returns them on free, so every scan paid a page fault per 4 KiB written (up to a thousand a
    scan of 200K rows).  Arrow's pool keeps freed memory for the next allocation, as it does for
    the decompressed chunks the same scan reads."""
    dtype = np.dtype(dtype)
    dims = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    count = 1
    for d in dims:
        count *= int(d)
    buf = pa.allocate_buffer(max(count * dtype.itemsize, 1))
    return np.frombuffer(buf, dtype=dtype, count=count).reshape(dims)


def data_span(values: pa.Array) -> int:
    """Bytes from the first to past the last value of a binary, list or map
    array's slice: two offsets read (a NumPy view costs more, per call)."""
    word = _INT64 if pa.types.is_large_binary(values.type) else _INT32
    buf = values.buffers()[1]
    at = values.offset * word.size
    return word.unpack_from(buf, at + len(values) * word.size)[0] - word.unpack_from(buf, at)[0]


def one_array(values: pa.Array | pa.ChunkedArray) -> pa.Array:
    """``values`` as one array: a chunked array's only chunk as it is (its
    ``combine_chunks`` copies even a single chunk), several chunks joined."""
    if not isinstance(values, pa.ChunkedArray):
        return values
    if values.num_chunks == 1:
        return values.chunk(0)
    if values.num_chunks == 0:
        return pa.array([], values.type)
    return values.combine_chunks()


def coded_bytes(codes: np.ndarray, lengths: np.ndarray) -> int:
    """Bytes of the entries ``codes`` pick from a dictionary whose entries are ``lengths``
    long: each entry's length times the rows that use it (half the CPU of gathering a
    length per row and summing them: 56 against 115 us for 42 K one-byte codes)."""
    if codes.dtype == np.uint64:  # bincount takes no unsigned 64-bit codes; a code is far below 2^63
        codes = codes.view(np.int64)
    return int(np.bincount(codes, minlength=len(lengths)) @ lengths.astype(np.int64, copy=False))


def value_offsets(values: pa.Array) -> np.ndarray:
    """The ``len(values) + 1`` offsets of a binary, list or map array's slice
    (int64 for a large binary array), as a view of its buffer."""
    dtype = np.int64 if pa.types.is_large_binary(values.type) else np.int32
    return np.frombuffer(values.buffers()[1], dtype=dtype, count=len(values) + 1, offset=values.offset * dtype().itemsize)


class CellColumns:
    """Cached per-column views of one cell table, for the length of one kernel call.

    Key columns are concatenated into single arrays once; widths, integer
    views and group-start masks are computed on first use.
    """

    def __init__(self, table: pa.Table):
        self.table = table
        self.n = table.num_rows
        self._arrays: dict[str, pa.Array] = {}
        self._numpy: dict[str, np.ndarray] = {}
        self._widths: dict[str, int | None] = {}
        self._views: dict[tuple[str, bool], np.ndarray | None] = {}
        self._ne: dict[str, np.ndarray] = {}
        self._column_starts: np.ndarray | None = None

    def array(self, name: str) -> pa.Array:
        """The column as one Array."""
        if name not in self._arrays:
            self._arrays[name] = one_array(self.table.column(name))
        return self._arrays[name]

    def numpy(self, name: str) -> np.ndarray:
        """A fixed-width column (timestamp, type) as a NumPy array."""
        if name not in self._numpy:
            self._numpy[name] = self.array(name).to_numpy(zero_copy_only=False)
        return self._numpy[name]

    def width(self, name: str) -> int | None:
        """The common byte width of a binary column's values, or None if they differ."""
        if name not in self._widths:
            self._widths[name] = self._fixed_width(self.array(name))
        return self._widths[name]

    @staticmethod
    def _fixed_width(values: pa.Array) -> int | None:
        n = len(values)
        if n == 0:
            return None
        offsets = value_offsets(values)
        total = int(offsets[-1]) - int(offsets[0])
        if total % n:
            return None
        width = total // n
        # Lengths are >= 0 and sum to n * width: all equal iff the least is width.
        if width and int(np.diff(offsets).min()) != width:
            return None
        return width

    def view(self, name: str, order: bool = False) -> np.ndarray | None:
        """A binary column as one unsigned integer per value, or None.

        Possible when all values have one width of 0, 1, 2, 4 or 8 bytes
        (empty values read as 0).  With ``order`` the integers are big-endian,
        so their numeric order is the bytes' lexicographic order; otherwise
        native, for equality only.
        """
        key = (name, order)
        if key not in self._views:
            width = self.width(name)
            view = None
            if width == 0:
                view = np.zeros(self.n, dtype=np.uint8)
            elif width in UINT_BY_WIDTH:
                values = self.array(name)
                first = int(value_offsets(values)[0])
                data = np.frombuffer(values.buffers()[2], dtype=np.uint8)
                data = data[first : first + width * self.n]
                view = data.view((">" if order else "=") + UINT_BY_WIDTH[width])
            self._views[key] = view
        return self._views[key]

    def adjacent_ne(self, name: str) -> np.ndarray:
        """Mask ``m`` with ``m[0] = True`` and ``m[i] = col[i] != col[i-1]``."""
        if name not in self._ne:
            out = np.ones(self.n, dtype=bool)
            if self.n > 1:
                if name in ("timestamp", "type"):
                    values = self.numpy(name)
                else:
                    values = self.view(name)
                if values is None:
                    array = self.array(name)
                    out[1:] = bools(pc.not_equal(array.slice(1), array.slice(0, self.n - 1)))
                else:
                    np.not_equal(values[1:], values[:-1], out=out[1:])
            self._ne[name] = out
        return self._ne[name]

    def ne_at(self, name: str, positions: np.ndarray) -> np.ndarray:
        """``col[p] != col[p-1]`` for each p in ``positions`` (all >= 1)."""
        if name in self._ne:
            return self._ne[name][positions]
        if len(positions) == 0:
            return np.zeros(0, dtype=bool)
        view = self.view(name)
        if view is not None:
            return view[positions] != view[positions - 1]
        array = self.array(name)
        return bools(pc.not_equal(array.take(positions), array.take(positions - 1)))

    def adjacent_order(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """Masks ``(greater, equal)`` of ``col[i+1]`` against ``col[i]``."""
        view = self.view(name, order=True)
        if view is not None:
            return view[1:] > view[:-1], view[1:] == view[:-1]
        array = self.array(name)
        here, before = array.slice(1), array.slice(0, self.n - 1)
        return bools(pc.greater(here, before)), bools(pc.equal(here, before))

    def equals(self, name: str, wanted: bytes) -> np.ndarray:
        """Mask of the cells whose binary column ``name`` equals ``wanted``."""
        width = self.width(name)
        if width is not None and (width == 0 or width in UINT_BY_WIDTH):
            if width != len(wanted):
                return np.zeros(self.n, dtype=bool)
            if width == 0:
                return np.ones(self.n, dtype=bool)
            view = self.view(name)
            return view == np.frombuffer(wanted, dtype=view.dtype)[0]
        return bools(pc.equal(self.array(name), pa.scalar(wanted, pa.binary())))

    def take_binary(self, name: str, indices: np.ndarray) -> pa.Array:
        """``col.take(indices)``; a NumPy gather when the values have one small width."""
        width = self.width(name)
        if width not in UINT_BY_WIDTH:
            return self.array(name).take(indices)
        data = self.view(name)[indices]
        offsets = np.arange(len(indices) + 1, dtype=np.int32)
        offsets *= width
        return pa.Array.from_buffers(
            pa.binary(), len(indices), [None, pa.py_buffer(offsets), pa.py_buffer(data)]
        )

    def row_starts(self) -> np.ndarray:
        """Mask of the cells that begin a new row."""
        return self.adjacent_ne("row")

    def family_starts(self) -> np.ndarray:
        """Mask of the cells that begin a new (row, family) group."""
        return self.adjacent_ne("row") | self.adjacent_ne("family")

    def column_starts(self) -> np.ndarray:
        """Mask of the cells that begin a new (row, family, qualifier) group.

        The qualifier is compared first; only where it equals the previous
        one can a cell continue a group, so row and family are compared at
        those positions alone when they are few (a table with one version
        per column never compares its row keys at all).
        """
        if self._column_starts is None:
            starts = self.adjacent_ne("qualifier").copy()
            candidates = np.flatnonzero(~starts)
            if len(candidates) > _SPARSE_SHARE * self.n:
                starts |= self.family_starts()
            elif len(candidates):
                differs = self.ne_at("family", candidates)
                rest = candidates[~differs]
                starts[candidates[differs]] = True
                starts[rest[self.ne_at("row", rest)]] = True
            self._column_starts = starts
        return self._column_starts
