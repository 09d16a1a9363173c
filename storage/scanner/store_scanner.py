"""The store scanner: one family's visible cells, resolved row by row.

It merges the store's sources (memstore first, then store files newest
first) with a heap and applies, per row:

* delete markers -- ``Delete`` hides the one version with its timestamp,
  ``DeleteColumn`` every version of its column at or before its timestamp,
  ``DeleteFamily`` every column of the family at or before its timestamp.
  Markers apply whatever the scan's time range;
* with ``keep_deleted_cells`` (HBase's KEEP_DELETED_CELLS TRUE or TTL),
  markers at or after the end of the time range do not act;
* TTL: a cell older than ``now_ms - ttl`` is expired, unless it is among
  the newest ``min_versions`` visible versions of its column;
* the time range ``[min_timestamp, max_timestamp)`` and a TimestampsFilter's
  timestamps (``Filter.selected_timestamps``): puts outside them are no versions;
* in a family with a TTL and ``min_versions``, the store files are read as
  HBase's flushes would have left them (:mod:`.flushed`);
* versions: the newest ``min(spec.max_versions, family max_versions)``
  visible versions of each column;
* column selection: unselected columns are skipped by reseeking to the next
  selected one (after a few cheap steps, in case it is close).

Within a column, cells come newest first and markers before the put they
hide, so one pass settles each cell.  ``DeleteFamily`` markers carry the
empty qualifier (the memstore enforces it), so they come before every other
column of the row; the empty-qualifier column is therefore always read to
its end rather than skipped.
"""

from __future__ import annotations

from bisect import bisect_right
from typing import Sequence

from .. import clock
from ..cells import Cell, sort_key
from ..errors import InvalidArgument, ScannerError
from ..keys import key_after
from .flushed import FlushedVersions
from .heap import merge_scanners
from .metrics import ScanMetrics
from .protocol import CellScanner, next_row_key
from .scan_spec import CellScanSpec

__all__ = ["StoreScanner"]

# CellType codes as plain ints: compared once per cell.
_PUT = 4
_DELETE_COLUMN = 12
_DELETE_FAMILY = 14  # any other marker type is a Delete (8)
_NEVER = 1 << 64  # above every timestamp

# Steps tried before a reseek when skipping a column or the rest of a row:
# the target is often a cell or two away, and a step is far cheaper than a
# seek across every source.
_STEPS_BEFORE_SEEK = 4


