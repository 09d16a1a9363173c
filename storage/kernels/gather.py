"""Gather rows of a binary column by index: the compiled kernel or Arrow's ``take``.

A merge of a live table's runs (a base run and newer runs, newest winning,
deletes dropping rows) picks its rows as an index into the runs' chunks laid
end to end: runs of consecutive rows of one chunk (a delete or re-put every
few rows cuts them).
Arrow's ``take`` copies a binary column value by value; the compiled
``gather_binary`` (``storage/_native/gather.c``) copies each run with one
``memcpy``: on the live benchmark's 8.7 MB value columns 0.5-0.7 ms against
``take``'s 0.9-1.3 ms (docs/decisions/2026-12-05-native-kernels.md).
``take`` stays the reference and the fallback: a large binary column, a
result past 2 GiB, or ``REGIONSCAN_NATIVE=0`` (:mod:`storage.native`).

Narrow values of one width (a 4-byte counter, a fixed-size code: at most
16 bytes each, no nulls) are copied pick by pick with a copy of that fixed
size by the compiled gather, and gathered as NumPy rows of that width (one
``take`` of integers, a few chunks) without it: a copy per run of a few bytes
costs more than either.  A live scan's ``cf:n`` (66,666 picks of 4-byte
values in runs of three, from two chunks): NumPy rows 0.66 ms, the run copy
0.40 ms, the fixed-size copy 0.29 ms
(docs/decisions/2026-12-06-live-gathers.md).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from ..native import NATIVE
from .cell_columns import UINT_BY_WIDTH, data_span, one_array, value_offsets

__all__ = ["gather_binary", "reversed_rows", "take_binary", "take_rows"]


def take_binary(values: pa.Array | pa.ChunkedArray, index: np.ndarray) -> pa.Array:
    """The reference: Arrow's ``take`` of ``values`` at ``index`` (int64; -1 gives a null), as one array."""
    index = np.asarray(index, dtype=np.int64)
    missing = index < 0
    picks = pa.array(index, mask=missing) if missing.any() else pa.array(index)
    return one_array(values.take(picks))


_USE_MODULE = object()
_NARROW_BYTES = 16  # wider values: a copy per run of rows costs less than NumPy's row take
_NARROW_CHUNKS = 8  # more chunks: listing them in Python costs more than the gather saves


def _narrow_take(values: pa.Array | pa.ChunkedArray, index: np.ndarray) -> pa.Array | None:
    """:func:`take_binary` for values all of one width of at most ``_NARROW_BYTES``
    bytes, without nulls, picked inside their rows and without -1: the chunks' data as
    rows of that width and one NumPy ``take`` of them; None when the values or the
    picks are not such (the other paths then answer, or refuse the picks)."""
    if values.null_count or (isinstance(values, pa.ChunkedArray) and values.num_chunks > _NARROW_CHUNKS):
        return None
    chunks = [c for c in (values.chunks if isinstance(values, pa.ChunkedArray) else [values]) if len(c)]
    if not chunks or data_span(chunks[0]) > _NARROW_BYTES * len(chunks[0]):
        return None  # wide values (most columns) are told from the first chunk's two offsets
    width, parts, total = None, [], 0
    for chunk in chunks:
        offsets = value_offsets(chunk)
        first, last = int(offsets[0]), int(offsets[-1])
        w = (last - first) // len(chunk)
        if (width is not None and w != width) or w > _NARROW_BYTES or first + w * len(chunk) != last:
            return None
        if not (np.diff(offsets) == w).all():
            return None
        width = w
        total += len(chunk)
        parts.append(np.frombuffer(chunk.buffers()[2], np.uint8, count=last - first, offset=first) if w else None)
    n = len(index)
    if n and (int(index.min()) < 0 or int(index.max()) >= total):
        return None
    if not width:  # every value empty
        return pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(np.zeros(n + 1, np.int32)),
                                                      pa.py_buffer(b"")])
    rows = parts[0] if len(parts) == 1 else np.concatenate(parts)
    dtype = UINT_BY_WIDTH.get(width)
    rows = rows.view(dtype) if dtype is not None else rows.reshape(-1, width)
    data = rows.take(index, axis=0)
    offsets = np.arange(0, (n + 1) * width, width, dtype=np.int32)
    return pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data)])


