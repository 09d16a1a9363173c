"""The gateway's side of one connection: bounded reads, and the protocol pair.

Requests are decoded by thriftpy2's pure-Python protocols reading from
:class:`BoundedReader`, which checks every read against the bytes the
current request may still use *before* it reads or allocates: a length
prefix of 2 GiB in a string, a container or a frame is refused at once
(the connection is closed) instead of being honoured.  Container headers
are checked against the bytes the request still holds by the protocols of
:mod:`storage.thrift.containers`, which read :meth:`BoundedReader.left` (or
:meth:`FramedReader.left`).  Answers, which can
be large, are encoded by thriftpy2's Cython binary protocol where it is
available.  Framed or buffered transport and binary or compact protocol
follow the gateway's configuration, as HBase's ``-f`` and ``-c`` flags do.
"""

from __future__ import annotations

import socket

import struct
from io import BytesIO

from thriftpy2.protocol.binary import TBinaryProtocol
from thriftpy2.protocol.compact import TCompactProtocol
from thriftpy2.transport import TSocket, TTransportException
from thriftpy2.transport.base import TTransportBase, readall
from thriftpy2.transport.buffered import TBufferedTransport
from thriftpy2.transport.framed import TFramedTransport

from .config import GatewayConfig
from .containers import CheckedBinaryProtocol, CheckedCompactProtocol

try:  # the Cython encoder, several times faster on large answers
    from thriftpy2.protocol.cybin import TCyBinaryProtocol
    from thriftpy2.transport.buffered import TCyBufferedTransport
    from thriftpy2.transport.framed import TCyFramedTransport
except ImportError:  # pure-Python thriftpy2 builds (PyPy)
    TCyBinaryProtocol = None

__all__ = ["BoundedReader", "FramedReader", "RequestTooLarge", "protocols"]

_CHUNK = 64 << 10


class RequestTooLarge(TTransportException):
    """A request needs more bytes than ``max_request_bytes``; its connection is closed."""


class BoundedReader(TTransportBase):
    """Buffered reads from a socket, never more than ``limit`` bytes per request.

    :meth:`start_request` resets the budget; a read of ``n`` bytes first
    checks ``n`` against what is left (a negative ``n`` is refused too), so
    a forged length prefix costs nothing.  Reads block until ``n`` bytes
    arrived or the peer closed the connection.  ``max_container_entries``
    caps the entries one list, set or map of the request may declare.
    """

    def __init__(self, sock: socket.socket, limit: int, max_container_entries: int):
        self._sock = sock
        self.limit = limit
        self.max_container_entries = max_container_entries
        self._used = 0
        self._buf = bytearray()
        self._pos = 0

    def start_request(self) -> None:
        self._used = 0

    def left(self) -> int:
        """Bytes the current request may still read."""
        return self.limit - self._used

    def buffered(self) -> int:
        """Bytes received and not read yet (the start of a next, pipelined request)."""
        return len(self._buf) - self._pos

    def is_open(self) -> bool:
        return True

    def open(self) -> None:
        pass

    def close(self) -> None:
        pass

    def read(self, sz: int) -> bytes:
        if sz < 0:
            raise RequestTooLarge(TTransportException.UNKNOWN, f"negative length {sz} in the request")
        if self._used + sz > self.limit:
            raise RequestTooLarge(
                TTransportException.UNKNOWN,
                f"request needs more than {self.limit} bytes (a field asks for {sz})",
            )
        self._used += sz
        buf = self._buf
        while len(buf) - self._pos < sz:
            if self._pos:
                del buf[: self._pos]
                self._pos = 0
            chunk = self._sock.recv(max(_CHUNK, sz - len(buf)))
            if not chunk:
                raise TTransportException(TTransportException.END_OF_FILE, "peer closed the connection")
            buf += chunk
        out = bytes(buf[self._pos : self._pos + sz])
        self._pos += sz
        return out

    def write(self, buf: bytes) -> None:
        raise TTransportException(TTransportException.UNKNOWN, "BoundedReader is read-only")

    def flush(self) -> None:
        pass


class FramedReader(TFramedTransport):
    """thriftpy2's framed transport over a :class:`BoundedReader`, knowing what is left of the frame.

    A request is one frame, so :meth:`left` is the bytes of the current
    frame not yet read.
    """

    def __init__(self, reader: BoundedReader):
        super().__init__(reader)
        self.max_container_entries = reader.max_container_entries
        self._frame_len = 0

    def read_frame(self) -> None:
        (size,) = struct.unpack("!i", readall(self._trans.read, 4))
        self._rbuf = BytesIO(readall(self._trans.read, size))
        self._frame_len = size

    def left(self) -> int:
        """Bytes of the current frame not yet read."""
        return self._frame_len - self._rbuf.tell()


def protocols(config: GatewayConfig, sock: socket.socket):
    """(reader, input protocol, output protocol) for one accepted connection."""
    reader = BoundedReader(sock, config.max_request_bytes, config.max_container_entries)
    out_sock = TSocket(sock=sock)
    in_trans = FramedReader(reader) if config.framed else reader
    if config.compact:
        iprot = CheckedCompactProtocol(in_trans)
        out_trans = TFramedTransport(out_sock) if config.framed else TBufferedTransport(out_sock)
        oprot = TCompactProtocol(out_trans)
    else:
        iprot = CheckedBinaryProtocol(in_trans)
        if TCyBinaryProtocol is not None:
            out_trans = TCyFramedTransport(out_sock) if config.framed else TCyBufferedTransport(out_sock)
            oprot = TCyBinaryProtocol(out_trans)
        else:
            out_trans = TFramedTransport(out_sock) if config.framed else TBufferedTransport(out_sock)
            oprot = TBinaryProtocol(out_trans)
    return reader, iprot, oprot
