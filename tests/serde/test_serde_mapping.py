"""Column mappings: each form parses into the same model, and errors name the token and position."""

from __future__ import annotations

import json

import pytest

from serde import (
    ColumnKind,
    MappingError,
    create_serde,
    load_mapping,
    parse_catalog,
    parse_hive_mapping,
    parse_spark_mapping,
    parse_type,
)
from storage.errors import InvalidArgument


def test_hive_mapping_with_columns_and_types():
    m = parse_hive_mapping(
        ":key,cf:a#b,cf:b#s,cf:,:timestamp, cf:c#binary , cf:d#string",
        "id,a,b,rest,ts,c,d",
        "string:int:decimal(10,2):map<string,int>:timestamp:bigint:date",
    )
    kinds = [c.kind for c in m.columns]
    assert kinds == [
        ColumnKind.KEY,
        ColumnKind.CELL,
        ColumnKind.CELL,
        ColumnKind.FAMILY,
        ColumnKind.TIMESTAMP,
        ColumnKind.CELL,
        ColumnKind.CELL,
    ]
    assert [c.storage for c in m.columns] == [None, "binary", "string", None, None, "binary", "string"]
    assert str(m.column("b").type) == "decimal(10,2)"
    assert str(m.column("rest").type) == "map<string,int>"
    assert m.scan_columns == ["cf:a", "cf:b", "cf", "cf:c", "cf:d"]
    assert m.needs_timestamps
    assert m.default_storage == "string"  # Hive's default


def test_hive_mapping_defaults_and_family_storage_pair():
    m = parse_hive_mapping(":key,cf:q,f:#s:b")
    assert m.names == ["key", "cf_q", "f"]
    assert str(m.column("cf_q").type) == "string"
    fam = m.column("f")
    assert (fam.key_storage, fam.storage) == ("string", "binary")
    assert str(fam.type) == "map<string,string>"


def test_hive_mapping_from_properties_and_default_storage_type():
    props = {
        "hbase.columns.mapping": ":key,cf:n",
        "columns": "k,n",
        "columns.types": "string,int",
        "hbase.table.default.storage.type": "binary",
    }
    sd = create_serde("string", None, props)
    assert sd.storage == "binary"  # an explicit table property beats the SerDe default
    assert sd.serialize(("r", 7)) == (b"r", {b"cf:n": b"\x00\x00\x00\x07"})


@pytest.mark.parametrize(
    "mapping,columns,types,token,position",
    [
        (":key,cf:a#x", "k,a", "string:int", "x", 10),
        (":key,cfa", "k,a", "string:int", "cfa", 5),
        (":key,:stamp", "k,a", "string:int", ":stamp", 5),
        (":key,cf:a", "k,a", "string:integr", "integr", 7),
        (":key,cf:a", "k,a", "string:int:int", "int", 11),
        (":key,cf:a,cf:b", "k,a", None, "cf:b", None),
        (":key,cf:a,:key", "k,a,b", None, "b", None),
        (":key,:fam:", "k,a", None, ":fam:", 5),
        (":key,cf:a#", "k,a", None, "cf:a#", 5),
        (":key,:", "k,a", None, ":", 5),
    ],
)
def test_hive_mapping_errors_name_the_token(mapping, columns, types, token, position):
    with pytest.raises(MappingError) as err:
        parse_hive_mapping(mapping, columns, types)
    assert isinstance(err.value, InvalidArgument)
    assert err.value.token == token
    assert repr(token) in str(err.value)
    if position is not None:
        assert err.value.position == position
        assert f"position {position}" in str(err.value)


def test_hive_family_needs_map_type_and_timestamp_needs_time_type():
    with pytest.raises(MappingError) as err:
        parse_hive_mapping(":key,cf:", "k,m", "string:int")
    assert err.value.token == "cf:"
    with pytest.raises(MappingError) as err:
        parse_hive_mapping(":key,cf:a,:timestamp", "k,a,t", "string:int:string")
    assert err.value.token == ":timestamp"


def test_spark_string_form():
    m = parse_spark_mapping("key STRING :key, n INT cf:n, s STRING cf:s#s, m MAP<STRING, BIGINT> f:, `odd name` DOUBLE cf:o#o")
    assert m.names == ["key", "n", "s", "m", "odd name"]
    assert m.default_storage == "binary"  # hbase-spark's Bytes encoding
    assert str(m.column("m").type) == "map<string,bigint>"
    assert m.column("odd name").encoding == "ordered"
    assert m.column("s").storage == "string"
    sd = create_serde("binary", m)
    assert sd.ddl == "`key` STRING, `n` INT, `s` STRING, `m` MAP<STRING, BIGINT>, `odd name` DOUBLE"
    assert load_mapping("key STRING :key, n INT cf:n").source == "spark"
    assert load_mapping(":key,cf:n").source == "hive"


@pytest.mark.parametrize(
    "text,token,position",
    [
        ("key STRING :key, n INTT cf:n", "INTT", 19),
        ("key STRING :key, n INT", "<end>", 22),
        ("key STRING :key n INT cf:n", "n", 16),
        ("key STRING :key, n INT cf:n#q", "q", 28),
        ("key STRING :key, , n INT cf:n", ",", 17),
        ("key DECIMAL(50,2) :key", "DECIMAL(50,2)", 4),
        ("key MAP<STRING INT> :key", "INT", 15),
    ],
)
def test_spark_form_errors_name_the_token(text, token, position):
    with pytest.raises(MappingError) as err:
        parse_spark_mapping(text)
    assert err.value.token == token
    assert err.value.position == position


