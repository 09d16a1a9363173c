"""Order-preserving encodings and composite row keys."""

from __future__ import annotations

import datetime as dt
import math

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from serde import DecodeError, EncodeError, create_serde, record_batch_rows, rows_to_batch
from serde.codecs import TextOptions, make_codec
from serde.types import parse_type

ORDERED = {
    "tinyint": st.integers(-128, 127),
    "smallint": st.integers(-(1 << 15), (1 << 15) - 1),
    "int": st.integers(-(1 << 31), (1 << 31) - 1),
    "bigint": st.integers(-(1 << 63), (1 << 63) - 1),
    "float": st.floats(width=32, allow_nan=False),
    "double": st.floats(allow_nan=False),
    "decimal(20,4)": st.decimals(min_value=-(10**15), max_value=10**15, places=4, allow_nan=False, allow_infinity=False),
    "date": st.dates(),
    "timestamp": st.datetimes().map(lambda d: d.replace(microsecond=d.microsecond // 1000 * 1000)),
    "boolean": st.booleans(),
    "string": st.text(max_size=5),
}


@pytest.mark.parametrize("type_name", list(ORDERED))
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_ordered_bytes_sort_like_values(type_name, data):
    codec = make_codec(parse_type(type_name), "binary", TextOptions(), ordered=True)
    values = data.draw(st.lists(ORDERED[type_name], min_size=1, max_size=20))
    encoded = [codec.encode(v) for v in values]
    # Byte order equals value order, negatives included.
    by_bytes = [codec.decode(b) for b in sorted(encoded)]
    assert by_bytes == sorted(values)
    # The batch kernels agree with the scalar codec both ways.
    decoded, bad = codec.decode_array(pa.array(encoded, pa.binary()))
    assert bad is None
    assert decoded.to_pylist() == [codec.decode(b) for b in encoded]
    assert codec.encode_array(pa.array(values, codec.arrow_type)).to_pylist() == encoded


def test_ordered_floats_put_negative_zero_and_infinities_in_place():
    codec = make_codec(parse_type("double"), "binary", TextOptions(), ordered=True)
    values = [math.inf, 1.5, 0.0, -0.0, -1e-300, -math.inf, 2.0**-1074]
    ordered = [codec.decode(b) for b in sorted(codec.encode(v) for v in values)]
    assert ordered == [-math.inf, -1e-300, -0.0, 0.0, 2.0**-1074, 1.5, math.inf]
    assert math.copysign(1, ordered[2]) == -1


def test_plain_hbase_bytes_layouts():
    codec = lambda t: make_codec(parse_type(t), "binary", TextOptions())  # noqa: E731
    assert codec("int").encode(-2) == b"\xff\xff\xff\xfe"
    assert codec("smallint").encode(1) == b"\x00\x01"
    assert codec("bigint").encode(1) == b"\x00" * 7 + b"\x01"
    assert codec("double").encode(1.0) == b"\x3f\xf0" + b"\x00" * 6
    assert codec("boolean").encode(True) == b"\xff"
    assert codec("boolean").decode(b"\x01") is True
    # BigDecimal: 4-byte scale then BigInteger.toByteArray (minimal two's complement).
    from decimal import Decimal

    dec = codec("decimal(10,2)")
    assert dec.encode(Decimal("1.28")) == b"\x00\x00\x00\x02\x00\x80"
    assert dec.encode(Decimal("-1.28")) == b"\x00\x00\x00\x02\x80"
    assert dec.encode(Decimal("-1.29")) == b"\x00\x00\x00\x02\xff\x7f"
    assert dec.decode(b"\x00\x00\x00\x01\x7f") == Decimal("12.70")  # other scales are rescaled
    assert codec("date").encode(dt.date(1970, 1, 2)) == (86_400_000).to_bytes(8, "big")


def _key_catalog(delimiter=None, k1_type="int", k1_encoding="ordered"):
    catalog = {
        "rowkey": "k1:k2:k3",
        "columns": {
            "k1": {"cf": "rowkey", "col": "k1", "type": k1_type, "encoding": k1_encoding},
            "k2": {"cf": "rowkey", "col": "k2", "type": "string", "length": 3},
            "v": {"cf": "d", "col": "v", "type": "double"},
            "k3": {"cf": "rowkey", "col": "k3", "type": "string"},
        },
    }
    if delimiter is not None:
        catalog["rowkey_delimiter"] = delimiter
        del catalog["columns"]["k2"]["length"]
    return catalog


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(-(1 << 31), (1 << 31) - 1),
            st.text(st.characters(min_codepoint=97, max_codepoint=122), min_size=3, max_size=3),
            st.text(max_size=4),
        ),
        min_size=1,
        max_size=12,
        unique=True,
    )
)
def test_fixed_composite_key_round_trips_and_sorts(parts):
    sd = create_serde("binary", _key_catalog())
    rows = [sd.serialize({"k1": a, "k2": b, "k3": c, "v": 1.0}) for a, b, c in parts]
    # Ordered int first part + fixed-width second part: the keys sort as the tuples.
    assert [sd.deserialize(r)[:2] + (sd.deserialize(r)[3],) for r in sorted(rows)] == sorted(parts)
    expected = [sd.deserialize(r) for r in rows]
    assert [(e[0], e[1], e[3]) for e in expected] == parts
    assert record_batch_rows(sd.deserialize_batch(rows_to_batch(rows, sd.scan_columns))) == expected
    record = sd.deserialize_batch(rows_to_batch(rows, sd.scan_columns))
    assert sd.serialize_batch(record).column(0).to_pylist() == [r[0] for r in rows]


