"""The built-in scalar types, one declaration each (see :mod:`serde.type_registry`).

Imported by the registry on its first lookup.  A new type is one more
:func:`~serde.type_registry.register_type` call, here or in user code.
"""

from __future__ import annotations

import datetime as _dt
from decimal import Decimal

import pyarrow as pa

from serde import _avro_types as avro
from serde.codecs import json_values as js
from serde.codecs.hbase_bytes import (
    BinaryCodec,
    BoolCodec,
    DateCodec,
    DecimalCodec,
    FloatCodec,
    IntCodec,
    OrderedDecimalCodec,
    StringCodec,
    TimestampCodec,
)
from serde.codecs.text import BinaryText, BoolText, DecimalText, FloatText, IntText, StringText
from serde.codecs.text_dates import DateText, TimestampText
from serde.type_registry import TypeSpec, register_type

__all__: list[str] = []

# Text forms that compare as bytes: strings and binaries (a null sequence aside).
_BYTES_ORDER = {"binary": "bytes", "ordered": "bytes", "string": "bytes"}
# Fixed-width integers, dates and timestamps: two's complement, or sign-flipped when ordered.
_SIGNED_ORDER = {"binary": "signed", "ordered": "ordered", "string": None}


def _integer(name: str, aliases: tuple[str, ...], ddl: str, arrow: pa.DataType, bits: int, avro_name: tuple[str, ...]) -> TypeSpec:
    return TypeSpec(
        name=name,
        aliases=aliases,
        arrow=arrow,
        ddl=ddl,
        value_range=(-(1 << (bits - 1)), (1 << (bits - 1)) - 1),
        binary=lambda t, ordered, unit: IntCodec(t, ordered),
        text=IntText,
        avro_schema="long" if bits == 64 else "int",
        avro_names=avro_name,
        avro_read=avro.read_integer,
        json_read=js.read_integer,
        json_write=js.write_integer,
        order=_SIGNED_ORDER,
        literal_types=(int,),
        sample=1,
        from_text=int,
    )


def _boolean(text: str) -> bool:
    if text.lower() not in ("true", "false"):
        raise ValueError(text)
    return text.lower() == "true"


register_type(TypeSpec(
    name="string",
    aliases=("varchar", "char", "text"),
    params="length",
    arrow=pa.string(),
    ddl="STRING",
    binary=lambda t, ordered, unit: StringCodec(t),
    text=StringText,
    avro_schema="string",
    avro_names=("string",),
    json_read=js.read_string,
    json_write=js.write_same,
    order=_BYTES_ORDER,
    literal_types=(str,),
    sample="a",
    from_text=str,
))
register_type(TypeSpec(
    name="binary",
    aliases=("bytes",),
    arrow=pa.binary(),
    ddl="BINARY",
    binary=lambda t, ordered, unit: BinaryCodec(t),
    text=BinaryText,
    avro_schema="bytes",
    avro_names=("bytes",),
    json_read=js.read_binary,
    json_write=js.write_binary,
    order=_BYTES_ORDER,
    literal_types=(bytes, bytearray),
    literal_same_class=False,
    sample=b"a",
))
register_type(TypeSpec(
    name="boolean",
    aliases=("bool",),
    arrow=pa.bool_(),
    ddl="BOOLEAN",
    binary=lambda t, ordered, unit: BoolCodec(t),
    text=BoolText,
    avro_schema="boolean",
    avro_names=("boolean",),
    json_read=js.read_boolean,
    json_write=js.write_same,
    from_text=_boolean,
))
register_type(_integer("tinyint", ("byte",), "TINYINT", pa.int8(), 8, ()))
register_type(_integer("smallint", ("short",), "SMALLINT", pa.int16(), 16, ()))
register_type(_integer("int", ("integer",), "INT", pa.int32(), 32, ("int",)))
register_type(_integer("bigint", ("long",), "BIGINT", pa.int64(), 64, ("long",)))
for _name, _aliases, _ddl, _arrow, _avro in (
    ("float", ("real",), "FLOAT", pa.float32(), "float"),
    ("double", (), "DOUBLE", pa.float64(), "double"),
):
    register_type(TypeSpec(
        name=_name,
        aliases=_aliases,
        arrow=_arrow,
        ddl=_ddl,
        binary=lambda t, ordered, unit: FloatCodec(t, ordered),
        text=FloatText,
        avro_schema=_avro,
        avro_names=(_avro,),
        json_read=js.read_float,
        json_write=js.write_same,
        from_text=float,
    ))
register_type(TypeSpec(
    name="decimal",
    aliases=("numeric", "dec"),
    params="precision_scale",
    arrow=lambda t: pa.decimal128(t.precision, t.scale),
    ddl=lambda t: f"DECIMAL({t.precision},{t.scale})",
    binary=lambda t, ordered, unit: OrderedDecimalCodec(t) if ordered else DecimalCodec(t),
    text=DecimalText,
    avro_schema=lambda t: {"type": "bytes", "logicalType": "decimal", "precision": t.precision, "scale": t.scale},
    avro_read=avro.read_decimal,
    json_read=js.read_decimal,
    json_write=js.write_decimal,
    order={"binary": None, "ordered": "ordered", "string": None},
    literal_types=(Decimal, int),
    literal_same_class=False,
    sample=Decimal(0),
    from_text=Decimal,
))
register_type(TypeSpec(
    name="date",
    arrow=pa.date32(),
    ddl="DATE",
    binary=lambda t, ordered, unit: DateCodec(t, ordered),
    text=DateText,
    avro_schema={"type": "int", "logicalType": "date"},
    avro_names=("int:date",),
    json_read=js.read_date,
    json_write=js.write_date,
    order=_SIGNED_ORDER,
    literal_types=(_dt.date,),
    literal_check=lambda v: not isinstance(v, _dt.datetime),
    sample=_dt.date(2000, 1, 1),
    from_text=_dt.date.fromisoformat,
))
register_type(TypeSpec(
    name="timestamp",
    aliases=("timestamp_ntz",),
    arrow=pa.timestamp("us"),
    # Values are naive UTC wall clock; Spark sees them as TimestampType (an instant, UTC) unless asked for NTZ.
    ddl="TIMESTAMP",
    ddl_ntz="TIMESTAMP_NTZ",
    spark_arrow=pa.timestamp("us", tz="UTC"),
    binary=lambda t, ordered, unit: TimestampCodec(t, ordered, unit),
    text=TimestampText,
    avro_schema={"type": "long", "logicalType": "timestamp-micros"},
    avro_names=("long:timestamp-millis", "long:timestamp-micros", "long:local-timestamp-millis", "long:local-timestamp-micros"),
    avro_read=avro.read_timestamp,
    json_read=js.read_timestamp,
    json_write=js.write_timestamp,
    order=_SIGNED_ORDER,
    literal_types=(_dt.datetime,),
    # Spark gives TimestampType literals as aware UTC datetimes; stored values are naive UTC.
    literal_normalize=lambda v: v.astimezone(_dt.timezone.utc).replace(tzinfo=None) if isinstance(v, _dt.datetime) and v.tzinfo else v,
    sample=_dt.datetime(2000, 1, 1),
    from_text=_dt.datetime.fromisoformat,
))
