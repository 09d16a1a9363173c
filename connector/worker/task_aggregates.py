"""Aggregates each task computes beside its scan: Spark's partial aggregate pushdown.

When an aggregate cannot be answered at planning (:mod:`.aggregates`: a
filter the engine applies, a SUM, a GROUP BY), the JVM source can still push
it: each task's read aggregates its own rows in the worker and streams one
row per group (one row in all without GROUP BY, also for a task with no
rows), and Spark aggregates those partial rows (a SUM of the partial counts
and sums, a MIN of the minimums ...).  So only the partial rows cross the
socket and the JVM, instead of every row: as HBase's AggregationClient asks
each region for its partial result and merges them.  What is pushed is in
:mod:`.aggregate_spec`.  The aggregation runs on the Arrow batches as they are
decoded (pyarrow's hash aggregation), never per row, a filtered scan's small batches
gathered into runs first (:func:`runs`).

Sums are exact: integers narrower than 64 bits sum as ``int64``, a ``BIGINT``
batch whose sum could leave ``int64`` and every ``DECIMAL`` sum as Arrow
decimals wide enough for any task (``decimal128(38, s)``, ``decimal256`` for
a precision above 28).  Spark types the partial column as the sum's input
(``BIGINT``; ``DECIMAL(p,s)``, which it sums as ``DECIMAL(min(p+10,38),s)``), so a
task's sum too large for it goes as several rows of its group whose sums add
up to it, the counts in the first: Spark's final sum then holds the exact
total and meets an overflow as it would have reading the rows (null in
non-ANSI mode, an error in ANSI mode).

A decimal sum whose batch's bounds prove it (values of at most 18 digits,
max |value| x rows within ``int64``; an expression's steps by
:meth:`~.aggregate_expressions.Expression.unscaled`) is summed as unscaled
``int64`` by Arrow's integer hash aggregation and widened to the exact
decimal type once per batch's partial: the decimal casts and products that
dominated TPC-H q1 are skipped (docs/decisions/2026-12-06-integer-aggregates.md).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Iterable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from storage import InvalidArgument

from ..decoded_filters import remainder
from .aggregate_expressions import Expression, unscaled_column
from .aggregate_spec import TaskAggregation, task_aggregation
from .read_ops import decoded_batches
from .read_plan import ReadPlan

__all__ = ["aggregate_batches", "aggregate_read", "exact_partials", "fitted", "remainder", "runs"]

# how the partial results of one function combine: the function Spark applies over them
_COMBINE = {"count_star": "sum", "count": "sum", "sum": "sum", "min": "min", "max": "max"}

_INT64_MAX = (1 << 63) - 1  # the largest BIGINT
# the fewest rows of a batch that takes the integer road: its fixed cost per batch (bounds, masks,
# conversions) passes the decimal kernels' below about 3,000 rows (q6's product: 1,000-row batches
# 0.017 against 0.013 CPU-s per 120 K rows; 8,000-row batches 0.006 against 0.011)
INTEGER_ROAD_ROWS = 4096
# a task's batches are gathered into runs of at least this many rows (and at most _RUN_BYTES of
# input) before they are aggregated: a filtered scan's batches of a few thousand rows each cost
# one hash aggregation, one partial and the integer road's fixed cost apiece, and a partial of
# many groups is nearly as long as its batch (TPC-H q15: 1,600-row batches, 10,000 groups), so
# the partials' final merge hashed the rows a second time (docs/decisions/2026-12-06-grouped-aggregates.md)
RUN_ROWS = 1 << 15
_RUN_BYTES = 32 << 20


def _summand(array: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
    """``array`` as pyarrow sums it exactly: narrow integers as they are (their sum is ``int64``),
    ``BIGINT`` as ``decimal128(38, 0)`` when its batch's sum could leave ``int64``, decimals of a
    precision above 28 as ``decimal256`` (Arrow's ``decimal128`` sum wraps past 38 digits)."""
    kind = array.type
    if pa.types.is_int64(kind):
        return array if _widest(array) * len(array) <= _INT64_MAX else array.cast(pa.decimal128(38, 0))
    if pa.types.is_decimal128(kind) and kind.precision > 28:
        return array.cast(pa.decimal256(76, kind.scale))
    return array


def _widest(array: pa.Array) -> int:
    """The largest |value| of an integer array (0 when it has none)."""
    bounds = pc.min_max(array)
    return max(abs(bounds["min"].as_py() or 0), abs(bounds["max"].as_py() or 0))


def _check_running_sums(keys: list[pa.Array], column: pa.Array, carry: pa.Table | None, groups: list[str],
                        at: int, name: str | None) -> None:
    """Fail as Spark's ANSI mode does when a group's running BIGINT sum leaves BIGINT: each
    group's values in row order after its sum so far (``carry``'s column ``at``).  Only reached
    when the values are large enough that a running sum might (a bound says so), so the one
    Python step per group here is not on the common path."""
    names = groups + ["v"]
    table = pa.Table.from_arrays(keys + [column], names=names)
    if carry is not None:
        before = pa.Table.from_arrays([carry.column(g) for g in groups] + [carry.column(at).cast(pa.int64())],
                                      names=names)
        table = pa.concat_tables([before.cast(table.schema), table])
    try:
        if not groups:
            pc.cumulative_sum_checked(table.column("v").drop_null())
            return
        runs = table.group_by(groups, use_threads=False).aggregate([("v", "list")]).column("v_list")
        for run in runs.chunks:
            for values in run:
                pc.cumulative_sum_checked(values.values.drop_null())
    except pa.ArrowInvalid:
        raise OverflowError(f"[ARITHMETIC_OVERFLOW] SUM({name}) overflows BIGINT: a running sum leaves the "
                            "type (ANSI mode; try_sum, or spark.sql.ansi.enabled=false, tolerates it)") from None


def _unscaled_input(expression: Expression | None, by_name: dict[str, pa.Array], col: str, cache: dict,
                    fn: str) -> pa.Array | None:
    """A decimal aggregate's input as its unscaled ``int64`` values (aggregate_expressions'
    integer road), or None where the batch's bounds do not prove it exact: an expression whose
    steps might leave ``int64`` or its type, a decimal wider than 18 digits, or, for a ``SUM``,
    values whose sum might leave ``int64`` (max |value| x rows is the bound)."""
    if expression is None:
        if fn != "sum":
            return None  # MIN/MAX and COUNT of a column read it as it is
        if col not in cache:  # the same cache as the expressions': a column read by several is converted once
            cache[col] = unscaled_column(by_name[col])
        node = cache[col]
    else:
        node = expression.unscaled(by_name, cache)
    if node is None or isinstance(node.values, int):
        return None
    if fn == "sum" and node.bound * len(node.values) > _INT64_MAX:
        return None
    return pa.array(node.values, pa.int64(), mask=None if node.valid is None else ~node.valid)


def _wide(kind: pa.DataType) -> pa.DataType:
    """The type a partial sum of a ``kind`` column is kept in between batches (exact for any task)."""
    if pa.types.is_decimal(kind):
        return pa.decimal256(76, kind.scale) if kind.precision > 28 else pa.decimal128(38, kind.scale)
    return pa.decimal128(38, 0) if kind.bit_width == 64 else pa.int64()


def _partial(table: pa.Table, spec: TaskAggregation, names: list[str], fns: list[str]) -> pa.Table:
    """One aggregation of ``table`` (columns ``g<i>`` and ``a<i>``) by ``fns``: a row per group.

    ``count_all`` counts rows (its ``a<i>`` column is all null), ``count`` the
    valid values; ``sum``, ``min``, ``max`` skip nulls and give null for none."""
    if spec.group_by:
        keys = [f"g{i}" for i in range(len(spec.group_by))]
        pairs = [(f"a{i}", "count", pc.CountOptions(mode="all")) if fn == "count_all" else (f"a{i}", fn)
                 for i, fn in enumerate(fns)]
        out = table.group_by(keys, use_threads=False).aggregate(pairs)
        results = [f"a{i}_{'count' if fn == 'count_all' else fn}" for i, fn in enumerate(fns)]
        return pa.table([out[k] for k in keys] + [out[r] for r in results], names=names)
    arrays = []
    for i, fn in enumerate(fns):
        if fn == "count_all":
            arrays.append(pa.array([table.num_rows], pa.int64()))
            continue
        column = table[f"a{i}"]
        value = pc.count(column, mode="only_valid") if fn == "count" else getattr(pc, fn)(column, min_count=1)
        arrays.append(pa.array([value.as_py()], value.type))
    return pa.table(arrays, names=names)


def aggregate_batches(rp: ReadPlan, spec: TaskAggregation, splits: list, target: pa.Schema,
                      stats: dict) -> Iterator[pa.RecordBatch]:
    """The task's partial aggregates as batches of ``target`` (group columns, then one per aggregate)."""
    inputs = rp.base.spark_arrow_schema(spec.inputs)
    batches = decoded_batches(rp, splits, None, inputs, stats, spec.inputs)
    yield from fitted(exact_partials(spec, inputs, batches), spec, target).to_batches()


def runs(batches: Iterable[pa.RecordBatch], rows: int = RUN_ROWS) -> Iterator[pa.RecordBatch]:
    """``batches`` without the empty ones, consecutive ones concatenated into runs of at least
    ``rows`` rows (the last may be shorter) unless a run's buffers pass ``_RUN_BYTES`` first
    (wide group keys): the aggregation's fixed costs are paid per run, not per decoded batch,
    and the memory held stays bounded whatever the task's size."""
    pending: list[pa.RecordBatch] = []
    held = size = 0
    for batch in batches:
        if not batch.num_rows:
            continue
        if not pending and batch.num_rows >= rows:
            yield batch  # already long enough: no copy
            continue
        pending.append(batch)
        held += batch.num_rows
        size += batch.nbytes
        if held >= rows or size >= _RUN_BYTES:
            yield pending[0] if len(pending) == 1 else pa.concat_batches(pending)
            pending, held, size = [], 0, 0
    if pending:
        yield pending[0] if len(pending) == 1 else pa.concat_batches(pending)


def exact_partials(spec: TaskAggregation, inputs: pa.Schema, batches: Iterable[pa.RecordBatch],
                   integer_rows: int | None = INTEGER_ROAD_ROWS, run_rows: int = RUN_ROWS) -> pa.Table:
    """The exact partial aggregates of ``batches`` (``inputs``' columns): the group columns
    ``g<i>``, then ``a<i>`` per aggregate, its sums in a type wide enough for any task.

    A repeated aggregate (``SUM(x)`` and ``AVG(x)``'s sum) is computed once
    (:meth:`~.aggregate_spec.TaskAggregation.distinct`) and its column
    repeated; the rest is :func:`_distinct_partials`."""
    distinct, at = spec.distinct()
    result = _distinct_partials(distinct, inputs, batches, integer_rows, run_rows)
    if distinct is spec:
        return result
    groups = len(spec.group_by)
    return pa.table(result.columns[:groups] + [result.column(groups + k) for k in at],
                    names=result.column_names[:groups] + [f"a{i}" for i in range(len(at))])


def _distinct_partials(spec: TaskAggregation, inputs: pa.Schema, batches: Iterable[pa.RecordBatch],
                       integer_rows: int | None, run_rows: int) -> pa.Table:
    """:func:`exact_partials` of aggregates that are all different.

    The batches are gathered into runs of ``run_rows`` rows (:func:`runs`);
    each run is aggregated as it comes, and the partial tables are then
    aggregated once more by how their functions combine (counts summed ...).
    A decimal sum takes the integer road where the run's bounds allow
    (:func:`_unscaled_input`) in a run of at least ``integer_rows`` rows;
    ``integer_rows=None`` sends every decimal through Arrow's decimal
    kernels, the reference road, with the same answers."""
    groups = [f"g{i}" for i in range(len(spec.group_by))]
    values = [f"a{i}" for i in range(len(spec.functions))]
    columns = pa.schema([inputs.field(g).with_name(n) for n, g in zip(groups, spec.group_by)]
                        + [pa.field(n, pa.null()) if col is None else
                           pa.field(n, spec.expressions[i].kind) if i in spec.expressions else inputs.field(col).with_name(n)
                           for i, (n, (_, col)) in enumerate(zip(values, spec.functions))])
    first = ["count_all" if fn == "count_star" else fn for fn, _ in spec.functions]
    then = [_COMBINE[fn] for fn, _ in spec.functions]

    sums = [i for i, (fn, _) in enumerate(spec.functions) if fn == "sum"]

    # BIGINT sums under ANSI mode: Spark fails where a group's running sum leaves BIGINT
    longs = [i for i in sums if spec.ansi and pa.types.is_int64(columns.field(len(groups) + i).type)]
    bounds = dict.fromkeys(longs, 0)  # per such sum: sum over batches of max |value| x rows, a bound on |running sum|

    def renamed(batch: pa.RecordBatch) -> list[pa.Array]:
        by_name = dict(zip(spec.inputs, batch.columns))
        road = integer_rows is not None and batch.num_rows >= integer_rows
        arrays = [by_name[g] if mod is None else remainder(by_name[g], mod)
                  for g, mod in zip(spec.group_by, spec.group_mods)]
        cache: dict = {}  # each column's unscaled form, once per batch
        for i, (fn, col) in enumerate(spec.functions):
            if col is None:
                arrays.append(pa.nulls(batch.num_rows))
                continue
            kind = columns.field(len(groups) + i).type
            # a decimal sum (or an expression's count) as unscaled int64 where its bounds prove it exact
            fast = (_unscaled_input(spec.expressions.get(i), by_name, col, cache, fn)
                    if road and pa.types.is_decimal(kind) else None)
            if fast is not None:
                arrays.append(fast)
            elif i in spec.expressions:  # else evaluated by Arrow's decimal kernels (aggregate_expressions)
                arrays.append(spec.expressions[i].values(by_name, batch.num_rows, spec.ansi))
            else:
                arrays.append(by_name[col])
        return arrays

    def summed(arrays: list[pa.Array]) -> pa.Table:
        arrays = list(arrays)
        for i in sums:
            if not pa.types.is_int64(arrays[len(groups) + i].type) or not pa.types.is_decimal(
                    columns.field(len(groups) + i).type):  # (a decimal's unscaled int64 sum is proved exact)
                arrays[len(groups) + i] = _summand(arrays[len(groups) + i])
        return pa.Table.from_arrays(arrays, names=groups + values)

    def checked(arrays: list[pa.Array], partials: list[pa.Table]) -> list[pa.Table]:
        """``partials`` (combined into one when a running sum had to be checked) once every
        BIGINT running sum of ``arrays`` is known to stay within BIGINT."""
        for i in longs:
            column = arrays[len(groups) + i]
            bounds[i] += _widest(column) * len(column)
            if bounds[i] <= _INT64_MAX:
                continue  # no running sum can reach past BIGINT: the common case, no check
            if len(partials) > 1:
                partials = [_partial(pa.concat_tables(partials), spec, groups + values, then)]
            _check_running_sums(arrays[:len(groups)], column, partials[0] if partials else None,
                                groups, len(groups) + i, spec.functions[i][1])
        return partials

    def widened(partial: pa.Table) -> pa.Table:
        # every partial sum in one exact type, whatever its batch summed in, so the partials concatenate
        for i in sums:
            at = len(groups) + i
            kind = _wide(columns.field(at).type)
            column = partial.column(at)
            if pa.types.is_decimal(kind) and pa.types.is_int64(column.type):  # unscaled sums of a decimal
                unit = (pa.decimal256 if pa.types.is_decimal256(kind) else pa.decimal128)(kind.precision, 0)
                partial = partial.set_column(at, values[i], column.cast(unit).combine_chunks().view(kind))
            elif column.type != kind:
                partial = partial.set_column(at, values[i], column.cast(kind))
        return partial

    partials: list[pa.Table] = []
    for batch in runs(batches, run_rows):  # no empty batch: runs() drops them
        arrays = renamed(batch)
        partials = checked(arrays, partials) if longs else partials
        partials.append(widened(_partial(summed(arrays), spec, groups + values, first)))
    if not partials:
        result = widened(_partial(columns.empty_table(), spec, groups + values, first))
    elif len(partials) == 1:
        result = partials[0]
    else:
        result = _partial(pa.concat_tables(partials), spec, groups + values, then)
    return result


def _limit(kind: pa.DataType) -> int:
    """The largest |unscaled value| of a partial column of ``kind`` (an integer or a DECIMAL)."""
    if pa.types.is_decimal(kind):
        return 10 ** kind.precision - 1
    return (1 << (kind.bit_width - 1)) - 1  # an INT partial column holds less than a BIGINT one


def _unscaled(value: int | Decimal, kind: pa.DataType) -> int:
    """A partial sum as an integer in units of ``kind``'s last digit."""
    return int(value.scaleb(kind.scale)) if pa.types.is_decimal(kind) else int(value)


def _pieces(value: int | Decimal, parts: int, kind: pa.DataType) -> list:
    """``value`` as ``parts`` values of ``kind`` that add up to it exactly."""
    low, extra = divmod(_unscaled(value, kind), parts)  # ``extra`` pieces of low + 1, the rest low: each in range
    out = [low + 1] * extra + [low] * (parts - extra)
    return [Decimal(p).scaleb(-kind.scale) for p in out] if pa.types.is_decimal(kind) else out


def fitted(result: pa.Table, spec: TaskAggregation, target: pa.Schema) -> pa.Table:
    """The exact partial rows ``result`` as ``target``'s types.  A group whose sum does not fit its
    partial column (a ``BIGINT``, a ``DECIMAL(p,s)``) becomes several rows whose sums add up to
    it: the group and its MIN/MAX repeated, its counts in the first row and 0 in the others.
    Only such groups (a task summing past ``BIGINT``, or past ``DECIMAL(p,s)``: 10^13 for a
    ``DECIMAL(15,2)``) are split, one Python step per group, never per row."""
    first = len(spec.group_by)
    sums = [first + i for i, (fn, _) in enumerate(spec.functions) if fn == "sum"]
    over = None
    for at in sums:
        column, kind = result.column(at), target.field(at).type
        if pa.types.is_int64(column.type) and pa.types.is_int64(kind):
            continue  # a sum of narrow integers: it fits a BIGINT
        if pa.types.is_integer(column.type):
            limit = pa.scalar(min(_limit(kind), _INT64_MAX), column.type)
        else:
            limit = pa.scalar(Decimal(_limit(kind)).scaleb(-kind.scale if pa.types.is_decimal(kind) else 0), column.type)
        outside = pc.fill_null(pc.or_(pc.greater(column, limit), pc.less(column, pc.negate(limit))), False)
        over = outside if over is None else pc.or_(over, outside)
    big = [] if over is None else np.flatnonzero(over.to_numpy(zero_copy_only=False)).tolist()
    kept = result if not big else result.filter(pc.invert(over))
    arrays = [a if a.type == f.type else a.cast(f.type) for a, f in zip(kept.columns, target)]
    out = pa.Table.from_arrays(arrays, schema=target)
    if not big:
        return out
    counts = {first + i for i, (fn, _) in enumerate(spec.functions) if fn in ("count", "count_star")}
    rows, parts = [], []
    for row in big:  # the groups whose sums overflow their partial column: a handful at most
        values = {at: result.column(at)[row].as_py() for at in sums}
        n = max(-(-abs(_unscaled(v, target.field(at).type)) // _limit(target.field(at).type))
                for at, v in values.items() if v is not None)  # pieces within the limit: ceil(|sum| / limit)
        rows.append(row)
        parts.append((n, values))
    index = pa.array([row for row, (n, _) in zip(rows, parts) for _ in range(n)], pa.int64())
    spread = []
    for at, field in enumerate(target):
        if at in sums:
            column = [None] * len(index)
            pos = 0
            for n, values in parts:
                v = values[at]
                column[pos:pos + n] = [None] * n if v is None else _pieces(v, n, field.type)
                pos += n
            spread.append(pa.array(column, field.type))
        elif at in counts:
            firsts = [k == 0 for n, _ in parts for k in range(n)]
            spread.append(pc.if_else(pa.array(firsts), result.column(at).take(index).cast(field.type),
                                     pa.scalar(0, field.type)))
        else:
            spread.append(result.column(at).take(index).cast(field.type))
    return pa.concat_tables([out, pa.Table.from_arrays(spread, schema=target)])


def aggregate_read(rp: ReadPlan, splits: list, stats: dict) -> Iterator[pa.RecordBatch]:
    """The ``read`` of a task that aggregates (``rp.aggregate``): checked now, the rows computed as consumed."""
    spec = task_aggregation({"aggregate": rp.aggregate}, rp)
    if spec is None:
        raise InvalidArgument("an aggregating read needs aggregate")
    missing = [c for c in spec.inputs if c not in rp.output]
    if missing:
        raise InvalidArgument(f"an aggregating read's columns must hold {missing}")
    target = rp.target
    if len(target) != len(spec.group_by) + len(spec.functions):
        raise InvalidArgument(f"an aggregating read's schema needs {len(spec.group_by) + len(spec.functions)} "
                              f"fields (groups, then aggregates), got {len(target)}")
    return aggregate_batches(rp, spec, splits, target, stats)
