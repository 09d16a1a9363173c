"""Filters the engine worker evaluates on the decoded rows (connector/decoded_filters.py).

Two paths must agree with Spark's own evaluation: the kernel on Arrow batches
(checked against SQL's three-valued logic written out row by row, on random
batches and random filter trees), and the JVM source end to end (counts and rows
with the option on, equal to the same query with ``regionscan.pushdown.decoded=false``,
where Spark evaluates the filter, on a table with nulls, unflushed rows, updated
rows and deletes).
"""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import datasource as ds

import connector
import storage
from connector.decoded_filters import (Column, Compare, DecodedFilter, Literal, Remainder, evaluable, remainder,
                                       take_decoded)
from connector.disjunction import And, Or, push_tree
from connector.source_config import SourceConfig
from spark_plans import executed_plan, worker_stats

# -- the kernel, against SQL's three-valued logic ------------------------------

_INT8 = st.one_of(st.none(), st.integers(-128, 127))
_INT32 = st.one_of(st.none(), st.integers(-(1 << 31), (1 << 31) - 1), st.integers(-20, 20))
_TEXT = st.one_of(st.none(), st.text(alphabet="ab5\u00fc", max_size=4))


def _java_mod(a: int, k: int) -> int:
    """Java's ``a % k``: truncated division, the dividend's sign."""
    r = abs(a) % abs(k)
    return -r if a < 0 else r


def _value(e, row: dict):
    if isinstance(e, Column):
        return row[e.name]
    if isinstance(e, Literal):
        return e.value
    v = _value(e.operand, row)
    return None if v is None else _java_mod(v, e.divisor)


