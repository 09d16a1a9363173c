"""hbase-spark's DefaultSourceSuite, its tables t1 (string key) and t2 (int key) written through
``format("regionscan")`` and its queries run on views registered once: the rows it expects,
and the row-key points and ranges it expects pushed, read back from the scan plan (overlapping
ranges merged, where hbase-spark keeps two; int keys in 4-byte ranges, non-negative ones
before negative ones, as their bytes sort).

Then the suite's Avro table (256 Avro records written as binary cells, read back as structs,
filtered on their fields and written to a second table), HBaseCatalogSuite's catalog (map,
array and struct columns in a binary catalog) and its 'convert' case (``hbase.table`` =
``NAMESPACE:TABLE`` beside a mapping string), through both sources where they read.

Ranges are shown as regionscan keeps them, half-open ``[start, stop)`` in HBase's
``Bytes.toStringBinary`` form: the point ``get1`` is ``[get1, get1\\x00)``, ``KEY_FIELD <= 'get3'``
stops at ``get3\\x00``.
"""

from __future__ import annotations

import json
import sys

import pytest

import connector
from hbase_spark_catalogs import CATALOG_SUITE as CATALOG

pytestmark = pytest.mark.spark


def _catalog(name: str, key_type: str) -> str:
    return json.dumps({
        "table": {"namespace": "default", "name": name},
        "rowkey": "key",
        "columns": {
            "KEY_FIELD": {"cf": "rowkey", "col": "key", "type": key_type},
            "A_FIELD": {"cf": "c", "col": "a", "type": "string"},
            "B_FIELD": {"cf": "c", "col": "b", "type": "string"},
            "I_FIELD": {"cf": "c", "col": "i", "type": "int"},
            "Z_FIELD": {"cf": "c", "col": "z", "type": "string"},
        },
    })


# DefaultSourceSuite's rows: c:a foo1..foo5, c:b the text 1 4 8 10 8, c:i the same as ints, c:z on two rows
CELLS = [("foo1", "1", 1, None), ("foo2", "4", 4, "FOO"), ("foo3", "8", 8, None), ("foo4", "10", 10, "BAR"),
         ("foo5", "8", 8, None)]
T1 = [(f"get{i + 1}",) + c for i, c in enumerate(CELLS)]
T2 = [(i + 1,) + c for i, c in enumerate(CELLS)]


@pytest.fixture(scope="module")
def views(spark, tmp_path_factory):
    """t1 and t2 written through format("regionscan") (newtable), registered once as hbaseTable1/2."""
    root = str(tmp_path_factory.mktemp("default_source_suite") / "root")
    names = {}
    for table, key_type, rows, view in (("t1", "string", T1, "hbaseTable1"), ("t2", "int", T2, "hbaseTable2")):
        catalog = _catalog(table, key_type)
        ddl = f"KEY_FIELD {key_type.upper()}, A_FIELD STRING, B_FIELD STRING, I_FIELD INT, Z_FIELD STRING"
        (spark.createDataFrame(rows, ddl).write.format("regionscan")
         .option("root", root).option("catalog", catalog).option("newtable", "5").save())  # ErrorIfExists
        spark.read.format("regionscan").option("root", root).option("catalog", catalog).load() \
            .createOrReplaceTempView(view)
        names[view] = catalog
    return root, names


def _sql(spark, jvm, text):
    """(rows, the scan plan, rows the engine sent, whether Spark still filters)."""
    df = spark.sql(text)
    executed = df._jdf.queryExecution().executedPlan().toString()
    before = json.loads(jvm.statsJson(sys.executable, ""))["counters"].get("rows_sent", 0)
    rows = [tuple(r) for r in df.collect()]
    sent = json.loads(jvm.statsJson(sys.executable, ""))["counters"]["rows_sent"] - before
    return rows, connector.explain(df), sent, "Filter" in executed.split("BatchScan")[0]


def _keys(rows):
    return sorted(r[0] for r in rows)


def test_the_tables_round_trip_through_the_jvm_source(spark, views):
    assert sorted(tuple(r) for r in spark.sql("SELECT * FROM hbaseTable1").collect()) == T1
    assert sorted(tuple(r) for r in spark.sql("SELECT * FROM hbaseTable2").collect()) == T2
    root, names = views
    with pytest.raises(Exception, match="table t1 already exists"):  # the suite's tables are not written twice
        spark.createDataFrame([("get9",)], "KEY_FIELD STRING").write.format("regionscan") \
            .option("root", root).option("catalog", names["hbaseTable1"]).save()


