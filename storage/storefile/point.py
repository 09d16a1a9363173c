"""Point reads on decoded blocks: binary search of the key column, scalar reads of a row.

A point read must touch only what it returns (see docs/performance.md, "Point
reads"): it finds its row by a binary search of the block's row-key column
and reads one entry of each qualifier's timestamp and value column.  Nothing
here turns a block into cells or its keys into a Python list.

* :class:`SortedKeys` searches a sorted binary Arrow array with NumPy's
  ``searchsorted`` over a fixed-width byte-string view of the keys: a
  zero-copy view of the Arrow data buffer when every key has one width (the
  common case: fixed-width keys), else one padded copy (charged to the cache
  with the block).  ``find_many`` places many keys with one ``searchsorted``.
* :class:`DensePoint` reads the cells of a row of a dense block (or of many
  rows at once) from zero-copy NumPy views of the block's buffers.

Both are built once per cached block, by the first point read that reaches
it, and kept with the block; ``nbytes`` says what they add to its size.

With the compiled kernels on (:mod:`storage.native`), :func:`file_row_dict`
answers a read of every column of a clean file as the row's dict: one call
(``point_row``, storage/_native/point.c) searches a dense block's keys and
builds ``{b"family:qualifier": value}`` from views of its buffers
(:func:`native_form`); :func:`file_rows_dicts` answers a multi-get's keys
with one call per block (``point_rows``) for all the keys in it.
:func:`point_row_py` is the Python twin of both.
"""

from __future__ import annotations

import sys
from bisect import bisect_left, bisect_right

import numpy as np
import pyarrow as pa

from ..cells import Cell, CellType
from ..kernels.cell_columns import value_offsets
from ..native import NATIVE

__all__ = ["SortedKeys", "DensePoint", "PointPlan", "point_plan", "native_form", "point_row_py", "file_row_dict",
           "file_rows_dicts", "POINT_ROW", "POINT_ROWS"]

_PUT = int(CellType.PUT)
#: the compiled point read, or None: no compiled kernels, or a module built before it existed
POINT_ROW = getattr(NATIVE, "point_row", None)
#: the compiled multi-key point read, or None (as ``POINT_ROW``)
POINT_ROWS = getattr(NATIVE, "point_rows", None)
_new_cell = tuple.__new__  # Cell(...) without the namedtuple's Python-level __new__


def _held(*objs) -> int:
    """Memory of the objects a point form keeps: ``sys.getsizeof`` counts a
    NumPy view's header only and an array that owns its data with the data."""
    return sum(sys.getsizeof(o) for o in objs if o is not None)


def _validity(arr: pa.Array) -> np.ndarray | None:
    """Booleans per entry (True: not null) of an array with nulls; None without nulls."""
    if arr.null_count == 0:
        return None
    return np.asarray(arr.is_valid())


