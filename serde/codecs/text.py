"""Text (UTF-8) encodings of primitive values, as Hive's LazySimpleSerDe writes them.

``TextOptions`` carries the LazySimpleSerDe-style properties: the null
sequence (``serialization.null.format``, default ``\\N``), separators for
collections (``collection.delim``, ``mapkey.delim``), the date format and
the extra timestamp formats.

Accepted text, identically on both paths:

=========  ==========================================================
int types  ``[+-]?[0-9]+`` within the type's range
float      decimal or exponent notation, ``NaN``, ``Infinity``, ``inf``,
           ``nan`` (signed); float values are rounded from double
decimal    ``[+-]?digits[.digits]``, rounded half-up to the scale
boolean    ``true`` / ``false`` in any case
string     any UTF-8; binary: the bytes as they are
=========  ==========================================================

The batch kernels: a regex gate (Arrow's RE2) picks the rows that are
well-formed, ``pc.cast`` parses them, anything else falls back to the scalar
parser (see :mod:`serde.codecs.base`).
"""

from __future__ import annotations

from abc import abstractmethod

import re
import struct
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from serde.codecs.binary_arrays import as_binary, valid_mask
from serde.codecs.base import Codec, decode_rows, merge_fallback
from serde.codecs.hbase_bytes import decimal_at_scale
from serde.errors import MappingError
from serde.types import DataType

__all__ = [
    "TextOptions",
    "TextCodec",
    "StringText",
    "BinaryText",
    "BoolText",
    "IntText",
    "FloatText",
    "DecimalText",
]


def _unescape(value: str) -> str:
    """Separators may be given as a character, ``\\u0002`` style escapes, or a decimal code (Hive allows "2")."""
    if value.isdigit():
        return chr(int(value))
    if value.startswith("\\u") and len(value) == 6:
        return chr(int(value[2:], 16))
    return value


@dataclass(frozen=True)
class TextOptions:
    """Properties of the text encodings (LazySimpleSerDe names in :meth:`from_properties`)."""

    null_format: str = "\\N"
    collection_delim: str = "\x02"
    mapkey_delim: str = "\x03"
    date_format: str = "%Y-%m-%d"
    timestamp_formats: tuple[str, ...] = ()
    naive_dates: bool = False

    @classmethod
    def from_properties(cls, properties: Mapping[str, str]) -> "TextOptions":
        """Read ``serialization.null.format``, ``collection.delim`` (or Hive's
        ``colelction.delim`` spelling), ``mapkey.delim``, ``date.format``,
        ``timestamp.formats`` (comma-separated) and ``serde.row.dates``
        (``naive`` selects the per-row ``datetime.strptime`` path)."""
        formats = properties.get("timestamp.formats", "")
        naive = properties.get("serde.row.dates", "fast")
        if naive not in ("fast", "naive"):
            raise MappingError("serde.row.dates must be fast or naive", naive)
        options = cls(
            null_format=properties.get("serialization.null.format", "\\N"),
            collection_delim=_unescape(
                properties.get("collection.delim", properties.get("colelction.delim", "\x02"))
            ),
            mapkey_delim=_unescape(properties.get("mapkey.delim", "\x03")),
            date_format=properties.get("date.format", "%Y-%m-%d"),
            timestamp_formats=tuple(f.strip() for f in formats.split(",") if f.strip()),
            naive_dates=naive == "naive",
        )
        if not options.collection_delim or not options.mapkey_delim:
            raise MappingError("collection and map-key delimiters must not be empty", "")
        if options.collection_delim == options.mapkey_delim:
            raise MappingError("collection.delim and mapkey.delim must differ", options.mapkey_delim)
        return options


