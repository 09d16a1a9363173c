"""A table of a region server seen from the client: the embedded table's calls
sent as wire requests, and mutation batches buffered client-side."""

from __future__ import annotations

import time
from typing import Any, Iterable, Iterator, Sequence

import pyarrow as pa
import pyarrow.flight as flight

from ..errors import InvalidArgument
from ..read.raw import raw_dicts
from ..read.scan_counting import result_bytes
from ..read.scan_request import ScanRequest, check_positive
from ..region.manifest import RegionInfo
from ..table.scan_api import ScanCalls
from .link import ServerLink
from .remote_errors import from_flight_error
from .remote_scanner import RemoteScanner
from .wire import RAW_SCAN_VERSION

__all__ = ["RemoteTable", "RemoteBatch", "SCAN_MODES"]


SCAN_MODES = ("stream", "rpc")


class RemoteTable(ScanCalls):
    """A table on a region server; same calls as :class:`storage.table.table.Table`, plus scan modes.

    ``scan`` and ``scan_batches`` are :class:`~storage.table.scan_api.ScanCalls`'s: the
    arguments are checked into a :class:`~storage.read.scan_request.ScanRequest` here,
    and its wire form is what the server runs."""

    def __init__(self, connection: ServerLink, name: str):
        self.connection = connection
        self.name = name

    def _call(self, action: str, header: dict | None = None) -> dict:
        h = {"table": self.name}
        h.update(header or {})
        return self.connection._call(action, h).header

    # -- metadata -------------------------------------------------------
    def regions(self) -> list[dict]:
        """The table's regions in key order, as happybase's ``Table.regions()``."""
        return self._call("table_regions")["regions"]

    def region_infos(self) -> list[RegionInfo]:
        """The regions as :class:`~storage.region.manifest.RegionInfo` (id, start, end)."""
        return [RegionInfo(r["id"], r["start_key"], r["end_key"] or None) for r in self.regions()]

    def families(self) -> dict[bytes, dict]:
        """Column families and their settings, as happybase's ``Table.families()``."""
        return self._call("table_families")["families"]

    # -- writes -----------------------------------------------------------
    def _mutate(self, ops: list) -> None:
        if not ops:
            return
        limit = max(1024, self.connection.server_info().get("max_request_bytes", 16 << 20) // 2)
        chunk: list = []
        size = 0
        for op in ops:
            cost = _op_size(op)
            if chunk and size + cost > limit:
                self._call("mutate", {"ops": chunk})
                chunk, size = [], 0
            chunk.append(op)
            size += cost
        self._call("mutate", {"ops": chunk})

    def put(self, row: bytes, data: dict, timestamp: int | None = None, wal: bool = True) -> None:
        """Store ``data`` (``{b"cf:q": value}``) in ``row`` at ``timestamp`` (server time by default)."""
        self._mutate([["put", row, data, timestamp]])

    def delete(self, row: bytes, columns: Iterable | None = None, timestamp: int | None = None, wal: bool = True) -> None:
        """Delete a whole row, or the given columns (``b"cf:q"`` all versions, ``b"cf"`` the family)."""
        self._mutate([["delete", row, list(columns) if columns is not None else None, timestamp]])

    def delete_version(self, row: bytes, column: bytes, timestamp: int) -> None:
        """Delete exactly one version of a column."""
        self._mutate([["delete_version", row, column, timestamp]])

    def batch(self, timestamp: int | None = None, batch_size: int | None = None, transaction: bool = False,
              wal: bool = True) -> "RemoteBatch":
        """A batch of puts and deletes sent together (one request per ``batch_size`` mutations)."""
        return RemoteBatch(self, timestamp, batch_size, transaction)

    # -- counters -----------------------------------------------------------
    def counter_get(self, row: bytes, column: bytes) -> int:
        """The 8-byte big-endian counter in ``column`` (0 if unset)."""
        return self._call("counter_get", {"row": row, "column": column})["value"]

    def counter_set(self, row: bytes, column: bytes, value: int = 0) -> None:
        """Set the counter to ``value``."""
        self._call("counter_set", {"row": row, "column": column, "value": value})

    def counter_inc(self, row: bytes, column: bytes, value: int = 1) -> int:
        """Add ``value`` atomically on the server and return the new value."""
        return self._call("counter_inc", {"row": row, "column": column, "value": value})["value"]

    def counter_dec(self, row: bytes, column: bytes, value: int = 1) -> int:
        """Subtract ``value`` atomically and return the new value."""
        return self.counter_inc(row, column, -value)

    # -- point reads ----------------------------------------------------------
    def row(self, row: bytes, columns: Sequence[bytes] | None = None, timestamp: int | None = None,
            include_timestamp: bool = False) -> dict:
        """One row as ``{b"cf:q": value}`` ({} if absent)."""
        data = self._call("row", {"row": row, "columns": _columns(columns), "timestamp": timestamp,
                                  "include_timestamp": include_timestamp})["data"]
        return _pairs(data) if include_timestamp else data

    def rows(self, rows: Sequence[bytes], columns: Sequence[bytes] | None = None, timestamp: int | None = None,
             include_timestamp: bool = False) -> list[tuple[bytes, dict]]:
        """Several rows, as ``[(row, data)]`` for the rows that exist, in the order asked."""
        out = self._call("rows", {"rows": list(rows), "columns": _columns(columns), "timestamp": timestamp,
                                  "include_timestamp": include_timestamp})["rows"]
        return [(key, _pairs(data) if include_timestamp else data) for key, data in out]

    def cells(self, row: bytes, column: bytes, versions: int | None = None, timestamp: int | None = None,
              include_timestamp: bool = False) -> list:
        """The versions of one cell, newest first (values, or (value, ts) pairs)."""
        out = self._call("cells", {"row": row, "column": column, "versions": versions, "timestamp": timestamp,
                                   "include_timestamp": include_timestamp})["cells"]
        return [tuple(c) for c in out] if include_timestamp else out

    # -- scans ------------------------------------------------------------------
    def open_scanner(self, *args: Any, caching: int = 1000, max_bytes: int | None = None,
                     **kwargs: Any) -> RemoteScanner:
        """Open a server-side scanner of the RPC scan API; the scan arguments are
        :meth:`scan_batches`' (``caching`` rows per next(), ``max_bytes`` bytes at most)."""
        request = self.scan_request(*args, **kwargs)
        check_positive("caching", caching)
        if request.raw:
            self._check_raw_scans()
        _check_no_cache_results(request)
        return RemoteScanner(self.connection, self.name, request.to_wire(), caching, max_bytes)

    def run_scan(self, request: ScanRequest, metrics: Any = None, *, mode: str = "stream", caching: int = 1000,
                 max_bytes: int | None = None) -> Iterator[pa.RecordBatch]:
        """The batches of a checked request, run on the server (what ``scan_batches`` returns).

        ``mode="stream"`` streams batches in one call; ``mode="rpc"`` pulls
        ``caching`` rows per next() call (at most ``max_bytes`` bytes each).
        ``metrics`` (a ScanMetrics) gets ``rpc_calls``, ``bytes_in_results``
        and ``time_ms`` as the client sees them.
        """
        if mode not in SCAN_MODES:
            raise InvalidArgument(f"mode must be one of {SCAN_MODES}, got {mode!r}")
        check_positive("caching", caching)
        if request.raw:
            self._check_raw_scans()
        _check_no_cache_results(request)
        spec = request.to_wire()
        if mode == "stream":
            return self._stream(spec, metrics)
        return self._rpc(spec, caching, max_bytes, metrics)

    def _scan_rows(self, request: ScanRequest, batch_size: int | None, *, mode: str = "stream",
                   caching: int | None = None) -> Iterator[tuple[bytes, dict]]:
        # happybase's batch_size is rows per fetch: the RPC scan's caching
        batches = self.run_scan(request, mode=mode, caching=caching or batch_size or 1000)
        if request.raw:  # cell batches of whole rows, as the embedded raw scan's (storage/read/raw.py)
            return _raw_dicts(batches, request.sorted_columns)
        return self._dicts(batches, request)

    def _check_raw_scans(self) -> None:
        """Refuse a raw scan, before sending it, to a server older than wire protocol version 2."""
        protocol = self.connection.server_info().get("protocol", 1)
        if protocol < RAW_SCAN_VERSION:
            raise InvalidArgument(
                f"the region server at {self.connection.root} speaks wire protocol version {protocol}, which has no"
                f" raw scans (version {RAW_SCAN_VERSION} added them): upgrade the server, or open the root directly"
            )

    def _stream(self, spec: dict, metrics: Any) -> Iterator[pa.RecordBatch]:
        started = time.perf_counter()
        channel = self.connection._channel
        reader = channel.stream({"table": self.name, "scan": spec})
        channel.rpc_calls += 1
        finished = False
        try:
            while True:
                try:
                    chunk = reader.read_chunk()
                except StopIteration:
                    finished = True
                    return
                except flight.FlightError as exc:
                    finished = True
                    raise from_flight_error(exc) from None
                if metrics is not None:
                    metrics.bytes_in_results += result_bytes(chunk.data)
                yield chunk.data
        finally:
            if not finished:
                reader.cancel()  # tell the server to stop producing
            if metrics is not None:
                metrics.rpc_calls += 1
                metrics.time_ms += (time.perf_counter() - started) * 1000

    def _rpc(self, spec: dict, caching: int, max_bytes: int | None, metrics: Any) -> Iterator[pa.RecordBatch]:
        started = time.perf_counter()
        scanner = RemoteScanner(self.connection, self.name, spec, caching, max_bytes)
        try:
            while scanner.more:
                batches = scanner.next()
                if metrics is not None:
                    metrics.bytes_in_results += sum(result_bytes(b) for b in batches)
                yield from batches
        finally:
            scanner.close()
            if metrics is not None:
                metrics.rpc_calls += scanner.seq + 2  # open, the next() calls, close
                metrics.time_ms += (time.perf_counter() - started) * 1000

    def count(self, row_start: bytes | None = None, row_stop: bytes | None = None,
              row_prefix: bytes | None = None) -> int:
        """Rows in ``[row_start, row_stop)`` (or with ``row_prefix``), counted on
        the server by ``Table.count()``: from the block indexes where they
        answer, else by the row-counting scan.  One call, whatever the size."""
        return self._call("count", {"row_start": row_start, "row_stop": row_stop, "row_prefix": row_prefix})["count"]

    # -- maintenance --------------------------------------------------------------
    def flush(self) -> None:
        """Flush every region's memstore to store files on the server."""
        self._call("flush")

    def compact(self, major: bool = True) -> None:
        """Compact every region (major by default)."""
        self._call("compact", {"major": major})

    def split(self, split_key: bytes | None = None) -> list[RegionInfo]:
        """Split the region holding ``split_key`` at it, or every region at its midkey."""
        self._call("split", {"split_key": split_key})
        return self.region_infos()

    def close(self) -> None:
        """Nothing to release on the client; the server keeps the table open."""

    def __repr__(self) -> str:
        return f"<RemoteTable {self.name!r} on {self.connection.root}>"


class RemoteBatch:
    """Collects puts and deletes and sends them in one request; usable as a context manager.

    As the embedded batch: ``batch_size`` sends every that many mutations,
    and with ``transaction=True`` nothing is sent if the ``with`` block
    raises.  Values are checked by the server, when the batch is sent.
    """

    def __init__(self, table: RemoteTable, timestamp: int | None, batch_size: int | None, transaction: bool):
        if batch_size is not None:
            check_positive("batch_size", batch_size)
        if transaction and batch_size is not None:
            raise InvalidArgument("transaction and batch_size cannot be combined")
        self._table = table
        self._timestamp = timestamp
        self._batch_size = batch_size
        self._transaction = transaction
        self._ops: list = []

    def put(self, row: bytes, data: dict, wal: bool = True) -> None:
        """Queue a put of ``data`` into ``row``."""
        self._ops.append(["put", row, data, self._timestamp])
        self._added()

    def delete(self, row: bytes, columns: Iterable | None = None, wal: bool = True) -> None:
        """Queue a delete of the row or of ``columns``."""
        self._ops.append(["delete", row, list(columns) if columns is not None else None, self._timestamp])
        self._added()

    def _added(self) -> None:
        if self._batch_size is not None and len(self._ops) >= self._batch_size:
            self.send()

    def send(self) -> None:
        """Send what was collected."""
        ops, self._ops = self._ops, []
        self._table._mutate(ops)

    def __enter__(self) -> "RemoteBatch":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if self._transaction and exc_type is not None:
            return
        self.send()


# -- helpers ------------------------------------------------------------------------
def _raw_dicts(batches: Iterator[pa.RecordBatch], sorted_columns: bool) -> Iterator[tuple[bytes, dict]]:
    try:
        for batch in batches:
            yield from raw_dicts(batch, sorted_columns)
    finally:
        batches.close()


def _columns(columns: Sequence | None) -> list | None:
    if columns is None:
        return None
    return [c.encode() if isinstance(c, str) else c for c in columns]


def _pairs(data: dict) -> dict:
    """Values that crossed the wire as [value, ts] lists become (value, ts) tuples again."""
    return {k: tuple(v) for k, v in data.items()}


_OP_OVERHEAD = 48


def _op_size(op: list) -> int:
    """Rough encoded size of one mutation (base64 grows bytes by 4/3)."""
    size = _OP_OVERHEAD + len(op[1]) if isinstance(op[1], (bytes, str)) else _OP_OVERHEAD
    arg = op[2]
    if isinstance(arg, dict):
        for k, v in arg.items():
            size += _OP_OVERHEAD // 4 + (len(k) if isinstance(k, (bytes, str)) else 8)
            size += len(v) if isinstance(v, (bytes, bytearray, str)) else 8
    elif isinstance(arg, (list, tuple)):
        size += sum(len(c) if isinstance(c, (bytes, str)) else 8 for c in arg)
    return size * 4 // 3


def _check_no_cache_results(request: ScanRequest) -> None:
    """Refuse ``cache_results`` on a remote scan: kept results live in the server's block
    cache, so whether they are kept is the server's setting, not the client's to ignore."""
    if request.cache_results is not None:
        raise InvalidArgument(
            "cache_results is the region server's setting (regionscan serve --cache-results,"
            " ServerConfig.cache_results), not a remote scan's: leave it unset"
        )
