"""SUM, COUNT and AVG of arithmetic (``SUM(a * (1 - b))``, TPC-H q1's and q6's shape) computed by
the tasks: every shape equal to Spark aggregating the rows itself (pushdown off), in ANSI and
non-ANSI mode, with ``spark.sql.decimalOperations.allowPrecisionLoss`` on and off, nulls
included, grouped and not; each expression's type as Spark's own plan gives it; values rounded
half away from zero where Spark reduces a scale; overflows met as Spark meets them; and an
expression past the worker's exact width left to Spark, which the scan's explain says."""

from __future__ import annotations

import re
from contextlib import contextmanager
from decimal import Decimal

import pyarrow as pa
import pytest

from connector.worker.aggregate_expressions import NotComputable, parse_expression
from spark_plans import executed_plan
from test_jvm_decimal_aggregates import _write

pytestmark = pytest.mark.spark

DDL = "k BIGINT, i INT, l BIGINT, a DECIMAL(15,2), b DECIMAL(15,2), c DECIMAL(15,2), w DECIMAL(38,10), g STRING"
MAPPING = ("k BIGINT :key, i INT cf:i, l BIGINT cf:l, a DECIMAL(15,2) cf:a, b DECIMAL(15,2) cf:b, "
           "c DECIMAL(15,2) cf:c, w DECIMAL(38,10) cf:w, g STRING cf:g")
ROWS = 240

# Each shape of Spark's decimal and integer arithmetic: a literal's own digits (1 - b), a chain
# past 38 digits (q1's charge), INT beside DECIMAL and BIGINT, a scale reduced with rounding (w * a:
# exact scale 12, Spark's 6 with precision loss), an addition past 38 digits (w + a)
EXPRESSIONS = ["a * (1 - b)", "a * (1 - b) * (1 + c)", "a * b", "a + b - c", "i * l", "i + 1", "a * i",
               "a * l", "w * a", "w + a", "l * 2.5"]


def _row(j: int) -> tuple:
    sign = -1 if j % 3 == 0 else 1
    # w * a lands exactly half-way at Spark's scale 6 on some rows (0.0000005 x 1.00): rounding is seen
    w = Decimal(sign * 5) / 10**7 if j % 8 == 0 else Decimal(sign * ((j * 7919) % 10**6)) / 10**10 + j * 10**9
    return (j, None if j % 11 == 0 else (j % 9) - 4, sign * j * 1_000_003,
            None if j % 13 == 0 else (Decimal("1.00") if j % 8 == 0 else Decimal(f"{(j * 37) % 9000 - 2000}.{j % 100:02d}")),
            Decimal(f"0.{j % 11:02d}"), None if j % 7 == 0 else Decimal(f"0.0{j % 9}"),
            None if j % 17 == 0 else w, "none" if j % 10 == 9 else f"g{j % 3}")


@pytest.fixture(scope="module")
def items(spark, tmp_path_factory) -> dict:
    root = str(tmp_path_factory.mktemp("expression_aggregates") / "root")
    return _write(spark, root, "t", [_row(j) for j in range(ROWS)], DDL, MAPPING, 3)


@contextmanager
def _conf(spark, ansi: bool, precision_loss: bool):
    keys = {"spark.sql.ansi.enabled": ansi, "spark.sql.decimalOperations.allowPrecisionLoss": precision_loss}
    before = {k: spark.conf.get(k) for k in keys}
    for k, v in keys.items():
        spark.conf.set(k, str(v).lower())
    try:
        yield
    finally:
        for k, v in before.items():
            spark.conf.set(k, v)


def _views(spark, opts: dict) -> None:
    spark.read.format("regionscan").options(**opts).load().createOrReplaceTempView("pushed")
    (spark.read.format("regionscan").options(**opts, **{"regionscan.pushdown.aggregates": "false"}).load()
     .createOrReplaceTempView("spark_own"))


def _sorted(rows) -> list:
    return sorted((tuple(r) for r in rows), key=repr)


def _outcome(query):
    """The rows, or the kind of error Spark raised (by its error class), compared across the sides."""
    try:
        return _sorted(query.collect())
    except Exception as exc:  # noqa: BLE001 - the overflow Spark raises, compared by its class
        found = re.findall(r"NUMERIC_VALUE_OUT_OF_RANGE|ARITHMETIC_OVERFLOW", str(exc))
        assert found, str(exc)[:2000]
        return found[0]


MODES = [(True, True), (True, False), (False, True), (False, False)]
MODE_IDS = ["ansi-loss", "ansi-noloss", "nonansi-loss", "nonansi-noloss"]


