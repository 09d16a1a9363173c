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

import json
from decimal import Decimal
from typing import Any, Callable

from serde._document import RowDocumentSerDe
from serde.codecs import TextOptions, text_codec
from serde.codecs.base import Codec
from serde.codecs.json_values import expect
from serde.errors import MappingError
from serde.mapping import ColumnKind, MappedColumn
from serde.type_registry import COMPLEX_NAMES, type_spec
from serde.types import DataType, walk

__all__ = ["JsonSerDe", "JsonCodec", "json_reader", "json_writer"]


def json_reader(data_type: DataType) -> Callable[[Any], Any]:
    """Converter from a parsed JSON value to the row-wise value; raises on the wrong JSON type."""
    name = data_type.name
    if name not in COMPLEX_NAMES:
        spec = type_spec(name)
        if spec.json_read is None:
            raise MappingError("the type has no JSON form", str(data_type))
        return spec.json_read(data_type)
    if name == "array":
        inner = json_reader(data_type.element)

        def read_array(v):
            expect(v, (list,), "an array")
            return [None if x is None else inner(x) for x in v]
        return read_array
    if name == "map":
        inner = json_reader(data_type.value)
        key_parse = None if data_type.key.name == "string" else text_codec(data_type.key, TextOptions()).parse

        def read_map(v):
            expect(v, (dict,), "an object")
            if key_parse is None:
                return {k: None if x is None else inner(x) for k, x in v.items()}
            return {key_parse(k): None if x is None else inner(x) for k, x in v.items()}
        return read_map
    fields = [(n, json_reader(t)) for n, t in data_type.fields]

    def read_struct(v):
        expect(v, (dict,), "an object")
        return {n: (None if v.get(n) is None else conv(v.get(n))) for n, conv in fields}
    return read_struct


def json_writer(data_type: DataType) -> Callable[[Any], Any]:
    """Converter from a row-wise value (or Arrow ``to_pylist`` value) to a JSON-able value."""
    name = data_type.name
    if name not in COMPLEX_NAMES:
        spec = type_spec(name)
        if spec.json_write is None:
            raise MappingError("the type has no JSON form", str(data_type))
        return spec.json_write(data_type)
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
    fields = [(n, json_writer(t)) for n, t in data_type.fields]
    return lambda v: {n: (None if v.get(n) is None else conv(v.get(n))) for n, conv in fields}


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
    own_properties = frozenset({"json.row.cell"})

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

    def _value_codec(self, column: MappedColumn, data_type: DataType, role: str) -> Codec:
        if column.storage is not None:
            return super()._value_codec(column, data_type, role)  # explicit #b / #s
        return JsonCodec(data_type)

    def _document_codec(self):
        return self._row.decode, self._row.encode