# (query, expected row keys, expected key ranges or None for the whole table, Spark filters again)
QUERIES = [
    # rowKey points only
    ("SELECT KEY_FIELD, B_FIELD, A_FIELD FROM hbaseTable1 WHERE (KEY_FIELD = 'get1' or KEY_FIELD = 'get2' or KEY_FIELD = 'get3')",
     ["get1", "get2", "get3"], [("get1", "get1\\x00"), ("get2", "get2\\x00"), ("get3", "get3\\x00")], False),
    # a duplicate point is scanned once
    ("SELECT KEY_FIELD, B_FIELD, A_FIELD FROM hbaseTable1 WHERE (KEY_FIELD = 'get1' or KEY_FIELD = 'get2' or KEY_FIELD = 'get1')",
     ["get1", "get2"], [("get1", "get1\\x00"), ("get2", "get2\\x00")], False),
    # cell points only: an engine filter list, the whole key range
    ("SELECT KEY_FIELD, B_FIELD, A_FIELD FROM hbaseTable1 WHERE (B_FIELD = '4' or B_FIELD = '10' or A_FIELD = 'foo1')",
     ["get1", "get2", "get4"], None, False),
    # two ranges by OR
    ("SELECT KEY_FIELD, B_FIELD, A_FIELD FROM hbaseTable1 WHERE ( KEY_FIELD < 'get2' or KEY_FIELD > 'get3')",
     ["get1", "get4", "get5"], [("", "get2"), ("get3\\x00", None)], False),
    # one range by AND
    ("SELECT KEY_FIELD, B_FIELD, A_FIELD FROM hbaseTable1 WHERE (KEY_FIELD <= 'get3' and KEY_FIELD >= 'get2')",
     ["get2", "get3"], [("get2", "get3\\x00")], False),
    # a point and a range, each with a cell test
    ("SELECT KEY_FIELD FROM hbaseTable1 WHERE (KEY_FIELD = 'get1' and B_FIELD < '3') or (KEY_FIELD >= 'get3' and B_FIELD = '8')",
     ["get1", "get3", "get5"], [("get1", "get1\\x00"), ("get3", None)], False),
    # two complete ranges that do not merge
    ("SELECT KEY_FIELD, B_FIELD, A_FIELD FROM hbaseTable1 WHERE ( KEY_FIELD >= 'get1' and KEY_FIELD <= 'get2') or"
     "( KEY_FIELD > 'get3' and KEY_FIELD <= 'get5')",
     ["get1", "get2", "get4", "get5"], [("get1", "get2\\x00"), ("get3\\x00", "get5\\x00")], False),
    # OR of a key and a column: no key bound (HBASE-14406)
    ("SELECT KEY_FIELD, B_FIELD, A_FIELD FROM hbaseTable1 WHERE ( KEY_FIELD >= 'get1' or A_FIELD <= 'foo2') or"
     "( KEY_FIELD > 'get3' or B_FIELD <= '4')",
     ["get1", "get2", "get3", "get4", "get5"], None, False),
    ("SELECT KEY_FIELD, B_FIELD, A_FIELD FROM hbaseTable1 WHERE ( B_FIELD > '4' or A_FIELD <= 'foo2') or"
     "( A_FIELD > 'foo2' or B_FIELD < '4')",
     ["get1", "get2", "get3", "get4", "get5"], None, False),
    ("SELECT KEY_FIELD, B_FIELD, A_FIELD FROM hbaseTable1 WHERE ( KEY_FIELD >= 'get4' or A_FIELD <= 'foo2' )",
     ["get1", "get2", "get4", "get5"], None, False),
    # a key range AND an OR of columns (HBASE-26863)
    ("SELECT KEY_FIELD, B_FIELD, A_FIELD FROM hbaseTable1 WHERE ( KEY_FIELD >= 'get1' AND KEY_FIELD <= 'get3' ) AND"
     " (A_FIELD = 'foo1' OR B_FIELD = '8')",
     ["get1", "get3"], [("get1", "get3\\x00")], False),
    # int keys (Bytes.toBytes: big-endian two's complement, so negatives sort after positives)
    ("SELECT KEY_FIELD, B_FIELD, A_FIELD FROM hbaseTable2 WHERE ( KEY_FIELD >= 1 and KEY_FIELD <= 2) or"
     "( KEY_FIELD > 3 and KEY_FIELD <= 5)",
     [1, 2, 4, 5], [("\\x00\\x00\\x00\\x01", "\\x00\\x00\\x00\\x02\\x00"), ("\\x00\\x00\\x00\\x03\\x00", "\\x00\\x00\\x00\\x05\\x00")],
     False),
    ("SELECT KEY_FIELD, B_FIELD, A_FIELD FROM hbaseTable2 WHERE ( KEY_FIELD < 2 or KEY_FIELD > 4)",
     [1, 5], [("\\x00\\x00\\x00\\x00", "\\x00\\x00\\x00\\x02"), ("\\x00\\x00\\x00\\x04\\x00", "\\x7F\\xFF\\xFF\\xFF\\x00"),
              ("\\x80\\x00\\x00\\x00", "\\xFF\\xFF\\xFF\\xFF\\x00")], False),  # 3 ranges, as hbase-spark's
    ("SELECT KEY_FIELD, B_FIELD, A_FIELD FROM hbaseTable2 WHERE ( KEY_FIELD < 4 or KEY_FIELD > 2)",
     [1, 2, 3, 4, 5], [("\\x00\\x00\\x00\\x00", "\\x7F\\xFF\\xFF\\xFF\\x00"), ("\\x80\\x00\\x00\\x00", "\\xFF\\xFF\\xFF\\xFF\\x00")],
     False),  # the overlapping ranges merged: every non-negative and every negative int
    # an int column
    ("SELECT KEY_FIELD, B_FIELD, I_FIELD FROM hbaseTable1 where I_FIELD > 4 and I_FIELD < 10",
     ["get3", "get5"], None, False),
]


