"""One sorted map of memstore cells (the active map or the flush snapshot), what
a read point sees of it, and its cells as one sorted Arrow run: the unit the
write buffer, its read views and its scanner share."""

from __future__ import annotations

import threading
from operator import itemgetter

import numpy as np
import pyarrow as pa
from sortedcontainers import SortedDict

from ..cells import CELL_SCHEMA, EMPTY_CELLS, sort_key
from ..native import NATIVE as _NATIVE
from .bulk_insert import insert_new_sorted

__all__ = ["ArrowRun", "Segment", "cell_bytes", "cells_to_table", "cells_to_table_py"]

_ROW = itemgetter(0)
_QUALIFIER = itemgetter(2)
_VALUE = itemgetter(5)
_BINARY, _INT64, _UINT8 = pa.binary(), pa.int64(), pa.uint8()


def cell_bytes(cells: list) -> int:
    """Approximate payload bytes of cells (rows, qualifiers and values)."""
    return sum(map(len, map(_ROW, cells))) + sum(map(len, map(_QUALIFIER, cells))) + sum(
        map(len, map(_VALUE, cells))
    )


class Segment:
    """One sorted map of cells (the active map or the snapshot)."""

    __slots__ = ("cells", "seqs", "older", "max_seq", "heap_size", "arrow", "pending", "unsorted")

    def __init__(self) -> None:
        # sort key -> Cell.  The dict holds every key at once; its sorted key list may lag
        # behind by the runs in ``unsorted`` until a reader asks for order (:meth:`ordered`).
        self.cells: SortedDict = SortedDict()
        self.seqs: dict = {}  # sort key -> sequence number of the write that stored it
        self.older: dict = {}  # sort key -> [(seq, Cell)] replaced while a scanner was open
        self.max_seq = 0
        self.heap_size = 0
        self.arrow: ArrowRun | None = None  # the cells as Arrow, as of the last read
        self.pending: list = []  # keys written since ``arrow`` was built (merged in at the next read)
        # Sorted runs of keys in the dict but not yet in its sorted list, one per batch write.
        # A batch of random keys lands a few keys in every sublist of the sorted list, which costs
        # a Python step and about ten tuple comparisons per key; many runs merged at once (by the
        # flush, a scan) cost a few comparisons per key, so writes that no one reads in between
        # pay for their order once.
        self.unsorted: list = []

    def add_sorted_run(self, new_keys: list) -> None:
        """Lock held: ``new_keys`` (ascending), just added to the dict and none of them in
        it before, join the sorted key list at the next :meth:`ordered`."""
        if new_keys:
            self.unsorted.append(new_keys)

    def ordered(self) -> SortedDict:
        """Lock held: the map with every key in its sorted list (what ``irange``,
        ``keys()`` and ``values()`` read), the deferred runs merged in first."""
        runs = self.unsorted
        if runs:
            if len(runs) == 1:
                new = runs[0]
            else:
                new = [key for run in runs for key in run]
                new.sort()  # sorted runs: the sort merges them, a few comparisons per key
            self.unsorted = []
            insert_new_sorted(self.cells._list, new)
        return self.cells

    def visible(self, keys: list, read_point: int) -> tuple[list, list]:
        """The keys and cells among ``keys`` a reader at ``read_point`` sees."""
        get = self.cells.__getitem__
        if self.max_seq <= read_point:
            return keys, list(map(get, keys))
        seqs, older = self.seqs, self.older
        out_keys, out_cells = [], []
        for key in keys:
            if seqs[key] <= read_point:
                out_keys.append(key)
                out_cells.append(get(key))
                continue
            for seq, cell in reversed(older.get(key, ())):
                if seq <= read_point:
                    out_keys.append(key)
                    out_cells.append(cell)
                    break
        return out_keys, out_cells


_NOT_BUILT = object()


