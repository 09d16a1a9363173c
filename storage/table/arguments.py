"""Argument checks shared by the table front ends: bytes, row keys and counter
values (scan arguments are :class:`storage.read.scan_request.ScanRequest`'s)."""

from __future__ import annotations

from typing import Any

from ..errors import InvalidArgument, check_bytes, clip
from ..read.scan_request import row_range

__all__ = ["row_range", "MAX_ROW_KEY_LENGTH", "row_too_long", "check_row", "check_counter", "INT64_MIN", "INT64_MAX"]


INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
"""The range of an HBase counter: a signed 64-bit integer."""


def check_counter(value: Any, what: str) -> int:
    """``value`` if it is an int in the signed 64-bit range; else a one-line refusal naming ``what``."""
    if not isinstance(value, int) or isinstance(value, bool) or not INT64_MIN <= value <= INT64_MAX:
        raise InvalidArgument(f"{what} must be an int in the signed 64-bit range, got {clip(repr(value), 60)}")
    return value


MAX_ROW_KEY_LENGTH = 32767
"""The longest row key a write takes: HBase's (``Short.MAX_VALUE``: a row's length is a 2-byte field there)."""


def row_too_long(row: bytes) -> InvalidArgument:
    """The one-line refusal of a written row key over :data:`MAX_ROW_KEY_LENGTH`."""
    return InvalidArgument(
        f"row key {clip(repr(row[:40]), 80)}... is {len(row)} bytes, over the limit of {MAX_ROW_KEY_LENGTH}"
        " bytes (HBase's)"
    )


def check_row(row: Any) -> bytes:
    """A row key of a mutation: non-empty bytes (HBase refuses an empty row)."""
    row = check_bytes(row, "row key")
    if not row:
        raise InvalidArgument("row key must not be empty")
    return row
