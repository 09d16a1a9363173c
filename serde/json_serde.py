"""The ``json`` SerDe: cell values as JSON documents.

* per column (default): each cell column holds one JSON value of the
  column's type (``42``, ``"abc"``, ``{"k": 1}``, ``[1, 2]``);
* per row: property ``json.row.cell = "cf:q"``; the whole row is one JSON
  object in that cell, and every column mapped to that cell is the member
  of the same name (a missing member is null).

JSON forms of the types: numbers for ints and floats (``NaN``/``Infinity``
as Python's json module writes them), decimals as strings (numbers are
accepted on read, parsed exactly), dates ``"YYYY-MM-DD"``, timestamps ISO
``"YYYY-MM-DDTHH:MM:SS[.ffffff]"`` (an offset is converted to UTC; a number
is epoch milliseconds), binary as base64 strings, maps as objects (keys are
text), structs as objects.  A value of the wrong JSON type is a bad value.
Decoding loops per value with the stdlib ``json`` module; converters are
built once per column.
"""

from __future__ import annotations

import base64
import datetime as _dt
import json
import re
import struct
from decimal import Decimal
from typing import Any, Callable

from serde._document import RowDocumentSerDe
from serde.codecs import TextOptions, text_codec
from serde.codecs._time import EPOCH, datetime_to_us
from serde.codecs.base import Codec
from serde.codecs.hbase_bytes import decimal_at_scale
from serde.errors import MappingError
from serde.mapping import ColumnKind, ColumnSpec
from serde.types import INTEGER_RANGES, DataType, walk

__all__ = ["JsonSerDe", "JsonCodec", "json_reader", "json_writer"]

_F32 = struct.Struct("<f")
_ISO_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")


def _expect(value: Any, kinds: tuple, what: str) -> None:
    if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
        raise TypeError(f"expected {what}, got {type(value).__name__} {value!r}")


def json_reader(data_type: DataType) -> Callable[[Any], Any]:
    """Converter from a parsed JSON value to the row-wise value; raises on the wrong JSON type."""
    name = data_type.name
    if name == "string":
        def read_string(v):
            _expect(v, (str,), "a string")
            return v
        return read_string
    if name == "binary":
        def read_binary(v):
            _expect(v, (str,), "a base64 string")
            return base64.b64decode(v, validate=True)
        return read_binary
    if name == "boolean":
        def read_bool(v):
            _expect(v, (bool,), "true or false")
            return v
        return read_bool
    if name in INTEGER_RANGES:
        low, high = INTEGER_RANGES[name]

        def read_int(v):
            _expect(v, (int,), "an integer")
            if not low <= v <= high:
                raise ValueError(f"{v} is out of range for {name}")
            return v
        return read_int
    if name in ("float", "double"):
        single = name == "float"

        def read_float(v):
            _expect(v, (int, float, Decimal), "a number")
            v = float(v)
            if single:
                try:
                    v = _F32.unpack(_F32.pack(v))[0]
                except OverflowError:
                    v = float("inf") if v > 0 else float("-inf")
            return v
        return read_float
    if name == "decimal":
        precision, scale = data_type.precision, data_type.scale

        def read_decimal(v):
            _expect(v, (int, Decimal, str), "a decimal number or string")
            return decimal_at_scale(Decimal(v) if isinstance(v, str) else v, precision, scale)
        return read_decimal
    if name == "date":
        def read_date(v):
            _expect(v, (str,), "a date string")
            if not _ISO_DATE.fullmatch(v):
                raise ValueError(f"expected YYYY-MM-DD, got {v!r}")
            return _dt.date.fromisoformat(v)
        return read_date
    if name == "timestamp":
        def read_timestamp(v):
            _expect(v, (str, int), "a timestamp string or epoch milliseconds")
            if isinstance(v, int):
                return EPOCH + _dt.timedelta(milliseconds=v)
            value = _dt.datetime.fromisoformat(v)
            if value.tzinfo is not None:
                value = value.astimezone(_dt.timezone.utc).replace(tzinfo=None)
            return value
        return read_timestamp
    if name == "array":
        inner = json_reader(data_type.element)

        def read_array(v):
            _expect(v, (list,), "an array")
            return [None if x is None else inner(x) for x in v]
        return read_array
    if name == "map":
        inner = json_reader(data_type.value)
        key_parse = None if data_type.key.name == "string" else text_codec(data_type.key, TextOptions()).parse

        def read_map(v):
            _expect(v, (dict,), "an object")
            if key_parse is None:
                return {k: None if x is None else inner(x) for k, x in v.items()}
            return {key_parse(k): None if x is None else inner(x) for k, x in v.items()}
        return read_map
    fields = [(n, json_reader(t)) for n, t in data_type.fields]

    def read_struct(v):
        _expect(v, (dict,), "an object")
        return {n: (None if v.get(n) is None else conv(v.get(n))) for n, conv in fields}
    return read_struct


