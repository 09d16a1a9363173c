"""The Spark catalog (``spark.sql.catalog.rs=regionscan.spark.RegionScanCatalog``) and the column
mapping stored with a table: SHOW / SELECT / DESCRIBE / CREATE / DROP through the catalog, and
``format("regionscan")`` reads that give only root and table.  One session and one root for the
module (the tables are read-only to every test but the ones that create their own)."""

from __future__ import annotations

import os

import pytest

import storage
from connector import stored_mapping
from jobs import mapping as mapping_job
from serde_tables import KAB_MAPPING, write_kab_table
from spark_plans import sorted_rows, worker_stats

pytestmark = pytest.mark.spark

MAPPING = KAB_MAPPING
ROWS = [("r1", "x", 1), ("r2", "y", 2), ("r3", "z", 3)]
NS_ROWS = [("n1", "p", 10), ("n2", "q", 20)]
CATALOG = "rscat"


@pytest.fixture(scope="module")
def root(tmp_path_factory, spark):
    """events (mapping set by the command), bare (no mapping), ns1:events (mapping stored by a write)."""
    root = str(tmp_path_factory.mktemp("catalog") / "root")
    write_kab_table(root, "events", ROWS, [b"r2"])
    assert mapping_job.main(["set", "events", "--root", root, "--mapping", MAPPING]) == 0
    write_kab_table(root, "bare", ROWS, [b"r2"])
    with storage.connect(root) as conn:
        conn.create_namespace("ns1")
    (spark.createDataFrame(NS_ROWS, "k STRING, a STRING, b INT").write.format("regionscan")
     .option("root", root).option("table", "ns1:events").option("hbase.columns.mapping", MAPPING)
     .option("newtable", "2").mode("append").save())
    spark.conf.set(f"spark.sql.catalog.{CATALOG}", "regionscan.spark.RegionScanCatalog")
    spark.conf.set(f"spark.sql.catalog.{CATALOG}.root", root)
    return root


def test_show_tables_and_namespaces_are_hbase_namespaces(spark, root):
    assert sorted_rows(spark.sql(f"SHOW NAMESPACES IN {CATALOG}")) == [("default",), ("ns1",)]
    assert sorted(r.tableName for r in spark.sql(f"SHOW TABLES IN {CATALOG}").collect()) == ["bare", "events"]
    assert sorted(r.tableName for r in spark.sql(f"SHOW TABLES IN {CATALOG}.default").collect()) == ["bare", "events"]
    assert [r.tableName for r in spark.sql(f"SHOW TABLES IN {CATALOG}.ns1").collect()] == ["events"]
    with pytest.raises(Exception, match="SCHEMA_NOT_FOUND|NAMESPACE_NOT_FOUND|not found"):
        spark.sql(f"SHOW TABLES IN {CATALOG}.nope").collect()


def test_select_reads_through_the_stored_mapping(spark, root):
    assert sorted_rows(spark.sql(f"SELECT k, a, b FROM {CATALOG}.events")) == sorted(ROWS)
    assert sorted_rows(spark.sql(f"SELECT k, b FROM {CATALOG}.default.events WHERE b >= 2")) == [("r2", 2), ("r3", 3)]
    assert spark.sql(f"SELECT count(*) FROM {CATALOG}.events").collect()[0][0] == 3
    assert sorted_rows(spark.sql(f"SELECT * FROM {CATALOG}.ns1.events")) == sorted(NS_ROWS)
    assert sorted_rows(spark.table(f"{CATALOG}.ns1.events").where("a = 'q'")) == [("n2", "q", 20)]


def test_describe_shows_the_mapped_columns(spark, root):
    described = [(r.col_name, r.data_type) for r in spark.sql(f"DESCRIBE {CATALOG}.events").collect()]
    assert described[:3] == [("k", "string"), ("a", "string"), ("b", "int")]
    extended = {r.col_name: r.data_type for r in spark.sql(f"DESCRIBE TABLE EXTENDED {CATALOG}.events").collect()}
    assert "hbase.columns.mapping" in extended.get("Table Properties", "")


