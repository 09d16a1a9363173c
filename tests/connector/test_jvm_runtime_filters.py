"""Runtime filters of the JVM source: Spark hands the scan the join keys of the small side of a
join (dynamic pruning, ``SupportsRuntimeV2Filtering``) and the scan reads less: a key IN list
reads only the rows of those keys, a value IN list skips what the worker can skip.  The
answers equal those with ``regionscan.scan.runtimefilter=false``, which also keeps Spark from
planning any runtime filter on the scan.

Spark plans one only when the small side keeps a selective ``Filter`` of its own (or is a local
relation): a filter pushed into a regionscan scan leaves none, so a join of two regionscan
tables gets no runtime filter (PartitionPruning.hasPartitionPruningFilter).
"""

from __future__ import annotations

import struct

import pytest
from pyspark.sql import functions as F

import storage
from serde import create_serde
from spark_plans import executed_plan, sorted_rows, worker_stats

pytestmark = pytest.mark.spark

MAPPING = "k INT :key, n INT cf:n, g STRING cf:g"
SERDE = create_serde("binary", MAPPING)
OFF = "regionscan.scan.runtimefilter"


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    """``facts``: keys 0..599 in three regions, ``n = k % 50``, ``g`` a group name."""
    path = str(tmp_path_factory.mktemp("runtime_filters") / "root")
    conn = storage.connect(path)
    table = conn.create_table("facts", {"cf": {}}, split_keys=[struct.pack(">i", 200), struct.pack(">i", 400)],
                              settings={"wal_sync": "none"})
    with table.batch() as b:
        for k in range(600):
            key, cells = SERDE.serialize({"k": k, "n": k % 50, "g": f"g{k % 7}"})
            b.put(key, cells)
    table.flush()
    conn.close()
    return path


def _facts(spark, root, **extra):
    return (spark.read.format("regionscan")
            .options(root=root, table="facts", **{"hbase.columns.mapping": MAPPING}, **extra).load())


def _dims(spark):
    """The small side: a local relation filtered by a predicate Spark keeps (a UDF-free
    expression no source sees), so dynamic pruning takes it as selective."""
    rows = [(k, f"name{k}") for k in (3, 250, 251, 599, 1000)]
    # broadcast: the join's build side, whose broadcast the pruning reuses (Spark's default,
    # spark.sql.optimizer.dynamicPartitionPruning.reuseBroadcastOnly)
    return F.broadcast(spark.createDataFrame(rows, "d INT, name STRING").where(F.length("name") >= 5))


def _sent(spark, query):
    """The rows the engine worker sent for ``query`` and its sorted answer."""
    before = worker_stats(spark)["counters"].get("rows_sent", 0)
    rows = sorted_rows(query)
    return worker_stats(spark)["counters"].get("rows_sent", 0) - before, rows


def test_a_key_in_list_from_the_join_reads_only_those_keys(spark, root):
    dims = _dims(spark)
    on = _facts(spark, root).join(dims, F.col("k") == F.col("d")).select("k", "n", "name")
    off = _facts(spark, root, **{OFF: "false"}).join(dims, F.col("k") == F.col("d")).select("k", "n", "name")
    sent_on, rows_on = _sent(spark, on)
    sent_off, rows_off = _sent(spark, off)
    assert rows_on == rows_off == [(k, k % 50, f"name{k}") for k in (3, 250, 251, 599)]
    assert sent_off == 600 and sent_on == 4  # the IN list became four point key ranges
    plan = executed_plan(on)
    assert "dynamicpruningexpression(k#" in plan and "RuntimeFilters: [k IN (5 values)]" in plan
    plan_off = executed_plan(off)
    assert "dynamicpruning" not in plan_off and "RuntimeFilters: [k" not in plan_off


def test_a_value_in_list_narrows_the_read_and_answers_alike(spark, root):
    dims = _dims(spark).select((F.col("d") % 50 + 1).alias("m")).where("m < 5")  # m: 4, 1, 2, 1
    on = _facts(spark, root).join(dims, F.col("n") == F.col("m")).groupBy("g").count()
    off = _facts(spark, root, **{OFF: "false"}).join(dims, F.col("n") == F.col("m")).groupBy("g").count()
    sent_on, rows_on = _sent(spark, on)
    sent_off, rows_off = _sent(spark, off)
    assert rows_on == rows_off and sum(c for _, c in rows_on) == 48  # 12 rows a value of n, m = 1 twice
    assert sent_off == 60  # n < 5, which Spark infers from m < 5 and pushes
    assert sent_on == 36, sent_on  # n IN (4, 1, 2, 1)
    assert "RuntimeFilters: [n IN (" in executed_plan(on)


def test_scans_that_take_no_runtime_filter(spark, root):
    dims = _dims(spark)
    limited = _facts(spark, root).limit(1000).join(dims, F.col("k") == F.col("d"))
    assert sorted(r.k for r in limited.collect()) == [3, 250, 251, 599]
    assert "dynamicpruning" not in executed_plan(limited)  # a pushed limit: no filter attributes
    with pytest.raises(Exception, match="regionscan.scan.runtimefilter must be true or false"):
        _facts(spark, root, **{OFF: "maybe"}).join(dims, F.col("k") == F.col("d")).collect()


def test_two_regionscan_tables_get_no_runtime_filter(spark, root):
    """The small side's filter is pushed into its scan: no Filter is left for Spark's rule."""
    small = _facts(spark, root).where("g = 'g3' AND k < 30").select(F.col("k").alias("d"))
    joined = _facts(spark, root).join(small, F.col("k") == F.col("d"))
    assert sorted(r.k for r in joined.collect()) == [3, 10, 17, 24]
    assert "dynamicpruning" not in executed_plan(joined)