@pytest.mark.parametrize("query,keys,ranges,spark_filters", QUERIES, ids=[f"q{i}" for i in range(len(QUERIES))])
def test_default_source_suite_query(spark, jvm, views, query, keys, ranges, spark_filters):
    rows, plan, sent, filtered = _sql(spark, jvm, query)
    assert _keys(rows) == keys, query
    assert plan.key_ranges == ranges, str(plan)
    if ranges is None:
        # no key bound: the cell tests ran in the engine, or (values compared decoded) in its worker
        assert plan.engine_filter or plan.decoded, str(plan)
    assert filtered == spark_filters, str(plan)
    assert sent == len(keys)  # the engine applied every condition: Spark dropped nothing


def test_select_only_and_counts(spark, jvm, views):
    rows, plan, sent, filtered = _sql(spark, jvm, "SELECT KEY_FIELD FROM hbaseTable1")
    assert _keys(rows) == [r[0] for r in T1] and plan.key_ranges is None and plan.engine_filter is None
    for view, table in (("hbaseTable1", T1), ("hbaseTable2", T2)):
        counted = spark.sql(f"SELECT count(*) FROM {view}")
        assert "LocalTableScan" in counted._jdf.queryExecution().executedPlan().toString()  # from the block indexes
        assert counted.collect()[0][0] == len(table)
    assert spark.sql("SELECT count(*) FROM hbaseTable1 WHERE KEY_FIELD = 'get1' OR KEY_FIELD > 'get3'").collect()[0][0] == 3
    assert spark.sql("SELECT I_FIELD FROM hbaseTable1 where I_FIELD > 4 and I_FIELD < 10").collect()[0][0] == 8


def test_a_table_that_does_not_exist_fails(spark, views):
    root, _ = views
    with pytest.raises(Exception, match="t1NotThere"):
        spark.read.format("regionscan").option("root", root).option("catalog", _catalog("t1NotThere", "string")) \
            .load().where("KEY_FIELD >= 'get1'").count()


# -- DefaultSourceSuite's Avro table: written as binary cells, read back as Avro records ----------

USER_SCHEMA = json.dumps({  # AvroHBaseKeyRecord.schemaString
    "namespace": "example.avro", "type": "record", "name": "User",
    "fields": [{"name": "name", "type": "string"}, {"name": "favorite_number", "type": ["int", "null"]},
               {"name": "favorite_color", "type": ["string", "null"]}],
})


def _avro_catalog(name: str, write: bool = False) -> str:
    entry = {"type": "binary"} if write else {"avro": "avroSchema"}
    return json.dumps({"table": {"namespace": "default", "name": name}, "rowkey": "key",
                       "columns": {"col0": {"cf": "rowkey", "col": "key", **entry},
                                   "col1": {"cf": "cf1", "col": "col1", **entry}}})


def _user(i: int) -> tuple:
    return (f"name{i:03d}", i, f"color{i:03d}")


