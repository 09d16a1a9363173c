"""Aggregates each task computes in the worker (the JVM source's partial aggregate pushdown):
COUNT, SUM, MIN, MAX and AVG, grouped by plain columns or not, equal to Spark aggregating the
Python source's rows, on a table with nulls, unflushed rows, updated rows and deletes; shown
by explain() and by the few rows the worker sends; left to Spark where they cannot be pushed."""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import functions as F

import connector
import storage
from connector.source_config import SourceConfig
from spark_plans import executed_plan, worker_stats

pytestmark = pytest.mark.spark

MAPPING = ("k STRING :key, i INT cf:i, t TINYINT cf:t, l BIGINT cf:l, d DOUBLE cf:d, s STRING cf:s, "
           "b BINARY cf:b, dt DATE cf:dt, ts TIMESTAMP cf:ts, f BOOLEAN cf:f")
ROWS = 300


def _row(j: int, bump: int = 0) -> dict:
    return {
        "k": f"r{j:03d}",
        "i": None if j % 11 == 0 else (j % 7) - 3 + bump,
        "t": j % 100 - 50,
        "l": j * 1_000_003,
        "d": j / 3.0,
        "s": None if j % 5 == 0 else (f"\u00fc{j}" if j % 17 == 0 else f"s{j % 13}"),  # non-ASCII sorts last by bytes
        "b": bytes([j % 256, 255 - j % 256]),
        "dt": dt.date(2020, 1, 1) + dt.timedelta(days=j % 40),
        "ts": dt.datetime(2024, 5, 1, tzinfo=dt.timezone.utc) + dt.timedelta(minutes=j % 90),
        "f": j % 3 == 0,
    }


@pytest.fixture(scope="module")
def table(tmp_path_factory) -> dict:
    """Three regions; rows 250.. and the updates only in the WAL; deleted rows and cells."""
    root = str(tmp_path_factory.mktemp("task_aggregates") / "root")
    opts = {"root": root, "table": "agg", "hbase.columns.mapping": MAPPING}
    serde = SourceConfig.from_options(opts).read_serde()
    conn = storage.connect(root)
    table = conn.create_table("agg", {"cf": {}}, split_keys=[b"r100", b"r200"], settings={"wal_sync": "none"})
    with table.batch() as batch:
        for j in range(250):
            batch.put(*serde.serialize(_row(j)))
    table.flush()
    with table.batch() as batch:
        for j in range(250, ROWS):
            batch.put(*serde.serialize(_row(j)))
        for j in range(10, 20):  # updated rows: a newer i in the WAL over the flushed one
            batch.put(*serde.serialize(_row(j, bump=100)))
    for j in range(20, 25):
        table.delete(f"r{j:03d}".encode())  # whole rows
    for j in range(30, 35):
        table.delete(f"r{j:03d}".encode(), columns=[b"cf:s"])  # one column: s reads as null
    table.delete(b"r260")  # an unflushed row deleted
    conn.close()
    return opts


def _both(spark, opts):
    return (spark.read.format("regionscan").options(**opts).load(),
            spark.read.format("regionscan_python").options(**opts).load())


def _rows_sent(spark) -> int:
    stats = worker_stats(spark)
    return stats["counters"].get("rows_sent", 0)


PUSHED = {
    "count, sum, min, max of INT": lambda df: df.agg(F.count("*"), F.count("i"), F.sum("i"), F.min("i"), F.max("i")),
    "avg (as sum and count)": lambda df: df.agg(F.avg("i"), F.avg("t")),
    "min/max of every orderable type": lambda df: df.agg(*[f(c) for c in ("k", "t", "l", "s", "b", "dt", "ts", "f")
                                                           for f in (F.min, F.max)]),
    "sum of TINYINT, counts of DOUBLE": lambda df: df.agg(F.sum("t"), F.count("d")),
    "sum of BIGINT": lambda df: df.agg(F.sum("l"), F.avg("l")),
    "group by a string": lambda df: df.groupBy("s").agg(F.count("*"), F.sum("i"), F.max("k")),
    "group by two columns": lambda df: df.groupBy("f", "dt").agg(F.min("s"), F.count("i")),
    "group by the key": lambda df: df.groupBy("k").agg(F.max("i")),
    "group by col % k (negative values, nulls)": lambda df: df.groupBy((F.col("i") % 4).alias("g"), "f").agg(
        F.count("*"), F.max("s"), F.sum("t")),
    "group by BIGINT % k": lambda df: df.groupBy((F.col("l") % 7).alias("g")).agg(F.count("l")),
    "under a key range": lambda df: df.where("k >= 'r050' AND k < 'r150'").agg(F.sum("i"), F.max("s")),
    "under an exact value filter": lambda df: df.where("i = 2").agg(F.count("*"), F.sum("t")),
    "under filters evaluated on the decoded rows": lambda df: df.where("s LIKE '%1%' AND i % 2 = 0").agg(
        F.count("*"), F.sum("i")),
    "an empty range": lambda df: df.where("k > 'zzz'").agg(F.count("*"), F.sum("i"), F.min("s")),
    "an empty range, grouped": lambda df: df.where("k > 'zzz'").groupBy("s").agg(F.count("*")),
}


def _sorted(rows) -> list:
    return sorted((tuple(r) for r in rows), key=repr)


@pytest.mark.parametrize("name", list(PUSHED))
def test_pushed_aggregates_equal_spark_over_the_python_source(spark, table, name):
    jvm_df, py_df = _both(spark, table)
    query = PUSHED[name](jvm_df)
    plan = executed_plan(query)
    assert "PushedAggregation: [" in plan and "(partial, per task)" in plan, plan
    before = _rows_sent(spark)
    got = query.collect()
    groups = len(got) or 1
    assert _rows_sent(spark) - before <= 3 * groups  # partial rows only: at most one per group per task
    assert _sorted(got) == _sorted(PUSHED[name](py_df).collect())


