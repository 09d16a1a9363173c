"""happybase-style rows from cell batches: ``(row_key, {b"family:qualifier": value})``.

One Python step per row, not per cell: row boundaries, keys and column
names come from Arrow/NumPy kernels over the whole batch.
"""

from __future__ import annotations

from collections import OrderedDict
from functools import lru_cache
from itertools import repeat
from typing import Any, Callable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .. import kernels
from ..native import NATIVE

__all__ = ["ROW_CHUNK", "cells_to_dicts", "row_dict_chunks", "rows_to_dicts", "rows_to_dicts_py", "row_dict_maker"]


def cells_to_dicts(
    batch: pa.RecordBatch, include_timestamp: bool = False, sorted_columns: bool = False,
    scan_batching: int | None = None, all_versions: bool = False,
    cell: Callable[[bytes, int], Any] | None = None,
) -> Iterator[tuple[bytes, dict]]:
    """Turn a cell batch (whole rows, cell order) into happybase row pairs.

    A dict holds one value per column.  With ``all_versions`` (a scan of
    several versions) a column may have several cells; its newest (first)
    one is the value, on every path.  ``scan_batching`` cuts a row into
    pieces of at most that many cells, versions included, as HBase's
    ``Scan.setBatch``; each piece is a dict of the newest cell of each
    column in it.  One Python step per row or piece, not per cell.

    ``cell(value, timestamp)``, when given, builds each dict value in place
    of the ``(value, timestamp)`` pair ``include_timestamp`` gives (the
    Thrift gateway builds its ``TCell`` structs this way, in one pass).
    """
    n = batch.num_rows
    if n == 0:
        return
    starts = kernels.row_boundaries(batch)
    ends = np.append(starts[1:], n)
    keys = batch.column(0).take(pa.array(starts)).to_pylist()
    bounds: np.ndarray | None = None  # piece starts, as cell positions
    if scan_batching is not None:
        lengths = ends - starts
        pieces = (lengths + scan_batching - 1) // scan_batching
        first = np.repeat(np.cumsum(pieces) - pieces, pieces)
        within = np.arange(int(pieces.sum())) - first
        bounds = np.repeat(starts, pieces) + within * scan_batching
        piece_rows = np.repeat(np.arange(len(starts)), pieces)
    if all_versions:
        # keep the newest cell of each column, and the first cell of each
        # piece (an older version that opens a piece is the newest in it)
        keep = np.zeros(n, dtype=bool)
        keep[kernels.column_boundaries(batch)] = True
        if bounds is not None:
            keep[bounds] = True
        if not keep.all():
            taken = np.flatnonzero(keep)
            batch = batch.take(pa.array(taken))
            starts = np.searchsorted(taken, starts)
            ends = np.searchsorted(taken, ends)
            if bounds is not None:
                bounds = np.searchsorted(taken, bounds)
    names = pc.binary_join_element_wise(batch.column(1), batch.column(2), b":").to_pylist()
    values = batch.column(5).to_pylist()
    if cell is not None:
        values = list(map(cell, values, batch.column(3).to_pylist()))
    elif include_timestamp:
        values = list(zip(values, batch.column(3).to_pylist()))
    make = OrderedDict if sorted_columns else dict
    if bounds is None:
        if not sorted_columns:
            uniform = _uniform_rows(keys, starts, batch.num_rows, names, values)
            if uniform is not None:
                yield from uniform
                return
        for key, s, e in zip(keys, starts.tolist(), ends.tolist()):
            yield key, make(zip(names[s:e], values[s:e]))
        return
    piece_ends = np.append(bounds[1:], batch.num_rows)
    for r, s, e in zip(piece_rows.tolist(), bounds.tolist(), piece_ends.tolist()):
        yield keys[r], make(zip(names[s:e], values[s:e]))


