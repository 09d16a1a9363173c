"""Errors of the SerDe layer.

All of them are :class:`storage.errors.InvalidArgument` (and so ``ValueError``):
a mapping that does not parse, a stored value that does not decode and a value
that cannot be encoded are all a bad argument handed to the SerDe, and each
message names the offending token or value.
"""

from __future__ import annotations

from storage.errors import InvalidArgument, clip

__all__ = ["MappingError", "DecodeError", "EncodeError"]


def _safe_repr(token: object) -> str:
    """``repr(token)``, or a description when Python refuses to print it (an int past 4,300 digits)."""
    try:
        return repr(token)
    except (ValueError, RecursionError):
        return f"<a {type(token).__name__} too large to show>"


class MappingError(InvalidArgument):
    """A column mapping, catalog or type string did not parse or is inconsistent.

    ``token`` is the offending piece of text and ``position`` its offset
    (a character offset in a mapping string, or a JSON path in a catalog).
    """

    def __init__(self, message: str, token: object = None, position: object = None):
        self.message = message
        self.token = token
        self.position = position
        where = ""
        if token is not None:
            where += f": {clip(_safe_repr(token))}"  # the token may be the caller's whole (huge) input
        if position is not None:
            where += f" at position {position}"
        super().__init__(f"{clip(message, 300)}{where}")

    def at(self, position: object) -> "MappingError":
        """This error with ``position`` filled in when it had none (a check made after parsing)."""
        if self.position is not None:
            return self
        return MappingError(self.message, self.token, position)


class DecodeError(InvalidArgument):
    """A stored value could not be decoded into its column's type.

    ``row_key``, ``column`` and ``value`` name the row, the column and the
    stored bytes; ``reason`` says what was wrong with them.
    """

    def __init__(self, row_key: bytes | None, column: str, value: object, reason: str):
        self.row_key = row_key
        self.column = column
        self.value = value
        self.reason = reason
        shown = value if not isinstance(value, (bytes, bytearray)) or len(value) <= 64 else bytes(value[:64]) + b"..."
        super().__init__(
            f"cannot decode column {column!r} of row {row_key!r}: value {shown!r} ({reason})"
        )


class EncodeError(InvalidArgument):
    """A value could not be encoded for its column; the message names both."""

    def __init__(self, column: str, value: object, reason: str):
        self.column = column
        self.value = value
        self.reason = reason
        super().__init__(f"cannot encode {value!r} for column {column!r} ({reason})")
