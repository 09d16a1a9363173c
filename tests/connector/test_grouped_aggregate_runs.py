"""A task's batches are aggregated in runs (``task_aggregates.runs``) and a subexpression shared by
several aggregates is computed once per run (``Expression.key``): the partial rows are those of
aggregating every decoded batch on its own, on either road, with many groups, nulls in keys and
values, empty batches, values near their types' limits and sums past ``int64``."""

from __future__ import annotations

import os
from decimal import Decimal

import numpy as np
import pyarrow as pa
from hypothesis import HealthCheck, Phase, assume, given, settings, strategies as st

from connector.worker.aggregate_expressions import parse_expression
from connector.worker.aggregate_spec import TaskAggregation
from connector.worker.task_aggregates import RUN_ROWS, exact_partials, fitted, runs
from tests.connector.test_integer_aggregates import _outcome

_EXAMPLES = int(os.environ.get("REGIONSCAN_AGGRUN_EXAMPLES", "40"))
_SETTINGS = settings(max_examples=_EXAMPLES, deadline=None, derandomize=True, database=None,
                     phases=[Phase.explicit, Phase.generate],
                     suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

_TYPES = {"a": pa.decimal128(15, 2), "b": pa.decimal128(18, 0), "c": pa.decimal128(4, 4), "l": pa.int64()}
_PRICE = {"op": "*", "args": [{"column": "a"}, {"op": "-", "args": [{"literal": "1", "type": "int"}, {"column": "c"}]}]}
_AGGREGATES = [{"fn": "sum", "column": "a"}, {"fn": "sum", "column": "b"}, {"fn": "sum", "column": "l"},
               {"fn": "count", "column": "a"}, {"fn": "count_star"}, {"fn": "min", "column": "b"},
               {"fn": "max", "column": "a"}, {"fn": "sum", "expr": _PRICE}, {"fn": "count", "expr": _PRICE},
               {"fn": "sum", "expr": {"op": "*", "args": [_PRICE, {"op": "+", "args": [
                   {"literal": "1", "type": "int"}, {"column": "c"}]}]}}]


def _limit(kind: pa.DataType) -> int:
    return 10 ** kind.precision - 1 if pa.types.is_decimal(kind) else (1 << 63) - 1


def _value(kind: pa.DataType):
    limit = _limit(kind)
    small = min(limit, 10**6)
    whole = st.one_of(st.integers(-small, small), st.integers(-limit, limit),
                      st.sampled_from([limit, -limit, limit - 1, 0, 1, -1]))
    return whole.map(lambda n: Decimal(n).scaleb(-kind.scale)) if pa.types.is_decimal(kind) else whole


def _sorted(table: pa.Table) -> list:
    return sorted(table.to_pylist(), key=repr)


@_SETTINGS
@given(st.data(), st.booleans(), st.sampled_from([0, 1, 2]), st.sampled_from([1, 5, 300]),
       st.lists(st.integers(0, 60), min_size=1, max_size=6), st.sampled_from([2, 7, 64]))
def test_runs_of_batches_give_the_partials_of_every_batch_alone(data, ansi, keys, groups, sizes, run_rows):
    """The same partial rows (or the same error) whether each batch is aggregated alone or in runs,
    on the integer road and the decimal road."""
    group_by = ["g", "h"][:keys]
    spec = TaskAggregation({"group_by": group_by, "aggregates": _AGGREGATES, "ansi": ansi},
                           {n: n for n in [*_TYPES, "g", "h"]})
    schema = pa.schema([pa.field("g", pa.int64()), pa.field("h", pa.string()),
                        *(pa.field(n, k) for n, k in _TYPES.items())])
    assert spec.unsupported(schema) is None
    inputs = pa.schema([schema.field(n) for n in spec.inputs])
    batches = []
    for rows in sizes:
        key = st.one_of(st.none(), st.integers(0, groups - 1))
        arrays = [pa.array(data.draw(st.lists(key, min_size=rows, max_size=rows)), pa.int64()),
                  pa.array([None if k is None else f"k{k}" for k in
                            data.draw(st.lists(key, min_size=rows, max_size=rows))], pa.string())]
        arrays += [pa.array(data.draw(st.lists(st.one_of(st.none(), _value(k), _value(k)), min_size=rows,
                                               max_size=rows)), k) for k in _TYPES.values()]
        batches.append(pa.RecordBatch.from_arrays(arrays, schema=schema).select(spec.inputs))
    target = pa.schema([inputs.field(g) for g in spec.group_by] + [
        pa.field(f"a{i}", pa.int64() if fn.startswith("count") else spec.expressions[i].kind if i in spec.expressions
                 else inputs.field(col).type) for i, (fn, col) in enumerate(spec.functions)])

    def answer(integers: bool, rows: int):
        return _outcome(lambda: _sorted(fitted(exact_partials(spec, inputs, iter(batches), 1 if integers else None,
                                                              run_rows=rows), spec, target)))

    alone = answer(False, 1)  # every decoded batch aggregated on its own by Arrow's decimal kernels: the reference
    assert answer(True, 1) == alone
    assert answer(True, run_rows) == alone
    assert answer(False, run_rows) == alone


def test_runs_gather_small_batches_drop_empty_ones_and_pass_long_ones_uncopied():
    schema = pa.schema([pa.field("x", pa.int64())])
    small = [pa.record_batch([pa.array(range(n), pa.int64())], schema=schema) for n in (3, 0, 4, 5, 0, 2)]
    out = list(runs(small, 7))
    assert [b.num_rows for b in out] == [7, 7]
    assert pa.Table.from_batches(out).column("x").to_pylist() == [0, 1, 2, 0, 1, 2, 3, 0, 1, 2, 3, 4, 0, 1]
    long = pa.record_batch([pa.array(range(RUN_ROWS), pa.int64())], schema=schema)
    assert next(runs([long])) is long
    assert list(runs([small[1], small[4]])) == []


def test_a_run_stops_at_its_byte_budget():
    """Wide group keys: a run ends when its buffers reach the budget, well before its rows do."""
    wide = pa.record_batch([pa.array(["x" * 100_000] * 100)], names=["s"])  # about 10 MB a batch
    out = list(runs([wide] * 10, RUN_ROWS))
    assert len(out) > 1 and sum(b.num_rows for b in out) == 1000
    assert all(b.nbytes <= 40 << 20 for b in out)


def test_a_shared_subexpression_is_computed_once_per_run_and_types_tell_keys_apart():
    """q1's price inside its charge is the price summed beside it: one computation per run.  The
    same text over differently typed literals is another node."""
    types = {"a": pa.decimal128(15, 2), "c": pa.decimal128(15, 2)}.__getitem__
    price = parse_expression(_PRICE, str, types, True)
    charge = parse_expression({"op": "*", "args": [_PRICE, {"op": "+", "args": [
        {"literal": "1", "type": "int"}, {"column": "c"}]}]}, str, types, True)
    columns = {"a": pa.array([Decimal("10.50"), Decimal("3.00"), None], types("a")),
               "c": pa.array([Decimal("0.05"), Decimal("0.10"), Decimal("0.00")], types("c"))}
    cache: dict = {}
    first = price.unscaled(columns, cache)
    assert charge.left.key == price.key and charge.left is not price
    assert charge.unscaled(columns, cache) is not None and cache[price.key] is first
    assert price.unscaled(columns, cache) is first
    assert np.array_equal(first.values, price.unscaled(columns, {}).values)
    wider = parse_expression({"op": "*", "args": [{"column": "a"}, {"op": "-", "args": [
        {"literal": "1", "type": "bigint"}, {"column": "c"}]}]}, str, types, True)
    assert str(wider) == str(price) and wider.key != price.key


def test_a_filtered_tasks_small_batches_take_one_run():
    """A selective filter's batches of a few hundred rows each, 10,000 groups: one run, the same rows."""
    rng = np.random.default_rng(7)
    kind = pa.decimal128(15, 2)
    spec = TaskAggregation({"group_by": ["g"], "aggregates": [{"fn": "sum", "expr": _PRICE}]}, {"g": "g", "a": "a", "c": "c"})
    schema = pa.schema([pa.field("g", pa.int64()), pa.field("a", kind), pa.field("c", kind)])
    assert spec.unsupported(schema) is None
    batches = []
    for _ in range(40):
        n = int(rng.integers(100, 800))
        price = pa.array([Decimal(int(v)).scaleb(-2) for v in rng.integers(90_000, 10_500_000, n)], kind)
        discount = pa.array([Decimal(int(v)).scaleb(-2) for v in rng.integers(0, 11, n)], kind)
        batches.append(pa.record_batch([pa.array(rng.integers(0, 10_000, n), pa.int64()), price, discount], schema=schema))
    inputs = pa.schema([schema.field(n) for n in spec.inputs])
    assert len(list(runs(batches))) == 1
    together = exact_partials(spec, inputs, iter(batches))
    alone = exact_partials(spec, inputs, iter(batches), None, run_rows=1)
    assert _sorted(together) == _sorted(alone)
    assert together.num_rows == len(set(pa.concat_arrays([b.column(0) for b in batches]).to_pylist()))


def test_a_repeated_aggregate_is_computed_once_and_answers_in_each_place():
    """AVG(x) beside SUM(x) asks for SUM(x) twice: one computation, its column in both places, each
    equal to that aggregate computed alone; an expression of the same text over a BIGINT literal
    is another aggregate."""
    wider = {"op": "*", "args": [{"column": "a"}, {"op": "-", "args": [{"literal": "1", "type": "bigint"},
                                                                         {"column": "c"}]}]}
    aggregates = [{"fn": "sum", "column": "a"}, {"fn": "count", "column": "a"}, {"fn": "sum", "column": "a"},
                  {"fn": "sum", "expr": _PRICE}, {"fn": "count_star"}, {"fn": "sum", "expr": wider},
                  {"fn": "sum", "expr": _PRICE}, {"fn": "count_star"}]
    known = {n: n for n in ["g", "a", "c"]}
    schema = pa.schema([pa.field("g", pa.int64()), pa.field("a", pa.decimal128(15, 2)), pa.field("c", pa.decimal128(4, 4))])
    spec = TaskAggregation({"group_by": ["g"], "aggregates": aggregates}, known)
    assert spec.unsupported(schema) is None
    distinct, at = spec.distinct()
    assert len(distinct.functions) == 5 and at == [0, 1, 0, 2, 3, 4, 2, 3] and distinct.inputs == spec.inputs
    rng = np.random.default_rng(3)
    batches = [pa.record_batch([pa.array(rng.integers(0, 5, 500), pa.int64()),
                                pa.array([None if v % 7 == 0 else Decimal(int(v)).scaleb(-2)
                                          for v in rng.integers(-10**8, 10**8, 500)], pa.decimal128(15, 2)),
                                pa.array([Decimal(int(v)).scaleb(-4) for v in rng.integers(0, 10**4, 500)],
                                         pa.decimal128(4, 4))], schema=schema) for _ in range(3)]
    inputs = pa.schema([schema.field(n) for n in spec.inputs])
    together = exact_partials(spec, inputs, iter(batches)).sort_by("g0")
    assert together.column_names == ["g0"] + [f"a{i}" for i in range(len(aggregates))]
    for i, doc in enumerate(aggregates):
        one = TaskAggregation({"group_by": ["g"], "aggregates": [doc]}, known)
        assert one.unsupported(schema) is None
        alone = exact_partials(one, pa.schema([schema.field(n) for n in one.inputs]),
                               iter([b.select(one.inputs) for b in batches])).sort_by("g0")
        assert together.column(f"a{i}").to_pylist() == alone.column("a0").to_pylist()
        assert together.column("g0").to_pylist() == alone.column("g0").to_pylist()