def _uniform_rows(keys: list, starts: np.ndarray, cells: int, names: list, values: list) -> Iterator | None:
    """The row pairs of cells in which every row has the same columns in the
    same order (a dense table read as cells): each column's values are every
    k-th cell, and each dict is one call of :func:`row_dict_maker`.  None when
    the rows differ.  The pairs are made as they are taken, not all at once:
    a batch's pairs alive together would be visited by every collection that
    follows and take memory faulted in anew for each batch (see :data:`ROW_CHUNK`)."""
    rows = len(keys)
    k = cells // rows if rows else 0
    if k == 0 or k > _DISPLAY_COLUMNS or k * rows != cells or not (starts == np.arange(0, cells, k)).all():
        return None
    first = names[:k]
    for j, name in enumerate(first):
        column = names[j::k]
        if column.count(name) != rows:  # C-speed comparisons, no Python step per cell
            return None
    return zip(keys, map(row_dict_maker(tuple(first)), *(values[j::k] for j in range(k))))


_DISPLAY_COLUMNS = 16  # columns up to which a row's dict is built by a dict display


@lru_cache(maxsize=256)
def row_dict_maker(names: tuple) -> Callable[..., dict]:
    """A function of one value per name returning ``{name: value}``.

    A dict display (``{n0: v0, n1: v1}``) builds a small dict in one step,
    about twice as fast as ``dict(zip(names, values))``, which makes a zip
    and a tuple per row: the larger part of ``scan()``'s cost per row.  Its
    arity is fixed, so it is compiled per column list (the names are bound
    as constants of the function, never spliced into its source); past
    ``_DISPLAY_COLUMNS`` columns the zip form is used.
    """
    if len(names) > _DISPLAY_COLUMNS:
        return lambda *values: dict(zip(names, values))
    args = ", ".join(f"v{i}" for i in range(len(names)))
    entries = ", ".join(f"_n{i}: v{i}" for i in range(len(names)))
    scope = {f"_n{i}": name for i, name in enumerate(names)}
    exec(f"def make({args}):\n    return {{{entries}}}\n", scope)
    return scope["make"]


@lru_cache(maxsize=256)
def _column_names(fields: tuple) -> tuple:
    """The dict keys of a row batch's value columns (Latin-1 bytes of their names), made
    once per column list: every dict shares them, and their hashes are computed once."""
    return tuple(n.encode("latin-1") for n in fields)


_USE_MODULE = object()


def rows_to_dicts(batch: pa.RecordBatch, include_timestamp: bool = False, sorted_columns: bool = False,
                  *, native: Any = _USE_MODULE) -> list[tuple[bytes, dict]]:
    """happybase row pairs from a row batch (``key``, then one binary column per
    ``family:qualifier``, each followed by its ``@ts`` column when
    ``include_timestamp``).  Column names are Latin-1 text of the column's
    bytes; a null is a cell the row does not have.

    Plain dicts of binary columns (no timestamps, no column order) are built by
    the compiled ``row_dicts`` (``storage/_native/rows.c``) in one call per
    batch; everything else, and every batch when the kernels are off, by
    :func:`rows_to_dicts_py`, the reference, with the same answer.  ``native``:
    the compiled module to use (None: the reference; by default
    :data:`storage.native.NATIVE`, looked up at each call).
    """
    args = _native_args(batch, include_timestamp, sorted_columns, native)
    if args is not None:
        return args[0](*args[1:])
    return rows_to_dicts_py(batch, include_timestamp, sorted_columns)


ROW_CHUNK = 256
"""Rows per list of :func:`row_dict_chunks`.  Each row makes two objects the
cyclic collector counts (its pair and its dict), so 256 rows stay under the
collector's first threshold (700 by default): a reader that drops each row
before taking the next starts no collection, and the memory of one list is
reused by the next.  Larger lists make the collections that follow visit
every pair still alive (a pair holding a dict stays tracked, and survivors
move on to the older generations, whose full collections then visit every
tracked object of the process) and, past some megabytes, take memory the
allocator returns to the system and faults back in; smaller ones pay the
per-list call more often."""


