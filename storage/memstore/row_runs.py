"""The row form of a clean run of cells: what a memstore adds to a rows scan.

A memstore map (or a connector's decoded WAL, :mod:`storage.memstore.sorted_cells`)
whose cells are all puts with one version per column is, as rows, exactly
a dense block (:class:`storage.storefile.dense.DenseBlock`): its distinct
row keys and a value and timestamp column per qualifier.  :class:`RowRun`
pivots the cells into that form once (the owner keeps it beside its Arrow
copy of the cells: a memstore view, for the cells at its read point) and hands out zero-copy row-range
slices, which a rows scan merges with the store files' dense rows
(:mod:`storage.read.row_scan`).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..cells import CELL_SCHEMA, CellType
from ..kernels.cell_columns import CellColumns, as_cell_table, one_array
from ..kernels.gather import gather_binary
from ..kernels.key_codes import lex_order, row_sort_keys
from ..kernels.merge import row_span, sort_log
from ..native import NATIVE as _NATIVE
from ..storefile.dense import MAX_DENSE_QUALIFIERS, MAX_FILL, DenseBlock, dense_from_cells

__all__ = ["RowRun", "log_rows", "dense_puts"]

_BINARY, _INT64 = pa.binary(), pa.int64()
_DELETE_FAMILY = int(CellType.DELETE_FAMILY)
_PLAIN = (_BINARY, _BINARY, _BINARY, _INT64, pa.uint8(), _BINARY)  # the cell columns the kernel takes


def _native_dense(batch: pa.RecordBatch, cells: np.ndarray | None = None,
                  qualifiers: tuple | None = None) -> DenseBlock | None | bool | tuple:
    """:func:`dense_from_cells` of sorted cells of one family (``min_rows`` 1), or of the
    cells at ``cells`` (ascending positions) only, and of ``qualifiers`` only where given,
    in one compiled call (``dense_pivot``, ``storage/_native/wal.c``): the block, None when
    the cells are not dense, ``()`` when none of them is of ``qualifiers``, or False when
    the kernel is off or does not take these columns (sliced, with nulls, another type, not
    in cell order): the reference decides."""
    if _NATIVE is None or batch.num_rows == 0:
        return False
    columns = batch.columns
    if any(c.type != t or c.offset or c.null_count for c, t in zip(columns, _PLAIN)):
        return False
    row, _, qualifier, timestamp, kind, value = columns
    extra: tuple = () if cells is None else (np.ascontiguousarray(cells, dtype=np.int64),)
    if qualifiers is not None:
        extra = (extra[0] if extra else None, tuple(qualifiers))
    out = _NATIVE.dense_pivot(batch.num_rows, *row.buffers()[1:], *qualifier.buffers()[1:], timestamp.buffers()[1],
                              kind.buffers()[1], *value.buffers()[1:], MAX_DENSE_QUALIFIERS, MAX_FILL, 1,
                              pa.allocate_buffer, *extra)
    if out is None or out is False or out == ():
        return out
    return _dense_block(*out)


def dense_puts(cells: pa.Table, at: np.ndarray, qualifiers: Sequence[bytes] | None = None) -> list[DenseBlock] | None:
    """The puts at positions ``at`` (ascending) of sorted cells of one family (a source's
    puts, its delete markers left out), of ``qualifiers`` only where given (a read of some
    of a wide row's columns), as dense blocks, one per chunk of ``cells`` holding some (a
    file's cell blocks; none without any), or None when they are not dense (a second version
    of a column, too sparse or too many qualifiers).  One compiled call per chunk copies
    each value once, straight from the cells' value column (``dense_pivot`` with ``cells``
    and ``qualifiers``); the reference takes the puts, then :func:`dense_from_cells`.
    Chunks whose puts share a row (a row cut by a block boundary) are pivoted together,
    after joining the chunks."""
    table = as_cell_table(cells)
    if not len(at):
        return []
    batches = table.to_batches()
    ends = np.cumsum([b.num_rows for b in batches])
    cut = np.searchsorted(at, ends[:-1])  # where each chunk's puts start in ``at``
    parts = [(b, at[lo:hi] - start) for b, lo, hi, start in
             zip(batches, np.concatenate([[0], cut]), np.concatenate([cut, [len(at)]]),
                 np.concatenate([[0], ends[:-1]]))
             if hi > lo]
    if len(parts) > 1 and _row_cut(parts):
        parts = [(table.combine_chunks().to_batches()[0], at)]
    wanted = None if qualifiers is None else tuple(qualifiers)
    blocks = []
    for batch, picked in parts:
        dense = _native_dense(batch, picked, wanted)
        if dense is False:
            puts = batch.take(pa.array(picked, pa.int64()))
            if wanted is not None:
                puts = puts.filter(pc.is_in(puts.column("qualifier"), value_set=pa.array(list(wanted), pa.binary())))
            dense = dense_from_cells(puts, min_rows=1) if puts.num_rows else ()
        if dense is None:
            return None
        if isinstance(dense, DenseBlock):  # (not (): none of this chunk's puts is of the columns asked for)
            blocks.append(dense)
    return blocks


def _row_cut(parts: list) -> bool:
    """Does a row's puts run from one chunk into the next (``parts``: each chunk's batch and
    its puts' positions in it)?"""
    for (a, pa_at), (b, pb_at) in zip(parts, parts[1:]):
        if a.column("row")[int(pa_at[-1])] == b.column("row")[int(pb_at[0])]:
            return True
    return False


