"""Settings and limits of the region server."""

from __future__ import annotations

from dataclasses import dataclass, fields

from ..errors import InvalidArgument

__all__ = ["ServerConfig", "LOOPBACK_HOSTS", "is_loopback", "check_common", "check_idle_timeout"]

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")


def is_loopback(host: str) -> bool:
    """True when a server bound to ``host`` only accepts connections from this machine."""
    return host in LOOPBACK_HOSTS or host.startswith("127.")


def check_idle_timeout(value) -> None:
    """Refuse an ``idle_timeout`` that is not a non-negative number of seconds."""
    if not isinstance(value, (int, float)) or isinstance(value, bool) or value < 0:
        raise InvalidArgument(f"idle_timeout must be a non-negative number of seconds (0: never), got {value!r}")


def check_common(config) -> None:
    """Check what every server config has: ``host``, ``port``, ``max_*`` limits, ``block_cache_size``."""
    if not isinstance(config.host, str) or not config.host:
        raise InvalidArgument(f"host must be a non-empty string, got {config.host!r}")
    if not isinstance(config.port, int) or not 0 <= config.port < 65536:
        raise InvalidArgument(f"port must be an int in [0, 65535], got {config.port!r}")
    for f in fields(config):
        if f.name.startswith("max_"):
            value = getattr(config, f.name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise InvalidArgument(f"{f.name} must be a positive int, got {value!r}")
    if not isinstance(config.block_cache_size, int) or config.block_cache_size < 0:
        raise InvalidArgument(f"block_cache_size must be a non-negative int, got {config.block_cache_size!r}")


@dataclass(frozen=True)
class ServerConfig:
    """How a :class:`~storage.server.service.RegionServer` binds, authenticates and bounds work.

    ``lease_timeout`` (seconds) is how long an RPC scanner may sit idle
    before the server closes it (HBase's ``hbase.client.scanner.timeout.period``).
    A request body above ``max_request_bytes``, a next() asking for more than
    ``max_next_rows`` rows, or an open scanner or stream beyond
    ``max_scanners_per_client`` (per client connection) or ``max_scanners``
    (in all) is refused with :class:`~storage.server.remote_errors.LimitExceeded`.
    ``max_next_bytes`` caps the size of one next() answer, whatever the
    client asks for (HBase's ``hbase.server.scanner.max.result.size``).

    Before gRPC sees a byte (:mod:`storage.server.front_door`): a call
    sending more than ``max_request_bytes`` plus 1 MiB of framing closes its
    connection at once (gRPC would buffer all of it first), at most
    ``max_connections`` client connections are open (more are closed when
    accepted), and a connection silent both ways for ``idle_timeout``
    seconds is closed (0: never; 60 s, as the Thrift gateway's).
    ``front_door=False`` lets gRPC hold the public port itself (and end TLS):
    the relay's cost goes (a little CPU per streamed byte), and so do those
    three limits; the handlers' own checks remain (a request over
    ``max_request_bytes`` is then refused after gRPC has received it whole).

    A host other than loopback needs a ``token``, or ``allow_remote`` to
    serve anyone who can reach the port.  ``tls_cert`` and ``tls_key``
    (PEM file paths, both or neither) make the server speak ``grpc+tls``,
    so the token and the data are encrypted on the network; the front door
    ends TLS (:mod:`storage.server.tls_door`) and keeps its limits.
    """

    host: str = "127.0.0.1"
    port: int = 0
    token: str | None = None
    lease_timeout: float = 60.0
    max_request_bytes: int = 16 << 20
    max_next_rows: int = 100_000
    max_next_bytes: int = 64 << 20
    max_scanners_per_client: int = 64
    max_scanners: int = 1024
    max_connections: int = 1024
    idle_timeout: float = 60.0
    front_door: bool = True
    block_cache_size: int = 256 << 20
    # scans keep what they build in the block cache (storage/storefile/cache_memo.py)
    cache_results: bool = False
    allow_remote: bool = False
    tls_cert: str | None = None
    tls_key: str | None = None

    def __post_init__(self) -> None:
        check_common(self)
        if self.token is not None and (not isinstance(self.token, str) or not self.token.strip()):
            raise InvalidArgument("token must be a non-empty string when given")
        if (self.tls_cert is None) != (self.tls_key is None):
            raise InvalidArgument("TLS needs both a certificate and its key (--tls-cert and --tls-key)")
        if not self.loopback and self.token is None and not self.allow_remote:
            raise InvalidArgument(
                f"refusing to bind {self.host} without a token: anyone who can reach the port could read and"
                " write every table; bind loopback, give --token-file (with --tls-cert/--tls-key), or pass"
                " --allow-remote"
            )
        if not isinstance(self.lease_timeout, (int, float)) or self.lease_timeout <= 0:
            raise InvalidArgument(f"lease_timeout must be a positive number of seconds, got {self.lease_timeout!r}")
        check_idle_timeout(self.idle_timeout)
        if not isinstance(self.front_door, bool):
            raise InvalidArgument(f"front_door must be True or False, got {self.front_door!r}")

    @property
    def loopback(self) -> bool:
        """True when the server only accepts connections from this machine."""
        return is_loopback(self.host)

    @property
    def tls(self) -> bool:
        """True when the server speaks ``grpc+tls``."""
        return self.tls_cert is not None

    def limits(self) -> dict:
        """The limits a client may want to know (sent by the server_info action)."""
        return {
            "lease_timeout_ms": int(self.lease_timeout * 1000),
            "max_request_bytes": self.max_request_bytes,
            "max_next_rows": self.max_next_rows,
            "max_next_bytes": self.max_next_bytes,
            "max_scanners_per_client": self.max_scanners_per_client,
            "max_scanners": self.max_scanners,
            "max_connections": self.max_connections,
            "idle_timeout_ms": int(self.idle_timeout * 1000),
        }
