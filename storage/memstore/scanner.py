"""The memstore's cell scanner: a cursor over the memstore as it was when opened,
copying visible cells out in growing windows."""

from __future__ import annotations

import threading
from bisect import bisect_left
from itertools import islice
from typing import TYPE_CHECKING, Callable

from ..cells import Cell
from ..errors import ScannerError
from .segment import Segment, cell_bytes

if TYPE_CHECKING:
    from ..scanner.metrics import ScanMetrics

__all__ = ["MemStoreScanner"]


_FIRST_WINDOW = 16  # cells copied after a seek: a point read needs few
_MAX_GROW = 2048  # largest window a sequential read grows to
_MAX_WINDOW = 4096  # a contiguous refill is appended while the window stays below this


class MemStoreScanner:
    """A scanner (see :mod:`storage.scanner.protocol`) over a memstore as it
    was when opened.

    It serves calls from a window: a sorted copy of the visible cells in a
    key interval ``[lo, hi)`` (``None`` = unbounded), so seeks that land in
    the window are a bisect and reverse steps to the previous row usually
    are too.  Call :meth:`close` when done: an open scanner makes the
    memstore keep overwritten values.
    """

    __slots__ = (
        "_segments", "_read_point", "_on_close", "_lock", "_metrics",
        "_keys", "_cells", "_i", "_n", "_lo", "_hi", "_grow", "_grow_back", "_closed",
    )  # fmt: skip

    def __init__(
        self,
        segments: list[Segment],
        read_point: int,
        on_close: Callable[[], None],
        lock: threading.Lock,
        metrics: "ScanMetrics | None" = None,
    ):
        self._segments = segments  # newest first
        self._read_point = read_point
        self._on_close = on_close
        self._lock = lock
        self._metrics = metrics
        self._keys: list = []
        self._cells: list = []
        self._i = 0
        self._n = 0
        # The window holds every visible key k with lo <= k < hi (None =
        # unbounded); hi = () marks a scanner that has not been positioned.
        self._lo = None
        self._hi: tuple | None = ()
        self._grow = _FIRST_WINDOW
        self._grow_back = _FIRST_WINDOW
        self._closed = False

    # -- reading windows --------------------------------------------------

    def _read_forward(self, start: tuple, size: int) -> tuple[list, list, tuple | None]:
        """Visible keys/cells ``>= start``, and the exclusive end of what
        they cover (``None`` = everything after ``start``)."""
        parts = []
        hi = None
        with self._lock:
            for seg in self._segments:
                raw = list(islice(seg.ordered().irange(minimum=start), size))
                if len(raw) == size:
                    # Appending 0 gives the tuple just after raw[-1].
                    end = raw[-1] + (0,)
                    if hi is None or end < hi:
                        hi = end
                parts.append(seg.visible(raw, self._read_point))
        return (*self._merge(parts, None, hi), hi)

    def _read_backward(self, bound: tuple | None, size: int) -> tuple[list, list, tuple | None]:
        """Visible keys/cells ``< bound`` (the last ``size`` of each map), in
        ascending order, and the inclusive start of what they cover."""
        parts = []
        lo = None
        with self._lock:
            for seg in self._segments:
                cells = seg.ordered()
                if bound is None:
                    it = cells.irange(reverse=True)
                else:
                    it = cells.irange(maximum=bound, inclusive=(True, False), reverse=True)
                raw = list(islice(it, size))
                if len(raw) == size and (lo is None or raw[-1] > lo):
                    lo = raw[-1]
                raw.reverse()
                parts.append(seg.visible(raw, self._read_point))
        return (*self._merge(parts, lo, None), lo)

    @staticmethod
    def _merge(parts: list, lo: tuple | None, hi: tuple | None) -> tuple[list, list]:
        """Merge per-map windows (newest map first), cut to ``[lo, hi)``."""
        if len(parts) == 1:
            return parts[0]
        if not parts:
            return [], []
        merged: dict = {}
        for keys, cells in reversed(parts):  # oldest first: newer maps override
            merged.update(zip(keys, cells))
        keys = sorted(k for k in merged if (lo is None or k >= lo) and (hi is None or k < hi))
        return keys, [merged[k] for k in keys]

    def _count(self, cells: list) -> None:
        if self._metrics is not None and cells:
            self._metrics.bytes_read_from_memstore += cell_bytes(cells)

    def _fill_forward(self, start: tuple, contiguous: bool) -> None:
        """Load the window from ``start`` on; appended to the current window
        when it continues it and stays small (a reverse scan then still finds
        the rows before), replacing it otherwise."""
        while True:
            size = self._grow if contiguous else _FIRST_WINDOW
            keys, cells, hi = self._read_forward(start, size)
            self._count(cells)
            if contiguous:
                self._grow = min(self._grow * 2, _MAX_GROW)
            else:
                self._grow = _FIRST_WINDOW * 2
            if contiguous and self._n + len(keys) <= _MAX_WINDOW:
                self._keys += keys
                self._cells += cells
            else:
                self._keys, self._cells = keys, cells
                self._lo = start
                self._i = 0
            self._n = len(self._keys)
            self._hi = hi
            if self._i < self._n or hi is None:
                return
            start = hi
            contiguous = True

    def _position(self, i: int) -> Cell | None:
        """Set the position to index ``i`` of the window, refilling past its end."""
        self._i = i
        if i >= self._n and self._hi is not None:
            self._fill_forward(self._hi, True)
        return self._cells[self._i] if self._i < self._n else None

    # -- protocol ---------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise ScannerError("memstore scanner used after close")

    def seek(self, key: tuple) -> Cell | None:
        """Position at the first visible cell with sort key ``>= key``."""
        self._check_open()
        lo, hi = self._lo, self._hi
        if self._n and (lo is None or lo <= key) and (hi is None or key < hi):
            return self._position(bisect_left(self._keys, key))
        self._fill_forward(key, False)
        return self._cells[0] if self._n else None

    def reseek(self, key: tuple) -> Cell | None:
        """Like :meth:`seek` for a key at or after the current position."""
        self._check_open()
        i = self._i
        if i < self._n:
            if not self._keys[i] < key:
                return self._cells[i]
            hi = self._hi
            if hi is None or key < hi:
                return self._position(bisect_left(self._keys, key, i))
        elif self._hi is None:
            return None  # already past every cell
        self._fill_forward(key, False)
        return self._cells[0] if self._n else None

    def peek(self) -> Cell | None:
        """The current cell, or ``None``."""
        i = self._i
        return self._cells[i] if i < self._n else None

    def next(self) -> Cell | None:
        """Return the current cell and advance."""
        i = self._i
        if i >= self._n:
            return None
        cell = self._cells[i]
        i += 1
        self._i = i
        if i == self._n and self._hi is not None:
            self._fill_forward(self._hi, True)
        return cell

    def seek_to_previous_row(self, row: bytes) -> Cell | None:
        """Position at the first cell of the last visible row before ``row``."""
        self._check_open()
        return self._previous_row((row,))

    def seek_to_last_row(self) -> Cell | None:
        """Position at the first cell of the last visible row."""
        self._check_open()
        return self._previous_row(None)

    def _previous_row(self, bound: tuple | None) -> Cell | None:
        keys = self._keys
        lo, hi = self._lo, self._hi
        # Answer from the window when it covers everything below `bound` back
        # to the start of the previous row: the usual case in reverse scans.
        if self._n and (hi is None or (bound is not None and bound <= hi)):
            j = self._n if bound is None else bisect_left(keys, bound)
            if j == 0 and lo is None:
                return self._exhaust()
            if j > 0:
                first = (keys[j - 1][0],)
                s = bisect_left(keys, first, 0, j)
                if s > 0 or lo is None or lo <= first:
                    self._i = s
                    return self._cells[s]
        while True:
            size = self._grow_back
            self._grow_back = min(size * 2, _MAX_GROW)
            keys, cells, lo = self._read_backward(bound, size)
            self._count(cells)
            if keys or lo is None:
                break
            bound = lo  # every cell read was invisible: read on backwards
        if not keys:
            return self._exhaust()
        first = (keys[-1][0],)
        s = bisect_left(keys, first)
        if s == 0 and lo is not None and lo > first:
            return self.seek(first)  # the row is longer than the window
        self._keys, self._cells, self._n = keys, cells, len(keys)
        self._lo, self._hi = lo, bound
        self._i = s
        return cells[s]

    def _exhaust(self) -> None:
        """Position past every cell (an empty window covering everything)."""
        self._keys, self._cells = [], []
        self._i = self._n = 0
        self._lo = self._hi = None
        return None

    def close(self) -> None:
        """Release the scanner; later seeks raise :class:`ScannerError`."""
        if not self._closed:
            self._closed = True
            self._exhaust()
            self._segments = []
            self._on_close()
