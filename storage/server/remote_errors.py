"""Errors of the region server and how they cross the wire.

The server turns every exception into a Flight error whose message starts
with a type tag, ``[regionscan:InvalidArgument] ...``, and whose
``extra_info`` is JSON ``{"type": "InvalidArgument", "message": "..."}``.
The client turns it back into the same class, so code written against the
embedded store catches the same exceptions from a remote one.  Only the
classes registered in :data:`REMOTE_ERRORS` are rebuilt; anything else
arrives as :class:`RemoteError`.
"""

from __future__ import annotations

import json
import re

import pyarrow.flight as flight

from .. import errors as _errors
from ..errors import InvalidArgument, ScannerError, StorageError, clip

__all__ = [
    "Unauthenticated",
    "LimitExceeded",
    "UnknownScanner",
    "LeaseExpired",
    "OutOfOrderScannerNext",
    "RemoteError",
    "MalformedRequest",
    "RequestFieldError",
    "MAX_ERROR_CHARS",
    "REMOTE_ERRORS",
    "to_flight_error",
    "from_flight_error",
]


class Unauthenticated(StorageError, PermissionError):
    """The call carried no token, or the wrong one, for a server that requires one."""


class LimitExceeded(StorageError):
    """A request went over one of the server's limits (request size, open scanners, rows per call)."""


class UnknownScanner(ScannerError, LookupError):
    """next() or close() named a scanner id the server never issued or already closed."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "unknown scanner"


class LeaseExpired(ScannerError):
    """The scanner sat idle past its lease; the server closed it and freed its resources."""


class OutOfOrderScannerNext(ScannerError):
    """next() carried a sequence number that is neither the expected one nor a retry of the
    last call (HBase's OutOfOrderScannerNextException): rows would be skipped or repeated."""


class MalformedRequest(InvalidArgument):
    """A request's bytes are not a well-formed message: bad framing, invalid or too deeply
    nested JSON, a number too long, or a body over the size limits."""


class RequestFieldError(InvalidArgument):
    """A request field is missing, of the wrong type, or out of its range (wire types are strict:
    ``{"reverse": "maybe"}`` is refused, not read as true)."""


class RemoteError(StorageError):
    """The server failed in a way that has no engine error class (the message says how)."""


REMOTE_ERRORS: dict[str, type[BaseException]] = {
    name: getattr(_errors, name) for name in _errors.__all__
}
REMOTE_ERRORS.update(
    {
        cls.__name__: cls
        for cls in (
            Unauthenticated, LimitExceeded, UnknownScanner, LeaseExpired, OutOfOrderScannerNext, RemoteError,
            MalformedRequest, RequestFieldError,
        )
    }
)
"""Error classes rebuilt on the client, by type tag."""

MAX_ERROR_CHARS = 600
"""The most characters of an error message sent to a client (echoed input is cut shorter still)."""

_TAG_RE = re.compile(r"\[regionscan:(\w+)\] ?(.*)", re.S)


def _tag_of(exc: BaseException) -> str:
    for cls in type(exc).__mro__:
        if cls.__name__ in REMOTE_ERRORS and REMOTE_ERRORS[cls.__name__] is cls:
            return cls.__name__
    if isinstance(exc, ValueError):
        return "InvalidArgument"
    return "RemoteError"


def to_flight_error(exc: BaseException) -> flight.FlightError:
    """The Flight error that carries ``exc`` to the client, tagged with its class."""
    tag = _tag_of(exc)
    # gRPC refuses status metadata over 16 KB (the client would see "resource
    # exhausted" instead of the error): every message is cut to a few hundred characters.
    message = clip(str(exc), MAX_ERROR_CHARS)
    info = json.dumps({"type": tag, "message": message}).encode()
    text = f"[regionscan:{tag}] {message}"
    if tag == "Unauthenticated":
        return flight.FlightUnauthenticatedError(text, extra_info=info)
    return flight.FlightServerError(text, extra_info=info)


def from_flight_error(exc: BaseException) -> BaseException:
    """The engine exception a Flight error stands for (rebuilt from its tag).

    Transport failures (server gone, deadline passed) become
    :class:`RemoteError`, or :class:`Unauthenticated` for a refused token.
    """
    tag = message = None
    info = getattr(exc, "extra_info", None)
    if info:
        try:
            doc = json.loads(bytes(info).decode())
            tag, message = doc.get("type"), doc.get("message")
        except (ValueError, AttributeError):
            tag = None
    if tag is None:
        match = _TAG_RE.search(str(exc))
        if match:
            tag, message = match.group(1), match.group(2)
            message = message.split(". Detail:", 1)[0]
    if tag is None:
        if isinstance(exc, flight.FlightUnauthenticatedError):
            return Unauthenticated(f"the server refused the call: {exc}")
        return RemoteError(f"region server call failed: {exc}")
    cls = REMOTE_ERRORS.get(tag, RemoteError)
    text = message if message is not None else str(exc)
    try:
        return cls(text)
    except TypeError:  # a class whose constructor wants more than a message
        return RemoteError(f"{tag}: {text}")
