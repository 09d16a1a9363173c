"""The region server's front door: connection, idle and request-size limits enforced before gRPC.

The gRPC server that pyarrow's Flight builds takes no limit on a received
message and receives all of it before any handler runs, so a size check in
``do_action`` comes after the memory is spent (a 256 MiB request took a
server to 790 MB resident, and 265 MB stayed held).  No pyarrow option
reaches gRPC's ``max_receive_message_length`` on the server side.

So the server's public port is this relay.  gRPC listens on an ephemeral
loopback port; each client connection accepted here gets one connection to
it, and two threads copy bytes between them.  The client-to-server
direction is read as HTTP/2 frames (only their 9-byte headers are parsed;
payloads pass through untouched):

* the first bytes must be the HTTP/2 client preface, so a peer sending
  anything else is closed before gRPC sees a byte;
* the header, continuation and data frames of one stream (one call: its
  request message) may carry at most ``max_request_bytes`` plus
  :data:`FRAMING_SLACK`; the calls of one connection not yet fully sent
  may hold at most :data:`PENDING_REQUESTS` times that.  Beyond, the
  connection is closed at once: the server never buffers an oversized
  request.  A request over ``max_request_bytes`` but within the slack
  reaches the handler, which refuses it with ``LimitExceeded`` in one line;
* a connection with no bytes in either direction for ``idle_timeout``
  seconds is closed (gRPC clients reconnect on their next call);
* at most ``max_connections`` client connections are open; more are closed
  as soon as they are accepted.

With TLS the door ends it (:mod:`storage.server.tls_door`): the limits above
apply to the decrypted frames, and gRPC behind the door speaks plaintext on
loopback only.

The server-to-client direction is copied as it comes.  gRPC sees every
call arrive from this relay, so :meth:`FrontDoor.client_peer` turns the
peer gRPC reports back into the client's own address, which the scanner
limits and the cancelling of a stalled client's connection
(:mod:`storage.server.connections`) go by.
"""

from __future__ import annotations

import fcntl
import logging
import os
import select
import socket
import ssl
import struct
import sys
import threading
import time

from .connections import normal_host, peer_address
from .tls_door import TlsConnection

__all__ = ["FrontDoor", "FRAMING_SLACK", "PENDING_REQUESTS", "HTTP2_PREFACE"]

log = logging.getLogger("storage.server")

HTTP2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
FRAMING_SLACK = 1 << 20
"""Bytes a call may carry beyond ``max_request_bytes``: gRPC's message prefix, the
action name, the headers (the token), so a request just over the limit still
reaches the handler and gets its one-line ``LimitExceeded``."""
PENDING_REQUESTS = 4
"""How many largest-allowed requests one connection may have partly sent at a time."""
MAX_PENDING_STREAMS = 1024
"""Calls one connection may have begun and not finished sending."""

_FRAME = struct.Struct(">I")  # 24-bit length (the top byte is read as zero), then type, flags
_HEADER_LEN = 9
_DATA, _HEADERS, _RST_STREAM, _CONTINUATION = 0x0, 0x1, 0x3, 0x9
_END_STREAM = 0x1
_UP_CHUNK = 64 << 10
_DOWN_CHUNK = 256 << 10
_HOP_BUFFER = 256 << 10
_SWITCH_INTERVAL = 0.0002  # seconds
_splice = getattr(os, "splice", None) if hasattr(fcntl, "F_SETPIPE_SZ") else None  # Linux, Python 3.10+


class _RequestTooLarge(Exception):
    """A client sent more than a call or a connection may hold."""


