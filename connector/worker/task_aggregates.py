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
decoded (pyarrow's hash aggregation), never per row.
"""

from __future__ import annotations

from typing import Iterator

import pyarrow as pa
import pyarrow.compute as pc

from storage import InvalidArgument

from ..decoded_filters import remainder
from .aggregate_spec import TaskAggregation, task_aggregation
from .read_ops import decoded_batches
from .read_plan import ReadPlan

__all__ = ["aggregate_batches", "aggregate_read", "remainder"]

# how the partial results of one function combine: the function Spark applies over them
_COMBINE = {"count_star": "sum", "count": "sum", "sum": "sum", "min": "min", "max": "max"}


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
    """The task's partial aggregates as batches of ``target`` (group columns, then one per aggregate).

    Each decoded batch is aggregated as it comes; the partial tables are then
    aggregated once more by how their functions combine (counts summed ...)."""
    inputs = rp.base.spark_arrow_schema(spec.inputs)
    groups = [f"g{i}" for i in range(len(spec.group_by))]
    values = [f"a{i}" for i in range(len(spec.functions))]
    columns = pa.schema([inputs.field(g).with_name(n) for n, g in zip(groups, spec.group_by)]
                        + [pa.field(n, pa.null()) if col is None else inputs.field(col).with_name(n)
                           for n, (_, col) in zip(values, spec.functions)])
    first = ["count_all" if fn == "count_star" else fn for fn, _ in spec.functions]
    then = [_COMBINE[fn] for fn, _ in spec.functions]

    def renamed(batch: pa.RecordBatch) -> pa.Table:
        by_name = dict(zip(spec.inputs, batch.columns))
        arrays = [by_name[g] if mod is None else remainder(by_name[g], mod)
                  for g, mod in zip(spec.group_by, spec.group_mods)]
        arrays += [pa.nulls(batch.num_rows) if col is None else by_name[col] for _, col in spec.functions]
        return pa.Table.from_arrays(arrays, schema=columns)

    partials = [_partial(renamed(b), spec, groups + values, first)
                for b in decoded_batches(rp, splits, None, inputs, stats, spec.inputs) if b.num_rows]
    if not partials:
        result = _partial(columns.empty_table(), spec, groups + values, first)
    elif len(partials) == 1:
        result = partials[0]
    else:
        result = _partial(pa.concat_tables(partials), spec, groups + values, then)
    arrays = [a if a.type == f.type else a.cast(f.type) for a, f in zip(result.columns, target)]
    yield from pa.Table.from_arrays(arrays, schema=target).to_batches()


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
