"""Arithmetic inside a pushed ``SUM`` or ``COUNT``, typed by Spark's rules and evaluated exactly.

TPC-H's q1 sums ``l_extendedprice * (1 - l_discount) * (1 + l_tax)``; Spark
hands the source such an argument as a tree of ``+``, ``-``, ``*``, column
references, literals and casts (``AggregateExpressions.java`` sends it as
JSON).  Each node gets the type Spark's plan gives it (checked against Spark
itself in ``tests/connector/test_jvm_expression_aggregates.py``):

* integers: the operands' common type (Spark casts an ``INT`` to ``BIGINT``
  beside a ``BIGINT``); an overflow fails in ANSI mode and wraps otherwise;
* decimals, an integer operand taken as ``DECIMAL(10,0)`` (``INT``),
  ``DECIMAL(20,0)`` (``BIGINT``) or its literal's digits: ``+``/``-`` give
  scale ``max(s1, s2)`` and precision ``max(p1-s1, p2-s2) + scale + 1``,
  ``*`` gives ``(p1+p2+1, s1+s2)``; past 38 digits
  ``spark.sql.decimalOperations.allowPrecisionLoss`` (true by default) keeps
  ``38 - integer digits`` of scale, at least ``min(scale, 6)``, and without it
  precision and scale are each capped at 38.

Each node is computed exactly by pyarrow's decimal kernels in a type wide
enough (``decimal128`` up to 38 digits, ``decimal256`` up to 76), then
rounded half away from zero to its Spark scale (Java's ``HALF_UP``, as
Spark's ``Decimal.toPrecision``) and checked against its precision: a value
past it is null without ANSI and fails with ``NUMERIC_VALUE_OUT_OF_RANGE``
with it, as Spark's own evaluation.  (Spark's ``Decimal`` multiplication first
truncates to 39 significant digits; a value that fits 38 digits at its scale
is then rounded the same way, and one that does not overflows either way.)
A node whose exact value could need more than 76 digits is not computed:
the aggregate is left to Spark, and the count reply says why.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from decimal import Decimal, InvalidOperation
from typing import Any, Callable

import pyarrow as pa
import pyarrow.compute as pc

from storage import InvalidArgument

__all__ = ["Expression", "parse_expression", "referenced", "describe", "NotComputable"]

_MAX = 38  # Spark's DecimalType.MAX_PRECISION
_WIDEST = 76  # decimal256: the widest exact intermediate the worker computes
_MIN_ADJUSTED_SCALE = 6  # Spark's DecimalType.MINIMUM_ADJUSTED_SCALE
_DECIMAL = re.compile(r"decimal\((\d+),\s*(\d+)\)")
_OPS: dict[str, tuple[Callable, Callable]] = {  # op: (checked kernel, wrapping kernel)
    "+": (pc.add_checked, pc.add), "-": (pc.subtract_checked, pc.subtract),
    "*": (pc.multiply_checked, pc.multiply),
}


class NotComputable(Exception):
    """An expression the worker does not compute exactly: Spark aggregates it."""


def _spark_type(text: Any) -> pa.DataType:
    """A literal's or cast's Spark type (``int``, ``bigint``, ``decimal(p,s)``) as Arrow's."""
    if text == "int":
        return pa.int32()
    if text == "bigint":
        return pa.int64()
    m = _DECIMAL.fullmatch(str(text))
    if m and 1 <= int(m.group(1)) <= _MAX and int(m.group(2)) <= int(m.group(1)):
        return pa.decimal128(int(m.group(1)), int(m.group(2)))
    raise InvalidArgument(f"expression type {text!r} must be int, bigint or decimal(p,s) with s <= p <= 38")


def _ddl(kind: pa.DataType) -> str:
    if pa.types.is_decimal(kind):
        return f"decimal({kind.precision},{kind.scale})"
    return "int" if kind == pa.int32() else "bigint"


def _as_decimal(kind: pa.DataType, literal: Any = None) -> tuple[int, int]:
    """``(precision, scale)`` of an operand of a decimal operation, as Spark widens integers:
    an ``INT`` is a ``DECIMAL(10,0)``, a ``BIGINT`` a ``DECIMAL(20,0)``, an integer literal
    takes its own digits (``DecimalType.fromLiteral``)."""
    if pa.types.is_decimal(kind):
        return kind.precision, kind.scale
    if literal is not None:
        return max(len(str(abs(int(literal)))), 1), 0
    return (10, 0) if kind == pa.int32() else (20, 0)


def _fit(precision: int, scale: int, precision_loss: bool) -> pa.DataType:
    """Spark's result type for an exact ``(precision, scale)`` past which it may not go."""
    if precision <= _MAX:
        return pa.decimal128(precision, scale)
    if precision_loss:  # DecimalType.adjustPrecisionScale
        whole = precision - scale
        return pa.decimal128(_MAX, max(_MAX - whole, min(scale, _MIN_ADJUSTED_SCALE)))
    return pa.decimal128(_MAX, min(scale, _MAX))  # DecimalType.bounded


