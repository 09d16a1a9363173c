"""Value codecs: one type in one stored form, with scalar and batch paths.

:func:`make_codec` picks the codec for a type and a storage form:
``binary`` (HBase ``Bytes``, optionally order-preserving; struct, array
and map values as Avro datums) or ``string`` (LazySimpleSerDe-style
text).  Avro and JSON codecs live with their SerDes.
"""

from __future__ import annotations

from serde.codecs.avro import nested_binary_codec
from serde.codecs.base import Codec, decode_rows, merge_fallback
from serde.codecs.hbase_bytes import binary_codec
from serde.codecs.text import TextCodec, TextOptions
from serde.codecs.text_collections import ArrayText, MapText
from serde.errors import MappingError
from serde.type_registry import COMPLEX_NAMES, type_spec
from serde.types import DataType

__all__ = ["Codec", "TextCodec", "TextOptions", "make_codec", "text_codec", "binary_codec", "decode_rows", "merge_fallback"]


def text_codec(data_type: DataType, options: TextOptions) -> TextCodec:
    """The text codec of a type: a primitive, or an array/map of primitives."""
    if data_type.is_primitive:
        spec = type_spec(data_type.name)
        if spec.text is not None:
            codec = spec.text(data_type, options)
            codec.byte_order = spec.order_of("string")
            return codec
    elif data_type.name == "array" and data_type.element.is_primitive:
        return ArrayText(data_type, options, text_codec(data_type.element, options))
    elif data_type.name == "map" and data_type.key.is_primitive and data_type.value.is_primitive:
        return MapText(data_type, options, text_codec(data_type.key, options), text_codec(data_type.value, options))
    raise MappingError(
        "text storage supports primitives and arrays/maps of primitives (use avro or json for nesting)",
        str(data_type),
    )


def make_codec(
    data_type: DataType,
    storage: str,
    options: TextOptions,
    ordered: bool = False,
    timestamp_unit: str = "ms",
) -> Codec:
    """The codec for ``data_type`` stored as ``storage`` (``"binary"`` or ``"string"``)."""
    if storage == "string":
        if ordered:
            raise MappingError("the ordered encoding is binary, not string storage", str(data_type))
        return text_codec(data_type, options)
    if storage == "binary":
        if data_type.name in COMPLEX_NAMES:
            if ordered:
                raise MappingError("the ordered encoding has no form for struct, array or map values", str(data_type))
            return nested_binary_codec(data_type)  # struct/array/map values: Avro binary datums
        return binary_codec(data_type, ordered, timestamp_unit)
    raise MappingError("storage must be binary or string", storage)