class TextCodec(Codec):
    """Base of the text codecs: null sequence, UTF-8, scalar ``parse``/``format``.

    Subclasses give ``parse(text)`` and ``format(value)`` and, for the batch
    path, ``parse_array(strings) -> (values, handled)``.
    """

    def __init__(self, data_type: DataType, options: TextOptions):
        super().__init__(data_type)
        self.options = options
        self.null_text = options.null_format
        self.null = options.null_format.encode("utf-8")

    @abstractmethod
    def parse(self, text: str) -> Any:
        """Parse one non-null text value; raise on bad text."""

    @abstractmethod
    def format(self, value: Any) -> str:
        """Format one non-null value."""

    def parse_array(self, strings: pa.Array) -> tuple[pa.Array, np.ndarray]:
        """Kernel: values and the mask of rows it parsed; default parses nothing."""
        return pa.nulls(len(strings), self.arrow_type), np.zeros(len(strings), dtype=bool)

    def format_array(self, arr: pa.Array) -> pa.Array:
        """Kernel: a string array of formatted values; default loops over :meth:`format`."""
        fmt = self.format
        return pa.array([None if v is None else fmt(v) for v in arr.to_pylist()], type=pa.string())

    # Whether a whole cell equal to the null sequence reads as null.  Collections
    # say no: their text "\N" is a one-item array holding a null.
    reads_null_sequence = True

    def decode(self, raw: bytes) -> Any:
        if raw == self.null and self.reads_null_sequence:
            return None
        return self.parse(raw.decode("utf-8"))

    def encode(self, value: Any) -> bytes:
        return self.format(value).encode("utf-8")

    def decode_array(self, arr: pa.Array) -> tuple[pa.Array, np.ndarray | None]:
        arr = as_binary(arr)
        try:
            strings = arr.cast(pa.string())
        except pa.ArrowInvalid:  # invalid UTF-8 somewhere: let the scalar path find it
            return decode_rows(self, arr)
        values, handled = self.parse_array(strings)
        if not self.reads_null_sequence:
            return merge_fallback(self, arr, values, handled | ~valid_mask(arr))
        is_null = pc.equal(strings, self.null_text).fill_null(False)
        if is_null.true_count:
            values = pc.if_else(is_null, pa.nulls(len(arr), self.arrow_type), values)
            handled = handled | is_null.to_numpy(zero_copy_only=False)
        return merge_fallback(self, arr, values, handled | ~valid_mask(arr))

    def encode_array(self, arr: pa.Array) -> pa.Array:
        return self.format_array(arr).view(pa.binary())


def _matches(strings: pa.Array, pattern: str) -> np.ndarray:
    return pc.match_substring_regex(strings, pattern).fill_null(False).to_numpy(zero_copy_only=False)


class StringText(TextCodec):
    """Text as it is (UTF-8 validated)."""

    def parse(self, text: str) -> str:
        return text

    def format(self, value: Any) -> str:
        if not isinstance(value, str):
            raise TypeError(f"expected str, got {type(value).__name__}")
        return value

    def parse_array(self, strings):
        return strings, np.ones(len(strings), dtype=bool)

    def format_array(self, arr):
        return arr.cast(pa.string())


class BinaryText(TextCodec):
    """Bytes stored as they are (no UTF-8 check); the null sequence still reads as null.

    ``decode``/``encode`` work on the bytes directly; ``parse``/``format``
    give the text form, non-UTF-8 bytes kept as surrogate escapes.
    """

    def parse(self, text: str) -> bytes:
        return text.encode("utf-8", "surrogateescape")

    def format(self, value: Any) -> str:
        return bytes(value).decode("utf-8", "surrogateescape")

    def decode(self, raw: bytes) -> bytes | None:
        return None if raw == self.null else bytes(raw)

    def encode(self, value: Any) -> bytes:
        if not isinstance(value, (bytes, bytearray, memoryview)):
            raise TypeError(f"expected bytes, got {type(value).__name__}")
        return bytes(value)

    def decode_array(self, arr):
        arr = as_binary(arr)
        is_null = pc.equal(arr, pa.scalar(self.null, pa.binary())).fill_null(False)
        if is_null.true_count:
            arr = pc.if_else(is_null, pa.nulls(len(arr), pa.binary()), arr)
        return arr, None

    def encode_array(self, arr):
        return as_binary(arr)


class BoolText(TextCodec):
    """``true`` / ``false`` in any case (Hive's LazyBoolean)."""

    def parse(self, text: str) -> bool:
        low = text.lower()
        if low == "true":
            return True
        if low == "false":
            return False
        raise ValueError("expected true or false")

    def format(self, value: Any) -> str:
        if not isinstance(value, (bool, np.bool_)):
            raise TypeError(f"expected bool, got {type(value).__name__}")
        return "true" if value else "false"

    def parse_array(self, strings):
        low = pc.ascii_lower(strings)
        true = pc.equal(low, "true")
        false = pc.equal(low, "false")
        handled = pc.or_(true, false).fill_null(False).to_numpy(zero_copy_only=False)
        return true, handled

    def format_array(self, arr):
        return pc.if_else(arr, "true", "false")


_INT_RE = re.compile(r"[+-]?[0-9]+")
# At most 18 digits always fits int64, so the cast cannot overflow; longer
# numbers (rare) go through the scalar parser.
_INT_GATE = r"^[+-]?[0-9]{1,18}$"


