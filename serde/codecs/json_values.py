"""JSON forms of the scalar types: converters between parsed JSON and row-wise values.

Each ``read_*`` / ``write_*`` builds, once per column, the function that
turns a parsed JSON value into the row-wise value (raising on the wrong JSON
type) or a row-wise value into a JSON-able one.  The type registry
(:mod:`serde.builtin_types`) names them per type; :mod:`serde.json_serde`
recurses through arrays, maps and structs.

Forms: numbers for ints and floats, decimals as strings (numbers accepted on
read, parsed exactly), dates ``"YYYY-MM-DD"``, timestamps ISO (an offset is
converted to UTC; a number is epoch milliseconds), binary as base64.
"""

from __future__ import annotations

import base64
import datetime as _dt
import re
import struct
from decimal import Decimal
from typing import Any, Callable

from serde.codecs.epoch import EPOCH, datetime_to_us
from serde.codecs.hbase_bytes import decimal_at_scale
from serde.types import DataType

__all__ = [
    "expect",
    "read_string",
    "read_binary",
    "read_boolean",
    "read_integer",
    "read_float",
    "read_decimal",
    "read_date",
    "read_timestamp",
    "write_same",
    "write_binary",
    "write_integer",
    "write_decimal",
    "write_date",
    "write_timestamp",
]

Converter = Callable[[Any], Any]

_F32 = struct.Struct("<f")
_ISO_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")


def expect(value: Any, kinds: tuple, what: str) -> None:
    """Raise TypeError unless ``value`` is one of ``kinds`` (a bool is not an int)."""
    if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
        raise TypeError(f"expected {what}, got {type(value).__name__} {value!r}")


def read_string(data_type: DataType) -> Converter:
    """JSON string -> str."""
    def read(v):
        expect(v, (str,), "a string")
        return v
    return read


def read_binary(data_type: DataType) -> Converter:
    """Base64 JSON string -> bytes."""
    def read(v):
        expect(v, (str,), "a base64 string")
        return base64.b64decode(v, validate=True)
    return read


def read_boolean(data_type: DataType) -> Converter:
    """JSON true/false -> bool."""
    def read(v):
        expect(v, (bool,), "true or false")
        return v
    return read


def read_integer(data_type: DataType) -> Converter:
    """JSON integer within the type's range -> int."""
    from serde.type_registry import type_spec

    low, high = type_spec(data_type.name).value_range
    name = data_type.name

    def read(v):
        expect(v, (int,), "an integer")
        if not low <= v <= high:
            raise ValueError(f"{v} is out of range for {name}")
        return v
    return read


def read_float(data_type: DataType) -> Converter:
    """JSON number -> float (rounded to single precision for ``float``)."""
    single = data_type.name == "float"

    def read(v):
        expect(v, (int, float, Decimal), "a number")
        v = float(v)
        if single:
            try:
                v = _F32.unpack(_F32.pack(v))[0]
            except OverflowError:
                v = float("inf") if v > 0 else float("-inf")
        return v
    return read


def read_decimal(data_type: DataType) -> Converter:
    """JSON number or string -> Decimal at the column's scale."""
    precision, scale = data_type.precision, data_type.scale

    def read(v):
        expect(v, (int, Decimal, str), "a decimal number or string")
        return decimal_at_scale(Decimal(v) if isinstance(v, str) else v, precision, scale)
    return read


def read_date(data_type: DataType) -> Converter:
    """``"YYYY-MM-DD"`` -> date."""
    def read(v):
        expect(v, (str,), "a date string")
        if not _ISO_DATE.fullmatch(v):
            raise ValueError(f"expected YYYY-MM-DD, got {v!r}")
        return _dt.date.fromisoformat(v)
    return read


def read_timestamp(data_type: DataType) -> Converter:
    """ISO text (an offset converts to UTC) or epoch milliseconds -> naive UTC datetime."""
    def read(v):
        expect(v, (str, int), "a timestamp string or epoch milliseconds")
        if isinstance(v, int):
            return EPOCH + _dt.timedelta(milliseconds=v)
        value = _dt.datetime.fromisoformat(v)
        if value.tzinfo is not None:
            value = value.astimezone(_dt.timezone.utc).replace(tzinfo=None)
        return value
    return read


def write_same(data_type: DataType) -> Converter:
    """Values that are JSON as they are (strings, booleans, floats)."""
    return lambda v: v


def write_binary(data_type: DataType) -> Converter:
    """bytes -> base64 text."""
    return lambda v: base64.b64encode(bytes(v)).decode("ascii")


def write_integer(data_type: DataType) -> Converter:
    """int within the type's range -> int."""
    from serde.type_registry import type_spec

    low, high = type_spec(data_type.name).value_range
    name = data_type.name

    def write(v):
        if isinstance(v, bool) or not isinstance(v, int):
            raise TypeError(f"expected int, got {type(v).__name__}")
        if not low <= v <= high:
            raise ValueError(f"{v} is out of range for {name}")
        return v
    return write


def write_decimal(data_type: DataType) -> Converter:
    """A decimal at the column's scale -> its text."""
    precision, scale = data_type.precision, data_type.scale
    return lambda v: format(decimal_at_scale(v, precision, scale), "f")


def write_date(data_type: DataType) -> Converter:
    """date -> ``"YYYY-MM-DD"``."""
    def write(v):
        if not isinstance(v, _dt.date):
            raise TypeError(f"expected date, got {type(v).__name__}")
        return (v.date() if isinstance(v, _dt.datetime) else v).isoformat()
    return write


def write_timestamp(data_type: DataType) -> Converter:
    """datetime -> ISO text of its UTC wall clock."""
    def write(v):
        if not isinstance(v, _dt.datetime):
            raise TypeError(f"expected datetime, got {type(v).__name__}")
        return (EPOCH + _dt.timedelta(microseconds=datetime_to_us(v))).isoformat()
    return write
