"""Server-side scanners of the RPC scan API, their leases, and the registry of open streams.

An RPC scanner holds a Python generator over ``Table.scan_batches`` and hands
out whole rows on each ``next(seq, n, max_bytes)`` call, whichever handler
thread serves the call (Flight serves calls from a thread pool, so
successive calls of one scanner often run on different threads; a lock per
scanner keeps the generator from being resumed by two at once).

Sequence numbers follow HBase's ``nextCallSeq``: the first next() carries 0
and each answered call moves the expected number on by one.  A call that
repeats the last number is a client retry (the answer was lost): the server
sends the cached last answer again, so no row is skipped or repeated.  Any
other number raises :class:`OutOfOrderScannerNext`.

A scanner idle for longer than its lease is closed by the reaper thread (or
by the next call that finds it stale): its generator is closed, which frees
the region views and file readers it held.  A later next() on it raises
:class:`LeaseExpired`; an id never issued raises :class:`UnknownScanner`.

Streams (do_get) have the same lease: the reaper expires a stream that has
waited for its client past the lease (see :mod:`storage.server.streams`),
and cancels the call still blocked handing over its last batch by closing
its client connection (:attr:`ScannerRegistry.cancel_connection`), unless
a live stream shares that connection.
Limits count per client host (:func:`peer_host`), over all its connections.
"""

from __future__ import annotations

import secrets
import threading
from collections import OrderedDict
from typing import Callable, Iterator

import pyarrow as pa

from .. import clock, kernels
from .remote_errors import LeaseExpired, LimitExceeded, OutOfOrderScannerNext, UnknownScanner
from .wire import batches_to_ipc

__all__ = ["RpcScanner", "StreamEntry", "ScannerRegistry", "peer_host"]

_EXPIRED_MEMORY = 4096  # ids of expired scanners remembered, to tell "expired" from "unknown"