class SortedKeys:
    """Binary search over a binary Arrow array sorted ascending (repeats allowed).

    ``find(key)`` gives ``(lo, hi)``: the entries equal to ``key`` are
    ``[lo, hi)``, and ``lo`` is where ``key`` would be inserted.
    ``find_many(keys)`` does the same for a list of keys in one NumPy call.

    Keys are compared as NumPy ``S<width>`` strings.  Such strings compare
    bytewise (unsigned) but ignore trailing zero bytes, so ``b"a"`` and
    ``b"a\\x00"`` tie; entries of one width never tie unless equal, and for
    mixed widths the tie is resolved by the key lengths (see :meth:`_settle`).
    An array in which two different keys tie (one is the other plus zero
    bytes) is searched by a plain bisect instead.
    """

    __slots__ = ("n", "width", "distinct", "_keys", "_lengths", "_data", "_offsets", "nbytes")

    def __init__(self, arr: pa.Array, distinct: bool = False):
        self.n = n = len(arr)
        self.distinct = distinct  # the caller knows no key repeats (a dense block's rows)
        offsets = value_offsets(arr)
        lengths = np.diff(offsets)
        self.width = width = int(lengths.max()) if n else 1
        data = arr.buffers()[2]
        start = int(offsets[0]) if n else 0
        if n and (lengths == width).all() and width:
            # one width: the Arrow data buffer viewed as S<width>, no copy
            self._keys = np.frombuffer(data, dtype=f"S{width}", count=n, offset=start)
            self._lengths = self._data = self._offsets = None
            self.nbytes = _held(self, self._keys)
            return
        self._data = memoryview(data) if data is not None else memoryview(b"")
        self._offsets = offsets
        padded = np.zeros((n, width), dtype=np.uint8)
        if n:
            raw = np.frombuffer(data, dtype=np.uint8, count=int(offsets[-1]) - start, offset=start)
            row = np.repeat(np.arange(n), lengths)
            col = np.arange(len(raw)) - np.repeat(offsets[:-1] - start, lengths)
            padded[row, col] = raw
        keys = padded.view(f"S{width}").reshape(n)
        self.nbytes = _held(self, lengths, self._data, self._offsets) + padded.nbytes + 128
        if n > 1 and ((keys[1:] == keys[:-1]) & (lengths[1:] != lengths[:-1])).any():
            self._keys = None  # two different keys tie as S strings: bisect instead
        else:
            self._keys = keys
        self._lengths = lengths

    def key(self, i: int) -> bytes:
        """Entry ``i`` as bytes."""
        if self._offsets is None:
            return self._keys[i : i + 1].tobytes()  # the raw bytes (a scalar would drop trailing zeros)
        return bytes(self._data[self._offsets[i] : self._offsets[i + 1]])

    def find(self, key: bytes) -> tuple[int, int]:
        """``(lo, hi)``: entries ``[lo, hi)`` equal ``key``; ``lo`` is its insertion point."""
        keys = self._keys
        if keys is None:
            return self._bisect(key)
        width = self.width
        if len(key) > width:
            # longer than every entry: never equal; the entries that tie with its
            # first ``width`` bytes are its prefixes, so it goes after them
            at = int(keys.searchsorted(key[:width], "right"))
            return at, at
        lo = int(keys.searchsorted(key, "left"))
        if self.distinct:
            # one search: the entry at ``lo`` is the key, a prefix of it that ties
            # with it (the key goes after it), or greater
            if lo < self.n:
                entry = self.key(lo)
                if entry == key:
                    return lo, lo + 1
                if len(entry) < len(key) and not key[len(entry):].strip(b"\x00") and key.startswith(entry):
                    return lo + 1, lo + 1
            return lo, lo
        hi = int(keys.searchsorted(key, "right"))
        if hi > lo and self._lengths is not None:
            return self._settle(lo, hi, len(key))
        if hi > lo and len(key) != width:
            return lo, lo  # the tied entries are the key plus zero bytes: greater
        return lo, hi

    def _settle(self, lo: int, hi: int, size: int) -> tuple[int, int]:
        """Resolve a tie of ``[lo, hi)`` (all one key, by construction) with a key of ``size`` bytes."""
        have = int(self._lengths[lo])
        if have == size:
            return lo, hi
        return (hi, hi) if have < size else (lo, lo)

    def _bisect(self, key: bytes) -> tuple[int, int]:
        lo, hi = 0, self.n
        while lo < hi:
            mid = (lo + hi) >> 1
            if self.key(mid) < key:
                lo = mid + 1
            else:
                hi = mid
        end, top = lo, self.n
        while end < top:
            mid = (end + top) >> 1
            if self.key(mid) <= key:
                end = mid + 1
            else:
                top = mid
        return lo, end

    def find_many(self, keys: list[bytes]) -> tuple[np.ndarray, np.ndarray]:
        """``(lo, hi)`` arrays: :meth:`find` of each of ``keys`` (in any order)."""
        if self._keys is None or not keys:
            pairs = [self._bisect(k) for k in keys]
            return np.array([p[0] for p in pairs], dtype=np.int64), np.array([p[1] for p in pairs], dtype=np.int64)
        width = self.width
        sizes = np.fromiter(map(len, keys), dtype=np.int64, count=len(keys))
        # keys longer than the width are cut to it: they go after the entries they tie with
        needles = np.array(keys if int(sizes.max()) <= width else [k[:width] for k in keys], dtype=f"S{width}")
        lo = self._keys.searchsorted(needles, "left").astype(np.int64)
        hi = self._keys.searchsorted(needles, "right").astype(np.int64)
        tied = hi > lo
        if tied.any():
            have = np.full(len(keys), width, dtype=np.int64)
            if self._lengths is not None:
                have[tied] = self._lengths[lo[tied]]
            shorter = tied & (have < sizes)  # the entries are a prefix of the key: it goes after
            longer = tied & (have > sizes)  # the entries are the key plus zero bytes: it goes before
            lo[shorter] = hi[shorter]
            hi[longer] = lo[longer]
        return lo, hi