def test_a_table_without_a_stored_mapping_says_how_to_give_one(spark, root):
    for query in (lambda: spark.sql(f"SELECT * FROM {CATALOG}.bare").collect(),
                  lambda: spark.read.format("regionscan").option("root", root).option("table", "bare").load()):
        with pytest.raises(Exception) as info:
            query()
        assert f"table bare under {root} has no stored column mapping" in str(info.value)
        assert "regionscan mapping set bare" in str(info.value)


def test_root_and_table_alone_read_with_the_stored_mapping(spark, root, source_format):
    df = spark.read.format(source_format).option("root", root).option("table", "events").load()
    assert df.columns == ["k", "a", "b"]
    assert sorted_rows(df) == sorted(ROWS)
    ns = spark.read.format(source_format).option("root", root).option("table", "ns1:events").load()
    assert sorted_rows(ns.where("b > 10")) == [("n2", "q", 20)]


def test_an_explicit_mapping_wins_over_the_stored_one(spark, root, source_format):
    df = (spark.read.format(source_format).option("root", root).option("table", "events")
          .option("hbase.columns.mapping", "id STRING :key, b INT c:b").load())
    assert df.columns == ["id", "b"]
    assert sorted_rows(df) == [("r1", 1), ("r2", 2), ("r3", 3)]


def test_create_and_drop_table_through_the_catalog(spark, root):
    spark.sql(f"CREATE TABLE {CATALOG}.ns1.made (id STRING, `f:n` INT, `g:s` STRING) TBLPROPERTIES ('regions' = '3')")
    assert [(r.col_name, r.data_type) for r in spark.sql(f"DESCRIBE {CATALOG}.ns1.made").collect()][:3] == [
        ("id", "string"), ("f:n", "int"), ("g:s", "string")]
    with storage.connect(root, read_only=True) as conn:
        table = conn.table("ns1:made")
        assert sorted(table.families()) == [b"f", b"g"] and len(table.regions()) == 3
    assert stored_mapping.stored_options(root, "ns1:made") == {
        "hbase.columns.mapping": "`id` string :key, `f:n` int f:n, `g:s` string g:s"}
    assert spark.sql(f"SELECT count(*) FROM {CATALOG}.ns1.made").collect()[0][0] == 0
    spark.sql(f"CREATE TABLE {CATALOG}.given (x STRING) TBLPROPERTIES ('hbase.columns.mapping' = "
              "'x STRING :key, y BIGINT d:y', 'serde' = 'string')")
    assert spark.table(f"{CATALOG}.given").columns == ["x", "y"]
    assert stored_mapping.stored_options(root, "given")["serde"] == "string"
    spark.sql(f"DROP TABLE {CATALOG}.ns1.made")
    spark.sql(f"DROP TABLE {CATALOG}.given")
    with storage.connect(root, read_only=True) as conn:
        assert conn.tables(namespace="ns1") == [b"ns1:events"] and b"given" not in conn.tables()
    with pytest.raises(Exception, match="TABLE_OR_VIEW_NOT_FOUND|not found"):
        spark.sql(f"DROP TABLE {CATALOG}.ns1.made")


def test_create_table_refuses_columns_that_map_to_no_cell_in_one_line(spark, root):
    with pytest.raises(Exception) as info:
        spark.sql(f"CREATE TABLE {CATALOG}.badcols (id STRING, plain INT)")
    assert "column 'plain' is not named 'family:qualifier'" in str(info.value)
    assert not os.path.exists(os.path.join(root, "badcols"))


def test_create_and_drop_namespace(spark, root):
    spark.sql(f"CREATE NAMESPACE {CATALOG}.ns2")
    assert ("ns2",) in sorted_rows(spark.sql(f"SHOW NAMESPACES IN {CATALOG}"))
    spark.sql(f"DROP NAMESPACE {CATALOG}.ns2")
    assert ("ns2",) not in sorted_rows(spark.sql(f"SHOW NAMESPACES IN {CATALOG}"))


