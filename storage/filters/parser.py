"""The HBase filter language: text -> Filter.

Grammar (keywords are case-insensitive; filter names are not)::

    filter     := or_expr
    or_expr    := and_expr ("OR" and_expr)*
    and_expr   := unary ("AND" unary)*
    unary      := "SKIP" unary | "WHILE" unary | "(" or_expr ")" | call
    call       := NAME "(" [argument ("," argument)*] ")"
    argument   := 'string' | integer | true | false | < | <= | = | != | >= | > | NO_OP

Strings are single-quoted, ``''`` standing for one quote; comparators are
strings with a prefix (``'binary:abc'``).  As in HBase, SKIP and WHILE bind
tighter than AND, and AND tighter than OR.  ``a AND b AND c`` becomes one
FilterList of three; a parenthesized group stays a nested list, so
``repr(f)`` parses back to a filter equal to ``f``.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

from ..errors import InvalidArgument, clip
from ._text import to_bytes
from .base import MAX_FILTER_DEPTH, Filter, check_depth
from .cell_filters import (
    ColumnPrefixFilter,
    FirstKeyOnlyFilter,
    KeyOnlyFilter,
    QualifierFilter,
    TimestampsFilter,
    ValueFilter,
)
from .column_value import SingleColumnValueFilter
from .column_value_cells import ColumnValueFilter
from .comparators import Comparator, comparator_from_string
from .compare import CompareOperator
from .filter_list import FilterList
from .page import PageFilter
from .row_filters import MultiRowRangeFilter, PrefixFilter, RowFilter, RowRange
from .column_filters import ColumnPaginationFilter, ColumnRangeFilter, FamilyFilter, MultipleColumnPrefixFilter
from .column_value_exclude import SingleColumnValueExcludeFilter
from .inclusive_stop import InclusiveStopFilter
from .wrappers import SkipFilter, WhileMatchFilter

__all__ = ["FilterSyntaxError", "parse_filter_string", "coerce_filter", "FILTER_NAMES"]


class FilterSyntaxError(InvalidArgument):
    """A filter string that does not parse; the one-line message names the
    problem, its position and the text around it.

    ``text`` is the filter string, ``position`` the 0-based character index
    of the problem, ``reason`` the problem alone, ``hint`` what would have
    been accepted (or "") and ``picture`` two lines for a terminal: the text
    around the spot and a caret under it.
    """

    def __init__(self, reason: str, text: str, position: int, hint: str = ""):
        self.reason = reason
        self.text = text
        self.position = position
        self.hint = hint
        line_start = text.rfind("\n", 0, position) + 1
        line_end = text.find("\n", position)
        line_end = line_end if line_end >= 0 else len(text)
        # The picture shows a window around the spot, so a long filter
        # string never turns into a long message.
        lo = max(line_start, position - _CONTEXT)
        hi = min(line_end, position + _CONTEXT)
        line = ("..." if lo > line_start else "") + text[lo:hi] + ("..." if hi < line_end else "")
        caret = " " * (position - lo + (3 if lo > line_start else 0)) + "^"
        more = f"; {hint}" if hint else ""
        # a lone surrogate in the text would make the message unprintable
        line = line.encode("utf-8", "backslashreplace").decode("utf-8")
        self.picture = f"{line}\n{caret}"
        super().__init__(f'{clip(reason)} at position {position} in "{line}"{more}')


# --- tokens -------------------------------------------------------------------

class _Token(NamedTuple):
    kind: str  # "(", ")", ",", "string", "int", "op", "name", "end"
    value: Any
    pos: int


_CONTEXT = 100  # characters shown either side of an error's position
_DIGITS = "0123456789"  # str.isdigit() also accepts "²" and other digits int() refuses
_INT_MIN, _INT_MAX = -(2**63), 2**63 - 1  # integer arguments are Java longs in HBase
_MAX_INT_CHARS = 20  # "-9223372036854775808": longer literals are refused unread
_OPERATOR_CHARS = "<>=!"
_OPERATORS = {op.symbol: op for op in CompareOperator if op is not CompareOperator.NO_OP}
_KEYWORDS = {"AND", "OR", "SKIP", "WHILE"}


def _tokenize(text: str) -> list[_Token]:
    tokens = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c.isspace():
            i += 1
        elif c in "(),":
            tokens.append(_Token(c, c, i))
            i += 1
        elif c == "'":
            start = i
            parts = []
            i += 1
            while True:
                end = text.find("'", i)
                if end < 0:
                    raise FilterSyntaxError("unterminated string", text, start)
                parts.append(text[i:end])
                if text.startswith("''", end):  # a doubled quote stands for one
                    parts.append("'")
                    i = end + 2
                else:
                    i = end + 1
                    break
            tokens.append(_Token("string", "".join(parts), start))
        elif c in _OPERATOR_CHARS:
            start = i
            while i < n and text[i] in _OPERATOR_CHARS:
                i += 1
            symbol = text[start:i]
            if symbol not in _OPERATORS:
                raise FilterSyntaxError(
                    f"unknown compare operator {symbol!r} (expected one of {', '.join(_OPERATORS)})", text, start
                )
            tokens.append(_Token("op", _OPERATORS[symbol], start))
        elif c in _DIGITS or (c == "-" and text[i + 1 : i + 2] in tuple(_DIGITS)):
            start = i
            i += 1
            while i < n and text[i] in _DIGITS:
                i += 1
            literal = text[start:i].lstrip("-").lstrip("0") or "0"
            value = int(text[start:i]) if len(literal) < _MAX_INT_CHARS else None
            if value is None or not _INT_MIN <= value <= _INT_MAX:
                raise FilterSyntaxError("integer out of the signed 64-bit range", text, start)
            tokens.append(_Token("int", value, start))
        elif c.isalpha() or c == "_":
            start = i
            while i < n and (text[i].isalnum() or text[i] == "_"):
                i += 1
            tokens.append(_Token("name", text[start:i], start))
        else:
            raise FilterSyntaxError(f"unexpected character {ascii(c)}", text, i)
    tokens.append(_Token("end", None, n))
    return tokens


def _describe(token: _Token) -> str:
    if token.kind == "end":
        return "the end of the filter"
    if token.kind == "string":
        return "a string"
    if token.kind == "op":
        return repr(token.value.symbol)
    return repr(str(token.value))


# --- filter constructors from arguments --------------------------------------

class _Args:
    """The arguments of one call, with typed accessors that report positions."""

    def __init__(self, parser: "_Parser", name: _Token, args: list[_Token], close: _Token):
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


def _compare_filter(cls: type) -> Callable[[_Args], Filter]:
    def build(a: _Args) -> Filter:
        a.count(2)
        return cls(a.operator(0), a.comparator(1))

    return build


def _single_column_value(a: _Args) -> Filter:
    n = a.count(4, 6)
    extra = (a.boolean(4), a.boolean(5)) if n == 6 else ()
    return SingleColumnValueFilter(a.string(0), a.string(1), a.operator(2), a.comparator(3), *extra)


def _column_value(a: _Args) -> Filter:
    a.count(4)
    return ColumnValueFilter(a.string(0), a.string(1), a.operator(2), a.comparator(3))


def _multi_row_range(a: _Args) -> Filter:
    if len(a.args) % 4:
        raise a.fail(
            f"MultiRowRangeFilter takes groups of 4 arguments (start, start_inclusive, stop, stop_inclusive), got {len(a.args)}",
            a.close,
        )
    return MultiRowRangeFilter(
        RowRange(a.string(i), a.boolean(i + 1), a.string(i + 2), a.boolean(i + 3)) for i in range(0, len(a.args), 4)
    )


def _key_only(a: _Args) -> Filter:
    return KeyOnlyFilter(a.boolean(0)) if a.count(0, 1) else KeyOnlyFilter()


def _first_key_only(a: _Args) -> Filter:
    a.count(0)
    return FirstKeyOnlyFilter()


def _prefix(cls: type) -> Callable[[_Args], Filter]:
    def build(a: _Args) -> Filter:
        a.count(1)
        return cls(a.string(0))

    return build


def _page(a: _Args) -> Filter:
    a.count(1)
    return PageFilter(a.integer(0))


def _timestamps(a: _Args) -> Filter:
    return TimestampsFilter(a.integer(i) for i in range(len(a.args)))


def _single_column_value_exclude(a: _Args) -> Filter:
    n = a.count(4, 6)
    extra = (a.boolean(4), a.boolean(5)) if n == 6 else ()
    return SingleColumnValueExcludeFilter(a.string(0), a.string(1), a.operator(2), a.comparator(3), *extra)


def _column_pagination(a: _Args) -> Filter:
    a.count(2)
    return ColumnPaginationFilter(a.integer(0), a.integer(1))


def _column_range(a: _Args) -> Filter:
    a.count(4)
    return ColumnRangeFilter(a.string(0), a.boolean(1), a.string(2), a.boolean(3))


def _multiple_column_prefix(a: _Args) -> Filter:
    return MultipleColumnPrefixFilter(a.string(i) for i in range(len(a.args)))


_BUILDERS: dict[str, Callable[[_Args], Filter]] = {
    "ColumnPaginationFilter": _column_pagination,
    "ColumnRangeFilter": _column_range,
    "ColumnValueFilter": _column_value,
    "FamilyFilter": _compare_filter(FamilyFilter),
    "InclusiveStopFilter": _prefix(InclusiveStopFilter),
    "MultipleColumnPrefixFilter": _multiple_column_prefix,
    "SingleColumnValueExcludeFilter": _single_column_value_exclude,
    "ColumnPrefixFilter": _prefix(ColumnPrefixFilter),
    "FirstKeyOnlyFilter": _first_key_only,
    "KeyOnlyFilter": _key_only,
    "MultiRowRangeFilter": _multi_row_range,
    "PageFilter": _page,
    "PrefixFilter": _prefix(PrefixFilter),
    "QualifierFilter": _compare_filter(QualifierFilter),
    "RowFilter": _compare_filter(RowFilter),
    "SingleColumnValueFilter": _single_column_value,
    "TimestampsFilter": _timestamps,
    "ValueFilter": _compare_filter(ValueFilter),
}

FILTER_NAMES: tuple[str, ...] = tuple(sorted(_BUILDERS))
"""The filter names the language knows."""


# --- the parser -----------------------------------------------------------------

class _Parser:
    def __init__(self, text: str):
        self.text = text
        self.tokens = _tokenize(text)
        self.i = 0
        self.depth = 0  # open parentheses and SKIP/WHILE around the current spot

    def nest(self, tok: _Token) -> None:
        """Enter one level; refuse nesting past MAX_FILTER_DEPTH before recursing."""
        self.depth += 1
        if self.depth > MAX_FILTER_DEPTH:
            raise FilterSyntaxError(f"filter nested more than {MAX_FILTER_DEPTH} levels deep", self.text, tok.pos)

    def peek(self) -> _Token:
        return self.tokens[self.i]

    def take(self) -> _Token:
        tok = self.tokens[self.i]
        self.i += 1
        return tok

    def keyword(self, word: str) -> bool:
        tok = self.peek()
        return tok.kind == "name" and tok.value.upper() == word

    def expect(self, kind: str, what: str) -> _Token:
        tok = self.peek()
        if tok.kind != kind:
            raise FilterSyntaxError(f"expected {what}, got {_describe(tok)}", self.text, tok.pos)
        return self.take()

    def parse(self) -> Filter:
        result = self.or_expr()
        tok = self.peek()
        if tok.kind != "end":
            raise FilterSyntaxError(f"unexpected {_describe(tok)} after a complete filter", self.text, tok.pos)
        return result

    def build(self, tok: _Token, cls: type, *args: Any) -> Filter:
        """``cls(*args)``, its InvalidArgument (nesting too deep) pointing at ``tok``."""
        try:
            return cls(*args)
        except InvalidArgument as exc:
            raise FilterSyntaxError(str(exc), self.text, tok.pos) from None

    def or_expr(self) -> Filter:
        start = self.peek()
        parts = [self.and_expr()]
        while self.keyword("OR"):
            self.take()
            parts.append(self.and_expr())
        return parts[0] if len(parts) == 1 else self.build(start, FilterList, FilterList.MUST_PASS_ONE, parts)

    def and_expr(self) -> Filter:
        start = self.peek()
        parts = [self.unary()]
        while self.keyword("AND"):
            self.take()
            parts.append(self.unary())
        return parts[0] if len(parts) == 1 else self.build(start, FilterList, FilterList.MUST_PASS_ALL, parts)

    def unary(self) -> Filter:
        tok = self.peek()
        if self.keyword("SKIP") or self.keyword("WHILE"):
            self.take()
            self.nest(tok)
            wrapper = SkipFilter if tok.value.upper() == "SKIP" else WhileMatchFilter
            inner = self.unary()
            self.depth -= 1
            return self.build(tok, wrapper, inner)
        if tok.kind == "(":
            self.take()
            self.nest(tok)
            inner = self.or_expr()
            self.expect(")", "')'")
            self.depth -= 1
            return inner
        if tok.kind != "name" or tok.value.upper() in _KEYWORDS:
            raise FilterSyntaxError(f"expected a filter name or '(', got {_describe(tok)}", self.text, tok.pos)
        return self.call()

    def call(self) -> Filter:
        name = self.take()
        builder = _BUILDERS.get(name.value)
        if builder is None:
            raise FilterSyntaxError(
                f"unknown filter {name.value!r}", self.text, name.pos, f"known filters: {', '.join(FILTER_NAMES)}"
            )
        self.expect("(", f"'(' after {name.value}")
        args: list[_Token] = []
        if self.peek().kind != ")":
            while True:
                tok = self.peek()
                if tok.kind not in ("string", "int", "op", "name"):
                    raise FilterSyntaxError(f"expected an argument of {name.value}, got {_describe(tok)}", self.text, tok.pos)
                args.append(self.take())
                if self.peek().kind != ",":
                    break
                self.take()
        tok = self.peek()
        if tok.kind != ")":
            raise FilterSyntaxError(f"expected ',' or ')' in the arguments of {name.value}, got {_describe(tok)}", self.text, tok.pos)
        close = self.take()
        a = _Args(self, name, args, close)
        try:
            return builder(a)
        except FilterSyntaxError:
            raise
        except (InvalidArgument, ValueError, OverflowError, TypeError) as exc:
            # a filter class refusing its arguments (its own checks, or a numeric
            # conversion they missed) is reported at the call, never as a foreign error
            raise FilterSyntaxError(str(exc), self.text, name.pos) from None


def parse_filter_string(text: str | bytes) -> Filter:
    """Parse HBase filter-language ``text`` into a :class:`Filter`.

    Raises :class:`FilterSyntaxError` (an InvalidArgument) for a malformed
    string; its message names the problem and points at it.
    """
    if isinstance(text, (bytes, bytearray, memoryview)):
        text = bytes(text).decode("utf-8", "surrogateescape")
    if not isinstance(text, str):
        raise InvalidArgument(f"a filter string must be str or bytes, got {type(text).__name__}")
    return _Parser(text).parse()


def coerce_filter(filter: Filter | str | bytes | None) -> Filter | None:
    """Accept what ``Table.scan(filter=...)`` takes: a Filter, a filter string, or None."""
    if filter is None:
        return filter
    if isinstance(filter, Filter):
        check_depth(filter)  # a list may have grown deeper after it was built
        return filter
    if isinstance(filter, (str, bytes, bytearray, memoryview)):
        return parse_filter_string(filter)
    raise InvalidArgument(
        f"filter must be a Filter, a filter string or None, got {type(filter).__name__} {clip(repr(filter), 60)}"
    )