def _out_of_range(kind: pa.DataType, ansi: bool, mask: pa.Array, values: pa.Array) -> None:
    if ansi and pc.any(mask).as_py():
        bad = values.filter(mask)[0]
        raise OverflowError(f"[NUMERIC_VALUE_OUT_OF_RANGE] {bad} cannot be represented as "
                            f"{_ddl(kind).upper()} (ANSI mode; spark.sql.ansi.enabled=false makes it null)")


def _to_decimal(values: pa.Array, kind: pa.DataType, ansi: bool) -> pa.Array:
    """``values`` (exact decimals or integers) as Spark's ``kind``: rounded half away from zero to its
    scale, a value past its precision null (non-ANSI) or an error (ANSI)."""
    if pa.types.is_integer(values.type):
        values = values.cast(pa.decimal128(20 if values.type == pa.int64() else 10, 0))
    if values.type == kind:
        return values
    if values.type.scale > kind.scale:
        values = pc.round(values, ndigits=kind.scale, round_mode="half_towards_infinity")
    if values.type.precision - values.type.scale > kind.precision - kind.scale:
        # |value| >= 10^(integer digits of kind) does not fit; the batch's bounds (one pass, no
        # array made) rule that out on the common path, else a mask finds the values
        limit = Decimal(10) ** (kind.precision - kind.scale)
        bounds = pc.min_max(values)
        low, high = bounds["min"].as_py(), bounds["max"].as_py()
        if low is not None and (high >= limit or low <= -limit):
            mask = pc.fill_null(pc.greater_equal(pc.abs(values), pa.scalar(limit, values.type)), False)
            _out_of_range(kind, ansi, mask, values)
            values = pc.if_else(mask, pa.scalar(None, values.type), values)
    return values.cast(kind, safe=False) if values.type.scale >= kind.scale else values.cast(kind)


class Expression(ABC):
    """One typed node: ``kind`` is the Arrow form of the type Spark's plan gives it."""

    kind: pa.DataType

    @abstractmethod
    def columns(self) -> list[str]:
        """The columns it reads, each once, in order."""

    @abstractmethod
    def evaluate(self, columns: dict[str, pa.Array], rows: int, ansi: bool) -> pa.Array | pa.Scalar:
        """Its values over a batch's ``columns`` of ``rows`` rows (a literal is a scalar)."""

    def values(self, columns: dict[str, pa.Array], rows: int, ansi: bool) -> pa.Array:
        """:meth:`evaluate` as an array of ``rows`` values."""
        out = self.evaluate(columns, rows, ansi)
        return pa.repeat(out, rows) if isinstance(out, pa.Scalar) else out

    @property
    def ddl(self) -> str:
        """Its type in Spark's DDL (``decimal(38,6)``, ``bigint``)."""
        return _ddl(self.kind)


class _Column(Expression):
    def __init__(self, name: str, kind: pa.DataType):
        if not (kind in (pa.int32(), pa.int64()) or pa.types.is_decimal128(kind)):
            raise NotComputable(f"{name} is {kind}, not INT, BIGINT or DECIMAL")
        self.name, self.kind = name, kind

    def columns(self) -> list[str]:
        return [self.name]

    def evaluate(self, columns, rows, ansi):
        return columns[self.name]

    def __str__(self) -> str:
        return self.name


class _Literal(Expression):
    def __init__(self, text: Any, kind: pa.DataType):
        try:
            value = Decimal(str(text))
        except InvalidOperation:
            raise InvalidArgument(f"expression literal {text!r} is not a number") from None
        self.value = int(value) if pa.types.is_integer(kind) else value
        self.kind = kind
        self.scalar = pa.scalar(self.value, kind)  # raises on a literal its type cannot hold

    def columns(self) -> list[str]:
        return []

    def evaluate(self, columns, rows, ansi):
        return self.scalar

    def __str__(self) -> str:
        return str(self.value)


class _Cast(Expression):
    def __init__(self, child: Expression, kind: pa.DataType):
        widening = (pa.types.is_integer(kind) and child.kind in (pa.int32(), kind)) or pa.types.is_decimal(kind)
        if not widening:
            raise NotComputable(f"CAST({child} AS {_ddl(kind).upper()}) truncates")
        self.child, self.kind = child, kind

    def columns(self) -> list[str]:
        return self.child.columns()

    def evaluate(self, columns, rows, ansi):
        value = self.child.values(columns, rows, ansi)
        return value.cast(self.kind) if pa.types.is_integer(self.kind) else _to_decimal(value, self.kind, ansi)

    def __str__(self) -> str:
        return f"CAST({self.child} AS {_ddl(self.kind).upper()})"


