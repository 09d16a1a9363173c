"""Frames of the engine worker's socket protocol, version 1 (connector/java/PROTOCOL.md).

A request is ``b"RSW1"``, a big-endian u32 length and that many bytes of
UTF-8 JSON (an object with ``v``, ``secret`` and ``op``).  A reply frame is
a big-endian u32 length and a JSON object with ``ok`` (and ``error``, one
line, when it is false).  A read's reply frame is followed by an Arrow IPC
stream and a trailer frame.
"""

from __future__ import annotations

import base64
import hmac
import json
import pickle
import struct
from typing import Any, BinaryIO

from storage import InvalidArgument

__all__ = ["MAGIC", "VERSION", "MAX_FRAME", "ProtocolError", "read_request", "write_frame", "read_frame",
           "pack_object", "unpack_object"]

MAGIC = b"RSW1"
VERSION = 1
MAX_FRAME = 64 << 20
_LEN = struct.Struct(">I")


class ProtocolError(ValueError):
    """A request that breaks the protocol (bad magic, length, JSON, version or secret)."""


def _read_exact(f: BinaryIO, n: int) -> bytes:
    data = f.read(n)
    if data is None or len(data) != n:
        raise ProtocolError(f"the request ended after {0 if not data else len(data)} of {n} bytes")
    return data


def read_request(f: BinaryIO, secret: str) -> dict:
    """One request frame from ``f``, checked (magic, length, JSON object, version, secret)."""
    magic = _read_exact(f, 4)
    if magic != MAGIC:
        raise ProtocolError(f"not a regionscan worker request (magic {magic!r}, expected {MAGIC!r})")
    (length,) = _LEN.unpack(_read_exact(f, 4))
    if length > MAX_FRAME:
        raise ProtocolError(f"request of {length} bytes is over the {MAX_FRAME}-byte limit")
    try:
        doc = json.loads(_read_exact(f, length).decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ProtocolError(f"the request is not UTF-8 JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise ProtocolError("the request is not a JSON object")
    if doc.get("v") != VERSION:
        raise ProtocolError(f"protocol version {doc.get('v')!r} is not supported (this worker speaks {VERSION})")
    given = doc.get("secret")
    if not isinstance(given, str) or not hmac.compare_digest(given.encode(), secret.encode()):
        raise ProtocolError("wrong or missing worker secret")
    if not isinstance(doc.get("op"), str):
        raise ProtocolError("the request names no op")
    return doc


def write_frame(f: BinaryIO, doc: dict[str, Any]) -> None:
    """One reply frame (u32 length + JSON)."""
    body = json.dumps(doc, separators=(",", ":")).encode("utf-8")
    f.write(_LEN.pack(len(body)))
    f.write(body)


def read_frame(f: BinaryIO) -> dict:
    """One reply frame (the client side; used by tests)."""
    (length,) = _LEN.unpack(_read_exact(f, 4))
    if length > MAX_FRAME:
        raise ProtocolError(f"reply of {length} bytes is over the limit")
    return json.loads(_read_exact(f, length).decode("utf-8"))


def request_bytes(doc: dict[str, Any]) -> bytes:
    """A request frame for ``doc`` (the client side; used by tests)."""
    body = json.dumps(doc).encode("utf-8")
    return MAGIC + _LEN.pack(len(body)) + body


def pack_object(value: Any) -> str:
    """A Python object as the text a request or reply carries it in (pickled, base64): splits,
    a write job's writer and its tasks' staged files, which only this worker reads back."""
    return base64.b64encode(pickle.dumps(value)).decode("ascii")


def unpack_object(text: Any, kind: type, what: str) -> Any:
    """The object :func:`pack_object` packed, checked to be a ``kind``; one line naming ``what`` if not."""
    if not isinstance(text, str):
        raise InvalidArgument(f"{what} must be the text the worker gave, got {type(text).__name__}")
    value = pickle.loads(base64.b64decode(text, validate=True))
    if not isinstance(value, kind):
        raise InvalidArgument(f"{what} must be a {kind.__name__}, got {type(value).__name__}")
    return value
