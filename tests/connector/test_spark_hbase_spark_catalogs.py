"""hbase-spark catalogs and types through ``format("regionscan")``, with DefaultSourceSuite's data.

DefaultSourceSuite's table t3 (every primitive type written with HBase
``Bytes``, a timestamp of 1234567890000 ms), its Avro table (the row key and
a cell hold the same Avro record, read with ``"avro": "avroSchema"`` and
option ``avroSchema``), HBaseCatalogSuite's composite key (a string part of
no length before a double) and its trailing-comma mapping string.
"""

from __future__ import annotations

import datetime as dt
import io
import json
import struct

import fastavro
import pytest

import connector
import storage
from serde import create_serde

pytestmark = pytest.mark.spark

TIMESTAMP_MS = 1234567890000
USER_SCHEMA = json.dumps({
    "namespace": "example.avro", "type": "record", "name": "User",
    "fields": [
        {"name": "name", "type": "string"},
        {"name": "favorite_number", "type": ["int", "null"]},
        {"name": "favorite_color", "type": ["string", "null"]},
    ],
})
T3_CATALOG = json.dumps({
    "table": {"namespace": "default", "name": "t3"},
    "rowkey": "key",
    "columns": {
        "KEY_FIELD": {"cf": "rowkey", "col": "key", "type": "string"},
        "BINARY_FIELD": {"cf": "c", "col": "binary", "type": "binary"},
        "BOOLEAN_FIELD": {"cf": "c", "col": "boolean", "type": "boolean"},
        "BYTE_FIELD": {"cf": "c", "col": "byte", "type": "tinyint"},
        "SHORT_FIELD": {"cf": "c", "col": "short", "type": "short"},
        "INT_FIELD": {"cf": "c", "col": "int", "type": "int"},
        "LONG_FIELD": {"cf": "c", "col": "long", "type": "long"},
        "FLOAT_FIELD": {"cf": "c", "col": "float", "type": "float"},
        "DOUBLE_FIELD": {"cf": "c", "col": "double", "type": "double"},
        "DATE_FIELD": {"cf": "c", "col": "date", "type": "date"},
        "TIMESTAMP_FIELD": {"cf": "c", "col": "timestamp", "type": "timestamp"},
        "STRING_FIELD": {"cf": "c", "col": "string", "type": "string"},
    },
})
AVRO_CATALOG = json.dumps({
    "table": {"namespace": "default", "name": "avrotable"},
    "rowkey": "key",
    "columns": {
        "col0": {"cf": "rowkey", "col": "key", "avro": "avroSchema"},
        "col1": {"cf": "cf1", "col": "col1", "avro": "avroSchema"},
    },
})
COMPOSITE_CATALOG = json.dumps({
    "table": {"namespace": "default", "name": "htable"},
    "rowkey": "key1:key2",
    "columns": {
        "col1": {"cf": "rowkey", "col": "key1", "type": "string"},
        "col2": {"cf": "rowkey", "col": "key2", "type": "double"},
        "col3": {"cf": "cf1", "col": "col2", "type": "map<int, array<double>>", "serdes": "json"},
    },
})


