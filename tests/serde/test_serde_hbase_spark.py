"""Catalogs and mappings that hbase-spark accepts, with the cases of its test suites.

The catalogs and data are those of hbase-connectors' HBaseCatalogSuite and
DefaultSourceSuite (its Avro tables); the expectations are what those suites
assert, in this project's terms.
"""

from __future__ import annotations

import datetime as dt
import io
import json

import fastavro
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark.sql.datasource import EqualTo, GreaterThan, StringStartsWith

from connector.keyspace import KeyLayout
from connector.pushdown import push_filters
from serde import ColumnKind, DecodeError, EncodeError, MappingError, create_serde, load_mapping, parse_catalog
from serde import parse_type, rows_to_batch
from serde.rowkey import TERMINATED, CompositeKey

from hbase_spark_catalogs import CATALOG_SUITE  # tests/ is on the path (conftest.py)


# DefaultSourceSuite's Avro record (AvroHBaseKeyRecord.schemaString).
USER_SCHEMA = json.dumps({
    "namespace": "example.avro", "type": "record", "name": "User",
    "fields": [
        {"name": "name", "type": "string"},
        {"name": "favorite_number", "type": ["int", "null"]},
        {"name": "favorite_color", "type": ["string", "null"]},
    ],
})
AVRO_WRITE_CATALOG = {
    "table": {"namespace": "default", "name": "avrotable"},
    "rowkey": "key",
    "columns": {
        "col0": {"cf": "rowkey", "col": "key", "type": "binary"},
        "col1": {"cf": "cf1", "col": "col1", "type": "binary"},
    },
}
AVRO_CATALOG = {
    "table": {"namespace": "default", "name": "avrotable"},
    "rowkey": "key",
    "columns": {
        "col0": {"cf": "rowkey", "col": "key", "avro": "avroSchema"},
        "col1": {"cf": "cf1", "col": "col1", "avro": "avroSchema"},
    },
}


def _user(i: int) -> dict:
    return {"name": f"name{i:03d}", "favorite_number": i, "favorite_color": f"color{i:03d}"}


def _avro_bytes(record: dict) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(json.loads(USER_SCHEMA)), record)
    return out.getvalue()


def _with_serdes(catalog: dict, names: list[str], serde: str) -> dict:
    cat = json.loads(json.dumps(catalog))
    for name in names:
        cat["columns"][name]["serdes"] = serde
    return cat


def _both_paths(sd, rows):
    """Serialize rows, decode them row-wise and as a batch; both must give the rows back."""
    encoded = [sd.serialize(r) for r in rows]
    assert [sd.deserialize(e) for e in encoded] == [tuple(r) for r in rows]
    batch = sd.deserialize_batch(rows_to_batch(encoded, sd.scan_columns))
    expect = pa.RecordBatch.from_pylist([dict(zip(sd.column_names, r)) for r in rows], schema=sd.arrow_schema)
    assert batch.to_pylist() == expect.to_pylist()
    return encoded


# -- HBaseCatalogSuite ---------------------------------------------------------


def test_catalog_suite_basic_types_lengths_and_serdes():
    m = parse_catalog(CATALOG_SUITE)
    kinds = {c.name: c.kind for c in m.columns}
    assert kinds["col1"] == kinds["col2"] == ColumnKind.KEY_PART
    assert kinds["col3"] == ColumnKind.CELL
    assert m.column("col3").type == parse_type("binary")
    assert m.column("col4").type == m.column("col10").type == parse_type("timestamp")
    assert m.column("col9").type == parse_type("date")
    assert m.column("col5").options["serde"] == "binary"  # hbase-spark's DoubleSerDes writes Bytes.toBytes(double)
    assert "serde" not in m.column("col4").options
    # checkDataType: the suite's three complex type strings parse to the column types
    assert m.column("col6").type == parse_type("MAP<int, struct<varchar:string>>")
    assert m.column("col7").type == parse_type("array<struct<tinYint:tinyint>>")
    assert m.column("col8").type == parse_type("MAp<int, ARRAY<double>>")
    assert str(m.column("col7").type) == "array<struct<tinYint:tinyint>>"  # field names keep their case


def test_catalog_suite_key_lengths_and_spark_types():
    sd = create_serde("binary", _with_serdes(CATALOG_SUITE, ["col6", "col7", "col8"], "json"))
    # key1 (string, length -1) ends at 0x00; key2 is a double of Bytes.SIZEOF_DOUBLE
    assert sd.composite_key.widths == [TERMINATED, 8]
    assert sd.ddl.startswith("`col1` STRING, `col2` DOUBLE, `col3` BINARY, `col4` TIMESTAMP, `col5` DOUBLE")
    assert sd.ddl.endswith("`col9` DATE, `col10` TIMESTAMP")


