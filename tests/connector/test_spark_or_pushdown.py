"""OR pushdown of row-key conditions through the JVM source (hbase-spark's points and ranges):
disjunctions of key points and ranges become merged, sorted, disjoint key ranges, an OR that
also tests a cell becomes a MUST_PASS_ONE engine filter list; shown by explain() and by what
the engine read, and checked against Spark filtering the unfiltered rows itself."""

from __future__ import annotations

import json
import sys

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import connector
from serde_tables import KAB_MAPPING, write_kab_table
from spark_plans import executed_plan

pytestmark = pytest.mark.spark

MAPPING = KAB_MAPPING
SPLITS = [b"k20", b"k40"]
ROWS = [(f"k{i:02d}", None if i % 9 == 0 else f"v{i % 4}", None if i % 7 == 3 and i % 9 else i % 12) for i in range(60)]
CELLS = {k: (a is not None) + (b is not None) for k, a, b in ROWS}  # cells each row holds


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("or_pushdown") / "root")
    write_kab_table(path, "t", ROWS, SPLITS)
    return path


@pytest.fixture(scope="module")
def views(spark, root):
    """The table through the JVM source, and the same rows as a local DataFrame (Spark filters those)."""
    df = spark.read.format("regionscan").options(root=root, table="t", **{"hbase.columns.mapping": MAPPING}).load()
    local = spark.createDataFrame(sorted(tuple(r) for r in df.collect()), "k STRING, a STRING, b INT")
    assert sorted(tuple(r) for r in local.collect()) == sorted(ROWS)
    return df, local


def _scan(jvm) -> dict:
    return json.loads(jvm.statsJson(sys.executable, ""))["scan"]


def _run(jvm, query):
    """(rows, cells the engine scanned, regions it scanned)."""
    before = _scan(jvm)
    rows = sorted(tuple(r) for r in query.collect())
    after = _scan(jvm)
    return rows, after["CELLS_SCANNED"] - before["CELLS_SCANNED"], after["REGIONS_SCANNED"] - before["REGIONS_SCANNED"]


def test_or_of_points_and_ranges_scans_only_those(spark, jvm, views):
    df, local = views
    where = "k = 'k01' OR k = 'k05' OR (k > 'k08' AND k <= 'k11') OR k = 'k10'"
    query = df.where(where)
    plan = executed_plan(query)
    assert "KeyRanges: 3 [[k01, k01\\x00), [k05, k05\\x00), [k08\\x00, k11\\x00)]" in plan
    assert "Filter" not in plan.split("BatchScan")[0]  # Spark does not check it again
    rows, cells, regions = _run(jvm, query)
    expected = sorted(tuple(r) for r in local.where(where).collect())
    assert rows == expected and [r[0] for r in rows] == ["k01", "k05", "k09", "k10", "k11"]
    assert cells == sum(CELLS[r[0]] for r in rows)  # only those rows were read
    assert regions == 1  # all in the first region: the others are pruned
    plan_text = str(connector.explain(query))
    assert "key ranges: 3 (2 point gets)" in plan_text and "splits: 1 over regions" in plan_text


def test_ranges_in_two_regions_prune_the_third(spark, jvm, views):
    df, local = views
    where = "k = 'k03' OR (k >= 'k50' AND k < 'k52')"
    rows, cells, regions = _run(jvm, df.where(where))
    assert [r[0] for r in rows] == ["k03", "k50", "k51"]
    assert rows == sorted(tuple(r) for r in local.where(where).collect())
    assert cells == sum(CELLS[r[0]] for r in rows) and regions == 2


def test_or_with_a_cell_test_is_an_engine_filter_list(spark, jvm, views):
    df, local = views
    where = "k = 'k01' OR a = 'v2'"
    query = df.where(where)
    plan = executed_plan(query)
    assert "EngineFilter: MultiRowRangeFilter ('k01', true, 'k01\\x00', false) OR SingleColumnValueFilter ('c', 'a', =" in plan
    assert "KeyRanges" not in plan  # a branch without a key bound: the whole key range
    assert "Filter" not in plan.split("BatchScan")[0]
    expected = sorted(tuple(r) for r in local.where(where).collect())
    counters = json.loads(jvm.statsJson(sys.executable, ""))["counters"]
    rows, cells, regions = _run(jvm, query)
    sent = json.loads(jvm.statsJson(sys.executable, ""))["counters"]["rows_sent"] - counters["rows_sent"]
    assert rows == expected and sent == len(expected) and regions == 3  # the engine dropped the rest


def test_and_of_ors_intersects_ranges_and_keeps_the_cell_filter(spark, jvm, views):
    df, local = views
    where = "(k = 'k01' OR k >= 'k55') AND (k < 'k57' OR b < 3) AND a = 'v1'"
    query = df.where(where)
    plan = executed_plan(query)
    assert "KeyRanges: 2 [[k01, k01\\x00), [k55, (open))]" in plan
    rows, cells, regions = _run(jvm, query)
    assert rows == sorted(tuple(r) for r in local.where(where).collect())
    assert regions == 2


def test_an_or_spark_must_evaluate_still_answers_right(spark, jvm, views):
    df, local = views
    where = "k = 'k01' OR upper(a) = 'V3' OR k LIKE 'k4%'"
    query = df.where(where)
    assert "Filter" in executed_plan(query).split("BatchScan")[0]
    rows, _, _ = _run(jvm, query)
    assert rows == sorted(tuple(r) for r in local.where(where).collect()) and len(rows) > 10


_KEYS = st.sampled_from(["", "k", "k0", "k05", "k055", "k1", "k19", "k20", "k2", "k33", "k40", "k41", "k59", "k6", "z"])
_KEY_OPS = st.sampled_from(["=", "<", "<=", ">", ">=", "!="])


@st.composite
def _leaf(draw):
    kind = draw(st.integers(0, 9))
    if kind <= 5:
        return f"k {draw(_KEY_OPS)} '{draw(_KEYS)}'"
    if kind == 6:
        return f"k IN ({', '.join(repr(v) for v in draw(st.lists(_KEYS, min_size=1, max_size=3)))})"
    if kind == 7:
        return f"k LIKE '{draw(st.sampled_from(['k1', 'k4', 'k0', 'z', 'k']))}%'"
    if kind == 8:
        return f"b {draw(_KEY_OPS)} {draw(st.integers(-1, 12))}"
    return f"a = 'v{draw(st.integers(0, 4))}'" if draw(st.booleans()) else "b IS NULL"


_TREES = st.recursive(_leaf(), lambda sub: st.tuples(st.sampled_from([" OR ", " AND "]), st.lists(sub, min_size=2, max_size=3))
                      .map(lambda t: "(" + t[0].join(t[1]) + ")"), max_leaves=7)


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(where=_TREES)
def test_random_or_and_trees_agree_with_spark_on_the_unfiltered_rows(spark, jvm, views, where):
    df, local = views
    query = df.where(where)
    handled = "Filter" not in executed_plan(query).split("BatchScan")[0]  # Spark trusts the source with all of it
    sent = json.loads(jvm.statsJson(sys.executable, ""))["counters"].get("rows_sent", 0)
    rows, cells, _ = _run(jvm, query)
    sent = json.loads(jvm.statsJson(sys.executable, ""))["counters"]["rows_sent"] - sent
    assert rows == sorted(tuple(r) for r in local.where(where).collect()), where
    assert cells <= sum(CELLS.values()) and sent >= len(rows)
    if handled:
        assert sent == len(rows), where  # what the engine applied exactly is exactly the query
