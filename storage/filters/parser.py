"""The HBase filter language: text -> Filter.

Grammar (keywords are case-insensitive; filter names are not)::

    filter     := or_expr
    or_expr    := and_expr ("OR" and_expr)*
    and_expr   := unary ("AND" unary)*
    unary      := "SKIP" unary | "WHILE" unary | "(" or_expr ")" | call
    call       := NAME "(" [argument ("," argument)*] ")"
    argument   := 'string' | integer | decimal | true | false | < | <= | = | != | >= | > | NO_OP

Tokens come from :mod:`storage.filters._lexer`, each filter name's
constructor from :mod:`storage.filters._builders`, or from the user filters
of :mod:`storage.filters.registry`.  Strings are single-quoted, ``''`` standing for one quote; comparators are
strings with a prefix (``'binary:abc'``).  As in HBase, SKIP and WHILE bind
tighter than AND, and AND tighter than OR.  ``a AND b AND c`` becomes one
FilterList of three; a parenthesized group stays a nested list, so
``repr(f)`` parses back to a filter equal to ``f``.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

from ..errors import InvalidArgument, clip
from ._builders import BUILDERS, FILTER_NAMES, Args
from ._lexer import KEYWORDS, FilterSyntaxError, Token, describe, tokenize
from .base import MAX_FILTER_DEPTH, Filter, check_depth
from .filter_list import FilterList
from .registry import registered_filters, registry_version, user_filter
from .wrappers import SkipFilter, WhileMatchFilter

__all__ = ["FilterSyntaxError", "parse_filter_string", "parsed_filter", "coerce_filter", "FILTER_NAMES"]


class _Parser:
    def __init__(self, text: str):
        self.text = text
        self.tokens = tokenize(text)
        self.i = 0
        self.depth = 0  # open parentheses and SKIP/WHILE around the current spot

    def nest(self, tok: Token) -> None:
        """Enter one level; refuse nesting past MAX_FILTER_DEPTH before recursing."""
        self.depth += 1
        if self.depth > MAX_FILTER_DEPTH:
            raise FilterSyntaxError(f"filter nested more than {MAX_FILTER_DEPTH} levels deep", self.text, tok.pos)

    def peek(self) -> Token:
        return self.tokens[self.i]

    def take(self) -> Token:
        tok = self.tokens[self.i]
        self.i += 1
        return tok

    def keyword(self, word: str) -> bool:
        tok = self.peek()
        return tok.kind == "name" and tok.value.upper() == word

    def expect(self, kind: str, what: str) -> Token:
        tok = self.peek()
        if tok.kind != kind:
            raise FilterSyntaxError(f"expected {what}, got {describe(tok)}", self.text, tok.pos)
        return self.take()

    def parse(self) -> Filter:
        result = self.or_expr()
        tok = self.peek()
        if tok.kind != "end":
            raise FilterSyntaxError(f"unexpected {describe(tok)} after a complete filter", self.text, tok.pos)
        return result

    def build(self, tok: Token, cls: type, *args: Any) -> Filter:
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
        if tok.kind != "name" or tok.value.upper() in KEYWORDS:
            raise FilterSyntaxError(f"expected a filter name or '(', got {describe(tok)}", self.text, tok.pos)
        return self.call()

    def call(self) -> Filter:
        name = self.take()
        builder = BUILDERS.get(name.value)
        user = user_filter(name.value) if builder is None else None
        if builder is None and user is None:
            known = ", ".join(sorted(FILTER_NAMES + tuple(registered_filters())))
            raise FilterSyntaxError(f"unknown filter {name.value!r}", self.text, name.pos, f"known filters: {known}")
        self.expect("(", f"'(' after {name.value}")
        args: list[Token] = []
        if self.peek().kind != ")":
            while True:
                tok = self.peek()
                if tok.kind not in ("string", "int", "float", "op", "name"):
                    raise FilterSyntaxError(f"expected an argument of {name.value}, got {describe(tok)}", self.text, tok.pos)
                args.append(self.take())
                if self.peek().kind != ",":
                    break
                self.take()
        tok = self.peek()
        if tok.kind != ")":
            raise FilterSyntaxError(f"expected ',' or ')' in the arguments of {name.value}, got {describe(tok)}", self.text, tok.pos)
        close = self.take()
        a = Args(self, name, args, close)
        try:
            if builder is not None:
                return builder(a)
            built = user([a.value(i) for i in range(len(args))])
            if not isinstance(built, Filter):
                raise a.fail(f"{name.value}.from_arguments returned {type(built).__name__}, not a Filter")
            check_depth(built)
            return built
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


# The filters of recent strings, as parsed (least recently used first), for parsed_filter.  A
# scan split into many requests carries the same string in each (the connector's splits, a
# region server's scans); a runtime filter's IN list of thousands of values is a string of
# 100 kB and more, whose parse costs far more than reading a split's blocks.  Bounded in
# entries and in the characters of their strings (a parse holds some 7 bytes a character).
_PARSED: "OrderedDict[tuple[str, int], Filter]" = OrderedDict()
_PARSED_CHARS = [0]
_PARSED_LOCK = threading.Lock()
PARSED_ENTRIES = 64
"""Filter strings whose parse :func:`parsed_filter` keeps."""
PARSED_CHARS = 1 << 21
"""Characters of the strings whose parse :func:`parsed_filter` keeps, at most (longer ones are
parsed on every call)."""


def parsed_filter(text: str | bytes) -> Filter:
    """The filter of filter-language ``text``, as :func:`parse_filter_string` gives it, parsed
    once for many calls: the parses of recent strings are kept (:data:`PARSED_ENTRIES`,
    :data:`PARSED_CHARS`) and each call returns its own copy (``Filter.copy``), so that a
    caller changing it or counting in it (a ``PageFilter``) changes no other caller's.  A change
    of the user filters (:func:`~storage.filters.registry.register_filter`) parses again."""
    if isinstance(text, (bytes, bytearray, memoryview)):
        text = bytes(text).decode("utf-8", "surrogateescape")
    if not isinstance(text, str):
        raise InvalidArgument(f"a filter string must be str or bytes, got {type(text).__name__}")
    key = (text, registry_version())
    with _PARSED_LOCK:
        found = _PARSED.get(key)
        if found is not None:
            _PARSED.move_to_end(key)
    if found is None:
        found = parse_filter_string(text)  # outside the lock: threads parse other strings meanwhile
        if len(text) <= PARSED_CHARS:
            with _PARSED_LOCK:
                if key not in _PARSED:
                    _PARSED[key] = found
                    _PARSED_CHARS[0] += len(text)
                while len(_PARSED) > PARSED_ENTRIES or _PARSED_CHARS[0] > PARSED_CHARS:
                    (old, _), _flt = _PARSED.popitem(last=False)
                    _PARSED_CHARS[0] -= len(old)
    return found.copy()


def coerce_filter(filter: Filter | str | bytes | None) -> Filter | None:
    """Accept what ``Table.scan(filter=...)`` takes: a Filter, a filter string, or None.  A
    string gives a filter of the caller's own, parsed once for the many calls that pass the
    same string (the requests of one scan's splits: :func:`parsed_filter`)."""
    if filter is None:
        return filter
    if isinstance(filter, Filter):
        check_depth(filter)  # a list may have grown deeper after it was built
        return filter
    if isinstance(filter, (str, bytes, bytearray, memoryview)):
        return parsed_filter(filter)  # the caller's own copy of a parse kept for the same string
    raise InvalidArgument(
        f"filter must be a Filter, a filter string or None, got {type(filter).__name__} {clip(repr(filter), 60)}"
    )
