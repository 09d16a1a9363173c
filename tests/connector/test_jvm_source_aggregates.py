"""MIN/MAX of the row key pushed to the JVM source: answered at planning from the first and
last row keys in range, equal to Spark computing them from the Python source's rows, and left
to Spark where the key's byte order is not its value order or a filter needs the rows."""

from __future__ import annotations

import pytest
from pyspark.sql import functions as F

import connector
import storage
from connector.source_config import SourceConfig
from serde_tables import fill_table, put_rows
from spark_plans import executed_plan, worker_stats

pytestmark = pytest.mark.spark

STRING_KEY = {"hbase.columns.mapping": "k STRING :key, n INT cf:n"}
ORDERED_INT_KEY = {"hbase.columns.mapping": ":key#o,cf:n", "columns": "k,n", "columns.types": "int:int",
                   "serde": "binary"}
SIGNED_INT_KEY = {"hbase.columns.mapping": "k INT :key, n INT cf:n"}


def _make(root: str, name: str, options: dict, keys: list, *split_at) -> dict:
    """Keys[:-10] flushed, the last 10 only in the memstore/WAL; the first and last key deleted."""
    opts = {"root": root, "table": name, **options}
    serde = SourceConfig.from_options(opts).read_serde()
    conn = storage.connect(root)
    encoded = [serde.serialize({"k": k, "n": i})[0] for i, k in enumerate(keys)]
    table = fill_table(conn, name, serde, ({"k": k, "n": i} for i, k in enumerate(keys[:-10])),
                       [serde.serialize({"k": k, "n": 0})[0] for k in split_at])
    put_rows(table, serde, ({"k": k, "n": i} for i, k in enumerate(keys[-10:], len(keys) - 10)))
    table.delete(encoded[0])  # a deleted first row (flushed) ...
    table.delete(encoded[-1])  # ... and a deleted last row (unflushed)
    conn.close()
    return opts


@pytest.fixture(scope="module")
def tables(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("jvm_aggregates") / "root")
    return {
        "string": _make(root, "s", STRING_KEY, [f"r{i:03d}" for i in range(200)], "r100"),
        "ordered": _make(root, "o", ORDERED_INT_KEY, list(range(-100, 100)), 0),
        "signed": _make(root, "b", SIGNED_INT_KEY, list(range(-100, 100)), 0),
        "resplit": _make(root, "s2", STRING_KEY, [f"r{i:03d}" for i in range(200)], "r050", "r150"),
    }


def _reads(spark) -> int:
    stats = worker_stats(spark)
    return stats["counters"].get("read", 0)


def _both(spark, opts):
    return (spark.read.format("regionscan").options(**opts).load(),
            spark.read.format("regionscan_python").options(**opts).load())


@pytest.mark.parametrize("kind", ["string", "ordered"])
def test_min_max_of_the_key_are_answered_at_planning(spark, tables, kind):
    jvm_df, py_df = _both(spark, tables[kind])
    low, high = ("'r050'", "'r150'") if kind == "string" else ("-50", "50")
    for where in (None, f"k >= {low} AND k < {high}", f"k > {high}"):
        jvm_q = jvm_df if where is None else jvm_df.where(where)
        py_q = py_df if where is None else py_df.where(where)
        # Spark computes them from the Python source's rows (which it cannot push anything to)
        lo, hi, rows = py_q.agg(F.min("k"), F.max("k"), F.count("*")).collect()[0]
        for query, want in [(jvm_q.agg(F.min("k"), F.max("k"), F.count("*")), (lo, hi, rows)),
                            (jvm_q.agg(F.max("k")), (hi,)), (jvm_q.agg(F.min("k"), F.count("k")), (lo, rows))]:
            plan = executed_plan(query)
            assert "LocalTableScan" in plan and "BatchScan" not in plan, plan
            assert "agg0_M" in plan  # the pushed aggregate names the scan's columns, as COUNT's do
            before = _reads(spark)
            assert tuple(query.collect()[0]) == want
            assert _reads(spark) == before  # no task read a row
    got = jvm_df.agg(F.min("k"), F.max("k")).collect()[0]
    assert tuple(got) == (("r001", "r198") if kind == "string" else (-99, 98))  # the deleted edges are skipped


def test_an_empty_range_has_null_min_max(spark, tables):
    jvm_df, _ = _both(spark, tables["string"])
    query = jvm_df.where("k > 'zzz'").agg(F.min("k"), F.max("k"), F.count("*"))
    assert "LocalTableScan" in executed_plan(query)
    assert tuple(query.collect()[0]) == (None, None, 0)


