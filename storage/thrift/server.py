"""The gateway: a listening socket, a selector over idle connections, a pool of worker threads.

HBase's default Thrift server serves one connection per pooled thread while
it is open, so a few dozen idle clients lock everyone else out.  Here an
idle connection costs a socket and no thread: the accept loop watches every
idle connection with a selector and hands one to a worker only when bytes
arrive; the worker answers the requests it has and gives the connection
back.  Connections beyond ``max_connections`` (or ``max_connections_per_host``
from one host) are closed when accepted, and a connection silent for
``idle_timeout`` seconds, between requests or in the middle of one, is
closed.  A request that cannot be decoded (a wrong protocol, a garbage or
oversized frame, a length prefix beyond the request limit) or that names an
unknown method closes that connection only, after a one-line log entry; the
gateway goes on serving the others.
"""

from __future__ import annotations

import collections
import itertools
import logging
import selectors
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from thriftpy2.thrift import TApplicationException, TProcessor
from thriftpy2.transport import TTransportException

from ..table.connection import Connection
from ..errors import InvalidArgument
from .config import GatewayConfig
from .errors import one_line
from .handler import GatewayState, HbaseHandler
from .idl import hbase
from .scanners import ScannerRegistry
from .transport import protocols

__all__ = ["ThriftGateway"]

log = logging.getLogger("storage.thrift")


class _UnknownMethod(Exception):
    """The peer called a method the service does not have."""


class _Processor(TProcessor):
    """thriftpy2's processor, except that an unknown method also ends the connection."""

    def process(self, iprot, oprot) -> None:
        api, seqid, result, call = self.process_in(iprot)
        if isinstance(result, TApplicationException):
            self.send_exception(oprot, api, result, seqid)
            raise _UnknownMethod(f"unknown method {api!r}")
        try:
            result.success = call()
        except Exception as exc:
            if not self.handle_exception(exc, result):
                raise
        if not result.oneway:
            self.send_result(oprot, api, result, seqid)


class _Client:
    """One accepted connection: its socket, its protocols and handler, and when it last spoke."""

    __slots__ = ("id", "sock", "peer", "host", "reader", "iprot", "oprot", "processor", "last")

    def __init__(self, connection_id: int, sock: socket.socket, peer, host: str, gateway: "ThriftGateway"):
        self.id = connection_id
        self.sock = sock
        self.peer = peer
        self.host = host
        self.reader, self.iprot, self.oprot = protocols(gateway.config, sock)
        self.processor = _Processor(hbase.Hbase, HbaseHandler(gateway.state, connection_id))
        self.last = time.monotonic()