def _avro(i: int) -> bytes:
    out = io.BytesIO()
    record = {"name": f"name{i:03d}", "favorite_number": i, "favorite_color": f"color{i:03d}"}
    fastavro.schemaless_writer(out, fastavro.parse_schema(json.loads(USER_SCHEMA)), record)
    return out.getvalue()


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("hbase_spark") / "root")
    conn = storage.connect(path)
    t3 = conn.create_table("t3", {"c": {}})
    t3.put(b"row", {
        b"c:binary": bytes([1, 2, 3]), b"c:boolean": b"\xff", b"c:byte": bytes([127]),
        b"c:short": struct.pack(">h", 32767), b"c:int": struct.pack(">i", 1000000),
        b"c:long": struct.pack(">q", 10000000000), b"c:float": struct.pack(">f", 0.5),
        b"c:double": struct.pack(">d", 0.125), b"c:date": struct.pack(">q", TIMESTAMP_MS),
        b"c:timestamp": struct.pack(">q", TIMESTAMP_MS), b"c:string": b"string",
    })
    avro = conn.create_table("avrotable", {"cf1": {}}, split_keys=[_avro(100), _avro(200)])
    with avro.batch() as b:
        for i in range(256):
            b.put(_avro(i), {b"cf1:col1": _avro(i)})
    composite = create_serde("binary", COMPOSITE_CATALOG)
    htable = conn.create_table("htable", {"cf1": {}})
    with htable.batch() as b:
        for i in range(20):
            b.put(*composite.serialize((f"k{i % 4}", i / 2, {i: [float(i)]})))
    t1 = conn.create_table("t1", {"c": {}})
    for key, a, bee in ((b"get1", b"foo1", b"1"), (b"get2", b"foo2", b"4"), (b"get3", b"foo3", b"8")):
        t1.put(key, {b"c:a": a, b"c:b": bee, b"c:c": b"\x00" + a})
    for table in (t3, avro, htable, t1):
        table.flush()
    conn.close()
    return path


def _read(spark, **options):
    return spark.read.format("regionscan").options(**options).load()


def test_t3_types_and_timestamp_type(spark, root):
    df = _read(spark, root=root, catalog=T3_CATALOG)
    types = dict(df.dtypes)
    assert types["TIMESTAMP_FIELD"] == "timestamp" and types["DATE_FIELD"] == "date"  # TimestampType, as hbase-spark
    row = df.collect()[0]
    assert row.BINARY_FIELD == bytearray([1, 2, 3]) and row.BOOLEAN_FIELD is True
    assert (row.BYTE_FIELD, row.SHORT_FIELD, row.INT_FIELD, row.LONG_FIELD) == (127, 32767, 1000000, 10000000000)
    assert (row.FLOAT_FIELD, row.DOUBLE_FIELD, row.STRING_FIELD) == (0.5, 0.125, "string")
    instant = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(milliseconds=TIMESTAMP_MS)
    # Spark gives TimestampType as the session's (UTC) wall clock; getTime == timestamp in the suite
    assert row.TIMESTAMP_FIELD.replace(tzinfo=dt.timezone.utc) == instant
    assert abs((dt.datetime.combine(row.DATE_FIELD, dt.time(), dt.timezone.utc) - instant).total_seconds()) <= 86400
    # A timestamp literal is pushed to the engine and selects the row exactly (pushed whatever share
    # of the one-row table it keeps: maxkept=1).
    pushed = _read(spark, root=root, catalog=T3_CATALOG, **{"regionscan.pushdown.decoded.maxkept": "1"})
    hit = pushed.where(f"TIMESTAMP_FIELD = timestamp'{instant:%Y-%m-%d %H:%M:%S}'")
    assert hit.count() == 1
    plan = connector.explain(hit)
    assert any("TIMESTAMP_FIELD" in p for p in plan.pushed), str(plan)
    assert df.where("TIMESTAMP_FIELD > timestamp'2009-02-14 00:00:00'").count() == 0
    ntz = _read(spark, root=root, catalog=T3_CATALOG, **{"regionscan.timestamp.ntz": "true"})
    assert dict(ntz.dtypes)["TIMESTAMP_FIELD"] == "timestamp_ntz"
    assert ntz.collect()[0].TIMESTAMP_FIELD == instant.replace(tzinfo=None)


def test_avro_catalog_with_schema_option_and_avro_row_key(spark, source_format, root):
    options = dict(root=root, catalog=AVRO_CATALOG, avroSchema=USER_SCHEMA)  # no serde=avro
    df = spark.read.format(source_format).options(**options).load()
    assert dict(df.dtypes)["col0"] == "struct<name:string,favorite_number:int,favorite_color:string>"
    # struct columns come as Spark structs from either source (Arrow struct vectors on the JVM)
    five = df.where("col1.name = 'name005' OR col1.name <= 'name005'").select("col0", "col1.favorite_color")
    got = sorted((r.col0.name, r.favorite_color) for r in five.collect())
    assert got == [(f"name{i:03d}", f"color{i:03d}") for i in range(6)]
    seven = df.where("col1.name <= 'name005' OR col1.name LIKE '%name007%'")
    assert seven.count() == 7
    assert df.count() == 256


