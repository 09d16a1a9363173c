"""HBase ``Bytes`` encodings and their order-preserving variants.

Plain (``org.apache.hadoop.hbase.util.Bytes``)::

    tinyint 1 byte, smallint 2, int 4, bigint 8     big-endian two's complement
    float 4, double 8                              big-endian IEEE 754
    boolean 1 byte                                 0x00 false, 0xFF true (any non-zero reads true)
    string                                         UTF-8
    binary                                         as is
    decimal                                        4-byte big-endian scale, then the unscaled
                                                   value big-endian two's complement, minimal length
    date                                           8-byte long: milliseconds since the epoch (midnight UTC)
    timestamp                                      8-byte long: milliseconds since the epoch
                                                   (microseconds with timestamp unit "us")

Ordered (byte order equals value order, negatives included, like HBase
``OrderedBytes`` / Phoenix fixed-width types): integers, dates and
timestamps flip the sign bit; floats flip the sign bit of positives and
every bit of negatives; decimals are the unscaled value at the column's
scale as a 16-byte integer with the sign bit flipped; strings, binaries and
booleans are already ordered.

Fixed-width values decode in bulk: the value buffer is viewed as an
``(n, width)`` byte matrix and reinterpreted as big-endian NumPy numbers.
"""

from __future__ import annotations

from abc import abstractmethod

import datetime as _dt
import struct
from decimal import ROUND_HALF_UP, Context, Decimal
from typing import Any

import numpy as np
import pyarrow as pa

from serde.codecs.binary_arrays import (as_binary, binary_from_parts, binary_layout, binary_from_rows, dense_fixed_rows,
                                        fixed_width_rows, from_numpy, utf8_view, valid_mask)
from serde.codecs.epoch import EPOCH, EPOCH_DATE, MAX_DAYS, MAX_US, MIN_DAYS, MIN_US, MS_PER_DAY, date_to_days, datetime_to_us
from serde.codecs.base import Codec, decode_rows, merge_fallback
from serde.errors import MappingError
from serde.type_registry import type_spec
from serde.types import DataType
from storage import native as _native

__all__ = ["binary_codec", "DECIMAL_CONTEXT", "decimal_at_scale"]

_USE_MODULE = object()

DECIMAL_CONTEXT = Context(prec=80)
"""Wide enough for any 38-digit value at any scale, so quantize never traps."""



def decimal_at_scale(value: Any, precision: int, scale: int) -> Decimal:
    """``value`` rounded half-up to ``scale`` digits; raises if it needs more than ``precision``."""
    if not isinstance(value, Decimal):
        if isinstance(value, bool) or not isinstance(value, (int, float, str)):
            raise TypeError(f"expected a decimal, got {type(value).__name__}")
        value = Decimal(str(value)) if isinstance(value, float) else Decimal(value)
    if not value.is_finite():
        raise ValueError(f"{value} is not a finite decimal")
    result = value.quantize(Decimal(1).scaleb(-scale), rounding=ROUND_HALF_UP, context=DECIMAL_CONTEXT)
    if result.is_zero():
        return result.copy_abs()  # no negative zero: Arrow decimals cannot hold one
    if len(result.as_tuple().digits) > precision:
        raise ValueError(f"{value} does not fit decimal({precision},{scale})")
    return result


def _with_bad(decoded: tuple[pa.Array, np.ndarray | None], wrong: np.ndarray) -> tuple[pa.Array, np.ndarray | None]:
    """A fixed-width kernel's ``(values, bad)`` with the rows of the wrong length marked bad too."""
    values, bad = decoded
    if not wrong.any():
        return values, bad
    return values, wrong if bad is None else bad | wrong


class StringCodec(Codec):
    """UTF-8 text, validated."""

    def decode(self, raw: bytes) -> str:
        return raw.decode("utf-8")

    def encode(self, value: Any) -> bytes:
        if not isinstance(value, str):
            raise TypeError(f"expected str, got {type(value).__name__}")
        return value.encode("utf-8")

    def decode_array(self, arr: pa.Array) -> tuple[pa.Array, np.ndarray | None]:
        arr = as_binary(arr)
        ascii_only = utf8_view(arr)
        if ascii_only is not None:
            return ascii_only, None
        try:
            # The cast validates UTF-8 for the whole column in one pass.
            return arr.cast(pa.string()), None
        except pa.ArrowInvalid:
            return decode_rows(self, arr)

    def encode_array(self, arr: pa.Array) -> pa.Array:
        return arr.cast(pa.string()).view(pa.binary())


