"""Merging heaps: several cell sources seen as one, forward or reverse.

Sources are given newest first; their index is their age rank.  When two
sources hold a cell with the same sort key, the newer one's cell is
returned and the older ones' are skipped.  Nothing else is suppressed: the
heaps do no version or delete resolution (the store scanner does), so
delete markers and every version pass through.

Besides the :mod:`~storage.scanner.protocol` calls, both heaps offer
``advance()`` -- step past the current cell and return the new current one
-- which saves the store scanner a ``peek`` per cell.

The current source is kept out of the heap and only goes back in when
another source's cell sorts first, so a run of cells from one source costs a
single comparison per cell (no heap push and pop).
"""

from __future__ import annotations

from heapq import heapify, heappop, heappush, heapreplace
from typing import Sequence

from ..cells import Cell, sort_key
from ..errors import InvalidArgument
from .metrics import ScanMetrics
from .protocol import CellScanner

__all__ = ["KeyValueHeap", "ReversedKeyValueHeap", "merge_scanners"]


def merge_scanners(
    scanners: Sequence[CellScanner], reverse: bool = False, metrics: ScanMetrics | None = None
) -> "KeyValueHeap | ReversedKeyValueHeap":
    """A heap over ``scanners`` (newest first): :class:`KeyValueHeap`, or
    :class:`ReversedKeyValueHeap` for a reverse scan."""
    if reverse:
        return ReversedKeyValueHeap(scanners, metrics)
    return KeyValueHeap(scanners, metrics)


class _HeapBase:
    """State shared by both heaps: the sources and the current one."""

    __slots__ = ("_scanners", "_heap", "_cur", "_cur_cell", "_cur_key", "_cur_rank", "_metrics")

    def __init__(self, scanners: Sequence[CellScanner], metrics: ScanMetrics | None = None):
        scanners = list(scanners)
        if not scanners:
            raise InvalidArgument("scanners: a heap needs at least one source")
        self._scanners = scanners
        self._heap: list = []  # (key, rank, scanner) of the sources other than the current
        self._cur = None
        self._cur_cell = None
        self._cur_key = None  # computed only while other sources compete
        self._cur_rank = 0
        self._metrics = metrics

    def _count_seeks(self, n: int) -> None:
        if self._metrics is not None:
            self._metrics.seeks += n

    def _take(self, entry: tuple) -> Cell:
        """Make ``entry`` current; skip older sources' cells with its key."""
        key, rank, scanner = entry
        heap = self._heap
        while heap and heap[0][0] == key:
            _, r, s = heappop(heap)
            s.next()
            self._requeue(s, r)
        self._cur = scanner
        self._cur_key = key
        self._cur_rank = rank
        self._cur_cell = cell = scanner.peek()
        return cell

    def _requeue(self, s: CellScanner, rank: int) -> None:
        """Put a source that stepped past a hidden duplicate back in the heap."""
        c = s.peek()
        if c is not None:
            heappush(self._heap, (sort_key(c), rank, s))

    def _clear_current(self) -> None:
        self._cur = self._cur_cell = self._cur_key = None

    def peek(self) -> Cell | None:
        """The current cell, or ``None`` at the end."""
        return self._cur_cell

    def next(self) -> Cell | None:
        """Return the current cell and advance."""
        cell = self._cur_cell
        if cell is not None:
            self.advance()
        return cell

    def close(self) -> None:
        """Close every source."""
        for s in self._scanners:
            s.close()
        self._heap = []
        self._clear_current()


