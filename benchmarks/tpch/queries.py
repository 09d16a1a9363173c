"""The 22 TPC-H queries (``qNN.sql`` beside this module) and how two answers are compared.

The query texts are written for Spark SQL from the TPC-H specification, with its default
substitution parameters (the validation values); query 15's view is a common table
expression, and queries whose ORDER BY leaves ties that a LIMIT or the listed order would
cut arbitrarily take the key as the last sort column, so one answer is right.
"""

from __future__ import annotations

import decimal
import math
import os
import re
from typing import Any, Sequence

__all__ = ["QUERIES", "answer_difference", "is_ordered", "parse_query_list", "query_text"]

QUERIES = tuple(range(1, 23))
"""The queries' numbers."""

_HERE = os.path.dirname(os.path.abspath(__file__))
DOUBLE_TOLERANCE = 1e-9
"""Relative difference allowed between two doubles of the answers; decimals must be equal."""


def query_text(number: int) -> str:
    """The Spark SQL text of query ``number`` (1 to 22)."""
    if number not in QUERIES:
        raise ValueError(f"no TPC-H query {number!r}: the queries are 1 to 22")
    with open(os.path.join(_HERE, f"q{number:02d}.sql")) as f:
        return f.read()


def parse_query_list(text: str) -> list[int]:
    """``"1,6"`` or ``"1-5,14"`` as query numbers, each checked."""
    out: list[int] = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        lo, _, hi = part.partition("-")
        try:
            numbers = range(int(lo), int(hi or lo) + 1)
        except ValueError:
            raise ValueError(f"bad query list {text!r}: give numbers 1 to 22, such as 1,6 or 1-5") from None
        for n in numbers:
            query_text(n)  # checks the number
            out.append(n)
    return out


def is_ordered(number: int) -> bool:
    """Whether the query's answer has an order to compare (a top-level ORDER BY)."""
    return re.search(r"^order\s+by\b", query_text(number), re.IGNORECASE | re.MULTILINE) is not None


def _same_value(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return a == b or abs(a - b) <= DOUBLE_TOLERANCE * max(abs(a), abs(b))
    if isinstance(a, decimal.Decimal) and isinstance(b, decimal.Decimal):
        return a == b and a.as_tuple().exponent == b.as_tuple().exponent  # same value at the same scale
    return type(a) is type(b) and a == b


def _sort_key(row: Sequence[Any]) -> tuple:
    return tuple((v is None, str(type(v)), v if v is not None else 0) for v in row)


def answer_difference(ours: list[Sequence[Any]], theirs: list[Sequence[Any]], ordered: bool) -> str | None:
    """None when two answers agree, else one line saying where they first differ.

    Row counts must be equal; decimals, integers, strings and dates exactly equal; doubles
    within :data:`DOUBLE_TOLERANCE` relative; in the listed order when ``ordered``, else as
    multisets."""
    if len(ours) != len(theirs):
        return f"{len(ours)} rows against {len(theirs)}"
    a = [tuple(r) for r in ours]
    b = [tuple(r) for r in theirs]
    if not ordered:
        a.sort(key=_sort_key)
        b.sort(key=_sort_key)
    for i, (x, y) in enumerate(zip(a, b)):
        if len(x) != len(y) or not all(_same_value(p, q) for p, q in zip(x, y)):
            return f"row {i} differs: {x!r} against {y!r}"
    return None