def test_complex_types_in_every_storage():
    """The suite's catalog as written (binary values: nested ones as Avro datums of their derived
    schemas, int map keys as key/value records), and with its nested columns as JSON or Avro."""
    for serde in (None, "json", "avro"):
        cat = CATALOG_SUITE if serde is None else _with_serdes(CATALOG_SUITE, ["col6", "col7", "col8"], serde)
        sd = create_serde("binary", cat)
        row = ("abc", 1.5, b"\x01\x02", dt.datetime(2020, 1, 1, 12), 0.125, {1: {"varchar": "v"}, 2: None},
               [{"tinYint": 3}, None], {1: [1.0, None], -7: []}, dt.date(2020, 1, 2), None)
        (key, cells), = _both_paths(sd, [row])
        assert key == b"abc\x00" + b"\x3f\xf8" + b"\x00" * 6
        assert cells[b"cf1:col4"] == b"\x3f\xc0" + b"\x00" * 6  # the DoubleSerDes column: Bytes.toBytes(0.125)
        if serde is None:  # an Avro array of {key, value} records: 2 entries, key 1 (zigzag 2), ...
            assert cells[b"cf1:col5"].startswith(b"\x04\x02\x02\x02\x02v")
    with pytest.raises(MappingError, match="col6.*ordered encoding has no form for struct, array or map values"):
        cat = json.loads(json.dumps(CATALOG_SUITE))
        cat["columns"]["col6"]["encoding"] = "ordered"
        create_serde("binary", cat)


def test_catalog_suite_convert_trailing_comma():
    text = "KEY_FIELD STRING :key, A_FIELD STRING c:a, B_FIELD DOUBLE c:b, C_FIELD BINARY c:c,"
    m = load_mapping(text)
    assert m.names == ["KEY_FIELD", "A_FIELD", "B_FIELD", "C_FIELD"]
    assert m.column("KEY_FIELD").kind == ColumnKind.KEY
    assert [str(m.column(n).type) for n in m.names[1:]] == ["string", "double", "binary"]
    assert m.column("A_FIELD").kind == ColumnKind.CELL and m.column("A_FIELD").cell == "c:a"
    with pytest.raises(MappingError, match="expected a column name"):
        load_mapping("KEY_FIELD STRING :key,, A_FIELD STRING c:a")


# -- composite keys with a string part ending at 0x00 ----------------------------


def _terminated():
    cat = {"rowkey": "key1:key2:key3", "columns": {
        "s": {"cf": "rowkey", "col": "key1", "type": "string", "length": -1},
        "n": {"cf": "rowkey", "col": "key2", "type": "int"},
        "t": {"cf": "rowkey", "col": "key3", "type": "string"},
        "v": {"cf": "cf", "col": "v", "type": "int"},
    }}
    return create_serde("binary", cat)


def test_terminated_part_round_trips_and_bad_keys_are_named():
    sd = _terminated()
    rows = [("", 0, "", 1), ("a", -1, "rest\x00with zero", 2), ("héllo", 7, "x", None)]
    encoded = _both_paths(sd, rows)
    assert encoded[1][0] == b"a\x00\xff\xff\xff\xffrest\x00with zero"
    with pytest.raises(EncodeError, match="0x00"):
        sd.serialize(("a\x00b", 1, "x", 1))
    with pytest.raises(DecodeError, match="no 0x00 byte ending key part 's'"):
        sd.deserialize((b"abcdefg", {b"cf:v": b"\x00\x00\x00\x01"}))
    with pytest.raises(DecodeError, match="row key is 3 bytes"):
        sd.deserialize((b"abc", {}))
    lenient = create_serde("binary", sd.mapping, {"serde.on.error": "null"})
    batch = rows_to_batch([(b"abc", {}), (b"a\x00\x00\x00", {}), (b"a\x00\x00\x00\x00\x01z", {})], ["cf:v"])
    assert lenient.deserialize_batch(batch).to_pylist() == [
        {"s": None, "n": None, "t": None, "v": None},
        {"s": None, "n": None, "t": None, "v": None},
        {"s": "a", "n": 1, "t": "z", "v": None},
    ]


PART = st.binary(max_size=6)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(PART, PART, PART), max_size=8), st.lists(st.binary(max_size=12), max_size=8))
def test_terminated_split_row_and_batch_agree(parts, keys):
    layout = CompositeKey(["a", "b", "c"], [TERMINATED, 2, None])
    joined = []
    for a, b, c in parts:
        try:
            joined.append(layout.join([a, b, c]))
        except ValueError:
            assert b"\x00" in a or len(b) != 2
    candidates = joined + keys
    arrays, bad = layout.split_array(pa.array(candidates, pa.binary()))
    for i, key in enumerate(candidates):
        try:
            expect = layout.split(key)
        except ValueError:
            assert bad[i]
            continue
        assert not bad[i]
        assert [arr[i].as_py() for arr in arrays] == expect
        assert layout.join(expect) == key