def test_a_write_stores_its_mapping_and_an_append_keeps_the_stored_one(spark, root):
    write = (spark.createDataFrame([("w1", "a", 1)], "k STRING, a STRING, b INT").write.format("regionscan")
             .option("root", root).option("table", "written").option("newtable", "1"))
    write.option("hbase.columns.mapping", MAPPING).mode("append").save()
    assert stored_mapping.stored_options(root, "written") == {"hbase.columns.mapping": MAPPING}
    other = "k STRING :key, a STRING c:a"
    (spark.createDataFrame([("w2", "b")], "k STRING, a STRING").write.format("regionscan")
     .option("root", root).option("table", "written").option("hbase.columns.mapping", other).mode("append").save())
    assert stored_mapping.stored_options(root, "written") == {"hbase.columns.mapping": MAPPING}
    (spark.createDataFrame([("w3", "c")], "k STRING, a STRING").write.format("regionscan")
     .option("root", root).option("table", "written").option("hbase.columns.mapping", other).mode("overwrite").save())
    assert stored_mapping.stored_options(root, "written") == {"hbase.columns.mapping": other}
    written = spark.read.format("regionscan").option("root", root).option("table", "written").load()
    assert sorted_rows(written) == [("w3", "c")]
    # a write that gives no mapping writes with the stored one
    (spark.createDataFrame([("w4", "d")], "k STRING, a STRING").write.format("regionscan")
     .option("root", root).option("table", "written").mode("append").save())
    assert sorted_rows(spark.table(f"{CATALOG}.written")) == [("w3", "c"), ("w4", "d")]


# -- native writes ----------------------------------------------------------------------------
def _worker_counters(spark) -> dict:
    return worker_stats(spark)["counters"]


def test_format_writes_are_native_bulk_loads_through_the_worker(spark, root):
    before = _worker_counters(spark)
    rows = [(f"v{i:03d}", f"s{i}", i) for i in range(300)]
    (spark.createDataFrame(rows, "k STRING, a STRING, b INT").repartition(3).write.format("regionscan")
     .option("root", root).option("table", "native").option("hbase.columns.mapping", MAPPING)
     .option("newtable", "3").mode("overwrite").save())
    after = _worker_counters(spark)
    assert after.get("write", 0) - before.get("write", 0) == 3  # one staging request per task
    assert after.get("write_commit", 0) - before.get("write_commit", 0) == 1
    assert sorted_rows(spark.table(f"{CATALOG}.native")) == sorted(rows)
    staging = os.path.join(root, "native", ".staging")
    assert not os.path.isdir(staging) or os.listdir(staging) == []  # the commit took every staged file


def test_catalog_tables_take_v2_appends_and_overwrites(spark, root):
    spark.sql(f"CREATE TABLE {CATALOG}.ns1.v2 (k STRING, `c:a` STRING, `c:b` INT)")
    spark.sql(f"INSERT INTO {CATALOG}.ns1.v2 VALUES ('a', 'x', 1), ('b', 'y', 2)")
    assert sorted_rows(spark.table(f"{CATALOG}.ns1.v2")) == [("a", "x", 1), ("b", "y", 2)]
    df = spark.createDataFrame([("c", "z", 3), ("a", "w", 9)], "k STRING, `c:a` STRING, `c:b` INT")
    df.writeTo(f"{CATALOG}.ns1.v2").append()
    assert sorted_rows(spark.table(f"{CATALOG}.ns1.v2")) == [("a", "w", 9), ("b", "y", 2), ("c", "z", 3)]
    from pyspark.sql.functions import lit

    spark.createDataFrame([("d", "q", 4)], "k STRING, `c:a` STRING, `c:b` INT").writeTo(
        f"{CATALOG}.ns1.v2").overwrite(lit(True))
    assert sorted_rows(spark.table(f"{CATALOG}.ns1.v2")) == [("d", "q", 4)]
    spark.sql(f"INSERT OVERWRITE {CATALOG}.ns1.v2 VALUES ('e', 'r', 5)")
    assert sorted_rows(spark.table(f"{CATALOG}.ns1.v2")) == [("e", "r", 5)]
    assert spark.sql(f"SELECT count(*) FROM {CATALOG}.ns1.v2").collect()[0][0] == 1


def test_create_table_as_select_through_the_catalog(spark, root):
    df = spark.createDataFrame([("k1", 1.5), ("k2", 2.5)], "id STRING, `m:x` DOUBLE")
    df.writeTo(f"{CATALOG}.ctas").create()
    assert sorted_rows(spark.table(f"{CATALOG}.ctas")) == [("k1", 1.5), ("k2", 2.5)]
    assert sorted_rows(spark.read.format("regionscan").option("root", root).option("table", "ctas").load()) == [
        ("k1", 1.5), ("k2", 2.5)]