def _dense_block(nrows: int, row_offsets, row_data, qualifiers: tuple, parts: list) -> DenseBlock:
    """The :class:`DenseBlock` of a compiled pivot's buffers (``dense_pivot``, ``wal_rows``)."""
    rows = pa.Array.from_buffers(_BINARY, nrows, [None, row_offsets, row_data])
    timestamps, values = [], []
    for stamps, validity, offsets, data, nulls in parts:
        timestamps.append(pa.Array.from_buffers(_INT64, nrows, [validity, stamps], null_count=nulls))
        values.append(pa.Array.from_buffers(_BINARY, nrows, [validity, offsets, data], null_count=nulls))
    return DenseBlock(rows, qualifiers, timestamps, values)


def log_rows(payloads: list, markers_aside: bool = False) -> "tuple[RowRun, bytes, int, pa.Table | None] | None":
    """The row form of checked WAL record payloads (in log order) whose cells are
    puts of whole rows of one family (each row's cells together, one version per
    column), built from the payloads in one compiled call (``wal_rows``,
    ``storage/_native/wal.c``) with no cell table between: ``(run, family, cells,
    markers)``.  Rows written in any key order (a table of hashed or salted keys) are
    sorted here (:func:`_in_key_order`).  With ``markers_aside``, DeleteFamily markers may
    lie among the puts (a table being updated and deleted from): they come back as
    ``markers``, a cell table of their own in cell order, and the row form holds the puts
    alone (a reader applies the markers by timestamp, as it does any source's); else, and
    without any, ``markers`` is None.  ``cells``: the cells the log holds (puts and markers,
    a marker written twice counted once).  None when the kernel is off or the log is not of
    that shape (other markers, versions, a row written twice, several families, no put,
    too sparse or wide, damaged): the caller decodes the cells and decides as before
    (:func:`storage.wal.arrow_decode.decode_payloads`, then :meth:`RowRun.of`)."""
    if _NATIVE is None or not payloads:
        return None
    out = _NATIVE.wal_rows(payloads if type(payloads) is list else list(payloads), MAX_DENSE_QUALIFIERS, MAX_FILL,
                           pa.allocate_buffer, True, markers_aside)
    if out is None:
        return None
    cells, family, ascending, nrows, row_offsets, row_data, qualifiers, columns, marked = out
    block = _dense_block(nrows, row_offsets, row_data, qualifiers, columns)
    if not ascending:
        block = _in_key_order(block)
        if block is None:
            return None
    markers = None
    if marked is not None:
        markers = _marker_cells(family, *marked)
        cells -= marked[0] - markers.num_rows  # (a marker written twice is one cell)
    return RowRun(block), family, cells, markers


