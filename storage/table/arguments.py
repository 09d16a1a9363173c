"""Argument checks shared by the table front ends: bytes, row keys, counter
values and happybase scan bounds turned into one key range."""

from __future__ import annotations

import time
from typing import Any

from ..errors import InvalidArgument, clip
from ..keys import key_after, prefix_stop

__all__ = ["row_range"]


_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def _check_counter(value: Any, what: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not _INT64_MIN <= value <= _INT64_MAX:
        raise InvalidArgument(f"{what} must be an int in the signed 64-bit range, got {clip(repr(value), 60)}")
    return value


def _now_ms() -> int:
    return int(time.time() * 1000)


def _check_bytes(value: Any, what: str) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    raise InvalidArgument(f"{what} must be bytes, got {type(value).__name__} {clip(repr(value), 60)}")


def _check_row(row: Any) -> bytes:
    """A row key of a mutation: non-empty bytes (HBase refuses an empty row)."""
    row = _check_bytes(row, "row key")
    if not row:
        raise InvalidArgument("row key must not be empty")
    return row


def row_range(
    row_start: bytes | None, row_stop: bytes | None, row_prefix: bytes | None, reverse: bool
) -> tuple[bytes, bytes | None]:
    """Turn happybase/HBase scan bounds into [low, high).

    Forward: row_start inclusive, row_stop exclusive.  Reverse (as HBase's
    reversed Scan): row_start is the highest row, inclusive, and row_stop the
    lower bound, exclusive.
    """
    if row_prefix is not None:
        if row_start is not None or row_stop is not None:
            raise InvalidArgument("row_prefix cannot be combined with row_start or row_stop")
        row_prefix = _check_bytes(row_prefix, "row_prefix")
        return row_prefix, prefix_stop(row_prefix)
    if row_start is not None:
        row_start = _check_bytes(row_start, "row_start")
    if row_stop is not None:
        row_stop = _check_bytes(row_stop, "row_stop")
    if not reverse:
        return row_start or b"", row_stop or None
    low = b"" if not row_stop else key_after(row_stop)
    high = None if not row_start else key_after(row_start)
    return low, high