def test_a_failed_v2_write_commits_nothing_and_leaves_no_staged_files(spark, root):
    from pyspark.sql.functions import udf

    @udf("string")
    def boom(a):
        if a == "bad":
            raise RuntimeError("a row failed")
        return a

    spark.sql(f"CREATE TABLE {CATALOG}.failing (k STRING, `c:a` STRING)")
    spark.sql(f"INSERT INTO {CATALOG}.failing VALUES ('keep', 'x')")
    rows = [(f"r{i}", "bad" if i == 150 else "ok") for i in range(200)]
    bad = spark.createDataFrame(rows, "k STRING, `c:a` STRING").repartition(4).withColumn("c:a", boom("c:a"))
    with pytest.raises(Exception, match="a row failed"):
        bad.writeTo(f"{CATALOG}.failing").append()
    assert sorted_rows(spark.table(f"{CATALOG}.failing")) == [("keep", "x")]
    # An attempt still running when Spark aborts (in whichever worker runs it) discards its files
    # when it sees the abort marker, and the next commit to the table deletes whatever an aborted
    # job left (docs/connector.md): after the next write no staged file of the failed one is there.
    spark.createDataFrame([("next", "y")], "k STRING, `c:a` STRING").writeTo(f"{CATALOG}.failing").append()
    assert sorted_rows(spark.table(f"{CATALOG}.failing")) == [("keep", "x"), ("next", "y")]
    staging = os.path.join(root, "failing", ".staging")
    staged = [os.path.join(d, f) for d, _, files in os.walk(staging) for f in files
              if not f.endswith((".aborted", ".lock"))]
    assert staged == []


def test_a_v2_write_of_columns_outside_the_mapping_is_one_line_before_any_task(spark, root):
    with pytest.raises(Exception) as info:
        spark.createDataFrame([("a", 1)], "k STRING, nope INT").writeTo(f"{CATALOG}.events").append()
    assert "nope" in str(info.value)
    assert sorted_rows(spark.table(f"{CATALOG}.events")) == sorted(ROWS)


def test_create_table_over_an_existing_table_is_refused(spark, root):
    for name in ("events", "bare"):  # with and without a stored mapping
        with pytest.raises(Exception, match="TABLE_OR_VIEW_ALREADY_EXISTS|already exists"):
            spark.sql(f"CREATE TABLE {CATALOG}.{name} (k STRING, `c:a` STRING)")
    assert stored_mapping.stored_options(root, "bare") is None


TYPED = ("k STRING :key, i BIGINT c:i, d DOUBLE c:d, f BOOLEAN c:f, day DATE c:day, ts TIMESTAMP c:ts, "
         "m DECIMAL(10,2) c:m, raw BINARY c:raw, s SMALLINT c:s")


@pytest.mark.parametrize("serde", ["binary", "string"])
def test_native_and_python_writes_store_the_same_values(spark, root, serde):
    import datetime as dt
    from decimal import Decimal

    rows = [("a", 1, 1.5, True, dt.date(2024, 2, 29), dt.datetime(2024, 1, 2, 3, 4, 5, 678000, tzinfo=dt.timezone.utc),
             Decimal("12.34"), b"\x00\xff", 7),
            ("b", None, None, None, None, None, None, None, 0)]  # a row of only nulls has no cell: no row
    df = spark.createDataFrame(rows, "k STRING, i BIGINT, d DOUBLE, f BOOLEAN, day DATE, ts TIMESTAMP, "
                                     "m DECIMAL(10,2), raw BINARY, s SMALLINT")
    got = {}
    for fmt in ("regionscan", "regionscan_python"):
        name = f"typed_{serde}_{fmt}"
        (df.write.format(fmt).option("root", root).option("table", name).option("hbase.columns.mapping", TYPED)
         .option("serde", serde).option("newtable", "1").option("regionscan.write.timestamp", "1000").mode("append").save())
        got[fmt] = sorted_rows(spark.read.format("regionscan").option("root", root).option("table", name).load())
        with storage.connect(root, read_only=True) as conn:
            got[fmt + " cells"] = sorted(conn.table(name).scan())
    assert got["regionscan"] == got["regionscan_python"] == sorted(tuple(r) for r in df.collect())
    assert got["regionscan cells"] == got["regionscan_python cells"]
