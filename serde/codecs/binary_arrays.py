"""NumPy views of Arrow binary arrays, and the way back.

The vectorized decoders read a binary column's offsets and value buffer as
NumPy arrays (no copy) and gather fixed-width values into an ``(n, width)``
byte matrix, so decoding a column is a handful of whole-array operations.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from storage.kernels.cell_columns import one_array

__all__ = [
    "as_binary",
    "decode_dictionary",
    "valid_mask",
    "binary_layout",
    "fixed_width_rows",
    "dense_fixed_rows",
    "utf8_view",
    "binary_from_row_slice",
    "binary_from_rows",
    "binary_from_parts",
    "from_numpy",
]


def as_binary(arr: pa.Array | pa.ChunkedArray) -> pa.Array:
    """The array as ``pa.binary()`` (zero-copy for string; cast for large/view types)."""
    arr = one_array(arr)
    if arr.type == pa.binary():
        return arr
    if arr.type == pa.string():
        return arr.view(pa.binary())
    return arr.cast(pa.binary())


def decode_dictionary(codec, arr: pa.DictionaryArray) -> pa.Array | None:
    """A column of dictionary codes over binary entries (a store file's dictionary chunk, read
    without expanding it) decoded by ``codec`` as its rows would decode: each distinct entry
    decoded once (``codec.decode_array`` of the dictionary), then taken by the codes (a null
    row stays null).  None when some entry does not decode: the caller then decodes the rows
    themselves, so a bad value is reported at its row, or not at all when no row uses it."""
    entries, bad = codec.decode_array(as_binary(arr.dictionary))
    if bad is not None and bad.any():
        return None
    return entries.take(arr.indices)


def valid_mask(arr: pa.Array) -> np.ndarray:
    """Boolean NumPy array, True where ``arr`` is not null."""
    if arr.null_count == 0:
        return np.ones(len(arr), dtype=bool)
    return arr.is_valid().to_numpy(zero_copy_only=False)


def binary_layout(arr: pa.Array) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(offsets, data, valid)`` of a binary array, as NumPy views.

    ``offsets`` has ``len(arr) + 1`` entries indexing into ``data``.
    """
    n = len(arr)
    buffers = arr.buffers()
    offsets = np.frombuffer(buffers[1], dtype=np.int32, count=n + 1, offset=arr.offset * 4) if n else np.zeros(1, np.int32)
    data = np.frombuffer(buffers[2], dtype=np.uint8) if buffers[2] is not None else np.zeros(0, np.uint8)
    return offsets.astype(np.int64, copy=False), data, valid_mask(arr)


