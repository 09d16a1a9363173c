"""Columns of a composite row key decoded alone: only the parts a read asks for.

A read that asks for some of a composite key's parts (Spark's pruned columns: a join on
``l_orderkey`` of a key ``(l_orderkey, l_linenumber)``) decodes those parts and no other, as
the SerDe does for cells: the others cost nothing and their bad values are not seen.  Keys of
a fixed layout's full width (a dense block's key chunk) are decoded from their byte matrix;
any other key is split first.  Either way the values are the full decode's.
"""

from __future__ import annotations

import datetime as dt
import itertools

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from serde import DecodeError, create_serde, rows_to_batch

PARTS = {  # name: (type, encoding, strategy)
    "a": ("bigint", "ordered", st.integers(-(1 << 63), (1 << 63) - 1)),
    "b": ("int", "binary", st.integers(-(1 << 31), (1 << 31) - 1)),
    "c": ("date", "ordered", st.dates()),
    "d": ("double", "ordered", st.floats(allow_nan=False)),
    "e": ("boolean", "binary", st.booleans()),
    "f": ("string", None, st.text(st.characters(min_codepoint=97, max_codepoint=122), min_size=3, max_size=3)),
    "g": ("smallint", "ordered", st.integers(-(1 << 15), (1 << 15) - 1)),
}


def _catalog(names: list[str]) -> dict:
    columns = {}
    for name in names:
        type_name, encoding, _ = PARTS[name]
        column = {"cf": "rowkey", "col": name, "type": type_name}
        if encoding is not None:
            column["encoding"] = encoding
        if type_name == "string":
            column["length"] = 3
        columns[name] = column
    columns["v"] = {"cf": "d", "col": "v", "type": "int"}
    return {"rowkey": ":".join(names), "columns": columns}


@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_each_subset_of_key_parts_decodes_as_the_whole_key_does(data):
    names = data.draw(st.lists(st.sampled_from(sorted(PARTS)), min_size=2, max_size=5, unique=True))
    serde = create_serde("binary", _catalog(names))
    rows = data.draw(st.lists(st.fixed_dictionaries({n: PARTS[n][2] for n in names}), min_size=1, max_size=8))
    stored = [serde.serialize({**r, "v": i}) for i, r in enumerate(rows)]
    batch = rows_to_batch(stored, serde.scan_columns)
    whole = serde.deserialize_batch(batch)
    expected = {n: whole.column(whole.schema.get_field_index(n)) for n in names}
    assert expected[names[0]].to_pylist() == [r[names[0]] for r in rows]
    for size in (1, len(names) - 1):
        for subset in itertools.combinations(names, size):
            got = serde.deserialize_batch(batch, [*subset, "v"])
            for n in subset:
                assert got.column(got.schema.get_field_index(n)).equals(expected[n]), (subset, n)


def _bad_date_rows(serde) -> list:
    """Two rows of a key ``(a bigint, c date)``: the second's date part is a long of milliseconds
    no date holds (past year 9999)."""
    good = serde.serialize({"a": 1, "c": dt.date(2020, 1, 2), "v": 1})
    key = serde.serialize({"a": 2, "c": dt.date(2020, 1, 2), "v": 2})[0]
    bad_key = key[:8] + (0xFFFF_0000_0000_0000).to_bytes(8, "big")
    return [good, (bad_key, {b"d:v": (2).to_bytes(4, "big")})]


def test_a_part_not_asked_for_is_not_decoded_nor_its_bad_values_seen():
    serde = create_serde("binary", _catalog(["a", "c"]), {"serde.on.error": "fail"})
    rows = _bad_date_rows(serde)
    batch = rows_to_batch(rows, serde.scan_columns)
    assert serde.deserialize_batch(batch, ["a", "v"]).column(0).to_pylist() == [1, 2]
    with pytest.raises(DecodeError) as err:
        serde.deserialize_batch(batch, ["c"])
    assert err.value.column == "c" and err.value.row_key == rows[1][0]


@pytest.mark.parametrize("layout", ["fixed", "split"])
def test_bad_values_of_a_part_asked_for_are_nulls_and_counted_under_null(layout):
    serde = create_serde("binary", _catalog(["a", "c"]), {"serde.on.error": "null"})
    rows = _bad_date_rows(serde)
    if layout == "split":  # a key longer than the layout: the keys are split, not read as one matrix
        rows.append((rows[0][0] + b"!", {b"d:v": (3).to_bytes(4, "big")}))
    batch = rows_to_batch(rows, serde.scan_columns)
    short = [None] if layout == "split" else []
    only_a = serde.deserialize_batch(batch, ["a"])
    assert only_a.column(0).to_pylist() == [1, 2, *short] and "c" not in serde.stats.nulls_from_errors
    both = serde.deserialize_batch(batch, ["c", "a"])
    assert both.column(0).to_pylist() == [dt.date(2020, 1, 2), None, *short]
    assert both.column(1).to_pylist() == [1, 2, *short]
    assert serde.stats.nulls_from_errors["c"] == 1 + len(short)
