"""The gateway: a listening socket, a pool of worker threads, one handler per connection.

HBase's default Thrift server is a thread pool serving one connection per
thread while it is open; this is the same.  Each connection reads a
request, runs it and writes the answer, until the peer closes it.  A
request that cannot be decoded (a wrong protocol, a garbage or oversized
frame, a length prefix beyond the request limit) or that names an unknown
method closes that connection only, after a one-line log entry; the
gateway goes on serving the others.
"""

from __future__ import annotations

import itertools
import logging
import socket
import threading
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
        self._slots = threading.BoundedSemaphore(config.workers + config.max_queued)
        self._ids = itertools.count(1)
        self._per_host: dict[str, int] = {}  # open or queued connections by peer host, under _clients_lock
        self._clients: dict[int, socket.socket] = {}
        self._clients_lock = threading.Lock()
        self._closing = threading.Event()

    @property
    def location(self) -> str:
        return f"thrift://{self.config.host}:{self.port}"

    # -- serving ---------------------------------------------------------
    def serve(self) -> None:
        """Accept connections until :meth:`shutdown`."""
        self.scanners.start_reaper()
        self._listener.settimeout(0.5)  # wake up now and then to notice shutdown
        while not self._closing.is_set():
            try:
                sock, peer = self._listener.accept()
            except socket.timeout:
                continue
            except OSError:
                if self._closing.is_set():
                    break
                raise
            host = peer[0] if isinstance(peer, tuple) else str(peer)
            if not self._admit(host):
                log.warning("refusing connection from %s: %d connections from that host open or queued",
                            _peer(peer), self.config.max_connections_per_host)
                sock.close()
                continue
            if not self._slots.acquire(blocking=False):
                self._leave(host)
                log.warning("refusing connection from %s: %d connections open or queued",
                            _peer(peer), self.config.workers + self.config.max_queued)
                sock.close()
                continue
            sock.settimeout(self.config.idle_timeout or None)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._pool.submit(self._serve_connection, sock, peer, host)

    def _admit(self, host: str) -> bool:
        """Count a new connection from ``host``, unless it already holds ``max_connections_per_host``."""
        with self._clients_lock:
            n = self._per_host.get(host, 0)
            if n >= self.config.max_connections_per_host:
                return False
            self._per_host[host] = n + 1
            return True

    def _leave(self, host: str) -> None:
        with self._clients_lock:
            n = self._per_host.pop(host) - 1
            if n:
                self._per_host[host] = n

    def _serve_connection(self, sock: socket.socket, peer, host: str) -> None:
        connection_id = next(self._ids)
        with self._clients_lock:
            self._clients[connection_id] = sock
        try:
            if self._closing.is_set():
                return
            reader, iprot, oprot = protocols(self.config, sock)
            processor = _Processor(hbase.Hbase, HbaseHandler(self.state, connection_id))
            while not self._closing.is_set():
                reader.start_request()
                processor.process(iprot, oprot)
        except socket.timeout:
            log.info("closing connection %d from %s: idle for %g s", connection_id, _peer(peer),
                     self.config.idle_timeout)
        except TTransportException as exc:
            if exc.type != TTransportException.END_OF_FILE:
                log.warning("closing connection %d from %s: %s", connection_id, _peer(peer), one_line(exc))
        except (OSError, EOFError):
            pass  # the peer went away
        except Exception as exc:  # a request that does not decode: this connection ends, the gateway goes on
            log.warning("closing connection %d from %s: %s: %s", connection_id, _peer(peer),
                        type(exc).__name__, one_line(exc))
        finally:
            with self._clients_lock:
                self._clients.pop(connection_id, None)
            self.scanners.close_connection(connection_id)
            self._leave(host)  # before the close: a peer that sees it may reconnect at once
            try:
                sock.close()
            finally:
                self._slots.release()

    def shutdown(self) -> None:
        """Stop accepting, end every connection, close scanners and tables."""
        if self._closing.is_set():
            return
        self._closing.set()
        self._listener.close()
        with self._clients_lock:
            clients = list(self._clients.values())
        for sock in clients:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self._pool.shutdown(wait=True)
        self.scanners.stop()
        self.connection.close()


def _peer(peer) -> str:
    return f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) and len(peer) >= 2 else str(peer)
