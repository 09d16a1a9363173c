"""Filter constructors from the filter language's call arguments: one builder per filter name."""

from __future__ import annotations

from typing import Any, Callable

from ..errors import InvalidArgument
from ._lexer import FilterSyntaxError, Token as _Token, describe as _describe
from ._text import to_bytes
from .base import Filter
from .cell_filters import (
    ColumnPrefixFilter,
    FirstKeyOnlyFilter,
    KeyOnlyFilter,
    QualifierFilter,
    TimestampsFilter,
    ValueFilter,
)
from .column_count import ColumnCountGetFilter, ColumnPaginationFilter
from .column_filters import ColumnRangeFilter, FamilyFilter, MultipleColumnPrefixFilter
from .column_value import SingleColumnValueFilter
from .column_value_cells import ColumnValueFilter
from .column_value_exclude import SingleColumnValueExcludeFilter
from .comparators import Comparator, comparator_from_string
from .compare import CompareOperator
from .dependent_column import DependentColumnFilter
from .fuzzy_row import FuzzyRowFilter
from .inclusive_stop import InclusiveStopFilter
from .page import PageFilter
from .random_row import RandomRowFilter
from .row_filters import MultiRowRangeFilter, PrefixFilter, RowFilter, RowRange

__all__ = ["Args", "BUILDERS", "FILTER_NAMES"]


class Args:
    """The arguments of one call, with typed accessors that report positions."""

    def __init__(self, parser: Any, name: _Token, args: list[_Token], close: _Token):
        self.parser, self.name, self.args, self.close = parser, name, args, close

    def fail(self, reason: str, token: _Token | None = None) -> FilterSyntaxError:
        return FilterSyntaxError(reason, self.parser.text, (token or self.name).pos)

    def count(self, *allowed: int) -> int:
        n = len(self.args)
        if n not in allowed:
            want = " or ".join(str(a) for a in allowed)
            where = self.args[max(allowed)] if n > max(allowed) else self.close
            raise self.fail(f"{self.name.value} takes {want} argument{'s' if want != '1' else ''}, got {n}", where)
        return n

    def string(self, i: int) -> bytes:
        tok = self.args[i]
        if tok.kind != "string":
            raise self.fail(f"{self.name.value} argument {i + 1} must be a quoted string, got {_describe(tok)}", tok)
        try:
            return to_bytes(tok.value, "string")
        except InvalidArgument as exc:
            raise self.fail(str(exc), tok) from None

    def integer(self, i: int) -> int:
        tok = self.args[i]
        if tok.kind != "int":
            raise self.fail(f"{self.name.value} argument {i + 1} must be an integer, got {_describe(tok)}", tok)
        return tok.value

    def number(self, i: int) -> float:
        tok = self.args[i]
        if tok.kind not in ("int", "float"):
            raise self.fail(f"{self.name.value} argument {i + 1} must be a number, got {_describe(tok)}", tok)
        return tok.value

    def value(self, i: int) -> Any:
        """Argument ``i`` as a Python value: bytes, int, float, bool or CompareOperator."""
        tok = self.args[i]
        if tok.kind == "string":
            return self.string(i)
        if tok.kind in ("int", "float", "op"):
            return tok.value
        if tok.kind == "name" and tok.value.lower() in ("true", "false"):
            return tok.value.lower() == "true"
        if tok.kind == "name" and tok.value.upper() == "NO_OP":
            return CompareOperator.NO_OP
        raise self.fail(
            f"{self.name.value} argument {i + 1} must be a quoted string, a number, true, false or a compare "
            f"operator, got {_describe(tok)}",
            tok,
        )

    def boolean(self, i: int) -> bool:
        tok = self.args[i]
        if tok.kind == "name" and tok.value.lower() in ("true", "false"):
            return tok.value.lower() == "true"
        raise self.fail(f"{self.name.value} argument {i + 1} must be true or false, got {_describe(tok)}", tok)

    def operator(self, i: int) -> CompareOperator:
        tok = self.args[i]
        if tok.kind == "op":
            return tok.value
        if tok.kind == "name" and tok.value.upper() == "NO_OP":
            return CompareOperator.NO_OP
        raise self.fail(
            f"{self.name.value} argument {i + 1} must be a compare operator (<, <=, =, !=, >=, >), got {_describe(tok)}",
            tok,
        )

    def comparator(self, i: int) -> Comparator:
        tok = self.args[i]
        raw = self.string(i)
        try:
            return comparator_from_string(raw)
        except InvalidArgument as exc:
            raise self.fail(str(exc), tok) from None


def _compare_filter(cls: type) -> Callable[[Args], Filter]:
    def build(a: Args) -> Filter:
        a.count(2)
        return cls(a.operator(0), a.comparator(1))

    return build


