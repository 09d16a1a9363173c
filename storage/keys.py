"""Key-range arithmetic: the end of a prefix range and the intersection of a
range with sorted row ranges."""

from __future__ import annotations


def prefix_stop(prefix: bytes) -> bytes | None:
    """The smallest key greater than every key starting with ``prefix`` (None: unbounded)."""
    trimmed = prefix.rstrip(b"\xff")
    if not trimmed:
        return None
    return trimmed[:-1] + bytes([trimmed[-1] + 1])


def _intersect_spans(low: bytes, high: bytes | None, ranges) -> list[tuple[bytes, bytes | None]]:
    """[low, high) intersected with a filter's sorted, disjoint row ranges."""
    spans = []
    for start, stop in sorted(ranges, key=lambda r: r[0]):
        lo = max(low, start)
        if stop is None:
            hi = high
        elif high is None:
            hi = stop
        else:
            hi = min(high, stop)
        if hi is not None and lo >= hi:
            continue
        if spans and (spans[-1][1] is None or lo <= spans[-1][1]):
            prev_lo, prev_hi = spans[-1]
            spans[-1] = (prev_lo, None if hi is None or prev_hi is None else max(prev_hi, hi))
        else:
            spans.append((lo, hi))
    return spans
