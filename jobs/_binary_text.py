"""HBase's ``Bytes.toStringBinary`` / ``toBytesBinary`` over whole Arrow arrays.

Printable ASCII stays as it is; every other byte, and the backslash, becomes
``\\xNN`` (upper-case hex), so the text form is reversible and readable
where keys are readable.  Both directions work on the flat value buffer
with NumPy (no Python loop per value): text reports and CSV files of
binary columns stay batch kernels.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from storage import InvalidArgument

__all__ = ["escape_binary", "unescape_binary"]

_HEX = np.frombuffer(b"0123456789ABCDEF", dtype=np.uint8)
_HEX_VALUE = np.full(256, -1, dtype=np.int16)
for _i, _c in enumerate(b"0123456789abcdef"):
    _HEX_VALUE[_c] = _i
for _i, _c in enumerate(b"ABCDEF"):
    _HEX_VALUE[_c] = 10 + _i


def _flat(arr: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(offsets rebased to 0 as int64, value bytes) of a binary-like array."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if pa.types.is_large_binary(arr.type) or pa.types.is_large_string(arr.type):
        width = np.int64
    elif pa.types.is_binary(arr.type) or pa.types.is_string(arr.type):
        width = np.int32
    else:
        raise InvalidArgument(f"expected a binary or string array, got {arr.type}")
    n = len(arr)
    buffers = arr.buffers()
    offsets = np.frombuffer(buffers[1], dtype=width, count=arr.offset + n + 1)[arr.offset:].astype(np.int64) \
        if buffers[1] is not None else np.zeros(n + 1, np.int64)
    data = np.frombuffer(buffers[2], dtype=np.uint8) if buffers[2] is not None else np.empty(0, np.uint8)
    data = data[offsets[0]:offsets[-1]]
    return offsets - offsets[0], data


def _rebuild(n: int, offsets: np.ndarray, data: np.ndarray, validity: pa.Array | None, kind: pa.DataType) -> pa.Array:
    arr = pa.Array.from_buffers(kind, n, [None, pa.py_buffer(offsets.astype(np.int64)), pa.py_buffer(data)])
    if validity is not None and validity.null_count:
        arr = pc.if_else(validity.is_valid(), arr, pa.scalar(None, kind))
    return arr


def escape_binary(arr: pa.Array) -> pa.Array:
    """``Bytes.toStringBinary`` of every value: a ``large_string`` array (nulls stay null)."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    n = len(arr)
    offsets, data = _flat(arr)
    printable = (data >= 32) & (data < 127) & (data != 92)
    widths = np.where(printable, 1, 4).astype(np.int64)
    ends = np.cumsum(widths)
    starts = ends - widths
    out = np.empty(int(ends[-1]) if len(ends) else 0, dtype=np.uint8)
    out[starts[printable]] = data[printable]
    at = starts[~printable]
    raw = data[~printable]
    out[at] = ord("\\")
    out[at + 1] = ord("x")
    out[at + 2] = _HEX[raw >> 4]
    out[at + 3] = _HEX[raw & 15]
    cumulative = np.concatenate([[0], ends])
    return _rebuild(n, cumulative[offsets], out, arr, pa.large_string())


def unescape_binary(arr: pa.Array) -> pa.Array:
    """``Bytes.toBytesBinary`` of every value: ``\\xNN`` -> the byte; a ``large_binary`` array."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    n = len(arr)
    offsets, data = _flat(arr)
    if not len(data):
        return _rebuild(n, offsets, data, arr, pa.large_binary())
    # an escape is a backslash, 'x', two hex digits, all inside one value; escapes cannot
    # overlap, since none of 'x' and the hex digits is a backslash
    size = len(data)
    candidates = np.flatnonzero(data[: max(size - 3, 0)] == ord("\\"))
    if len(candidates):
        ok = (data[candidates + 1] == ord("x")) & (_HEX_VALUE[data[candidates + 2]] >= 0) \
            & (_HEX_VALUE[data[candidates + 3]] >= 0)
        value_of = np.searchsorted(offsets, candidates, side="right") - 1
        ok &= candidates + 4 <= offsets[value_of + 1]
        candidates = candidates[ok]
    if not len(candidates):
        return _rebuild(n, offsets, data, arr, pa.large_binary())
    keep = np.ones(size, dtype=bool)
    for k in (1, 2, 3):
        keep[candidates + k] = False
    values = data.copy()
    values[candidates] = (_HEX_VALUE[data[candidates + 2]] * 16 + _HEX_VALUE[data[candidates + 3]]).astype(np.uint8)
    kept_before = np.concatenate([[0], np.cumsum(keep)])
    return _rebuild(n, kept_before[offsets], values[keep], arr, pa.large_binary())
