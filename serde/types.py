"""The logical column types of the SerDe layer and their type-string parser.

A :class:`DataType` is what a mapping declares for a column (``int``,
``decimal(10,2)``, ``map<string,int>`` ...).  It knows its Arrow type, its
Spark DDL spelling and its Hive spelling.  Type strings are read
case-insensitively with the aliases Hive, Spark and the hbase-spark catalog
use (``long`` = ``bigint``, ``short`` = ``smallint``, ``byte`` = ``tinyint``,
``integer`` = ``int``, ``varchar(n)`` = ``string`` ...).

Scalar types are declared in the type registry (:mod:`serde.type_registry`,
built-ins in :mod:`serde.builtin_types`); this module holds the constructors
(array, map, struct) and the parser.  Timestamps are naive (UTC wall clock)
microseconds: Arrow ``timestamp[us]``; Spark sees them as ``TIMESTAMP``
(TimestampType) or, on request, ``TIMESTAMP_NTZ``.  Dates are Arrow ``date32``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import pyarrow as pa

from serde.errors import MappingError
from serde.type_registry import COMPLEX_NAMES, TypeSpec, find_type, type_spec

__all__ = [
    "DataType",
    "DEFAULT_DECIMAL",
    "parse_type",
    "parse_type_at",
    "decimal",
    "walk",
    "STRING",
    "BINARY",
    "BOOLEAN",
    "TINYINT",
    "SMALLINT",
    "INT",
    "BIGINT",
    "FLOAT",
    "DOUBLE",
    "DATE",
    "TIMESTAMP",
]

DEFAULT_DECIMAL = (10, 0)
"""Precision and scale of a bare ``decimal``, as Hive and Spark default it."""


@dataclass(frozen=True)
class DataType:
    """A column type.

    ``name`` is a registered scalar type (:mod:`serde.type_registry`) or
    ``array`` / ``map`` / ``struct``; ``precision``/``scale`` are set for
    decimals, ``element`` for arrays, ``key``/``value`` for maps and
    ``fields`` for structs.
    """

    name: str
    precision: int | None = None
    scale: int | None = None
    element: "DataType | None" = None
    key: "DataType | None" = None
    value: "DataType | None" = None
    fields: tuple[tuple[str, "DataType"], ...] = ()

    @property
    def is_primitive(self) -> bool:
        """True for every type that is not an array, map or struct."""
        return self.name not in COMPLEX_NAMES

    @property
    def is_integer(self) -> bool:
        """True for the integer types (those with a value range)."""
        return self.is_primitive and type_spec(self.name).value_range is not None

    @property
    def spec(self) -> TypeSpec:
        """The registry entry of a scalar type."""
        return type_spec(self.name)

    def arrow(self) -> pa.DataType:
        """The Arrow type of values of this type."""
        if self.name == "array":
            return pa.list_(self.element.arrow())
        if self.name == "map":
            return pa.map_(self.key.arrow(), self.value.arrow())
        if self.name == "struct":
            return pa.struct([pa.field(n, t.arrow()) for n, t in self.fields])
        return type_spec(self.name).arrow_of(self)

    def spark_arrow(self, timestamp_ntz: bool = False) -> pa.DataType:
        """The Arrow type Spark expects for this type (zoned timestamps unless ``timestamp_ntz``)."""
        if self.name == "array":
            return pa.list_(self.element.spark_arrow(timestamp_ntz))
        if self.name == "map":
            return pa.map_(self.key.spark_arrow(timestamp_ntz), self.value.spark_arrow(timestamp_ntz))
        if self.name == "struct":
            return pa.struct([pa.field(n, t.spark_arrow(timestamp_ntz)) for n, t in self.fields])
        return type_spec(self.name).spark_arrow_of(self, timestamp_ntz)

    def ddl(self, timestamp_ntz: bool = False) -> str:
        """The Spark DDL spelling (``DECIMAL(10,2)``, ``MAP<STRING, INT>``).

        Timestamps are ``TIMESTAMP`` (Spark's TimestampType, as hbase-spark
        gives them), or ``TIMESTAMP_NTZ`` with ``timestamp_ntz``.
        """
        if self.name == "array":
            return f"ARRAY<{self.element.ddl(timestamp_ntz)}>"
        if self.name == "map":
            return f"MAP<{self.key.ddl(timestamp_ntz)}, {self.value.ddl(timestamp_ntz)}>"
        if self.name == "struct":
            inner = ", ".join(f"`{n}`: {t.ddl(timestamp_ntz)}" for n, t in self.fields)
            return f"STRUCT<{inner}>"
        return type_spec(self.name).ddl_of(self, timestamp_ntz)

    def __str__(self) -> str:
        """The Hive spelling (``decimal(10,2)``, ``map<string,int>``)."""
        if self.precision is not None:  # a parameterised scalar such as decimal(p,s)
            return f"{self.name}({self.precision},{self.scale})"
        if self.name == "array":
            return f"array<{self.element}>"
        if self.name == "map":
            return f"map<{self.key},{self.value}>"
        if self.name == "struct":
            return "struct<" + ",".join(f"{n}:{t}" for n, t in self.fields) + ">"
        return self.name


STRING = DataType("string")
BINARY = DataType("binary")
BOOLEAN = DataType("boolean")
TINYINT = DataType("tinyint")
SMALLINT = DataType("smallint")
INT = DataType("int")
BIGINT = DataType("bigint")
FLOAT = DataType("float")
DOUBLE = DataType("double")
DATE = DataType("date")
TIMESTAMP = DataType("timestamp")


def decimal(precision: int, scale: int, name: str = "decimal") -> DataType:
    """A decimal type; checks 1 <= precision <= 38 and 0 <= scale <= precision."""
    if not 1 <= precision <= 38 or not 0 <= scale <= precision:
        raise MappingError("decimal precision must be 1..38 and scale 0..precision", f"decimal({precision},{scale})")
    return DataType(name, precision=precision, scale=scale)


MAX_TYPE_DEPTH = 32
"""The deepest nesting of array, map and struct a type string may have (the reader recurses per level)."""
_MAX_NUMBER_DIGITS = 9  # char(n), decimal(p, s): nothing legal needs more
_DIGITS = "0123456789"  # str.isdigit() also accepts "²", which int() refuses


class _TypeReader:
    """Recursive-descent reader of one type string; positions are absolute."""

    def __init__(self, text: str, base: int):
        self.text = text
        self.base = base
        self.pos = 0
        self.depth = 0  # array/map/struct levels around the current spot

    def fail(self, message: str, start: int | None = None) -> MappingError:
        start = self.pos if start is None else start
        end = start
        while end < len(self.text) and (self.text[end].isalnum() or self.text[end] == "_"):
            end += 1
        token = self.text[start:end] or self.text[start : start + 1] or "<end>"
        return MappingError(message, token, self.base + start)

    def skip_ws(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos].isspace():
            self.pos += 1

    def word(self) -> str:
        self.skip_ws()
        start = self.pos
        while self.pos < len(self.text) and (self.text[self.pos].isalnum() or self.text[self.pos] == "_"):
            self.pos += 1
        return self.text[start : self.pos]

    def expect(self, char: str) -> None:
        self.skip_ws()
        if not self.text.startswith(char, self.pos):
            raise self.fail(f"expected {char!r} in type")
        self.pos += 1

    def peek(self, char: str) -> bool:
        self.skip_ws()
        return self.text.startswith(char, self.pos)

    def integer(self) -> int:
        self.skip_ws()
        start = self.pos
        while self.pos < len(self.text) and self.text[self.pos] in _DIGITS:
            self.pos += 1
        if start == self.pos:
            raise self.fail("expected a number in type")
        if self.pos - start > _MAX_NUMBER_DIGITS:
            raise MappingError(f"number in type longer than {_MAX_NUMBER_DIGITS} digits", self.text[start : start + 20], self.base + start)
        return int(self.text[start : self.pos])

    def read(self) -> DataType:
        self.skip_ws()
        start = self.pos
        self.depth += 1
        if self.depth > MAX_TYPE_DEPTH:
            raise MappingError(f"type nested more than {MAX_TYPE_DEPTH} levels deep", self.text[start : start + 20], self.base + start)
        try:
            return self._read(start)
        finally:
            self.depth -= 1

    def _read(self, start: int) -> DataType:
        raw = self.word()
        lowered = raw.lower()
        if lowered in COMPLEX_NAMES:
            name = lowered
        else:
            spec = find_type(raw) if raw else None
            if spec is None:
                raise self.fail("unknown type", start)
            name = spec.name
            if spec.params == "length":
                if self.peek("("):  # varchar(n) / char(n): length is not enforced
                    self.expect("(")
                    self.integer()
                    self.expect(")")
                return DataType(name)
            if spec.params == "precision_scale":
                return self._decimal(start, name)
            return DataType(name)
        if name == "array":
            self.expect("<")
            element = self.read()
            self.expect(">")
            return DataType("array", element=element)
        if name == "map":
            self.expect("<")
            key_start = self.pos
            key = self.read()
            if not key.is_primitive:
                raise MappingError("map keys must be a primitive type", str(key), self.base + key_start)
            self.expect(",")
            value = self.read()
            self.expect(">")
            return DataType("map", key=key, value=value)
        if name == "struct":
            self.expect("<")
            fields = []
            while True:
                field_start = self.pos
                field_name = self.word()
                if not field_name:
                    raise self.fail("expected a struct field name")
                if any(field_name == n for n, _ in fields):
                    raise MappingError("duplicate struct field", field_name, self.base + field_start)
                self.skip_ws()
                if self.peek(":"):
                    self.expect(":")
                fields.append((field_name, self.read()))
                if self.peek(","):
                    self.expect(",")
                    continue
                self.expect(">")
                return DataType("struct", fields=tuple(fields))
        raise self.fail("unknown type", start)

    def _decimal(self, start: int, name: str) -> DataType:
        precision, scale = DEFAULT_DECIMAL
        if self.peek("("):
            self.expect("(")
            precision = self.integer()
            scale = 0
            if self.peek(","):
                self.expect(",")
                scale = self.integer()
            self.expect(")")
        try:
            return decimal(precision, scale, name)
        except MappingError:
            raise MappingError(
                "decimal precision must be 1..38 and scale 0..precision",
                self.text[start : self.pos],
                self.base + start,
            ) from None


def parse_type_at(text: str, pos: int = 0, base: int = 0) -> tuple[DataType, int]:
    """Read one type starting at ``text[pos]``; return it and the end offset.

    ``base`` is added to positions in error messages, so a caller that cut
    ``text`` out of a longer string reports positions in the longer one.
    """
    reader = _TypeReader(text, base)
    reader.pos = pos
    result = reader.read()
    return result, reader.pos


def parse_type(text: str, base: int = 0) -> DataType:
    """Parse a whole type string such as ``"map<string,decimal(10,2)>"``.

    Raises :class:`~serde.errors.MappingError` naming the offending token and
    its position.
    """
    if not isinstance(text, str):
        raise MappingError("a type must be a string", text)
    result, end = parse_type_at(text, 0, base)
    rest = text[end:]
    if rest.strip():
        offset = end + (len(rest) - len(rest.lstrip()))
        raise MappingError("unexpected text after type", text[offset:].split()[0], base + offset)
    return result


def walk(data_type: DataType) -> Iterator[DataType]:
    """Yield a type and every type nested in it."""
    yield data_type
    for child in (data_type.element, data_type.key, data_type.value):
        if child is not None:
            yield from walk(child)
    for _, child in data_type.fields:
        yield from walk(child)
