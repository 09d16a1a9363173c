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

Most batches take a faster, equally exact road (:meth:`Expression.unscaled`):
decimals of at most 18 digits are their unscaled ``int64`` values, and each
node carries a bound on its values' magnitude, from its operands' bounds (a
column's is its batch's largest magnitude, one min/max pass).  While every
bound, before and after a node's rounding to its Spark scale, stays within
``int64`` and the rounded bound within the node's precision, NumPy computes
the node in ``int64`` (the same products, the same rounding half away from
zero) and no value can overflow, so no check is needed.  A batch where a
bound cannot be proved (wide decimals, magnitudes near the type's limits)
takes the decimal road above, whose range checks then decide.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from decimal import Decimal, InvalidOperation
from typing import Any, Callable, NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from storage import InvalidArgument

__all__ = ["Expression", "Unscaled", "unscaled_column", "parse_expression", "referenced", "describe",
           "NotComputable"]

_MAX = 38  # Spark's DecimalType.MAX_PRECISION
_WIDEST = 76  # decimal256: the widest exact intermediate the worker computes
_MIN_ADJUSTED_SCALE = 6  # Spark's DecimalType.MINIMUM_ADJUSTED_SCALE
_DECIMAL = re.compile(r"decimal\((\d+),\s*(\d+)\)")
_OPS: dict[str, tuple[Callable, Callable]] = {  # op: (checked kernel, wrapping kernel)
    "+": (pc.add_checked, pc.add), "-": (pc.subtract_checked, pc.subtract),
    "*": (pc.multiply_checked, pc.multiply),
}


_INT64_MAX = (1 << 63) - 1
_INT32_MAX = (1 << 31) - 1
_NARROW = 18  # digits: every unscaled value of a DECIMAL(p <= 18, s) fits int64


class Unscaled(NamedTuple):
    """A node's values over a batch as integers in units of its type's last digit (a decimal's
    unscaled values; an integer's own), with ``bound`` >= every valid value's magnitude.
    ``values`` is an ``int64`` array, or a Python int for a literal; ``valid`` is None when
    every value is valid, else a boolean array (the values under a null are within ``bound``
    too, and a sum must skip them)."""

    values: np.ndarray | int
    valid: np.ndarray | None
    bound: int


def unscaled_column(array: pa.Array) -> Unscaled | None:
    """An ``INT``, ``BIGINT`` or ``DECIMAL(p <= 18, s)`` array as :class:`Unscaled` (None for any
    other type): a decimal's low 64-bit words are its unscaled values, read without a copy."""
    kind = array.type
    if pa.types.is_decimal128(kind) and kind.precision <= _NARROW:
        words = np.frombuffer(array.buffers()[1], dtype=np.int64, count=2 * (array.offset + len(array)))
        values, high = words[2 * array.offset::2], words[2 * array.offset + 1::2]
        valid = pc.is_valid(array).to_numpy(zero_copy_only=False) if array.null_count else None
        if not np.array_equal(high, values >> 63) and (valid is None or not np.array_equal(
                high[valid], values[valid] >> 63)):
            return None  # a value past 64 bits, its declared precision notwithstanding: the decimal road
    elif kind in (pa.int32(), pa.int64()):
        values = (pc.fill_null(array, 0) if array.null_count else array).to_numpy().astype(np.int64, copy=False)
        valid = None
    else:
        return None
    if array.null_count:
        valid = pc.is_valid(array).to_numpy(zero_copy_only=False) if valid is None else valid
        values = np.where(valid, values, 0)  # whatever lies under a null must not reach a bound or a sum
    if not len(values):
        return Unscaled(np.zeros(0, np.int64), valid, 0)
    return Unscaled(values, valid, max(int(values.max()), -int(values.min())))


def _both(left: np.ndarray | None, right: np.ndarray | None) -> np.ndarray | None:
    if left is None or right is None:
        return right if left is None else left
    return left & right


def _rescaled(node: Unscaled, digits: int, limit: int) -> Unscaled | None:
    """``node`` times 10^digits (a scale raised) or divided by 10^-digits rounded half away from
    zero (a scale lowered), or None when a bound leaves ``limit`` on the way."""
    if abs(digits) > _NARROW:
        return None  # 10^19 is past int64 itself
    if digits >= 0:
        bound = node.bound * 10 ** digits
        if bound > limit:
            return None
        return Unscaled(node.values * 10 ** digits if digits else node.values, node.valid, bound)
    unit = 10 ** -digits
    if node.bound + unit // 2 > _INT64_MAX:
        return None
    if isinstance(node.values, int):
        q = (abs(node.values) + unit // 2) // unit
        return Unscaled(q if node.values >= 0 else -q, node.valid, q)
    q = (np.abs(node.values) + unit // 2) // unit
    return Unscaled(np.where(node.values < 0, -q, q), node.valid, (node.bound + unit // 2) // unit)


def _fitted(node: Unscaled, scale: int, kind: pa.DataType) -> Unscaled | None:
    """An exact ``node`` at ``scale`` as ``kind`` (rounded to its scale), or None unless its bound
    proves every value fits ``kind``'s precision (then no value can overflow it)."""
    if pa.types.is_integer(kind):
        return node if node.bound <= (_INT64_MAX if kind == pa.int64() else _INT32_MAX) else None
    out = _rescaled(node, kind.scale - scale, _INT64_MAX)
    return out if out is not None and out.bound < 10 ** kind.precision else None


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


def _integer_decimal(kind: pa.DataType) -> pa.DataType:
    """The decimal that holds every value of an integer ``kind``: ``DECIMAL(10,0)`` or ``DECIMAL(20,0)``."""
    return pa.decimal128(20 if kind == pa.int64() else 10, 0)


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
        values = values.cast(_integer_decimal(values.type))
    if values.type == kind:
        return values
    if values.type.scale > kind.scale:
        # one more digit first: rounding 999.999 to 1000.00 must not overflow the exact type
        precision = min(values.type.precision + 1, _WIDEST)
        wider = (pa.decimal128 if precision <= _MAX else pa.decimal256)(precision, values.type.scale)
        values = pc.round(values.cast(wider), ndigits=kind.scale, round_mode="half_towards_infinity")
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
    """One typed node: ``kind`` is the Arrow form of the type Spark's plan gives it; ``key`` names
    the node with its operands' and its own types, so equal keys compute equal values (q1's
    ``l_extendedprice * (1 - l_discount)`` inside its charge is the sum beside it)."""

    kind: pa.DataType
    key: Any

    @abstractmethod
    def columns(self) -> list[str]:
        """The columns it reads, each once, in order."""

    @abstractmethod
    def evaluate(self, columns: dict[str, pa.Array], rows: int, ansi: bool) -> pa.Array | pa.Scalar:
        """Its values over a batch's ``columns`` of ``rows`` rows (a literal is a scalar)."""

    def unscaled(self, columns: dict[str, pa.Array], cache: dict[Any, Unscaled | None]) -> Unscaled | None:
        """Its values over a batch as :class:`Unscaled` in units of its type's last digit, the
        same values :meth:`evaluate` gives (no value overflows on this road), or None when the
        batch's bounds do not prove that every value and step fits ``int64`` and its type.
        ``cache`` holds each column's form, and each node's, once per batch."""
        return None

    def _cached(self, cache: dict, compute: Callable[[], Unscaled | None]) -> Unscaled | None:
        """``compute()`` once per batch and ``key``: a subexpression shared by several aggregates
        is computed once."""
        if self.key not in cache:
            cache[self.key] = compute()
        return cache[self.key]

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
        self.key = name  # the key task_aggregates caches a column's form under too

    def columns(self) -> list[str]:
        return [self.name]

    def evaluate(self, columns, rows, ansi):
        return columns[self.name]

    def unscaled(self, columns, cache):
        if self.name not in cache:
            cache[self.name] = unscaled_column(columns[self.name])
        return cache[self.name]

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
        self.key = ("literal", str(self.value), str(kind))
        self.scalar = pa.scalar(self.value, kind)  # raises on a literal its type cannot hold

    def columns(self) -> list[str]:
        return []

    def evaluate(self, columns, rows, ansi):
        return self.scalar

    def unscaled(self, columns, cache):
        whole = int(self.value.scaleb(self.kind.scale)) if pa.types.is_decimal(self.kind) else self.value
        return Unscaled(whole, None, abs(whole)) if abs(whole) <= _INT64_MAX else None

    def __str__(self) -> str:
        return str(self.value)


class _Cast(Expression):
    def __init__(self, child: Expression, kind: pa.DataType):
        widening = (pa.types.is_integer(kind) and child.kind in (pa.int32(), kind)) or pa.types.is_decimal(kind)
        if not widening:
            raise NotComputable(f"CAST({child} AS {_ddl(kind).upper()}) truncates")
        self.child, self.kind = child, kind
        self.key = ("cast", child.key, str(kind))

    def columns(self) -> list[str]:
        return self.child.columns()

    def evaluate(self, columns, rows, ansi):
        value = self.child.values(columns, rows, ansi)
        return value.cast(self.kind) if pa.types.is_integer(self.kind) else _to_decimal(value, self.kind, ansi)

    def unscaled(self, columns, cache):
        return self._cached(cache, lambda: self._unscaled(columns, cache))

    def _unscaled(self, columns, cache):
        child = self.child.unscaled(columns, cache)
        if child is None:
            return None
        scale = self.child.kind.scale if pa.types.is_decimal(self.child.kind) else 0
        return _fitted(child, scale, self.kind)

    def __str__(self) -> str:
        return f"CAST({self.child} AS {_ddl(self.kind).upper()})"


class _Arithmetic(Expression):
    def __init__(self, op: str, left: Expression, right: Expression, precision_loss: bool):
        self.op, self.left, self.right = op, left, right
        if pa.types.is_integer(left.kind) and pa.types.is_integer(right.kind):
            self.kind = pa.int64() if pa.int64() in (left.kind, right.kind) else pa.int32()
            self.exact = None
            self.key = (op, left.key, right.key, str(self.kind))
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
        self.key = (op, left.key, right.key, str(self.kind))

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
        # (an integer goes through its own decimal type first: Arrow casts an INT to at least DECIMAL(10,0))
        left, right = (v.cast(_integer_decimal(v.type)).cast(operand).cast(wide) if pa.types.is_integer(v.type)
                       else v.cast(operand).cast(wide) for v, operand, wide in zip((left, right), self.operands, self.exact))
        out = wrapping(left, right)
        if isinstance(out, pa.Scalar):
            out = pa.repeat(out, rows)
        return _to_decimal(out, self.kind, ansi)

    def unscaled(self, columns, cache):
        return self._cached(cache, lambda: self._unscaled(columns, cache))

    def _unscaled(self, columns, cache):
        left, right = self.left.unscaled(columns, cache), self.right.unscaled(columns, cache)
        if left is None or right is None:
            return None
        scale = 0
        if self.exact is not None:  # decimals: both operands to the exact result's scale (+, -)
            s1, s2 = (e.kind.scale if pa.types.is_decimal(e.kind) else 0 for e in (self.left, self.right))
            if self.op == "*":
                scale = s1 + s2
            else:
                scale = max(s1, s2)
                left, right = _rescaled(left, scale - s1, _INT64_MAX), _rescaled(right, scale - s2, _INT64_MAX)
                if left is None or right is None:
                    return None
        bound = left.bound * right.bound if self.op == "*" else left.bound + right.bound
        if bound > _INT64_MAX:
            return None
        if self.op == "*":
            out = left.values * right.values
        else:
            out = left.values + right.values if self.op == "+" else left.values - right.values
        return _fitted(Unscaled(out, _both(left.valid, right.valid), bound), scale, self.kind)

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