class ArrowRun:
    """Cells as one sorted Arrow table with each cell's sequence id: a
    segment's cells (kept with the segment and brought up to date at its
    next read after writes), or what one reader sees of them."""

    # weak references: a chunk kept between scans names the runs it was built from (storage/read/chunk_memo.py)
    __slots__ = ("table", "seqs", "max_seq", "_clean", "_row_run", "_rows", "__weakref__")

    def __init__(self, table: pa.Table, seqs: np.ndarray | None, max_seq: int):
        self.table = table
        self.seqs = seqs  # None for a reader's run: every cell is visible to it
        self.max_seq = max_seq
        self._clean: bool | None = None
        self._row_run = _NOT_BUILT
        self._rows = None

    def row_run(self, lock: threading.Lock):
        """The cells as rows (:class:`storage.memstore.row_runs.RowRun`), built on first
        use and kept with the run; None when they are not clean."""
        if self._row_run is _NOT_BUILT:
            with lock:
                if self._row_run is _NOT_BUILT:
                    from .row_runs import RowRun

                    self._row_run = RowRun.of(self.table) if self.clean else None
        return self._row_run

    @property
    def clean(self) -> bool:
        """True when every cell is a put and no column has two versions (any
        subset then needs no version or delete resolution either)."""
        if self._clean is None:
            from ..kernels import is_clean

            self._clean = is_clean(self.table)
        return self._clean

    def slice(self, start_row: bytes, stop_row: bytes | None) -> pa.Table:
        """The cells of rows ``[start_row, stop_row)`` (zero-copy), found by
        bisecting the row column."""
        from ..kernels.merge import row_span

        rows = self._rows
        if rows is None:
            rows = self._rows = self.table.column("row")
        lo, hi = row_span(rows, start_row, stop_row)
        return self.table.slice(lo, max(hi - lo, 0))

    def at(self, seg: Segment, read_point: int, lock: threading.Lock) -> "ArrowRun":
        """The cells a reader at ``read_point`` sees: this run itself when it
        holds no later write, else a run filtered by sequence id (one vector
        comparison) with the values that later writes replaced restored from
        ``seg.older``."""
        if self.max_seq <= read_point:
            return self
        keep = self.seqs <= read_point
        table = self.table.filter(pa.array(keep))
        later = np.flatnonzero(~keep)
        if seg.older and len(later):
            # a cell overwritten after the read point: the reader sees the value it replaced
            cols = self.table.select(["row", "family", "qualifier", "timestamp", "type"]).take(pa.array(later))
            restored = []
            with lock:
                older = seg.older
                for key in zip(*(c.to_pylist() for c in cols.columns)):
                    for seq, cell in reversed(older.get(sort_key(key), ())):
                        if seq <= read_point:
                            restored.append(cell)
                            break
            if restored:
                from ..kernels import merge_sources

                table = merge_sources([cells_to_table(restored), table])
        return ArrowRun(table, None, read_point)


def cells_to_table(cells: list) -> pa.Table:
    """Build a CELL_SCHEMA table column by column from cell tuples.

    A list of cells goes through the compiled ``cell_columns`` kernel
    (``storage/_native/cells.c``: the columns' buffers filled in one pass,
    no Python step per cell) when it is built and on; anything it does not
    take as it is goes to :func:`cells_to_table_py`, the reference, which
    gives the same table."""
    if _NATIVE is not None and type(cells) is list and cells:
        buffers = _NATIVE.cell_columns(cells)
        if buffers is not None:
            n = len(cells)
            arrays = [
                pa.Array.from_buffers(_BINARY, n, [None, pa.py_buffer(buffers[0]), pa.py_buffer(buffers[1])]),
                pa.Array.from_buffers(_BINARY, n, [None, pa.py_buffer(buffers[2]), pa.py_buffer(buffers[3])]),
                pa.Array.from_buffers(_BINARY, n, [None, pa.py_buffer(buffers[4]), pa.py_buffer(buffers[5])]),
                pa.Array.from_buffers(_INT64, n, [None, pa.py_buffer(buffers[8])]),
                pa.Array.from_buffers(_UINT8, n, [None, pa.py_buffer(buffers[9])]),
                pa.Array.from_buffers(_BINARY, n, [None, pa.py_buffer(buffers[6]), pa.py_buffer(buffers[7])]),
            ]
            return pa.Table.from_arrays(arrays, schema=CELL_SCHEMA)
    return cells_to_table_py(cells)


def cells_to_table_py(cells: list) -> pa.Table:
    """:func:`cells_to_table` in Python and pyarrow: the reference of the compiled kernel."""
    if not cells:
        return EMPTY_CELLS
    rows, families, qualifiers, timestamps, types, values = zip(*cells)
    arrays = [
        pa.array(rows, pa.binary()),
        pa.array(families, pa.binary()),
        pa.array(qualifiers, pa.binary()),
        pa.array(np.fromiter(timestamps, dtype=np.int64, count=len(cells))),
        pa.array(np.fromiter(types, dtype=np.uint8, count=len(cells))),
        pa.array(values, pa.binary()),
    ]
    return pa.Table.from_arrays(arrays, schema=CELL_SCHEMA)