class KeyValueHeap(_HeapBase):
    """Forward merge of sources following the scanner protocol."""

    __slots__ = ()

    def advance(self) -> Cell | None:
        """Step past the current cell; return the new current cell."""
        s = self._cur
        if s is None:
            return None
        s.next()
        c = s.peek()
        heap = self._heap
        if c is None:
            if not heap:
                self._clear_current()
                return None
            return self._take(heappop(heap))
        if not heap:
            self._cur_cell = c
            self._cur_key = None
            return c
        key = sort_key(c)
        top = heap[0]
        if key < top[0] or (key == top[0] and self._cur_rank < top[1]):
            if key == top[0]:
                return self._take((key, self._cur_rank, s))
            self._cur_cell = c
            self._cur_key = key
            return c
        return self._take(heapreplace(heap, (key, self._cur_rank, s)))

    def _rebuild(self, entries: list) -> Cell | None:
        if not entries:
            self._heap = []
            self._clear_current()
            return None
        heapify(entries)
        self._heap = entries
        return self._take(heappop(entries))

    def seek(self, key: tuple) -> Cell | None:
        """Position every source at ``key``; return the first cell ``>= key``."""
        entries = []
        for rank, s in enumerate(self._scanners):
            c = s.seek(key)
            if c is not None:
                entries.append((sort_key(c), rank, s))
        self._count_seeks(len(self._scanners))
        return self._rebuild(entries)

    def reseek(self, key: tuple) -> Cell | None:
        """Move forward to ``key``; only sources behind it are reseeked."""
        cur = self._cur
        if cur is None:
            return None
        cur_key = self._cur_key
        if cur_key is None:
            cur_key = sort_key(self._cur_cell)
        if not cur_key < key:
            return self._cur_cell
        heap = self._heap
        seeks = 1
        c = cur.reseek(key)
        if c is not None:
            heappush(heap, (sort_key(c), self._cur_rank, cur))
        while heap and heap[0][0] < key:
            _, r, s = heappop(heap)
            seeks += 1
            c = s.reseek(key)
            if c is not None:
                heappush(heap, (sort_key(c), r, s))
        self._count_seeks(seeks)
        if not heap:
            self._clear_current()
            return None
        return self._take(heappop(heap))

    def _align_to_row(self, cells: list) -> Cell | None:
        """After each source moved to its own previous/last row, line them all
        up on the highest of those rows (the merged previous row)."""
        rows = [c[0] for c in cells if c is not None]
        if not rows:
            return self._rebuild([])
        target = max(rows)
        entries = []
        for rank, (s, c) in enumerate(zip(self._scanners, cells)):
            if c is not None and c[0] < target:
                c = s.seek((target,))
                self._count_seeks(1)
            if c is not None:
                entries.append((sort_key(c), rank, s))
        return self._rebuild(entries)

    def seek_to_previous_row(self, row: bytes) -> Cell | None:
        """Position at the first cell of the last row before ``row``."""
        cells = [s.seek_to_previous_row(row) for s in self._scanners]
        self._count_seeks(len(cells))
        return self._align_to_row(cells)

    def seek_to_last_row(self) -> Cell | None:
        """Position at the first cell of the last row."""
        cells = [s.seek_to_last_row() for s in self._scanners]
        self._count_seeks(len(cells))
        return self._align_to_row(cells)