def _marker_cells(family: bytes, count: int, row_offsets, row_data, stamps) -> pa.Table:
    """DeleteFamily markers (``wal_rows``' buffers, in log order) as a cell table in cell order
    (the last write of a marker kept, as the log's cells would be)."""
    n = count
    empty = pa.py_buffer(np.zeros(n + 1, np.int32))
    fam = pa.Array.from_buffers(_BINARY, n, [None, pa.py_buffer(np.arange(n + 1, dtype=np.int32) * len(family)),
                                            pa.py_buffer(family * n)])
    table = pa.Table.from_arrays(
        [pa.Array.from_buffers(_BINARY, n, [None, row_offsets, row_data]), fam,
         pa.Array.from_buffers(_BINARY, n, [None, empty, pa.py_buffer(b"")]),
         pa.Array.from_buffers(_INT64, n, [None, stamps]),
         pa.array(np.full(n, _DELETE_FAMILY, np.uint8)),
         pa.Array.from_buffers(_BINARY, n, [None, empty, pa.py_buffer(b"")])],
        schema=CELL_SCHEMA)
    rows = table.column(0).chunk(0)
    if n < 2 or pc.all(pc.less(rows.slice(0, n - 1), rows.slice(1))).as_py():
        return table  # one marker a row, in key order (a batch of row deletes): cell order already
    return sort_log(table).combine_chunks()


def _in_key_order(block: DenseBlock) -> DenseBlock | None:
    """``block``'s rows (each of one row key, in log order) sorted by key; None when a key
    is there twice (a row written again later in the log: its cells decide which write
    wins).  The keys are sorted as NumPy integers (:func:`row_sort_keys`: the merge's codes
    where they read as such, else their padded words), or else by Arrow."""
    rows = block.rows
    sort_keys = row_sort_keys(_NATIVE, one_array(rows))
    if sort_keys is not None:
        order, differs = lex_order(sort_keys)
        repeated = not bool(differs.all())
    else:
        order = pc.sort_indices(rows).to_numpy()
        ordered_rows = rows.take(order)
        repeated = len(rows) > 1 and pc.any(pc.equal(ordered_rows[1:], ordered_rows[:-1])).as_py()
    if repeated:
        return None
    values = block.values
    return DenseBlock(
        gather_binary(rows, order), block.qualifiers, [pc.take(t, order) for t in block.timestamps],
        None if values is None else [gather_binary(v, order) for v in values],
    )


class RowRun:
    """One family's clean cells as rows (a :class:`DenseBlock`), sliced by row range."""

    __slots__ = ("dense",)

    def __init__(self, dense: DenseBlock):
        self.dense = dense

    @classmethod
    def of(cls, cells: pa.Table, one_family: bool = False) -> "RowRun | None":
        """The row form of sorted cells of one family, or None when they are not
        all puts with one version per column (or too sparse or too wide for the
        dense form: see :func:`storage.storefile.dense.dense_from_cells`, which
        checks both).  ``one_family``: the caller knows every cell is of one
        family (a decoded log that said so), so it is not checked again."""
        table = as_cell_table(cells)
        if table.num_rows == 0:
            return None
        if not one_family and CellColumns(table).adjacent_ne("family")[1:].any():
            return None  # rows of one family only: the scan merges a family at a time
        batch = table.combine_chunks().to_batches()[0]
        dense = _native_dense(batch)
        if dense is False:
            dense = dense_from_cells(batch, min_rows=1)
        return None if dense is None else cls(dense)

    @property
    def num_rows(self) -> int:
        return self.dense.num_rows

    def slice(self, start_row: bytes, stop_row: bytes | None) -> DenseBlock | None:
        """The rows in ``[start_row, stop_row)`` (zero-copy), or None when there are none."""
        lo, hi = row_span(self.dense.rows, start_row, stop_row)
        if hi <= lo:
            return None
        return self.dense.slice(lo, hi)
