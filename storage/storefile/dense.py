"""Dense blocks: cells stored column by column, one entry per row.

A block qualifies when every cell is a put and no column has a second
version in it (no cell repeats the previous cell's row and qualifier).  Its
cells are then fully described by the distinct row keys and, per qualifier
of the block (ascending), a timestamp and a value per row, null where the
row lacks the qualifier.  Rows output slices these columns directly; the
cell form is rebuilt only for paths that need cells (:meth:`DenseBlock.cells`).

Everything here runs over whole Arrow / NumPy arrays; nothing loops over
cells or rows in Python.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..cells import CELL_SCHEMA, CellType
from ..errors import StorageError
from ..kernels.cell_columns import CellColumns
from ._chunk_encodings import expand_dict, expanded_size
from .cache import ARRAY_OVERHEAD, arrow_footprint

__all__ = ["DenseBlock", "dense_from_cells", "constant_binary", "empty_binary", "MAX_DENSE_QUALIFIERS", "MAX_FILL"]

_REE = pa.RunEndEncodedArray  # an isinstance test: pa.types.is_run_end_encoded costs a Python call per column
_DICT = pa.DictionaryArray

MAX_DENSE_QUALIFIERS = 255
"""A block with more distinct qualifiers keeps the cell layout."""

MAX_FILL = 2
"""A block whose rows x qualifiers exceed this many times its cell count keeps the cell layout."""

MIN_DENSE_ROWS = 8
"""A block of fewer rows keeps the cell layout: with so few rows per block the
columns save nothing and cost a decode per qualifier."""


@lru_cache(maxsize=256)
def constant_binary(value: bytes, n: int) -> pa.Array:
    """``n`` copies of ``value`` as a binary array, built without a Python loop.

    Cached: blocks of one file ask for the family column at the same few
    sizes again and again, and Arrow arrays are immutable, so one serves all.
    """
    offsets = np.arange(n + 1, dtype=np.int64) * len(value)
    if n and offsets[-1] >= 1 << 31:
        return pa.array(np.full(n, value, dtype=object), pa.binary())
    return pa.Array.from_buffers(
        pa.binary(), n, [None, pa.py_buffer(offsets.astype(np.int32).tobytes()), pa.py_buffer(value * n)]
    )


def empty_binary(n: int) -> pa.Array:
    """``n`` empty (not null) binary values, built without a Python loop and
    not cached (for sizes that vary, such as a memstore's)."""
    offsets = pa.py_buffer(np.zeros(n + 1, dtype=np.int32).tobytes())
    return pa.Array.from_buffers(pa.binary(), n, [None, offsets, pa.py_buffer(b"")])


def _np(arr) -> np.ndarray:
    return arr.to_numpy(zero_copy_only=False)


class DenseBlock:
    """The columns of a dense block (or a row range of one).

    ``rows``: the distinct row keys, ascending.  ``qualifiers``: the block's
    qualifiers, ascending.  ``timestamps[j]``: int64 per row for qualifier
    ``j`` (a run-end encoded array when stored run-length), null where the row
    lacks it.  ``values[j]``: binary per row, null where the row lacks it;
    ``values`` is None for a block read for its keys only, and ``values[j]`` is
    None (not an array) for a column not read (a version 3 block read for some
    of its columns): :meth:`value` refuses such a column rather than let it
    pass for absent cells.

    A column read from a ``DICT`` chunk is held as a ``pa.DictionaryArray`` (the
    chunk's codes and dictionary, not expanded): :meth:`column` gives it so, a
    filter tests its few dictionary entries and maps the answers through the
    codes, and :meth:`values_at` expands only the rows kept.  :attr:`values` and
    :meth:`value` give every column plain (binary), expanded once and kept, so
    every other reader sees the bytes a full decode gives.
    """

    __slots__ = ("rows", "qualifiers", "timestamps", "_values", "_plain", "_plain_ts", "_cells", "row_batches",
                 "on_grow")

    def __init__(self, rows: pa.Array, qualifiers: tuple, timestamps: list, values: list | None,
                 cells: int | None = None):
        self.rows = rows
        self.qualifiers = qualifiers
        self.timestamps = timestamps
        self._values = values  # as read: a DICT chunk's column as a dictionary array
        # the plain columns, once asked for (None: the same list, no column held as codes)
        self._plain: list | None = None
        if values is not None and any(isinstance(v, _DICT) for v in values):
            self._plain = [None if isinstance(v, _DICT) else v for v in values]
        self._plain_ts: list | None = None
        self._cells = cells  # cell count, once known (decoding verifies it against the header)
        # unfiltered row batches already built from this block, by (names, qualifiers, timestamps):
        # they slice the block's own arrays, so a cached block serves later scans without rebuilding
        self.row_batches: dict | None = None
        # set by a reader that caches the block: called once the plain timestamps are built, so
        # the cache charges them from then on (most reads of a cached block never build them)
        self.on_grow = None

    @property
    def num_rows(self) -> int:
        return len(self.rows)

    @property
    def complete(self) -> bool:
        """True when every value column was read (not a keys-only block, none left out)."""
        return self._values is not None and all(v is not None for v in self._values)

    @property
    def values(self) -> list | None:
        """The value columns, plain binary (None where not read); None for a keys-only block."""
        if self._plain is None:
            return self._values
        for j, v in enumerate(self._values):
            if isinstance(v, _DICT):
                self.value(j)  # expanded once, kept in _plain
        return self._plain

    @property
    def read_values(self) -> list | None:
        """The value columns as read (a ``DICT`` chunk's as a dictionary array, None where
        not read), None for a keys-only block: what a test of which columns are held
        reads, without expanding any."""
        return self._values

    def column(self, j: int) -> pa.Array:
        """Qualifier ``j``'s value column as read: a ``pa.DictionaryArray`` of binary
        entries for a ``DICT`` chunk, else plain binary.  StorageError when it was not read."""
        values = self._values
        column = values[j] if values is not None else None
        if column is None:
            raise StorageError(f"column {self.qualifiers[j]!r} was not read from this block (ask for it in the scan)")
        return column

    def value(self, j: int) -> pa.Array:
        """Qualifier ``j``'s value column, plain binary; StorageError when it was not read
        (a column a scan did not ask for), so it is never mistaken for absent cells."""
        column = self.column(j)
        if not isinstance(column, _DICT):
            return column
        plain = self._plain[j]
        if plain is None:
            plain = self._plain[j] = expand_dict(column)  # a race expands twice: the same values
        return plain

    def values_at(self, j: int, keep: pa.Array) -> pa.Array:
        """Qualifier ``j``'s plain values at the rows where the boolean ``keep`` is true: a
        column held as codes is filtered as codes and only the kept rows are expanded."""
        column = self.column(j)
        if not isinstance(column, _DICT):
            return column.filter(keep)
        plain = self._plain[j]
        if plain is not None:
            return plain.filter(keep)
        return expand_dict(column.filter(keep))

    @property
    def nbytes(self) -> int:
        """Bytes of the columns held (what the block cache charges)."""
        total = self.rows.nbytes
        for t in self.timestamps:
            total += t.nbytes
        if self._values is not None:
            for v in self._values:
                if isinstance(v, _DICT):  # its codes, and the plain column it may expand to
                    total += v.nbytes + expanded_size(v)
                elif v is not None:
                    total += v.nbytes
        return total

    def footprint(self) -> int:
        """Memory the block holds (what the block cache charges): its columns, their objects,
        the plain columns :meth:`value` builds from dictionary-coded values (charged from the
        start, so that expansion never changes the charge), and the plain timestamps
        :meth:`plain_timestamps` builds from run-end encoded ones once they are built.

        A block given an :attr:`on_grow` hook (a reader caching it, who recharges it when the
        hook is called) is charged for its plain timestamps only once they are built; one
        without is charged for them from the start, as its holder is told nothing.  Why: a
        block of a wide table holds one run-end encoded column per qualifier, mostly a single
        run, and charging their plain form up front (9 bytes a row and qualifier) made a
        cached block of SF 1 ``lineitem`` (14 qualifiers, 4 of them read) cost 8.9 MB for
        1.7 MB of arrays, so a scan of its 145 blocks overflowed a 1 GiB cache and no block
        was ever found again; the scans that read rows never build them."""
        plain = 0
        if self._plain_ts is not None or self.on_grow is None:
            plain = sum(9 * len(t) + ARRAY_OVERHEAD for t in self.timestamps if isinstance(t, _REE))
        plain += sum(expanded_size(v) + ARRAY_OVERHEAD for v in self._values or () if isinstance(v, _DICT))
        return arrow_footprint([self.rows, *self.timestamps, *(v for v in self._values or () if v is not None)], plain)

    def plain_timestamps(self) -> list[pa.Array]:
        """The timestamp columns as plain int64 arrays (run-length ones decoded once)."""
        plain = self._plain_ts
        if plain is None:
            plain = [pc.run_end_decode(t) if isinstance(t, _REE) else t for t in self.timestamps]
            grew = any(isinstance(t, _REE) for t in self.timestamps)
            self._plain_ts = plain  # a race builds them twice: the same values
            if grew and self.on_grow is not None:
                self.on_grow(self)  # cached: charged from now on
        return plain

    def presence(self, j: int) -> pa.Array | None:
        """Boolean per row: the row has qualifier ``j``; None when every row has it."""
        ts = self.timestamps[j]
        if isinstance(ts, _REE):
            if ts.values.null_count == 0:
                return None
            return pc.is_valid(self.plain_timestamps()[j])
        return None if ts.null_count == 0 else pc.is_valid(ts)

    def slice(self, lo: int, hi: int) -> "DenseBlock":
        """Rows ``lo`` (inclusive) to ``hi`` (exclusive), zero-copy."""
        if (lo, hi) == (0, self.num_rows):
            return self
        n = hi - lo
        ts = [t.slice(lo, n) for t in self.plain_timestamps()]
        vals = None if self._values is None else [None if v is None else v.slice(lo, n) for v in self._values]
        return DenseBlock(self.rows.slice(lo, n), self.qualifiers, ts, vals)

    def row_cell(self, i: int, last: bool = False) -> tuple:
        """The first (or ``last``) cell of row ``i`` as a tuple, by scalar reads
        (for per-block bookkeeping, never per row)."""
        order = range(len(self.qualifiers) - 1, -1, -1) if last else range(len(self.qualifiers))
        for j in order:
            ts = self.plain_timestamps()[j][i]
            if ts.is_valid:
                value = b"" if self._values is None else self.value(j)[i].as_py()
                return (self.rows[i].as_py(), None, self.qualifiers[j], ts.as_py(), int(CellType.PUT), value)
        raise ValueError(f"row {i} of a dense block has no cell")

    def cell_count(self) -> int:
        """Cells the block holds (present entries over all qualifiers); counted
        once and kept, so scan metrics read it per block for nothing."""
        if self._cells is None:
            self._cells = self._count_cells()
        return self._cells

    def _count_cells(self) -> int:
        n = self.num_rows
        total = 0
        for t in self.timestamps:
            if not isinstance(t, _REE):
                total += n - t.null_count
            elif t.values.null_count == 0:
                total += n
            else:
                # run-end encoded columns are never sliced: their runs add up to n
                lengths = np.diff(_np(t.run_ends).astype(np.int64), prepend=0)
                total += int(lengths[_np(t.values.is_valid())].sum())
        return total

    def cells(self, family: bytes) -> pa.RecordBatch:
        """The block's cells as a ``CELL_SCHEMA`` batch in cell order (empty
        values for a keys-only block)."""
        n, q = self.num_rows, len(self.qualifiers)
        if self._values is not None and not self.complete:
            raise StorageError("a block read for some of its columns has no cell form (read it whole)")
        ts_plain = self.plain_timestamps()
        ts = np.empty((n, q), dtype=np.int64)
        if all(t.null_count == 0 for t in ts_plain):
            # every row has every qualifier: the cells are the whole n x q grid
            for j, t in enumerate(ts_plain):
                ts[:, j] = _np(t)
            flat = np.arange(n * q)
        else:
            # present[i, j]: row i has qualifier j; cells are the present entries in row-major order
            present = np.empty((n, q), dtype=bool)
            for j, t in enumerate(ts_plain):
                present[:, j] = _np(pc.is_valid(t))
                ts[:, j] = _np(t.fill_null(0))
            flat = np.flatnonzero(present.ravel())
        row_idx, qual_idx = np.divmod(flat, q)
        total = len(flat)
        rows = self.rows.take(pa.array(row_idx)) if total != n else self.rows
        quals = pa.array(list(self.qualifiers), pa.binary()).take(pa.array(qual_idx))
        if self._values is None:
            values = constant_binary(b"", total)
        else:
            # values of qualifier j for row i sit at j * n + i in the concatenated columns
            joined = pa.concat_arrays([v.cast(pa.binary()) for v in self.values]) if q > 1 else self.values[0]
            values = joined.take(pa.array(qual_idx * n + row_idx))
        return pa.RecordBatch.from_arrays(
            [
                rows,
                constant_binary(family, total),
                quals,
                pa.array(ts.ravel()[flat], pa.int64()),
                pa.array(np.full(total, int(CellType.PUT), dtype=np.uint8)),
                values,
            ],
            schema=CELL_SCHEMA,
        )


def dense_from_cells(batch: pa.RecordBatch, min_rows: int = MIN_DENSE_ROWS) -> DenseBlock | None:
    """The dense form of a block of cells (``CELL_SCHEMA``, sort order), or None
    when the block does not qualify (markers, versions, too many or too sparse
    qualifiers, fewer than ``min_rows`` rows)."""
    n = batch.num_rows
    types = _np(batch.column("type"))
    if n == 0 or (types != CellType.PUT).any():
        return None
    row_col = batch.column("row")
    qual_col = batch.column("qualifier")
    # neighbour comparisons as NumPy integers where the keys have one small width
    cols = CellColumns(pa.Table.from_batches([batch]))
    new_row = cols.adjacent_ne("row")
    starts = np.flatnonzero(new_row)
    if n > 1 and not (new_row[1:] | cols.adjacent_ne("qualifier")[1:]).all():
        return None  # a second version of a column
    uniq = pc.unique(qual_col)
    q = len(uniq)
    nrows = len(starts)
    if q > MAX_DENSE_QUALIFIERS or nrows * q > MAX_FILL * n or nrows < min_rows:
        return None
    if q == 1 and nrows == n:
        # one qualifier, in every row: the cells are the column as it is (a table of one column,
        # as `pe` writes; a take copied a flush's every value: a tenth of a flush of 1 KiB rows)
        stamps = pa.array(_np(batch.column("timestamp")), pa.int64())
        return DenseBlock(row_col, tuple(uniq.to_pylist()), [stamps], [batch.column("value")])
    order = pc.array_sort_indices(uniq)
    qualifiers = uniq.take(order)
    qual_id = _np(pc.index_in(qual_col, value_set=qualifiers))
    row_id = np.repeat(np.arange(nrows), np.diff(np.append(starts, n)))
    slot = qual_id.astype(np.int64) * nrows + row_id  # column-major: qualifier, then row
    ts_all = np.zeros(q * nrows, dtype=np.int64)
    ts_all[slot] = _np(batch.column("timestamp"))
    present = np.zeros(q * nrows, dtype=bool)
    present[slot] = True
    # where the value of each (qualifier, row) slot comes from; absent slots are null
    src = np.zeros(q * nrows, dtype=np.int64)
    src[slot] = np.arange(n)
    value_col = batch.column("value")
    rows = cols.take_binary("row", starts) if nrows != n else row_col
    timestamps, values = [], []
    for j in range(q):
        part = slice(j * nrows, (j + 1) * nrows)
        missing = ~present[part]
        mask = missing if missing.any() else None
        timestamps.append(pa.array(ts_all[part], pa.int64(), mask=mask))
        values.append(value_col.take(pa.array(src[part], mask=mask)))
    return DenseBlock(rows, tuple(qualifiers.to_pylist()), timestamps, values)