def test_explain_and_connector_explain_name_the_pushed_aggregates(spark, tables):
    jvm_df, _ = _both(spark, tables["string"])
    query = jvm_df.where("k < 'r050'").agg(F.min("k"), F.max("k"))
    shown = query._jdf.queryExecution().explainString(spark._jvm.org.apache.spark.sql.execution.ExplainMode.fromString("simple"))
    assert "LocalTableScan [agg0_MIN(k)" in shown and "agg1_MAX(k)" in shown
    plan = connector.explain(query)
    assert plan.aggregates == ["MIN(k)", "MAX(k)"]
    assert plan.key_ranges == [("", "r050")] and plan.residual == []
    assert "aggregates answered at planning (no rows read): MIN(k), MAX(k)" in str(plan)


def test_what_is_not_pushed_is_computed_by_spark(spark, tables):
    string_jvm, string_py = _both(spark, tables["string"])
    signed_jvm, signed_py = _both(spark, tables["signed"])
    cases = [
        # HBase Bytes integers sort negatives after positives: the first key is not the MIN
        (signed_jvm.agg(F.min("k"), F.max("k")), signed_py.agg(F.min("k"), F.max("k"))),
        # a value filter needs the rows
        (string_jvm.where("n > 20").agg(F.min("k"), F.max("k")), string_py.where("n > 20").agg(F.min("k"), F.max("k"))),
        # MIN of a value column, and a grouped MIN (the tasks compute these)
        (string_jvm.agg(F.min("n"), F.max("k")), string_py.agg(F.min("n"), F.max("k"))),
        (string_jvm.groupBy("n").agg(F.max("k")).orderBy("n"), string_py.groupBy("n").agg(F.max("k")).orderBy("n")),
    ]
    for jvm_q, py_q in cases:
        assert "BatchScan" in executed_plan(jvm_q)
        assert jvm_q.collect() == py_q.collect()
    assert tuple(signed_jvm.agg(F.min("k"), F.max("k")).collect()[0]) == (-99, 98)


def test_grouping_and_joining_on_the_key_are_shuffled(spark, tables):
    """The source reports no key-grouped partitioning: Spark's contract for it (identity(k))
    is one key value per partition, and a region holds a range of keys.  Reported with each
    task's first key, groupBy(k) ran without an Exchange and right, but a join of two tables
    whose regions differ paired partitions by those values and returned 0 of 198 rows
    (storage-partitioned join, on by default in Spark 4.3)."""
    one, one_py = _both(spark, tables["string"])
    two, two_py = _both(spark, tables["resplit"])
    grouped = one.groupBy("k").agg(F.max("n"))  # each task's partial rows (tests/connector/test_jvm_task_aggregates.py) ...
    assert "Exchange hashpartitioning(" in executed_plan(grouped)  # ... are shuffled by the key (group_col_0) ...
    assert "Exchange hashpartitioning(k" in executed_plan(one.groupBy("k").agg(F.collect_list("n")))  # ... as rows are
    assert sorted(grouped.collect()) == sorted(one_py.groupBy("k").agg(F.max("n")).collect())
    spark.conf.set("spark.sql.autoBroadcastJoinThreshold", "-1")  # a sort-merge join, as for large tables
    try:
        joined = one.join(two.withColumnRenamed("n", "m"), "k")
        assert joined.count() == one_py.join(two_py, "k").count() == 198
    finally:
        spark.conf.unset("spark.sql.autoBroadcastJoinThreshold")


@pytest.fixture
def cbo(spark):
    spark.conf.set("spark.sql.cbo.enabled", "true")  # Spark keeps a scan's row count only then
    yield
    spark.conf.unset("spark.sql.cbo.enabled")


def test_scans_report_the_index_row_count_as_statistics(spark, tables, cbo):
    jvm_df, py_df = _both(spark, tables["string"])

    def estimated(df):  # the scan's own estimate (a Project above it keeps only the size)
        stats = df._jdf.queryExecution().optimizedPlan().collectLeaves().head().stats()
        return int(str(stats.rowCount().get())) if stats.rowCount().isDefined() else None

    assert estimated(jvm_df.select("k", "n")) == py_df.count() == 198  # the deleted rows are not counted
    assert estimated(jvm_df.where("k >= 'r050' AND k < 'r150'")) == py_df.where("k >= 'r050' AND k < 'r150'").count()
    assert estimated(jvm_df.where("n > 20")) is None  # an engine filter: the indexes cannot tell
    # planning a read asks for its row estimate, a COUNT(*) the query did not ask for
    plan = connector.explain(jvm_df.where("k < 'r050'"))
    assert plan.key_ranges == [("", "r050")] and not plan.aggregates
