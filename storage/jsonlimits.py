"""JSON read with its nesting and number sizes bounded before the parser sees them.

``json.loads`` recurses once per nesting level (a few thousand ``[`` raise
RecursionError) and turns a 100,000-digit literal into an int before any
check can run (Python then raises a ValueError of its own).  Messages that
cross a trust boundary (wire headers, catalogs) are read with
:func:`loads_bounded`, which refuses both first (integers must fit a signed
64-bit value, as HBase's longs do) and raises only :class:`JsonLimitError`,
with the character position of the problem.
"""

from __future__ import annotations

import json
import re
from typing import Any

import numpy as np

from .errors import InvalidArgument

__all__ = ["JsonLimitError", "nesting_overflow", "loads_bounded", "MAX_INT_DIGITS"]

MAX_INT_DIGITS = 20
"""Longest integer literal read (a signed 64-bit value has at most 19 digits and a sign)."""

# A JSON string literal (escapes included); its contents are blanked before
# brackets are counted, so "[[[" inside a string does not count as nesting.
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.S)
_LONG_INT = re.compile(r"\d{19,}")  # where a number too long or too large starts


class JsonLimitError(InvalidArgument):
    """JSON text that is malformed, nested too deep or holds a number too long.

    ``position`` is the character offset of the problem.
    """

    def __init__(self, message: str, position: int):
        self.position = position
        super().__init__(f"{message} at position {position}")


def nesting_overflow(text: str, max_depth: int) -> int | None:
    """The position of the first ``[`` or ``{`` nested deeper than ``max_depth``, or None.

    Vectorized: strings are blanked by one regex pass, then depth is a
    cumulative sum over the bracket characters (no Python loop per character).
    """
    return _overflow(_blank_strings(text), max_depth)


def _blank_strings(text: str) -> str:
    return _STRING.sub(lambda m: " " * len(m.group()), text) if '"' in text else text


def _overflow(blanked: str, max_depth: int) -> int | None:
    codes = np.frombuffer(blanked.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
    step = np.isin(codes, (ord("["), ord("{"))).astype(np.int32) - np.isin(codes, (ord("]"), ord("}")))
    if not step.any():
        return None
    depth = np.cumsum(step)
    deep = np.flatnonzero(depth > max_depth)
    return int(deep[0]) if deep.size else None


def _bounded_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise ValueError(f"integer literal of {len(text)} digits (at most {MAX_INT_DIGITS})")
    value = int(text)
    if not -(2**63) <= value < 2**63:
        raise ValueError(f"integer {value} is outside the signed 64-bit range")
    return value


def loads_bounded(text: str | bytes, max_depth: int) -> Any:
    """``json.loads(text)`` refusing nesting past ``max_depth`` and integers outside 64 bits.

    Raises :class:`JsonLimitError` (an InvalidArgument) for every bad input:
    invalid UTF-8, invalid JSON, too deep, too long a number.
    """
    if isinstance(text, (bytes, bytearray, memoryview)):
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise JsonLimitError("JSON text is not valid UTF-8", exc.start) from None
    blanked = _blank_strings(text)
    where = _overflow(blanked, max_depth)
    if where is not None:
        raise JsonLimitError(f"JSON nested more than {max_depth} levels deep", where)
    try:
        return json.loads(text, parse_int=_bounded_int)
    except json.JSONDecodeError as exc:
        raise JsonLimitError(f"invalid JSON ({exc.msg})", exc.pos) from None
    except ValueError as exc:  # a number too long (strings are blanked: digits outside them)
        long_number = _LONG_INT.search(blanked)
        raise JsonLimitError(f"invalid JSON ({exc})", long_number.start() if long_number else 0) from None