class _FrameMeter:
    """Follows the HTTP/2 frames a client sends and charges each call's bytes against the limits."""

    def __init__(self, per_call: int, per_connection: int):
        self.per_call = per_call
        self.per_connection = per_connection
        self._preface = b""
        self._header = b""
        self._left = 0  # payload bytes of the current frame still to come
        self._calls: dict[int, int] = {}  # stream id -> bytes, for calls still being sent
        self._pending = 0

    def feed(self, data: bytes) -> None:
        """Account for ``data``, the next bytes from the client; raise when a limit is passed."""
        view = memoryview(data)
        if len(self._preface) < len(HTTP2_PREFACE):
            need = len(HTTP2_PREFACE) - len(self._preface)
            self._preface += bytes(view[:need])
            if not HTTP2_PREFACE.startswith(self._preface):
                raise ValueError("the client did not open with the HTTP/2 preface (not a gRPC client)")
            view = view[need:]
        pos, end = 0, len(view)
        while pos < end:
            if self._left:  # payload: passes untouched, charged when its frame's header came
                step = min(self._left, end - pos)
                self._left -= step
                pos += step
                continue
            need = _HEADER_LEN - len(self._header)
            self._header += bytes(view[pos:pos + need])
            pos += min(need, end - pos)
            if len(self._header) == _HEADER_LEN:
                self._frame(self._header)
                self._header = b""

    def _frame(self, header: bytes) -> None:
        """Charge a frame from its header, before any of its payload is passed on."""
        length = _FRAME.unpack_from(b"\x00" + header[:3])[0]
        kind, flags = header[3], header[4]
        stream = _FRAME.unpack_from(header, 5)[0] & 0x7FFFFFFF
        self._left = length
        if stream and kind in (_DATA, _HEADERS, _CONTINUATION):
            if stream not in self._calls and len(self._calls) >= MAX_PENDING_STREAMS:
                raise _RequestTooLarge(f"more than {MAX_PENDING_STREAMS} calls begun and not finished")
            total = self._calls.get(stream, 0) + length
            self._calls[stream] = total
            self._pending += length
            if total > self.per_call:
                raise _RequestTooLarge(f"a request of more than {total} bytes (the limit is {self.per_call},"
                                       " max_request_bytes plus framing)")
            if self._pending > self.per_connection:
                raise _RequestTooLarge(f"{self._pending} bytes of requests not finished at once (the limit is"
                                       f" {self.per_connection})")
        if stream and (kind == _RST_STREAM or (kind in (_DATA, _HEADERS) and flags & _END_STREAM)):
            # the call's request is complete (or abandoned): its bytes are gRPC's to handle now
            self._pending -= self._calls.pop(stream, 0)


class _Relay:
    """One client connection and its connection to gRPC, copied both ways by two threads."""

    def __init__(self, door: "FrontDoor", client: socket.socket, peer: str, upstream: socket.socket):
        self.door = door
        self.client = client
        self.peer = peer
        self.upstream = upstream
        self.upstream_port = upstream.getsockname()[1]
        self.last = time.monotonic()
        self._closed = threading.Event()
        self._ended = 0  # threads finished; the second closes both sockets (none is closed while in use)
        self._ended_lock = threading.Lock()

    def start(self) -> None:
        threading.Thread(target=self._up, name="front-door-up", daemon=True).start()
        threading.Thread(target=self._down, name="front-door-down", daemon=True).start()

    def close(self) -> None:
        """End both connections (either thread, the idle check or shutdown may call it)."""
        if self._closed.is_set():
            return
        self._closed.set()
        for sock in (self.client, self.upstream):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self.door._forget(self)

    def _end(self) -> None:
        self.close()
        with self._ended_lock:
            self._ended += 1
            last = self._ended == 2
        if last:
            self.client.close()
            self.upstream.close()

    def _up(self) -> None:
        meter = _FrameMeter(self.door.per_call, self.door.per_call * PENDING_REQUESTS)
        idle = self.door.idle_timeout
        try:
            self.client.settimeout(idle or None)
            while not self._closed.is_set():
                try:
                    data = self.client.recv(_UP_CHUNK)
                except socket.timeout:
                    quiet = time.monotonic() - self.last
                    if quiet >= idle:
                        log.info("closing connection from %s: idle for %g s (idle_timeout)", self.peer, idle)
                        return
                    self.client.settimeout(idle - quiet)
                    continue
                if not data:
                    return
                self.last = time.monotonic()
                meter.feed(data)
                self.upstream.sendall(data)
                self.client.settimeout(idle or None)
        except _RequestTooLarge as exc:
            log.warning("closing connection from %s: %s (max_request_bytes)", self.peer, exc)
        except ValueError as exc:
            log.info("closing connection from %s: %s", self.peer, exc)
        except OSError:
            pass  # either side went away
        finally:
            self._end()

    def _down(self) -> None:
        try:
            if _splice is not None and not isinstance(self.client, TlsConnection):  # TLS bytes need encrypting
                self._down_splice()
            else:
                self._down_copy()
        except OSError:
            pass
        finally:
            self._end()

    def _down_copy(self) -> None:
        while True:
            data = self.upstream.recv(_DOWN_CHUNK)
            if not data:
                return
            self.last = time.monotonic()
            self.client.sendall(data)
            self.last = time.monotonic()

    def _down_splice(self) -> None:
        """Move gRPC's answers to the client through a pipe, in the kernel: scans stream at
        loopback speed instead of through a Python buffer."""
        pipe_r, pipe_w = os.pipe()
        try:
            try:
                fcntl.fcntl(pipe_w, fcntl.F_SETPIPE_SZ, _DOWN_CHUNK)
            except OSError:
                pass  # the default pipe size works, in smaller steps
            source, sink = self.upstream.fileno(), self.client.fileno()
            while True:
                n = _splice(source, pipe_w, _DOWN_CHUNK)
                if n == 0:
                    return
                self.last = time.monotonic()
                while n:
                    try:
                        n -= _splice(pipe_r, sink, n)
                    except BlockingIOError:  # the client socket has a timeout, so it is non-blocking
                        select.select([], [sink], [], 1.0)
                        if self._closed.is_set():
                            return
                self.last = time.monotonic()
        finally:
            os.close(pipe_r)
            os.close(pipe_w)