class ReversedKeyValueHeap(_HeapBase):
    """Merge of forward sources for a reverse scan: rows in descending
    order, the cells of one row in ascending cell order (as HBase's
    ``ReversedKeyValueHeap``).

    The sources positioned in the current row compete in the heap; the
    others wait, each at the first cell of an earlier row.  A source that
    runs past the end of the current row is sent back to the start of its
    previous row with ``seek_to_previous_row``.  ``seek``/``reseek`` take a
    position in this reversed order: the first cell at or after ``key`` in
    ``key``'s row, else the first cell of the row before it.
    """

    __slots__ = ("_row", "_waiting")

    def __init__(self, scanners: Sequence[CellScanner], metrics: ScanMetrics | None = None):
        super().__init__(scanners, metrics)
        self._row = None
        self._waiting: list = []  # (first key, rank, scanner) at rows before _row

    def _leave(self, s: CellScanner, rank: int, row: bytes) -> None:
        """Send a source that left ``row`` to the start of its previous row."""
        self._count_seeks(1)
        c = s.seek_to_previous_row(row)
        if c is not None:
            self._waiting.append((sort_key(c), rank, s))

    def _requeue(self, s: CellScanner, rank: int) -> None:
        c = s.peek()
        if c is not None and c[0] == self._row:
            heappush(self._heap, (sort_key(c), rank, s))
        else:
            self._leave(s, rank, self._row)

    def _next_current(self) -> Cell | None:
        """Pick the next current source: from this row, else the next row."""
        heap = self._heap
        if not heap:
            waiting = self._waiting
            if not waiting:
                self._row = None
                self._clear_current()
                return None
            row = max(e[0][0] for e in waiting)
            heap = [e for e in waiting if e[0][0] == row]
            self._waiting = [e for e in waiting if e[0][0] != row]
            heapify(heap)
            self._heap = heap
            self._row = row
        return self._take(heappop(heap))

    def _build(self, entries: list) -> Cell | None:
        """Rebuild from sources positioned anywhere: the highest row is current."""
        self._heap = []
        self._waiting = entries
        self._row = None
        return self._next_current()

    def advance(self) -> Cell | None:
        """Step past the current cell; return the new current cell."""
        s = self._cur
        if s is None:
            return None
        s.next()
        c = s.peek()
        heap = self._heap
        if c is None or c[0] != self._row:
            self._leave(s, self._cur_rank, self._row)
            return self._next_current()
        if not heap:
            self._cur_cell = c
            self._cur_key = None
            return c
        key = sort_key(c)
        top = heap[0]
        if key < top[0] or (key == top[0] and self._cur_rank < top[1]):
            if key == top[0]:
                return self._take((key, self._cur_rank, s))
            self._cur_cell = c
            self._cur_key = key
            return c
        return self._take(heapreplace(heap, (key, self._cur_rank, s)))

    def _backward_seek(self, s: CellScanner, key: tuple) -> Cell | None:
        """Position one source at ``key`` in reversed order."""
        c = s.seek(key)
        if c is None or c[0] != key[0]:
            c = s.seek_to_previous_row(key[0])
            self._count_seeks(2)
        else:
            self._count_seeks(1)
        return c

    def seek(self, key: tuple) -> Cell | None:
        """Position at the first cell ``>= key`` in ``key``'s row, else at the
        first cell of the last row before it."""
        entries = []
        for rank, s in enumerate(self._scanners):
            c = self._backward_seek(s, key)
            if c is not None:
                entries.append((sort_key(c), rank, s))
        return self._build(entries)

    def reseek(self, key: tuple) -> Cell | None:
        """:meth:`seek` for a key at or after the current position (in
        reversed order); only sources behind it move."""
        cur = self._cur
        if cur is None:
            return None
        row = self._row
        if key[0] == row:
            cur_key = self._cur_key
            if cur_key is None:
                cur_key = sort_key(self._cur_cell)
            if not cur_key < key:
                return self._cur_cell
            heap = self._heap
            heap.append((cur_key, self._cur_rank, cur))
            heapify(heap)
            seeks = 0
            while heap and heap[0][0] < key:
                _, r, s = heappop(heap)
                seeks += 1
                c = s.reseek(key)
                if c is not None and c[0] == row:
                    heappush(heap, (sort_key(c), r, s))
                else:
                    self._leave(s, r, row)
            self._count_seeks(seeks)
            return self._next_current()
        # A key in an earlier row: every source at or above that row moves.
        target = key[0]
        entries = []
        moving = list(self._heap) + [(self._cur_key or sort_key(self._cur_cell), self._cur_rank, cur)]
        for e in self._waiting:
            if e[0][0] > target or (e[0][0] == target and e[0] < key):
                moving.append(e)
            else:
                entries.append(e)
        for _, r, s in moving:
            c = self._backward_seek(s, key)
            if c is not None:
                entries.append((sort_key(c), r, s))
        return self._build(entries)

    def seek_to_previous_row(self, row: bytes) -> Cell | None:
        """Position at the first cell of the last row before ``row``."""
        entries = []
        for rank, s in enumerate(self._scanners):
            c = s.seek_to_previous_row(row)
            if c is not None:
                entries.append((sort_key(c), rank, s))
        self._count_seeks(len(self._scanners))
        return self._build(entries)

    def seek_to_last_row(self) -> Cell | None:
        """Position at the first cell of the last row."""
        entries = []
        for rank, s in enumerate(self._scanners):
            c = s.seek_to_last_row()
            if c is not None:
                entries.append((sort_key(c), rank, s))
        self._count_seeks(len(self._scanners))
        return self._build(entries)
