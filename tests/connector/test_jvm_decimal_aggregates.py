"""Exact aggregates computed by the tasks (the JVM source's partial aggregate pushdown) over a
table written through ``df.write.format("regionscan")``: COUNT, SUM, MIN, MAX and AVG of INT,
BIGINT, DECIMAL(15,2), DATE and STRING, grouped or not, equal to Spark aggregating the rows
itself (``regionscan.pushdown.aggregates=false``), nulls, all-null groups and empty ranges
included; sums too large for their partial column, and overflows as Spark meets them in ANSI
and non-ANSI mode."""

from __future__ import annotations

import datetime as dt
from contextlib import contextmanager
from decimal import Decimal

import pyarrow as pa
import pytest
from pyspark.sql import functions as F
from pyspark.sql.types import DecimalType

from connector.worker.aggregate_spec import TaskAggregation
from connector.worker.task_aggregates import fitted
from spark_plans import executed_plan

pytestmark = pytest.mark.spark

DDL = "k BIGINT, i INT, l BIGINT, q DECIMAL(15,2), d DATE, s STRING, g STRING"
MAPPING = "k BIGINT :key, i INT cf:i, l BIGINT cf:l, q DECIMAL(15,2) cf:q, d DATE cf:d, s STRING cf:s, g STRING cf:g"
ROWS = 300


def _row(j: int) -> tuple:
    group = "none" if j % 10 == 9 else f"g{j % 4}"  # group "none": every q is null (an all-null group)
    return (j, None if j % 11 == 0 else (j % 7) - 3, j * 1_000_003 - 150_000_000,
            None if j % 13 == 0 or group == "none" else Decimal(f"{(j * 37) % 5000 - 1200}.{j % 100:02d}"),
            None if j % 17 == 0 else dt.date(1994, 1, 1) + dt.timedelta(days=j % 400),
            None if j % 5 == 0 else f"s{j % 6}", group)


def _write(spark, root: str, table: str, rows: list, ddl: str, mapping: str, regions: int) -> dict:
    opts = {"root": root, "table": table}
    (spark.createDataFrame(rows, ddl).repartition(regions).write.format("regionscan").options(**opts)
     .option("hbase.columns.mapping", mapping).option("newtable", str(regions)).save())
    return opts


@pytest.fixture(scope="module")
def lineitem(spark, tmp_path_factory) -> dict:
    root = str(tmp_path_factory.mktemp("decimal_aggregates") / "root")
    return _write(spark, root, "t", [_row(j) for j in range(ROWS)], DDL, MAPPING, 3)


def _sides(spark, opts):
    on = spark.read.format("regionscan").options(**opts).load()
    off = spark.read.format("regionscan").options(**opts, **{"regionscan.pushdown.aggregates": "false"}).load()
    return on, off


def _sorted(rows) -> list:
    return sorted((tuple(r) for r in rows), key=repr)


def _all(fns, columns):
    return [f(c) for c in columns for f in fns]


PUSHED = {
    "count, sum, min, max of INT, BIGINT, DECIMAL": lambda df: df.agg(
        F.count("*"), *_all((F.count, F.sum, F.min, F.max), ("i", "l", "q"))),
    "min, max of DATE and STRING": lambda df: df.agg(*_all((F.min, F.max, F.count), ("d", "s"))),
    "avg of DECIMAL and INT (Spark's SUM and COUNT)": lambda df: df.agg(F.avg("q"), F.avg("i")),
    "q1's shape: decimal sums and averages by two columns": lambda df: df.groupBy("g", "s").agg(
        F.sum("q"), F.avg("q"), F.sum("l"), F.count("*"), F.min("d"), F.max("q")),
    "grouped by a DATE": lambda df: df.groupBy("d").agg(F.sum("q"), F.max("s")),
    "grouped by a DECIMAL": lambda df: df.groupBy("q").agg(F.count("*"), F.sum("i")),
    "an all-null group: SUM and MIN null, COUNT 0": lambda df: df.where("g = 'none'").groupBy("g").agg(
        F.sum("q"), F.min("q"), F.count("q"), F.count("*")),
    "an empty range": lambda df: df.where("k > 100000").agg(F.count("*"), F.sum("q"), F.min("d"), F.sum("l")),
    "an empty range, grouped": lambda df: df.where("k < 0").groupBy("g").agg(F.sum("q")),
    "under a key range": lambda df: df.where("k >= 40 AND k < 170").groupBy("g").agg(F.sum("q"), F.max("l")),
}


