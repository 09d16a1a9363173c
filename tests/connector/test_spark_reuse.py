"""Views and DataFrames registered once answer every later query with that query's own rows.

hbase-spark's own test suite registers its tables once as temporary views
and runs a long sequence of queries on them: point gets, key ranges, ORs of
key and column conditions, counts with and without filters.  The same kind
of sequence runs here on views registered once over ``format(...)`` reads,
in an order that puts unfiltered queries right after filtered ones (where
Spark 4.3 reuses a Python reader's last pushdown), and each answer must equal
the one Spark computes over the same rows held in memory.
"""

from __future__ import annotations

import pytest

import storage
from serde import create_serde
from spark_plans import sorted_rows

pytestmark = pytest.mark.spark

MAPPING = "KEY_FIELD STRING :key, A_FIELD STRING c:a, B_FIELD STRING c:b, N INT c:n"
ROWS = [(f"get{i}", f"foo{i}", str(i % 10), i * 3) for i in range(1, 40)]

QUERIES = [
    "SELECT count(1) FROM {v} WHERE KEY_FIELD = 'get1' OR KEY_FIELD = 'get2' OR KEY_FIELD = 'get3'",
    "SELECT count(1) FROM {v}",
    "SELECT KEY_FIELD, B_FIELD, A_FIELD FROM {v} WHERE (KEY_FIELD = 'get1' AND B_FIELD < '3') "
    "OR (KEY_FIELD >= 'get3' AND B_FIELD = '8')",
    "SELECT KEY_FIELD FROM {v} WHERE KEY_FIELD > 'get1' AND KEY_FIELD < 'get3'",
    "SELECT KEY_FIELD, A_FIELD FROM {v}",
    "SELECT KEY_FIELD, N FROM {v} WHERE N > 60 AND B_FIELD IN ('1', '2')",
    "SELECT sum(N), max(KEY_FIELD) FROM {v}",
    "SELECT KEY_FIELD FROM {v} WHERE KEY_FIELD = 'get25'",
    "SELECT * FROM {v}",
]


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("spark_reuse") / "root")
    serde = create_serde("binary", MAPPING)
    conn = storage.connect(path)
    table = conn.create_table("t1", {"c": {}}, split_keys=[b"get2", b"get3"], settings={"wal_sync": "none"})
    with table.batch() as batch:
        for key, a, b, n in ROWS:
            row_key, cells = serde.serialize({"KEY_FIELD": key, "A_FIELD": a, "B_FIELD": b, "N": n})
            batch.put(row_key, cells)
    table.flush()
    conn.close()
    return path


def test_views_registered_once_answer_each_query(spark, source_format, root):
    options = {"root": root, "table": "t1", "hbase.columns.mapping": MAPPING}
    ours = spark.read.format(source_format).options(**options).load()
    ours.createOrReplaceTempView("reuse_ours")
    spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW reuse_sql USING {source_format} OPTIONS ("
              + ", ".join(f"`{k}` '{v}'" for k, v in options.items()) + ")")
    spark.createDataFrame(ROWS, "KEY_FIELD STRING, A_FIELD STRING, B_FIELD STRING, N INT") \
        .createOrReplaceTempView("reuse_ref")
    for query in QUERIES:
        expected = sorted_rows(spark.sql(query.format(v="reuse_ref")))
        assert sorted_rows(spark.sql(query.format(v="reuse_ours"))) == expected, query
        assert sorted_rows(spark.sql(query.format(v="reuse_sql"))) == expected, query


def test_one_dataframe_filtered_then_whole(spark, source_format, root):
    df = spark.read.format(source_format).options(root=root, table="t1", **{"hbase.columns.mapping": MAPPING}).load()
    assert df.where("KEY_FIELD < 'get2'").count() == sum(1 for r in ROWS if r[0] < "get2")
    assert df.count() == len(ROWS)
    assert df.where("N > 100").count() == sum(1 for r in ROWS if r[3] > 100)
    assert df.count() == len(ROWS)
    assert df.where("KEY_FIELD = 'get5'").select("N").collect()[0][0] == 15
    assert df.select("N").count() == len(ROWS)
