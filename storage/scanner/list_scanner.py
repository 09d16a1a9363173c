"""A cell source over a sorted list of cells, for point reads.

A get collects one row's cells from each source (memstore, store files) as
short lists; when they need version or delete resolution, these scanners
feed them to the same :class:`StoreScanner` a scan uses, so both paths share
one set of rules.
"""

from __future__ import annotations

import bisect
from typing import Sequence

from ..cells import Cell, sort_key
from ..errors import ScannerError

__all__ = ["ListScanner"]


class ListScanner:
    """The scanner protocol (see :mod:`.protocol`) over cells already in cell order."""

    def __init__(self, cells: Sequence[Cell]):
        self._cells = list(cells)
        self._keys = [sort_key(c) for c in self._cells]
        self._pos = len(self._cells)  # unpositioned until a seek
        self._closed = False

    def _at(self, pos: int) -> Cell | None:
        self._pos = pos
        return self._cells[pos] if pos < len(self._cells) else None

    def seek(self, key: tuple) -> Cell | None:
        if self._closed:
            raise ScannerError("seek on a closed list scanner")
        return self._at(bisect.bisect_left(self._keys, key))

    def reseek(self, key: tuple) -> Cell | None:
        return self.seek(key)

    def peek(self) -> Cell | None:
        return self._cells[self._pos] if self._pos < len(self._cells) else None

    def next(self) -> Cell | None:
        cell = self.peek()
        if cell is not None:
            self._pos += 1
        return cell

    def seek_to_previous_row(self, row: bytes) -> Cell | None:
        if self._closed:
            raise ScannerError("seek on a closed list scanner")
        end = bisect.bisect_left(self._keys, (row,))
        if end == 0:
            return self._at(len(self._cells))
        previous = self._cells[end - 1][0]
        return self._at(bisect.bisect_left(self._keys, (previous,)))

    def seek_to_last_row(self) -> Cell | None:
        if not self._cells:
            return self._at(0)
        return self._at(bisect.bisect_left(self._keys, (self._cells[-1][0],)))

    def close(self) -> None:
        self._closed = True