@pytest.mark.parametrize("name", list(PUSHED))
def test_pushed_aggregates_equal_sparks_own(spark, lineitem, name):
    on, off = _sides(spark, lineitem)
    query = PUSHED[name](on)
    assert "(partial, per task)" in executed_plan(query), executed_plan(query)
    reference = PUSHED[name](off)
    assert "PushedAggregation" not in executed_plan(reference)
    assert query.schema == reference.schema  # SUM(DECIMAL(15,2)) is DECIMAL(25,2) either way
    assert _sorted(query.collect()) == _sorted(reference.collect())


def test_explain_shows_the_decimal_sums_pushed(spark, lineitem):
    on, _ = _sides(spark, lineitem)
    query = on.groupBy("g").agg(F.sum("q"), F.avg("q"))
    shown = query._jdf.queryExecution().explainString(
        spark._jvm.org.apache.spark.sql.execution.ExplainMode.fromString("simple"))
    assert "PushedAggregation: [SUM(q), COUNT(q)], PushedGroupBy: [g] (partial, per task)" in shown, shown
    assert query.schema["sum(q)"].dataType == DecimalType(25, 2)


def test_the_exact_sums_by_hand(spark, lineitem):
    on, _ = _sides(spark, lineitem)
    rows = [_row(j) for j in range(ROWS)]
    got = on.agg(F.sum("q"), F.sum("l"), F.max("q")).collect()[0]
    qs = [r[3] for r in rows if r[3] is not None]
    assert tuple(got) == (sum(qs), sum(r[2] for r in rows), max(qs))


@contextmanager
def _ansi(spark, on: bool):
    before = spark.conf.get("spark.sql.ansi.enabled")
    spark.conf.set("spark.sql.ansi.enabled", str(on).lower())
    try:
        yield
    finally:
        spark.conf.set("spark.sql.ansi.enabled", before)


def _outcome(query):
    try:
        return _sorted(query.collect())
    except Exception as exc:  # noqa: BLE001 - the overflow error Spark raises, compared by kind
        text = str(exc)
        assert "ARITHMETIC_OVERFLOW" in text or "overflow" in text.lower(), text
        return "overflow"


@pytest.fixture(scope="module")
def large(spark, tmp_path_factory) -> dict:
    """Sums past their partial column: DECIMAL(15,2) sums past 10^13 in one task, DECIMAL(38,0)
    sums past 10^38, BIGINT running sums past 2^63 (and back), in one region each."""
    root = str(tmp_path_factory.mktemp("large_sums") / "root")
    big = Decimal("9999999999999.99")
    rows = [(j, big if j < 6 else Decimal("-1.00"),
             Decimal(9 * 10**37) if j in (1, 3) else (Decimal(-9 * 10**37) if j == 2 else None),
             2**62 if j < 3 else -(2**62), "x" if j % 2 else "y") for j in range(8)]
    return _write(spark, root, "big", rows, "k INT, a DECIMAL(15,2), b DECIMAL(38,0), l BIGINT, g STRING",
                  "k INT :key, a DECIMAL(15,2) cf:a, b DECIMAL(38,0) cf:b, l BIGINT cf:l, g STRING cf:g", 1)


LARGE = {
    "DECIMAL(15,2) past 10^13 in a task, DECIMAL(38,0) within range": lambda df: df.agg(
        F.sum("a"), F.count("a"), F.max("a"), F.sum("b")),
    "DECIMAL(15,2) past 10^13, grouped": lambda df: df.groupBy("g").agg(F.sum("a"), F.count("*"), F.min("a")),
    "DECIMAL(38,0) past 10^38, grouped": lambda df: df.groupBy("g").agg(F.sum("b")),
    "BIGINT: a running sum past 2^63 and back": lambda df: df.agg(F.sum("l")),
    "BIGINT past 2^63, grouped": lambda df: df.groupBy("g").agg(F.sum("l")),
    "BIGINT within range": lambda df: df.where("k >= 2 AND k < 6").agg(F.sum("l")),
}