@pytest.fixture(scope="module")
def avro_root(spark, tmp_path_factory):
    """'populate avro table': 256 records, each the Avro bytes of AvroHBaseKeyRecord(i) in the row
    key and in cf1:col1, written through format("regionscan") with the binary avroWriteCatalog."""
    import io

    import fastavro

    parsed = fastavro.parse_schema(json.loads(USER_SCHEMA))

    def record(i: int) -> bytes:
        out = io.BytesIO()
        fastavro.schemaless_writer(out, parsed, dict(zip(("name", "favorite_number", "favorite_color"), _user(i))))
        return out.getvalue()

    root = str(tmp_path_factory.mktemp("avro_suite") / "root")
    rows = [(record(i), record(i)) for i in range(256)]
    (spark.createDataFrame(rows, "col0 BINARY, col1 BINARY").write.format("regionscan")
     .option("root", root).option("catalog", _avro_catalog("avrotable", write=True)).option("newtable", "5").save())
    return root


def _with_avro_catalog(spark, source_format, root, name="avrotable"):
    return (spark.read.format(source_format).option("root", root).option("avroSchema", USER_SCHEMA)
            .option("catalog", _avro_catalog(name)).load())


def test_avro_empty_column_and_full_query(spark, source_format, avro_root):
    df = _with_avro_catalog(spark, source_format, avro_root)
    assert dict(df.dtypes) == {"col0": "struct<name:string,favorite_number:int,favorite_color:string>",
                               "col1": "struct<name:string,favorite_number:int,favorite_color:string>"}
    df.createOrReplaceTempView("avrotable")
    assert spark.sql("select count(1) from avrotable").collect()[0][0] == 256
    rows = sorted((tuple(r.col0), tuple(r.col1)) for r in df.collect())  # structs: Arrow struct vectors on the JVM
    assert rows == [(_user(i), _user(i)) for i in range(256)]


def test_avro_filtered_and_or_queries(spark, source_format, avro_root):
    df = _with_avro_catalog(spark, source_format, avro_root)
    r = (df.where("col1.name = 'name005' OR col1.name <= 'name005'")
         .select("col0", "col1.favorite_color", "col1.favorite_number"))
    assert sorted((x.col0.name, x.favorite_color, x.favorite_number) for x in r.collect()) == [
        (f"name{i:03d}", f"color{i:03d}", i) for i in range(6)]
    s = (df.where("col1.name <= 'name005' OR col1.name LIKE '%name007%'")
         .select("col0", "col1.favorite_color", "col1.favorite_number"))
    assert sorted(x.favorite_number for x in s.collect()) == [0, 1, 2, 3, 4, 5, 7]


def test_avro_serialization_and_deserialization_query(spark, avro_root):
    """Records read through the JVM source are written to avrotableInsert (an Avro catalog: the
    struct columns encoded with the schema) through the Python source, and read back: the cells
    hold the very bytes the suite wrote."""
    df = _with_avro_catalog(spark, "regionscan", avro_root)
    (df.write.format("regionscan_python").mode("append").option("root", avro_root)
     .option("avroSchema", USER_SCHEMA).option("catalog", _avro_catalog("avrotableInsert")).option("newtable", "5").save())
    back = _with_avro_catalog(spark, "regionscan", avro_root, "avrotableInsert")
    assert back.count() == 256
    assert sorted(tuple(r.col1) for r in back.collect()) == [_user(i) for i in range(256)]

    def cells(name):
        raw = spark.read.format("regionscan").option("root", avro_root).option("catalog", _avro_catalog(name, True))
        return sorted((bytes(r.col0), bytes(r.col1)) for r in raw.load().collect())

    assert cells("avrotableInsert") == cells("avrotable")


# -- HBaseCatalogSuite ---------------------------------------------------------------------------

# Its catalog (tests/hbase_spark_catalogs.py), as JSON text.
CATALOG_SUITE = json.dumps(CATALOG)
CATALOG_SUITE_TYPES = {  # 'basic' and checkDataType: the types the suite expects of each field
    "col1": "string", "col2": "double", "col3": "binary", "col4": "timestamp", "col5": "double",
    "col6": "map<int,struct<varchar:string>>", "col7": "array<struct<tinYint:tinyint>>",
    "col8": "map<int,array<double>>", "col9": "date", "col10": "timestamp",
}


def _catalog_suite_rows():
    import datetime as dt

    return [(f"k{i % 3}", i / 4, bytes([i]), dt.datetime(2020, 1, 1 + i, 12), i * 0.5,
             {i: (f"v{i}",), -i - 1: None}, [(i % 128,), None] if i % 2 else [],
             {i: [float(i), None]}, dt.date(2020, 2, 1 + i), None if i % 2 else dt.datetime(2021, 3, 4, 5, 6, 7))
            for i in range(12)]


