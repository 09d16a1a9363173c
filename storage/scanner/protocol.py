"""The cell-at-a-time scanner protocol shared by every cell source.

Memstore scanners, store file scanners and the merging heaps all follow one
"position and return" protocol, so they compose: a heap of heaps is a heap.

* ``seek(key)`` positions at the first cell whose sort key is ``>= key`` and
  returns it (``None`` when there is none).  ``key`` is a
  :func:`storage.cells.sort_key` tuple or a prefix of one: ``(row,)`` is the
  first cell of ``row``, ``(row, family)`` the first cell of that family.
* ``reseek(key)`` is ``seek`` for a key at or after the current position;
  sources may answer it without searching from the start.
* ``peek()`` returns the current cell without consuming it.
* ``next()`` returns the current cell and advances past it.
* ``seek_to_previous_row(row)`` positions at the first cell of the last row
  that sorts before ``row``; ``seek_to_last_row()`` at the first cell of the
  last row.  Reverse scans are built on these two.
* ``close()`` releases the source; using it afterwards raises
  :class:`storage.errors.ScannerError` (checked on the seek calls only, so
  ``next`` and ``peek`` stay cheap).

A fresh source is unpositioned: ``peek`` and ``next`` return ``None`` until
one of the seek calls has been made.  Sources do no version or delete
resolution; they return every cell they hold, delete markers included.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Iterator, Protocol, runtime_checkable

from ..cells import Cell
from ..keys import key_after

__all__ = ["CellScanner", "ResultScanner", "next_row_key"]


@runtime_checkable
class CellScanner(Protocol):
    """A positioned cursor over cells in :func:`storage.cells.sort_key` order."""

    def seek(self, key: tuple) -> Cell | None: ...

    def reseek(self, key: tuple) -> Cell | None: ...

    def peek(self) -> Cell | None: ...

    def next(self) -> Cell | None: ...

    def seek_to_previous_row(self, row: bytes) -> Cell | None: ...

    def seek_to_last_row(self) -> Cell | None: ...

    def close(self) -> None: ...


def next_row_key(row: bytes) -> tuple:
    """The seek key just past every cell of ``row``: ``row + b"\\x00"`` is the
    smallest row that sorts after ``row``."""
    return (key_after(row),)


class ResultScanner(ABC):
    """What row-level scanners share, given ``next_rows(n=None)`` and ``close()``:
    ``next()`` one result, iteration over all results, and use as a context manager."""

    @abstractmethod
    def next_rows(self, n: int | None = None) -> list[list[Cell]]:
        """Up to ``n`` results (each one row's cells, or a chunk of a wide row); [] at the end."""

    @abstractmethod
    def close(self) -> None:
        """Release the scanner's sources."""

    def next(self) -> list[Cell] | None:
        """One result, or ``None`` at the end."""
        rows = self.next_rows(1)
        return rows[0] if rows else None

    def __iter__(self) -> Iterator[list[Cell]]:
        while True:
            rows = self.next_rows()
            if not rows:
                return
            yield from rows

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()