def _cmp(op: str, a, b):
    if op == "<=>":
        return a == b if a is not None and b is not None else (a is None and b is None)
    if a is None or b is None:
        return None
    if isinstance(a, str):
        a, b = a.encode(), b.encode()  # Spark's default collation: UTF-8 bytes
    return {"=": a == b, "<>": a != b, "<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[op]


def _truth(f, row: dict):
    """The filter on one row in SQL's three-valued logic: True, False or None (unknown)."""
    kind = type(f).__name__
    if kind in ("And", "Or"):
        values = [_truth(c, row) for c in f.children]
        decisive = kind == "Or"  # True decides an OR, False an AND
        if decisive in values:
            return decisive
        return None if None in values else not decisive
    if kind == "Not":
        v = _truth(f.child, row)
        return None if v is None else not v
    if isinstance(f, Compare):
        return _cmp(f.op, _value(f.left, row), _value(f.right, row))
    v = row[f.attribute[0]]
    if kind == "IsNull":
        return v is None
    if kind == "IsNotNull":
        return v is not None
    if kind == "In":
        if v is None:
            return None
        if v in [c for c in f.value if c is not None]:
            return True
        return None if None in f.value else False
    if kind in ("StringStartsWith", "StringEndsWith", "StringContains"):
        if v is None:
            return None
        return {"StringStartsWith": v.startswith, "StringEndsWith": v.endswith,
                "StringContains": v.__contains__}[kind](f.value)
    return _cmp({"EqualTo": "=", "EqualNullSafe": "<=>", "LessThan": "<", "LessThanOrEqual": "<=",
                 "GreaterThan": ">", "GreaterThanOrEqual": ">="}[kind], v, f.value)


_DIVISORS = st.sampled_from([1, 2, 3, -3, 7, 128, -128, 1 << 31, (1 << 63) - 1])
_INT_SIDE = st.one_of(
    st.builds(Column, st.sampled_from(["t", "i"])),
    st.builds(Literal, st.one_of(st.none(), st.integers(-300, 300))),
    st.builds(Remainder, st.builds(Column, st.sampled_from(["t", "i"])), _DIVISORS),
)
_OPS = st.sampled_from(["=", "<>", "<=>", "<", "<=", ">", ">="])
_INT_LITERAL = st.one_of(st.none(), st.integers(-200, 200))
_LEAF = st.one_of(
    st.builds(Compare, _OPS, _INT_SIDE, _INT_SIDE),
    st.builds(Compare, _OPS, st.just(Column("s")), st.builds(Literal, _TEXT)),
    st.builds(lambda c: ds.IsNull((c,)), st.sampled_from(["t", "i", "s"])),
    st.builds(lambda c: ds.IsNotNull((c,)), st.sampled_from(["t", "i", "s"])),
    st.builds(lambda c, vs: ds.In((c,), tuple(vs)), st.sampled_from(["t", "i"]), st.lists(_INT_LITERAL, max_size=3)),
    st.builds(lambda vs: ds.In(("s",), tuple(vs)), st.lists(_TEXT, max_size=3)),
    st.builds(lambda cls, v: cls(("s",), v), st.sampled_from([ds.StringStartsWith, ds.StringEndsWith,
                                                            ds.StringContains]), st.text(alphabet="ab5", max_size=2)),
    st.builds(lambda cls, v: cls(("i",), v), st.sampled_from([ds.EqualTo, ds.EqualNullSafe, ds.LessThan,
                                                            ds.GreaterThanOrEqual]), _INT_LITERAL),
)
_TREE = st.recursive(_LEAF, lambda inner: st.one_of(
    st.builds(ds.Not, inner),
    st.builds(lambda cs: And(tuple(cs)), st.lists(inner, min_size=2, max_size=3)),
    st.builds(lambda cs: Or(tuple(cs)), st.lists(inner, min_size=2, max_size=3)),
), max_leaves=6)


@settings(max_examples=300, deadline=None)
@given(rows=st.lists(st.fixed_dictionaries({"t": _INT8, "i": _INT32, "s": _TEXT}), max_size=30),
       filters=st.lists(_TREE, min_size=1, max_size=3))
def test_the_mask_is_sql_three_valued_logic_row_by_row(rows, filters):
    batch = pa.RecordBatch.from_pydict({
        "t": pa.array([r["t"] for r in rows], pa.int8()),
        "i": pa.array([r["i"] for r in rows], pa.int32()),
        "s": pa.array([r["s"] for r in rows], pa.string()),
    })
    got = DecodedFilter(filters).mask(batch).to_pylist()
    want = [all(_truth(f, r) is True for f in filters) for r in rows]
    assert got == want


def test_remainder_is_javas_also_at_a_types_edge():
    values = pa.array([-7, 7, None, -128, 127, 0], pa.int8())
    assert remainder(values, 3).to_pylist() == [-1, 1, None, -2, 1, 0]
    assert remainder(values, 128).to_pylist() == [-7, 7, None, 0, 127, 0]  # -128 % 128 needs a wider type
    assert remainder(values, 1000).to_pylist() == values.to_pylist()
    big = pa.array([-(1 << 31), (1 << 31) - 1], pa.int32())
    assert remainder(big, (1 << 63) - 1).to_pylist() == big.to_pylist()


def test_only_exactly_evaluable_filters_are_taken():
    types = {"i": pa.int32(), "s": pa.string(), "d": pa.float64(), "m": pa.decimal128(10, 2),
             "ts": pa.timestamp("us", "UTC")}.get
    assert evaluable(Compare("=", Remainder(Column("i"), 3), Literal(0)), types)
    assert evaluable(ds.StringContains(("s",), "5"), types)
    assert evaluable(ds.In(("i",), (1, None)), types)
    assert evaluable(ds.LessThan(("ts",), dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc)), types)
    # NaN ordering and decimals are Spark's; a type mismatch or an unknown column is not guessed at
    assert not evaluable(ds.GreaterThan(("d",), 1.5), types)
    assert not evaluable(ds.EqualTo(("m",), 1), types)
    assert not evaluable(ds.EqualTo(("s",), 1), types)
    assert not evaluable(ds.LessThan(("ts",), dt.datetime(2024, 1, 1)), types)  # a wall clock against an instant
    assert not evaluable(Compare("=", Remainder(Column("s"), 3), Literal(0)), types)
    assert not evaluable(Compare("=", Remainder(Column("i"), 0), Literal(0)), types)
    assert not evaluable(ds.EqualTo(("nope",), 1), types)
    assert not evaluable(Or((ds.EqualTo(("i",), 1), ds.GreaterThan(("d",), 1.0))), types)  # one side is Spark's


