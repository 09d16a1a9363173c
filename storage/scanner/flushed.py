"""A store file's cells as HBase's flush would have kept them in a family with MIN_VERSIONS.

HBase's flush (and every compaction) drops the puts of a family with a TTL
and ``MIN_VERSIONS`` that are past the TTL and not among their column's
newest ``min_versions`` puts in what it writes.  Flushes here keep every
cell (see docs/architecture.md, "MIN_VERSIONS"), so a read hides those puts
instead: each store file is read through :class:`FlushedVersions`, which
steps over them.  A store file is what one flush or one compaction wrote,
so its column's newest puts are those HBase's flush or compaction counted.
The memstore is read as it is, as in HBase, where a read counts a column's
versions among the cells its time range and timestamps select.

The batch path applies the same rule to each file's cells with
``kernels.resolve(keep_deletes=True, ttl_cutoff=..., min_versions=...)``
(:meth:`storage.region.store.StoreView.sources_checked`).
"""

from __future__ import annotations

from ..cells import Cell
from .protocol import CellScanner

__all__ = ["FlushedVersions"]

_PUT = 4


class FlushedVersions:
    """The scanner protocol over ``source`` (one store file's cells) without its
    puts older than ``expired_below`` past each column's newest ``min_versions``
    puts in the source; delete markers are kept.

    It counts a column's puts as they go by.  Every seek the scanner stack makes
    lands on the first cell of a row, a family or a column (the keys are
    ``(row,)``, ``(row, family)`` or ``(row, family, qualifier)``), so the count
    starts again at each new column.
    """

    __slots__ = ("_source", "_expired_below", "_min_versions", "_column", "_puts", "_cell")

    def __init__(self, source: CellScanner, expired_below: int, min_versions: int):
        self._source = source
        self._expired_below = expired_below
        self._min_versions = min_versions
        self._column: tuple | None = None  # (row, family, qualifier) being counted
        self._puts = 0  # its puts passed so far
        self._cell: Cell | None = None

    def _settle(self, cell: Cell | None, same_column_counts: bool) -> Cell | None:
        """Make ``cell`` (the source's current cell) current, stepping over dropped puts."""
        if not same_column_counts:
            self._column = None
        source = self._source
        while cell is not None:
            column = (cell[0], cell[1], cell[2])
            if column != self._column:
                self._column = column
                self._puts = 0
            if cell[4] != _PUT or self._puts < self._min_versions or cell[3] >= self._expired_below:
                break
            # past the TTL and past the newest min_versions: every older put of the column is too
            source.next()
            cell = source.peek()
        self._cell = cell
        return cell

    def seek(self, key: tuple) -> Cell | None:
        return self._settle(self._source.seek(key), False)

    def reseek(self, key: tuple) -> Cell | None:
        # a source already at or past ``key`` stays where it is, count and all
        return self._settle(self._source.reseek(key), True)

    def peek(self) -> Cell | None:
        return self._cell

    def next(self) -> Cell | None:
        cell = self._cell
        if cell is None:
            return None
        if cell[4] == _PUT:
            self._puts += 1
        self._source.next()
        self._settle(self._source.peek(), True)
        return cell

    def seek_to_previous_row(self, row: bytes) -> Cell | None:
        return self._settle(self._source.seek_to_previous_row(row), False)

    def seek_to_last_row(self) -> Cell | None:
        return self._settle(self._source.seek_to_last_row(), False)

    def close(self) -> None:
        self._source.close()
