"""The region server: the tables under one root, served over Arrow Flight.

* ``do_action`` answers request/response calls (admin, mutations, point
  reads, and the RPC scan API ``scan_open`` / ``scan_next`` / ``scan_close``);
  each body and answer is one message of :mod:`storage.server.wire`.
* ``do_get`` is the streaming scan: the ticket encodes a scan, and the server
  streams its Arrow record batches until the scan ends.  The stream is a
  ``GeneratorStream`` over ``Table.scan_batches``: a batch is produced only
  when gRPC can send it (a slow client holds the server back instead of
  making it buffer the table), and when the client goes away the generator
  is closed, which frees the scan.

See docs/server.md for the protocol and its limits.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any, Callable

import pyarrow as pa
import pyarrow.flight as flight

from ..cells import CELL_SCHEMA
from ..table.connection import Connection
from ..errors import clip
from ..read.scan_request import ScanRequest, check_wire_type
from ..table.table import Table
from .auth import TokenMiddlewareFactory
from .config import ServerConfig
from .connections import shutdown_connection
from .front_door import FrontDoor
from .remote_errors import LimitExceeded, RequestFieldError, to_flight_error
from .scanners import ScannerRegistry
from .streams import StreamIterator
from .tls import TLS_SCHEME, read_pem
from .tls_door import server_context
from .wire import ACTIONS, PROTOCOL_VERSION, PROTOCOL_VERSIONS, check_message_version, decode_message, encode_message

__all__ = ["RegionServer", "scan_request", "table_read_counters"]

_MUTATIONS = ("put", "delete", "delete_version")


def _field(header: dict, name: str, kind: type | tuple, required: bool = True, default: Any = None) -> Any:
    """Field ``name`` of a request, of exactly ``kind`` (a bool is not an int, nor an int a bool)."""
    if name not in header or header[name] is None:
        if required:
            raise RequestFieldError(f"request is missing {name!r}")
        return default
    return check_wire_type(name, header[name], kind, RequestFieldError)


def scan_request(raw: Any) -> ScanRequest:
    """Check a wire scan description (the protocol's ``scan`` object) and turn it into its request."""
    return ScanRequest.from_wire(raw, RequestFieldError)


def _read_options(h: dict) -> dict:
    """The typed ``columns`` / ``timestamp`` / ``include_timestamp`` options of a point read."""
    columns = _field(h, "columns", list, required=False)
    if columns is not None and not all(isinstance(c, (bytes, str)) for c in columns):
        raise RequestFieldError("columns must be a list of bytes or strings")
    return {
        "columns": columns,
        "timestamp": _field(h, "timestamp", int, required=False),
        "include_timestamp": _field(h, "include_timestamp", bool, required=False, default=False),
    }


def table_read_counters(table: Table, reset: bool = False) -> dict:
    """The read counters of every store file reader of ``table``, summed, with file and block counts.

    ``reset`` zeroes the counters after reading them (between benchmark runs).
    """
    readers = table.store_file_readers()
    totals = table.read_counters(reset=reset)
    files = len(readers)
    blocks = sum(r.block_count for r in readers)
    return {"counters": totals, "files": files, "blocks": blocks}


class RegionServer(flight.FlightServerBase):
    """Serves the tables under ``root`` (see the module docstring).

    ``serve()`` blocks until :meth:`shutdown`; :attr:`port` is the bound
    port (useful with port 0).  The server owns a writable
    :class:`~storage.table.connection.Connection`, so it holds the writer lock of
    every table it has opened.
    """

    def __init__(self, root: str, config: ServerConfig | None = None, *, read_only: bool = False):
        self.config = config = config or ServerConfig()
        host = f"[{config.host}]" if ":" in config.host else config.host
        middleware = {"auth": TokenMiddlewareFactory(config.token)} if config.token else {}
        # gRPC listens in plaintext on loopback behind the front door, which
        # enforces the size, idle and connection limits before gRPC buffers
        # anything (with TLS the door ends it, so it reads the frames); with
        # the door turned off, gRPC holds the public port and only the
        # handlers' checks apply.
        door = config.front_door
        scheme, certificates, tls_context = "grpc", [], None
        if config.tls:  # read (and refused) before the port is bound
            scheme = TLS_SCHEME
            cert, key = read_pem(config.tls_cert, "--tls-cert"), read_pem(config.tls_key, "--tls-key")
            if door:
                tls_context = server_context(config.tls_cert, config.tls_key)
            else:
                certificates = [flight.CertKeyPair(cert=cert, key=key)]
        bind = "grpc://127.0.0.1:0" if door else f"{scheme}://{host}:{config.port}"
        super().__init__(bind, middleware=middleware, tls_certificates=certificates)
        self._door: FrontDoor | None = None
        try:
            if door:
                self._door = FrontDoor(config.host, config.port, flight.FlightServerBase.port.__get__(self),
                                       max_request_bytes=config.max_request_bytes,
                                       idle_timeout=config.idle_timeout, max_connections=config.max_connections,
                                       tls=tls_context)
            self.connection = Connection(root, read_only=read_only, block_cache_size=config.block_cache_size,
                                         cache_results=config.cache_results)
        except BaseException:
            if self._door is not None:
                self._door.close()
            super().shutdown()  # the port is already bound
            raise
        self.registry = ScannerRegistry(config.lease_timeout, config.max_scanners_per_client, config.max_scanners)
        self.registry.cancel_connection = lambda peer: shutdown_connection(peer, self.port)
        self.registry.start()
        self._host = host
        self._scheme = scheme
        self._closed = False
        self._close_lock = threading.Lock()
        self._handlers: dict[str, Callable[[str, dict], tuple[dict, bytes]]] = {
            name: getattr(self, f"_do_{name}") for name in ACTIONS
        }
        if self._door is not None:
            self._door.start()  # clients reach the handlers once all of the above exists

    @property
    def port(self) -> int:
        """The port clients connect to (the front door's, or gRPC's own without the door)."""
        return self._door.port if self._door is not None else flight.FlightServerBase.port.__get__(self)

    def _peer(self, context) -> str:
        """The client of a call (gRPC reports the front door's own connection)."""
        peer = context.peer()
        return self._door.client_peer(peer) if self._door is not None else peer

    @property
    def location(self) -> str:
        """The URI clients connect to, ``grpc://host:port`` (``grpc+tls://`` with TLS)."""
        return f"{self._scheme}://{self._host}:{self.port}"

    # -- Flight entry points --------------------------------------------------
    def list_actions(self, context):
        """Flight hook: the action types and what each does."""
        return list(ACTIONS.items())

    def do_action(self, context, action):
        """Flight hook: decode the request, run its handler, encode the answer (or a tagged error)."""
        try:
            body = action.body
            if body is not None and body.size > self.config.max_request_bytes:
                raise LimitExceeded(
                    f"request of {body.size} bytes is over the server's limit of"
                    f" {self.config.max_request_bytes} bytes (max_request_bytes)"
                )
            handler = self._handlers.get(action.type)
            if handler is None:
                raise RequestFieldError(f"unknown action {clip(repr(action.type), 80)}; known: {', '.join(ACTIONS)}")
            what = f"{action.type} request"
            request = decode_message(body if body is not None else b"", what)
            check_message_version(request, what)
            header, payload = handler(self._peer(context), request.header)
            return [encode_message(header, payload, version=1)]  # answers carry nothing of version 2
        except flight.FlightError:
            raise
        except Exception as exc:  # every failure crosses the wire as its own class
            raise to_flight_error(exc) from exc

    def do_get(self, context, ticket):
        """Flight hook: the streaming scan described by the ticket."""
        try:
            raw = ticket.ticket
            if len(raw) > self.config.max_request_bytes:
                raise LimitExceeded(f"ticket of {len(raw)} bytes is over max_request_bytes")
            request = decode_message(raw, "scan ticket")
            check_message_version(request, "scan ticket")
            return self._stream(context, request.header)
        except flight.FlightError:
            raise
        except Exception as exc:
            raise to_flight_error(exc) from exc

    # -- streaming scan -------------------------------------------------------
    def _stream(self, context, request: dict) -> flight.GeneratorStream:
        table = self._table(request)
        scan = scan_request(request.get("scan", {}))
        entry = self.registry.add_stream(self._peer(context), table.name)
        try:
            batches = table.run_scan(scan)
            first = next(batches, None)  # fails here, not mid-stream, on a bad scan
        except BaseException:
            self.registry.remove_stream(entry.stream_id)
            raise
        if first is not None:
            schema = first.schema
        elif scan.output == "cells":
            schema = CELL_SCHEMA
        else:
            schema = pa.schema([pa.field("key", pa.binary())])
        stream = StreamIterator(entry, first, batches, schema, context, self.registry, self.config.lease_timeout)
        # If gRPC drops the call before the stream is ever pulled, nothing calls
        # finish(): forget the stream when the iterator is collected.
        weakref.finalize(stream, self.registry.remove_stream, entry.stream_id)
        weakref.finalize(stream, batches.close)
        return flight.GeneratorStream(schema, stream)

    # -- helpers ----------------------------------------------------------------
    def _table(self, header: dict, key: str = "table") -> Table:
        name = header.get(key)
        if not isinstance(name, (str, bytes)):
            raise RequestFieldError(f"request field {key!r} must name a table, got {type(name).__name__}")
        return self.connection.table(name)  # validates the name: nothing outside the root

    # -- admin actions ----------------------------------------------------------
    def _do_server_info(self, peer: str, h: dict) -> tuple[dict, bytes]:
        return {
            "server": "regionscan",
            "protocol": PROTOCOL_VERSION,
            "protocols": list(PROTOCOL_VERSIONS),
            "read_only": self.connection.read_only,
            "auth": bool(self.config.token),
            "peer": peer,
            **self.config.limits(),
        }, b""

    def _do_list_tables(self, peer: str, h: dict) -> tuple[dict, bytes]:
        return {"tables": self.connection.tables(_field(h, "namespace", str, required=False))}, b""

    def _do_create_namespace(self, peer: str, h: dict) -> tuple[dict, bytes]:
        self.connection.create_namespace(_field(h, "name", str))
        return {}, b""

    def _do_list_namespaces(self, peer: str, h: dict) -> tuple[dict, bytes]:
        return {"namespaces": self.connection.list_namespaces()}, b""

    def _do_delete_namespace(self, peer: str, h: dict) -> tuple[dict, bytes]:
        self.connection.delete_namespace(_field(h, "name", str))
        return {}, b""

    def _do_create_table(self, peer: str, h: dict) -> tuple[dict, bytes]:
        self.connection.create_table(
            _field(h, "name", (str, bytes)),
            _field(h, "families", dict),
            split_keys=_field(h, "split_keys", list, required=False),
            num_regions=_field(h, "num_regions", int, required=False),
            settings=_field(h, "settings", dict, required=False),
        )
        return {}, b""

    def _do_delete_table(self, peer: str, h: dict) -> tuple[dict, bytes]:
        self.connection.delete_table(_field(h, "name", (str, bytes)), disable=_field(h, "disable", bool, required=False, default=False))
        return {}, b""

    def _do_is_table_available(self, peer: str, h: dict) -> tuple[dict, bytes]:
        return {"available": self.connection.is_table_available(_field(h, "name", (str, bytes)))}, b""

    def _do_table_regions(self, peer: str, h: dict) -> tuple[dict, bytes]:
        return {"regions": self._table(h).regions()}, b""

    def _do_table_families(self, peer: str, h: dict) -> tuple[dict, bytes]:
        return {"families": self._table(h).families()}, b""

    def _do_count(self, peer: str, h: dict) -> tuple[dict, bytes]:
        count = self._table(h).count(
            row_start=_field(h, "row_start", bytes, required=False),
            row_stop=_field(h, "row_stop", bytes, required=False),
            row_prefix=_field(h, "row_prefix", bytes, required=False),
        )
        return {"count": count}, b""

    def _do_flush(self, peer: str, h: dict) -> tuple[dict, bytes]:
        self._table(h).flush()
        return {}, b""

    def _do_compact(self, peer: str, h: dict) -> tuple[dict, bytes]:
        self._table(h).compact(major=_field(h, "major", bool, required=False, default=True))
        return {}, b""

    def _do_split(self, peer: str, h: dict) -> tuple[dict, bytes]:
        table = self._table(h)
        table.split(_field(h, "split_key", bytes, required=False))
        return {"regions": table.regions()}, b""

    def _do_list_scanners(self, peer: str, h: dict) -> tuple[dict, bytes]:
        return self.registry.describe(), b""

    def _do_read_counters(self, peer: str, h: dict) -> tuple[dict, bytes]:
        return table_read_counters(self._table(h), reset=_field(h, "reset", bool, required=False, default=False)), b""

    # -- mutations --------------------------------------------------------------
    def _do_mutate(self, peer: str, h: dict) -> tuple[dict, bytes]:
        """Apply ``ops``: ``[kind, row, arg, timestamp]`` with kind put (arg: data dict),
        delete (arg: column list or None) or delete_version (arg: column).

        Consecutive puts and deletes with one timestamp go to the engine as
        one batch (one WAL record per region), in the order given.
        """
        table = self._table(h)
        ops = _field(h, "ops", list)
        group: list = []
        group_ts: Any = None

        def send() -> None:
            if group:
                batch = table.batch(timestamp=group_ts)
                for kind, row, arg in group:
                    if kind == "put":
                        batch.put(row, arg)
                    else:
                        batch.delete(row, arg)
                batch.send()
                group.clear()

        for i, op in enumerate(ops):
            if not isinstance(op, list) or len(op) != 4 or op[0] not in _MUTATIONS:
                raise RequestFieldError(f"mutation {i} must be [kind, row, arg, timestamp] with kind in {_MUTATIONS}")
            kind, row, arg, ts = op
            if kind == "delete_version":
                send()
                table.delete_version(row, arg, ts)
                continue
            if group and ts != group_ts:
                send()
            group_ts = ts
            group.append((kind, row, arg))
        send()
        return {"applied": len(ops)}, b""

    # -- point reads ------------------------------------------------------------
    def _do_row(self, peer: str, h: dict) -> tuple[dict, bytes]:
        data = self._table(h).row(
            _field(h, "row", bytes), **_read_options(h),
        )
        return {"data": data}, b""

    def _do_rows(self, peer: str, h: dict) -> tuple[dict, bytes]:
        rows = self._table(h).rows(
            _field(h, "rows", list), **_read_options(h),
        )
        return {"rows": rows}, b""

    def _do_cells(self, peer: str, h: dict) -> tuple[dict, bytes]:
        cells = self._table(h).cells(
            _field(h, "row", bytes), _field(h, "column", (bytes, str)),
            versions=_field(h, "versions", int, required=False),
            timestamp=_field(h, "timestamp", int, required=False),
            include_timestamp=_field(h, "include_timestamp", bool, required=False, default=False),
        )
        return {"cells": cells}, b""

    def _do_counter_get(self, peer: str, h: dict) -> tuple[dict, bytes]:
        return {"value": self._table(h).counter_get(_field(h, "row", bytes), _field(h, "column", (bytes, str)))}, b""

    def _do_counter_set(self, peer: str, h: dict) -> tuple[dict, bytes]:
        self._table(h).counter_set(_field(h, "row", bytes), _field(h, "column", (bytes, str)), _field(h, "value", int))
        return {}, b""

    def _do_counter_inc(self, peer: str, h: dict) -> tuple[dict, bytes]:
        value = self._table(h).counter_inc(
            _field(h, "row", bytes), _field(h, "column", (bytes, str)), _field(h, "value", int)
        )
        return {"value": value}, b""

    # -- RPC scan ---------------------------------------------------------------
    def _do_scan_open(self, peer: str, h: dict) -> tuple[dict, bytes]:
        table = self._table(h)
        scan = scan_request(h.get("scan", {}))
        cells = scan.output == "cells"
        scanner = self.registry.open_scanner(peer, table.name, lambda: table.run_scan(scan), cells)
        return {"scanner_id": scanner.scanner_id, "lease_ms": int(self.config.lease_timeout * 1000)}, b""

    def _do_scan_next(self, peer: str, h: dict) -> tuple[dict, bytes]:
        rows = _field(h, "rows", int)
        if not 1 <= rows <= self.config.max_next_rows:
            raise LimitExceeded(
                f"next() asked for {rows} rows; the server answers 1 to {self.config.max_next_rows} (max_next_rows)"
            )
        max_bytes = _field(h, "max_bytes", int, required=False, default=self.config.max_next_bytes)
        if max_bytes < 1:
            raise RequestFieldError(f"max_bytes must be positive, got {max_bytes}")
        max_bytes = min(max_bytes, self.config.max_next_bytes)
        return self.registry.next(_field(h, "scanner_id", str), _field(h, "seq", int), rows, max_bytes)

    def _do_scan_close(self, peer: str, h: dict) -> tuple[dict, bytes]:
        return {"closed": self.registry.close_scanner(_field(h, "scanner_id", str))}, b""

    def _do_scan_renew(self, peer: str, h: dict) -> tuple[dict, bytes]:
        self.registry.renew(_field(h, "scanner_id", str))
        return {"lease_ms": int(self.config.lease_timeout * 1000)}, b""

    # -- lifecycle --------------------------------------------------------------
    def shutdown(self) -> None:
        """Stop serving, close every scanner and the connection (releasing the table locks)."""
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
        if self._door is not None:
            self._door.close()
        super().shutdown()
        self.registry.stop()
        self.connection.close()