class FrontDoor:
    """Accepts clients on ``host``:``port`` and relays each to gRPC on loopback ``upstream_port``.

    ``max_request_bytes`` bounds what one call may send (plus
    :data:`FRAMING_SLACK`), ``idle_timeout`` (seconds; 0: never) closes
    silent connections, ``max_connections`` bounds open client connections.
    With ``tls`` (a server context, :func:`storage.server.tls_door.server_context`) the
    door speaks TLS to clients and relays the decrypted stream to gRPC.
    Call :meth:`start`, then :meth:`close` to stop accepting and end every
    connection.
    """

    def __init__(self, host: str, port: int, upstream_port: int, *, max_request_bytes: int,
                 idle_timeout: float, max_connections: int, tls: ssl.SSLContext | None = None):
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        dual = family == socket.AF_INET6 and host == "::" and socket.has_dualstack_ipv6()
        self._listener = socket.create_server((host, port), family=family, backlog=128, dualstack_ipv6=dual)
        self.port = self._listener.getsockname()[1]
        self.upstream_port = upstream_port
        self.per_call = max_request_bytes + FRAMING_SLACK
        self.idle_timeout = idle_timeout
        self.max_connections = max_connections
        self.tls = tls
        self._relays: dict[int, _Relay] = {}  # by the local port of the relay's gRPC connection
        self._lock = threading.Lock()
        self._closing = False
        self._thread = threading.Thread(target=self._accept, name="front-door", daemon=True)

    def start(self) -> None:
        """Start accepting clients (a daemon thread)."""
        # A relay thread waiting for the GIL behind the scan handlers delays every frame it
        # passes, PING acks too, and gRPC clients size their flow-control windows from that
        # round trip: at Python's 5 ms switch interval a client that stopped reading was sent
        # 16 MB per stream before gRPC held the server back.
        sys.setswitchinterval(min(sys.getswitchinterval(), _SWITCH_INTERVAL))
        self._thread.start()

    @property
    def open_connections(self) -> int:
        """Client connections open now."""
        with self._lock:
            return len(self._relays)

    def client_peer(self, grpc_peer: str) -> str:
        """The client behind a call, as gRPC would name it (``ipv4:10.0.0.5:51234``), from
        the peer gRPC reports (this relay's own connection); unknown peers come back unchanged."""
        address = peer_address(grpc_peer)
        if address is None:
            return grpc_peer
        with self._lock:
            relay = self._relays.get(address[1])
        return relay.peer if relay is not None else grpc_peer

    def _accept(self) -> None:
        while True:
            try:
                client, address = self._listener.accept()
            except OSError:
                return  # closed
            host = normal_host(address[0])
            kind = "ipv6" if ":" in host else "ipv4"
            peer = f"{kind}:[{host}]:{address[1]}" if kind == "ipv6" else f"{kind}:{host}:{address[1]}"
            with self._lock:
                full = len(self._relays) >= self.max_connections
            if full or self._closing:
                if full:
                    log.warning("refusing connection from %s: %d connections open (max_connections)", peer,
                                self.max_connections)
                client.close()
                continue
            try:
                upstream = socket.create_connection(("127.0.0.1", self.upstream_port))
            except OSError as exc:
                log.warning("refusing connection from %s: the server's gRPC port is unreachable: %s", peer, exc)
                client.close()
                continue
            for sock in (client, upstream):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            # Small buffers on the relay's side of each hop: a client that stops reading
            # holds gRPC back about as soon as without the relay (flow control and the
            # stream leases see it), instead of after megabytes of kernel buffers.
            upstream.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, _HOP_BUFFER)
            client.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, _HOP_BUFFER)
            if self.tls is not None:  # the handshake happens on the relay's own thread, at its first read
                client = TlsConnection(self.tls, client)
            relay = _Relay(self, client, peer, upstream)
            with self._lock:
                self._relays[relay.upstream_port] = relay
            relay.start()

    def _forget(self, relay: _Relay) -> None:
        with self._lock:
            if self._relays.get(relay.upstream_port) is relay:
                del self._relays[relay.upstream_port]

    def close(self) -> None:
        """Stop accepting and end every open connection."""
        self._closing = True
        try:
            self._listener.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._listener.close()
        with self._lock:
            relays = list(self._relays.values())
        for relay in relays:
            relay.close()
