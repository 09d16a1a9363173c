"""DECIMAL columns read through the JVM source (``format("regionscan")``): a DECIMAL of at most
18 digits is read from the Arrow batch as Spark's unscaled long (``StreamColumnVector``), a
wider one as Arrow's BigDecimal. Every value comes back exactly as written: negatives, zero,
nulls and the largest and smallest values of each precision, in the rows Spark collects and in
arithmetic that Spark's generated code reads from the batch."""

from __future__ import annotations

from decimal import Decimal, localcontext

import pytest
from pyspark.sql import functions as F

pytestmark = pytest.mark.spark

DDL = "k BIGINT, a DECIMAL(18,4), b DECIMAL(15,2), w DECIMAL(38,10), n DECIMAL(1,0)"
MAPPING = "k BIGINT :key, a DECIMAL(18,4) cf:a, b DECIMAL(15,2) cf:b, w DECIMAL(38,10) cf:w, n DECIMAL(1,0) cf:n"
A_MAX = Decimal("99999999999999.9999")  # 18 digits: the widest a long holds
W_MAX = Decimal("9999999999999999999999999999.9999999999")
W_MIN = Decimal("-9999999999999999999999999999.9999999999")  # a literal: negation would round to 28 digits


def _row(j: int) -> tuple:
    a = [A_MAX, -A_MAX, Decimal("0.0000"), Decimal("-0.0001"), None][j % 5] if j < 10 else \
        Decimal(f"{(j * 7919) % 100000 - 50000}.{j % 10000:04d}")
    b = None if j % 7 == 0 else Decimal(f"{(j * 104729) % 10**13 - 5 * 10**12}.{j % 100:02d}")
    w = [W_MAX, W_MIN, None][j % 3] if j < 6 else Decimal(f"-{j}.{j:010d}")
    n = None if j % 4 == 0 else Decimal((j % 19) - 9)
    return (j, a, b, w, n)


ROWS = [_row(j) for j in range(2500)]


@pytest.fixture(scope="module")
def table(spark, tmp_path_factory) -> dict:
    opts = {"root": str(tmp_path_factory.mktemp("jvm_decimals") / "root"), "table": "d"}
    (spark.createDataFrame(ROWS, DDL).repartition(2).write.format("regionscan").options(**opts)
     .option("hbase.columns.mapping", MAPPING).option("newtable", "2").save())
    return opts


def _read(spark, opts):
    # Spark aggregates here itself: the batches' decimals are what it reads
    return (spark.read.format("regionscan").options(**opts)
            .option("regionscan.pushdown.aggregates", "false").load())


def test_every_decimal_reads_back_exactly(spark, table):
    got = sorted(tuple(r) for r in _read(spark, table).collect())
    assert got == ROWS


def test_generated_code_reads_the_unscaled_longs(spark, table):
    """Sums and products computed by Spark over the batch's columns equal Python's exact ones."""
    df = _read(spark, table)
    got = df.select(F.sum("a"), F.sum("b"), F.sum("w"), F.sum("n"), F.max("a"), F.min("a"),
                    F.sum(F.col("b") * F.col("n"))).collect()[0]

    with localcontext() as exact:
        exact.prec = 80  # Python's default 28 digits would round the 38-digit sums

        def total(i):
            return sum(r[i] for r in ROWS if r[i] is not None)

        expected = (total(1), total(2), total(3), total(4), A_MAX, -A_MAX,
                    sum(r[2] * r[4] for r in ROWS if r[2] is not None and r[4] is not None))
    assert tuple(got) == expected


def test_a_filter_on_a_narrow_decimal_keeps_the_right_rows(spark, table):
    df = _read(spark, table).where(F.col("b") < F.lit(Decimal("-1000000000.00")))
    expected = sorted(r[0] for r in ROWS if r[2] is not None and r[2] < Decimal("-1000000000.00"))
    assert expected and sorted(r.k for r in df.select("k").collect()) == expected