class ThriftGateway:
    """An HBase Thrift 1 gateway over the tables under ``root``.

    ``serve()`` runs the accept loop in the calling thread until
    ``shutdown()`` (from another thread or a signal handler).
    """

    def __init__(self, root: str, config: GatewayConfig | None = None):
        self.config = config = config or GatewayConfig()
        if isinstance(root, str) and root.startswith(("grpc://", "grpc+tcp://", "grpc+tls://")):
            raise InvalidArgument(
                f"--root {root}: the Thrift gateway serves a table directory or filesystem URI, not a region server"
            )
        self.connection = Connection(root, read_only=config.read_only, block_cache_size=config.block_cache_size)
        family = socket.AF_INET6 if ":" in config.host else socket.AF_INET
        try:
            self._listener = socket.create_server((config.host, config.port), family=family, backlog=128)
        except OSError as exc:
            self.connection.close()
            raise InvalidArgument(f"cannot listen on {config.host}:{config.port}: {exc.strerror}") from None
        self.port = self._listener.getsockname()[1]
        self.scanners = ScannerRegistry(
            config.scanner_lease_timeout, config.max_scanners_per_connection, config.max_scanners,
            prefetch_workers=config.workers if config.prefetch else 0,
        )
        self.state = GatewayState(self.connection, self.scanners, config.host, self.port,
                                  config.max_rows_per_call, config.read_only)
        self._pool = ThreadPoolExecutor(max_workers=config.workers, thread_name_prefix="thrift-worker")
        self._ids = itertools.count(1)
        self._per_host: dict[str, int] = {}  # open connections by peer host, under _clients_lock
        self._clients: dict[int, _Client] = {}  # every open connection, idle or served
        self._clients_lock = threading.Lock()
        self._closing = threading.Event()
        self._selector = selectors.DefaultSelector()
        self._wake_r, self._wake_w = socket.socketpair()  # a worker handing a connection back wakes the loop
        self._wake_r.setblocking(False)
        # from workers: connections to watch again, or None for one a worker closed
        self._returned: collections.deque[_Client | None] = collections.deque()
        self._ready: collections.deque[_Client] = collections.deque()  # spoke, waiting for a worker slot
        self._dispatched = 0  # connections queued for or held by a worker (accept loop only)

    @property
    def location(self) -> str:
        return f"thrift://{self.config.host}:{self.port}"

    @property
    def open_connections(self) -> int:
        """Connections open now, idle or served."""
        with self._clients_lock:
            return len(self._clients)

    # -- serving ---------------------------------------------------------
    def serve(self) -> None:
        """Accept and watch connections until :meth:`shutdown`."""
        self.scanners.start_reaper()
        self._listener.setblocking(False)
        self._selector.register(self._listener, selectors.EVENT_READ)
        self._selector.register(self._wake_r, selectors.EVENT_READ)
        idle = self.config.idle_timeout
        next_sweep = time.monotonic()
        try:
            while not self._closing.is_set():
                for key, _ in self._selector.select(timeout=0.5):
                    if key.fileobj is self._listener:
                        self._accept()
                    elif key.fileobj is self._wake_r:
                        self._drain_wakeups()
                    else:
                        self._selector.unregister(key.fileobj)
                        self._ready.append(key.data)
                self._take_back()
                self._dispatch()
                now = time.monotonic()
                if idle and now >= next_sweep:
                    self._close_idle(now - idle)
                    next_sweep = now + min(idle / 4, 1.0)
        finally:
            self._selector.close()

    def _accept(self) -> None:
        while True:
            try:
                sock, peer = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                if self._closing.is_set():
                    return
                raise
            host = peer[0] if isinstance(peer, tuple) else str(peer)
            refused = self._admit(host)
            if refused:
                log.warning("refusing connection from %s: %s", _peer(peer), refused)
                sock.close()
                continue
            sock.setblocking(True)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            try:
                client = _Client(next(self._ids), sock, peer, host, self)
            except BaseException:
                self._leave(host)
                sock.close()
                raise
            with self._clients_lock:
                self._clients[client.id] = client
            self._selector.register(sock, selectors.EVENT_READ, client)

    def _admit(self, host: str) -> str | None:
        """Count a new connection from ``host``; or say why it is refused (a limit is reached)."""
        with self._clients_lock:
            if len(self._clients) >= self.config.max_connections:
                return f"{self.config.max_connections} connections open (max_connections)"
            n = self._per_host.get(host, 0)
            if n >= self.config.max_connections_per_host:
                return (f"{self.config.max_connections_per_host} connections from that host open"
                        " (max_connections_per_host)")
            self._per_host[host] = n + 1
            return None

    def _leave(self, host: str) -> None:
        with self._clients_lock:
            n = self._per_host.pop(host) - 1
            if n:
                self._per_host[host] = n

    def _drain_wakeups(self) -> None:
        try:
            while self._wake_r.recv(4096):
                pass
        except (BlockingIOError, InterruptedError):
            pass

    def _take_back(self) -> None:
        """Watch again the connections workers have finished with."""
        while self._returned:
            client = self._returned.popleft()
            self._dispatched -= 1
            if client is not None:  # None: the worker closed it
                client.last = time.monotonic()
                self._selector.register(client.sock, selectors.EVENT_READ, client)

    def _dispatch(self) -> None:
        """Hand connections that spoke to workers: ``workers`` at work, ``max_queued`` more waiting."""
        limit = self.config.workers + self.config.max_queued
        while self._ready and self._dispatched < limit:
            self._dispatched += 1
            self._pool.submit(self._serve_requests, self._ready.popleft())

    def _close_idle(self, before: float) -> None:
        quiet = [key.data for key in list(self._selector.get_map().values())
                 if isinstance(key.data, _Client) and key.data.last < before]
        for client in quiet:
            self._selector.unregister(client.sock)
            log.info("closing connection %d from %s: idle for %g s (idle_timeout)", client.id, _peer(client.peer),
                     self.config.idle_timeout)
            self._end(client)

    def _serve_requests(self, client: _Client) -> None:
        """Answer the requests ``client`` has sent, then hand it back to the accept loop (or close it)."""
        keep = False
        try:
            if self._closing.is_set():
                return
            # a request that stops arriving part way holds this worker for idle_timeout at most
            client.sock.settimeout(self.config.idle_timeout or None)
            while True:
                client.reader.start_request()
                client.processor.process(client.iprot, client.oprot)
                if not client.reader.buffered() or self._closing.is_set():
                    break
            keep = not self._closing.is_set()
        except socket.timeout:
            log.info("closing connection %d from %s: silent for %g s in a request (idle_timeout)", client.id,
                     _peer(client.peer), self.config.idle_timeout)
        except TTransportException as exc:
            if exc.type != TTransportException.END_OF_FILE:
                log.warning("closing connection %d from %s: %s", client.id, _peer(client.peer), one_line(exc))
        except (OSError, EOFError):
            pass  # the peer went away
        except Exception as exc:  # a request that does not decode: this connection ends, the gateway goes on
            log.warning("closing connection %d from %s: %s: %s", client.id, _peer(client.peer),
                        type(exc).__name__, one_line(exc))
        finally:
            if keep:
                self._returned.append(client)
            else:
                self._end(client)
                self._returned.append(None)
            try:
                self._wake_w.send(b"\0")
            except OSError:
                pass  # shutting down

    def _end(self, client: _Client) -> None:
        """Forget and close one connection."""
        with self._clients_lock:
            if self._clients.pop(client.id, None) is None:
                return
        self.scanners.close_connection(client.id)
        self._leave(client.host)  # before the close: a peer that sees it may reconnect at once
        try:
            client.sock.close()
        except OSError:
            pass

    def shutdown(self) -> None:
        """Stop accepting, end every connection, close scanners and tables."""
        if self._closing.is_set():
            return
        self._closing.set()
        self._listener.close()
        with self._clients_lock:
            clients = list(self._clients.values())
        for client in clients:
            try:
                client.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self._pool.shutdown(wait=True)
        for client in clients:
            self._end(client)
        self.scanners.stop()
        self.connection.close()
        self._wake_w.close()
        self._wake_r.close()


def _peer(peer) -> str:
    return f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) and len(peer) >= 2 else str(peer)