def gather_binary(values: pa.Array | pa.ChunkedArray, index: np.ndarray, *, native=_USE_MODULE) -> pa.Array:
    """The rows of ``values`` (binary, an array or its chunks laid end to end)
    at ``index`` (int64; -1 gives a null), as one binary array; the same
    answer as :func:`take_binary`.  ``native``: the compiled module to use
    (None: the reference; by default this module's ``NATIVE``, looked up at
    each call so that one process can run both paths)."""
    if native is _USE_MODULE:
        native = NATIVE
    if not pa.types.is_binary(values.type):
        return take_binary(values, index)
    index = np.ascontiguousarray(index, dtype=np.int64)
    if native is None:
        narrow = _narrow_take(values, index)
        return narrow if narrow is not None else take_binary(values, index)
    # every chunk's buffers through one Arrow C stream: no Python object per chunk
    column = values if isinstance(values, pa.ChunkedArray) else pa.chunked_array([values])
    if not hasattr(column, "__arrow_c_stream__"):  # a pyarrow before the capsule interface of chunked arrays
        return take_binary(values, index)
    try:
        valid, offsets, data, nulls = native.gather_binary(column.__arrow_c_stream__(), index, pa.allocate_buffer)
    except OverflowError:
        return take_binary(values, index)  # past a binary array's 2 GiB: Arrow's answer, as the reference gives it
    # the buffers come from Arrow's memory pool (aligned and reused, where bytes objects
    # measured slower downstream: fresh pages on every scan)
    return pa.Array.from_buffers(pa.binary(), len(index), [valid, offsets, data], null_count=nulls)


def take_rows(rows: pa.Table | pa.RecordBatch, index: np.ndarray) -> pa.Table | pa.RecordBatch:
    """``rows.take(index)`` (no nulls: every pick a row of ``rows``), each binary column by
    :func:`gather_binary` straight from its chunks, the others by Arrow's ``take`` after
    joining their chunks (Arrow's take over a chunked column resolves each pick's chunk: several
    times slower than one join).  A reverse scan's rows, chiefly: Arrow's ``take`` copies a
    binary column value by value, the compiled gather takes 0.96x of its time on 100-byte
    values and 0.47x on 4-byte ones (a wide column's time is mostly fetching its bytes)."""
    index = np.ascontiguousarray(index, dtype=np.int64)
    picks = None  # the index as an Arrow array, made once for the columns that need it
    columns = []
    for column in rows.columns:
        if pa.types.is_binary(column.type):
            columns.append(gather_binary(column, index))
            continue
        if picks is None:
            picks = pa.array(index)
        columns.append(one_array(column).take(picks))
    if isinstance(rows, pa.RecordBatch):
        return pa.RecordBatch.from_arrays(columns, schema=rows.schema)
    return pa.Table.from_arrays(columns, schema=rows.schema)


def reversed_rows(rows: pa.Table | pa.RecordBatch) -> pa.Table | pa.RecordBatch:
    """The rows of ``rows`` last first (:func:`take_rows`)."""
    n = rows.num_rows
    if n < 2 or rows.num_columns == 0:  # (rows of no column: nothing to reorder)
        return rows
    return take_rows(rows, np.arange(n - 1, -1, -1, dtype=np.int64))


def take_cells(table: pa.Table, indices: np.ndarray) -> pa.Table:
    """``table.take(indices)``: the binary columns (rows, families, qualifiers, values) by
    :func:`gather_binary` (the compiled gather where it is built), the others by Arrow's take
    of their chunks combined first (over a chunked column Arrow resolves the chunk of every
    index, several times slower than one take from one array)."""
    if any(column.num_chunks > 1 for column in table.columns):
        table = table.combine_chunks()
    index = np.ascontiguousarray(indices, dtype=np.int64)
    return pa.Table.from_arrays(
        [gather_binary(c, index) if c.type == pa.binary() else c.take(index) for c in table.columns],
        schema=table.schema)