def row_dict_chunks(batch: pa.RecordBatch, include_timestamp: bool = False, sorted_columns: bool = False,
                    *, native: Any = _USE_MODULE) -> Iterator[list[tuple[bytes, dict]]]:
    """:func:`rows_to_dicts` of ``batch`` as consecutive lists of at most
    :data:`ROW_CHUNK` of its rows, each made when the one before has been
    taken (through the compiled ``row_dicts`` or the reference, as
    :func:`rows_to_dicts` chooses).  ``scan()`` yields its rows from these,
    so that a reader going through them holds a few hundred rows at a time,
    not a batch of tens of thousands.  ``native`` as for :func:`rows_to_dicts`.
    """
    rows = batch.num_rows
    args = _native_args(batch, include_timestamp, sorted_columns, native)
    if args is None:
        for start in range(0, rows, ROW_CHUNK):
            yield rows_to_dicts_py(batch.slice(start, ROW_CHUNK), include_timestamp, sorted_columns)
        return
    make, key, columns, names = args
    for start in range(0, rows, ROW_CHUNK):
        yield make(key, columns, names, start, min(start + ROW_CHUNK, rows))


def _native_args(batch: pa.RecordBatch, include_timestamp: bool, sorted_columns: bool,
                 native: Any) -> tuple | None:
    """``(row_dicts, key, columns, names)`` when the compiled kernel builds the
    rows of ``batch`` (plain dicts of binary columns), else None."""
    if native is _USE_MODULE:
        native = NATIVE
    if native is None or include_timestamp or sorted_columns or batch.num_columns < 2:
        return None
    columns = batch.columns
    if not all(c.type == _BINARY for c in columns):
        return None
    return (native.row_dicts, _buffers(columns[0]), tuple(map(_buffers, columns[1:])),
            _column_names(tuple(batch.schema.names[1:])))


_BINARY = pa.binary()


def _buffers(column: pa.Array) -> tuple:
    """A binary array as ``row_dicts`` takes it: (validity or None, offsets, data, offset, length)."""
    valid, offsets, data = column.buffers()
    return valid if column.null_count else None, offsets, data, column.offset, len(column)


def rows_to_dicts_py(batch: pa.RecordBatch, include_timestamp: bool = False, sorted_columns: bool = False) -> list[tuple[bytes, dict]]:
    """:func:`rows_to_dicts` in Python and Arrow, the reference: whole columns
    turned into lists, dicts zipped from them, no step per cell."""
    keys = batch.column(0).to_pylist()
    step = 2 if include_timestamp else 1
    names = _column_names(tuple(batch.schema.names[1::step]))
    columns = [batch.column(1 + step * j) for j in range(len(names))]
    values = [c.to_pylist() for c in columns]
    if include_timestamp:
        stamps = [batch.column(2 + 2 * j).to_pylist() for j in range(len(names))]
        values = [list(zip(v, t)) for v, t in zip(values, stamps)]
    if all(c.null_count == 0 for c in columns):
        if values and not sorted_columns:
            return list(zip(keys, map(row_dict_maker(tuple(names)), *values)))
        return list(zip(keys, map(OrderedDict, map(zip, repeat(names), zip(*values)))))
    make = OrderedDict if sorted_columns else dict
    # some rows lack some columns: leave those out of their dicts (one test per entry
    # of the columns with nulls only)
    full = [j for j, c in enumerate(columns) if c.null_count == 0]
    sparse = [j for j, c in enumerate(columns) if c.null_count]
    if full and not sorted_columns:
        dicts = list(map(row_dict_maker(tuple(names[j] for j in full)), *[values[j] for j in full]))
    elif full:
        dicts = list(map(make, map(zip, repeat([names[j] for j in full]), zip(*[values[j] for j in full]))))
    else:
        dicts = [make() for _ in keys]
    for j in sparse:
        name, present = names[j], columns[j].is_valid().to_pylist()
        for d, ok, v in zip(dicts, present, values[j]):
            if ok:
                d[name] = v
    if sorted_columns and sparse:
        order = {n: i for i, n in enumerate(names)}
        dicts = [OrderedDict(sorted(d.items(), key=lambda kv: order[kv[0]])) for d in dicts]
    return list(zip(keys, dicts))