@pytest.mark.parametrize("grouped", [True, False], ids=["grouped", "ungrouped"])
@pytest.mark.parametrize("ansi,precision_loss", MODES, ids=MODE_IDS)
def test_sums_and_averages_of_expressions_equal_sparks_own(spark, items, ansi, precision_loss, grouped):
    _views(spark, items)
    aggs = ", ".join(f"sum({e}) s{n}, avg({e}) v{n}, count({e}) c{n}" for n, e in enumerate(EXPRESSIONS))
    text = f"select {'g, ' if grouped else ''}{aggs}, count(*) n from {{}}{' group by g' if grouped else ''}"
    with _conf(spark, ansi, precision_loss):
        query, reference = spark.sql(text.format("pushed")), spark.sql(text.format("spark_own"))
        plan = executed_plan(query)
        # Spark hands a source arithmetic only in ANSI mode (where an overflow fails, as in the worker);
        # without it Spark evaluates the expressions and aggregates the rows itself
        assert ("(partial, per task)" in plan) == ansi, plan
        assert "PushedAggregation" not in executed_plan(reference)
        assert query.schema == reference.schema
        got, want = _outcome(query), _outcome(reference)
    assert got == want
    assert isinstance(got, list) and len(got) == (4 if grouped else 1)  # g0, g1, g2, none


def test_each_expression_types_as_sparks_plan(spark, items):
    """The worker's type of each expression, the partial column the tasks return (which Spark's final
    SUM casts to the expression's type), is the one Spark's analyzer gives the expression."""
    _views(spark, items)
    for ansi, precision_loss in MODES[:2]:
        with _conf(spark, ansi, precision_loss):
            for e in EXPRESSIONS:
                query = spark.sql(f"select sum({e}) from pushed")
                assert "(partial, per task)" in executed_plan(query)
                scan = query._jdf.queryExecution().optimizedPlan().collectLeaves().head()
                partial = scan.schema().fields()[0].dataType().simpleString()
                want = spark.sql(f"select {e} x from spark_own").schema["x"].dataType.simpleString()
                assert partial == (want if want.startswith("decimal") else "bigint"), (e, precision_loss, partial, want)


def test_rounding_is_half_away_from_zero(spark, items):
    """w * a at Spark's scale 6 (precision loss on): 0.0000005 x 1.00 rounds to 0.000001, and its
    negative to -0.000001, as Java's HALF_UP does (not to even)."""
    _views(spark, items)
    with _conf(spark, True, True):
        query = spark.sql("select k, sum(w * a) from pushed where k < 200 and k % 8 = 0 group by k")
        rows = dict((k, v) for k, v in query.collect())
    assert rows[8] == Decimal("0.000001") and rows[24] == Decimal("-0.000001")  # k % 3 == 0 is negative


@pytest.fixture(scope="module")
def large(spark, tmp_path_factory) -> dict:
    """Values whose products overflow: DECIMAL(38,10) x DECIMAL(15,2) past Spark's DECIMAL(38,6),
    INT x BIGINT past BIGINT, in one region."""
    root = str(tmp_path_factory.mktemp("expression_overflow") / "root")
    rows = [(j, Decimal(10**27) if j == 2 else Decimal(j), Decimal("9999999999999.99"), 4, 2**62 if j == 3 else j,
             "x" if j % 2 else "y") for j in range(6)]
    return _write(spark, root, "big", rows, "k INT, w DECIMAL(38,10), a DECIMAL(15,2), i INT, l BIGINT, g STRING",
                  "k INT :key, w DECIMAL(38,10) cf:w, a DECIMAL(15,2) cf:a, i INT cf:i, l BIGINT cf:l, g STRING cf:g", 1)


OVERFLOWS = {
    "decimal product past DECIMAL(38,6)": ("select sum(w * a) from {}", "NUMERIC_VALUE_OUT_OF_RANGE"),
    "decimal product past DECIMAL(38,6), grouped": ("select g, sum(w * a) from {} group by g",
                                                    "NUMERIC_VALUE_OUT_OF_RANGE"),
    "integer product past BIGINT": ("select sum(i * l) from {}", "ARITHMETIC_OVERFLOW"),
    "within range": ("select g, sum(w * a), sum(i * l) from {} where k <> 2 and k <> 3 group by g", None),
}


