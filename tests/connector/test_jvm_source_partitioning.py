"""Key-grouped output partitioning of tables read through the Spark catalog: the scan reports
``regionscan_tasks_<digest>(k)`` (a function of the catalog mapping a key to its task), so
``groupBy(k)`` needs no Exchange; its answers equal the same query without the partitioning;
joins of tables whose regions differ are shuffled and return every row; a key whose stored
bytes the JVM cannot compute (an HBase ``Bytes`` INT) reports nothing.  Answers are checked
against the rows written and against the same query with Spark's V2 bucketing off."""

from __future__ import annotations

import pytest
from pyspark.sql import functions as F

from jobs import mapping as mapping_job
from serde import create_serde
from serde_tables import write_table
from spark_plans import executed_plan, sorted_rows

pytestmark = pytest.mark.spark

CATALOG = "rsparts"
STRING_MAPPING = "k STRING :key, n INT cf:n"
BINARY_MAPPING = "k BINARY :key, n INT cf:n"
INT_MAPPING = "k INT :key, n INT cf:n"
KEYS = [f"r{i:03d}" for i in range(200)]
PARALLELISM = "spark.sql.leafNodeDefaultParallelism"  # what the tasks are packed for


def _make(root: str, name: str, mapping: str, keys: list, split_at: list, serde_name: str = "binary") -> None:
    serde = create_serde(serde_name, mapping)
    write_table(root, name, serde, ({"k": k, "n": i} for i, k in enumerate(keys)),
                [serde.serialize({"k": k, "n": 0})[0] for k in split_at])
    assert mapping_job.main(["set", name, "--root", root, "--mapping", mapping, "--serde", serde_name]) == 0


@pytest.fixture(scope="module")
def root(tmp_path_factory, spark):
    """one: 5 regions; two: every other row in 3 other regions; bin: BINARY keys; ints: INT keys;
    text: the string SerDe, a row whose key is its null sequence."""
    root = str(tmp_path_factory.mktemp("partitioning") / "root")
    _make(root, "one", STRING_MAPPING, KEYS, ["r040", "r080", "r120", "r160"])
    _make(root, "two", STRING_MAPPING, KEYS[::2], ["r050", "r150"])
    _make(root, "bin", BINARY_MAPPING, [k.encode() for k in KEYS], [b"r070", b"r140"])
    _make(root, "ints", INT_MAPPING, list(range(200)), [70, 140])
    _make(root, "text", STRING_MAPPING, ["\\N"] + KEYS, ["r070", "r140"], "string")  # key \\N reads as null
    spark.conf.set(f"spark.sql.catalog.{CATALOG}", "regionscan.spark.RegionScanCatalog")
    spark.conf.set(f"spark.sql.catalog.{CATALOG}.root", root)
    spark.conf.set("spark.sql.autoBroadcastJoinThreshold", "-1")  # sort-merge joins, as for large tables
    spark.conf.set(PARALLELISM, "8")  # small splits are packed one a task
    yield root
    spark.conf.unset("spark.sql.autoBroadcastJoinThreshold")
    spark.conf.unset(PARALLELISM)


def _scan_partitioning(df) -> str:
    """What the (one) scan of a query reports to Spark, lower-cased."""
    return df._jdf.queryExecution().sparkPlan().collectLeaves().head().outputPartitioning().toString().lower()


def test_group_by_the_key_needs_no_exchange(spark, root):
    one = spark.table(f"{CATALOG}.default.one")
    assert one.rdd.getNumPartitions() == 5  # one task per region: the test needs several
    grouped = one.groupBy("k").agg(F.max("n").alias("m"), F.count("*").alias("c"))
    plan = executed_plan(grouped)
    assert "Exchange" not in plan
    assert "partitioning(transformexpression(regionscan_tasks_" in _scan_partitioning(grouped)
    expected = [(k, i, 1) for i, k in enumerate(KEYS)]
    assert sorted_rows(grouped) == expected
    # the same query with Spark's V2 bucketing off is shuffled, and gives the same rows
    spark.conf.set("spark.sql.sources.v2.bucketing.enabled", "false")
    try:
        off = one.groupBy("k").agg(F.max("n").alias("m"), F.count("*").alias("c"))
        assert "Exchange hashpartitioning(k" in executed_plan(off)
        assert sorted_rows(off) == expected
    finally:
        spark.conf.unset("spark.sql.sources.v2.bucketing.enabled")


