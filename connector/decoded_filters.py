"""Filters evaluated on decoded rows, exactly as Spark evaluates them.

Some filters have no form the engine can test on stored bytes: a remainder
(``n % 3 = 0``), a substring (``s LIKE '%5%'``), a comparison on a column
whose byte order is not its value order (an ``INT`` stored as text), or whose
cells may not fit its type (a binary ``INT``: decoding checks each cell's
width, a byte comparison would drop a cell of another width unread).  Spark's
file sources leave such filters to Spark, which then receives every row.  The
JVM source's engine worker evaluates them itself, on the Arrow columns the
SerDe decoded for the task, with pyarrow's kernels over whole batches:

* comparisons (``=``, ``<>``, ``<=>``, ``<``, ``<=``, ``>``, ``>=``) of columns,
  literals and :class:`Remainder` expressions (Java's ``%`` by a non-zero
  integer literal, which Spark translates in ANSI mode, its default, where it
  cannot fail), ``IN``, ``IS [NOT] NULL``, ``STARTS WITH`` / ``ENDS WITH`` /
  ``CONTAINS`` (byte-exact, Spark's default collation), ``NOT``, ``AND``, ``OR``;
* in SQL's three-valued logic (a comparison with null is null, ``NOT`` null is
  null, a row passes only when the whole filter is true);
* on integer, decimal, string, binary, boolean, date and timestamp columns:
  each comparison is one kernel over the column decoded to its type (a date
  range is two comparisons of ``date32`` values, not byte ranges); decimals are
  compared as Arrow decimals, exactly (a literal of another scale or precision
  too), never through floats.  Floating point stays with Spark (Spark orders
  NaN above every number, IEEE does not).

A batch is decoded lazily (:meth:`DecodedFilter.select`): the cheapest
condition's columns first, each later condition's columns only at the rows
the ones before kept, and the query's other columns only at the rows that
pass, so a selective filter spares the decoding of the rows it drops.  The
conditions on one column (a range's bounds) are tested together before the
rows are narrowed, and an ``IS NOT NULL`` another condition implies (Spark
adds one beside each comparison) is not tested, or it would decode its column
at every row first.

A ``DATE`` column of the binary SerDe (the 8-byte big-endian milliseconds of
the day's midnight UTC) is compared before it is decoded (:class:`StoredDates`):
its stored cells read as 64-bit integers against the literal's bounds in
milliseconds, which is exact because the decoded day is the floor of the
milliseconds over a day.  A batch holding a cell that would not decode (another
width, a day out of range) is decoded and compared as before, so a bad cell
still fails the read.

A filter taken here is handled: Spark does not check it again, so an
aggregate over the filtered rows can be computed by the tasks
(:mod:`connector.worker.task_aggregates`).  ``regionscan.pushdown.decoded=false``
leaves these filters to Spark.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Callable, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .disjunction import tree_columns
from .pushdown import PushdownResult, describe_filter
from .stored_dates import STORED_DATE_ROWS, StoredDates, StoredForms, stored_keep

__all__ = ["Column", "Literal", "Remainder", "Compare", "DecodedFilter", "take_decoded", "remainder",
           "valid_divisor"]

COMPARISONS = ("=", "<>", "<=>", "<", "<=", ">", ">=")
_KERNELS = {"=": pc.equal, "<>": pc.not_equal, "<": pc.less, "<=": pc.less_equal, ">": pc.greater,
            ">=": pc.greater_equal}
_LEAVES = {"EqualTo": "=", "EqualNullSafe": "<=>", "GreaterThan": ">", "GreaterThanOrEqual": ">=",
           "LessThan": "<", "LessThanOrEqual": "<="}
_STRING_TESTS = {"StringStartsWith": pc.starts_with, "StringEndsWith": pc.ends_with,
                 "StringContains": pc.match_substring}
_LONG_MIN = -(1 << 63)


def remainder(values: pa.Array, k: int) -> pa.Array:
    """``values % k`` as Java and Spark compute it for integers, ``k >= 1``: truncated, the sign
    of the dividend (``-7 % 3 == -1``); null stays null.  (``v % -k`` equals ``v % k``.)"""
    numbers = pc.fill_null(values, 0).to_numpy(zero_copy_only=False)
    info = np.iinfo(numbers.dtype)
    if k > -int(info.min):
        return values  # every value is smaller than k in magnitude
    # k = 2^(bits-1) (-128 % 128 == 0 for a TINYINT) fits only a wider type
    wide = numbers if k <= info.max else numbers.astype(np.int64)
    out = np.fmod(wide, k).astype(numbers.dtype)
    return pa.array(out, type=values.type, mask=values.is_null().to_numpy(zero_copy_only=False)
                    if values.null_count else None)


def valid_divisor(k: Any) -> bool:
    """Whether ``% k`` is a remainder evaluated here: a non-zero BIGINT other than its minimum
    (whose magnitude no BIGINT holds)."""
    return isinstance(k, int) and not isinstance(k, bool) and k != 0 and _LONG_MIN < k < -_LONG_MIN


# -- expressions --------------------------------------------------------------


@dataclass(frozen=True)
class Column:
    """A column of the row, by name."""

    name: str

    def describe(self) -> str:
        """SQL text."""
        return self.name


@dataclass(frozen=True)
class Literal:
    """A constant (a Python value as pyspark's filters carry them; None is SQL's NULL)."""

    value: Any

    def describe(self) -> str:
        """SQL text."""
        return "NULL" if self.value is None else repr(self.value)


@dataclass(frozen=True)
class Remainder:
    """``operand % divisor`` of integers, Java's remainder; ``divisor`` a non-zero BIGINT other
    than its minimum (whose magnitude no BIGINT holds)."""

    operand: Any
    divisor: int

    def describe(self) -> str:
        """SQL text."""
        return f"({_describe(self.operand)} % {self.divisor})"


def _describe(e: Any) -> str:
    return e.describe()


def expression_columns(e: Any) -> set[str]:
    """The (lower-case) column names an expression reads."""
    if isinstance(e, Column):
        return {e.name.lower()}
    if isinstance(e, Remainder):
        return expression_columns(e.operand)
    return set()


@dataclass(frozen=True, eq=False)
class Compare:
    """``left op right`` over expressions, ``op`` one of :data:`COMPARISONS`: a filter with no
    pyspark filter class (pyspark's filters compare a column with a literal only)."""

    op: str
    left: Any
    right: Any

    def describe(self) -> str:
        """SQL text."""
        return f"{_describe(self.left)} {self.op} {_describe(self.right)}"

    def columns(self) -> set[str]:
        """The (lower-case) column names both sides read."""
        return expression_columns(self.left) | expression_columns(self.right)


# -- what can be evaluated exactly ---------------------------------------------

Types = Callable[[str], "pa.DataType | None"]
"""A column's Arrow type as Spark reads it, by (any-case) name; None when not a mapped column."""


def _kind(t: pa.DataType) -> str | None:
    """The comparison family of a column type; None for types left to Spark."""
    if pa.types.is_integer(t):
        return "int"
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "string"
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return "binary"
    if pa.types.is_boolean(t):
        return "bool"
    if pa.types.is_decimal(t):
        return "decimal"
    if pa.types.is_date32(t):
        return "date"
    if pa.types.is_timestamp(t):
        return "timestamp_tz" if t.tz else "timestamp"
    return None


def _literal_kind(value: Any) -> str | None:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int" if _LONG_MIN <= value < -_LONG_MIN else None
    if isinstance(value, str):
        return "string"
    if isinstance(value, (bytes, bytearray)):
        return "binary"
    if isinstance(value, dt.datetime):
        return "timestamp_tz" if value.tzinfo is not None else "timestamp"
    if isinstance(value, dt.date):
        return "date"
    if isinstance(value, Decimal):
        return "decimal" if value.is_finite() else None
    return None  # float: left to Spark


def _expression_kind(e: Any, types: Types) -> str | None:
    """The comparison family of an expression's value, or None when it is not evaluated here."""
    if isinstance(e, Column):
        t = types(e.name)
        return None if t is None else _kind(t)
    if isinstance(e, Literal):
        return _literal_kind(e.value)
    if isinstance(e, Remainder):
        return "int" if valid_divisor(e.divisor) and _expression_kind(e.operand, types) == "int" else None
    return None


def _comparable(a: str | None, b: str | None) -> bool:
    if a is None or b is None:
        return False
    return a == b or "null" in (a, b)


def evaluable(f: Any, types: Types) -> bool:
    """Whether ``f`` (a pyspark filter, a :class:`Compare`, or an And/Or tree of them) is
    evaluated here exactly."""
    kind = type(f).__name__
    if kind in ("And", "Or"):
        return all(evaluable(c, types) for c in f.children)
    if kind == "Not":
        return evaluable(f.child, types)
    if isinstance(f, Compare):
        if f.op not in COMPARISONS:
            return False
        return _comparable(_expression_kind(f.left, types), _expression_kind(f.right, types))
    attribute = getattr(f, "attribute", None)
    if not isinstance(attribute, tuple) or len(attribute) != 1:
        return False
    column = _expression_kind(Column(attribute[0]), types)
    if kind in ("IsNull", "IsNotNull"):
        t = types(attribute[0])
        return t is not None and not pa.types.is_nested(t)
    if kind in _LEAVES:
        return _comparable(column, _literal_kind(f.value))
    if kind == "In":
        return all(_comparable(column, _literal_kind(v)) for v in f.value)
    if kind in _STRING_TESTS:
        return column == "string" and isinstance(f.value, str)
    return False


# -- evaluation ---------------------------------------------------------------


Decode = Callable[[Any, Sequence[str]], list]
"""Decodes columns (by lower-case name) of a batch of stored rows, or of those rows taken at
some positions: one array per name."""

Sources = Callable[[Sequence[str]], "list[str] | None"]
"""The stored batch's columns besides ``key`` that decoding some columns (by lower-case name)
reads; None when any of them may be."""


class _Batch:
    """A batch's columns by lower-case name, with the types literals are cast to; ``at`` (None:
    every row) narrows them to the rows still passing.

    Columns come from ``decoded`` (decoded for every row: taken at ``at`` on first use) or,
    lazily, from the stored rows ``raw`` through ``decode``: at every row when the view is
    not narrowed, else from the stored rows taken at ``at`` (once per view), so a column a
    later condition or the output needs is decoded only at the rows still passing.
    """

    def __init__(self, decoded: dict[str, pa.Array], at: pa.Array | None = None, raw: Any = None,
                 decode: Decode | None = None, parent: "_Batch | None" = None, positions: pa.Array | None = None,
                 sources: Sources | None = None):
        self._all = decoded
        self.at = at
        self._raw = raw
        self._decode = decode
        self._parent = parent  # the wider view this one narrows, at ``positions`` of its rows
        self._positions = positions
        self._sources = sources
        self._taken: dict[str, pa.Array] = {}
        self._raw_at: dict[str, pa.Array] = {}  # stored columns taken at ``at``, by field name
        self._millis: dict[str, tuple | None] = {}  # stored dates as integers, at every row (top view)

    @classmethod
    def of(cls, batch: pa.RecordBatch) -> "_Batch":
        return cls({name.lower(): batch.column(i) for i, name in enumerate(batch.schema.names)})

    @classmethod
    def stored(cls, raw: Any, decode: Decode, sources: Sources | None = None) -> "_Batch":
        """A view of stored rows, each column decoded on first use (``sources``: which stored
        columns decoding some names reads, so a narrowed view takes only those)."""
        return cls({}, raw=raw, decode=decode, sources=sources)

    def narrowed(self, positions: pa.Array) -> "_Batch":
        """The rows at ``positions`` (indices into this view's rows)."""
        at = positions if self.at is None else self.at.take(positions)
        return _Batch(self._all, at, self._raw, self._decode, self, positions, self._sources)

    def _known(self, name: str) -> pa.Array | None:
        """The column at this view's rows if it is decoded here or in a wider view (taken), else None."""
        found = self._taken.get(name)
        if found is not None:
            return found
        if self.at is None:
            return self._all.get(name)
        wider = self._parent._known(name) if self._parent is not None else None
        if wider is None:
            base = self._all.get(name)
            if base is None:
                return None
            found = base.take(self.at)
        else:
            found = wider.take(self._positions)
        self._taken[name] = found
        return found

    def column(self, name: str) -> pa.Array:
        found = self._known(name)
        if found is not None:
            return found
        self.decode([name])
        return self._known(name)

    def decode(self, names: Sequence[str]) -> None:
        """Decode the columns ``names`` not known yet at this view's rows, in one pass: at
        every row, then taken, when this view keeps more than half of them (decoded values
        take faster than their stored bytes), else at this view's rows alone."""
        missing = [n for n in names if self._known(n) is None]
        if not missing:
            return
        if self.at is not None and self._raw is not None and len(self.at) * 2 > self._raw.num_rows:
            top = self
            while top._parent is not None:
                top = top._parent
            top.decode(missing)
            return
        if self.at is None:
            self._all.update(zip(missing, self._decode(self._raw, missing)))
            return
        self._taken.update(zip(missing, self._decode(self._stored_at(missing), missing)))

    def _stored_at(self, names: Sequence[str]) -> Any:
        """The stored rows at this view's rows, with the stored columns decoding ``names`` reads
        (every column when that is not known): each taken once per view."""
        schema = self._raw.schema
        fields = self._sources(names) if self._sources is not None else None
        if fields is None:
            fields = schema.names
        else:
            fields = [f for f in ["key", *fields] if schema.get_field_index(f) >= 0]
        for f in fields:
            if f not in self._raw_at:
                self._raw_at[f] = self._raw.column(schema.get_field_index(f)).take(self.at)
        return pa.RecordBatch.from_arrays([self._raw_at[f] for f in fields],
                                          schema=pa.schema([schema.field(f) for f in fields]))

    def stored_millis(self, name: str, form: StoredDates) -> tuple[np.ndarray, np.ndarray] | None:
        """``(milliseconds, valid)`` of a stored date column at this view's rows (read once per
        batch, at every row, then indexed), or None when the batch holds a cell that would not
        decode, or the column was decoded already (its decoded values are compared instead)."""
        if self._raw is None or self._known(name) is not None:
            return None
        top = self
        while top._parent is not None:
            top = top._parent
        if name not in top._millis:
            index = top._raw.schema.get_field_index(form.field)
            top._millis[name] = None if index < 0 else form.millis(top._raw.column(index))
        found = top._millis[name]
        if found is None or self.at is None:
            return found
        at = self.at.to_numpy()
        return found[0][at], found[1][at]

    def value(self, e: Any, like: pa.DataType | None = None) -> Any:
        if isinstance(e, Column):
            return self.column(e.name.lower())
        if isinstance(e, Remainder):
            return remainder(self.value(e.operand), abs(e.divisor))
        return _node_scalar(e, e.value, like)


def _scalar(value: Any, like: pa.DataType | None) -> pa.Scalar:
    """The literal ``value`` as an Arrow scalar compared with a column of type ``like``, made
    once per literal and type (a filter compares the same literals in every batch)."""
    try:
        key = (type(value), value, str(value), like)
        hash(key)
    except TypeError:  # an unhashable literal: made each time
        return _make_scalar(value, like)
    found = _SCALARS.get(key)
    if found is None:
        if len(_SCALARS) >= 1024:
            _SCALARS.clear()
        found = _SCALARS[key] = _make_scalar(value, like)
    return found


_SCALARS: dict[tuple, pa.Scalar] = {}


def _node_scalar(node: Any, value: Any, like: pa.DataType | None) -> pa.Scalar:
    """:func:`_scalar` of a filter node's literal, remembered by the node: the memo of
    :func:`_scalar` hashes the type and the literal's text (about 15 us), a batch's test
    costs less than that per literal, and a node compares with one column type."""
    found = _NODE_SCALARS.get(id(node))
    if found is not None and found[0] is node and found[1] == like:
        return found[2]
    scalar = _scalar(value, like)
    if len(_NODE_SCALARS) >= 1024:
        _NODE_SCALARS.clear()
    _NODE_SCALARS[id(node)] = (node, like, scalar)  # the node kept: its id is not reused meanwhile
    return scalar


_NODE_SCALARS: dict[int, tuple] = {}


def _make_scalar(value: Any, like: pa.DataType | None) -> pa.Scalar:
    if value is None:
        return pa.scalar(None, like if like is not None else pa.null())
    if like is not None and (pa.types.is_timestamp(like) or pa.types.is_date32(like)
                             or pa.types.is_large_string(like) or pa.types.is_large_binary(like)):
        return pa.scalar(value, like)
    return pa.scalar(value)  # ints in their own width: compared with any integer column exactly


def _column_type(batch: _Batch, e: Any) -> pa.DataType | None:
    if isinstance(e, Column):
        return batch.column(e.name.lower()).type
    if isinstance(e, Remainder):
        return _column_type(batch, e.operand)
    return None


def _is_null_scalar(v: Any) -> bool:
    return isinstance(v, pa.Scalar) and not v.is_valid


def _compare(op: str, a: Any, b: Any) -> Any:
    # a NULL literal has no kernel against another (null, null); its answer needs none
    if _is_null_scalar(a) or _is_null_scalar(b):
        if op != "<=>":
            return pa.scalar(None, pa.bool_())
        other = b if _is_null_scalar(a) else a
        return pa.scalar(not other.is_valid) if isinstance(other, pa.Scalar) else pc.is_null(other)
    if op != "<=>":
        return _KERNELS[op](a, b)
    a_null, b_null = pc.is_null(a), pc.is_null(b)
    either = pc.or_(a_null, b_null)
    return pc.if_else(either, pc.and_(a_null, b_null), pc.fill_null(pc.equal(a, b), False))


def _in(values: pa.Array, choices: Sequence[Any]) -> Any:
    present = [v for v in choices if v is not None]
    null = pa.scalar(None, pa.bool_())
    if not present:
        found = pa.array(np.zeros(len(values), dtype=bool))
    elif pa.types.is_integer(values.type):
        # a literal outside the column's width matches nothing; compared as BIGINTs it cannot overflow
        found = pc.is_in(values.cast(pa.int64()), value_set=pa.array(present, pa.int64()))
    elif pa.types.is_decimal(values.type):
        # a literal the column's type cannot hold exactly (more digits, a finer scale) equals no value
        found = pc.is_in(values, value_set=pa.array([v for v in present if _fits(v, values.type)], values.type))
    else:
        found = pc.is_in(values, value_set=pa.array(present, values.type))
    # x IN (..): true when found; else null when x is null or the list holds a null; else false
    if len(present) < len(choices):
        found = pc.if_else(found, pa.scalar(True), null)
    return pc.if_else(pc.is_null(values), null, found)


def _fits(value: Decimal, t: pa.DataType) -> bool:
    """Whether the decimal type ``t`` holds ``value`` exactly (Arrow refuses a lossy rescale)."""
    try:
        pa.array([value], t)
    except (pa.ArrowInvalid, OverflowError):
        return False
    return True


def _evaluate(f: Any, batch: _Batch) -> Any:
    kind = type(f).__name__
    if kind == "And":
        out = _evaluate(f.children[0], batch)
        for c in f.children[1:]:
            out = pc.and_kleene(out, _evaluate(c, batch))
        return out
    if kind == "Or":
        out = _evaluate(f.children[0], batch)
        for c in f.children[1:]:
            out = pc.or_kleene(out, _evaluate(c, batch))
        return out
    if kind == "Not":
        return pc.invert(_evaluate(f.child, batch))
    if isinstance(f, Compare):
        like = _column_type(batch, f.left) or _column_type(batch, f.right)
        return _compare(f.op, batch.value(f.left, like), batch.value(f.right, like))
    column = batch.value(Column(f.attribute[0]))
    if kind == "IsNull":
        return pc.is_null(column)
    if kind == "IsNotNull":
        return pc.is_valid(column)
    if kind in _LEAVES:
        return _compare(_LEAVES[kind], column, _node_scalar(f, f.value, column.type))
    if kind == "In":
        return _in(column, list(f.value))
    return _STRING_TESTS[kind](column, pattern=f.value)


def _conjuncts(f: Any) -> list:
    """``f`` as the filters all of which a row must pass (a top-level AND taken apart)."""
    if type(f).__name__ == "And":
        return [c for child in f.children for c in _conjuncts(child)]
    return [f]


def _null_rejected(f: Any) -> set[str]:
    """The (lower-case) columns a null in which makes the conjunct ``f`` not true (null or
    false): a comparison other than ``<=>``, ``IN`` and the string tests.  An ``IS NOT NULL``
    of such a column is implied by ``f`` in a conjunction."""
    kind = type(f).__name__
    if isinstance(f, Compare):
        return f.columns() if f.op != "<=>" else set()
    if kind in _LEAVES and kind != "EqualNullSafe" or kind == "In" or kind in _STRING_TESTS:
        attribute = getattr(f, "attribute", None)
        if isinstance(attribute, tuple) and len(attribute) == 1:
            return {attribute[0].lower()}
    return set()


def _implied(f: Any, rejected: set[str]) -> bool:
    """Whether ``f`` is an ``IS NOT NULL`` of a column another conjunct already rejects nulls of."""
    if type(f).__name__ != "IsNotNull":
        return False
    attribute = getattr(f, "attribute", None)
    return isinstance(attribute, tuple) and len(attribute) == 1 and attribute[0].lower() in rejected


def _cost(f: Any) -> int:
    """A rank of what testing ``f`` costs per row: fixed-width comparisons, remainders and
    null tests, then comparisons and IN lists of any type, then substring tests (a scan of
    every value's bytes).  A null test decodes its column like a comparison does, and
    seldom drops a row (Spark adds one beside most comparisons), so it sorts after the
    other tests of its rank: its column is then decoded only at the rows they keep."""
    kind = type(f).__name__
    if kind in ("And", "Or"):
        return max(_cost(c) for c in f.children)
    if kind == "Not":
        return _cost(f.child)
    if kind in ("IsNull", "IsNotNull"):
        return 1
    if kind in _STRING_TESTS:
        return 3
    if kind == "In":
        return 2
    values = (f.left, f.right) if isinstance(f, Compare) else (getattr(f, "value", None),)
    return 2 if any(isinstance(v, (str, bytes)) or isinstance(getattr(v, "value", None), (str, bytes))
                    for v in values) else 1


class DecodedFilter:
    """The conjunction of filters evaluated on a task's decoded batches."""

    def __init__(self, filters: Sequence[Any]):
        self.filters = list(filters)
        names: set[str] = set()
        for f in self.filters:
            names |= tree_columns(f)
        self.columns = names
        # cheapest first, each tested only on the rows the ones before it passed (a WHERE
        # keeps a row only when every conjunct is true, so a row one drops needs no more);
        # an IS NOT NULL another conjunct implies is not tested: a null there fails that one
        conjuncts = [c for f in self.filters for c in _conjuncts(f)]
        rejected: set[str] = set()
        for c in conjuncts:
            rejected |= _null_rejected(c)
        kept = [c for c in conjuncts if not _implied(c, rejected)]
        first: dict[frozenset, int] = {}
        for i, c in enumerate(kept):
            first.setdefault(frozenset(tree_columns(c)), i)
        self._order = sorted(kept, key=lambda c: (_cost(c), type(c).__name__ in ("IsNull", "IsNotNull"),
                                                  first[frozenset(tree_columns(c))]))
        # adjacent tests of the same columns (a range's two bounds) are tested together, then
        # the rows narrowed once: a comparison costs less than narrowing between the two
        self._groups: list[list] = []
        for c in self._order:
            if self._groups and tree_columns(self._groups[-1][0]) == tree_columns(c):
                self._groups[-1].append(c)
            else:
                self._groups.append([c])

    def describe(self) -> list[str]:
        """Each filter as SQL text."""
        return [describe_filter(f) for f in self.filters]

    def _passing(self, view: _Batch, rows: int, stored: StoredForms | None = None,
                 counts: dict | None = None) -> _Batch | None:
        """The view narrowed to the rows every filter keeps; None when no row passes.  A group of
        date comparisons whose columns have a stored form (``stored``: with date literals, or two
        such columns with each other) is tested on the stored integers when the batch's cells
        all decode (``counts["stored_date_rows"]`` adds the rows
        tested so, none of whose dates was decoded for the test)."""
        passing = rows
        for group in self._groups:
            found = stored_keep(group, stored, view.stored_millis)
            if found is not None:
                keep, tested = found
                if counts is not None:
                    counts[STORED_DATE_ROWS] = counts.get(STORED_DATE_ROWS, 0) + tested
                positions = np.flatnonzero(keep)
                if len(positions) == passing:
                    continue
                if not len(positions):
                    return None
                view = view.narrowed(pa.array(positions))
                passing = len(positions)
                continue
            value = None
            for f in group:
                part = _evaluate(f, view)
                if isinstance(part, pa.Scalar):  # literals only: the same answer for every row
                    if part.as_py() is True:
                        continue
                    return None
                if part.null_count:
                    part = pc.fill_null(part, False)  # a null drops the row, as false does
                value = part if value is None else pc.and_(value, part)
            if value is None:
                continue
            kept = getattr(value, "true_count", None)  # an array's popcount: no positions listed
            if kept == passing:  # when every row or none passes
                continue
            if kept == 0:
                return None
            positions = pc.indices_nonzero(value)
            if len(positions) == passing:
                continue
            if not len(positions):
                return None
            view = view.narrowed(positions)
            passing = len(positions)
        return view

    def mask(self, batch: pa.RecordBatch) -> pa.Array:
        """True where every filter is true (a null result drops the row, as in a WHERE)."""
        rows = batch.num_rows
        view = self._passing(_Batch.of(batch), rows)
        if view is None:
            return pa.array(np.zeros(rows, dtype=bool))
        if view.at is None:
            return pa.array(np.ones(rows, dtype=bool))
        keep = np.zeros(rows, dtype=bool)
        keep[view.at.to_numpy()] = True
        return pa.array(keep)

    def select(self, raw: Any, rows: int, names: Sequence[str], decode: Decode,
               sources: Sources | None = None, stored: StoredForms | None = None,
               counts: dict | None = None) -> tuple[list[pa.Array], int]:
        """The columns ``names`` at the rows of the stored batch ``raw`` (``rows`` of them) that pass,
        and how many pass; ``decode(stored rows, lower-case names)`` decodes columns, and
        ``sources(lower-case names)`` names the stored columns that reads (None: unknown), so
        only those (and ``key``) are taken at the rows still passing.

        Each condition decodes its columns at the rows the ones before it kept.  The output's
        other columns are decoded at the passing rows alone when few pass (taking a row's
        stored bytes costs about what decoding it does, so below half of the rows it pays);
        otherwise at every row, then taken (fixed-width values take faster than their bytes).
        ``stored(lower-case name)`` gives a column's :class:`StoredDates`, whose date
        comparisons are tested before any decoding (counted in ``counts``, see :meth:`_passing`).
        """
        view = self._passing(_Batch.stored(raw, decode, sources), rows, stored, counts)
        if view is None:
            return [], 0
        passing = rows if view.at is None else len(view.at)
        lower = [name.lower() for name in names]
        view.decode(lower)
        return [view.column(n) for n in lower], passing


def take_decoded(result: PushdownResult, types: Types, describe: Callable[[Any], str] = describe_filter) -> None:
    """Move the residual filters of ``result`` evaluated here exactly into ``result.decoded``
    (handled: Spark does not check them again); their engine narrowing stays."""
    taken = [f for f in result.residual if evaluable(f, types)]
    if not taken:
        return
    ids = {id(f) for f in taken}
    texts = {describe(f) + ":" for f in taken}
    result.residual = [f for f in result.residual if id(f) not in ids]
    result.handled.extend(taken)
    result.decoded.extend(taken)
    here = "evaluated by the engine worker on the decoded rows"
    notes = []
    for note in result.notes:
        if any(note.startswith(t) for t in texts):
            note = re.sub(r"left for Spark( \(.*\))?$", here, note).replace("Spark checks it again", here)
        notes.append(note)
    result.notes = notes