def test_delimited_composite_key_last_part_keeps_the_delimiter():
    sd = create_serde("string", _key_catalog("|", k1_type="int", k1_encoding="binary"))
    key, cells = sd.serialize({"k1": -5, "k2": "ab", "k3": "x|y", "v": 2.5})
    assert key == b"-5|ab|x|y"
    assert sd.deserialize((key, cells)) == (-5, "ab", 2.5, "x|y")
    rows = [(key, cells), (b"7|q|", {})]
    expected = [sd.deserialize(r) for r in rows]
    assert expected[1] == (7, "q", None, "")
    assert record_batch_rows(sd.deserialize_batch(rows_to_batch(rows, sd.scan_columns))) == expected
    with pytest.raises(EncodeError) as err:
        sd.serialize({"k1": 1, "k2": "a|b", "k3": "c", "v": None})
    assert "delimiter" in str(err.value)
    record = pa.RecordBatch.from_pylist(
        [{"k1": 1, "k2": "a|b", "k3": "c", "v": None}], schema=sd.arrow_schema
    )
    with pytest.raises(EncodeError):
        sd.serialize_batch(record)


def test_fixed_key_part_of_wrong_width_is_refused():
    sd = create_serde("binary", _key_catalog())
    with pytest.raises(EncodeError) as err:
        sd.serialize({"k1": 1, "k2": "toolong", "k3": "", "v": None})
    assert "k2" in str(err.value)


@pytest.mark.parametrize("mode", ["fail", "null"])
def test_short_composite_key_is_bad_data_on_both_paths(mode):
    sd = create_serde("binary", _key_catalog(), {"serde.on.error": mode})
    good = sd.serialize({"k1": 3, "k2": "abc", "k3": "z", "v": 1.0})
    rows = [good, (b"\x80\x00", {b"d:v": (2.0).hex().encode()})]
    if mode == "fail":
        with pytest.raises(DecodeError) as err:
            sd.deserialize(rows[1])
        assert err.value.row_key == b"\x80\x00"
        with pytest.raises(DecodeError) as err:
            sd.deserialize_batch(rows_to_batch(rows, sd.scan_columns))
        assert err.value.row_key == b"\x80\x00"
        assert "k1+k2+k3" in str(err.value)
        return
    expected = [sd.deserialize(r) for r in rows]
    assert expected[1][:2] == (None, None) and expected[1][3] is None
    other = create_serde("binary", _key_catalog(), {"serde.on.error": mode})
    assert record_batch_rows(other.deserialize_batch(rows_to_batch(rows, sd.scan_columns))) == expected
    assert other.stats.nulls_from_errors == sd.stats.nulls_from_errors
    assert sd.stats.nulls_from_errors["k1"] == 1
    assert sd.stats.nulls_from_errors["v"] == 1  # the 16-char text is not an 8-byte double
