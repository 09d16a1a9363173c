"""Row-key arithmetic, in one place: the next key, the end of a prefix, and
ranges of keys clipped, intersected and merged.

A range is ``(start, stop)`` covering keys ``start <= key < stop``; a stop of
``None`` is unbounded.  Every layer speaks in these: a table's scan bounds, a
region's ``[start, end)``, a filter's :meth:`~storage.filters.Filter.row_ranges`
(a sorted list of disjoint, non-empty ranges outside which no row can pass, or
``None`` when it restricts nothing; an empty list means no row can pass), the
connector's splits and pushed-down key ranges.
"""

from __future__ import annotations

from typing import Iterable, Optional

__all__ = ["KeyRange", "key_after", "prefix_stop", "row_range_of", "clip_bounds", "clip_range", "normalize", "intersect", "union"]

KeyRange = tuple[bytes, Optional[bytes]]


def key_after(key: bytes) -> bytes:
    """The smallest key greater than ``key`` (the exclusive stop of a range holding ``key`` alone)."""
    return key + b"\x00"


def row_range_of(row: bytes) -> KeyRange:
    """The range holding the one key ``row``."""
    return row, key_after(row)


def prefix_stop(prefix: bytes) -> bytes | None:
    """The smallest key greater than every key starting with ``prefix``.

    ``None`` when there is none (empty prefix or all ``0xff`` bytes).
    """
    stripped = prefix.rstrip(b"\xff")
    if not stripped:
        return None
    return stripped[:-1] + bytes([stripped[-1] + 1])


def clip_bounds(start: bytes, stop: bytes | None, low: bytes, high: bytes | None) -> KeyRange:
    """``[start, stop)`` cut to ``[low, high)``, possibly empty (``start >= stop``)."""
    lo = max(start, low)
    if stop is None:
        hi = high
    elif high is None:
        hi = stop
    else:
        hi = min(stop, high)
    return lo, hi


def clip_range(start: bytes, stop: bytes | None, low: bytes, high: bytes | None) -> KeyRange | None:
    """``[start, stop)`` cut to ``[low, high)``; None when nothing is left."""
    lo, hi = clip_bounds(start, stop, low, high)
    if hi is not None and lo >= hi:
        return None
    return lo, hi


def _before(a: bytes | None, b: bytes | None) -> bool:
    """``a < b`` where None is +infinity."""
    if a is None:
        return False
    return b is None or a < b


def normalize(ranges: Iterable[KeyRange]) -> list[KeyRange]:
    """Sort, drop empty ranges and merge overlapping or touching ones."""
    items = sorted((r for r in ranges if _before(r[0], r[1])), key=lambda r: r[0])
    out: list[KeyRange] = []
    for start, stop in items:
        if out and not _before(out[-1][1], start):  # overlaps or touches the previous one
            prev_start, prev_stop = out[-1]
            out[-1] = (prev_start, stop if _before(prev_stop, stop) else prev_stop)
        else:
            out.append((start, stop))
    return out


def intersect(a: list[KeyRange], b: list[KeyRange]) -> list[KeyRange]:
    """Keys in both normalized range lists."""
    out: list[KeyRange] = []
    for s1, e1 in a:
        for s2, e2 in b:
            start = max(s1, s2)
            stop = e1 if _before(e1, e2) else e2
            if _before(start, stop):
                out.append((start, stop))
    return normalize(out)


def union(a: list[KeyRange], b: list[KeyRange]) -> list[KeyRange]:
    """Keys in either normalized range list."""
    return normalize(list(a) + list(b))