@pytest.mark.parametrize("ansi", [True, False], ids=["ansi", "non-ansi"])
@pytest.mark.parametrize("name", list(OVERFLOWS))
def test_overflows_as_spark_meets_them(spark, large, name, ansi):
    _views(spark, large)
    text, error = OVERFLOWS[name]
    with _conf(spark, ansi, True):
        query = spark.sql(text.format("pushed"))
        assert ("(partial, per task)" in executed_plan(query)) == ansi
        got, want = _outcome(query), _outcome(spark.sql(text.format("spark_own")))
    assert got == want
    if ansi and error:
        assert got == error
    else:
        assert isinstance(got, list)  # non-ANSI: Spark's product is null (or wraps), its sum skips it


def test_an_expression_past_the_workers_width_is_left_to_spark_and_explain_says_so(spark, items):
    """DECIMAL(38,10) x DECIMAL(38,10) needs 77 digits exactly: Spark aggregates it."""
    _views(spark, items)
    with _conf(spark, True, True):
        query = spark.sql("select sum(w * w) from pushed where k < 20")
        plan = executed_plan(query)
        assert "(partial, per task)" not in plan
        assert "AggregateNotPushed: aggregate SUM((w * w)) ((w * w) needs 77 digits exactly; the worker computes " \
               "up to 76) is not computed by the tasks; let Spark aggregate" in plan, plan
        assert _outcome(query) == _outcome(spark.sql("select sum(w * w) from spark_own where k < 20"))


def test_malformed_expressions_are_named_in_one_line():
    from storage import InvalidArgument

    def typed(doc):
        return parse_expression(doc, str, lambda n: {"a": pa.decimal128(15, 2), "s": pa.string()}[n], True)

    with pytest.raises(InvalidArgument, match=r"op must be one of \+, -, \* with two args"):
        typed({"op": "/", "args": [{"column": "a"}, {"column": "a"}]})
    with pytest.raises(InvalidArgument, match="expression type 'double' must be int, bigint or decimal"):
        typed({"literal": "1.5", "type": "double"})
    with pytest.raises(NotComputable, match="s is string, not INT, BIGINT or DECIMAL"):
        typed({"op": "+", "args": [{"column": "s"}, {"column": "a"}]})
    assert str(typed({"op": "*", "args": [{"column": "a"}, {"literal": "1", "type": "int"}]}).kind) == "decimal128(17, 2)"


def test_the_worker_rounds_and_overflows_as_spark_in_either_mode():
    """Evaluated directly (Spark hands arithmetic to a source only in ANSI mode): Spark's
    DECIMAL(38,6) for DECIMAL(38,10) x DECIMAL(15,2), rounded half away from zero; a product past
    it null without ANSI and NUMERIC_VALUE_OUT_OF_RANGE with it; INT x BIGINT wraps or fails."""
    types = {"w": pa.decimal128(38, 10), "a": pa.decimal128(15, 2), "i": pa.int32(), "l": pa.int64()}
    product = parse_expression({"op": "*", "args": [{"column": "w"}, {"column": "a"}]}, str, types.__getitem__, True)
    assert product.ddl == "decimal(38,6)"
    w = [Decimal("0.0000005"), Decimal("-0.0000005"), Decimal("0.0000004999"), Decimal(10**27), None]
    a = [Decimal("1.00"), Decimal("1.00"), Decimal("1.00"), Decimal("9999999999999.99"), Decimal("2.00")]
    columns = {"w": pa.array(w, types["w"]), "a": pa.array(a, types["a"])}
    got = product.values(columns, 5, ansi=False).to_pylist()
    assert got == [Decimal("0.000001"), Decimal("-0.000001"), Decimal("0.000000"), None, None]
    with pytest.raises(OverflowError, match=r"NUMERIC_VALUE_OUT_OF_RANGE.*DECIMAL\(38,6\)"):
        product.values(columns, 5, ansi=True)
    exact = parse_expression({"op": "*", "args": [{"column": "w"}, {"column": "a"}]}, str, types.__getitem__, False)
    assert exact.ddl == "decimal(38,12)"  # allowPrecisionLoss=false: precision and scale capped at 38
    longs = parse_expression({"op": "*", "args": [{"cast": {"column": "i"}, "type": "bigint"}, {"column": "l"}]},
                             str, types.__getitem__, True)
    columns = {"i": pa.array([4, 2], pa.int32()), "l": pa.array([2**62, 3], pa.int64())}
    assert longs.values(columns, 2, ansi=False).to_pylist() == [0, 6]  # wraps, as Java's long
    with pytest.raises(OverflowError, match="ARITHMETIC_OVERFLOW"):
        longs.values(columns, 2, ansi=True)