def test_taken_filters_are_handled_and_their_notes_say_where():
    config = SourceConfig.from_options({"root": "/nowhere", "table": "t",
                                        "hbase.columns.mapping": "k INT :key, n INT cf:n, s STRING cf:s"})
    mod = Compare("=", Remainder(Column("n"), 3), Literal(0))
    contains = ds.StringContains(("s",), "5")
    result = push_tree([mod, contains], config.read_serde(), config.column_filters, config.superset_filters)
    assert result.residual == [mod, contains]
    kinds = {"k": pa.int32(), "n": pa.int32(), "s": pa.string()}
    take_decoded(result, lambda name: kinds.get(name.lower()))
    assert result.residual == [] and result.decoded == [mod, contains]
    assert all(any(f is h for h in result.handled) for f in (mod, contains))
    texts = [n for n in result.notes if n.startswith(("(n % 3) = 0:", "s CONTAINS"))]
    assert texts and all("evaluated by the engine worker on the decoded rows" in n for n in texts), result.notes


# -- end to end, through the JVM source ---------------------------------------

MAPPING = "k STRING :key, i INT cf:i, t TINYINT cf:t, s STRING cf:s, d DOUBLE cf:d, dt DATE cf:dt"
ROWS = 240


def _row(j: int, bump: int = 0) -> dict:
    return {"k": f"r{j:03d}", "i": None if j % 11 == 0 else j * 7 - 800 + bump, "t": j % 100 - 50,
            "s": None if j % 5 == 0 else f"s{j % 13}x{j % 4}", "d": j / 4.0,
            "dt": dt.date(2021, 1, 1) + dt.timedelta(days=j % 30)}


@pytest.fixture(scope="module")
def table(tmp_path_factory) -> dict:
    """Two regions; rows 200.. and the updates only in the WAL; deleted rows and cells."""
    root = str(tmp_path_factory.mktemp("decoded_filters") / "root")
    opts = {"root": root, "table": "dec", "hbase.columns.mapping": MAPPING}
    serde = SourceConfig.from_options(opts).read_serde()
    conn = storage.connect(root)
    table = conn.create_table("dec", {"cf": {}}, split_keys=[b"r120"], settings={"wal_sync": "none"})
    with table.batch() as batch:
        for j in range(200):
            batch.put(*serde.serialize(_row(j)))
    table.flush()
    with table.batch() as batch:
        for j in range(200, ROWS):
            batch.put(*serde.serialize(_row(j)))
        for j in range(40, 60):  # updated rows: a newer i in the WAL over the flushed one
            batch.put(*serde.serialize(_row(j, bump=3)))
    for j in range(60, 66):
        table.delete(f"r{j:03d}".encode())
    for j in range(70, 80):
        table.delete(f"r{j:03d}".encode(), columns=[b"cf:s"])  # s reads as null
    table.delete(b"r210")  # an unflushed row deleted
    conn.close()
    return opts


def _rows_sent(spark) -> int:
    stats = worker_stats(spark)
    return stats["counters"].get("rows_sent", 0)


def _frames(spark, opts):
    read = spark.read.format("regionscan")
    return read.options(**opts).load(), read.options(**opts, **{"regionscan.pushdown.decoded": "false"}).load()


QUERIES = [
    "i % 3 = 0 AND s LIKE '%5%'",
    "i % -7 <=> 2",
    "NOT (i % 4 = 1) OR s IS NULL",
    "t % 7 = 0 OR s LIKE '%x1'",
    "s LIKE 's1%' AND i > 0",
    "i IN (-800, -786, 20, NULL)",
    "NOT (i IN (-800, NULL))",
    "s > 's5' AND t < 0",
    "i < t",
    "dt > DATE'2021-01-20' AND i % 2 = 1",
    "CAST(d AS INT) % 5 = 1 AND s LIKE '%x2'",  # a cast from DOUBLE stays with Spark, the LIKE does not
    "CAST(t AS BIGINT) > i % 50 OR t + 1 = 0",  # a widening cast is evaluated, arithmetic is Spark's
]


