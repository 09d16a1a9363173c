"""Text formats and properties, Avro and JSON layouts."""

from __future__ import annotations

import datetime as dt
import io
import json
from decimal import Decimal

import fastavro
import pyarrow as pa
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from serde import MappingError, create_serde, record_batch_rows, rows_to_batch


def canon(value):
    """NaN compares equal to NaN."""
    if isinstance(value, float) and value != value:
        return "NaN"
    if isinstance(value, (list, tuple)):
        return type(value)(canon(v) for v in value)
    if isinstance(value, dict):
        return {k: canon(v) for k, v in value.items()}
    return value


def both_paths(sd, rows):
    """Decode row-wise and batch-wise; assert they agree; return the rows."""
    expected = [sd.deserialize(r) for r in rows]
    assert canon(record_batch_rows(sd.deserialize_batch(rows_to_batch(rows, sd.scan_columns)))) == canon(expected)
    return expected


def test_text_numbers_booleans_and_null_sequence():
    sd = create_serde("string", "key STRING :key, n BIGINT cf:n, f DOUBLE cf:f, b BOOLEAN cf:b, s STRING cf:s")
    rows = [
        (b"1", {b"cf:n": b"+42", b"cf:f": b"1e3", b"cf:b": b"TRUE", b"cf:s": b"\\N"}),
        (b"2", {b"cf:n": b"-9223372036854775808", b"cf:f": b"NaN", b"cf:b": b"false", b"cf:s": b""}),
        (b"3", {b"cf:n": b"\\N", b"cf:f": b"-Infinity", b"cf:b": b"\\N"}),
    ]
    got = both_paths(sd, rows)
    assert got[0] == ("1", 42, 1000.0, True, None)
    assert got[1][1] == -(1 << 63) and got[1][2] != got[1][2] and got[1][3:] == (False, "")
    assert got[2] == ("3", None, float("-inf"), None, None)
    assert sd.serialize(("k", 5, float("nan"), True, "x"))[1] == {b"cf:n": b"5", b"cf:f": b"NaN", b"cf:b": b"true", b"cf:s": b"x"}


def test_custom_null_sequence_and_separators():
    props = {"serialization.null.format": "NULL", "collection.delim": ",", "mapkey.delim": "="}
    sd = create_serde("string", "key STRING :key, a ARRAY<INT> cf:a, m MAP<STRING,DOUBLE> cf:m, n INT cf:n", props)
    key, cells = sd.serialize(("k", [1, None, 3], {"x": 1.5, "y": None}, None))
    assert cells == {b"cf:a": b"1,NULL,3", b"cf:m": b"x=1.5,y=NULL"}
    rows = [(key, cells), (b"e", {b"cf:a": b"", b"cf:m": b"", b"cf:n": b"NULL"})]
    assert both_paths(sd, rows) == [("k", [1, None, 3], {"x": 1.5, "y": None}, None), ("e", [], {}, None)]
    with pytest.raises(Exception) as err:
        sd.serialize(("k", None, {"a,b": 1.0}, None))
    assert "separator" in str(err.value)
    # Numeric separator codes, as Hive accepts them.
    sd2 = create_serde("string", "key STRING :key, a ARRAY<STRING> cf:a", {"collection.delim": "59"})
    assert sd2.serialize(("k", ["p", "q"]))[1] == {b"cf:a": b"p;q"}


def test_date_and_timestamp_formats_java_and_strftime():
    props = {"date.format": "dd/MM/yyyy", "timestamp.formats": "yyyy-MM-dd'T'HH:mm:ss,millis"}
    sd = create_serde("string", "key STRING :key, d DATE cf:d, t TIMESTAMP cf:t", props)
    key, cells = sd.serialize(("k", dt.date(2021, 3, 4), dt.datetime(2021, 3, 4, 5, 6, 7)))
    assert cells == {b"cf:d": b"04/03/2021", b"cf:t": b"2021-03-04T05:06:07"}  # first listed format writes
    rows = [
        (key, cells),
        (b"a", {b"cf:d": b"31/12/1999", b"cf:t": b"2021-03-04 05:06:07.25"}),  # Hive's default is tried first
        (b"b", {b"cf:d": b"1/2/2003", b"cf:t": b"1000"}),  # non-padded date (scalar path), epoch millis
        (b"c", {b"cf:t": b"2021-03-04 05:06:07.123456789"}),  # nanoseconds truncated to micros
    ]
    got = both_paths(sd, rows)
    assert got[1] == ("a", dt.date(1999, 12, 31), dt.datetime(2021, 3, 4, 5, 6, 7, 250000))
    assert got[2] == ("b", dt.date(2003, 2, 1), dt.datetime(1970, 1, 1, 0, 0, 1))
    assert got[3][2] == dt.datetime(2021, 3, 4, 5, 6, 7, 123456)
    strf = create_serde("string", "key STRING :key, d DATE cf:d", {"date.format": "%Y%m%d"})
    assert strf.serialize(("k", dt.date(2020, 1, 2)))[1] == {b"cf:d": b"20200102"}
    assert both_paths(strf, [(b"k", {b"cf:d": b"20200102"})]) == [("k", dt.date(2020, 1, 2))]
    with pytest.raises(MappingError) as err:
        create_serde("string", "key STRING :key, d DATE cf:d", {"date.format": "yyyy-MM-dd QQ"})
    assert err.value.token == "QQ"


