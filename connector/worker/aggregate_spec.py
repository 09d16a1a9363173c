"""Which aggregates the tasks compute (:mod:`.task_aggregates`), checked against the mapping.

By the column's Spark type:

* ``COUNT(*)``, ``COUNT(col)`` of any column;
* ``SUM(col)`` of integer columns (a ``BIGINT`` per task, as Spark sums them)
  and of ``DECIMAL(p,s)`` (``DECIMAL(p,s)`` partial rows, which Spark sums as
  ``DECIMAL(min(p+10,38),s)``); each task's sum is exact, and one too large
  for its partial column is sent as several rows of the group whose sum it is
  (:mod:`.task_aggregates`), so Spark's own final sum meets every overflow
  as it would have (null without ANSI, an error with it);
* ``MIN``/``MAX`` of integers, ``BOOLEAN``, ``STRING`` and ``BINARY`` (byte
  order, as Spark's default collation compares), ``DATE``, ``TIMESTAMP`` and
  ``DECIMAL``; floating point (NaN ordering) is left to Spark;
* ``GROUP BY`` plain columns of those ``MIN``/``MAX`` types (a null is one
  group, as in Spark), and ``col % k`` of an integer column by a positive
  integer literal (Java's remainder: the sign of ``col``; Spark translates it
  in ANSI mode, its default, where ``%`` by a constant cannot fail).

Spark pushes an aggregate only when no filter is left for it to apply after
the scan, so the rows aggregated are the query's rows.  The ``count`` reply
does not offer the tasks an ungrouped MIN/MAX of fixed-width columns alone,
which Spark aggregates as fast itself (:func:`per_task`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pyarrow as pa

from storage import InvalidArgument

if TYPE_CHECKING:
    from .read_plan import ReadPlan

__all__ = ["TaskAggregation", "task_aggregation", "per_task"]

_FUNCTIONS = ("count_star", "count", "sum", "min", "max")


def _orderable(kind: pa.DataType) -> bool:
    return (pa.types.is_integer(kind) or pa.types.is_boolean(kind) or pa.types.is_string(kind)
            or pa.types.is_large_string(kind) or pa.types.is_binary(kind) or pa.types.is_large_binary(kind)
            or pa.types.is_date32(kind) or pa.types.is_timestamp(kind) or pa.types.is_decimal128(kind))


def _summable(kind: pa.DataType) -> bool:
    return pa.types.is_signed_integer(kind) or pa.types.is_decimal128(kind)


class TaskAggregation:
    """A checked ``{"group_by": [col or {"column": col, "mod": k}, ...], "aggregates": [{"fn": ..., "column": ...}],
    "ansi": bool}`` (``ansi``: Spark's ``spark.sql.ansi.enabled`` for the query, true when absent)."""

    def __init__(self, doc: Any, known: dict[str, str]):
        if not isinstance(doc, dict):
            raise InvalidArgument("aggregate must be a JSON object")
        groups = doc.get("group_by") or []
        aggs = doc.get("aggregates")
        if not isinstance(groups, list) or not isinstance(aggs, list) or not aggs:
            raise InvalidArgument("aggregate needs a list group_by and a non-empty list aggregates")

        def column(name: Any, what: str) -> str:
            found = known.get(str(name).lower()) if isinstance(name, str) else None
            if found is None:
                raise InvalidArgument(f"{what} column {name!r} is not in the mapping ({sorted(known.values())})")
            return found

        self.group_by: list[str] = []
        self.group_mods: list[int | None] = []  # GROUP BY col % k: k (a positive integer), else None
        for g in groups:
            if isinstance(g, dict):
                mod = g.get("mod")
                if not isinstance(mod, int) or isinstance(mod, bool) or not 1 <= mod < 1 << 63:
                    raise InvalidArgument(f"group_by {g!r}: mod must be a positive integer (a BIGINT)")
                self.group_by.append(column(g.get("column"), "group_by"))
                self.group_mods.append(mod)
            else:
                self.group_by.append(column(g, "group_by"))
                self.group_mods.append(None)
        ansi = doc.get("ansi", True)
        if not isinstance(ansi, bool):
            raise InvalidArgument(f"aggregate ansi must be true or false, got {ansi!r}")
        # Spark's spark.sql.ansi.enabled: a BIGINT SUM then fails where a running sum overflows
        self.ansi: bool = ansi
        self.functions: list[tuple[str, str | None]] = []
        for a in aggs:
            fn = a.get("fn") if isinstance(a, dict) else None
            if fn not in _FUNCTIONS:
                raise InvalidArgument(f"aggregate {a!r}: fn must be one of {', '.join(_FUNCTIONS)}")
            self.functions.append((fn, None if fn == "count_star" else column(a.get("column"), fn)))

    @property
    def inputs(self) -> list[str]:
        """The columns read: the group columns, then each aggregated column once."""
        out = list(self.group_by)
        for _, col in self.functions:
            if col is not None and col not in out:
                out.append(col)
        return out

    def unsupported(self, types: pa.Schema) -> str | None:
        """Why this aggregation is not computed per task (None when it is)."""
        for g, mod in zip(self.group_by, self.group_mods):
            kind = types.field(g).type
            if not _orderable(kind) or (mod is not None and not pa.types.is_signed_integer(kind)):
                return f"GROUP BY {g}{'' if mod is None else f' % {mod}'} ({kind})"
        for fn, col in self.functions:
            if col is None or fn == "count":
                continue
            kind = types.field(col).type
            if (fn == "sum" and not _summable(kind)) or (fn in ("min", "max") and not _orderable(kind)):
                return f"{fn.upper()}({col}) of {kind}"
        return None

    def labels(self) -> list[str]:
        """The aggregates as Spark's explain() names them, then the groups."""
        out = ["COUNT(*)" if col is None else f"{fn.upper()}({col})" for fn, col in self.functions]
        return out + [f"GROUP BY {g}" + ("" if mod is None else f" % {mod}") for g, mod in zip(self.group_by, self.group_mods)]


def task_aggregation(req: dict, rp: ReadPlan) -> TaskAggregation | None:
    """The request's ``aggregate``, checked against the mapping, or None when it has none."""
    doc = req.get("aggregate")
    if doc is None:
        return None
    spec = TaskAggregation(doc, {n.lower(): n for n in rp.base.output_names})
    why = spec.unsupported(rp.base.spark_arrow_schema(spec.inputs))
    if why is not None:
        raise InvalidArgument(f"aggregate {why} is not computed by the tasks; let Spark aggregate")
    return spec


def _cheap_for_spark(spec: TaskAggregation, types: pa.Schema) -> bool:
    """Whether Spark aggregates the rows at least as fast as the tasks would: no GROUP BY, and
    only MIN/MAX (with COUNTs) of fixed-width columns that are not decimals.  Spark's columnar
    MIN/MAX of an INT or a DATE costs less than the pushdown's planning round trip and its
    partial-row stage saves (bench_aggregates, 400k rows: 0.89x-0.90x CPU, 0.91x-0.93x wall
    pushed); decimal SUMs (1.15x CPU), strings and every GROUP BY (1.17x-1.32x CPU,
    1.3x-1.75x wall) gain."""
    if spec.group_by or not any(fn in ("min", "max") for fn, _ in spec.functions):
        return False
    for fn, col in spec.functions:
        if fn == "count_star":
            continue
        kind = types.field(col).type
        if fn == "sum" or not (pa.types.is_integer(kind) or pa.types.is_date(kind) or pa.types.is_timestamp(kind)
                               or pa.types.is_boolean(kind)):
            return False
    return True


def per_task(req: dict, rp: ReadPlan) -> TaskAggregation | None:
    """The ``count`` request's aggregates (with its ``group_by``) as the tasks
    would compute them, or None when they cannot or when Spark aggregating the
    rows is as fast (:func:`_cheap_for_spark`)."""
    doc = {"group_by": req.get("group_by") or [], "aggregates": req.get("aggregates")}
    try:
        spec = task_aggregation({"aggregate": doc}, rp)
    except InvalidArgument:
        return None
    if spec is not None and _cheap_for_spark(spec, rp.base.spark_arrow_schema(spec.inputs)):
        return None
    return spec