def test_composite_key_with_a_string_part_before_a_double(spark, root):
    df = _read(spark, root=root, catalog=COMPOSITE_CATALOG)
    rows = sorted((r.col1, r.col2) for r in df.collect())
    assert rows == sorted((f"k{i % 4}", i / 2) for i in range(20))
    one = df.where("col1 = 'k1' AND col2 = 4.5")
    assert [(r.col1, r.col2, dict(r.col3)) for r in one.collect()] == [("k1", 4.5, {9: [9.0]})]
    plan = connector.explain(one)
    assert "col1 = 'k1'" in plan.pushed and plan.key_ranges == [("k1\\x00", "k1\\x01")], str(plan)


def test_mapping_string_with_a_trailing_comma(spark, root):
    mapping = "KEY_FIELD STRING :key, A_FIELD STRING c:a, B_FIELD STRING c:b, C_FIELD BINARY c:c,"
    df = _read(spark, root=root, table="t1", **{"hbase.columns.mapping": mapping})
    assert df.columns == ["KEY_FIELD", "A_FIELD", "B_FIELD", "C_FIELD"]
    got = sorted(tuple(r) for r in df.where("KEY_FIELD = 'get1' OR KEY_FIELD = 'get3'").collect())
    assert got == [("get1", "foo1", "1", bytearray(b"\x00foo1")), ("get3", "foo3", "8", bytearray(b"\x00foo3"))]


def test_spark_catalog_table_with_nested_columns_in_a_namespace(spark, tmp_path):
    """CREATE TABLE through RegionScanCatalog with struct, map and array columns (a binary mapping
    derived from the schema: the nested cells hold Avro datums) in namespace NAMESPACE; the rows
    read back through the catalog and through format('regionscan_python') naming NAMESPACE:TABLE."""
    root = str(tmp_path / "root")
    spark.conf.set("spark.sql.catalog.rsnested", "regionscan.spark.RegionScanCatalog")
    spark.conf.set("spark.sql.catalog.rsnested.root", root)
    try:
        spark.sql("CREATE NAMESPACE rsnested.NAMESPACE")
        spark.sql("CREATE TABLE rsnested.NAMESPACE.TABLE (k STRING, `cf:s` STRUCT<a:INT,b:STRING>, "
                  "`cf:m` MAP<INT,ARRAY<DOUBLE>>, `cf:a` ARRAY<STRUCT<t:TINYINT>>)")
        spark.sql("INSERT INTO rsnested.NAMESPACE.TABLE VALUES "
                  "('r1', named_struct('a', 1, 'b', 'x'), map(1, array(1.0D, null)), array(named_struct('t', 3Y))), "
                  "('r2', null, map(), array())")
        want = [("r1", (1, "x"), {1: [1.0, None]}, [(3,)]), ("r2", None, {}, [])]

        def rows(df):
            return [(r[0], None if r[1] is None else tuple(r[1]), r[2], [tuple(e) for e in r[3]])
                    for r in df.orderBy("k").collect()]

        assert rows(spark.table("rsnested.NAMESPACE.TABLE")) == want
        assert spark.sql("SELECT k FROM rsnested.NAMESPACE.TABLE WHERE `cf:s`.b = 'x'").collect()[0][0] == "r1"
        assert [r.k for r in spark.sql("SELECT k FROM rsnested.NAMESPACE.TABLE WHERE `cf:s` IS NULL").collect()] == ["r2"]
        python = spark.read.format("regionscan_python").option("root", root).option("hbase.table", "NAMESPACE:TABLE")
        assert rows(python.load()) == want
    finally:
        spark.conf.unset("spark.sql.catalog.rsnested")
        spark.conf.unset("spark.sql.catalog.rsnested.root")