class _Column:
    """Zero-copy reads of one qualifier of a dense block: timestamps and values by row."""

    __slots__ = ("qualifier", "ts", "run_ends", "ends", "ts_offset", "valid", "voffsets", "vdata", "values")

    def __init__(self, qualifier: bytes, ts: pa.Array, values: pa.Array | None):
        self.qualifier = qualifier
        if pa.types.is_run_end_encoded(ts.type):
            # a run per distinct timestamp: find the run of a row by its end
            self.run_ends = ts.run_ends.to_numpy()
            # the run ends as a list too: a bisect of one row is ~10x cheaper than searchsorted
            self.ends = None if len(self.run_ends) == 1 else self.run_ends.tolist()
            self.ts_offset = ts.offset
            inner = ts.values
            self.ts = inner.fill_null(0).to_numpy()
            self.valid = _validity(inner)
        else:
            self.run_ends = self.ends = None
            self.ts_offset = 0
            self.ts = ts.fill_null(0).to_numpy() if ts.null_count else ts.to_numpy()
            self.valid = _validity(ts)
        self.values = values
        if values is None:
            self.voffsets = self.vdata = None
        else:
            self.voffsets = value_offsets(values)
            data = values.buffers()[2]
            self.vdata = memoryview(data) if data is not None else memoryview(b"")

    @property
    def nbytes(self) -> int:
        ends = 0 if self.ends is None else sys.getsizeof(self.ends) + 32 * len(self.ends)
        return _held(self, self.ts, self.run_ends, self.valid, self.voffsets, self.vdata) + ends

    def slot(self, i: int) -> int:
        """Index into ``ts``/``valid`` of row ``i``."""
        if self.run_ends is None:
            return i
        if self.ends is None:
            return 0  # one timestamp for the whole block (rows written together)
        return bisect_right(self.ends, i + self.ts_offset)

    def slots(self, rows: np.ndarray) -> np.ndarray:
        if self.run_ends is None:
            return rows
        if len(self.run_ends) == 1:
            return np.zeros(len(rows), dtype=np.int64)
        return self.run_ends.searchsorted(rows + self.ts_offset, "right")

    def value(self, i: int) -> bytes:
        if self.voffsets is None:
            return b""
        return bytes(self.vdata[self.voffsets[i] : self.voffsets[i + 1]])


class DensePoint:
    """Point reads of one dense block (:class:`storage.storefile.dense.DenseBlock`).

    ``keys`` searches its row keys; :meth:`row_cells` and :meth:`rows_cells`
    read the cells of rows by position, in cell order (qualifiers ascending),
    as :class:`storage.cells.Cell` tuples of ``family``.
    """

    __slots__ = ("keys", "family", "_columns", "nbytes", "native")

    def __init__(self, dense, family: bytes):
        if dense.values is not None and not dense.complete:
            raise ValueError("a point read needs a dense block read whole or for its keys")
        self.keys = SortedKeys(dense.rows, distinct=True)
        self.family = family
        values = dense.values
        self._columns = [
            _Column(q, ts, None if values is None else values[j])
            for j, (q, ts) in enumerate(zip(dense.qualifiers, dense.timestamps))
        ]
        self.nbytes = _held(self, self._columns) + self.keys.nbytes + sum(c.nbytes for c in self._columns)
        self.native = None  # native_form(self), made by the first compiled point read

    def row_cells(self, row: bytes, i: int) -> list[Cell]:
        """The cells of row ``i`` (whose key is ``row``)."""
        out = []
        family = self.family
        for col in self._columns:
            # _Column.slot and .value inlined, and the Cell made without its Python-level
            # __new__: this is every point read's per-column cost
            ends = col.ends
            s = i if col.run_ends is None else 0 if ends is None else bisect_right(ends, i + col.ts_offset)
            if col.valid is not None and not col.valid[s]:
                continue
            offsets = col.voffsets
            value = b"" if offsets is None else bytes(col.vdata[offsets[i] : offsets[i + 1]])
            out.append(_new_cell(Cell, (row, family, col.qualifier, col.ts.item(s), _PUT, value)))
        return out

    def rows_cells(self, rows: list[bytes], positions: np.ndarray) -> list[list[Cell]]:
        """The cells of the rows at ``positions`` (keys ``rows``), one list per
        row, each column read with one gather for all of them."""
        out: list[list[Cell]] = [[] for _ in rows]
        family = self.family
        take = pa.array(positions, pa.int64())
        for col in self._columns:
            s = col.slots(positions)
            stamps = col.ts[s].tolist()
            values = [b""] * len(rows) if col.values is None else col.values.take(take).to_pylist()
            q = col.qualifier
            if col.valid is None:
                for cells, row, ts, value in zip(out, rows, stamps, values):
                    cells.append(Cell(row, family, q, ts, _PUT, value))
            else:
                for cells, row, ts, value, ok in zip(out, rows, stamps, values, col.valid[s].tolist()):
                    if ok:
                        cells.append(Cell(row, family, q, ts, _PUT, value))
        return out


