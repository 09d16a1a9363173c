"""hbase-spark's DefaultSourceSuite, its tables t1 (string key) and t2 (int key) written through
``format("regionscan")`` and its queries run on views registered once: the rows it expects,
and the row-key points and ranges it expects pushed, read back from the scan plan (overlapping
ranges merged, where hbase-spark keeps two; int keys in 4-byte ranges, non-negative ones
before negative ones, as their bytes sort).

Ranges are shown as regionscan keeps them, half-open ``[start, stop)`` in HBase's
``Bytes.toStringBinary`` form: the point ``get1`` is ``[get1, get1\\x00)``, ``KEY_FIELD <= 'get3'``
stops at ``get3\\x00``.
"""

from __future__ import annotations

import json
import sys

import pytest

import connector

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
def jvm(spark):
    from connector.session import jvm_source_loaded

    assert jvm_source_loaded(spark)
    return spark._jvm.regionscan.spark.EngineWorker


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
        assert plan.engine_filter, str(plan)  # no key bound: the cell tests ran in the engine
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