def fixed_width_rows(arr: pa.Array, width: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Gather the values of a binary array whose values should be ``width`` bytes.

    Returns ``(matrix, good, bad)``: ``matrix`` is ``(n, width)`` uint8 with
    the value bytes of every good row (zeros elsewhere), ``good`` marks
    non-null rows of the right length, ``bad`` non-null rows of another length.
    """
    n = len(arr)
    offsets, data, valid = binary_layout(arr)
    lengths = np.diff(offsets)
    right = lengths == width
    good = valid & right
    bad = valid & ~right
    first = int(offsets[0]) if n else 0
    if good.all() and int(offsets[-1]) - first == n * width:
        # Dense and all of the right width: a zero-copy reshape of the value buffer.
        return data[first : first + n * width].reshape(n, width), good, bad
    matrix = np.zeros((n, width), dtype=np.uint8)
    starts = offsets[:-1][good]
    if len(starts):
        matrix[good] = data[starts[:, None] + np.arange(width)]
    return matrix, good, bad


def dense_fixed_rows(arr: pa.Array, width: int) -> np.ndarray | None:
    """The ``(n, width)`` uint8 view of a binary array's values when it has no nulls and
    every value is ``width`` bytes (what a fixed-width chunk decodes to), else None.

    The cheap case of :func:`fixed_width_rows`: no validity mask, no int64 copy of the
    offsets, one comparison of the int32 offsets against the stride (a third of the
    fixed-width decode's time on a date column went to the general form's masks)."""
    n = len(arr)
    if n == 0 or arr.null_count:
        return None
    buffers = arr.buffers()
    offsets = np.frombuffer(buffers[1], dtype=np.int32, count=n + 1, offset=arr.offset * 4)
    first = int(offsets[0])
    if int(offsets[-1]) - first != n * width or buffers[2] is None:
        return None
    steps = offsets[1:] - offsets[:-1]
    if not (steps == width).all():
        return None
    return np.frombuffer(buffers[2], dtype=np.uint8, count=n * width, offset=first).reshape(n, width)


_WORDS = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def binary_from_row_slice(matrix: np.ndarray, start: int, width: int) -> pa.Array:
    """A binary array (no nulls) whose row i is ``matrix[i, start:start + width]``, for a
    C-contiguous ``(n, w)`` uint8 ``matrix``: one strided copy of ``width``-byte items
    (NumPy copies a byte-column slice byte by byte, 10x slower on 8-byte parts)."""
    n, row = matrix.shape
    if n == 0 or width == 0:
        return binary_from_rows(np.zeros((n, width), np.uint8))
    item = np.dtype(_WORDS.get(width, f"V{width}"))
    strided = np.ndarray((n,), item, matrix, start, (row,))
    data = np.ascontiguousarray(strided).view(np.uint8)
    offsets = np.arange(n + 1, dtype=np.int32) * width
    return pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data)])


def utf8_view(arr: pa.Array) -> pa.Array | None:
    """``arr`` (binary) viewed as ``pa.string()`` without a copy when every byte of its
    values is ASCII, so valid UTF-8 with no per-value check (one vectorized maximum over
    the value bytes, about 20x cheaper than Arrow's validating cast); None otherwise,
    for the cast to decide."""
    n = len(arr)
    buffers = arr.buffers()
    if n == 0 or buffers[2] is None:
        return arr.view(pa.string())
    offsets = np.frombuffer(buffers[1], dtype=np.int32, count=n + 1, offset=arr.offset * 4)
    first, last = int(offsets[0]), int(offsets[-1])
    if last > first and int(np.frombuffer(buffers[2], dtype=np.uint8, count=last - first, offset=first).max()) >= 0x80:
        return None
    return arr.view(pa.string())


def binary_from_rows(matrix: np.ndarray, valid: np.ndarray | None = None) -> pa.Array:
    """A binary array whose row i is ``matrix[i]`` (``(n, width)`` uint8), null where not valid."""
    n, width = matrix.shape
    if valid is None or valid.all():
        offsets = np.arange(n + 1, dtype=np.int32) * width
        data = np.ascontiguousarray(matrix).reshape(-1)
        return pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data)])
    lengths = np.where(valid, width, 0).astype(np.int32)
    offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    data = np.ascontiguousarray(matrix[valid]).reshape(-1)
    bitmap = np.packbits(valid, bitorder="little")
    return pa.Array.from_buffers(
        pa.binary(), n, [pa.py_buffer(bitmap), pa.py_buffer(offsets), pa.py_buffer(data)], null_count=int(n - valid.sum())
    )


def binary_from_parts(matrix: np.ndarray, keep: np.ndarray, valid: np.ndarray) -> pa.Array:
    """A binary array whose row i is ``matrix[i][keep[i]]`` (variable length), null where not valid."""
    n = matrix.shape[0]
    keep = keep & valid[:, None]
    lengths = keep.sum(axis=1).astype(np.int32)
    offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    data = np.ascontiguousarray(matrix[keep])
    bitmap = None if valid.all() else pa.py_buffer(np.packbits(valid, bitorder="little"))
    return pa.Array.from_buffers(
        pa.binary(), n, [bitmap, pa.py_buffer(offsets), pa.py_buffer(data)], null_count=int(n - valid.sum())
    )


def from_numpy(values: np.ndarray, arrow_type: pa.DataType, valid: np.ndarray | None) -> pa.Array:
    """An Arrow array of ``values`` (already in the storage dtype), null where not valid."""
    if valid is None or valid.all():
        return pa.array(values, type=arrow_type)
    return pa.array(values, type=arrow_type, mask=~valid)
