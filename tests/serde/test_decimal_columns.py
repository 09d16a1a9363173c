"""The binary SerDe's decimal columns decode in bulk exactly as value by value.

HBase's ``Bytes.toBytes(BigDecimal)`` form (a 4-byte scale, then the minimal
two's complement unscaled value) decodes in one pass for a column of precision
<= 18 whose values are all at its scale and fit it; anything else (another
scale, a value past the precision, a malformed cell) takes the general path.
Both must give what ``decode`` gives for each value, with the same bad rows.
"""

from __future__ import annotations

import struct
from decimal import Decimal
from typing import Any

import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from serde.codecs.hbase_bytes import DecimalCodec
from serde.types import parse_type

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _reference(codec: Any, cells: list[bytes | None]) -> tuple[list, list[bool]]:
    """Each cell decoded alone: its value, or None and bad when ``decode`` refuses it."""
    values, bad = [], []
    for cell in cells:
        if cell is None:
            values.append(None)
            bad.append(False)
            continue
        try:
            values.append(codec.decode(cell))
            bad.append(False)
        except (ValueError, ArithmeticError, struct.error):
            values.append(None)
            bad.append(True)
    return values, bad


@st.composite
def columns(draw) -> tuple[str, list[bytes | None]]:
    precision = draw(st.integers(1, 24))
    scale = draw(st.integers(0, min(precision, 6)))
    codec = DecimalCodec(parse_type(f"decimal({precision},{scale})"))
    top = 10 ** precision - 1
    unscaled = st.one_of(st.integers(-top, top), st.sampled_from([top, -top, 0, -1, 1, 127, -128, 255, -256]).filter(lambda u: abs(u) <= top))
    cell = st.one_of(
        unscaled.map(lambda u: codec.encode(Decimal(u).scaleb(-scale))),
        st.none(),
    )
    odd = st.one_of(
        st.binary(max_size=6),  # too short or a scale that is not the column's
        st.integers(-(10 ** 20), 10 ** 20).map(  # at another scale, or past the precision
            lambda u: (scale + 1).to_bytes(4, "big", signed=True) + u.to_bytes(10, "big", signed=True)),
        st.integers(10 ** precision, 10 ** precision * 100).map(  # past the precision, at its scale
            lambda u: scale.to_bytes(4, "big", signed=True) + u.to_bytes(u.bit_length() // 8 + 1, "big", signed=True)),
    )
    cells = draw(st.lists(cell, min_size=0, max_size=60))
    if draw(st.booleans()):
        cells.insert(draw(st.integers(0, len(cells))), draw(odd))
    return f"decimal({precision},{scale})", cells


@SETTINGS
@given(columns(), st.integers(0, 5))
def test_bulk_decode_equals_value_by_value(column, cut):
    """Good columns (the one-pass path) and columns with an odd cell (the general path), whole
    and sliced, decode to the values ``decode`` gives, with the same bad rows."""
    type_name, cells = column
    codec = DecimalCodec(parse_type(type_name))
    arr = pa.array(cells, pa.binary())
    for piece, part in ((arr, cells), (arr.slice(cut), cells[cut:])):
        got, bad = codec.decode_array(piece)
        want, want_bad = _reference(codec, part)
        assert got.type == codec.arrow_type
        assert got.to_pylist() == want
        assert (list(bad) if bad is not None else [False] * len(part)) == want_bad


def test_a_good_column_of_precision_18_decodes_its_extremes_and_nulls():
    """The one-pass path's edges: the largest magnitudes of precision 18, one-byte values, nulls."""
    codec = DecimalCodec(parse_type("decimal(18,2)"))
    values = [Decimal(10 ** 18 - 1).scaleb(-2), Decimal(-(10 ** 18) + 1).scaleb(-2), Decimal("0.01"),
              Decimal("-0.01"), None, Decimal("1.27"), Decimal("-1.28"), None]
    arr = pa.array([None if v is None else codec.encode(v) for v in values], pa.binary())
    got, bad = codec.decode_array(arr)
    assert bad is None
    assert got.to_pylist() == values
    assert got.null_count == 2


def test_a_column_of_one_width_decodes_as_value_by_value():
    """Values of one stored width (a discount's 0.00-0.10; negatives; 8-byte values) take the
    strided path; one value at another scale but the same width sends the column to the
    general path, which decodes and rescales it like ``decode``."""
    cases = [("decimal(15,2)", [Decimal(i).scaleb(-2) for i in range(11)] * 3),
             ("decimal(15,2)", [Decimal(-i).scaleb(-2) for i in range(1, 100)]),
             ("decimal(18,0)", [Decimal(10 ** 17 + i) for i in range(20)] + [Decimal(-(10 ** 17) - 5)])]
    for type_name, values in cases:
        codec = DecimalCodec(parse_type(type_name))
        cells = [codec.encode(v) for v in values]
        assert len({len(c) for c in cells}) == 1
        for arr in (pa.array(cells, pa.binary()), pa.array(cells, pa.binary()).slice(3)):
            got, bad = codec.decode_array(arr)
            want, _ = _reference(codec, arr.to_pylist())
            assert bad is None and got.to_pylist() == want
        odd = cells[:5] + [(codec.scale + 1).to_bytes(4, "big", signed=True) + cells[0][4:]] + cells[5:]
        got, bad = codec.decode_array(pa.array(odd, pa.binary()))
        want, want_bad = _reference(codec, odd)
        assert got.to_pylist() == want and (bad is None or not bad.any()) and not any(want_bad)