def test_deletes_updates_and_nulls_are_what_is_aggregated(spark, table):
    jvm_df, _ = _both(spark, table)
    live = [j for j in range(ROWS) if not 20 <= j < 25 and j != 260]
    values = {j: _row(j, bump=100 if 10 <= j < 20 else 0) for j in live}
    want_i = [v["i"] for v in values.values() if v["i"] is not None]
    want_s = [v["s"] for j, v in values.items() if v["s"] is not None and not 30 <= j < 35]
    got = jvm_df.agg(F.count("*"), F.sum("i"), F.max("i"), F.count("s"), F.max("s")).collect()[0]
    assert tuple(got) == (len(live), sum(want_i), max(want_i), len(want_s), max(want_s, key=lambda s: s.encode()))


def test_explain_and_connector_explain_name_the_task_aggregates(spark, table):
    jvm_df, _ = _both(spark, table)
    query = jvm_df.where("k < 'r100'").groupBy("s").agg(F.sum("i"))
    shown = query._jdf.queryExecution().explainString(spark._jvm.org.apache.spark.sql.execution.ExplainMode.fromString("simple"))
    assert "PushedAggregation: [SUM(i)], PushedGroupBy: [s] (partial, per task)" in shown
    assert "HashAggregate" in shown  # Spark's final aggregation over the partial rows
    plan = connector.explain(query)
    assert plan.task_aggregates == ["SUM(i)", "GROUP BY s"]
    assert "aggregates computed by each task (partial rows to Spark): SUM(i), GROUP BY s" in str(plan)


NOT_PUSHED = {
    "min and max of INT and DATE, ungrouped (Spark's own is as fast)": lambda df: df.agg(
        F.min("i"), F.max("dt"), F.count("*"), F.count("t")),
    "min and max of DOUBLE": lambda df: df.agg(F.min("d"), F.max("d")),  # a sum would differ in its last bits by order
    "a distinct count": lambda df: df.agg(F.countDistinct("s")),
    "group by TINYINT % INT (a cast)": lambda df: df.groupBy((F.col("t") % 10).alias("g")).agg(F.count("*")),
    "group by another expression": lambda df: df.groupBy((F.col("i") + 1).alias("g")).agg(F.count("*")),
    "a filter Spark re-checks (DOUBLE)": lambda df: df.where("d * 2 > 7.5").agg(F.count("*"), F.sum("i")),
}


@pytest.mark.parametrize("name", list(NOT_PUSHED))
def test_what_the_tasks_do_not_compute_is_left_to_spark(spark, table, name):
    jvm_df, py_df = _both(spark, table)
    query = NOT_PUSHED[name](jvm_df)
    assert "PushedAggregation" not in executed_plan(query)
    assert _sorted(query.collect()) == _sorted(NOT_PUSHED[name](py_df).collect())


def test_the_option_leaves_every_aggregate_to_spark(spark, table):
    off = spark.read.format("regionscan").options(**table, **{"regionscan.pushdown.aggregates": "false"}).load()
    query = off.agg(F.count("*"), F.sum("i"))
    plan = executed_plan(query)
    assert "PushedAggregation" not in plan and "LocalTableScan" not in plan
    on, _ = _both(spark, table)
    assert query.collect() == on.agg(F.count("*"), F.sum("i")).collect()


_COLUMNS = st.sampled_from(["i", "t", "l", "s", "k", "dt", "f"])
_AGG = st.tuples(st.sampled_from(["count", "sum", "min", "max"]), _COLUMNS).filter(
    lambda a: a[0] != "sum" or a[1] in ("i", "t", "l"))


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(aggs=st.lists(_AGG, min_size=1, max_size=3), group=st.lists(_COLUMNS, max_size=2, unique=True),
       low=st.integers(0, ROWS), width=st.integers(1, ROWS))
def test_generated_aggregates_agree_with_the_python_source(spark, table, aggs, group, low, width):
    jvm_df, py_df = _both(spark, table)
    where = f"k >= 'r{low:03d}' AND k < 'r{low + width:03d}'"

    def query(df):
        exprs = [getattr(F, fn)(col) for fn, col in aggs]
        narrowed = df.where(where)
        return narrowed.groupBy(*group).agg(*exprs) if group else narrowed.agg(*exprs)

    jvm_q = query(jvm_df)
    # ungrouped MIN/MAX (and COUNTs) of fixed-width columns: Spark aggregates them as fast itself
    cheap = not group and any(fn in ("min", "max") for fn, _ in aggs) and all(
        fn != "sum" and c in ("i", "t", "l", "dt", "f") for fn, c in aggs)
    assert "(partial, per task)" in executed_plan(jvm_q) or cheap or not group and all(c == "k" for _, c in aggs)
    assert _sorted(jvm_q.collect()) == _sorted(query(py_df).collect())


def test_a_pruned_read_keeps_the_rows_without_the_columns_read(spark, table):
    """A row is a row when it has any mapped cell: reading only i must not drop the rows where
    i is null (a scan of cf:i alone would), nor find no row for "i IS NULL"."""
    jvm_df, py_df = _both(spark, table)
    assert len(jvm_df.select("i").collect()) == jvm_df.count() == len(py_df.collect()) == 294
    nulls = sorted(r.k for r in py_df.where("i IS NULL").select("k").collect())
    assert len(nulls) == 27
    assert sorted(r.k for r in jvm_df.where("i IS NULL").select("k").collect()) == nulls
    assert jvm_df.where("i IS NULL").count() == 27
    assert _sorted(jvm_df.select("s", "i").collect()) == _sorted(py_df.select("s", "i").collect())