def json_writer(data_type: DataType) -> Callable[[Any], Any]:
    """Converter from a row-wise value (or Arrow ``to_pylist`` value) to a JSON-able value."""
    name = data_type.name
    if name == "binary":
        return lambda v: base64.b64encode(bytes(v)).decode("ascii")
    if name == "decimal":
        precision, scale = data_type.precision, data_type.scale
        return lambda v: format(decimal_at_scale(v, precision, scale), "f")
    if name == "date":
        def write_date(v):
            if not isinstance(v, _dt.date):
                raise TypeError(f"expected date, got {type(v).__name__}")
            return (v.date() if isinstance(v, _dt.datetime) else v).isoformat()
        return write_date
    if name == "timestamp":
        def write_timestamp(v):
            if not isinstance(v, _dt.datetime):
                raise TypeError(f"expected datetime, got {type(v).__name__}")
            return (EPOCH + _dt.timedelta(microseconds=datetime_to_us(v))).isoformat()
        return write_timestamp
    if name in INTEGER_RANGES:
        low, high = INTEGER_RANGES[name]

        def write_int(v):
            if isinstance(v, bool) or not isinstance(v, int):
                raise TypeError(f"expected int, got {type(v).__name__}")
            if not low <= v <= high:
                raise ValueError(f"{v} is out of range for {name}")
            return v
        return write_int
    if name == "array":
        inner = json_writer(data_type.element)
        return lambda v: [None if x is None else inner(x) for x in v]
    if name == "map":
        inner = json_writer(data_type.value)
        key_format = str if data_type.key.name == "string" else text_codec(data_type.key, TextOptions()).format

        def write_map(v):
            items = v.items() if isinstance(v, dict) else v  # dict, or Arrow's list of pairs
            return {key_format(k): None if x is None else inner(x) for k, x in items}
        return write_map
    if name == "struct":
        fields = [(n, json_writer(t)) for n, t in data_type.fields]
        return lambda v: {n: (None if v.get(n) is None else conv(v.get(n))) for n, conv in fields}
    return lambda v: v


def _needs_decimal(data_type: DataType) -> bool:
    return any(t.name == "decimal" for t in walk(data_type))


class JsonCodec(Codec):
    """One JSON value per cell."""

    def __init__(self, data_type: DataType):
        super().__init__(data_type)
        self._read = json_reader(data_type)
        self._write = json_writer(data_type)
        # Parse non-integers exactly only where a decimal needs it; floats stay fast elsewhere.
        self._parse_float = Decimal if _needs_decimal(data_type) else None

    def decode(self, raw: bytes) -> Any:
        value = json.loads(raw, parse_float=self._parse_float)
        return None if value is None else self._read(value)

    def encode(self, value: Any) -> bytes:
        return json.dumps(self._write(value), separators=(",", ":"), ensure_ascii=False).encode("utf-8")


class _JsonRow:
    """Decode/encode one row object, keeping only the mapped members."""

    def __init__(self, fields: list[str], types: list[DataType]):
        self.readers = [(f, json_reader(t)) for f, t in zip(fields, types)]
        self.writers = [(f, json_writer(t)) for f, t in zip(fields, types)]
        self.parse_float = Decimal if any(_needs_decimal(t) for t in types) else None

    def decode(self, raw: bytes) -> dict:
        doc = json.loads(raw, parse_float=self.parse_float)
        if not isinstance(doc, dict):
            raise TypeError(f"the row cell holds {type(doc).__name__}, not an object")
        return {f: (None if doc.get(f) is None else conv(doc.get(f))) for f, conv in self.readers}

    def encode(self, doc: dict) -> bytes:
        out = {f: (None if doc.get(f) is None else conv(doc.get(f))) for f, conv in self.writers}
        return json.dumps(out, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


class JsonSerDe(RowDocumentSerDe):
    """JSON cell values, per column or one object per row."""

    name = "json"
    default_storage = None

    def _configure(self) -> None:
        self.row_cell = self.properties.get("json.row.cell")
        self._doc_columns = [
            c
            for c in self.mapping.columns
            if self.row_cell is not None and c.kind == ColumnKind.CELL and c.cell == self.row_cell
        ]
        if self.row_cell is not None:
            if not self._doc_columns:
                raise MappingError("json.row.cell names a cell no column is mapped to", self.row_cell)
            self._row = _JsonRow([c.name for c in self._doc_columns], [c.type for c in self._doc_columns])

    def value_codec(self, column: ColumnSpec, data_type: DataType, role: str) -> Codec:
        if column.storage is not None:
            return super().value_codec(column, data_type, role)  # explicit #b / #s
        return JsonCodec(data_type)

    def _document_codec(self):
        return self._row.decode, self._row.encode
