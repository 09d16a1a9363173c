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
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from ..native import NATIVE
from .cell_columns import one_array

__all__ = ["gather_binary", "take_binary"]


def take_binary(values: pa.Array | pa.ChunkedArray, index: np.ndarray) -> pa.Array:
    """The reference: Arrow's ``take`` of ``values`` at ``index`` (int64; -1 gives a null), as one array."""
    index = np.asarray(index, dtype=np.int64)
    missing = index < 0
    picks = pa.array(index, mask=missing) if missing.any() else pa.array(index)
    return one_array(values.take(picks))


_USE_MODULE = object()


def gather_binary(values: pa.Array | pa.ChunkedArray, index: np.ndarray, *, native=_USE_MODULE) -> pa.Array:
    """The rows of ``values`` (binary, an array or its chunks laid end to end)
    at ``index`` (int64; -1 gives a null), as one binary array; the same
    answer as :func:`take_binary`.  ``native``: the compiled module to use
    (None: the reference; by default this module's ``NATIVE``, looked up at
    each call so that one process can run both paths)."""
    if native is _USE_MODULE:
        native = NATIVE
    if native is None or not pa.types.is_binary(values.type):
        return take_binary(values, index)
    index = np.ascontiguousarray(index, dtype=np.int64)
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