def _single_column_value(a: Args) -> Filter:
    n = a.count(4, 6)
    extra = (a.boolean(4), a.boolean(5)) if n == 6 else ()
    return SingleColumnValueFilter(a.string(0), a.string(1), a.operator(2), a.comparator(3), *extra)


def _column_value(a: Args) -> Filter:
    a.count(4)
    return ColumnValueFilter(a.string(0), a.string(1), a.operator(2), a.comparator(3))


def _multi_row_range(a: Args) -> Filter:
    if len(a.args) % 4:
        raise a.fail(
            f"MultiRowRangeFilter takes groups of 4 arguments (start, start_inclusive, stop, stop_inclusive), got {len(a.args)}",
            a.close,
        )
    return MultiRowRangeFilter(
        RowRange(a.string(i), a.boolean(i + 1), a.string(i + 2), a.boolean(i + 3)) for i in range(0, len(a.args), 4)
    )


def _key_only(a: Args) -> Filter:
    return KeyOnlyFilter(a.boolean(0)) if a.count(0, 1) else KeyOnlyFilter()


def _first_key_only(a: Args) -> Filter:
    a.count(0)
    return FirstKeyOnlyFilter()


def _prefix(cls: type) -> Callable[[Args], Filter]:
    def build(a: Args) -> Filter:
        a.count(1)
        return cls(a.string(0))

    return build


def _page(a: Args) -> Filter:
    a.count(1)
    return PageFilter(a.integer(0))


def _timestamps(a: Args) -> Filter:
    return TimestampsFilter(a.integer(i) for i in range(len(a.args)))


def _single_column_value_exclude(a: Args) -> Filter:
    n = a.count(4, 6)
    extra = (a.boolean(4), a.boolean(5)) if n == 6 else ()
    return SingleColumnValueExcludeFilter(a.string(0), a.string(1), a.operator(2), a.comparator(3), *extra)


def _column_pagination(a: Args) -> Filter:
    a.count(2)
    offset = a.string(1) if a.args[1].kind == "string" else a.integer(1)  # an int, or a column offset
    return ColumnPaginationFilter(a.integer(0), offset)


def _column_count_get(a: Args) -> Filter:
    a.count(1)
    return ColumnCountGetFilter(a.integer(0))


def _dependent_column(a: Args) -> Filter:
    n = a.count(2, 3, 5)
    drop = a.boolean(2) if n >= 3 else False
    extra = (a.operator(3), a.comparator(4)) if n == 5 else ()
    return DependentColumnFilter(a.string(0), a.string(1), drop, *extra)


def _fuzzy_row(a: Args) -> Filter:
    if not a.args or len(a.args) % 2:
        raise a.fail(f"FuzzyRowFilter takes pairs of arguments (fuzzy_key, mask), got {len(a.args)}", a.close)
    return FuzzyRowFilter((a.string(i), a.string(i + 1)) for i in range(0, len(a.args), 2))


def _random_row(a: Args) -> Filter:
    n = a.count(1, 2)
    return RandomRowFilter(a.number(0), a.integer(1) if n == 2 else None)


def _column_range(a: Args) -> Filter:
    a.count(4)
    return ColumnRangeFilter(a.string(0), a.boolean(1), a.string(2), a.boolean(3))


def _multiple_column_prefix(a: Args) -> Filter:
    return MultipleColumnPrefixFilter(a.string(i) for i in range(len(a.args)))


BUILDERS: dict[str, Callable[[Args], Filter]] = {
    "ColumnCountGetFilter": _column_count_get,
    "ColumnPaginationFilter": _column_pagination,
    "ColumnPrefixFilter": _prefix(ColumnPrefixFilter),
    "ColumnRangeFilter": _column_range,
    "ColumnValueFilter": _column_value,
    "DependentColumnFilter": _dependent_column,
    "FamilyFilter": _compare_filter(FamilyFilter),
    "FirstKeyOnlyFilter": _first_key_only,
    "FuzzyRowFilter": _fuzzy_row,
    "InclusiveStopFilter": _prefix(InclusiveStopFilter),
    "KeyOnlyFilter": _key_only,
    "MultiRowRangeFilter": _multi_row_range,
    "MultipleColumnPrefixFilter": _multiple_column_prefix,
    "PageFilter": _page,
    "PrefixFilter": _prefix(PrefixFilter),
    "QualifierFilter": _compare_filter(QualifierFilter),
    "RandomRowFilter": _random_row,
    "RowFilter": _compare_filter(RowFilter),
    "SingleColumnValueExcludeFilter": _single_column_value_exclude,
    "SingleColumnValueFilter": _single_column_value,
    "TimestampsFilter": _timestamps,
    "ValueFilter": _compare_filter(ValueFilter),
}

FILTER_NAMES: tuple[str, ...] = tuple(sorted(BUILDERS))
"""The built-in filter names the language knows (user filters: :mod:`storage.filters.registry`)."""
