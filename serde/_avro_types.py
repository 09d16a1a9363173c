"""Avro schemas and column types, both ways, and value converters.

* :func:`avro_to_type` reads an Avro schema (JSON text or dict) into a
  :class:`~serde.types.DataType`: records become structs, ``[null, T]``
  unions become a nullable T, logical types date / timestamp-millis /
  timestamp-micros / local-timestamp-* / decimal map to date, timestamp and
  decimal.
* :func:`type_to_avro` derives a schema for a declared column type, used
  when a column has no ``avro.schema.literal`` and for struct, array and
  map values in binary storage.  Avro map keys are strings, so a map whose
  keys are of another type becomes an Avro array of ``{key, value}``
  records (its entries, in order), read back as the map.
* :func:`reader_converter` builds, once per column, the function that turns
  fastavro's decoded value into the row-wise form (aware UTC datetimes
  become naive, small ints are range-checked); None when nothing needs
  converting, so the common case costs nothing per row.
"""

from __future__ import annotations

import datetime as _dt
import itertools
import json
from typing import Any, Callable

from serde.errors import MappingError
from serde.type_registry import COMPLEX_NAMES, registered_types, type_spec
from serde.types import DataType, decimal

__all__ = ["load_schema", "avro_to_type", "type_to_avro", "reader_converter", "writer_converter", "read_timestamp", "read_integer"]

def _avro_named(name: str) -> DataType | None:
    """The column type an Avro primitive or logical type name reads as (None: not a scalar)."""
    for type_name in registered_types():
        if name in type_spec(type_name).avro_names:
            return DataType(type_name)
    return None


def load_schema(literal: Any) -> Any:
    """An Avro schema from a dict/list or JSON text (a bare primitive name is accepted)."""
    if isinstance(literal, (dict, list)):
        return literal
    if not isinstance(literal, str):
        raise MappingError("an Avro schema must be JSON text or a dict", literal)
    try:
        return json.loads(literal)
    except json.JSONDecodeError as exc:
        if _avro_named(literal.strip()) is not None:
            return literal.strip()
        raise MappingError(f"invalid Avro schema JSON ({exc.msg})", literal[exc.pos : exc.pos + 20] or "<end>", exc.pos) from None


def avro_to_type(schema: Any, named: "dict[str, DataType | None] | None" = None) -> DataType:
    """The column type of an Avro schema."""
    named = {} if named is None else named
    if isinstance(schema, str):
        primitive = _avro_named(schema)
        if primitive is not None:
            return primitive
        if schema in named:
            if named[schema] is None:
                raise MappingError("recursive Avro records are not supported", schema)
            return named[schema]
        raise MappingError("unknown Avro type name", schema)
    if isinstance(schema, list):
        branches = [b for b in schema if b != "null"]
        if len(branches) != 1:
            raise MappingError("only [null, T] Avro unions are supported", json.dumps(schema))
        return avro_to_type(branches[0], named)
    if not isinstance(schema, dict) or "type" not in schema:
        raise MappingError("an Avro schema object needs a type", json.dumps(schema, default=str)[:60])
    kind = schema["type"]
    logical = schema.get("logicalType")
    if isinstance(logical, str) and logical != "decimal" and isinstance(kind, str):
        known = _avro_named(f"{kind}:{logical}")
        if known is not None:
            return known
    if logical == "decimal" and kind in ("bytes", "fixed"):
        precision = schema.get("precision")
        if not isinstance(precision, int) or precision > 38:
            raise MappingError("Avro decimals need a precision of at most 38", precision)
        result = decimal(precision, schema.get("scale", 0))
    elif kind == "record":
        fields = []
        named[schema.get("name", "")] = None  # in progress: a reference to it is recursion
        for field in schema.get("fields", []):
            fields.append((field["name"], avro_to_type(field["type"], named)))
        result = DataType("struct", fields=tuple(fields))
    elif kind == "array":
        result = DataType("array", element=avro_to_type(schema["items"], named))
    elif kind == "map":
        result = DataType("map", key=DataType("string"), value=avro_to_type(schema["values"], named))
    elif kind == "enum":
        result = DataType("string")
    elif kind == "fixed":
        result = DataType("binary")
    elif isinstance(kind, (str, list, dict)) and kind not in ("record", "enum", "fixed", "array", "map"):
        result = avro_to_type(kind, named)
    else:
        raise MappingError("unsupported Avro type", kind)
    if isinstance(schema.get("name"), str):
        named[schema["name"]] = result
    return result


_names = itertools.count()


def _keyed_by_entries(data_type: DataType) -> bool:
    """Whether a derived schema holds this map as an array of key/value records (keys not strings)."""
    return data_type.name == "map" and data_type.key.name != "string"


