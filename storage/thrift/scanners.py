"""Scanner ids of the Thrift gateway: leased, capped, reclaimed when idle.

A Thrift 1 scanner is an ``i32`` id naming server-side state: the engine
scan (a generator of rows) it reads from.  Ids count up from 1 and are
never reused while the gateway runs.  Each scanner belongs to the
connection that opened it; another connection using the id gets the same
"unknown scanner" answer as for an id never issued, and closing a
connection closes its scanners.

A scanner idle for longer than the lease is closed by the reaper thread
(or by the next call that finds it stale), which frees the region views
and file readers its scan held; a later call names it as expired.  Opening
a scanner beyond ``max_scanners_per_connection`` or ``max_scanners`` is
refused.
"""

from __future__ import annotations

import itertools
import threading
from collections import OrderedDict
from concurrent.futures import Executor, Future, ThreadPoolExecutor, wait
from typing import Iterator

from .. import clock
from .errors import GatewayIllegalArgument, GatewayIOError

__all__ = ["GatewayScanner", "ScannerRegistry"]

_EXPIRED_MEMORY = 4096  # ids of expired scanners remembered, to tell "expired" from "unknown"
_MAX_ID = (1 << 31) - 1


class GatewayScanner:
    """One open scanner: an iterator of results and its lease.

    With a ``prefetch`` executor, each :meth:`take` starts reading the next
    batch of the same size in the background once it has its answer, so the
    gateway scans while the client decodes (happybase asks for the next
    batch only after handling the last, as HBase's own scanner caching
    expects).  Calls of one scanner are serialized by :attr:`lock`; the
    prefetch runs between them, and :meth:`take` and :meth:`finish` wait
    for it before touching the scan.
    """

    def __init__(self, scanner_id: int, connection_id: int, table: str, results: Iterator,
                 prefetch: Executor | None = None):
        self.scanner_id = scanner_id
        self.connection_id = connection_id
        self.table = table
        self.lock = threading.Lock()
        self.last_used = clock.monotonic()
        self._results = results
        self._prefetch = prefetch
        self._ahead: Future | None = None
        self._carry: list = []
        self._done = False

    def _pull(self, n: int) -> list:
        out = list(itertools.islice(self._results, n))
        if len(out) < n:
            self._close_results()
        return out

    def take(self, n: int) -> list:
        """Up to ``n`` more results (an empty list once the scan is exhausted)."""
        out, self._carry = self._carry, []
        if self._ahead is not None:
            ahead, self._ahead = self._ahead, None
            out += ahead.result()  # a failed read-ahead fails this call, as a direct read would
        if len(out) < n and not self._done:
            out += self._pull(n - len(out))
        if len(out) > n:
            out, self._carry = out[:n], out[n:]
        if self._prefetch is not None and not self._done and not self._carry:
            self._ahead = self._prefetch.submit(self._pull, n)
        return out

    def _close_results(self) -> None:
        self._done = True
        close = getattr(self._results, "close", None)
        if close is not None:
            close()

    def finish(self) -> None:
        """Release what the scan holds (idempotent); waits for a read-ahead in flight."""
        ahead, self._ahead = self._ahead, None
        if ahead is not None:
            wait([ahead])
        self._carry = []
        self._close_results()