class BinaryCodec(Codec):
    """Bytes as they are."""

    def decode(self, raw: bytes) -> bytes:
        return bytes(raw)

    def encode(self, value: Any) -> bytes:
        if not isinstance(value, (bytes, bytearray, memoryview)):
            raise TypeError(f"expected bytes, got {type(value).__name__}")
        return bytes(value)

    def decode_array(self, arr: pa.Array) -> tuple[pa.Array, np.ndarray | None]:
        return as_binary(arr), None

    def encode_array(self, arr: pa.Array) -> pa.Array:
        return as_binary(arr)


class _FixedCodec(Codec):
    """A fixed-width binary value: a kernel over the ``(n, width)`` byte matrix."""

    width: int

    def __init__(self, data_type: DataType):
        super().__init__(data_type)
        self.fixed_width = self.width

    @abstractmethod
    def _from_matrix(self, matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        """Values in the Arrow storage dtype, and a mask of rows in range (None = all)."""

    @abstractmethod
    def _to_matrix(self, values: np.ndarray) -> np.ndarray:
        ...

    @abstractmethod
    def _storage(self, arr: pa.Array) -> np.ndarray:
        """The typed column as NumPy in the storage dtype, nulls as zero."""

    def decode_matrix(self, matrix: np.ndarray) -> pa.Array | None:
        """The values of an ``(n, width)`` uint8 matrix of rows all present (it may be a strided
        view, e.g. a fixed-width key part's columns of a key chunk's rows), or None when a value
        is out of range: :meth:`decode_array` of the same bytes then says which."""
        values, in_range = self._from_matrix(matrix)
        if in_range is not None and not in_range.all():
            return None
        return pa.array(values, type=self.arrow_type)

    def decode_array(self, arr: pa.Array) -> tuple[pa.Array, np.ndarray | None]:
        arr = as_binary(arr)
        dense = dense_fixed_rows(arr, self.width)
        if dense is not None:
            # every row present and of the width: no masks unless a value is out of range
            values, in_range = self._from_matrix(dense)
            if in_range is None or in_range.all():
                return pa.array(values, type=self.arrow_type), None
        matrix, good, wrong = fixed_width_rows(arr, self.width)
        values, in_range = self._from_matrix(matrix)
        ok = good if in_range is None else good & in_range
        out = from_numpy(values, self.arrow_type, ok)
        # Out-of-range values are left to the scalar decoder, which rejects them with its own
        # message; a wrong length is bad by the length check alone, so a column of cells in
        # another encoding (text digits under a binary INT) fails without a loop over its rows.
        return _with_bad(merge_fallback(self, arr, out, ok | ~valid_mask(arr) | wrong), wrong)

    def encode_array(self, arr: pa.Array) -> pa.Array:
        valid = valid_mask(arr)
        return binary_from_rows(self._to_matrix(self._storage(arr)), valid)


def _int_storage(arr: pa.Array, dtype: str) -> np.ndarray:
    return arr.fill_null(0).to_numpy(zero_copy_only=False).astype(dtype, copy=False)


class IntCodec(_FixedCodec):
    """Big-endian two's complement integers; ``ordered`` flips the sign bit."""

    def __init__(self, data_type: DataType, ordered: bool = False):
        self.low, self.high = data_type.spec.value_range
        self.bits = (self.high - self.low).bit_length()
        self.width = self.bits // 8
        super().__init__(data_type)
        self.ordered = ordered
        self.sign = 1 << (self.bits - 1)
        fmt = {1: "b", 2: "h", 4: "i", 8: "q"}[self.width]
        self._packer = struct.Struct(">" + (fmt.upper() if ordered else fmt))

    def decode(self, raw: bytes) -> int:
        value = self._packer.unpack(raw)[0]
        if self.ordered:
            value ^= self.sign
            if value >= self.sign:
                value -= 1 << self.bits
        return value

    def encode(self, value: Any) -> bytes:
        if not isinstance(value, (int, np.integer)):
            raise TypeError(f"expected int, got {type(value).__name__}")
        value = int(value)
        if not self.low <= value <= self.high:
            raise ValueError(f"{value} is out of range for {self.data_type}")
        if self.ordered:
            value = (value + (1 << self.bits)) % (1 << self.bits) ^ self.sign
        return self._packer.pack(value)

    def _from_matrix(self, matrix):
        n, w = len(matrix), self.width
        if self.ordered:
            unsigned = matrix.view(f">u{w}").reshape(n).astype(f"u{w}") ^ np.array(self.sign, dtype=f"u{w}")
            return unsigned.view(f"i{w}"), None
        return matrix.view(f">i{w}").reshape(n).astype(f"i{w}"), None

    def _to_matrix(self, values):
        n, w = len(values), self.width
        if self.ordered:
            unsigned = values.view(f"u{w}") ^ np.array(self.sign, dtype=f"u{w}")
            return unsigned.astype(f">u{w}").view(np.uint8).reshape(n, w)
        return values.astype(f">i{w}").view(np.uint8).reshape(n, w)

    def _storage(self, arr):
        return _int_storage(arr, f"i{self.width}")


class FloatCodec(_FixedCodec):
    """Big-endian IEEE 754; ``ordered`` flips the sign bit of positives, all bits of negatives."""

    def __init__(self, data_type: DataType, ordered: bool = False):
        self.width = 4 if data_type.name == "float" else 8
        super().__init__(data_type)
        self.ordered = ordered
        letter = "f" if self.width == 4 else "d"
        bits = "I" if self.width == 4 else "Q"
        self._value = struct.Struct(">" + letter)
        self._bits = struct.Struct(">" + bits)
        self.sign = 1 << (self.width * 8 - 1)
        self.mask = (1 << (self.width * 8)) - 1

    def decode(self, raw: bytes) -> float:
        if not self.ordered:
            return self._value.unpack(raw)[0]
        bits = self._bits.unpack(raw)[0]
        bits = bits ^ self.sign if bits & self.sign else ~bits & self.mask
        return self._value.unpack(self._bits.pack(bits))[0]

    def encode(self, value: Any) -> bytes:
        if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)):
            raise TypeError(f"expected float, got {type(value).__name__}")
        try:
            raw = self._value.pack(value)
        except OverflowError:  # beyond float32 range: IEEE rounding gives infinity
            raw = self._value.pack(float("inf") if value > 0 else float("-inf"))
        if not self.ordered:
            return raw
        bits = self._bits.unpack(raw)[0]
        bits = ~bits & self.mask if bits & self.sign else bits | self.sign
        return self._bits.pack(bits)

    def _from_matrix(self, matrix):
        n, w = len(matrix), self.width
        if not self.ordered:
            return matrix.view(f">f{w}").reshape(n).astype(f"f{w}"), None
        bits = matrix.view(f">u{w}").reshape(n).astype(f"u{w}")
        sign = np.array(self.sign, dtype=f"u{w}")
        positive = (bits & sign) != 0
        bits = np.where(positive, bits ^ sign, ~bits)
        return bits.view(f"f{w}"), None

    def _to_matrix(self, values):
        n, w = len(values), self.width
        if not self.ordered:
            return values.astype(f">f{w}").view(np.uint8).reshape(n, w)
        bits = values.view(f"u{w}")
        sign = np.array(self.sign, dtype=f"u{w}")
        bits = np.where((bits & sign) != 0, ~bits, bits | sign)
        return bits.astype(f">u{w}").view(np.uint8).reshape(n, w)

    def _storage(self, arr):
        return arr.fill_null(0).to_numpy(zero_copy_only=False).astype(f"f{self.width}", copy=False)