@pytest.mark.spark
@pytest.mark.parametrize("where", QUERIES)
def test_counts_and_rows_equal_spark_evaluating_the_filter(spark, table, where):
    on, off = _frames(spark, table)
    want_count = off.where(where).count()
    assert on.where(where).count() == want_count
    assert sorted(on.where(where).select("k", "i").collect()) == sorted(off.where(where).select("k", "i").collect())


@pytest.mark.spark
def test_a_count_with_a_decoded_filter_is_computed_by_the_tasks(spark, table):
    on, off = _frames(spark, table)
    where = "i % 3 = 0 AND s LIKE '%5%'"
    plan = executed_plan(on.where(where).groupBy().count())
    assert "DecodedFilters: [" in plan and "PushedAggregation: [COUNT(*)]" in plan, plan
    assert "Filter " not in plan  # Spark checks nothing again
    want = off.where(where).count()
    before = _rows_sent(spark)
    assert on.where(where).count() == want
    assert _rows_sent(spark) - before <= 2  # one partial count per task, not the matching rows
    off_plan = executed_plan(off.where(where).groupBy().count())
    assert "DecodedFilters" not in off_plan and "Filter " in off_plan, off_plan


@pytest.mark.spark
def test_a_widening_cast_between_integers_is_evaluated_on_the_column(spark, table):
    on, off = _frames(spark, table)
    where = "t % 7 = 0 AND CAST(i AS BIGINT) % 4 = -1"  # Spark widens the TINYINT t to INT for t % 7
    plan = executed_plan(on.where(where).groupBy().count())
    assert "DecodedFilters: [t IS NOT NULL, i IS NOT NULL, (t % 7) = 0, (i % 4) = -1" in plan and "Filter " not in plan, plan
    assert on.where(where).count() == off.where(where).count() > 0


@pytest.mark.spark
def test_a_limit_applies_after_the_filter(spark, table):
    on, off = _frames(spark, table)
    where = "i % 2 = 1 AND s LIKE '%x3'"
    matching = {r.k for r in off.where(where).select("k").collect()}
    assert len(matching) > 6
    got = [r.k for r in on.where(where).select("k").limit(5).collect()]
    assert len(got) == 5 and set(got) <= matching


@pytest.mark.spark
def test_explain_and_connector_explain_agree(spark, table):
    on, _ = _frames(spark, table)
    query = on.where("i % 3 = 0 AND s LIKE '%5%'").select("k")
    shown = executed_plan(query)
    assert "DecodedFilters: [i IS NOT NULL, (i % 3) = 0, s CONTAINS '5'" in shown, shown
    plan = connector.explain(query)
    assert plan.decoded is not None and "(i % 3) = 0" in plan.decoded and "s CONTAINS '5'" in plan.decoded
    assert "evaluated on the decoded rows (engine worker)" in str(plan)


_CONDITIONS = st.sampled_from([
    "i % {k} = {v}", "i % {k} <> {v}", "t % {k} <=> {v}", "s LIKE '%{v}%'", "s LIKE 's{v}%'", "i > {v} * 10",
    "s IS NULL", "i IS NOT NULL", "t IN ({v}, -{v}, NULL)", "s >= 's{v}'", "d > {v}",
])


@pytest.mark.spark
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(parts=st.lists(st.tuples(_CONDITIONS, st.integers(1, 9), st.integers(0, 5), st.booleans()),
                      min_size=1, max_size=3),
       join=st.sampled_from([" AND ", " OR "]))
def test_generated_filters_count_as_spark_counts(spark, table, parts, join):
    on, off = _frames(spark, table)
    terms = [("NOT " if negate else "") + "(" + c.format(k=k, v=v) + ")" for c, k, v, negate in parts]
    where = join.join(terms)
    assert on.where(where).count() == off.where(where).count(), where
