"""The region server's client: the embedded Connection / Table API over Arrow Flight.

``storage.connect("grpc://host:port", token=...)`` returns a
:class:`RemoteConnection`; its tables (:class:`RemoteTable`) take the same
calls as the embedded ones, and errors raised by the server arrive as the
same exception classes (:mod:`storage.server.remote_errors`).

Scans choose their API with ``mode``:

* ``"stream"`` (default): one do_get call; the server streams Arrow batches
  and gRPC flow control keeps the pipe full without round trips.
* ``"rpc"``: HBase's scanner protocol: open, then ``next(caching)`` calls
  of up to ``caching`` rows each, each one a round trip, then close.  Calls
  carry sequence numbers, so a retried call after a lost answer gets the
  same rows again instead of skipping them.
"""

from __future__ import annotations

from typing import Any, Sequence

import pyarrow as pa
import pyarrow.flight as flight

from ..errors import InvalidArgument, NamespaceNotFound, StorageError, TableNotFound
from ..namespaces import parse_table_name, validate_namespace
from ..schema import validate_table_name
from ..table.missing import absent_from
from .auth import AUTH_HEADER, bearer
from .remote_errors import from_flight_error
from .remote_table import RemoteTable
from .tls import TLS_SCHEME, root_certs, split_location
from .wire import Message, decode_message, encode_message

__all__ = ["connect_remote", "RemoteConnection"]


_RETRYABLE = (flight.FlightUnavailableError, flight.FlightTimedOutError)


class _Channel:
    """One Flight client plus the call options (token, timeout); maps errors back to engine classes."""

    def __init__(self, location: str, token: str | None, timeout: float | None,
                 tls_root_certs: str | bytes | None = None):
        headers = [(AUTH_HEADER.encode(), bearer(token))] if token else []
        self.location = location
        self.options = flight.FlightCallOptions(headers=headers, timeout=timeout)
        address, options = split_location(location)
        if tls_root_certs is None:
            tls_root_certs = options.get("tls_root_certs")
        tls = {}
        if tls_root_certs is not None:
            if not address.startswith(TLS_SCHEME + "://"):
                raise InvalidArgument(f"tls_root_certs needs a {TLS_SCHEME}:// location, got {location}")
            tls = {"tls_root_certs": root_certs(tls_root_certs)}
        try:
            self.client = flight.FlightClient(address, **tls)
        except (flight.FlightError, pa.ArrowException) as exc:
            raise InvalidArgument(f"cannot connect to {location}: {exc}") from None
        self.rpc_calls = 0
        self.closed = False

    def _check_open(self) -> None:
        if self.closed:
            raise StorageError(f"connection to {self.location} is closed")

    def call(self, action: str, header: dict, retries: int = 0) -> Message:
        """One request/response action; server errors are re-raised as their engine class.

        A transport failure (server unreachable, deadline passed) is retried
        ``retries`` times with the same body; only idempotent calls retry.
        """
        self._check_open()
        body = encode_message(header)
        for attempt in range(retries + 1):
            self.rpc_calls += 1
            try:
                results = list(self.client.do_action(flight.Action(action, body), self.options))
                break
            except _RETRYABLE as exc:
                if attempt == retries:
                    raise from_flight_error(exc) from None
            except flight.FlightError as exc:
                raise from_flight_error(exc) from None
        if len(results) != 1:
            raise InvalidArgument(f"{action} answered with {len(results)} results, expected 1")
        return decode_message(results[0].body, f"{action} answer")

    def stream(self, header: dict) -> flight.FlightStreamReader:
        self._check_open()
        try:
            return self.client.do_get(flight.Ticket(encode_message(header)), self.options)
        except flight.FlightError as exc:
            raise from_flight_error(exc) from None

    def close(self) -> None:
        self.closed = True
        self.client.close()


def connect_remote(root: str, token: str | None = None, timeout: float | None = None,
                   tls_root_certs: str | bytes | None = None, **options: Any) -> "RemoteConnection":
    """Connect to the region server at ``root`` (``grpc://host:port`` or ``grpc+tls://host:port``).

    ``token`` is sent with every call when the server requires one;
    ``timeout`` (seconds) bounds each call; ``tls_root_certs`` (PEM bytes or
    a file path) are the roots a ``grpc+tls`` server's certificate must
    chain to (default: the system's).  The embedded-only options
    (``read_only``, ``block_cache_size``, ``wal_sync``) belong to the server.
    """
    if options:
        raise InvalidArgument(
            f"unknown options for a remote connection: {sorted(options)}; a remote connection takes token,"
            " timeout and tls_root_certs"
        )
    return RemoteConnection(root, token=token, timeout=timeout, tls_root_certs=tls_root_certs)


