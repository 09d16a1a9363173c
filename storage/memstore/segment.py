"""One sorted map of memstore cells (the active map or the flush snapshot) and
what a read point sees of it: the unit the write buffer, its Arrow runs and its
scanner share."""

from __future__ import annotations

from operator import itemgetter
from typing import TYPE_CHECKING

from sortedcontainers import SortedDict

if TYPE_CHECKING:
    from .runs import _ArrowRun


_ROW = itemgetter(0)
_QUALIFIER = itemgetter(2)
_VALUE = itemgetter(5)


def _cell_bytes(cells: list) -> int:
    """Approximate payload bytes of cells (rows, qualifiers and values)."""
    return sum(map(len, map(_ROW, cells))) + sum(map(len, map(_QUALIFIER, cells))) + sum(
        map(len, map(_VALUE, cells))
    )


class _Segment:
    """One sorted map of cells (the active map or the snapshot)."""

    __slots__ = ("cells", "seqs", "older", "max_seq", "heap_size", "arrow", "pending")

    def __init__(self) -> None:
        self.cells: SortedDict = SortedDict()  # sort key -> Cell
        self.seqs: dict = {}  # sort key -> sequence number of the write that stored it
        self.older: dict = {}  # sort key -> [(seq, Cell)] replaced while a scanner was open
        self.max_seq = 0
        self.heap_size = 0
        self.arrow: "_ArrowRun | None" = None  # the cells as Arrow, as of the last read
        self.pending: list = []  # keys written since ``arrow`` was built (merged in at the next read)

    def visible(self, keys: list, read_point: int) -> tuple[list, list]:
        """The keys and cells among ``keys`` a reader at ``read_point`` sees."""
        get = self.cells.__getitem__
        if self.max_seq <= read_point:
            return keys, list(map(get, keys))
        seqs, older = self.seqs, self.older
        out_keys, out_cells = [], []
        for key in keys:
            if seqs[key] <= read_point:
                out_keys.append(key)
                out_cells.append(get(key))
                continue
            for seq, cell in reversed(older.get(key, ())):
                if seq <= read_point:
                    out_keys.append(key)
                    out_cells.append(cell)
                    break
        return out_keys, out_cells
