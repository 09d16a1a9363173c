"""Settings and limits of the Thrift gateway."""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import InvalidArgument
from ..server.config import check_common, check_idle_timeout, is_loopback

__all__ = ["GatewayConfig", "DEFAULT_PORT"]

DEFAULT_PORT = 9090  # HBase's hbase.regionserver.thrift.port


@dataclass(frozen=True)
class GatewayConfig:
    """How a :class:`~storage.thrift.server.ThriftGateway` binds, speaks and bounds work.

    ``framed``/``compact`` choose HBase's ``-f``/``-c`` transports; the
    defaults (buffered transport, binary protocol) are HBase's and
    happybase's.  At most ``max_connections`` connections are open, idle or
    served; more are closed when accepted.  An idle connection holds no
    thread: ``workers`` threads answer the connections that sent a request,
    and up to ``max_queued`` more such connections wait for a worker (the
    rest wait, unread, until one is free).  A request larger than
    ``max_request_bytes``, or with a list, set or map declaring more than
    ``max_container_entries`` entries, closes its connection.  One peer
    host holds at most ``max_connections_per_host`` connections at a time
    (default, None: ``max_connections``, since on loopback every client is
    one host); more from it are closed at once.  Scanners idle for
    ``scanner_lease_timeout`` seconds are reclaimed; at most
    ``max_scanners_per_connection`` are open per connection and
    ``max_scanners`` in all.  ``max_rows_per_call`` caps one
    scannerGetList (HBase clients ask for ``batch_size`` rows at a time).
    ``prefetch`` reads each scanner's next batch while the client handles
    the last one.  ``idle_timeout`` (seconds; 0: never) closes a connection
    that sends nothing for that long, between requests or part way through
    one (HBase's ``hbase.thrift.server.socket.read.timeout``, 60 s).
    """

    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    framed: bool = False
    compact: bool = False
    allow_remote: bool = False
    read_only: bool = False
    workers: int = 64
    max_queued: int = 256
    max_connections: int = 1024
    max_request_bytes: int = 16 << 20
    max_container_entries: int = 1_000_000
    max_connections_per_host: int | None = None
    max_rows_per_call: int = 100_000
    max_scanners_per_connection: int = 64
    max_scanners: int = 1024
    scanner_lease_timeout: float = 60.0
    prefetch: bool = True
    idle_timeout: float = 60.0
    block_cache_size: int = 256 << 20

    def __post_init__(self) -> None:
        if not isinstance(self.workers, int) or isinstance(self.workers, bool) or self.workers < 1:
            raise InvalidArgument(f"workers must be a positive int, got {self.workers!r}")
        if self.max_connections_per_host is None and isinstance(self.max_connections, int):
            object.__setattr__(self, "max_connections_per_host", self.max_connections)
        check_common(self)
        if not self.loopback and not self.allow_remote:
            raise InvalidArgument(
                f"refusing to bind {self.host}: Thrift 1 carries no credentials, so anyone who can reach "
                "the port could read and write every table; bind loopback or pass --allow-remote"
            )
        if not isinstance(self.scanner_lease_timeout, (int, float)) or self.scanner_lease_timeout <= 0:
            raise InvalidArgument(
                f"scanner_lease_timeout must be a positive number of seconds, got {self.scanner_lease_timeout!r}"
            )
        check_idle_timeout(self.idle_timeout)
        if self.max_request_bytes < 1024:
            raise InvalidArgument(f"max_request_bytes must be at least 1024, got {self.max_request_bytes}")

    @property
    def loopback(self) -> bool:
        """True when the gateway only accepts connections from this machine."""
        return is_loopback(self.host)

    @property
    def transport_name(self) -> str:
        return "framed" if self.framed else "buffered"

    @property
    def protocol_name(self) -> str:
        return "compact" if self.compact else "binary"