def native_form(point: DensePoint) -> tuple | bool:
    """The arguments of ``point_row`` for one dense block: ``(keys, width, count,
    columns)``, ``columns`` holding 8 items a column, laid end to end
    (``b"family:qualifier"``, value offsets, their width, value data, validity
    or None, timestamp run ends or None, their width, run offset) -- views of
    the block's buffers, no copy.  False when the
    block's keys are not all one width or a column has no values (the Python
    path reads those)."""
    keys = point.keys
    if keys._offsets is not None or keys._keys is None or keys.n == 0:
        return False
    prefix = point.family + b":"
    columns = []
    for col in point._columns:
        if col.voffsets is None:
            return False
        ends = col.run_ends
        columns += (prefix + col.qualifier, col.voffsets, col.voffsets.itemsize, col.vdata, col.valid,
                    ends, 8 if ends is None else ends.itemsize, col.ts_offset)
    return keys._keys, keys.width, keys.n, tuple(columns)


def point_row_py(point: DensePoint, row: bytes, whole: bool = False) -> dict | None | bool:
    """What the compiled ``point_row`` answers for ``row`` in a dense block, in
    Python (its reference): the row as ``{b"family:qualifier": value}``; None
    when the block shows the row is in no block of the file; False when the
    next block must be asked too (the key sorts after the block's last row, or
    is its last row, which may go on in the next block).  ``whole``: the caller
    knows the block's last row ends in it and the key is in no later block
    (``point_rows``'s flag), so the block answers every key."""
    lo, hi = point.keys.find(row)
    n = point.keys.n
    if hi <= lo:
        return None if lo < n or whole else False
    if lo == n - 1 and not whole:
        return False
    return {c[1] + b":" + c[2]: c[5] for c in point.row_cells(row, lo)}


class CellPoint:
    """Point reads of a block in the cell layout: its row column searched, cells sliced."""

    __slots__ = ("keys", "batch", "nbytes")

    def __init__(self, batch: pa.RecordBatch):
        self.keys = SortedKeys(batch.column(0))
        self.batch = batch
        self.nbytes = _held(self) + self.keys.nbytes

    def cells(self, lo: int, hi: int) -> list[Cell]:
        part = self.batch.slice(lo, hi - lo)
        return list(map(Cell._make, zip(*[part.column(k).to_pylist() for k in range(6)])))


def block_point(block, family: bytes):
    """The point-read form of a decoded block (:class:`DensePoint` or
    :class:`CellPoint`), built on first use and kept on the block."""
    point = block.point
    if point is None:
        if block.dense is not None:
            point = DensePoint(block.dense, family)
            if POINT_ROW is not None:
                # the compiled call's arguments, charged with the block: tuples of views
                form = point.native = native_form(point)
                if form is not False:
                    point.nbytes += _held(form, form[3], *form[3][::8])
        else:
            point = CellPoint(block.batch)
        block.point = point
        if block.on_grow is not None:
            block.on_grow(block)  # cached: charge what the block holds now
    return point


def _found_cells(point, row: bytes, lo: int, hi: int) -> list[Cell]:
    if hi <= lo:
        return []
    if isinstance(point, DensePoint):
        return point.row_cells(row, lo)  # a dense block holds a row once
    return point.cells(lo, hi)


