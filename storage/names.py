"""Refusing misspelled setting names, with the nearest known name as the hint.

A mistyped key (``hbase.spark.query.batchsiz``) that is silently ignored
leaves a user wondering why a setting has no effect; every layer that
reads named settings checks them here instead.
"""

from __future__ import annotations

import difflib
from typing import Iterable

from .errors import InvalidArgument

__all__ = ["nearest_name", "check_known_names", "name_hint"]

_LISTED = 8  # names a hint lists before it only counts the rest


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


def name_hint(name: str, names: list[str], what: str, holder: str = "") -> str:
    """What to say, in parentheses, after "``name`` is not there": the closest
    of ``names`` (``did you mean X?``), else the first few of them, or that
    there are none.  ``what`` names them ("tables"); ``holder`` says whose
    they are ("namespace ns"), empty for the obvious owner."""
    hint = nearest_name(name, names)
    if hint:
        return f"(did you mean {hint}?)"
    if not names:
        return f"({holder} has no {what})" if holder else f"(no {what} yet)"
    shown = ", ".join(names[:_LISTED])
    more = len(names) - _LISTED
    return f"({what}{' of ' + holder if holder else ''}: {shown}" + (f" and {more} more)" if more > 0 else ")")
