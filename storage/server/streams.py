"""The batches of one streaming scan (do_get), handed to Flight one at a time, under a lease.

Flight pulls the next batch only when gRPC has taken the last one, so a
client that stops reading holds its stream still (flow control).  A stream
that waits longer than the lease is expired by the registry's reaper: its
scan is closed at once (region views and file readers freed), and the
registry closes the client's connection so the handler thread, blocked
handing over the last batch, returns (see :mod:`storage.server.connections`).
A client that reads again before that gets
:class:`~storage.server.remote_errors.LeaseExpired`.  Until the thread is
released the stream counts against its client's limit (see ``ScannerRegistry``).
"""

from __future__ import annotations

import threading
import weakref
from typing import Iterator

import pyarrow as pa
import pyarrow.flight as flight

from .. import clock
from .remote_errors import LeaseExpired, to_flight_error
from .scanners import ScannerRegistry, StreamEntry

__all__ = ["StreamIterator"]


def _gone() -> bool:
    return False


class StreamIterator:
    """An iterator of record batches for ``flight.GeneratorStream`` with an idle lease.

    ``first`` is the scan's first batch (already produced, so a bad scan
    fails before the stream starts) or None; ``batches`` the rest.
    """

    def __init__(self, entry: StreamEntry, first: pa.RecordBatch | None, batches: Iterator[pa.RecordBatch],
                 schema: pa.Schema, context, registry: ScannerRegistry, lease_timeout: float):
        self.entry = entry
        self._pending = first
        self._batches = batches
        self._schema = schema
        self._context = context
        self._registry = registry
        self._lease = lease_timeout
        self._lock = threading.Lock()
        self._done = False
        # The registry reaches the stream through a weak reference only, so a call
        # gRPC drops unread still lets the iterator be collected (and finalized).
        expire = weakref.WeakMethod(self.expire)
        entry.expire = lambda: (expire() or _gone)()

    def __iter__(self) -> "StreamIterator":
        return self

    def __next__(self) -> pa.RecordBatch:
        with self._lock:
            self.entry.busy = True
            try:
                return self._next()
            finally:
                self.entry.last_active = clock.monotonic()
                self.entry.busy = False

    def _next(self) -> pa.RecordBatch:
        if self.entry.expired:
            self.finish()
            raise to_flight_error(LeaseExpired(
                f"stream {self.entry.stream_id} expired: the client took no data for {self._lease:g} s"
                " (the lease); its scan was freed, so reopen it after the last row received"
            ))
        if self._done or self._context.is_cancelled():
            self.finish()
            raise StopIteration
        try:
            batch = self._pending if self._pending is not None else next(self._batches, None)
            self._pending = None
        except flight.FlightError:
            self.finish()
            raise
        except Exception as exc:  # a failure mid-stream reaches the client with its class
            self.finish()
            raise to_flight_error(exc) from exc
        if batch is None:
            self.finish()
            raise StopIteration
        if batch.schema != self._schema:
            batch = batch.cast(self._schema)
        self.entry.batches += 1
        self.entry.rows += batch.num_rows
        return batch

    def expire(self) -> bool:
        """Free the scan of a stream idle past its lease (the reaper calls it); True if it did.

        A stream busy producing a batch is not idle: it is left alone.
        """
        if not self._lock.acquire(blocking=False):
            return False
        try:
            if self._done or self.entry.expired:
                return False
            self.entry.expired = True
            self._pending = None
            self._batches.close()
            return True
        finally:
            self._lock.release()

    def finish(self) -> None:
        """Close the scan and forget the stream (idempotent; also run when the iterator is collected)."""
        if not self._done:
            self._done = True
            self._pending = None
            self._batches.close()
            self._registry.remove_stream(self.entry.stream_id)