class BoolCodec(_FixedCodec):
    """One byte: 0x00 false, anything else true; writes 0xFF for true as HBase does."""

    width = 1

    def decode(self, raw: bytes) -> bool:
        if len(raw) != 1:
            raise ValueError(f"a boolean is 1 byte, got {len(raw)}")
        return raw[0] != 0

    def encode(self, value: Any) -> bytes:
        if not isinstance(value, (bool, np.bool_)):
            raise TypeError(f"expected bool, got {type(value).__name__}")
        return b"\xff" if value else b"\x00"

    def _from_matrix(self, matrix):
        return matrix[:, 0] != 0, None

    def _to_matrix(self, values):
        return np.where(values, 0xFF, 0x00).astype(np.uint8).reshape(-1, 1)

    def _storage(self, arr):
        return arr.fill_null(False).to_numpy(zero_copy_only=False).astype(bool)


class _LongTimeCodec(_FixedCodec):
    """A date or timestamp stored as an 8-byte long (flipped sign bit when ordered)."""

    width = 8

    def __init__(self, data_type: DataType, ordered: bool = False):
        super().__init__(data_type)
        self.ordered = ordered
        self._long = IntCodec(DataType("bigint"), ordered)

    def _longs(self, matrix: np.ndarray) -> np.ndarray:
        return self._long._from_matrix(matrix)[0]

    def _long_matrix(self, longs: np.ndarray) -> np.ndarray:
        return self._long._to_matrix(longs.astype(np.int64))


