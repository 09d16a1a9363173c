"""The 22 TPC-H queries through Spark on regionscan tables give Parquet's answers.

The eight tables (``tpch_data``: seeded, SF 0.01, every query with rows) are written to
Parquet, read back by Spark and written with ``df.write.format("regionscan")`` exactly as
``benchmarks/bench_tpch.py`` loads them (``benchmarks.tpch.write_regionscan``: the JSON
catalog, binary SerDe, the primary key as an ordered row key, ``newtable``, no compaction).
Each query then runs on both and the answers must be equal: row counts, values (decimals
exactly), and the order where the query orders.  This is a correctness test, not a timed one.

The loading code is the benchmark's own, imported from ``benchmarks/tpch`` with the
repository on ``sys.path``: one definition of the load and of the comparison, and the suite
never needs tpchgen-cli (the data comes from ``tpch_data``).
"""

from __future__ import annotations

import sys

import pyarrow.parquet as pq
import pytest

from suite_paths import REPO
from tpch_data import generate

if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks import tpch  # noqa: E402

pytestmark = pytest.mark.spark

SCALE = 0.01  # the smallest scale at which seed 7 gives every query at least one row


@pytest.fixture(scope="module")
def tpch_frames(spark, tmp_path_factory):
    """Per side ("regionscan", "parquet"), the eight tables' DataFrames, loaded once."""
    base = tmp_path_factory.mktemp("tpch")
    root = str(base / "regionscan")
    ours, theirs = {}, {}
    for name, table in generate(SCALE).items():
        path = str(base / f"{name}.parquet")
        pq.write_table(table, path)
        theirs[name] = spark.read.parquet(path)
        tpch.write_regionscan(theirs[name], root, name, table.num_rows)
        ours[name] = tpch.read_regionscan(spark, root, name)
    try:
        yield {"regionscan": ours, "parquet": theirs}
    finally:
        for name in ours:
            spark.catalog.dropTempView(name)


def _answer(spark, frames: dict, query: int | str) -> list:
    """The rows of TPC-H query ``query`` (a number) or of SQL text on ``frames``' views."""
    tpch.register_views(frames)
    return spark.sql(tpch.query_text(query) if isinstance(query, int) else query).collect()


@pytest.mark.parametrize("number", tpch.QUERIES)
def test_query_answers_equal_parquets(spark, tpch_frames, number):
    theirs = _answer(spark, tpch_frames["parquet"], number)
    # not vacuous: rows, and a one-row aggregate over no rows (all nulls) does not count
    assert theirs and any(v is not None for v in theirs[0]), f"q{number} has no rows on this data"
    ours = _answer(spark, tpch_frames["regionscan"], number)
    difference = tpch.answer_difference(ours, theirs, tpch.is_ordered(number))
    assert difference is None, f"q{number}: regionscan's answer differs from Parquet's: {difference}"


@pytest.mark.parametrize("number", [1, 6])
def test_q1_and_q6_sums_of_expressions_are_computed_by_the_tasks(spark, tpch_frames, number):
    """q1's ``sum(l_extendedprice * (1 - l_discount) * (1 + l_tax))`` and q6's
    ``sum(l_extendedprice * l_discount)`` as TPC-H writes them reach the tasks (Spark's default
    ANSI mode), with the default options, and their answers are Parquet's.  Spark pushes an
    aggregate only when the worker takes every filter: q1's date filter keeps 98% of the rows,
    but it is tested on the stored cells, so the filter payoff keeps it with the worker."""
    from spark_plans import executed_plan

    tpch.register_views(tpch_frames["regionscan"])
    query = spark.sql(tpch.query_text(number))
    assert "(partial, per task)" in executed_plan(query), executed_plan(query)
    theirs = _answer(spark, tpch_frames["parquet"], number)
    assert tpch.answer_difference(query.collect(), theirs, tpch.is_ordered(number)) is None


def test_tables_hold_the_generated_rows(spark, tpch_frames):
    """Every row written is read back (the queries alone need not touch every row), and a
    table with a composite key holds exactly Parquet's rows."""
    counts = " union all ".join(f"select '{name}', count(*) from {name}" for name in tpch.TABLES)
    ours, theirs = (_answer(spark, tpch_frames[side], counts) for side in ("regionscan", "parquet"))
    assert tpch.answer_difference(ours, theirs, ordered=False) is None, (ours, theirs)
    assert tpch.answer_difference(tpch_frames["regionscan"]["partsupp"].collect(),
                                  tpch_frames["parquet"]["partsupp"].collect(), ordered=False) is None


def test_answer_difference_catches_what_differs():
    """The comparison itself can fail: a count, a decimal's scale, an order, a double."""
    from decimal import Decimal

    assert tpch.answer_difference([(1,)], [(1,), (2,)], ordered=False) == "1 rows against 2"
    assert tpch.answer_difference([(Decimal("1.0"),)], [(Decimal("1.00"),)], ordered=False) is not None
    assert tpch.answer_difference([(1,), (2,)], [(2,), (1,)], ordered=False) is None
    assert tpch.answer_difference([(1,), (2,)], [(2,), (1,)], ordered=True) is not None
    assert tpch.answer_difference([(1.0,)], [(1.0 + 1e-12,)], ordered=True) is None
    assert tpch.answer_difference([(1.0,)], [(1.0001,)], ordered=True) is not None
    with pytest.raises(ValueError, match="queries are 1 to 22"):
        tpch.query_text(23)