class ScannerRegistry:
    """The gateway's open scanners, their leases and limits."""

    def __init__(self, lease_timeout: float, max_per_connection: int, max_total: int, prefetch_workers: int = 0):
        self.lease_timeout = lease_timeout
        self._prefetch = (ThreadPoolExecutor(prefetch_workers, thread_name_prefix="thrift-prefetch")
                          if prefetch_workers else None)
        self.max_per_connection = max_per_connection
        self.max_total = max_total
        self._mutex = threading.Lock()
        self._open: dict[int, GatewayScanner] = {}
        self._per_connection: dict[int, int] = {}
        self._expired: OrderedDict[int, str] = OrderedDict()
        self._ids = itertools.count(1)
        self._stop = threading.Event()
        self._reaper: threading.Thread | None = None

    # -- lifecycle -------------------------------------------------------
    def start_reaper(self) -> None:
        """Reclaim idle scanners in the background (a quarter of the lease at a time)."""
        if self._reaper is None:
            self._reaper = threading.Thread(target=self._reap_loop, name="thrift-scanner-reaper", daemon=True)
            self._reaper.start()

    def _reap_loop(self) -> None:
        interval = max(0.05, min(self.lease_timeout / 4, 5.0))
        while not self._stop.wait(interval):
            self.reap()

    def stop(self) -> None:
        """Stop the reaper and close every scanner."""
        self._stop.set()
        with self._mutex:
            scanners = list(self._open.values())
        for s in scanners:
            self._drop(s, "the gateway is shutting down")
        if self._prefetch is not None:
            self._prefetch.shutdown(wait=True)

    # -- operations ------------------------------------------------------
    def check_room(self, connection_id: int) -> None:
        """Raise the error :meth:`open` would raise if no scanner may be opened now."""
        self.reap()
        with self._mutex:
            self._check_room(connection_id)

    def _check_room(self, connection_id: int) -> None:
        if len(self._open) >= self.max_total:
            raise GatewayIOError(message=f"too many open scanners in the gateway (limit {self.max_total}); close some")
        if self._per_connection.get(connection_id, 0) >= self.max_per_connection:
            raise GatewayIOError(
                message=f"too many open scanners on this connection (limit {self.max_per_connection}); close some"
            )

    def open(self, connection_id: int, table: str, results: Iterator) -> int:
        """Register a scan and return its new id."""
        with self._mutex:
            self._check_room(connection_id)
            scanner_id = next(self._ids)
            if scanner_id > _MAX_ID:
                raise GatewayIOError(message="scanner ids are used up; restart the gateway")
            scanner = GatewayScanner(scanner_id, connection_id, table, results, self._prefetch)
            scanner.last_used = clock.monotonic()
            self._open[scanner_id] = scanner
            self._per_connection[connection_id] = self._per_connection.get(connection_id, 0) + 1
            return scanner_id

    def get(self, connection_id: int, scanner_id: int) -> GatewayScanner:
        """The scanner ``scanner_id`` of this connection, its lease renewed."""
        now = clock.monotonic()
        with self._mutex:
            scanner = self._open.get(scanner_id)
            if scanner is None or scanner.connection_id != connection_id:
                reason = self._expired.get(scanner_id) if scanner is None else None
                if reason:
                    raise GatewayIllegalArgument(message=f"scanner {scanner_id} is closed: {reason}")
                raise GatewayIllegalArgument(message=f"scanner id {scanner_id} is unknown on this connection")
            stale = scanner.last_used < now - self.lease_timeout
            if not stale:
                scanner.last_used = now
                return scanner
        # idle past its lease, and the reaper has not come by yet
        reason = f"expired after {self.lease_timeout:g} s idle"
        self._drop(scanner, reason)
        raise GatewayIllegalArgument(message=f"scanner {scanner_id} is closed: {reason}")

    def close(self, connection_id: int, scanner_id: int) -> None:
        self._drop(self.get(connection_id, scanner_id), None)

    def close_connection(self, connection_id: int) -> None:
        """Close every scanner of a connection that went away."""
        with self._mutex:
            mine = [s for s in self._open.values() if s.connection_id == connection_id]
        for s in mine:
            self._drop(s, None)

    def close_table(self, table: str, reason: str) -> None:
        """Close every scanner reading ``table`` (it was disabled or deleted)."""
        with self._mutex:
            theirs = [s for s in self._open.values() if s.table == table]
        for s in theirs:
            self._drop(s, reason)

    def reap(self) -> int:
        """Close scanners idle past the lease; return how many were closed."""
        deadline = clock.monotonic() - self.lease_timeout
        with self._mutex:
            stale = [s for s in self._open.values() if s.last_used < deadline]
        closed = 0
        for s in stale:
            if s.lock.acquire(blocking=False):  # a scanner in use is not idle
                try:
                    if s.last_used < deadline:
                        self._drop(s, f"expired after {self.lease_timeout:g} s idle", locked=True)
                        closed += 1
                finally:
                    s.lock.release()
        return closed

    def _drop(self, scanner: GatewayScanner, reason: str | None, locked: bool = False) -> None:
        with self._mutex:
            if self._open.pop(scanner.scanner_id, None) is None:
                return
            left = self._per_connection.get(scanner.connection_id, 1) - 1
            if left:
                self._per_connection[scanner.connection_id] = left
            else:
                self._per_connection.pop(scanner.connection_id, None)
            if reason:
                self._expired[scanner.scanner_id] = reason
                while len(self._expired) > _EXPIRED_MEMORY:
                    self._expired.popitem(last=False)
        if locked:
            scanner.finish()
        else:
            with scanner.lock:
                scanner.finish()

    def count(self, connection_id: int | None = None) -> int:
        with self._mutex:
            if connection_id is None:
                return len(self._open)
            return self._per_connection.get(connection_id, 0)
