"""The memstore: a store's recent writes, sorted in memory until flushed.

Cells live in a :class:`sortedcontainers.SortedDict` keyed by
:func:`storage.cells.sort_key` tuples; the value is the cell itself (built
once on write, so reads hand out stored tuples instead of building new
ones).  Adding a cell whose key is already present replaces it: last write
wins.  A write of many cells puts them in the dict at once and leaves its
sorted run of new keys for the map's sorted key list to take at the next
read that needs order (:meth:`Segment.ordered`, under the lock): writes
that no read separates are ordered together, at the flush.

Flushing follows HBase: :meth:`MemStore.snapshot` moves the current
contents aside into an immutable snapshot and starts a new active map; the
snapshot stays readable (scans merge both, the active map being newer) until
:meth:`MemStore.clear_snapshot` drops it once the store file is committed.

Concurrency and visibility
--------------------------
One lock guards the maps; it is held only to change them or to copy a
window of cells out.  Every write call (``add`` or ``add_many``) takes the
next sequence number; a scanner records the number current when it opens
(its read point) and shows only cells written up to it, so it sees the
memstore exactly as it was when opened -- one ``add_many`` (one row's
mutation) is seen whole or not at all -- whatever writes, snapshots or
snapshot clears happen while it is open.

Costs of that choice: a dict entry per cell holding its sequence number; a
sequence check per copied cell, paid only by scanners that were opened
before later writes; and a value overwritten while a scanner is open is kept
in a side list until the last open scanner closes.  Scanners copy visible
cells out in windows (16 after a seek, doubling to 2048 while reading on),
so a point read copies a handful of cells and a long scan takes the lock
once per window.
"""

from __future__ import annotations

import threading
from operator import itemgetter
from typing import TYPE_CHECKING, Iterable, Iterator

import pyarrow as pa
import pyarrow.compute as pc
from sortedcontainers import SortedDict

from ..cells import Cell, CellType, check_cell
from ..errors import StorageError
from ..mvcc import ReadPointTooOld
from .runs import REBUILD_SHARE, MemStoreSnapshot, MemStoreView, merged_range
from .scanner import MemStoreScanner
from .segment import Segment, cells_to_table

if TYPE_CHECKING:
    from ..scanner.metrics import ScanMetrics

__all__ = ["MemStore", "CELL_OVERHEAD"]


CELL_OVERHEAD = 200
"""Approximate bytes a cell costs beyond its row, family, qualifier and value
(the key tuple, the cell tuple, the map and sequence entries)."""

_DELETE_FAMILY = int(CellType.DELETE_FAMILY)
_TYPES = frozenset(int(t) for t in CellType)
_VALUE = itemgetter(5)
_ROW, _FAMILY, _QUALIFIER = itemgetter(0), itemgetter(1), itemgetter(2)
_BULK_CELLS = 32  # cells of one write from which the map is updated by one merge, not per cell

FLUSH_BATCH_CELLS = 8192
"""Cells per table a flush hands the store file writer (:meth:`MemStore.snapshot_batches`):
about 8 MiB of 1 KiB cells, so a 64 MiB flush never holds a second copy of its memstore."""