CATALOG = {
    "table": {"namespace": "default", "name": "t"},
    "rowkey": "k1:k2",
    "columns": {
        "col0": {"cf": "rowkey", "col": "k1", "type": "string", "length": 4},
        "col1": {"cf": "cf1", "col": "c1", "type": "int"},
        "col2": {"cf": "rowkey", "col": "k2", "type": "bigint"},
        "col3": {"cf": "cf1", "col": "", "type": "map<string,string>"},
        "col4": {"col": ":timestamp", "type": "bigint"},
        "col5": {"cf": "cf2", "col": "o", "type": "double", "encoding": "ordered"},
    },
}


def test_catalog_parses_composite_key_and_extras():
    m = parse_catalog(json.dumps(CATALOG))
    assert (m.namespace, m.table) == ("default", "t")
    assert m.names == ["col0", "col1", "col2", "col3", "col4", "col5"]
    assert m.rowkey.parts == ("col0", "col2")
    assert m.rowkey.delimiter is None
    assert m.column("col0").length == 4
    assert m.column("col3").kind == ColumnKind.FAMILY
    assert m.column("col4").kind == ColumnKind.TIMESTAMP
    assert m.column("col5").encoding == "ordered"
    assert parse_catalog(CATALOG) == m  # a dict works as well as JSON text


def test_single_part_catalog_rowkey_is_the_plain_key():
    m = parse_catalog({"rowkey": "key", "columns": {"k": {"cf": "rowkey", "col": "key", "type": "string"}, "v": {"cf": "d", "col": "v"}}})
    assert m.column("k").kind == ColumnKind.KEY
    assert m.rowkey is None
    assert str(m.column("v").type) == "string"


@pytest.mark.parametrize(
    "mutate,token,position",
    [
        (lambda c: c["columns"]["col1"].update(type="strng"), "strng", "columns.col1.type:0"),
        (lambda c: c["columns"]["col1"].update(type="map<string int>"), "int", "columns.col1.type:11"),
        (lambda c: c["columns"]["col1"].update(colour="red"), "colour", "columns.col1.colour"),
        (lambda c: c.update(rowkey="k1:k2:k3"), "k3", "rowkey"),
        (lambda c: c.update(rowkey="k1:k3"), "k2", "columns.col2.col"),
        (lambda c: c["columns"]["col0"].update(col="kx"), "kx", "columns.col0.col"),
        (lambda c: c["table"].update(tableCoder="Avro"), "Avro", "table.tableCoder"),
        (lambda c: c["columns"]["col1"].update(storage="hex"), "hex", "columns.col1"),
        (lambda c: c.update(extra=1), "extra", "extra"),
    ],
)
def test_catalog_errors_name_token_and_path(mutate, token, position):
    catalog = json.loads(json.dumps(CATALOG))
    mutate(catalog)
    with pytest.raises(MappingError) as err:
        parse_catalog(catalog)
    assert err.value.token == token
    assert err.value.position == position


def test_catalog_json_syntax_error_names_offset():
    text = '{"rowkey": "k", "columns": {"a": {"cf": "rowkey" "col": "k"}}}'
    with pytest.raises(MappingError) as err:
        parse_catalog(text)
    assert err.value.position == text.index('"col"')
    assert err.value.token.startswith('"col"')


def test_fixed_composite_key_needs_widths_and_the_serde_checks_it():
    catalog = {
        "rowkey": "a:b",
        "columns": {
            "a": {"cf": "rowkey", "col": "a", "type": "binary"},
            "b": {"cf": "rowkey", "col": "b", "type": "int"},
        },
    }
    with pytest.raises(MappingError) as err:
        create_serde("binary", catalog)
    assert err.value.token == "a"
    # A string part of no length ends at 0x00, as in hbase-spark.
    catalog["columns"]["a"]["type"] = "string"
    assert create_serde("binary", catalog).serialize(("x", 5)) == (b"x\x00\x00\x00\x00\x05", {})
    catalog["rowkey_delimiter"] = "|"
    sd = create_serde("string", catalog)  # delimited: no widths needed
    assert sd.serialize(("x", 5)) == (b"x|5", {})


def test_type_strings():
    assert parse_type("LONG").name == "bigint"
    assert parse_type("short").name == "smallint"
    assert parse_type("varchar(20)").name == "string"
    assert parse_type("decimal").precision == 10
    assert parse_type("STRUCT<a: INT, b: ARRAY<STRING>>").ddl() == "STRUCT<`a`: INT, `b`: ARRAY<STRING>>"
    assert parse_type("timestamp").ddl() == "TIMESTAMP"
    assert parse_type("timestamp").ddl(timestamp_ntz=True) == "TIMESTAMP_NTZ"
    with pytest.raises(MappingError) as err:
        parse_type("map<string,int")
    assert err.value.position == len("map<string,int")
    with pytest.raises(MappingError) as err:
        parse_type("array<int> x")
    assert (err.value.token, err.value.position) == ("x", 11)


def test_duplicate_names_and_missing_key():
    with pytest.raises(MappingError) as err:
        parse_spark_mapping("k STRING :key, a INT cf:a, a INT cf:b")
    assert err.value.token == "a"
    with pytest.raises(MappingError):
        parse_spark_mapping("a INT cf:a")
    with pytest.raises(MappingError) as err:
        create_serde("binary", "k STRING :key, a INT cf:a, b INT cf:a")
    assert err.value.token == "cf:a"
