"""One Avro datum per value (fastavro, schemaless), with its schema parsed once.

Used by the ``avro`` SerDe, by any SerDe for a mapped column whose
catalog entry gives an Avro schema (``"avro": ...``), and for struct,
array and map values in binary storage (:func:`nested_binary_codec`).  A
datum with trailing bytes is rejected; values convert to the row-wise
forms of :mod:`serde._avro_types`.
"""

from __future__ import annotations

import io
from typing import Any

from serde._avro_types import reader_converter, type_to_avro, writer_converter
from serde.codecs.base import Codec
from serde.errors import MappingError
from serde.types import DataType

try:
    import fastavro
except ImportError:  # optional at import time; the registry names the missing package
    fastavro = None

__all__ = ["AvroCodec", "nested_binary_codec", "parse_schema", "require_fastavro", "fastavro"]


def require_fastavro() -> None:
    """Raise MappingError naming the missing package when fastavro is not installed."""
    if fastavro is None:
        raise MappingError("the avro SerDe needs the package 'fastavro' (pip install fastavro)", "fastavro")


def parse_schema(schema: Any, where: str) -> Any:
    """fastavro's parsed form of ``schema``; a bad schema raises MappingError naming ``where``."""
    require_fastavro()
    try:
        return fastavro.parse_schema(schema)
    except Exception as exc:  # fastavro raises several types for bad schemas
        raise MappingError(f"invalid Avro schema for {where} ({exc})", str(schema)[:80]) from None


class AvroCodec(Codec):
    """One Avro datum per value, with a schema parsed once."""

    def __init__(self, data_type: DataType, schema: Any, where: str):
        super().__init__(data_type)
        self.schema = schema
        self.parsed = parse_schema(schema, where)
        self._read = reader_converter(data_type)
        self._write = writer_converter(data_type)

    def decode(self, raw: bytes) -> Any:
        stream = io.BytesIO(raw)
        value = fastavro.schemaless_reader(stream, self.parsed, None)
        if stream.tell() != len(raw):
            raise ValueError(f"{len(raw) - stream.tell()} trailing bytes after the Avro datum")
        if value is None or self._read is None:
            return value
        return self._read(value)

    def encode(self, value: Any) -> bytes:
        stream = io.BytesIO()
        try:
            fastavro.schemaless_writer(stream, self.parsed, value if self._write is None else self._write(value))
        except (ValueError, TypeError, OverflowError):
            raise
        except Exception as exc:  # fastavro reports some type mismatches as other errors
            raise ValueError(str(exc)) from None
        return stream.getvalue()


def nested_binary_codec(data_type: DataType) -> AvroCodec:
    """The binary form of a struct, array or map value: one Avro datum of the schema derived
    from its type (:func:`serde._avro_types.type_to_avro`: nested values nullable, a map with
    keys that are not strings as an array of key/value records).  HBase's ``Bytes`` has no
    form for nested values; Avro is the binary form hbase-spark's catalogs already read."""
    return AvroCodec(data_type, type_to_avro(data_type), f"binary {data_type}")