@settings(max_examples=30, deadline=None)
@given(st.lists(st.one_of(st.dates().map(lambda d: d.isoformat()), st.text(max_size=12)), max_size=10))
@example(["\\N", "2020-01-02", "not a date"])  # the null sequence reads as null without an error
def test_naive_and_fast_date_paths_agree(texts):
    mapping = "key STRING :key, d DATE cf:d"
    rows = [(f"r{i}".encode(), {b"cf:d": t.encode()}) for i, t in enumerate(texts)]
    fast = create_serde("string", mapping, {"serde.on.error": "null"})
    naive = create_serde("string", mapping, {"serde.on.error": "null", "serde.row.dates": "naive"})
    naive_rows = [naive.deserialize(r) for r in rows]
    assert naive_rows == both_paths(fast, rows)
    # every row has a cell: None means bad, unless the cell is the null sequence (Hive's \N)
    bad = sum(1 for text, row in zip(texts, naive_rows) if row[1] is None and text != "\\N")
    assert naive.stats.nulls_from_errors == ({"d": bad} if bad else {})
    assert fast.stats.nulls_from_errors == ({"d": 2 * bad} if bad else {})  # row-wise and batch


def test_binary_timestamp_unit_property():
    ms = create_serde("binary", "key STRING :key, t TIMESTAMP cf:t")
    us = create_serde("binary", "key STRING :key, t TIMESTAMP cf:t", {"binary.timestamp.unit": "us"})
    stamp = dt.datetime(2020, 1, 1, 0, 0, 0, 1500)
    assert ms.serialize(("k", stamp))[1][b"cf:t"] == (1577836800001).to_bytes(8, "big")
    assert us.serialize(("k", stamp))[1][b"cf:t"] == (1577836800001500).to_bytes(8, "big")
    assert us.deserialize(us.serialize(("k", stamp))) == ("k", stamp)


def test_mixed_storage_in_one_mapping():
    sd = create_serde("binary", ":key,cf:a#s,cf:b#b", {"columns": "k,a,b", "columns.types": "string:int:int"})
    assert sd.serialize(("k", 1, 2))[1] == {b"cf:a": b"1", b"cf:b": b"\x00\x00\x00\x02"}


def test_avro_per_column_with_schema_literals_and_derived_schemas():
    record = {
        "type": "record",
        "name": "Point",
        "fields": [
            {"name": "x", "type": "double"},
            {"name": "when", "type": ["null", {"type": "long", "logicalType": "timestamp-millis"}]},
            {"name": "tags", "type": {"type": "array", "items": "string"}},
        ],
    }
    props = {"p.avro.schema.literal": json.dumps(record), "cf.price.avro.schema.literal": '{"type": "bytes", "logicalType": "decimal", "precision": 8, "scale": 2}'}
    sd = create_serde("avro", "key STRING :key, p STRING cf:p, price STRING cf:price, d DATE cf:d, m MAP<STRING,INT> f:", props)
    assert sd.ddl == (
        "`key` STRING, `p` STRUCT<`x`: DOUBLE, `when`: TIMESTAMP, `tags`: ARRAY<STRING>>, "
        "`price` DECIMAL(8,2), `d` DATE, `m` MAP<STRING, INT>"
    )
    point = {"x": 1.5, "when": dt.datetime(2020, 5, 6, 7, 8, 9, 10000), "tags": ["a", "b"]}
    values = ("k", point, Decimal("12.34"), dt.date(2020, 1, 1), {"q": 1, "r": None})
    key, cells = sd.serialize(values)
    assert set(cells) == {b"cf:p", b"cf:price", b"cf:d", b"f:q"}
    # Each cell is a plain schemaless Avro datum that fastavro reads directly.
    raw = fastavro.schemaless_reader(io.BytesIO(cells[b"cf:p"]), fastavro.parse_schema(record), None)
    assert raw["x"] == 1.5 and raw["tags"] == ["a", "b"]
    got = both_paths(sd, [(key, cells)])
    assert got == [("k", point, Decimal("12.34"), dt.date(2020, 1, 1), {"q": 1})]
    encoded = sd.serialize_batch(sd.deserialize_batch(rows_to_batch([(key, cells)], sd.scan_columns)))
    assert encoded.column(encoded.schema.get_field_index("cf:p")).to_pylist() == [cells[b"cf:p"]]


