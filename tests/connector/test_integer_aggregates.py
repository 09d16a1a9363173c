"""The integer road of pushed decimal aggregates (``Expression.unscaled``, ``exact_partials``) gives
the answers of the decimal road (Arrow's decimal kernels) on every input: values at the bounds
of their types, negatives, nulls, empty batches, many groups, overflows in either mode."""

from __future__ import annotations

import os
from decimal import Decimal

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, Phase, assume, given, settings, strategies as st

from connector.worker.aggregate_expressions import NotComputable, parse_expression, unscaled_column
from connector.worker.aggregate_spec import TaskAggregation
from connector.worker.task_aggregates import exact_partials, fitted

_EXAMPLES = int(os.environ.get("REGIONSCAN_AGGINT_EXAMPLES", "60"))
_SETTINGS = settings(max_examples=_EXAMPLES, deadline=None, derandomize=True, database=None,
                     phases=[Phase.explicit, Phase.generate],  # a failure is reported as found: no slow shrinking
                     suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

# the columns an expression may read: narrow decimals (the integer road), a wide one (the decimal road only), integers
_TYPES = {"a": pa.decimal128(15, 2), "b": pa.decimal128(18, 0), "c": pa.decimal128(4, 4),
          "d": pa.decimal128(9, 3), "w": pa.decimal128(25, 2), "i": pa.int32(), "l": pa.int64()}


def _unscaled_limit(kind: pa.DataType) -> int:
    if pa.types.is_decimal(kind):
        return 10 ** kind.precision - 1
    return (1 << 31) - 1 if kind == pa.int32() else (1 << 63) - 1


def _value(kind: pa.DataType):
    """A value of ``kind`` as pyarrow takes it: mostly small, sometimes at or near the type's limit."""
    limit = _unscaled_limit(kind)
    small = min(limit, 10**6)
    whole = st.one_of(st.integers(-small, small), st.integers(-limit, limit),
                      st.sampled_from([limit, -limit, limit - 1, 0, 1, -1]))
    if pa.types.is_decimal(kind):
        return whole.map(lambda n: Decimal(n).scaleb(-kind.scale))
    return whole


def _column(kind: pa.DataType, rows: int):
    return st.lists(st.one_of(st.none(), _value(kind), _value(kind), _value(kind)), min_size=rows, max_size=rows)


def _expressions():
    leaf = st.one_of(st.sampled_from(sorted(_TYPES)).map(lambda n: {"column": n}),
                     st.sampled_from([("1", "decimal(1,0)"), ("7", "int"), ("-3", "bigint"), ("0.25", "decimal(3,2)"),
                                      ("100", "decimal(3,0)")]).map(lambda lt: {"literal": lt[0], "type": lt[1]}))
    cast = st.tuples(st.sampled_from(["i", "d"]), st.sampled_from(["decimal(12,2)", "decimal(18,6)", "decimal(5,1)"])
                     ).map(lambda ct: {"cast": {"column": ct[0]}, "type": ct[1]})
    return st.recursive(st.one_of(leaf, cast), lambda inner: st.tuples(st.sampled_from("+-*"), inner, inner).map(
        lambda t: {"op": t[0], "args": [t[1], t[2]]}), max_leaves=4)


def _typed(doc, precision_loss: bool = True):
    try:
        return parse_expression(doc, str, _TYPES.__getitem__, precision_loss)
    except NotComputable:
        return None


def _outcome(call):
    try:
        return call()
    except OverflowError as error:
        return f"error: {error}"


@_SETTINGS
@given(st.data(), _expressions(), st.booleans(), st.booleans(), st.integers(0, 12), st.integers(0, 3))
def test_an_expression_takes_the_same_values_on_either_road(data, doc, ansi, precision_loss, rows, offset):
    expression = _typed(doc, precision_loss)
    assume(expression is not None)
    columns = {n: pa.array(data.draw(_column(k, rows + offset)), k).slice(offset) for n, k in _TYPES.items()}
    decimal = _outcome(lambda: expression.values(columns, rows, ansi))
    fast = expression.unscaled(columns, {})
    if fast is None:
        return  # the bounds prove nothing: the decimal road alone runs
    assert not isinstance(decimal, str), f"the integer road took {expression}, which overflows: {decimal}"
    values = [fast.values] * rows if isinstance(fast.values, int) else fast.values.tolist()
    valid = [True] * rows if fast.valid is None else fast.valid.tolist()
    scale = expression.kind.scale if pa.types.is_decimal(expression.kind) else 0
    got = [Decimal(v).scaleb(-scale) if ok else None for v, ok in zip(values, valid)]
    assert got == decimal.to_pylist()


def test_q1s_charge_takes_the_integer_road_and_a_value_past_int64_does_not():
    """TPC-H's magnitudes prove q1's charge within int64; DECIMAL(18,0) values near 10^18 times 100 do not."""
    charge = _typed({"op": "*", "args": [
        {"op": "*", "args": [{"column": "a"}, {"op": "-", "args": [{"literal": "1", "type": "decimal(1,0)"},
                                                                     {"column": "c"}]}]},
        {"op": "+", "args": [{"literal": "1", "type": "decimal(1,0)"}, {"column": "c"}]}]})
    assert charge.ddl == "decimal(29,10)"
    columns = {"a": pa.array([Decimal("104949.50"), Decimal("-901.00"), None], _TYPES["a"]),
               "c": pa.array([Decimal("0.1000"), Decimal("0.0000"), Decimal("0.0800")], _TYPES["c"])}
    fast = charge.unscaled(columns, {})
    assert fast is not None and fast.valid.tolist() == [True, True, False]
    assert [Decimal(int(v)).scaleb(-10) for v in fast.values[:2]] == charge.values(columns, 3, True).to_pylist()[:2]
    big = _typed({"op": "*", "args": [{"column": "b"}, {"literal": "100", "type": "decimal(3,0)"}]})
    assert big.unscaled({"b": pa.array([Decimal(10**17)], _TYPES["b"])}, {}) is None
    assert big.values({"b": pa.array([Decimal(10**17)], _TYPES["b"])}, 1, True).to_pylist() == [Decimal(10**19)]


def test_a_columns_unscaled_values_skip_what_lies_under_its_nulls():
    """A null's slot may hold any bytes: the bound and the values must not see them."""
    kind = pa.decimal128(15, 2)
    garbage = pa.array([Decimal("999999999999.99"), Decimal("1.00"), Decimal("-2.50")], kind)
    validity = pa.py_buffer(bytes([0b110]))  # the first value is null
    array = pa.Array.from_buffers(kind, 3, [validity, garbage.buffers()[1]], null_count=1)
    node = unscaled_column(array)
    assert node.values.tolist() == [0, 100, -250] and node.bound == 250 and node.valid.tolist() == [False, True, True]
    assert unscaled_column(pa.array([Decimal(1)], pa.decimal128(19, 0))) is None  # past int64's 18 digits
    wide = pa.array([Decimal(1), Decimal(2**64 + 1)], pa.decimal128(38, 2))  # bytes past the declared 15 digits
    assert unscaled_column(pa.Array.from_buffers(kind, 2, [None, wide.buffers()[1]])) is None
    assert unscaled_column(pa.Array.from_buffers(kind, 1, [None, wide.buffers()[1]])).values.tolist() == [100]


_AGGREGATES = [{"fn": "sum", "column": "a"}, {"fn": "sum", "column": "b"}, {"fn": "sum", "column": "w"},
               {"fn": "count", "column": "a"}, {"fn": "count_star"}, {"fn": "min", "column": "a"},
               {"fn": "max", "column": "d"}]


@_SETTINGS
@given(st.data(), st.lists(_expressions(), min_size=1, max_size=3), st.booleans(), st.booleans(),
       st.sampled_from([0, 1, 3, 200]), st.lists(st.integers(0, 40), min_size=1, max_size=4))
def test_a_tasks_partial_aggregates_are_the_same_on_either_road(data, docs, ansi, grouped, groups, sizes):
    """Many batches (empty ones too) and groups, sums past a batch's int64 bound, groups that hold
    only nulls, through ``exact_partials`` and ``fitted``: the same rows or the same error."""
    aggregates = _AGGREGATES + [{"fn": fn, "expr": doc} for doc in docs for fn in ("sum", "count")]
    doc = {"group_by": ["g"] if grouped else [], "aggregates": aggregates, "ansi": ansi}
    spec = TaskAggregation(doc, {n: n for n in [*_TYPES, "g"]})
    schema = pa.schema([pa.field("g", pa.string()), *(pa.field(n, k) for n, k in _TYPES.items())])
    assume(spec.unsupported(schema) is None)
    inputs = pa.schema([schema.field(n) for n in spec.inputs])
    batches = []
    for rows in sizes:
        keys = data.draw(st.lists(st.one_of(st.none(), st.integers(0, max(groups - 1, 0)).map(str)),
                                  min_size=rows, max_size=rows))
        arrays = [pa.array(keys, pa.string())] + [pa.array(data.draw(_column(k, rows)), k) for k in _TYPES.values()]
        batches.append(pa.RecordBatch.from_arrays(arrays, schema=schema).select(spec.inputs))
    target = pa.schema([inputs.field(g) for g in spec.group_by] + [
        pa.field(f"a{i}", pa.int64() if fn.startswith("count") else spec.expressions[i].kind if i in spec.expressions
                 else inputs.field(col).type) for i, (fn, col) in enumerate(spec.functions)])

    def answer(integers: bool):
        def run():
            rows = fitted(exact_partials(spec, inputs, iter(batches), 1 if integers else None, run_rows=1),
                          spec, target)  # (run_rows=1: each batch takes its own road)
            return sorted(rows.to_pylist(), key=repr)
        return _outcome(run)

    assert answer(True) == answer(False)


def test_partial_sums_carry_exactly_past_int64_across_batches():
    """Each batch's sum proved within int64, their total far past it: carried exactly, as the decimal road."""
    kind = pa.decimal128(18, 0)
    big = Decimal(10**18 - 1)
    spec = TaskAggregation({"group_by": [], "aggregates": [{"fn": "sum", "column": "b"}]}, {"b": "b"})
    inputs = pa.schema([pa.field("b", kind)])
    assert spec.unsupported(inputs) is None
    batches = [pa.record_batch([pa.array([big, big // 2], kind)], schema=inputs) for _ in range(7)]
    for integers in (True, False):
        partial = exact_partials(spec, inputs, iter(batches), 1 if integers else None, run_rows=1)
        assert partial.column("a0").to_pylist() == [7 * (big + big // 2)]
    rows = fitted(exact_partials(spec, inputs, iter(batches), 1, run_rows=1), spec, pa.schema([pa.field("a0", kind)]))
    assert sum(rows.column("a0").to_pylist()) == 7 * (big + big // 2)  # several rows, each within DECIMAL(18,0)


def test_the_decimal_road_rounds_up_to_a_new_digit_and_takes_integer_literals():
    """CAST(999999.999 AS DECIMAL(12,2)) is 1000000.00 (rounding must not overflow DECIMAL(9,3)), and an
    INT literal beside a decimal is a decimal of its own digits, on both roads."""
    d = pa.array([Decimal("999999.999"), Decimal("-999999.995"), None], _TYPES["d"])
    cast = _typed({"cast": {"column": "d"}, "type": "decimal(12,2)"})
    want = [Decimal("1000000.00"), Decimal("-1000000.00"), None]
    assert cast.values({"d": d}, 3, True).to_pylist() == want
    fast = cast.unscaled({"d": d}, {})
    assert [Decimal(int(v)).scaleb(-2) for v in fast.values[:2]] == want[:2]
    plus = _typed({"op": "+", "args": [{"column": "a"}, {"literal": "7", "type": "int"}]})
    a = pa.array([Decimal("1.25"), None], _TYPES["a"])
    assert plus.values({"a": a}, 2, True).to_pylist() == [Decimal("8.25"), None]
    assert plus.unscaled({"a": a}, {}).values.tolist()[0] == 825


def test_a_sum_past_a_narrow_integer_partial_column_is_split_within_its_type():
    """A partial column of INT holds less than a BIGINT: a group whose sum passes 2^31 - 1 becomes
    rows that each fit an INT and add up to it, on both roads (before, the pieces were cut at the
    BIGINT limit and building the INT column failed)."""
    spec = TaskAggregation({"group_by": [], "aggregates": [{"fn": "sum", "column": "i"}]}, {"i": "i"})
    inputs = pa.schema([pa.field("i", pa.int32())])
    top = (1 << 31) - 1
    batches = [pa.record_batch([pa.array([top, top, 5], pa.int32())], schema=inputs)]
    for integers in (True, False):
        rows = fitted(exact_partials(spec, inputs, iter(batches), 1 if integers else None, run_rows=1), spec,
                      pa.schema([pa.field("a0", pa.int32())]))
        values = rows.column("a0").to_pylist()
        assert len(values) > 1 and all(abs(v) <= top for v in values) and sum(values) == 2 * top + 5