class RemoteConnection:
    """A connection to a region server; same calls as :class:`storage.table.connection.Connection`."""

    def __init__(self, location: str, *, token: str | None = None, timeout: float | None = None,
                 tls_root_certs: str | bytes | None = None):
        if not isinstance(location, str) or "://" not in location:
            raise InvalidArgument(f"location must be a URI like grpc://host:port, got {location!r}")
        if token is not None and (not isinstance(token, str) or not token):
            raise InvalidArgument("token must be a non-empty string")
        self.root = location
        self._channel = _Channel(location, token, timeout, tls_root_certs)
        self._info: dict | None = None
        self.closed = False

    def _call(self, action: str, header: dict | None = None) -> Message:
        if self.closed:
            raise InvalidArgument("connection is closed")
        return self._channel.call(action, header or {})

    # -- admin -----------------------------------------------------------
    def server_info(self) -> dict:
        """The server's protocol version and limits (cached after the first call)."""
        if self._info is None:
            self._info = self._call("server_info").header
        return self._info

    def tables(self, namespace: str | None = None) -> list[bytes]:
        """Names of the tables the server hosts (bytes, as happybase returns them; ``ns:t`` outside default)."""
        header = {} if namespace is None else {"namespace": validate_namespace(namespace)}
        return list(self._call("list_tables", header).header["tables"])

    def create_namespace(self, name: str | bytes) -> None:
        """Create a namespace on the server."""
        self._call("create_namespace", {"name": validate_namespace(name, creating=True)})

    def list_namespaces(self) -> list[str]:
        """Names of the server's namespaces, ``default`` first."""
        return list(self._call("list_namespaces").header["namespaces"])

    def delete_namespace(self, name: str | bytes) -> None:
        """Drop an empty namespace on the server."""
        self._call("delete_namespace", {"name": validate_namespace(name, creating=True)})

    def is_table_available(self, name: str | bytes) -> bool:
        """Whether the server has a table of that name."""
        return bool(self._call("is_table_available", {"name": validate_table_name(name)}).header["available"])

    def create_table(self, name: str | bytes, families: dict, split_keys: Sequence[bytes] | None = None,
                     num_regions: int | None = None, settings: dict | None = None) -> "RemoteTable":
        """Create a pre-split table on the server (arguments as the embedded ``create_table``)."""
        name = validate_table_name(name)
        self._call("create_table", {
            "name": name, "families": families,
            "split_keys": list(split_keys) if split_keys is not None else None,
            "num_regions": num_regions, "settings": settings,
        })
        return RemoteTable(self, name)

    def delete_table(self, name: str | bytes, disable: bool = False) -> None:
        """Drop a table and its files on the server."""
        self._call("delete_table", {"name": validate_table_name(name), "disable": disable})

    def missing_table(self, name: str | bytes) -> str:
        """One line saying why the server has no table ``name``: no such
        namespace, or the tables its namespace holds (the closest names first)."""
        name = validate_table_name(name)
        namespace = parse_table_name(name).namespace
        try:
            names = [t.decode() for t in self.tables(namespace)]
        except NamespaceNotFound:
            return f"table {name} does not exist: there is no namespace {namespace} on {self.root}"
        return absent_from(name, f"on {self.root}", names)

    def table(self, name: str | bytes) -> "RemoteTable":
        """The named table; raises TableNotFound if the server has no such table."""
        name = validate_table_name(name)
        if not self.is_table_available(name):
            raise TableNotFound(self.missing_table(name))
        return RemoteTable(self, name)

    def list_scanners(self) -> dict:
        """Admin: the server's open RPC scanners and streams (``{"scanners": [...], "streams": [...]}``)."""
        return self._call("list_scanners").header

    def read_counters(self, table: str, reset: bool = False) -> dict:
        """Admin: the table's store file read counters summed over its files, with file and block counts."""
        return self._call("read_counters", {"table": validate_table_name(table), "reset": reset}).header

    @property
    def rpc_calls(self) -> int:
        """Calls made on this connection so far (every action and stream counts one)."""
        return self._channel.rpc_calls

    def close(self) -> None:
        """Close the channel; the server frees this client's scanners as their leases run out."""
        if not self.closed:
            self.closed = True
            self._channel.close()

    def __enter__(self) -> "RemoteConnection":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<RemoteConnection {self.root}>"
