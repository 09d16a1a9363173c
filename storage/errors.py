"""The engine's exception hierarchy.

Every error the engine raises on purpose is a :class:`StorageError`.  Classes
that describe a caller's mistake also subclass the builtin a Python caller
would catch (``InvalidArgument`` is a ``ValueError``, ``TableNotFound`` a
``LookupError``), so code written against plain Python keeps working.
"""

from __future__ import annotations

__all__ = [
    "StorageError",
    "CorruptionError",
    "InvalidArgument",
    "TableNotFound",
    "TableExists",
    "TableLocked",
    "StorageIOError",
    "NamespaceNotFound",
    "NamespaceExists",
    "NamespaceNotEmpty",
    "RegionNotFound",
    "ScannerError",
    "clip",
    "check_bytes",
    "MAX_ECHO_CHARS",
]

MAX_ECHO_CHARS = 200
"""The most characters of a caller's input an error message repeats."""


def clip(text: str, limit: int = MAX_ECHO_CHARS) -> str:
    """``text`` cut to ``limit`` characters, saying how long it was.

    Error messages echo what the caller sent; a 100 KB table name must not
    become a 100 KB message (gRPC refuses metadata over 16 KB).
    """
    if not isinstance(text, str):
        text = str(text)
    if len(text) <= limit:
        return text
    return f"{text[:limit]}...({len(text)} chars)"


class StorageError(Exception):
    """Base class of every error raised by the storage engine."""


class CorruptionError(StorageError):
    """Stored bytes failed a check (checksum, magic, length, version).

    ``path`` names the file and ``offset`` the byte position where the bad
    data starts, when they are known.
    """

    def __init__(self, message: str, path: str | None = None, offset: int | None = None):
        self.path = path
        self.offset = offset
        where = ""
        if path is not None:
            where = f" in {path}"
            if offset is not None:
                where += f" at offset {offset}"
        super().__init__(f"{message}{where}")


class InvalidArgument(StorageError, ValueError):
    """A caller passed a value the engine cannot accept; the message names it."""


class TableNotFound(StorageError, LookupError):
    """The named table does not exist under the connection's root."""

    def __str__(self) -> str:  # LookupError would quote the message like a key
        return str(self.args[0]) if self.args else "table not found"


class TableExists(StorageError):
    """create_table was asked for a name that is already taken."""


class NamespaceNotFound(StorageError, LookupError):
    """The named namespace does not exist under the connection's root."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "namespace not found"


class NamespaceExists(StorageError):
    """create_namespace was asked for a name that is already taken."""


class NamespaceNotEmpty(StorageError):
    """delete_namespace was asked to drop a namespace that still holds tables (as HBase refuses)."""


class TableLocked(StorageError):
    """Another process holds the writer lock of the table directory."""


class StorageIOError(StorageError, OSError):
    """An I/O call of the engine failed: the message says what was being done
    to which path and why (``no space left on device writing <path>``).

    Also an ``OSError`` keeping the cause's ``errno`` (``ENOSPC``: a full disk)
    and ``filename``, so callers that catch ``OSError`` keep working.
    """

    def __init__(self, message: str, errno: int | None = None, path: str | None = None):
        OSError.__init__(self, errno, message, path)
        self.message = message

    def __str__(self) -> str:
        return self.message

    @classmethod
    def of(cls, exc: OSError, action: str, path: str) -> "StorageIOError":
        """``exc`` (an OS error without the path, as ``os.write`` raises) as one
        line naming ``action`` (``"writing"``) and ``path``; a StorageIOError is kept as it is."""
        if isinstance(exc, StorageIOError):
            return exc
        import os

        reason = os.strerror(exc.errno) if exc.errno else (exc.strerror or str(exc))
        return cls(f"{reason[:1].lower()}{reason[1:]} {action} {path}", exc.errno, path)


class RegionNotFound(StorageError, LookupError):
    """No region of the table covers the requested key or name."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "region not found"


class ScannerError(StorageError):
    """A scanner was used after close, after expiry, or out of order."""


def check_bytes(value: object, what: str) -> bytes:
    """``value`` as bytes (bytearray and memoryview copied), or InvalidArgument naming ``what``."""
    if isinstance(value, bytes):
        return value
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    raise InvalidArgument(f"{what} must be bytes, got {type(value).__name__} {clip(repr(value), 60)}")