def test_avro_whole_row_record():
    schema = {
        "type": "record",
        "name": "Row",
        "fields": [
            {"name": "a", "type": "int"},
            {"name": "b", "type": ["null", "string"], "default": None},
            {"name": "unmapped", "type": "string", "default": "x"},
        ],
    }
    mapping = "key STRING :key, a STRING d:r, b STRING d:r, n INT cf:n"
    props = {"avro.row.cell": "d:r", "avro.schema.literal": json.dumps(schema)}
    sd = create_serde("avro", mapping, props)
    assert [f.type for f in sd.arrow_schema] == [pa.string(), pa.int32(), pa.string(), pa.int32()]
    key, cells = sd.serialize(("k", 7, None, 3))
    assert set(cells) == {b"d:r", b"cf:n"}
    record = fastavro.schemaless_reader(io.BytesIO(cells[b"d:r"]), fastavro.parse_schema(schema), None)
    assert record == {"a": 7, "b": None, "unmapped": "x"}
    assert both_paths(sd, [(key, cells), (b"empty", {})]) == [("k", 7, None, 3), ("empty", None, None, None)]
    derived = create_serde("avro", "key STRING :key, a INT d:r, b DATE d:r", {"avro.row.cell": "d:r"})
    assert derived.deserialize(derived.serialize(("k", None, dt.date(2000, 2, 29)))) == ("k", None, dt.date(2000, 2, 29))
    with pytest.raises(MappingError) as err:
        create_serde("avro", "key STRING :key, zz INT d:r", props)
    assert err.value.token == "zz"


def test_json_per_cell_and_per_row():
    sd = create_serde("json", "key STRING :key, n INT cf:n, x DECIMAL(5,2) cf:x, t TIMESTAMP cf:t, s STRUCT<a:INT,b:ARRAY<STRING>> cf:s")
    values = ("k", 3, Decimal("1.50"), dt.datetime(2020, 1, 2, 3, 4, 5), {"a": 1, "b": ["x", None]})
    key, cells = sd.serialize(values)
    assert cells[b"cf:n"] == b"3" and cells[b"cf:x"] == b'"1.50"' and cells[b"cf:t"] == b'"2020-01-02T03:04:05"'
    assert json.loads(cells[b"cf:s"]) == {"a": 1, "b": ["x", None]}
    extra = (b"j", {b"cf:x": b"2.345", b"cf:t": b'"2020-01-02T03:04:05+01:00"', b"cf:n": b"1700000000000"})
    got = both_paths(create_serde("json", sd.mapping, {"serde.on.error": "null"}), [(key, cells), extra])
    assert got[0] == values
    assert got[1][2] == Decimal("2.35") and got[1][3] == dt.datetime(2020, 1, 2, 2, 4, 5)
    assert got[1][1] is None  # out of int range
    row = create_serde("json", "key STRING :key, a INT d:r, b MAP<STRING,INT> d:r", {"json.row.cell": "d:r"})
    key, cells = row.serialize(("k", 1, {"z": 2}))
    assert json.loads(cells[b"d:r"]) == {"a": 1, "b": {"z": 2}}
    assert both_paths(row, [(key, cells), (b"m", {b"d:r": b'{"b": {"y": null}}'})]) == [("k", 1, {"z": 2}, ), ("m", None, {"y": None})]


def test_ordered_and_string_storage_conflict_is_a_mapping_error():
    with pytest.raises(MappingError):
        create_serde("string", {"rowkey": "k", "columns": {"k": {"cf": "rowkey", "col": "k", "type": "int", "encoding": "ordered", "storage": "string"}}})
    with pytest.raises(MappingError) as err:  # binary storage holds nested values as Avro; ordered bytes cannot
        create_serde("binary", "key STRING :key, a ARRAY<INT> cf:a#o")
    assert "ordered encoding has no form for struct, array or map values" in str(err.value)
    assert "array<int>" in str(err.value)