class _Pending:
    """A batch not yet handed out, with the index of each row's first record."""

    __slots__ = ("batch", "starts", "row_bytes")

    def __init__(self, batch: pa.RecordBatch, cells: bool):
        self.batch = batch
        # Cell batches hold several records per row; rows are runs of equal keys.
        self.starts = kernels.row_boundaries(batch) if cells else None
        rows = self.rows
        self.row_bytes = max(1, batch.nbytes // rows) if rows else 1

    @property
    def rows(self) -> int:
        return len(self.starts) if self.starts is not None else self.batch.num_rows

    def take(self, k: int) -> pa.RecordBatch:
        """Remove and return the first ``k`` rows (whole rows only)."""
        if k >= self.rows:
            head, self.batch = self.batch, self.batch.slice(self.batch.num_rows)
            self.starts = self.starts[:0] if self.starts is not None else None
            return head
        cut = int(self.starts[k]) if self.starts is not None else k
        head = self.batch.slice(0, cut)
        self.batch = self.batch.slice(cut)
        if self.starts is not None:
            self.starts = self.starts[k:] - cut
        return head


class RpcScanner:
    """One open scanner of the RPC scan API (see the module docstring for the protocol)."""

    def __init__(self, scanner_id: str, peer: str, table: str, batches: Iterator[pa.RecordBatch],
                 cells: bool, lease_timeout: float):
        self.scanner_id = scanner_id
        self.peer = peer
        self.table = table
        self.lease_timeout = lease_timeout
        self.lock = threading.Lock()
        self.last_used = clock.monotonic()
        self.next_seq = 0
        self.rows_returned = 0
        self.calls = 0
        self.retries = 0
        self.threads: set[int] = set()
        self.closed_reason: str | None = None
        self._batches = batches
        self._cells = cells
        self._pending: _Pending | None = None
        self._exhausted = False
        self._schema: pa.Schema | None = None
        self._last_answer: tuple[dict, bytes] | None = None

    # -- lifecycle -------------------------------------------------------
    def prefetch(self) -> None:
        """Pull the first batch now, so a bad scan fails at open rather than at the first next()."""
        self._pull()

    def _pull(self) -> bool:
        while not self._exhausted:
            try:
                batch = next(self._batches)
            except StopIteration:
                self._finish()
                return False
            if self._schema is None:
                self._schema = batch.schema
            if batch.num_rows:
                self._pending = _Pending(batch, self._cells)
                return True
        return False

    def _finish(self) -> None:
        self._exhausted = True
        self._pending = None
        self._batches.close()  # frees the region views and readers the scan held

    def close(self, reason: str = "closed") -> None:
        """Free the scanner's resources; later calls raise an error naming ``reason``."""
        if self.closed_reason is None:
            self.closed_reason = reason
            if not self._exhausted:
                self._finish()

    def idle_for(self, now: float | None = None) -> float:
        """Seconds since the last call ended (``now``: a :func:`storage.clock.monotonic` value)."""
        return (clock.monotonic() if now is None else now) - self.last_used

    # -- next ------------------------------------------------------------
    def next(self, seq: int, rows: int, max_bytes: int) -> tuple[dict, bytes]:
        """Answer next() call number ``seq`` with up to ``rows`` rows and about ``max_bytes`` bytes.

        Returns the answer header ``{"seq", "rows", "more"}`` and the rows as
        an Arrow IPC stream.  Must be called with :attr:`lock` held.
        """
        self._check_open()
        self.threads.add(threading.get_ident())
        if seq == self.next_seq - 1 and self._last_answer is not None:
            self.retries += 1
            self.last_used = clock.monotonic()
            return self._last_answer
        if seq != self.next_seq:
            raise OutOfOrderScannerNext(
                f"scanner {self.scanner_id}: next() call seq {seq}, expected {self.next_seq}"
                f" (or {self.next_seq - 1} to retry the last call); answering it would skip or repeat"
                " rows: close the scanner and reopen it after the last row received"
            )
        pieces: list[pa.RecordBatch] = []
        taken = nbytes = 0
        while taken < rows and nbytes < max_bytes:
            if (self._pending is None or self._pending.rows == 0) and not self._pull():
                break
            pending = self._pending
            room = max(1, (max_bytes - nbytes) // pending.row_bytes)
            k = min(rows - taken, room, pending.rows)
            piece = pending.take(k)
            pieces.append(piece)
            taken += k
            nbytes += k * pending.row_bytes
        # Look ahead so the client learns the scan ended without one more round trip.
        more = (self._pending is not None and self._pending.rows > 0) or (not self._exhausted and self._pull())
        header = {"seq": seq, "rows": taken, "more": more}
        answer = (header, batches_to_ipc(pieces, self._schema if pieces else None))
        self._last_answer = answer
        self.next_seq += 1
        self.calls += 1
        self.rows_returned += taken
        self.last_used = clock.monotonic()
        return answer

    def _check_open(self) -> None:
        if self.closed_reason == "expired":
            raise LeaseExpired(
                f"scanner {self.scanner_id} expired after {self.lease_timeout:g} s idle; its resources were freed"
            )
        if self.closed_reason is not None:
            raise UnknownScanner(f"scanner {self.scanner_id} is {self.closed_reason}")

    def describe(self) -> dict:
        """What list_scanners reports about this scanner."""
        return {
            "id": self.scanner_id,
            "kind": "rpc",
            "peer": self.peer,
            "table": self.table,
            "next_seq": self.next_seq,
            "calls": self.calls,
            "retries": self.retries,
            "rows": self.rows_returned,
            "handler_threads": len(self.threads),
            "idle_s": round(self.idle_for(), 3),
            "exhausted": self._exhausted,
        }


def peer_host(peer: str) -> str:
    """The client machine of a gRPC peer (``ipv4:10.0.0.5:51234`` -> ``ipv4:10.0.0.5``).

    Limits count per host, not per connection: opening more connections
    must not buy a client more scanners or streams.
    """
    if peer.startswith(("ipv4:", "ipv6:")):
        host, sep, port = peer.rpartition(":")
        if sep and port.isdigit():
            return host
    return peer


class StreamEntry:
    """Bookkeeping of one streaming scan (do_get) while it runs.

    ``busy`` is set while the stream produces a batch; between batches the
    stream waits for gRPC to take the last one (flow control), and
    ``last_active`` says since when.  ``expire`` (set by the server) frees
    the scan of a stream idle past the lease and returns True if it did.
    """

    __slots__ = ("stream_id", "peer", "table", "batches", "rows", "last_active", "busy", "expired", "expire")

    def __init__(self, stream_id: str, peer: str, table: str):
        self.stream_id = stream_id
        self.peer = peer
        self.table = table
        self.batches = 0
        self.rows = 0
        self.last_active = clock.monotonic()
        self.busy = False
        self.expired = False
        self.expire: Callable[[], bool] | None = None

    def idle_for(self, now: float | None = None) -> float:
        """Seconds the stream has waited for its client (0 while it produces a batch)."""
        return 0.0 if self.busy else (clock.monotonic() if now is None else now) - self.last_active

    def describe(self) -> dict:
        """What list_scanners reports about this stream."""
        return {"id": self.stream_id, "kind": "stream", "peer": self.peer, "table": self.table,
                "batches": self.batches, "rows": self.rows, "idle_s": round(self.idle_for(), 3),
                "expired": self.expired}


class ScannerRegistry:
    """The open RPC scanners and streams of a server, their limits and the lease reaper."""

    def __init__(self, lease_timeout: float, max_per_client: int, max_total: int):
        self.lease_timeout = lease_timeout
        self.max_per_client = max_per_client
        self.max_total = max_total
        self._mutex = threading.Lock()
        self._scanners: dict[str, RpcScanner] = {}
        self._streams: dict[str, StreamEntry] = {}
        # Expired streams whose handler thread is still blocked handing the client its
        # last batch: their scan is freed, but they count against their client's limit
        # until the thread is released, so one client cannot pin more threads than that.
        self._draining: dict[str, StreamEntry] = {}
        self.streams_expired_total = 0
        # Set by the server: shut down the connection of a gRPC peer (see
        # storage.server.connections), so a handler blocked in a send returns.
        self.cancel_connection: Callable[[str], int] | None = None
        self.connections_cancelled_total = 0
        self._cancelled: set[str] = set()  # peers whose connection was shut down, while they drain
        self._expired: OrderedDict[str, None] = OrderedDict()
        self._stop = threading.Event()
        self._reaper: threading.Thread | None = None
        self.expired_total = 0

    # -- reaper ------------------------------------------------------------
    def start(self) -> None:
        """Start the thread that closes scanners whose lease ran out."""
        if self._reaper is None:
            self._reaper = threading.Thread(target=self._reap_loop, name="scanner-lease-reaper", daemon=True)
            self._reaper.start()

    def _reap_loop(self) -> None:
        interval = min(1.0, max(0.05, self.lease_timeout / 4))
        while not self._stop.wait(interval):
            self.reap()

    def reap(self) -> int:
        """Close every scanner and stream idle past its lease; return how many."""
        now = clock.monotonic()
        with self._mutex:
            stale = [s for s in self._scanners.values() if s.idle_for(now) > self.lease_timeout]
            idle_streams = [e for e in self._streams.values() if e.idle_for(now) > self.lease_timeout]
        count = 0
        for entry in idle_streams:
            if entry.expire is not None and entry.expire():
                with self._mutex:
                    if self._streams.pop(entry.stream_id, None) is not None:
                        self._draining[entry.stream_id] = entry
                    self.streams_expired_total += 1
                count += 1
        self._cancel_blocked()
        for scanner in stale:
            # A scanner whose lock is held is serving a call: it is not idle.
            if scanner.lock.acquire(blocking=False):
                try:
                    if scanner.idle_for() > self.lease_timeout:
                        self._expire(scanner)
                        count += 1
                finally:
                    scanner.lock.release()
        return count

    def _cancel_blocked(self) -> None:
        """Close the connections whose streams all expired, so their blocked handlers return.

        A connection that also carries a live stream is left alone (closing it
        would cut that stream off too); its expired streams keep counting
        against the client until it ends.
        """
        if self.cancel_connection is None:
            return
        with self._mutex:
            live = {e.peer for e in self._streams.values()}
            draining = {e.peer for e in self._draining.values()}
            self._cancelled &= draining
            blocked = draining - live - self._cancelled
        for peer in sorted(blocked):
            if self.cancel_connection(peer):
                with self._mutex:
                    self._cancelled.add(peer)
                    self.connections_cancelled_total += 1

    def _expire(self, scanner: RpcScanner) -> None:
        with self._mutex:
            self._scanners.pop(scanner.scanner_id, None)
            self._expired[scanner.scanner_id] = None
            while len(self._expired) > _EXPIRED_MEMORY:
                self._expired.popitem(last=False)
            self.expired_total += 1
        scanner.close("expired")

    def stop(self) -> None:
        """Stop the reaper and close every scanner."""
        self._stop.set()
        if self._reaper is not None:
            self._reaper.join(timeout=5)
        with self._mutex:
            scanners = list(self._scanners.values())
            self._scanners.clear()
        for scanner in scanners:
            with scanner.lock:
                scanner.close("closed: the server shut down")

    # -- limits ------------------------------------------------------------
    def _check_capacity(self, peer: str) -> None:
        total = len(self._scanners) + len(self._streams)
        if total >= self.max_total:
            raise LimitExceeded(f"the server has {total} open scanners and streams, its limit (max_scanners)")
        host = peer_host(peer)
        mine = sum(
            1
            for group in (self._scanners, self._streams, self._draining)
            for s in group.values()
            if peer_host(s.peer) == host
        )
        if mine >= self.max_per_client:
            raise LimitExceeded(
                f"client {host} has {mine} open scanners and streams over all its connections, the per-client"
                f" limit (max_scanners_per_client={self.max_per_client}); close some first"
            )

    # -- RPC scanners --------------------------------------------------------
    def open_scanner(self, peer: str, table: str, make_batches: Callable[[], Iterator[pa.RecordBatch]],
                     cells: bool) -> RpcScanner:
        """Register a scanner over ``make_batches()`` and prefetch its first batch."""
        with self._mutex:
            self._check_capacity(peer)
            scanner_id = secrets.token_hex(16)  # unguessable: an id is a capability
            scanner = RpcScanner(scanner_id, peer, table, make_batches(), cells, self.lease_timeout)
            self._scanners[scanner_id] = scanner
        try:
            with scanner.lock:
                scanner.prefetch()
        except BaseException:
            with self._mutex:
                self._scanners.pop(scanner_id, None)
            scanner.close("failed")
            raise
        return scanner

    def get(self, scanner_id: str) -> RpcScanner:
        """The open scanner ``scanner_id``; raises LeaseExpired or UnknownScanner otherwise."""
        if not isinstance(scanner_id, str):
            raise UnknownScanner(f"scanner id must be a string, got {scanner_id!r:.40}")
        with self._mutex:
            scanner = self._scanners.get(scanner_id)
            expired = scanner_id in self._expired
        if scanner is None:
            if expired:
                raise LeaseExpired(
                    f"scanner {scanner_id} expired after {self.lease_timeout:g} s idle; its resources were freed"
                )
            raise UnknownScanner(f"no open scanner {scanner_id!r:.60} (never opened, or already closed)")
        return scanner

    def next(self, scanner_id: str, seq: int, rows: int, max_bytes: int, wait: float = 30.0) -> tuple[dict, bytes]:
        """Serve one next() call (see :meth:`RpcScanner.next`)."""
        scanner = self.get(scanner_id)
        if not scanner.lock.acquire(timeout=wait):
            raise OutOfOrderScannerNext(f"scanner {scanner_id} is busy serving another next() call")
        try:
            if scanner.closed_reason is None and scanner.idle_for() > self.lease_timeout:
                self._expire(scanner)  # the reaper had not got to it yet
            return scanner.next(seq, rows, max_bytes)
        finally:
            scanner.lock.release()

    def renew(self, scanner_id: str) -> None:
        """Restart the lease of an open scanner."""
        scanner = self.get(scanner_id)
        with scanner.lock:
            scanner._check_open()
            scanner.last_used = clock.monotonic()

    def close_scanner(self, scanner_id: str) -> bool:
        """Close a scanner; False when it was not open (closing twice is harmless)."""
        with self._mutex:
            scanner = self._scanners.pop(scanner_id, None) if isinstance(scanner_id, str) else None
        if scanner is None:
            return False
        with scanner.lock:
            scanner.close("closed")
        return True

    # -- streams -------------------------------------------------------------
    def add_stream(self, peer: str, table: str) -> StreamEntry:
        """Register a streaming scan (counted against the same limits as scanners)."""
        with self._mutex:
            self._check_capacity(peer)
            entry = StreamEntry(secrets.token_hex(8), peer, table)
            self._streams[entry.stream_id] = entry
            return entry

    def remove_stream(self, stream_id: str) -> None:
        """Forget a stream that ended (harmless if already forgotten)."""
        with self._mutex:
            self._streams.pop(stream_id, None)
            self._draining.pop(stream_id, None)

    # -- admin -----------------------------------------------------------------
    def describe(self) -> dict:
        """Open scanners and streams, and how many scanners expired so far (list_scanners)."""
        with self._mutex:
            scanners = list(self._scanners.values())
            streams = list(self._streams.values())
            draining = list(self._draining.values())
            expired = self.expired_total
            streams_expired = self.streams_expired_total
            cancelled = self.connections_cancelled_total
        return {
            "scanners": [s.describe() for s in scanners],
            "streams": [s.describe() for s in streams],
            "draining_streams": [s.describe() for s in draining],
            "expired_total": expired,
            "streams_expired_total": streams_expired,
            "connections_cancelled_total": cancelled,
        }