class PointPlan:
    """What a point read of one store file looks up on every call, gathered once
    per reader (:func:`point_plan`): its row range, block index lists, block
    cache and counters.  All of it is fixed for the reader's life."""

    __slots__ = ("empty", "first_row", "last_row", "first_keys", "offsets", "row_starts", "blocks",
                 "cache", "file_id", "counters", "bloom", "family")

    def __init__(self, reader):
        info = reader.info
        self.blocks = reader.block_count
        self.empty = self.blocks == 0 or info.cell_count == 0
        self.first_row = info.first_cell[0] if not self.empty else b""
        self.last_row = info.last_cell[0] if not self.empty else b""
        index = reader._index
        self.first_keys = index.first_keys
        self.offsets = index.offsets
        self.row_starts = index.row_start_list
        self.cache = reader.block_cache
        self.file_id = reader.file_id
        self.counters = reader.counters
        self.bloom = reader.bloom
        self.family = info.family


def point_plan(reader) -> PointPlan:
    """The reader's :class:`PointPlan`, made on its first point read and kept on it."""
    plan = reader.point_plan
    if plan is None:
        plan = reader.point_plan = PointPlan(reader)
    return plan


def file_row_cells(reader, row: bytes) -> list[Cell]:
    """Every cell of ``row`` in one store file, in cell order (the point read).

    The key range first, then the block index (a bisect over the pinned
    first keys) and a binary search of the block's row keys.  The bloom
    filter is asked before a block is read, not when the block is in the
    cache already: it saves reads, and a cached block's search costs about
    what the bloom filter's hashing does.  A row that reaches the end of its
    block may go on in the next one.
    """
    plan = reader.point_plan
    if plan is None:
        plan = point_plan(reader)
    found = _row_block(reader, plan, row)
    if found is None:
        return []
    i, block = found
    family = plan.family
    out: list[Cell] = []
    while True:
        point = block_point(block, family)
        lo, hi = point.keys.find(row)
        out.extend(_found_cells(point, row, lo, hi))
        i += 1
        if hi < point.keys.n or i >= plan.blocks:
            return out
        block = reader._block(i)


def _block_index(plan: PointPlan, row: bytes) -> int:
    """The block where ``row`` would begin: the last one whose first row is at or
    below it, or the next when that one begins with the row and holds nothing of
    it before."""
    first_keys = plan.first_keys
    i = bisect_right(first_keys, (row,)) - 1
    if i < 0:
        return 0
    starts = plan.row_starts
    if starts is not None and i + 1 < plan.blocks and first_keys[i + 1][0] == row and not starts[i + 1]:
        i += 1  # the next block begins with the row, and no part of it is in this one
    return i


def _row_block(reader, plan: PointPlan, row: bytes) -> tuple | None:
    """``(i, block)``: the block where ``row`` would begin in the file; None when
    the file's key range or its bloom filter rules the row out."""
    if plan.empty or not plan.first_row <= row <= plan.last_row:
        return None
    i = _block_index(plan, row)
    cache = plan.cache
    block = None if cache is None else cache.get((plan.file_id, plan.offsets[i]), count_miss=False)
    plan.counters.add_seek(block is not None)
    if block is None:
        bloom = plan.bloom
        if bloom is not None and not bloom.might_contain(row):
            return None
        block = reader._block(i)
    return i, block


def file_row_dict(reader, row: bytes) -> dict | None:
    """Every cell of ``row`` in one store file as ``{b"family:qualifier": value}``
    ({} if absent), for a file whose cells need no resolution: one compiled call
    searches the block and builds the dict.  A block the call cannot read (keys
    of several widths, the cell layout) or a row that ends its block is read as
    cells (:func:`file_row_cells`, the reference).  None without compiled
    kernels: the caller reads cells."""
    if POINT_ROW is None:
        return None
    plan = reader.point_plan
    if plan is None:
        plan = point_plan(reader)
    found = _row_block(reader, plan, row)
    if found is None:
        return {}
    point = found[1].point
    if point is None:
        point = block_point(found[1], plan.family)
    form = point.native if type(point) is DensePoint else False
    if form is None:
        form = point.native = native_form(point)
    got = False if form is False else POINT_ROW(form[0], form[1], form[2], row, form[3])
    if got is False:
        # the block's keys are not of one width, or the row ends the block and may go on
        # in the next: the row is read as cells
        return {c[1] + b":" + c[2]: c[5] for c in file_row_cells(reader, row)}
    return got or {}