class MemStore:
    """Sorted in-memory cells of one store, with a flush snapshot.

    ``add``/``add_many`` validate and insert cells (the latest write of a
    key wins); ``snapshot()``/``clear_snapshot()`` bracket a flush;
    ``scanner()`` opens a :class:`MemStoreScanner` over both maps;
    ``to_batch()`` copies a row range out as an Arrow table.  All methods
    are thread-safe.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._active = Segment()
        self._snapshot: Segment | None = None
        self._seq = 0
        self._open_scanners = 0
        # the newest write that replaced a cell while no reader was open, so the
        # cell it replaced is gone: a reader below it may miss that cell
        self._dropped_below = 0
        self._readers_waiting = 0  # readers about to open views again (see hold_replaced)

    # -- writes ---------------------------------------------------------

    def add(self, cell: tuple) -> None:
        """Insert one cell (a :class:`Cell` or a 6-tuple)."""
        self.add_many((cell,))

    def add_many(self, cells: Iterable[tuple], trusted: bool = False, seq: int | None = None) -> None:
        """Insert cells atomically: a scanner sees all of them or none.

        Every cell is validated before any is inserted, so an invalid cell
        leaves the memstore unchanged.  ``trusted=True`` skips that check for
        cells the caller built and checked already (the region's write path
        and WAL replay), which halves the cost of a write.  ``seq`` is the
        write's sequence id from the table's :class:`storage.mvcc.Mvcc`
        (ids must grow); without it the memstore numbers writes itself.
        """
        made = cells if trusted and isinstance(cells, list) else [check_cell(c) for c in cells]
        if not made:
            return
        if len(made) >= _BULK_CELLS:
            self._add_bulk(made, seq)
            return
        with self._lock:
            seq = self._seq + 1 if seq is None else seq
            if seq > self._seq:
                self._seq = seq
            seg = self._active
            store, seqs, older = seg.cells, seg.seqs, seg.older
            pending = seg.pending if seg.arrow is not None else None
            keep_old = self._open_scanners > 0 or self._readers_waiting > 0
            size = 0
            for cell in made:
                key = (cell[0], cell[1], cell[2], -cell[3], -cell[4])
                old = store.get(key)
                if old is None:
                    size += len(cell[0]) + len(cell[1]) + len(cell[2]) + len(cell[5]) + CELL_OVERHEAD
                else:
                    size += len(cell[5])
                    if keep_old:
                        # An open scanner may still need the replaced cell.
                        older.setdefault(key, []).append((seqs[key], old))
                    else:
                        size -= len(old[5])
                        self._dropped_below = max(self._dropped_below, seq)
                store[key] = cell
                seqs[key] = seq
                if pending is not None:
                    pending.append(key)
            self._finish_write(seg, seq, size, pending)

    def _add_bulk(self, made: list, seq: int | None) -> None:
        """:meth:`add_many` of many cells: the keys built and sorted once, the map
        updated by one merge (:mod:`storage.memstore.bulk_insert`), not per cell."""
        keys = [(c[0], c[1], c[2], -c[3], -c[4]) for c in made]
        items = dict(zip(keys, made))  # a key written twice in the group: the later cell wins
        with self._lock:
            seq = self._seq + 1 if seq is None else seq
            if seq > self._seq:
                self._seq = seq
            seg = self._active
            store, seqs, older = seg.cells, seg.seqs, seg.older
            replaced = items.keys() & dict.keys(store)
            size = sum(map(len, map(_VALUE, items.values())))
            if replaced:
                keep_old = self._open_scanners > 0 or self._readers_waiting > 0
                for key in replaced:
                    old = store[key]
                    if keep_old:
                        older.setdefault(key, []).append((seqs[key], old))  # an open scanner may need it
                    else:
                        size -= len(old[5])
                        self._dropped_below = max(self._dropped_below, seq)
                new_keys = sorted(k for k in items if k not in replaced)
            else:
                new_keys = sorted(items)
            size += (sum(map(len, map(_ROW, new_keys))) + sum(map(len, map(_FAMILY, new_keys)))
                     + sum(map(len, map(_QUALIFIER, new_keys))) + CELL_OVERHEAD * len(new_keys))
            dict.update(store, items)
            seg.add_sorted_run(new_keys)  # into the sorted key list when a reader next needs order
            seqs.update(dict.fromkeys(items, seq))
            pending = seg.pending if seg.arrow is not None else None
            if pending is not None:
                pending.extend(items)
            self._finish_write(seg, seq, size, pending)

    def _finish_write(self, seg, seq: int, size: int, pending: list | None) -> None:
        """The bookkeeping of a write, under the lock: sequence, size, and whether
        the Arrow run is worth updating at the next read."""
        if seq > seg.max_seq:
            seg.max_seq = seq
        seg.heap_size += size
        if pending is not None and len(pending) * REBUILD_SHARE >= len(seg.cells):
            # unread for long: the next read rebuilds the run whole anyway
            seg.arrow, seg.pending = None, []

    # -- sizes ----------------------------------------------------------

    @property
    def heap_size(self) -> int:
        """Approximate bytes held by the active map (what a flush threshold checks)."""
        return self._active.heap_size

    @property
    def snapshot_heap_size(self) -> int:
        """Approximate bytes held by the snapshot being flushed (0 without one)."""
        snap = self._snapshot
        return 0 if snap is None else snap.heap_size

    @property
    def cell_count(self) -> int:
        """Cells held by the active map and the snapshot together (a key
        rewritten after a snapshot is counted in both)."""
        snap = self._snapshot
        return len(self._active.cells) + (0 if snap is None else len(snap.cells))

    def is_empty(self) -> bool:
        """True when neither the active map nor the snapshot holds a cell."""
        return self.cell_count == 0

    # -- flush ----------------------------------------------------------

    def snapshot(self) -> "MemStoreSnapshot":
        """Move the active cells into the flush snapshot and start a new map.

        If the previous snapshot has not been cleared yet, it is returned
        unchanged (as HBase does) and the active map is left alone.
        """
        with self._lock:
            if self._snapshot is None:
                self._active.ordered()  # a snapshot takes no writes: its keys sorted once, here
                self._snapshot = self._active
                self._active = Segment()
            return MemStoreSnapshot(self._snapshot)

    def clear_snapshot(self, snapshot: "MemStoreSnapshot | None" = None) -> None:
        """Drop the snapshot after its store file is committed.

        ``snapshot``, when given, must be the one :meth:`snapshot` returned;
        scanners already open keep reading it.
        """
        with self._lock:
            if snapshot is not None and snapshot._segment is not self._snapshot:
                raise StorageError("clear_snapshot: the given snapshot is not the current one")
            self._snapshot = None

    def snapshot_batch(self) -> pa.Table:
        """The current snapshot's cells as a :data:`storage.cells.CELL_SCHEMA`
        table in cell order (empty without a snapshot)."""
        return cells_to_table(self._snapshot_cells())

    def snapshot_batches(self, cells_per_batch: int = FLUSH_BATCH_CELLS) -> Iterator[pa.Table]:
        """The current snapshot's cells as :data:`storage.cells.CELL_SCHEMA`
        tables of at most ``cells_per_batch`` cells, in cell order (none
        without a snapshot): what a flush writes, a part at a time, so the
        whole snapshot is never copied into one table beside the file's
        blocks (each part's memory is reused by the next).  The writer cuts
        the same blocks of the same cells as from one table."""
        cells = self._snapshot_cells()
        for start in range(0, len(cells), cells_per_batch):
            yield cells_to_table(cells[start : start + cells_per_batch])

    def _snapshot_cells(self) -> list:
        """The snapshot's cells in cell order (a snapshot's map never changes:
        only the list is taken under the lock)."""
        with self._lock:
            snap = self._snapshot
            if snap is None:
                return []
            store = snap.ordered()
            # the sorted key list (iterated in C, the layout storage.memstore.bulk_insert relies
            # on too), one dict lookup each: the SortedDict's views run a Python generator step per cell
            return list(map(store.__getitem__, store._list))

    def restore_snapshot(self) -> None:
        """Undo :meth:`snapshot` after a failed flush: the snapshot's cells
        return to the active map, under the cells written since.

        Both are merged into a new map, so scanners already open keep reading
        the maps they started with.
        """
        with self._lock:
            snap, active = self._snapshot, self._active
            if snap is None:
                return
            merged = Segment()
            merged.cells = SortedDict(snap.ordered())
            merged.cells.update(active.ordered())
            merged.seqs = dict(snap.seqs)
            merged.seqs.update(active.seqs)
            merged.max_seq = max(snap.max_seq, active.max_seq)
            merged.heap_size = snap.heap_size + active.heap_size
            self._active = merged
            self._snapshot = None

    # -- reads ----------------------------------------------------------

    def scanner(self, metrics: "ScanMetrics | None" = None, read_point: int | None = None) -> "MemStoreScanner":
        """Open a scanner over the active map and the snapshot as they are now.

        ``metrics`` (a :class:`storage.scanner.metrics.ScanMetrics`) gets
        ``bytes_read_from_memstore`` once per copied window.  ``read_point``
        (default: every write so far) is the newest write it shows.
        """
        with self._lock:
            self._check_read_point(read_point)
            segments = [s for s in (self._active, self._snapshot) if s is not None and s.cells]
            self._open_scanners += 1
            point = self._seq if read_point is None else read_point
            return MemStoreScanner(segments, point, self._scanner_closed, self._lock, metrics)

    def view(self, read_point: int | None = None) -> "MemStoreView":
        """A read view of the memstore as of ``read_point`` (default: every write
        so far): what one scan reads, whatever writes and flushes follow.
        Call :meth:`MemStoreView.release` when done.  Raises
        :class:`~storage.mvcc.ReadPointTooOld` when a write past ``read_point``
        replaced a cell while no reader was open (the reader then needs a newer
        read point)."""
        with self._lock:
            self._check_read_point(read_point)
            point = self._seq if read_point is None else read_point
            segments = [s for s in (self._active, self._snapshot) if s is not None and s.cells]
            if not segments:
                # nothing to read and nothing to keep: later writes are past the read point
                return MemStoreView(self._lock, self._scanner_opened, self._scanner_closed, [], point, registered=False)
            segments = [s for s in (self._active, self._snapshot) if s is not None]
            self._open_scanners += 1
        return MemStoreView(self._lock, self._scanner_opened, self._scanner_closed, segments, point)

    def _check_read_point(self, read_point: int | None) -> None:
        """Lock held: a reader at ``read_point`` sees every cell it should."""
        if read_point is not None and read_point < self._dropped_below:
            raise ReadPointTooOld(self._dropped_below, self)

    def hold_replaced(self) -> None:
        """Keep the cells writes replace, as for an open reader, until
        :meth:`release_replaced`: a reader told its read point is too old
        holds them while it waits and opens its views again, so later
        writes cannot make it too old a second time."""
        with self._lock:
            self._readers_waiting += 1

    def release_replaced(self) -> None:
        """End a :meth:`hold_replaced`."""
        with self._lock:
            self._readers_waiting -= 1
            self._drop_older_if_unread()

    def _scanner_opened(self) -> None:
        with self._lock:
            self._open_scanners += 1

    def _scanner_closed(self) -> None:
        with self._lock:
            self._open_scanners -= 1
            self._drop_older_if_unread()

    def _drop_older_if_unread(self) -> None:
        """Lock held: no reader is open or waiting, so no replaced cell is needed."""
        if self._open_scanners == 0 and self._readers_waiting == 0:
            self._active.older.clear()
            if self._snapshot is not None:
                self._snapshot.older.clear()

    def range_cells(self, start_row: bytes = b"", stop_row: bytes | None = None) -> list[Cell]:
        """The cells of rows ``[start_row, stop_row)`` as tuples in cell order."""
        with self._lock:
            segments = [s for s in (self._snapshot, self._active) if s is not None and s.cells]
            return merged_range(segments, start_row, stop_row)

    def row_cells(self, row: bytes) -> list[Cell]:
        """The cells of one row, in cell order (the point-read path)."""
        return self.range_cells(row, row + b"\x00")

    def to_batch(
        self, start_row: bytes = b"", stop_row: bytes | None = None, families: Iterable[bytes] | None = None
    ) -> pa.Table:
        """The visible cells of rows ``[start_row, stop_row)`` as a
        :data:`storage.cells.CELL_SCHEMA` table in cell order, optionally
        restricted to ``families``."""
        table = cells_to_table(self.range_cells(start_row, stop_row))
        if families is not None:
            table = table.filter(pc.is_in(table.column("family"), pa.array(list(families), pa.binary())))
        return table