class StoreScanner:
    """Visible cells of one family, one row at a time.

    ``scanners`` are the store's sources, newest first.  ``max_versions`` and
    ``ttl`` (seconds, ``None`` = forever) are the family's settings;
    ``now_ms`` fixes the clock TTL is measured against (default: :func:`storage.clock.now_ms`).
    ``flushed_from``: the scanners from this index on are store files; in a
    family with a TTL and ``min_versions`` they are read as HBase's flush
    would have left them (:mod:`.flushed`).

    Row-level calls: :meth:`peek_row` (the row the scanner is on),
    :meth:`read_row` (resolve it and move on), :meth:`skip_row`,
    :meth:`seek_row` and :meth:`next_row` (the next row with visible cells).
    Rows come in ascending order, or descending for a reverse ``spec``.
    Without an explicit :meth:`seek_row`, the first call starts at the
    spec's start row; ``spec.row_stop`` is enforced here too.
    """

    def __init__(
        self,
        scanners: Sequence[CellScanner],
        family: bytes,
        spec: CellScanSpec,
        *,
        max_versions: int = 1,
        ttl: float | None = None,
        now_ms: int | None = None,
        metrics: ScanMetrics | None = None,
        min_versions: int = 0,
        keep_deleted_cells: str = "FALSE",
        flushed_from: int | None = None,
    ):
        if not isinstance(family, bytes) or not family:
            raise InvalidArgument(f"family={family!r}: expected non-empty bytes")
        if not isinstance(max_versions, int) or isinstance(max_versions, bool) or max_versions < 1:
            raise InvalidArgument(f"max_versions={max_versions!r}: expected an integer >= 1")
        if ttl is not None and (isinstance(ttl, bool) or not isinstance(ttl, (int, float)) or ttl <= 0):
            raise InvalidArgument(f"ttl={ttl!r}: expected a positive number of seconds or None")
        wanted = spec.qualifiers(family)
        cutoff = None  # puts older than this are past the TTL
        if ttl is not None:
            cutoff = (clock.now_ms() if now_ms is None else now_ms) - int(ttl * 1000)
        scanners = list(scanners)
        if cutoff is not None and min_versions and flushed_from is not None:
            # store files hold what HBase's flushes would have dropped: hide it, file by file (flushed.py)
            scanners[flushed_from:] = [FlushedVersions(s, cutoff, min_versions) for s in scanners[flushed_from:]]
        self._heap = merge_scanners(scanners, spec.reverse, metrics)
        self._spec = spec
        self._family = family
        self._reverse = spec.reverse
        self._wanted = wanted
        self._wanted_sorted = None if wanted is None else sorted(wanted)
        self._max_versions = min(spec.max_versions, max_versions)
        lower = spec.min_timestamp
        self._expired_below = None  # with min_versions: puts below it expire past the newest min_versions
        self._min_versions = min_versions
        # a TimestampsFilter's timestamps: the only puts that count as versions
        selected = getattr(spec.filter, "selected_timestamps", None)
        self._stamps = selected() if selected is not None else None
        if cutoff is not None:
            if min_versions:
                self._expired_below = cutoff
            else:
                lower = max(lower, cutoff)
        self._lower = lower  # puts older than this are outside the range or expired
        self._upper = spec.max_timestamp
        # a family keeping deleted cells: markers at or after the range's end do not act
        self._unseen_from = spec.max_timestamp if keep_deleted_cells != "FALSE" else _NEVER
        self._stop = spec.row_stop
        self._opened = False
        self._row: bytes | None = None
        self._row_valid = False
        self._closed = False

    @property
    def family(self) -> bytes:
        """The family this scanner reads."""
        return self._family

    @property
    def reverse(self) -> bool:
        """True when rows come in descending order."""
        return self._reverse

    # -- positioning ------------------------------------------------------

    def seek_row(self, row: bytes | None, inclusive: bool = True) -> bytes | None:
        """Position at the first row at or after ``row`` in scan order
        (forward: ``>= row``; reverse: ``<= row``; strictly when not
        ``inclusive``); ``None`` = the first row in scan order.  Returns the
        row now current, or ``None``."""
        if self._closed:
            raise ScannerError("store scanner used after close")
        heap = self._heap
        if self._reverse:
            if row is None:
                heap.seek_to_last_row()
            else:
                heap.seek_to_previous_row(key_after(row) if inclusive else row)
        else:
            key = (b"",) if row is None else ((row,) if inclusive else next_row_key(row))
            cur = heap.peek() if self._opened else None
            if cur is not None and sort_key(cur) < key:
                heap.reseek(key)
            else:
                heap.seek(key)
        self._opened = True
        self._row_valid = False
        return self.peek_row()

    def peek_row(self) -> bytes | None:
        """The row the scanner is positioned on (it may turn out to hold no
        visible cells), or ``None`` at the end."""
        if self._row_valid:
            return self._row
        if self._closed:
            raise ScannerError("store scanner used after close")
        if not self._opened:
            return self.seek_row(self._spec.row_start or None)
        heap = self._heap
        family = self._family
        cell = heap.peek()
        while cell is not None:
            f = cell[1]
            if f == family:
                break
            if f < family:
                cell = heap.reseek((cell[0], family))
            else:
                cell = self._skip_row_rest(cell[0])
        row = None if cell is None else cell[0]
        stop = self._stop
        if row is not None and stop is not None and (row <= stop if self._reverse else row >= stop):
            row = None
        self._row = row
        self._row_valid = True
        return row

    def _skip_row_rest(self, row: bytes) -> Cell | None:
        """Move past the remaining cells of ``row``."""
        heap = self._heap
        advance = heap.advance
        for _ in range(_STEPS_BEFORE_SEEK):
            cell = advance()
            if cell is None or cell[0] != row:
                return cell
        if self._reverse:
            return heap.seek_to_previous_row(row)
        return heap.reseek(next_row_key(row))

    def _skip_column(self, row: bytes, qualifier: bytes) -> Cell | None:
        """Move to the next selected column of ``row`` after ``qualifier``
        (or past the row when there is none)."""
        wanted = self._wanted_sorted
        if wanted is None:
            target = key_after(qualifier)
        else:
            i = bisect_right(wanted, qualifier)
            if i == len(wanted):
                return self._skip_row_rest(row)
            target = wanted[i]
        family = self._family
        advance = self._heap.advance
        for _ in range(_STEPS_BEFORE_SEEK):
            cell = advance()
            if cell is None or cell[2] >= target or cell[0] != row or cell[1] != family:
                return cell
        return self._heap.reseek((row, family, target))

    # -- rows -------------------------------------------------------------

    def skip_row(self) -> None:
        """Move past the current row without resolving it."""
        row = self.peek_row()
        if row is not None:
            self._skip_row_rest(row)
            self._row_valid = False

    def read_row(self) -> list[Cell] | None:
        """Resolve the current row's cells and move to the next row.

        Returns the visible cells in cell order (an empty list when deletes,
        TTL or the time range hide them all), or ``None`` at the end.
        """
        row = self.peek_row()
        if row is None:
            return None
        self._row_valid = False
        heap = self._heap
        advance = heap.advance
        family = self._family
        wanted = self._wanted
        max_versions = self._max_versions
        lower = self._lower
        upper = self._upper
        expired_below = self._expired_below
        min_versions = self._min_versions
        stamps = self._stamps
        unseen_from = self._unseen_from
        out: list = []
        family_deleted = -1  # newest DeleteFamily timestamp seen in this row
        cell = heap.peek()
        while cell is not None and cell[0] == row and cell[1] == family:
            qualifier = cell[2]
            emit = wanted is None or qualifier in wanted
            if not emit and qualifier:
                cell = self._skip_column(row, qualifier)
                continue
            column_deleted = -1
            deleted_versions = None
            versions = 0
            done = not emit
            while True:
                ts = cell[3]
                kind = cell[4]
                if kind == _PUT:
                    if not done and ts < upper:
                        if ts < lower or ts <= family_deleted or ts <= column_deleted:
                            done = True  # every older version is hidden too
                        elif stamps is not None and ts not in stamps:
                            pass  # not one of the filter's timestamps: not a version of this read
                        elif deleted_versions is None or ts not in deleted_versions:
                            if expired_below is not None and ts < expired_below and versions >= min_versions:
                                done = True  # expired, and the column has its min_versions
                            else:
                                out.append(cell)
                                versions += 1
                                done = versions >= max_versions
                    if done and qualifier:
                        cell = self._skip_column(row, qualifier)
                        break
                elif ts >= unseen_from:
                    pass  # a later marker, not there for a read of the past
                elif kind == _DELETE_FAMILY:
                    if ts > family_deleted:
                        family_deleted = ts
                elif kind == _DELETE_COLUMN:
                    if ts > column_deleted:
                        column_deleted = ts
                elif deleted_versions is None:
                    deleted_versions = {ts}
                else:
                    deleted_versions.add(ts)
                cell = advance()
                if cell is None or cell[2] != qualifier or cell[0] != row or cell[1] != family:
                    break
        return out

    def next_row(self) -> list[Cell] | None:
        """The visible cells of the next row that has any, or ``None`` at the end."""
        while True:
            cells = self.read_row()
            if cells is None or cells:
                return cells

    def close(self) -> None:
        """Close the heap and its sources."""
        if not self._closed:
            self._closed = True
            self._row_valid = False
            self._heap.close()