def type_to_avro(data_type: DataType) -> Any:
    """A (non-null) Avro schema for a column type; nested values are nullable."""
    name = data_type.name
    if name == "array":
        return {"type": "array", "items": ["null", type_to_avro(data_type.element)]}
    if name == "map":
        if not _keyed_by_entries(data_type):
            return {"type": "map", "values": ["null", type_to_avro(data_type.value)]}
        entry = {"type": "record", "name": f"entry_{next(_names)}",
                 "fields": [{"name": "key", "type": type_to_avro(data_type.key)},
                            {"name": "value", "type": ["null", type_to_avro(data_type.value)], "default": None}]}
        return {"type": "array", "items": entry}
    if name == "struct":
        return {
            "type": "record",
            "name": f"struct_{next(_names)}",
            "fields": [{"name": n, "type": ["null", type_to_avro(t)], "default": None} for n, t in data_type.fields],
        }
    return type_spec(name).avro_schema_of(data_type)


def read_timestamp(data_type: DataType) -> Callable[[Any], Any]:
    """fastavro's aware UTC datetimes -> naive UTC wall clock."""
    def stamp(v):
        return v.astimezone(_dt.timezone.utc).replace(tzinfo=None) if v.tzinfo is not None else v
    return stamp


def read_integer(data_type: DataType) -> Callable[[Any], Any]:
    """A range check: fastavro does not bound varints, so an over-long one decodes past the type's range."""
    low, high = type_spec(data_type.name).value_range
    name = data_type.name

    def small(v):
        if not low <= v <= high:
            raise ValueError(f"{v} is out of range for {name}")
        return v
    return small


def read_decimal(data_type: DataType) -> Callable[[Any], Any]:
    """A precision check: an Avro decimal's bytes hold any unscaled integer, so a
    datum can carry more digits than its schema's precision (the batch decode,
    into Arrow's decimal of that precision, rejects the same values)."""
    from serde.codecs.hbase_bytes import decimal_at_scale

    precision, scale = data_type.precision, data_type.scale
    return lambda v: decimal_at_scale(v, precision, scale)


def reader_converter(data_type: DataType) -> Callable[[Any], Any] | None:
    """fastavro value -> row-wise value, or None when they are the same."""
    name = data_type.name
    if name not in COMPLEX_NAMES:
        spec = type_spec(name)
        return None if spec.avro_read is None else spec.avro_read(data_type)
    if name == "array":
        inner = reader_converter(data_type.element)
        if inner is None:
            return None
        return lambda v: [None if x is None else inner(x) for x in v]
    if name == "map":
        inner = reader_converter(data_type.value)
        if _keyed_by_entries(data_type):
            key = reader_converter(data_type.key) or (lambda k: k)
            value = inner or (lambda x: x)
            return lambda v: {key(e["key"]): None if e["value"] is None else value(e["value"]) for e in v}
        if inner is None:
            return None
        return lambda v: {k: None if x is None else inner(x) for k, x in v.items()}
    if name == "struct":
        convs = [(n, reader_converter(t)) for n, t in data_type.fields]
        if all(c is None for _, c in convs):
            return None
        return lambda v: {n: (v.get(n) if c is None or v.get(n) is None else c(v.get(n))) for n, c in convs}
    return None


def writer_converter(data_type: DataType) -> Callable[[Any], Any] | None:
    """Row-wise value (or Arrow ``to_pylist`` value) -> fastavro datum, or None when the same."""
    name = data_type.name
    if name not in COMPLEX_NAMES:
        spec = type_spec(name)
        return None if spec.avro_write is None else spec.avro_write(data_type)
    if name == "map":
        inner = writer_converter(data_type.value)

        if _keyed_by_entries(data_type):
            key = writer_converter(data_type.key) or (lambda k: k)
            value = inner or (lambda x: x)

            def to_entries(v):
                items = v.items() if isinstance(v, dict) else v  # dict, or Arrow's list of pairs
                return [{"key": key(k), "value": None if x is None else value(x)} for k, x in items]

            return to_entries

        def to_map(v):
            items = v.items() if isinstance(v, dict) else v  # dict, or Arrow's list of pairs
            if inner is None:
                return dict(items)
            return {k: None if x is None else inner(x) for k, x in items}

        return to_map
    if name == "array":
        inner = writer_converter(data_type.element)
        if inner is None:
            return None
        return lambda v: [None if x is None else inner(x) for x in v]
    if name == "struct":
        convs = [(n, writer_converter(t)) for n, t in data_type.fields]
        if all(c is None for _, c in convs):
            return None
        return lambda v: {n: (v.get(n) if c is None or v.get(n) is None else c(v.get(n))) for n, c in convs}
    return None
