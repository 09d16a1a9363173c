"""Frames of the engine worker's socket protocol, version 1 (connector/java/PROTOCOL.md).

A request is ``b"RSW1"``, a big-endian u32 length and that many bytes of
UTF-8 JSON (an object with ``v``, ``secret`` and ``op``).  A reply frame is
a big-endian u32 length and a JSON object with ``ok`` (and ``error``, one
line, when it is false).  A read's reply frame is followed by an Arrow IPC
stream and a trailer frame; :class:`SocketSink` is what that stream is written to.
"""

from __future__ import annotations

import base64
import hmac
import json
import os
import pickle
import socket
import struct
from typing import Any, BinaryIO

from storage import InvalidArgument

__all__ = ["MAGIC", "VERSION", "MAX_FRAME", "ProtocolError", "read_request", "write_frame", "read_frame",
           "pack_object", "unpack_object", "SocketSink", "send_parts"]

MAGIC = b"RSW1"
VERSION = 1
MAX_FRAME = 64 << 20
_LEN = struct.Struct(">I")


def _iov_max() -> int:
    """How many buffers one ``sendmsg`` takes here (POSIX's IOV_MAX; 1,024 on Linux), at most 1,024."""
    try:
        return max(16, min(os.sysconf("SC_IOV_MAX"), 1024))
    except (AttributeError, ValueError, OSError):
        return 16  # POSIX's least


_IOV_MAX = _iov_max()


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


def send_parts(sock: socket.socket, parts: list[memoryview]) -> int:
    """Send ``parts`` (byte views) in order with gathering ``sendmsg`` calls, resuming after a
    partial send; the bytes sent.  Raises what the socket raises (``BrokenPipeError`` ... when
    the peer has gone)."""
    total = 0
    i = 0
    while i < len(parts):
        sent = sock.sendmsg(parts[i : i + _IOV_MAX])
        total += sent
        while i < len(parts) and sent >= parts[i].nbytes:  # whole parts sent
            sent -= parts[i].nbytes
            i += 1
        if sent:  # a part sent in part: its rest goes first in the next call
            parts[i] = parts[i][sent:]
    return total


class SocketSink:
    """A connected socket as the file an Arrow IPC stream writer writes to (``pa.ipc.new_stream``).

    The writer hands over each message's small pieces (lengths, metadata, padding) as bytes
    and each column buffer as a ``pa.Buffer`` over the batch's own memory.  They are kept, not
    copied, and :meth:`flush` sends them with one gathering ``sendmsg`` (several past the
    system's vector limit): the column bytes go from the batch to the kernel in one copy,
    where a buffered socket file first copies them into its buffer and writes that in
    pieces.  The caller flushes after each batch (the batch's memory is held until then).
    The socket stays open: it is the caller's.
    """

    closed = False  # what pyarrow checks of a file it is given

    def __init__(self, sock: socket.socket):
        self._sock = sock
        self._parts: list[memoryview] = []
        self.sent = 0  # bytes sent so far

    def write(self, data: Any) -> int:
        """Keep ``data`` (bytes or a buffer) to send at the next :meth:`flush`."""
        view = memoryview(data).cast("B")
        if view.nbytes:
            self._parts.append(view)
        return view.nbytes

    def flush(self) -> None:
        """Send what was written since the last flush."""
        parts, self._parts = self._parts, []
        if parts:
            self.sent += send_parts(self._sock, parts)

    def close(self) -> None:
        """Flush; the socket is left open."""
        self.flush()