class DateCodec(_LongTimeCodec):
    """A date as the long milliseconds of its midnight UTC (hbase-spark's encoding)."""

    def decode(self, raw: bytes) -> _dt.date:
        return EPOCH_DATE + _dt.timedelta(days=self._long.decode(raw) // MS_PER_DAY)

    def encode(self, value: Any) -> bytes:
        if not isinstance(value, _dt.date):
            raise TypeError(f"expected date, got {type(value).__name__}")
        return self._long.encode(date_to_days(value) * MS_PER_DAY)

    def _from_matrix(self, matrix):
        days = np.floor_divide(self._longs(matrix), MS_PER_DAY)
        in_range = (days >= MIN_DAYS) & (days <= MAX_DAYS)
        if in_range.all():  # the usual case: no zeroing pass
            return days.astype(np.int32), None
        return np.where(in_range, days, 0).astype(np.int32), in_range

    def _to_matrix(self, values):
        return self._long_matrix(values.astype(np.int64) * MS_PER_DAY)

    def _storage(self, arr):
        return arr.cast(pa.int32()).fill_null(0).to_numpy(zero_copy_only=False)


class TimestampCodec(_LongTimeCodec):
    """A timestamp as a long count of milliseconds (or microseconds) since the epoch."""

    def __init__(self, data_type: DataType, ordered: bool = False, unit: str = "ms"):
        super().__init__(data_type, ordered)
        if unit not in ("ms", "us"):
            raise MappingError("timestamp unit must be ms or us", unit)
        self.per_unit = 1000 if unit == "ms" else 1
        self.low = -(-MIN_US // self.per_unit)
        self.high = MAX_US // self.per_unit

    def decode(self, raw: bytes) -> _dt.datetime:
        return EPOCH + _dt.timedelta(microseconds=self._long.decode(raw) * self.per_unit)

    def encode(self, value: Any) -> bytes:
        if not isinstance(value, _dt.datetime):
            raise TypeError(f"expected datetime, got {type(value).__name__}")
        return self._long.encode(datetime_to_us(value) // self.per_unit)

    def _from_matrix(self, matrix):
        longs = self._longs(matrix)
        in_range = (longs >= self.low) & (longs <= self.high)
        if in_range.all():  # the usual case: no zeroing pass
            return longs * self.per_unit if self.per_unit != 1 else longs, None
        return np.where(in_range, longs, 0) * self.per_unit, in_range

    def _to_matrix(self, values):
        return self._long_matrix(np.floor_divide(values, self.per_unit))

    def _storage(self, arr):
        return arr.cast(pa.int64()).fill_null(0).to_numpy(zero_copy_only=False)


_PAD8 = np.zeros(8, np.uint8)


def _byte_windows(data: np.ndarray, dtype: str) -> np.ndarray:
    """A view of ``data`` whose element ``i`` is the big-endian integer in the bytes starting at
    ``i`` (overlapping windows: one unaligned load per element, no index matrix)."""
    width = np.dtype(dtype).itemsize
    return np.ndarray(shape=(max(len(data) - width + 1, 0),), dtype=dtype, buffer=data, strides=(1,))


def _short_unscaled(data: np.ndarray, ends: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """The signed big-endian integers of ``sizes[i]`` (1..8) bytes ending at ``data[ends[i]]``, as int64.

    Each is read as the 8 bytes ending where it ends (``data`` has 8 bytes before its first value:
    see the caller), then shifted so its own top byte is the top byte: the arithmetic shift
    back sign-extends it from its own width.
    """
    window = _byte_windows(data, ">i8")[ends - 8].astype(np.int64)
    shift = (64 - 8 * sizes).astype(np.int64)
    return (window << shift) >> shift


class DecimalCodec(Codec):
    """HBase ``Bytes.toBytes(BigDecimal)``: 4-byte scale + minimal two's complement unscaled value."""

    def __init__(self, data_type: DataType):
        super().__init__(data_type)
        self.precision, self.scale = data_type.precision, data_type.scale
        self.wide = pa.decimal128(38, self.scale)

    def decode(self, raw: bytes) -> Decimal:
        if len(raw) < 5:
            raise ValueError(f"a decimal needs at least 5 bytes, got {len(raw)}")
        scale = int.from_bytes(raw[:4], "big", signed=True)
        unscaled = int.from_bytes(raw[4:], "big", signed=True)
        value = Decimal(unscaled).scaleb(-scale, context=DECIMAL_CONTEXT)
        return decimal_at_scale(value, self.precision, self.scale)

    def encode(self, value: Any) -> bytes:
        value = decimal_at_scale(value, self.precision, self.scale)
        unscaled = int(value.scaleb(self.scale, context=DECIMAL_CONTEXT))
        length = (unscaled if unscaled >= 0 else ~unscaled).bit_length() // 8 + 1
        return self.scale.to_bytes(4, "big", signed=True) + unscaled.to_bytes(length, "big", signed=True)

    def decode_array(self, arr: pa.Array) -> tuple[pa.Array, np.ndarray | None]:
        arr = as_binary(arr)
        n = len(arr)
        if self.precision <= 18 and n:
            values = self._short_column(arr)
            if values is not None:
                return values, None
        offsets, data, valid = binary_layout(arr)
        lengths = np.diff(offsets)
        # 8 zero bytes ahead of the values, so every value has an 8-byte window ending at its end
        data = np.concatenate([np.zeros(8, np.uint8), data])
        starts = offsets[:-1] + 8
        # Fast rows: stored at the column's own scale with at most 16 unscaled bytes.  The
        # decimal128 result is built as two little-endian int64 words per row (low, high).
        words = np.zeros((n, 2), dtype=np.int64)
        handled = ~valid
        rows = np.flatnonzero(valid & (lengths >= 5) & (lengths <= 20))
        if len(rows):
            s = starts[rows]
            at_scale = _byte_windows(data, ">i4")[s] == self.scale
            rows, s = rows[at_scale], s[at_scale] + 4
            size = lengths[rows] - 4
            short = size <= 8
            if short.any():
                # precision <= 18 always fits an int64: one unaligned load per value
                low = _short_unscaled(data, s[short] + size[short], size[short])
                words[rows[short], 0] = low
                words[rows[short], 1] = low >> 63
            if not short.all():
                long_rows, ls, lsize = rows[~short], s[~short], size[~short]
                col = np.arange(16)[None, :]
                pad = (16 - lsize)[:, None]
                src = np.clip(ls[:, None] + col - pad, 0, len(data) - 1)
                sign = np.where(data[ls] & 0x80, 0xFF, 0x00).astype(np.uint8)
                big_endian = np.where(col >= pad, data[src], sign[:, None]).astype(np.uint8)
                words[long_rows] = np.ascontiguousarray(big_endian[:, ::-1]).view("<i8")
            handled = handled.copy()
            handled[rows] = True
        ok = handled & valid
        bitmap = pa.py_buffer(np.packbits(ok, bitorder="little"))
        wide = pa.Array.from_buffers(self.wide, n, [bitmap, pa.py_buffer(words.reshape(-1))])
        try:
            values = wide.cast(self.arrow_type)  # checks the precision
        except pa.ArrowInvalid:
            values = pa.nulls(n, self.arrow_type)
            handled = ~valid
        return merge_fallback(self, arr, values, handled)

    def _short_column(self, arr: pa.Array, native=_USE_MODULE) -> pa.Array | None:
        """The column (non-empty, ``pa.binary()``) as ``decimal128(precision, scale)`` when every
        value is stored at the column's scale in at most 8 unscaled bytes and fits the precision;
        None otherwise, for the general path.  The compiled ``decimal_words``
        (``storage/_native/decode.c``) does it in one pass over the values, 4-5x less CPU than
        :meth:`_short_column_py`, the reference and fallback (docs/decisions/2026-12-05-worker-decode.md).
        ``native``: the compiled module (None: the reference; by default
        :data:`storage.native.NATIVE`, looked up at each call)."""
        if native is _USE_MODULE:
            native = _native.NATIVE
        if native is None:
            return self._short_column_py(arr)
        n = len(arr)
        buffers = arr.buffers()
        words = np.empty(2 * n, dtype=np.int64)
        if not native.decimal_words(buffers[1], buffers[2], buffers[0], arr.offset, n, self.scale, self.precision,
                                    words):
            return None
        nulls = arr.null_count
        bitmap = None
        if nulls:
            # the validity bitmap as it is when the array starts at a byte's first bit; else repacked
            bitmap = buffers[0] if arr.offset == 0 else pa.py_buffer(np.packbits(valid_mask(arr), bitorder="little"))
        return pa.Array.from_buffers(self.arrow_type, n, [bitmap, pa.py_buffer(words)], nulls)

    def _short_column_py(self, arr: pa.Array) -> pa.Array | None:
        """The reference of :meth:`_short_column`, whole-column NumPy steps: the column built in one
        pass when every value is stored at the column's scale in at most 8 unscaled bytes and
        fits the precision (what a write of the column produces); None otherwise, for the
        general path.

        Precision <= 18 only: an unscaled value then fits an int64, whose two words (the value,
        its sign) are the decimal128 itself, so no cast checks the precision afterwards.  A
        column whose values all have one width (a small dictionary's, such as a discount's)
        is read through strided views, with no gather.
        """
        n = len(arr)
        buffers = arr.buffers()
        offsets = np.frombuffer(buffers[1], dtype=np.int32, count=n + 1, offset=arr.offset * 4)
        data = np.frombuffer(buffers[2], dtype=np.uint8) if buffers[2] is not None else _PAD8[:0]
        every = arr.null_count == 0
        valid = None if every else valid_mask(arr)
        # 8 zero bytes either side: every value has an 8-byte window ending at its end, and
        # every row (a null one at the very end too) a 4-byte window at its start
        padded = np.empty(len(data) + 16, np.uint8)
        padded[:8] = 0
        padded[-8:] = 0
        padded[8:-8] = data
        first, span = int(offsets[0]), int(offsets[-1]) - int(offsets[0])
        width = span // n
        lengths = offsets[1:] - offsets[:-1]
        if every and 5 <= width <= 12 and width * n == span and bool((lengths == width).all()):
            scale = np.ndarray((n,), ">i4", padded, first + 8, (width,))
            if not (scale == self.scale).all():
                return None  # a value at another scale: the general path decides
            low = np.ndarray((n,), ">i8", padded, first + width, (width,)).astype(np.int64)
            shift = 64 - 8 * (width - 4)
            low = (low << shift) >> shift
        else:
            size = lengths - 4
            scale = _byte_windows(padded, ">i4")[offsets[:-1] + 8]
            fast = (size >= 1) & (size <= 8) & (scale == self.scale)
            if not (fast if every else fast | ~valid).all():
                return None  # a value at another scale, longer or malformed: the general path decides
            shift = (64 - 8 * np.clip(size, 1, 8)).astype(np.int64)
            low = _byte_windows(padded, ">i8")[offsets[1:]].astype(np.int64)
            low = (low << shift) >> shift
        bound = 10 ** self.precision
        inside = (low > -bound) & (low < bound)
        if not (inside if every else inside | ~valid).all():
            return None  # out of the precision: the general path makes those rows bad
        bitmap = None
        if not every:
            low = np.where(valid, low, 0)
            bitmap = pa.py_buffer(np.packbits(valid, bitorder="little"))
        words = np.empty((n, 2), dtype=np.int64)
        words[:, 0] = low
        words[:, 1] = low >> 63
        return pa.Array.from_buffers(self.arrow_type, n, [bitmap, pa.py_buffer(words.reshape(-1))],
                                     0 if every else arr.null_count)

    def encode_array(self, arr: pa.Array) -> pa.Array:
        n = len(arr)
        valid = valid_mask(arr)
        wide = arr.cast(self.wide)
        raw = np.frombuffer(wide.buffers()[1], dtype=np.uint8, count=(wide.offset + n) * 16)[wide.offset * 16 :]
        big_endian = raw.reshape(n, 16)[:, ::-1]
        sign = np.where(big_endian[:, 0] & 0x80, 0xFF, 0x00).astype(np.uint8)
        # A leading byte is redundant when it only repeats the sign and the next
        # byte's top bit already carries it (BigInteger.toByteArray's minimal form).
        redundant = (big_endian[:, :-1] == sign[:, None]) & ((big_endian[:, 1:] & 0x80) == (sign[:, None] & 0x80))
        leading = np.cumprod(redundant, axis=1).sum(axis=1)
        keep = np.arange(16)[None, :] >= leading[:, None]
        scale = np.frombuffer(self.scale.to_bytes(4, "big", signed=True), dtype=np.uint8)
        matrix = np.concatenate([np.broadcast_to(scale, (n, 4)), big_endian], axis=1)
        keep = np.concatenate([np.ones((n, 4), dtype=bool), keep], axis=1)
        return binary_from_parts(matrix, keep, valid)


class OrderedDecimalCodec(Codec):
    """A decimal as its unscaled value at the column scale: 16 bytes, sign bit flipped."""

    width = 16

    def __init__(self, data_type: DataType):
        super().__init__(data_type)
        self.fixed_width = self.width  # its own array kernels, not _FixedCodec's hooks
        self.precision, self.scale = data_type.precision, data_type.scale
        self.wide = pa.decimal128(38, self.scale)

    def decode(self, raw: bytes) -> Decimal:
        if len(raw) != 16:
            raise ValueError(f"an ordered decimal is 16 bytes, got {len(raw)}")
        unscaled = int.from_bytes(raw, "big") ^ (1 << 127)
        if unscaled >= 1 << 127:
            unscaled -= 1 << 128
        value = Decimal(unscaled).scaleb(-self.scale, context=DECIMAL_CONTEXT)
        return decimal_at_scale(value, self.precision, self.scale)

    def encode(self, value: Any) -> bytes:
        value = decimal_at_scale(value, self.precision, self.scale)
        unscaled = int(value.scaleb(self.scale, context=DECIMAL_CONTEXT))
        return ((unscaled % (1 << 128)) ^ (1 << 127)).to_bytes(16, "big")

    def decode_array(self, arr: pa.Array) -> tuple[pa.Array, np.ndarray | None]:
        arr = as_binary(arr)
        n = len(arr)
        matrix, good, wrong = fixed_width_rows(arr, 16)
        flipped = matrix.copy()
        flipped[:, 0] ^= 0x80
        le = np.ascontiguousarray(flipped[:, ::-1])
        bitmap = pa.py_buffer(np.packbits(good, bitorder="little"))
        wide = pa.Array.from_buffers(self.wide, n, [bitmap, pa.py_buffer(le.reshape(-1))])
        handled = good | ~valid_mask(arr)
        try:
            values = wide.cast(self.arrow_type)
        except pa.ArrowInvalid:
            values = pa.nulls(n, self.arrow_type)
            handled = ~valid_mask(arr)
        return _with_bad(merge_fallback(self, arr, values, handled | wrong), wrong)

    def encode_array(self, arr: pa.Array) -> pa.Array:
        n = len(arr)
        wide = arr.cast(self.wide)
        raw = np.frombuffer(wide.buffers()[1], dtype=np.uint8, count=(wide.offset + n) * 16)[wide.offset * 16 :]
        big_endian = raw.reshape(n, 16)[:, ::-1].copy()
        big_endian[:, 0] ^= 0x80
        return binary_from_rows(big_endian, valid_mask(arr))


def binary_codec(data_type: DataType, ordered: bool = False, timestamp_unit: str = "ms") -> Codec:
    """The binary codec of a scalar type (from the type registry); ``ordered`` selects the order-preserving form."""
    spec = type_spec(data_type.name) if data_type.is_primitive else None
    if spec is None or spec.binary is None:
        raise MappingError("the binary encoding has no form for this type (use string, avro or json storage)", str(data_type))
    codec = spec.binary(data_type, ordered, timestamp_unit)
    codec.byte_order = spec.order_of("ordered" if ordered else "binary")
    return codec