class _Arithmetic(Expression):
    def __init__(self, op: str, left: Expression, right: Expression, precision_loss: bool):
        self.op, self.left, self.right = op, left, right
        if pa.types.is_integer(left.kind) and pa.types.is_integer(right.kind):
            self.kind = pa.int64() if pa.int64() in (left.kind, right.kind) else pa.int32()
            self.exact = None
            return
        (p1, s1), (p2, s2) = (_as_decimal(e.kind, e.value if isinstance(e, _Literal) else None)
                              for e in (left, right))
        if op == "*":
            precision, scale = p1 + p2 + 1, s1 + s2
        else:
            scale = max(s1, s2)
            precision = max(p1 - s1, p2 - s2) + scale + 1
        if precision > _WIDEST:
            raise NotComputable(f"{self} needs {precision} digits exactly; the worker computes up to {_WIDEST}")
        self.operands = (pa.decimal128(p1, s1), pa.decimal128(p2, s2))
        wide = pa.decimal128 if precision <= _MAX else pa.decimal256
        self.exact = [wide(p1, s1), wide(p2, s2)]
        self.kind = _fit(precision, scale, precision_loss)

    def columns(self) -> list[str]:
        return list(dict.fromkeys(self.left.columns() + self.right.columns()))

    def evaluate(self, columns, rows, ansi):
        left, right = self.left.evaluate(columns, rows, ansi), self.right.evaluate(columns, rows, ansi)
        checked, wrapping = _OPS[self.op]
        if self.exact is None:  # integers: Spark's common type, overflow an error in ANSI mode, else wraps
            left, right = left.cast(self.kind), right.cast(self.kind)
            try:
                return (checked if ansi else wrapping)(left, right)
            except pa.ArrowInvalid:
                raise OverflowError(f"[ARITHMETIC_OVERFLOW] {self} overflows {_ddl(self.kind).upper()} "
                                    "(ANSI mode; spark.sql.ansi.enabled=false makes it wrap)") from None
        # decimals: exact in a type wide enough, then Spark's type (rounded, range-checked)
        left, right = (v.cast(operand).cast(wide) for v, operand, wide in zip((left, right), self.operands, self.exact))
        out = wrapping(left, right)
        if isinstance(out, pa.Scalar):
            out = pa.repeat(out, rows)
        return _to_decimal(out, self.kind, ansi)

    def __str__(self) -> str:
        return f"({self.left} {self.op} {self.right})"


def parse_expression(doc: Any, column: Callable[[Any], str], types: Callable[[str], pa.DataType],
                     precision_loss: bool) -> Expression:
    """A typed tree from its JSON (``{"column": c}``, ``{"literal": "1", "type": "int"}``,
    ``{"cast": e, "type": "decimal(p,s)"}``, ``{"op": "*", "args": [e, e]}``); ``column`` resolves a
    name, ``types`` gives a column's Arrow type.  Raises :class:`NotComputable` for what Spark keeps."""
    if not isinstance(doc, dict):
        raise InvalidArgument(f"an aggregate expression must be a JSON object, got {doc!r}")
    if "column" in doc:
        name = column(doc["column"])
        return _Column(name, types(name))
    if "literal" in doc:
        return _Literal(doc["literal"], _spark_type(doc.get("type")))
    if "cast" in doc:
        return _Cast(parse_expression(doc["cast"], column, types, precision_loss), _spark_type(doc.get("type")))
    args = doc.get("args")
    if doc.get("op") not in _OPS or not isinstance(args, list) or len(args) != 2:
        raise InvalidArgument(f"aggregate expression {doc!r}: op must be one of {', '.join(_OPS)} with two args")
    left, right = (parse_expression(a, column, types, precision_loss) for a in args)
    return _Arithmetic(doc["op"], left, right, precision_loss)


def referenced(doc: Any, column: Callable[[Any], str]) -> list[str]:
    """The columns an expression's JSON names (resolved by ``column``), each once, in order: what a
    task reads for it, known before the columns' types are."""
    if not isinstance(doc, dict):
        raise InvalidArgument(f"an aggregate expression must be a JSON object, got {doc!r}")
    if "column" in doc:
        return [column(doc["column"])]
    if "cast" in doc:
        return referenced(doc["cast"], column)
    out: list[str] = []
    for arg in doc.get("args") or []:
        out += [c for c in referenced(arg, column) if c not in out]
    return out


def describe(doc: Any) -> str:
    """An expression's JSON as infix text (``(l_extendedprice * (1 - l_discount))``), for labels and errors."""
    if not isinstance(doc, dict):
        return repr(doc)
    if "column" in doc:
        return str(doc["column"])
    if "literal" in doc:
        return str(doc["literal"])
    if "cast" in doc:
        return f"CAST({describe(doc['cast'])} AS {str(doc.get('type')).upper()})"
    args = doc.get("args") if isinstance(doc.get("args"), list) else []
    return "(" + f" {doc.get('op')} ".join(describe(a) for a in args) + ")"