# what Spark itself answers (pushdown off), written out: group x's DECIMAL(38,0) sum is 1.8 * 10^38;
# BIGINT running sums reach 2^63 (all rows; group y) though the totals fit
OUTCOMES = {
    ("DECIMAL(38,0) past 10^38, grouped", True): "overflow",
    ("DECIMAL(38,0) past 10^38, grouped", False): [("x", None), ("y", Decimal(-9 * 10**37))],
    ("BIGINT: a running sum past 2^63 and back", True): "overflow",
    ("BIGINT: a running sum past 2^63 and back", False): [(-2**63,)],
    ("BIGINT past 2^63, grouped", True): "overflow",
    ("BIGINT past 2^63, grouped", False): [("x", -2**63), ("y", 0)],
}


@pytest.mark.parametrize("ansi", [True, False], ids=["ansi", "non-ansi"])
@pytest.mark.parametrize("name", list(LARGE))
def test_large_sums_and_overflows_as_spark_meets_them(spark, large, name, ansi):
    on, off = _sides(spark, large)
    with _ansi(spark, ansi):
        query = LARGE[name](on)
        assert "(partial, per task)" in executed_plan(query)
        got, want = _outcome(query), _outcome(LARGE[name](off))
    assert got == want
    if name.startswith("DECIMAL(15,2) past 10^13 in a task"):
        assert got == [(Decimal("59999999999997.94"), 8, Decimal("9999999999999.99"), Decimal(9 * 10**37))]
    if (name, ansi) in OUTCOMES:
        assert got == OUTCOMES[name, ansi]


def _spec(doc: dict) -> TaskAggregation:
    return TaskAggregation(doc, {"g": "g", "a": "a", "l": "l"})


def test_a_sum_past_its_partial_column_becomes_rows_that_add_up_to_it():
    spec = _spec({"group_by": ["g"], "aggregates": [{"fn": "sum", "column": "a"}, {"fn": "count_star"},
                                                    {"fn": "max", "column": "a"}, {"fn": "sum", "column": "l"}]})
    target = pa.schema([("g", pa.string()), ("s", pa.decimal128(15, 2)), ("n", pa.int64()),
                        ("m", pa.decimal128(15, 2)), ("sl", pa.int64())])
    result = pa.table({
        "g": ["small", "big", "negative"],
        "s": pa.array([Decimal("1.50"), Decimal("25000000000000.01"), Decimal("-10000000000000.00")],
                      pa.decimal128(38, 2)),
        "n": pa.array([1, 3, 2], pa.int64()),
        "m": pa.array([Decimal("1.50"), Decimal("9999999999999.99"), Decimal("-1.00")], pa.decimal128(15, 2)),
        "sl": pa.array([5, None, 7], pa.decimal128(38, 0)),
    })
    out = fitted(result, spec, target)
    assert out.schema == target
    by_group: dict = {}
    for row in out.to_pylist():
        by_group.setdefault(row["g"], []).append(row)
    assert len(by_group["small"]) == 1 and len(by_group["big"]) == 3 and len(by_group["negative"]) == 2
    limit = Decimal("9999999999999.99")
    for name, want_sum, want_n, want_max, want_l in (("big", Decimal("25000000000000.01"), 3, limit, None),
                                                      ("negative", Decimal("-10000000000000.00"), 2,
                                                       Decimal("-1.00"), 7)):
        rows = by_group[name]
        assert sum(r["s"] for r in rows) == want_sum and all(abs(r["s"]) <= limit for r in rows)
        assert sum(r["n"] for r in rows) == want_n and rows[0]["n"] == want_n  # counted once
        assert {r["m"] for r in rows} == {want_max}
        if want_l is None:
            assert all(r["sl"] is None for r in rows)
        else:
            assert sum(r["sl"] for r in rows) == want_l


def test_a_bigint_sum_past_2_63_is_split_too():
    spec = _spec({"group_by": [], "aggregates": [{"fn": "sum", "column": "l"}]})
    target = pa.schema([("sl", pa.int64())])
    total = 3 * 2**63 + 5
    out = fitted(pa.table({"sl": pa.array([Decimal(total)], pa.decimal128(38, 0))}), spec, target)
    assert out.num_rows == 4 and sum(out.column(0).to_pylist()) == total


def test_ansi_must_be_a_boolean():
    with pytest.raises(ValueError, match="ansi must be true or false"):
        _spec({"aggregates": [{"fn": "count_star"}], "ansi": "yes"})
