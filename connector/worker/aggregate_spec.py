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
  in ANSI mode, its default, where ``%`` by a constant cannot fail);
* ``SUM`` and ``COUNT`` of ``+``, ``-``, ``*`` over ``INT``, ``BIGINT`` and
  ``DECIMAL`` columns and literals (``SUM(l_extendedprice * (1 - l_discount))``),
  each node typed and evaluated exactly as Spark's plan would
  (:mod:`.aggregate_expressions`); one whose exact value could need more than
  76 digits is left to Spark.

Spark pushes an aggregate only when no filter is left for it to apply after
the scan, so the rows aggregated are the query's rows.  The ``count`` reply
does not offer the tasks an ungrouped MIN/MAX of fixed-width columns alone,
which Spark aggregates as fast itself (:func:`per_task`).
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from storage import InvalidArgument

from .aggregate_expressions import Expression, NotComputable, describe, parse_expression, referenced

if TYPE_CHECKING:
    from .read_plan import ReadPlan

__all__ = ["TaskAggregation", "task_aggregation", "per_task", "per_task_or_why"]

_FUNCTIONS = ("count_star", "count", "sum", "min", "max")


def _orderable(kind: pa.DataType) -> bool:
    return (pa.types.is_integer(kind) or pa.types.is_boolean(kind) or pa.types.is_string(kind)
            or pa.types.is_large_string(kind) or pa.types.is_binary(kind) or pa.types.is_large_binary(kind)
            or pa.types.is_date32(kind) or pa.types.is_timestamp(kind) or pa.types.is_decimal128(kind))


def _summable(kind: pa.DataType) -> bool:
    return pa.types.is_signed_integer(kind) or pa.types.is_decimal128(kind)


class TaskAggregation:
    """A checked ``{"group_by": [col or {"column": col, "mod": k}, ...], "aggregates": [{"fn": ..., "column": ...}
    or {"fn": "sum" or "count", "expr": {...}}], "ansi": bool, "decimal_precision_loss": bool}`` (``ansi``:
    Spark's ``spark.sql.ansi.enabled`` for the query, ``decimal_precision_loss`` its
    ``spark.sql.decimalOperations.allowPrecisionLoss``, both true when absent)."""

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
        loss = doc.get("decimal_precision_loss", True)
        if not isinstance(loss, bool):
            raise InvalidArgument(f"aggregate decimal_precision_loss must be true or false, got {loss!r}")
        # Spark's spark.sql.decimalOperations.allowPrecisionLoss: the decimal types of an expression
        self.precision_loss: bool = loss
        self._column = column
        # aggregates of an expression: its JSON and the columns it reads, by position; typed by unsupported()
        self._expression_docs: dict[int, tuple[Any, list[str]]] = {}
        self.expressions: dict[int, Expression] = {}
        self.functions: list[tuple[str, str | None]] = []
        for a in aggs:
            fn = a.get("fn") if isinstance(a, dict) else None
            if fn not in _FUNCTIONS:
                raise InvalidArgument(f"aggregate {a!r}: fn must be one of {', '.join(_FUNCTIONS)}")
            if "expr" in a:
                if fn not in ("sum", "count"):
                    raise InvalidArgument(f"aggregate {a!r}: only sum and count take an expr")
                self._expression_docs[len(self.functions)] = (a["expr"], referenced(a["expr"], lambda n: column(n, fn)))
                self.functions.append((fn, describe(a["expr"])))  # its text, as labels and errors name it
                continue
            self.functions.append((fn, None if fn == "count_star" else column(a.get("column"), fn)))

    @property
    def inputs(self) -> list[str]:
        """The columns read: the group columns, then each aggregated column once."""
        out = list(self.group_by)
        for i, (_, col) in enumerate(self.functions):
            names = self._expression_docs[i][1] if i in self._expression_docs else [] if col is None else [col]
            out += [n for n in names if n not in out]
        return out

    def unsupported(self, types: pa.Schema) -> str | None:
        """Why this aggregation is not computed per task (None when it is)."""
        for g, mod in zip(self.group_by, self.group_mods):
            kind = types.field(g).type
            if not _orderable(kind) or (mod is not None and not pa.types.is_signed_integer(kind)):
                return f"GROUP BY {g}{'' if mod is None else f' % {mod}'} ({kind})"
        for i, (doc, _) in self._expression_docs.items():
            try:
                self.expressions[i] = parse_expression(doc, lambda n: self._column(n, "expression"),
                                                       lambda n: types.field(n).type, self.precision_loss)
            except NotComputable as why:
                return f"{self.functions[i][0].upper()}({self.functions[i][1]}) ({why})"
        for i, (fn, col) in enumerate(self.functions):
            if col is None or fn == "count" or i in self._expression_docs:
                continue
            kind = types.field(col).type
            if (fn == "sum" and not _summable(kind)) or (fn in ("min", "max") and not _orderable(kind)):
                return f"{fn.upper()}({col}) of {kind}"
        return None

    def distinct(self) -> tuple[TaskAggregation, list[int]]:
        """This aggregation without repeated aggregates, and where each aggregate's values are in
        it: ``AVG(x)`` beside ``SUM(x)`` asks for ``SUM(x)`` twice (TPC-H q1 twice over), and one
        computation serves both.  The same inputs, in the same order.  Only after :meth:`unsupported`."""
        seen: dict = {}
        at: list[int] = []
        for i, (fn, col) in enumerate(self.functions):
            # an expression by its typed key: the same text over differently typed literals is another
            at.append(seen.setdefault((fn, self.expressions[i].key if i in self.expressions else col), len(seen)))
        if len(seen) == len(self.functions):
            return self, at
        kept = [at.index(k) for k in range(len(seen))]
        out = copy.copy(self)
        out.functions = [self.functions[i] for i in kept]
        out.expressions = {k: self.expressions[i] for k, i in enumerate(kept) if i in self.expressions}
        out._expression_docs = {k: self._expression_docs[i] for k, i in enumerate(kept) if i in self._expression_docs}
        return out, at

    def partial_types(self) -> list[str | None]:
        """Per aggregate, the Spark type of a SUM of an expression's partial column (the expression's
        type, which Spark's final SUM casts the partials to, or ``bigint`` for integers); None for the
        others, whose types the JVM knows from the columns.  Only after :meth:`unsupported`."""
        out: list[str | None] = [None] * len(self.functions)
        for i, expression in self.expressions.items():
            if self.functions[i][0] == "sum":
                out[i] = expression.ddl if pa.types.is_decimal(expression.kind) else "bigint"
        return out

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
    if spec.group_by or spec.expressions or not any(fn in ("min", "max") for fn, _ in spec.functions):
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
    return per_task_or_why(req, rp)[0]


def per_task_or_why(req: dict, rp: ReadPlan) -> tuple[TaskAggregation | None, str | None]:
    """:func:`per_task`, and when it is None for an aggregate of an expression, why (one line, for
    the scan's explain: an expression the worker does not compute exactly is left to Spark)."""
    doc = {"group_by": req.get("group_by") or [], "aggregates": req.get("aggregates"),
           "decimal_precision_loss": req.get("decimal_precision_loss", True)}
    try:
        spec = task_aggregation({"aggregate": doc}, rp)
    except InvalidArgument as error:
        aggs = doc["aggregates"] if isinstance(doc["aggregates"], list) else []
        return None, str(error) if any(isinstance(a, dict) and "expr" in a for a in aggs) else None
    if spec is not None and _cheap_for_spark(spec, rp.base.spark_arrow_schema(spec.inputs)):
        return None, None
    return spec, None
