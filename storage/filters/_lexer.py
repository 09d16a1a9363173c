"""Tokens of the HBase filter language, and its syntax error.

See :mod:`storage.filters.parser` for the grammar.
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple

from ..errors import InvalidArgument, clip
from .compare import CompareOperator

__all__ = ["FilterSyntaxError", "Token", "tokenize", "describe", "KEYWORDS"]


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


class Token(NamedTuple):
    kind: str  # "(", ")", ",", "string", "int", "float", "op", "name", "end"
    value: Any
    pos: int


_CONTEXT = 100  # characters shown either side of an error's position
_DIGITS = "0123456789"  # str.isdigit() also accepts "²" and other digits int() refuses
_INT_MIN, _INT_MAX = -(2**63), 2**63 - 1  # integer arguments are Java longs in HBase
_MAX_INT_CHARS = 20  # "-9223372036854775808": longer literals are refused unread
_MAX_FLOAT_CHARS = 40
_FRACTION = re.compile(r"(?:\.[0-9]+)?(?:[eE][-+]?[0-9]{1,3})?")  # ASCII digits only, as integers
_OPERATOR_CHARS = "<>=!"
_OPERATORS = {op.symbol: op for op in CompareOperator if op is not CompareOperator.NO_OP}
KEYWORDS = {"AND", "OR", "SKIP", "WHILE"}


def tokenize(text: str) -> list[Token]:
    tokens = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c.isspace():
            i += 1
        elif c in "(),":
            tokens.append(Token(c, c, i))
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
            tokens.append(Token("string", "".join(parts), start))
        elif c in _OPERATOR_CHARS:
            start = i
            while i < n and text[i] in _OPERATOR_CHARS:
                i += 1
            symbol = text[start:i]
            if symbol not in _OPERATORS:
                raise FilterSyntaxError(
                    f"unknown compare operator {symbol!r} (expected one of {', '.join(_OPERATORS)})", text, start
                )
            tokens.append(Token("op", _OPERATORS[symbol], start))
        elif c in _DIGITS or (c == "-" and text[i + 1 : i + 2] in tuple(_DIGITS)):
            start = i
            i += 1
            while i < n and text[i] in _DIGITS:
                i += 1
            fraction = _FRACTION.match(text, i)
            if fraction.end() > i:  # a decimal number (RandomRowFilter's chance)
                i = fraction.end()
                if i - start > _MAX_FLOAT_CHARS:
                    raise FilterSyntaxError(f"number longer than {_MAX_FLOAT_CHARS} characters", text, start)
                tokens.append(Token("float", float(text[start:i]), start))
                continue
            literal = text[start:i].lstrip("-").lstrip("0") or "0"
            value = int(text[start:i]) if len(literal) < _MAX_INT_CHARS else None
            if value is None or not _INT_MIN <= value <= _INT_MAX:
                raise FilterSyntaxError("integer out of the signed 64-bit range", text, start)
            tokens.append(Token("int", value, start))
        elif c.isalpha() or c == "_":
            start = i
            while i < n and (text[i].isalnum() or text[i] == "_"):
                i += 1
            tokens.append(Token("name", text[start:i], start))
        else:
            raise FilterSyntaxError(f"unexpected character {ascii(c)}", text, i)
    tokens.append(Token("end", None, n))
    return tokens


def describe(token: Token) -> str:
    if token.kind == "end":
        return "the end of the filter"
    if token.kind == "string":
        return "a string"
    if token.kind == "op":
        return repr(token.value.symbol)
    if token.kind in ("int", "float"):
        return f"the number {token.value!r}"
    return repr(str(token.value))
