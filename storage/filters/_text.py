"""Bytes <-> filter-language text.

The filter language is text, but row keys, qualifiers and values are bytes.
Text is UTF-8; bytes that are not valid UTF-8 map to lone surrogates
(Python's ``surrogateescape``), so every byte string has a text form that
parses back to the same bytes.
"""

from __future__ import annotations

from ..errors import InvalidArgument, clip

__all__ = ["to_bytes", "to_text", "quote", "quote_text"]


def to_bytes(value: object, what: str) -> bytes:
    """Return ``value`` as bytes; ``str`` is encoded as described above."""
    if isinstance(value, bytes):
        return value
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, str):
        try:
            return value.encode("utf-8", "surrogateescape")
        except UnicodeEncodeError as exc:  # a lone surrogate that is not an escaped byte
            raise InvalidArgument(
                f"{what} holds a lone surrogate {value[exc.start]!r} at character {exc.start}, which is not text"
            ) from None
    raise InvalidArgument(f"{what} must be bytes or str, got {type(value).__name__} {clip(repr(value), 60)}")


def to_text(value: bytes) -> str:
    """The text form of ``value`` (inverse of :func:`to_bytes` on ``str``)."""
    return value.decode("utf-8", "surrogateescape")


def quote(value: bytes) -> str:
    """A filter-language string literal for ``value`` (``'`` doubled inside)."""
    return "'" + to_text(value).replace("'", "''") + "'"


def quote_text(text: str) -> str:
    """A filter-language string literal for ``text``."""
    return "'" + text.replace("'", "''") + "'"