def test_terminated_part_key_ranges():
    sd = _terminated()
    layout = KeyLayout.from_serde(sd)
    both = push_filters([EqualTo(("s",), "ab"), EqualTo(("n",), 5)], sd)
    assert both.residual == []
    assert both.key_ranges == [(b"ab\x00\x00\x00\x00\x05", b"ab\x00\x00\x00\x00\x06")]
    one = push_filters([EqualTo(("s",), "ab")], sd)
    assert one.residual == [] and one.key_ranges == [(b"ab\x00", b"ab\x01")]
    # A range or a prefix on the terminated part narrows nothing it cannot honour exactly.
    ranged = push_filters([GreaterThan(("s",), "ab")], sd)
    assert ranged.key_ranges is None and len(ranged.residual) == 1
    starts = push_filters([StringStartsWith(("s",), "a")], sd)
    assert len(starts.residual) == 1
    assert layout.parts[0].width == TERMINATED


# -- Avro: schemas named by an option, honoured by any SerDe, the row key too -----


def test_avro_schema_named_by_an_option():
    for key in ("avroSchema", "avroschema"):  # Spark lower-cases option names
        m = load_mapping(AVRO_CATALOG, {key: USER_SCHEMA})
        assert m.column("col1").type == parse_type("struct<name:string,favorite_number:int,favorite_color:string>")
        assert m.column("col0").kind == ColumnKind.KEY and m.column("col0").type.name == "struct"
    with pytest.raises(MappingError, match="names an option holding the schema"):
        load_mapping(AVRO_CATALOG, {})
    inline = json.loads(json.dumps(AVRO_CATALOG))
    inline["columns"]["col1"]["avro"] = json.loads(USER_SCHEMA)
    inline["columns"]["col0"]["avro"] = USER_SCHEMA
    assert load_mapping(inline).column("col1").options["avro.schema"]["name"] == "User"


@pytest.mark.parametrize("serde_name", ["binary", "string", "avro"])
def test_default_source_suite_avro_table_without_serde_avro(serde_name):
    writer = create_serde("binary", AVRO_WRITE_CATALOG)
    encoded = [writer.serialize((_avro_bytes(_user(i)), _avro_bytes(_user(i)))) for i in range(256)]
    reader = create_serde(serde_name, AVRO_CATALOG, {"avroSchema": USER_SCHEMA})
    assert reader.ddl == (
        "`col0` STRUCT<`name`: STRING, `favorite_number`: INT, `favorite_color`: STRING>, "
        "`col1` STRUCT<`name`: STRING, `favorite_number`: INT, `favorite_color`: STRING>"
    )
    rows = [reader.deserialize(e) for e in encoded]
    assert rows[5] == (_user(5), _user(5))  # the row key is decoded as Avro, not read as a string
    batch = reader.deserialize_batch(rows_to_batch(encoded, reader.scan_columns))
    assert batch.to_pylist() == [{"col0": r[0], "col1": r[1]} for r in rows]
    # "avro filtered query": col1.name = 'name005' OR col1.name <= 'name005' keeps 6 rows
    assert sum(1 for _, user in rows if user["name"] <= "name005") == 6
    # and writing through the Avro catalog gives the same bytes back
    assert [reader.serialize(r) for r in rows] == encoded


def test_avro_key_is_not_pushed_down():
    reader = create_serde("binary", AVRO_CATALOG, {"avroSchema": USER_SCHEMA})
    result = push_filters([EqualTo(("col0",), "name001")], reader)
    assert result.key_ranges is None and len(result.residual) == 1


def test_per_column_serdes_by_registered_name():
    cat = {"rowkey": "key", "columns": {
        "k": {"cf": "rowkey", "col": "key", "type": "string"},
        "d": {"cf": "cf", "col": "d", "type": "double", "serdes": "string"},
        "j": {"cf": "cf", "col": "j", "type": "map<string,array<int>>", "serdes": "json"},
        "b": {"cf": "cf", "col": "b", "type": "int"},
    }}
    sd = create_serde("binary", cat)
    (key, cells), = _both_paths(sd, [("r1", 2.5, {"a": [1, None]}, 7)])
    assert cells == {b"cf:d": b"2.5", b"cf:j": b'{"a":[1,null]}', b"cf:b": b"\x00\x00\x00\x07"}
    bad = json.loads(json.dumps(cat))
    bad["columns"]["d"]["serdes"] = "no_such_serde"
    with pytest.raises(MappingError, match="column 'd'.*unknown SerDe"):
        create_serde("binary", bad)


@pytest.mark.parametrize("entry, message", [
    ({"type": "record", "fields": [{}]}, "invalid Avro schema"),
    ({"type": "array"}, "invalid Avro schema"),
    (5, "must be JSON text or a dict"),
    ("notSet", "names an option holding the schema"),
    ('{"type": ', "invalid Avro schema JSON"),
])
def test_bad_avro_entries_name_the_column(entry, message):
    cat = {"rowkey": "k", "columns": {"k": {"cf": "rowkey", "col": "k"}, "a": {"cf": "c", "col": "a", "avro": entry}}}
    with pytest.raises(MappingError, match=message) as err:
        parse_catalog(cat)
    assert err.value.position == "columns.a.avro"
