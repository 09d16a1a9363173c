"""TLS at the region server's front door: the relay ends TLS, so it can read the frames.

A server given ``--tls-cert``/``--tls-key`` keeps its front door
(:mod:`storage.server.front_door`): the door holds the public port and
speaks TLS to clients with the server's certificate, gRPC listens in
plaintext on ``127.0.0.1`` only, and the relay meters the decrypted HTTP/2
frames exactly as it does without TLS.  Clients still connect with
``grpc+tls://`` and check the certificate; nothing leaves the machine
unencrypted.

:class:`TlsConnection` wraps one accepted socket.  TLS runs over two
in-memory buffers (:class:`ssl.MemoryBIO`) under a lock, and the socket's
own reads and writes happen outside it: the relay reads the client on one
thread while it writes to the client on another, and one OpenSSL
connection may not be used by two threads at once.  The handshake happens
on the first :meth:`~TlsConnection.recv`, so on the relay's reading
thread: a client slow to shake hands holds its own connection only, never
the accept loop, and the handshake must end within the socket's timeout
(the door's ``idle_timeout``).
"""

from __future__ import annotations

import socket
import ssl
import threading
import time

from ..errors import InvalidArgument

__all__ = ["server_context", "TlsConnection", "TlsHandshakeFailed"]

_ALPN = ["h2"]  # gRPC clients refuse a TLS connection that did not agree on HTTP/2


class TlsHandshakeFailed(ValueError):
    """A client's TLS handshake failed: the relay closes the connection and logs why, as it
    does for a client that does not open with HTTP/2."""


def server_context(cert_path: str, key_path: str) -> ssl.SSLContext:
    """A server-side TLS context holding the certificate (chain) in ``cert_path`` and its key.

    The files are expected to have been checked by :func:`storage.server.tls.read_pem`;
    a key that does not match the certificate, or that is encrypted, is one
    :class:`~storage.errors.InvalidArgument` naming the files.
    """
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2  # HTTP/2 needs TLS 1.2 or later (RFC 9113, 9.2)
    context.options |= ssl.OP_NO_COMPRESSION | ssl.OP_NO_RENEGOTIATION
    context.set_alpn_protocols(_ALPN)

    def no_password() -> bytes:
        # without a callback OpenSSL would ask for the passphrase on the terminal
        raise InvalidArgument(f"--tls-key {key_path} is encrypted; the server needs an unencrypted key")

    try:
        context.load_cert_chain(cert_path, key_path, password=no_password)
    except ssl.SSLError as exc:
        reason = exc.reason or str(exc)
        raise InvalidArgument(f"--tls-cert {cert_path} and --tls-key {key_path} are not a certificate and its"
                              f" key: {reason}") from None
    except OSError as exc:
        raise InvalidArgument(f"cannot read --tls-cert {cert_path} or --tls-key {key_path}:"
                              f" {exc.strerror or exc}") from None
    return context


class TlsConnection:
    """The server's side of one client's TLS connection, over the accepted socket ``sock``.

    Offers what the front door's relay uses of a socket: :meth:`recv` and
    :meth:`sendall` (plaintext; one thread may read while another writes),
    :meth:`settimeout`, :meth:`shutdown`, :meth:`close`.
    """

    def __init__(self, context: ssl.SSLContext, sock: socket.socket):
        self._sock = sock
        self._incoming = ssl.MemoryBIO()
        self._outgoing = ssl.MemoryBIO()
        self._tls = context.wrap_bio(self._incoming, self._outgoing, server_side=True)
        self._lock = threading.Lock()  # the TLS state: held only for in-memory work
        self._send_lock = threading.Lock()  # TLS records leave in the order they were made
        self._ready = threading.Event()  # set when the handshake is done, or the connection closed
        self._closed = False

    # -- what the relay calls ---------------------------------------------------------------------
    def recv(self, size: int) -> bytes:
        """Up to ``size`` bytes of plaintext from the client; ``b""`` when it has gone.

        The first call does the handshake.  Raises :class:`socket.timeout` as the socket
        does, and :class:`TlsHandshakeFailed` for a client that does not speak TLS to us.
        """
        if not self._ready.is_set():
            self._handshake()
        while True:
            with self._lock:
                try:
                    data = self._tls.read(size)
                except ssl.SSLWantReadError:
                    data = None
                except ssl.SSLZeroReturnError:  # the client's close_notify
                    data = b""
            self._flush()  # a read may answer the client (a key update, an alert)
            if data is not None:
                return data
            raw = self._sock.recv(max(size, 1 << 14))
            if not raw:
                return b""  # the client closed its side, without close_notify
            with self._lock:
                self._incoming.write(raw)

    def sendall(self, data: bytes) -> None:
        """Encrypt ``data`` and send all of it (after the handshake, which :meth:`recv` does)."""
        self._ready.wait()
        if self._closed:
            raise ConnectionAbortedError("the TLS connection is closed")
        view = memoryview(data)
        with self._lock:
            while view:
                view = view[self._tls.write(view):]
        self._flush()

    def settimeout(self, timeout: float | None) -> None:
        """Set the socket's timeout, for reads and writes alike (as :meth:`socket.socket.settimeout`)."""
        self._sock.settimeout(timeout)

    def shutdown(self, how: int) -> None:
        """Shut the socket down; a writer still waiting for the handshake gives up."""
        self._closed = True
        self._ready.set()
        self._sock.shutdown(how)

    def close(self) -> None:
        """Close the socket."""
        self._closed = True
        self._ready.set()
        self._sock.close()

    # -- inside --------------------------------------------------------------------------------------
    def _handshake(self) -> None:
        timeout = self._sock.gettimeout()
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            while True:
                done, failure = False, None
                with self._lock:
                    try:
                        self._tls.do_handshake()
                        done = True
                    except ssl.SSLWantReadError:
                        pass  # more of the client's handshake is needed
                    except ssl.SSLError as exc:
                        failure = exc.reason or str(exc)
                self._flush()  # the server's handshake records, or the alert that ends a failed one
                if failure is not None:
                    raise TlsHandshakeFailed(f"TLS handshake failed: {failure}")
                if done:
                    self._ready.set()
                    return
                if deadline is not None:
                    # the whole handshake gets the timeout, so trickling it buys no time; no other
                    # thread uses the socket until the handshake is done (sendall waits for it)
                    left = deadline - time.monotonic()
                    if left <= 0:
                        raise socket.timeout("the TLS handshake did not end within the idle timeout")
                    self._sock.settimeout(left)
                raw = self._sock.recv(1 << 14)
                if not raw:
                    raise TlsHandshakeFailed("the client closed the connection during the TLS handshake")
                with self._lock:
                    self._incoming.write(raw)
        finally:
            try:
                self._sock.settimeout(timeout)
            except OSError:
                pass  # closed meanwhile: the relay is ending the connection

    def _flush(self) -> None:
        """Send whatever TLS records are waiting, in order."""
        with self._lock:
            if not self._outgoing.pending:
                return
        with self._send_lock:
            with self._lock:
                out = self._outgoing.read()
            if out:
                self._sock.sendall(out)
