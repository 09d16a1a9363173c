"""Refusing misspelled setting names, with the nearest known name as the hint.

A mistyped key (``hbase.spark.query.batchsiz``) that is silently ignored
leaves a user wondering why a setting has no effect; every layer that
reads named settings checks them here instead.
"""

from __future__ import annotations

import difflib
from typing import Iterable

from .errors import InvalidArgument

__all__ = ["nearest_name", "check_known_names"]


def nearest_name(name: str, known: Iterable[str]) -> str | None:
    """The known name closest to ``name`` (difflib's ratio, at least 0.6), or None."""
    matches = difflib.get_close_matches(name, sorted(set(known)), n=1, cutoff=0.6)
    return matches[0] if matches else None


def check_known_names(names: Iterable[str], known: Iterable[str], what: str) -> None:
    """Raise :class:`InvalidArgument` for the first of ``names`` not in ``known``.

    ``what`` says what kind of name it is ("Spark option", "setting -D...").
    """
    known = set(known)
    for name in sorted(names):
        if name in known:
            continue
        hint = nearest_name(name, known)
        suggestion = f"; did you mean {hint!r}?" if hint else ""
        raise InvalidArgument(f"unknown {what} {name!r}{suggestion}")
