"""The value codec protocol: one type, one stored form, scalar and vectorized.

A :class:`Codec` turns the bytes of one cell (or key part) into a typed value
and back.  Every codec has both paths and they must agree value for value:

* ``decode(raw) -> value`` / ``encode(value) -> bytes``: the row-wise path;
  ``decode`` raises (any exception) on bad bytes and may return None for a
  stored null marker.
* ``decode_array(arr) -> (values, bad)`` / ``encode_array(arr)``: the batch
  path over a whole Arrow binary column.  ``bad`` is a NumPy bool mask (or
  None when nothing was bad) of the non-null inputs that did not decode;
  ``values`` is null there.

Vectorized codecs follow one pattern: a fast kernel decodes the rows it can
prove it handles exactly as ``decode`` would, and the remaining non-null rows
(normally none) go through ``decode`` one by one.  That keeps the two paths
equal by construction and finds the offending rows of a bad batch.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

from typing import Any

import numpy as np
import pyarrow as pa

from serde.codecs.binary_arrays import as_binary, valid_mask
from serde.types import DataType

__all__ = ["Codec", "decode_rows", "merge_fallback"]


class Codec(ABC):
    """Encodes and decodes the values of one :class:`~serde.types.DataType`.

    ``fixed_width`` is the byte length of every encoded value when it is
    constant (used to split fixed-length composite row keys), else None.
    ``byte_order`` says how encoded values compare as bytes (``bytes``,
    ``ordered``, ``signed`` or None: no exact order); the codec factories
    set it from the type registry.
    """

    fixed_width: int | None = None
    byte_order: str | None = None

    def __init__(self, data_type: DataType):
        self.data_type = data_type
        self.arrow_type = data_type.arrow()

    @abstractmethod
    def decode(self, raw: bytes) -> Any:
        """Decode one stored value; raise on bad bytes."""

    @abstractmethod
    def encode(self, value: Any) -> bytes:
        """Encode one non-null value; raise ``ValueError``/``TypeError`` on a bad one."""

    def decode_array(self, arr: pa.Array) -> tuple[pa.Array, np.ndarray | None]:
        """Decode a binary column; the default loops over :meth:`decode`."""
        return decode_rows(self, as_binary(arr))

    def encode_array(self, arr: pa.Array) -> pa.Array:
        """Encode a typed column into a binary column; the default loops over :meth:`encode`."""
        encode = self.encode
        return pa.array([None if v is None else encode(v) for v in arr.to_pylist()], type=pa.binary())

    def explain(self, raw: bytes) -> str:
        """Why ``raw`` does not decode (the scalar decoder's error message)."""
        try:
            self.decode(raw)
        except Exception as exc:  # the message is the point; any decoder error counts
            return f"{type(exc).__name__}: {exc}"
        return "the batch decoder rejected the value"

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.data_type})"


def decode_rows(codec: Codec, arr: pa.Array) -> tuple[pa.Array, np.ndarray | None]:
    """Decode a binary array with ``codec.decode`` one row at a time.

    Used by codecs that have no batch kernel (Avro, JSON) and for the rare
    rows a kernel cannot prove it handles.
    """
    decode = codec.decode
    out = []
    append = out.append
    bad_rows = []
    for i, raw in enumerate(arr.to_pylist()):
        if raw is None:
            append(None)
            continue
        try:
            append(decode(raw))
        except Exception:  # any decoder failure is a bad value, reported by the caller
            append(None)
            bad_rows.append(i)
    try:
        values = pa.array(out, type=codec.arrow_type)
    except (pa.ArrowException, TypeError, ValueError, OverflowError):
        # A decoder returned something its type cannot hold: those values are bad too.
        for i, value in enumerate(out):
            if value is not None:
                try:
                    pa.array([value], type=codec.arrow_type)
                except (pa.ArrowException, TypeError, ValueError, OverflowError):
                    out[i] = None
                    bad_rows.append(i)
        values = pa.array(out, type=codec.arrow_type)
    if not bad_rows:
        return values, None
    bad = np.zeros(len(arr), dtype=bool)
    bad[bad_rows] = True
    return values, bad


def merge_fallback(
    codec: Codec, arr: pa.Array, values: pa.Array, handled: np.ndarray
) -> tuple[pa.Array, np.ndarray | None]:
    """Finish a kernel's result: decode the non-null rows it did not handle with ``codec.decode``.

    ``values`` is the kernel's output (anything at unhandled rows), ``handled``
    marks the rows it decoded (null input rows count as handled).
    """
    todo = valid_mask(arr) & ~handled
    if not todo.any():
        return values, None
    rows = np.flatnonzero(todo)
    sub, bad_sub = decode_rows(codec, arr.take(pa.array(rows)))
    # Splice by a take over [values | sub]: works for every type, nested ones too
    # (replace_with_mask has no kernels for maps and lists).
    index = np.arange(len(arr), dtype=np.int64)
    index[rows] = len(arr) + np.arange(len(rows), dtype=np.int64)
    values = pa.concat_arrays([values, sub.cast(values.type)]).take(pa.array(index))
    if bad_sub is None:
        return values, None
    bad = np.zeros(len(arr), dtype=bool)
    bad[rows[bad_sub]] = True
    return values, bad
