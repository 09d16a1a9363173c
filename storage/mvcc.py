"""Multi-version concurrency control: sequence ids and the read point.

As HBase's MultiVersionConcurrencyControl: every write (one region's
mutation group) takes the next sequence id from :meth:`Mvcc.begin`; its
cells carry that id in the memstore; :meth:`Mvcc.complete` marks it done.
The read point is the highest id below which every write has completed.  A
reader fixes the read point when it opens and shows only cells written at
or below it, so a mutation group (a put to several families) is seen whole
or not at all, and writes that finish while a scan runs stay invisible to it.

One :class:`Mvcc` serves a whole table, so one read point covers every
region a scan reads, including regions it reaches late.
"""

from __future__ import annotations

import heapq
import threading
from typing import Callable, ContextManager, TypeVar

from .errors import StorageError

__all__ = ["Mvcc", "ReadPointTooOld", "views_at_read_point"]

T = TypeVar("T")


class Mvcc:
    """The table's write numbers and read point; thread-safe."""

    def __init__(self, last_seq: int = 0):
        self._lock = threading.Lock()
        self._advanced = threading.Condition(self._lock)  # notified when the read point moves
        self._next = last_seq + 1
        self._read_point = last_seq
        self._done: list[int] = []  # completed ids above the read point (a heap)

    def advance_to(self, seq: int) -> None:
        """Start numbering after ``seq`` (a region replayed its log up to it); no write may be pending."""
        with self._lock:
            if self._done or self._next - 1 != self._read_point:
                raise StorageError("cannot move the sequence ids on while writes are in flight")
            if seq >= self._next:
                self._next = seq + 1
                self._read_point = seq

    def begin(self) -> int:
        """The sequence id of a new write; call :meth:`complete` with it when applied (or failed)."""
        with self._lock:
            seq = self._next
            self._next = seq + 1
            return seq

    def complete(self, seq: int) -> None:
        """Mark a write applied; the read point moves past every leading completed id."""
        with self._lock:
            heapq.heappush(self._done, seq)
            done = self._done
            moved = False
            while done and done[0] == self._read_point + 1:
                self._read_point = heapq.heappop(done)
                moved = True
            if moved:
                self._advanced.notify_all()

    def complete_and_wait(self, seq: int) -> None:
        """:meth:`complete`, then wait until the read point reaches ``seq``: a writer
        whose write finished before an earlier one (group commit: syncs end in any
        order) reads its own write once this returns, as HBase's completeAndWait."""
        self.complete(seq)
        self.wait_for(seq)

    def wait_for(self, seq: int) -> None:
        """Wait until the read point reaches ``seq`` (every write up to it completed or failed)."""
        with self._lock:
            while self._read_point < seq:
                self._advanced.wait()

    @property
    def read_point(self) -> int:
        """The id of the newest write that every reader opened now sees."""
        return self._read_point

    @property
    def last_seq(self) -> int:
        """The highest id handed out (complete or not)."""
        return self._next - 1


class ReadPointTooOld(Exception):
    """A reader's read point is below a write that replaced a cell the reader
    would see, at a moment no reader was open: the memstore kept no copy of
    that cell.  The reader fixed its read point before that write and opened
    its views after it; it opens them again at a newer read point (see
    :func:`views_at_read_point`).  HBase avoids this by registering a
    scanner's read point as it takes it; here a reader takes the read point
    and its views under one lock that writers do not take, so a write can
    land between the two."""

    def __init__(self, seq: int, memstore=None):
        super().__init__(f"read point below write {seq}, which replaced a cell no open reader kept")
        self.seq = seq
        self.memstore = memstore  # the memstore that dropped the cell (it can hold the next ones)


def views_at_read_point(lock: ContextManager, mvcc: Mvcc, open_views: Callable[[int], T]) -> T:
    """``open_views(read_point)`` under ``lock`` at the read point now; again at a
    newer one, once the write it names has completed, if it raises
    :class:`ReadPointTooOld` (it releases what it opened before raising).

    While it waits and opens again, the memstore that raised keeps the cells
    later writes replace (``hold_replaced``), so each memstore makes a reader
    wait at most once: a stream of replacing writes cannot starve it."""
    held: list = []
    try:
        while True:
            try:
                with lock:
                    return open_views(mvcc.read_point)
            except ReadPointTooOld as stale:
                memstore = stale.memstore
                if memstore is not None and all(memstore is not h for h in held):
                    memstore.hold_replaced()
                    held.append(memstore)
                mvcc.wait_for(stale.seq)
    finally:
        for memstore in held:
            memstore.release_replaced()