def _block_keys_end(plan: PointPlan, rows: list[bytes], p: int, stop: int, i: int) -> int:
    """The end of the run of ``rows[p:stop]`` (ascending) that :func:`_block_index`
    places in block ``i``, given that it places ``rows[p]`` there."""
    if i + 1 >= plan.blocks:
        return stop
    following = plan.first_keys[i + 1][0]
    q = bisect_left(rows, following, p, stop)
    if q < stop and rows[q] == following and _block_index(plan, following) == i:
        q += 1  # the row goes on from block i into the next: it is read from block i
    return q


def _bloom_keep(bloom, rows: list[bytes]) -> np.ndarray:
    """Booleans, False where the bloom filter rules a row of ``rows`` out: one
    vectorized call for many rows, a scalar one per row for a few."""
    if len(rows) <= _SCALAR_BLOOM_KEYS:
        return np.fromiter(map(bloom.might_contain, rows), dtype=bool, count=len(rows))
    return bloom.might_contain_many(pa.array(rows, pa.binary()))


def _first_rows(reader) -> SortedKeys:
    """The first row key of every block of a file, searchable (built once, kept by the reader)."""
    first = reader.point_first_rows
    if first is None:
        first = reader.point_first_rows = SortedKeys(pa.array([k[0] for k in reader.block_first_keys], pa.binary()))
    return first


_SCALAR_KEYS = 8  # keys of one block below which a multi-get searches one key at a time
# keys of one file up to which the bloom filter is asked one key at a time: its vectorized
# hash costs about 90 us a call whatever the count, a scalar one about 3.5 us a key
_SCALAR_BLOOM_KEYS = 24
_SCALAR_FILE_KEYS = 16  # keys of one file up to which a multi-get makes a point read of each


def file_rows_dicts(reader, rows: list[bytes]) -> dict[bytes, dict] | None:
    """:func:`file_row_dict` of each of ``rows`` (distinct, ascending) the file
    holds, the rows it does not hold left out; None without compiled kernels
    (the caller reads cells).

    One compiled call (``point_rows``) per block the rows reach searches that
    block's row keys for all of them and builds their dicts.  The block index places the rows
    with one bisect per block; a block found in the cache is searched at once
    (the bloom filter's hashing would cost about what the search does), a
    block that is not is read once, and only if the bloom filter leaves one
    of its rows in.  Rows the call cannot answer (the block's last row where
    the index does not show that it ends there, keys between two such blocks,
    blocks whose keys are not of one width or in the cell layout) are read as
    cells (:func:`file_row_cells`, the reference)."""
    if POINT_ROWS is None:
        return None
    plan = reader.point_plan
    if plan is None:
        plan = point_plan(reader)
    out: dict[bytes, dict] = {}
    if plan.empty:
        return out
    if type(rows) is not list:
        rows = list(rows)
    p = bisect_left(rows, plan.first_row)
    stop = bisect_right(rows, plan.last_row, p)
    if p >= stop:
        return out
    point_rows, cache, file_id, offsets, bloom, family = (
        POINT_ROWS, plan.cache, plan.file_id, plan.offsets, plan.bloom, plan.family)
    seeks, hits = stop - p, 0
    spill: list[bytes] = []
    try:
        while p < stop:
            i = _block_index(plan, rows[p])
            q = _block_keys_end(plan, rows, p, stop, i)
            block = None if cache is None else cache.get((file_id, offsets[i]), count_miss=False)
            keys, start, end = rows, p, q
            if block is not None:
                hits += q - p
            else:
                if bloom is not None:
                    keys = rows[p:q]
                    keys = [r for r, k in zip(keys, _bloom_keep(bloom, keys).tolist()) if k]
                    start, end = 0, len(keys)
                    if not keys:
                        p = q
                        continue
                block = reader._block(i)
            p = q
            point = block.point
            if point is None:
                point = block_point(block, family)
            form = point.native if type(point) is DensePoint else False
            if form is None:
                form = point.native = native_form(point)
            if form is False:
                spill.extend(keys[start:end])  # keys of several widths, or the cell layout
            else:
                # the block's last row ends in it when it is the file's last block or the next
                # one begins with a new row (its row_start is 0)
                whole = i + 1 >= plan.blocks or (plan.row_starts is not None and not plan.row_starts[i + 1])
                point_rows(form[0], form[1], form[2], form[3], keys, start, end, whole, out, spill)
    finally:
        plan.counters.add_seeks(seeks, hits)
    if spill:
        # ascending, as blocks and keys were visited in order: read as a multi-get of cells,
        # one visit per block where they are many to a block (blocks in the cell layout)
        for row, cells in file_rows_cells(reader, spill).items():
            out[row] = {c[1] + b":" + c[2]: c[5] for c in cells}
    return out