def test_a_filtered_or_packed_scan_groups_by_its_own_tasks(spark, root):
    one = spark.table(f"{CATALOG}.one")
    filtered = one.where("k >= 'r050' AND k < 'r130'").groupBy("k").count()
    assert "Exchange" not in executed_plan(filtered)
    assert sorted_rows(filtered) == [(k, 1) for k in KEYS[50:130]]
    spark.conf.set(PARALLELISM, "2")  # 5 splits packed into 2 tasks
    try:
        packed = spark.table(f"{CATALOG}.one")
        assert packed.rdd.getNumPartitions() == 2
        grouped = packed.groupBy("k", "n").count()
        assert "Exchange" not in executed_plan(grouped)
        assert sorted_rows(grouped) == [(k, i, 1) for i, k in enumerate(KEYS)]
    finally:
        spark.conf.set(PARALLELISM, "8")


@pytest.mark.parametrize("one_side", [False, True])
def test_a_join_of_tables_whose_regions_differ_returns_every_row(spark, root, one_side):
    """Two layouts, two function names: Spark does not pair their tasks. With
    ``v2.bucketing.shuffle.enabled`` it may shuffle one side with the other's function, which
    then computes the task of each key it is given."""
    if one_side:
        spark.conf.set("spark.sql.sources.v2.bucketing.shuffle.enabled", "true")
    try:
        one = spark.table(f"{CATALOG}.one")
        two = spark.table(f"{CATALOG}.two").withColumnRenamed("n", "m")
        joined = one.join(two, "k")
        plan = executed_plan(joined)
        if one_side:  # only two is shuffled, each row to the task of one that holds its key
            assert plan.count("Exchange") == 1
            assert "Exchange keyedpartitioning(transformexpression(regionscan_tasks_" in plan
        else:
            assert plan.count("Exchange hashpartitioning(k") == 2
        assert sorted_rows(joined) == [(KEYS[2 * j], 2 * j, j) for j in range(100)]
        outer = one.join(two, "k", "full_outer")
        assert outer.count() == 200 and outer.where("m IS NOT NULL").count() == 100
    finally:
        spark.conf.unset("spark.sql.sources.v2.bucketing.shuffle.enabled")


def test_a_self_join_pairs_the_same_tasks(spark, root):
    one = spark.table(f"{CATALOG}.one")
    joined = one.join(one.withColumnRenamed("n", "m"), "k")
    assert "Exchange" not in executed_plan(joined)  # one layout: storage-partitioned
    assert joined.count() == 200 and joined.where("n != m").count() == 0
    # a side filtered on the key (not inferred for the other side of a left join) is another
    # layout, with fewer tasks: shuffled, and still right
    part = one.where("k < 'r100'").withColumnRenamed("n", "m")
    left = one.join(part, "k", "left")
    assert "Exchange hashpartitioning(k" in executed_plan(left)
    assert sorted_rows(left) == [(k, i, i if i < 100 else None) for i, k in enumerate(KEYS)]


def test_binary_and_text_keys_are_grouped_and_int_keys_are_not(spark, root):
    binary = spark.table(f"{CATALOG}.bin").groupBy("k").count()
    assert "Exchange" not in executed_plan(binary)
    assert sorted_rows(binary) == [(k.encode(), 1) for k in KEYS]
    text = spark.table(f"{CATALOG}.text")
    assert "Exchange" not in executed_plan(text.groupBy("k").count())
    assert sorted_rows(text.groupBy("k").count().where("k IS NULL")) == [(None, 1)]
    # one side shuffled with text's function, the null key included (a full outer join keeps it)
    spark.conf.set("spark.sql.sources.v2.bucketing.shuffle.enabled", "true")
    try:
        other = spark.table(f"{CATALOG}.two").withColumnRenamed("n", "m")
        outer = text.join(other, "k", "full_outer")
        assert "Exchange keyedpartitioning(transformexpression(regionscan_tasks_" in executed_plan(outer)
        assert outer.count() == 201 and outer.where("m IS NOT NULL AND n IS NOT NULL").count() == 100
    finally:
        spark.conf.unset("spark.sql.sources.v2.bucketing.shuffle.enabled")
    ints = spark.table(f"{CATALOG}.ints").groupBy("k").count()  # HBase Bytes INT: not computed in Java
    assert "Exchange hashpartitioning(k" in executed_plan(ints)
    assert _scan_partitioning(ints).startswith("unknownpartitioning")
    assert sorted_rows(ints) == [(i, 1) for i in range(200)]


def test_format_reads_report_nothing(spark, root):
    df = spark.read.format("regionscan").option("root", root).option("table", "one").load()
    assert "Exchange hashpartitioning(" in executed_plan(df.groupBy("k").count())  # the tasks' partial counts, by k
    assert _scan_partitioning(df).startswith("unknownpartitioning")
    assert df.groupBy("k").count().count() == 200