class IntText(TextCodec):
    """Decimal integers within the type's range."""

    def __init__(self, data_type: DataType, options: TextOptions):
        super().__init__(data_type, options)
        self.low, self.high = data_type.spec.value_range

    def parse(self, text: str) -> int:
        if not _INT_RE.fullmatch(text):
            raise ValueError("not an integer")
        value = int(text)
        if not self.low <= value <= self.high:
            raise ValueError(f"{value} is out of range for {self.data_type}")
        return value

    def format(self, value: Any) -> str:
        if not isinstance(value, (int, np.integer)):
            raise TypeError(f"expected int, got {type(value).__name__}")
        if not self.low <= value <= self.high:
            raise ValueError(f"{value} is out of range for {self.data_type}")
        return str(int(value))

    def parse_array(self, strings):
        gate = pc.match_substring_regex(strings, _INT_GATE).fill_null(False)
        digits = pc.replace_substring_regex(pc.if_else(gate, strings, None), pattern=r"^\+", replacement="")
        wide = pc.cast(digits, pa.int64())
        in_range = pc.and_(pc.greater_equal(wide, self.low), pc.less_equal(wide, self.high)).fill_null(False)
        handled = in_range.to_numpy(zero_copy_only=False)
        return pc.cast(pc.if_else(in_range, wide, None), self.arrow_type), handled

    def format_array(self, arr):
        return pc.cast(arr, pa.string())


_FLOAT_BODY = r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|[+-]?(?:NaN|nan|Infinity|inf)"
_FLOAT_RE = re.compile(_FLOAT_BODY)
_FLOAT_GATE = f"^(?:{_FLOAT_BODY})$"
_F32 = struct.Struct("<f")


class FloatText(TextCodec):
    """Floats in decimal/exponent notation; writes ``NaN``/``Infinity`` as Java does."""

    def __init__(self, data_type: DataType, options: TextOptions):
        super().__init__(data_type, options)
        self.single = data_type.name == "float"

    def parse(self, text: str) -> float:
        if not _FLOAT_RE.fullmatch(text):
            raise ValueError("not a number")
        value = float(text)
        if self.single:
            try:
                value = _F32.unpack(_F32.pack(value))[0]
            except OverflowError:  # rounds to infinity, like a C float cast
                value = float("inf") if value > 0 else float("-inf")
        return value

    def format(self, value: Any) -> str:
        if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)):
            raise TypeError(f"expected float, got {type(value).__name__}")
        value = float(value)
        if value != value:
            return "NaN"
        if value in (float("inf"), float("-inf")):
            return "Infinity" if value > 0 else "-Infinity"
        # repr of the double is exact for float values too (no second rounding on read).
        return repr(value)

    def parse_array(self, strings):
        gate = pc.match_substring_regex(strings, _FLOAT_GATE).fill_null(False)
        try:
            wide = pc.cast(pc.if_else(gate, strings, None), pa.float64())
        except pa.ArrowInvalid:
            return pa.nulls(len(strings), self.arrow_type), np.zeros(len(strings), dtype=bool)
        # float: parse as double then round, the same two steps as the scalar path.
        return pc.cast(wide, self.arrow_type), gate.to_numpy(zero_copy_only=False)

    def format_array(self, arr):
        text = pc.cast(arr, pa.string())
        text = pc.if_else(pc.is_nan(arr), "NaN", text)
        text = pc.if_else(pc.equal(arr, float("inf")), "Infinity", text)
        return pc.if_else(pc.equal(arr, float("-inf")), "-Infinity", text)


_DECIMAL_BODY = r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)"
_DECIMAL_RE = re.compile(_DECIMAL_BODY)


class DecimalText(TextCodec):
    """Plain decimal notation, rounded half-up to the column's scale."""

    def __init__(self, data_type: DataType, options: TextOptions):
        super().__init__(data_type, options)
        self.precision, self.scale = data_type.precision, data_type.scale
        # Rows that fit without rounding parse with one cast; others take the scalar path.
        self.gate = f"^[+-]?[0-9]{{0,{self.precision - self.scale}}}(?:\\.[0-9]{{0,{self.scale}}})?$"

    def parse(self, text: str) -> Decimal:
        if not _DECIMAL_RE.fullmatch(text):
            raise ValueError("not a decimal number")
        return decimal_at_scale(Decimal(text), self.precision, self.scale)

    def format(self, value: Any) -> str:
        return format(decimal_at_scale(value, self.precision, self.scale), "f")

    def parse_array(self, strings):
        gate = pc.and_(
            pc.match_substring_regex(strings, f"^(?:{_DECIMAL_BODY})$"),
            pc.match_substring_regex(strings, self.gate),
        ).fill_null(False)
        try:
            values = pc.cast(pc.if_else(gate, strings, None), self.arrow_type)
        except pa.ArrowInvalid:
            return pa.nulls(len(strings), self.arrow_type), np.zeros(len(strings), dtype=bool)
        return values, gate.to_numpy(zero_copy_only=False)

    def format_array(self, arr):
        return pc.cast(arr, pa.string())