def file_rows_cells(reader, rows: list[bytes]) -> dict[bytes, list[Cell]]:
    """The cells of each of ``rows`` (distinct, ascending) found in one store
    file: a multi-get.  Where the rows are many to a block, the bloom filter
    tests all of them in one call, the block index places all of them with
    one ``searchsorted``, and each block is visited once for all the rows
    that fall in it.  Where they are few to a block (a few keys, or keys
    spread over the file), each is a point read (:func:`file_row_cells`):
    the vectorized calls' fixed cost would be more than they save."""
    out: dict[bytes, list[Cell]] = {}
    info = reader.info
    if reader.block_count == 0 or info.cell_count == 0 or not rows:
        return out
    lo_row, hi_row = info.first_cell[0], info.last_cell[0]
    rows = [r for r in rows if lo_row <= r <= hi_row]
    placed = None
    if len(rows) > _SCALAR_FILE_KEYS:
        # the last block whose first row is below the row (the row may begin at the end of
        # it), or the block that begins with the row when no part of the row is before it
        placed = _first_rows(reader).find_many(rows)
        if len(rows) < _SCALAR_KEYS * (1 + np.count_nonzero(np.diff(placed[0]))):
            placed = None  # fewer keys than _SCALAR_KEYS to a block
    if placed is None:
        for row in rows:
            cells = file_row_cells(reader, row)
            if cells:
                out[row] = cells
        return out
    below, equal = placed
    bloom = reader.bloom
    if bloom is not None:
        keep = _bloom_keep(bloom, rows)
        if not keep.all():
            rows = [r for r, k in zip(rows, keep.tolist()) if k]
            below, equal = below[keep], equal[keep]
    if not rows:
        return out
    reader.counters.add("seeks", len(rows))
    blocks = np.maximum(below - 1, 0)
    starts = reader.block_row_starts
    if starts is not None:
        begins = (equal > below) & (starts[np.minimum(below, reader.block_count - 1)] == 0)
        blocks[begins] = below[begins]
    family = info.family
    pending = list(range(len(rows)))  # indices of rows still to look up, ascending
    while pending:
        at = blocks[pending]
        carry = []
        order = np.flatnonzero(np.diff(at, prepend=-1))  # where a new block starts in ``pending``
        bounds = np.append(order, len(pending)).tolist()
        for b in range(len(order)):
            group = pending[bounds[b] : bounds[b + 1]]
            i = int(at[bounds[b]])
            point = block_point(reader._block(i), family)
            asked = [rows[g] for g in group]
            if len(asked) <= _SCALAR_KEYS:
                # a few keys: scalar searches cost less than the vectorized calls' fixed cost
                for g, key in zip(group, asked):
                    lo, hi = point.keys.find(key)
                    if hi > lo:
                        out.setdefault(key, []).extend(_found_cells(point, key, lo, hi))
                    if hi >= point.keys.n and i + 1 < reader.block_count:
                        carry.append(g)
                continue
            lo, hi = point.keys.find_many(asked)
            found = np.flatnonzero(hi > lo)
            if len(found):
                if isinstance(point, DensePoint):
                    got = point.rows_cells([asked[f] for f in found.tolist()], lo[found])
                else:
                    got = [point.cells(int(lo[f]), int(hi[f])) for f in found.tolist()]
                for f, cells in zip(found.tolist(), got):
                    out.setdefault(asked[f], []).extend(cells)
            n = point.keys.n
            if i + 1 < reader.block_count:
                # rows that reach the end of the block may go on in the next one
                carry.extend(g for g, h in zip(group, hi.tolist()) if h >= n)
        for g in carry:
            blocks[g] += 1
        pending = carry
    return out