def test_catalog_suite_catalog_with_nested_columns(spark, source_format, tmp_path):
    """The catalog as the suite writes it (no "serdes" on its map/array/struct columns) is written
    through format("regionscan") and reads through either source, the nested columns as Spark's
    map, array and struct types (Arrow map, list and struct vectors on the JVM)."""
    root = str(tmp_path / "root")
    ddl = ", ".join(f"{name} {kind}" for name, kind in CATALOG_SUITE_TYPES.items())
    rows = _catalog_suite_rows()
    (spark.createDataFrame(rows, ddl).write.format("regionscan")
     .option("root", root).option("catalog", CATALOG_SUITE).option("newtable", "3").save())
    df = spark.read.format(source_format).option("root", root).option("catalog", CATALOG_SUITE).load()
    assert dict(df.dtypes) == CATALOG_SUITE_TYPES
    got = sorted(df.collect(), key=lambda r: r.col2)
    assert len(got) == len(rows)
    for row, want in zip(got, rows):
        assert (row.col1, row.col2, bytes(row.col3), row.col4, row.col5) == want[:5]
        assert {k: (None if v is None else tuple(v)) for k, v in row.col6.items()} == want[5]
        assert [None if e is None else tuple(e) for e in row.col7] == want[6]
        assert row.col8 == want[7] and (row.col9, row.col10) == want[8:]
    nested = df.where("col1 = 'k1' AND get(col7, 0).tinYint > 6").select("col2", "col8")
    assert [(r.col2, r.col8) for r in nested.collect()] == [(7 / 4, {7: [7.0, None]})]


# -- NAMESPACE:TABLE beside a mapping string ('convert', 'compatibility') -------------------------

SUITE_MAPPING = "KEY_FIELD STRING :key, A_FIELD STRING c:a, B_FIELD DOUBLE c:b, C_FIELD BINARY c:c,"


def test_convert_names_the_table_in_its_namespace(spark, source_format, tmp_path):
    import storage
    from serde import load_mapping

    mapping = load_mapping(SUITE_MAPPING, {"hbase.table": "NAMESPACE:TABLE"})  # 'convert'
    assert (mapping.namespace, mapping.table) == ("NAMESPACE", "TABLE")
    assert [str(c.type) for c in mapping.columns] == ["string", "string", "double", "binary"]
    plain = load_mapping(SUITE_MAPPING, {"hbase.table": "t1"})  # 'compatibility'
    assert (plain.namespace, plain.table) == ("default", "t1")
    hive = load_mapping(":key,c:a", {"hbase.table.name": "NAMESPACE:TABLE", "columns": "k,a"})  # Hive's form
    assert (hive.namespace, hive.table) == ("NAMESPACE", "TABLE")
    root = str(tmp_path / "root")
    with storage.connect(root) as conn:
        conn.create_namespace("NAMESPACE")
    options = {"root": root, "hbase.table": "NAMESPACE:TABLE", "hbase.columns.mapping": SUITE_MAPPING}
    rows = [("k1", "a", 1.5, bytearray(b"\x00x")), ("k2", "b", -2.0, bytearray(b"y"))]
    (spark.createDataFrame(rows, "KEY_FIELD STRING, A_FIELD STRING, B_FIELD DOUBLE, C_FIELD BINARY")
     .write.format(source_format).mode("append").options(**options).option("newtable", "1").save())
    with storage.connect(root, read_only=True) as conn:
        assert conn.tables(namespace="NAMESPACE") == [b"NAMESPACE:TABLE"] and conn.tables(namespace="default") == []
    got = spark.read.format(source_format).options(**options).load().where("B_FIELD > 0").collect()
    assert [tuple(r) for r in got] == [rows[0]]
    catalog = {"table": {"namespace": "NAMESPACE", "name": "TABLE"}, "rowkey": "key",
               "columns": {"KEY_FIELD": {"cf": "rowkey", "col": "key", "type": "string"},
                           "B_FIELD": {"cf": "c", "col": "b", "type": "double"}}}
    by_catalog = spark.read.format("regionscan").option("root", root).option("catalog", json.dumps(catalog)).load()
    assert sorted(tuple(r) for r in by_catalog.collect()) == [("k1", 1.5), ("k2", -2.0)]
    catalog["table"] = {"name": "NAMESPACE:TABLE"}  # the namespace in the catalog's table name
    assert spark.read.format("regionscan").option("root", root).option("catalog", json.dumps(catalog)).load().count() == 2
    catalog["table"] = {"namespace": "other", "name": "NAMESPACE:TABLE"}
    with pytest.raises(Exception, match="table.name names namespace 'NAMESPACE' but table.namespace is 'other'"):
        spark.read.format("regionscan").option("root", root).option("catalog", json.dumps(catalog)).load()
