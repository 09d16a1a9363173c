"""The memstore: a store's recent writes, sorted in memory until flushed.

Cells live in a :class:`sortedcontainers.SortedDict` keyed by
:func:`storage.cells.sort_key` tuples; the value is the cell itself (built
once on write, so reads hand out stored tuples instead of building new
ones).  Adding a cell whose key is already present replaces it: last write
wins.

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
from bisect import bisect_left
from itertools import islice
from operator import itemgetter
from typing import TYPE_CHECKING, Callable, Iterable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from sortedcontainers import SortedDict

from ..cells import CELL_SCHEMA, Cell, CellType, check_cell, sort_key
from ..errors import ScannerError, StorageError

if TYPE_CHECKING:
    from ..scanner.metrics import ScanMetrics

__all__ = ["MemStore", "MemStoreView", "MemStoreSnapshot", "MemStoreScanner", "CELL_OVERHEAD"]

CELL_OVERHEAD = 200
"""Approximate bytes a cell costs beyond its row, family, qualifier and value
(the key tuple, the cell tuple, the map and sequence entries)."""

_DELETE_FAMILY = int(CellType.DELETE_FAMILY)
_TYPES = frozenset(int(t) for t in CellType)

_FIRST_WINDOW = 16  # cells copied after a seek: a point read needs few
_MAX_GROW = 2048  # largest window a sequential read grows to
_MAX_WINDOW = 4096  # a contiguous refill is appended while the window stays below this

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
        self._active = _Segment()
        self._snapshot: _Segment | None = None
        self._seq = 0
        self._open_scanners = 0

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
        with self._lock:
            seq = self._seq + 1 if seq is None else seq
            if seq > self._seq:
                self._seq = seq
            seg = self._active
            store, seqs, older = seg.cells, seg.seqs, seg.older
            pending = seg.pending if seg.arrow is not None else None
            keep_old = self._open_scanners > 0
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
                store[key] = cell
                seqs[key] = seq
                if pending is not None:
                    pending.append(key)
            if seq > seg.max_seq:
                seg.max_seq = seq
            seg.heap_size += size
            if pending is not None and len(pending) * _REBUILD_SHARE >= len(store):
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
                self._snapshot = self._active
                self._active = _Segment()
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
        with self._lock:
            snap = self._snapshot
            cells = [] if snap is None else list(snap.cells.values())
        return _cells_to_table(cells)

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
            merged = _Segment()
            merged.cells = SortedDict(snap.cells)
            merged.cells.update(active.cells)
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
            segments = [s for s in (self._active, self._snapshot) if s is not None and s.cells]
            self._open_scanners += 1
            point = self._seq if read_point is None else read_point
            return MemStoreScanner(segments, point, self._scanner_closed, self._lock, metrics)

    def view(self, read_point: int | None = None) -> "MemStoreView":
        """A read view of the memstore as of ``read_point`` (default: every write
        so far): what one scan reads, whatever writes and flushes follow.
        Call :meth:`MemStoreView.release` when done."""
        with self._lock:
            point = self._seq if read_point is None else read_point
            segments = [s for s in (self._active, self._snapshot) if s is not None and s.cells]
            if not segments:
                # nothing to read and nothing to keep: later writes are past the read point
                return MemStoreView(self, [], point, registered=False)
            segments = [s for s in (self._active, self._snapshot) if s is not None]
            self._open_scanners += 1
        return MemStoreView(self, segments, point)

    def _scanner_closed(self) -> None:
        with self._lock:
            self._open_scanners -= 1
            if self._open_scanners == 0:
                self._active.older.clear()
                if self._snapshot is not None:
                    self._snapshot.older.clear()

    def range_cells(self, start_row: bytes = b"", stop_row: bytes | None = None) -> list[Cell]:
        """The cells of rows ``[start_row, stop_row)`` as tuples in cell order."""
        with self._lock:
            segments = [s for s in (self._snapshot, self._active) if s is not None and s.cells]
            return _merged_range(segments, start_row, stop_row)

    def row_cells(self, row: bytes) -> list[Cell]:
        """The cells of one row, in cell order (the point-read path)."""
        return self.range_cells(row, row + b"\x00")

    def to_batch(
        self, start_row: bytes = b"", stop_row: bytes | None = None, families: Iterable[bytes] | None = None
    ) -> pa.Table:
        """The visible cells of rows ``[start_row, stop_row)`` as a
        :data:`storage.cells.CELL_SCHEMA` table in cell order, optionally
        restricted to ``families``."""
        table = _cells_to_table(self.range_cells(start_row, stop_row))
        if families is not None:
            table = table.filter(pc.is_in(table.column("family"), pa.array(list(families), pa.binary())))
        return table


_NOT_BUILT = object()


class _ArrowRun:
    """Cells as one sorted Arrow table with each cell's sequence id: a
    segment's cells (kept with the segment and brought up to date at its
    next read after writes), or what one reader sees of them."""

    __slots__ = ("table", "seqs", "max_seq", "_clean", "_row_run", "_rows")

    def __init__(self, table: pa.Table, seqs: np.ndarray | None, max_seq: int):
        self.table = table
        self.seqs = seqs  # None for a reader's run: every cell is visible to it
        self.max_seq = max_seq
        self._clean: bool | None = None
        self._row_run = _NOT_BUILT
        self._rows = None

    def row_run(self, lock: threading.Lock):
        """The cells as rows (:class:`storage.memstore.row_runs.RowRun`), built on first
        use and kept with the run; None when they are not clean."""
        if self._row_run is _NOT_BUILT:
            with lock:
                if self._row_run is _NOT_BUILT:
                    from .row_runs import RowRun

                    self._row_run = RowRun.of(self.table) if self.clean else None
        return self._row_run

    @property
    def clean(self) -> bool:
        """True when every cell is a put and no column has two versions (any
        subset then needs no version or delete resolution either)."""
        if self._clean is None:
            from ..kernels import is_clean

            self._clean = is_clean(self.table)
        return self._clean

    def slice(self, start_row: bytes, stop_row: bytes | None) -> pa.Table:
        """The cells of rows ``[start_row, stop_row)`` (zero-copy), found by
        bisecting the row column."""
        from ..kernels.merge import _bisect

        rows = self._rows
        if rows is None:
            rows = self._rows = self.table.column("row")
        lo = _bisect(rows, start_row, right=False) if start_row else 0
        hi = len(rows) if stop_row is None else _bisect(rows, stop_row, right=False)
        return self.table.slice(lo, max(hi - lo, 0))

    def at(self, seg: _Segment, read_point: int, lock: threading.Lock) -> "_ArrowRun":
        """The cells a reader at ``read_point`` sees: this run itself when it
        holds no later write, else a run filtered by sequence id (one vector
        comparison) with the values that later writes replaced restored from
        ``seg.older``."""
        if self.max_seq <= read_point:
            return self
        keep = self.seqs <= read_point
        table = self.table.filter(pa.array(keep))
        later = np.flatnonzero(~keep)
        if seg.older and len(later):
            # a cell overwritten after the read point: the reader sees the value it replaced
            cols = self.table.select(["row", "family", "qualifier", "timestamp", "type"]).take(pa.array(later))
            restored = []
            with lock:
                older = seg.older
                for key in zip(*(c.to_pylist() for c in cols.columns)):
                    for seq, cell in reversed(older.get(sort_key(key), ())):
                        if seq <= read_point:
                            restored.append(cell)
                            break
            if restored:
                from ..kernels import merge_sources

                table = merge_sources([_cells_to_table(restored), table])
        return _ArrowRun(table, None, read_point)


_REBUILD_SHARE = 4  # a segment is rebuilt whole once its unmerged writes reach 1/4 of its cells


def _full_run(seg: _Segment) -> _ArrowRun:
    """The segment's cells built into a run from the sorted map; lock held."""
    keys = list(seg.cells.keys())
    cells = list(seg.cells.values())
    seqs = np.fromiter(map(seg.seqs.__getitem__, keys), dtype=np.int64, count=len(keys))
    return _ArrowRun(_cells_to_table(cells), seqs, int(seqs.max()) if len(seqs) else 0)


def _merged_run(run: _ArrowRun, cells: list, seqs: np.ndarray) -> _ArrowRun | None:
    """``run`` with sorted new ``cells`` (sequence ids ``seqs``) merged in, a
    new cell replacing the run's cell of the same key; None when the keys are
    too wide to encode (the caller rebuilds)."""
    from ..kernels.merge import cell_keys, merge_order

    new = _cells_to_table(cells)
    keys = cell_keys([new, run.table])
    if keys is None:
        return None
    order = merge_order(keys[0], keys[1])
    table = pa.concat_tables([new, run.table]).take(pa.array(order))
    merged_seqs = np.concatenate([seqs, run.seqs])[order]
    return _ArrowRun(table, merged_seqs, max(run.max_seq, int(seqs.max())))


def _arrow_run(seg: _Segment, lock: threading.Lock) -> _ArrowRun:
    """The segment's Arrow run, brought up to date if writes followed it.

    The run is kept with the segment; a write only appends its keys to
    ``seg.pending``.  An update merges the cells of those keys (the only ones
    read as Python tuples) into the previous run by encoded key; the merge
    runs outside the lock, so writers wait only while the new cells are
    copied out.  Many pending writes (a quarter of the segment) rebuild the
    run whole instead.
    """
    run = seg.arrow
    if run is not None and not seg.pending:
        return run
    with lock:
        run = seg.arrow
        pending = seg.pending
        if run is not None and not pending:
            return run
        if run is None or len(pending) * _REBUILD_SHARE >= len(seg.cells):
            run = _full_run(seg)
            seg.arrow, seg.pending = run, []
            return run
        taken = len(pending)
        keys = sorted(set(pending))
        cells = list(map(seg.cells.__getitem__, keys))
        seqs = np.fromiter(map(seg.seqs.__getitem__, keys), dtype=np.int64, count=len(keys))
    merged = _merged_run(run, cells, seqs)
    with lock:
        if merged is None:
            merged = _full_run(seg)
            seg.arrow, seg.pending = merged, []
        elif seg.arrow is run and seg.pending is pending:
            # writes made during the merge stay pending for the next update
            seg.arrow, seg.pending = merged, pending[taken:]
    return merged


class MemStoreView:
    """The memstore as one reader sees it: the maps it had when the view was
    taken, filtered to writes at or below the read point.

    Batch reads come from each map's sorted Arrow run (kept with the map and
    updated incrementally after writes).  The view takes each map's run once,
    filters it to its read point once (when the map holds later writes) and
    slices that per chunk; its row form is built once per view too.  An
    empty memstore costs a length check.  Call :meth:`release` when done.
    """

    def __init__(self, memstore: MemStore, segments: list[_Segment], read_point: int, registered: bool = True):
        self._memstore = memstore
        self._segments = segments  # newest first
        self._runs: list = [None] * len(segments)  # each map's cells visible at the read point
        self.read_point = read_point
        self._released = not registered  # an unregistered view has nothing to give back

    def _visible(self, i: int) -> _ArrowRun:
        """Map ``i``'s cells visible at the read point, built on first use."""
        run = self._runs[i]
        if run is None:
            seg, lock = self._segments[i], self._memstore._lock
            run = _arrow_run(seg, lock).at(seg, self.read_point, lock)
            self._runs[i] = run
        return run

    def _live(self) -> list[_ArrowRun]:
        """The visible runs of the maps that hold cells, newest first."""
        return [self._visible(i) for i, s in enumerate(self._segments) if s.cells]

    def is_empty(self) -> bool:
        """True when the view's maps hold no cell at all (visible or not)."""
        return not any(s.cells for s in self._segments)

    def is_clean(self) -> bool:
        """True when what the view shows needs no version or delete resolution."""
        live = [r for r in self._live() if r.table.num_rows]
        return len(live) <= 1 and all(r.clean for r in live)

    def row_run(self):
        """What the view shows as rows (a :class:`storage.memstore.row_runs.RowRun`),
        when one map holds every cell visible at the read point and those
        cells need no resolution; None otherwise (the scan then merges cells).
        Writes after the read point do not matter: the row form is built from
        the cells visible at it."""
        live = [r for r in self._live() if r.table.num_rows]
        if len(live) != 1:
            return None
        return live[0].row_run(self._memstore._lock)

    def to_batch(self, start_row: bytes = b"", stop_row: bytes | None = None) -> pa.Table:
        """Visible cells of rows ``[start_row, stop_row)`` as a CELL_SCHEMA table in cell order."""
        parts = [p for p in (r.slice(start_row, stop_row) for r in self._live()) if p.num_rows]
        if not parts:
            return CELL_SCHEMA.empty_table()
        if len(parts) == 1:
            return parts[0]
        from ..kernels import merge_sources

        return merge_sources(parts)

    def row_cells(self, row: bytes) -> list[Cell]:
        """The visible cells of one row, in cell order (the point-read path)."""
        parts = []
        lock = self._memstore._lock
        with lock:
            for seg in reversed(self._segments):  # oldest first: newer maps override
                if seg.cells:
                    keys = list(seg.cells.irange(minimum=(row,), maximum=(row + b"\x00",), inclusive=(True, False)))
                    parts.append(seg.visible(keys, self.read_point))
        if not parts:
            return []
        if len(parts) == 1:
            return parts[0][1]
        merged: dict = {}
        for keys, cells in parts:
            merged.update(zip(keys, cells))
        return [merged[k] for k in sorted(merged)]

    def scanner(self, metrics: "ScanMetrics | None" = None) -> "MemStoreScanner":
        """A cell scanner over the view (same maps, same read point)."""
        memstore = self._memstore
        with memstore._lock:
            memstore._open_scanners += 1
        segments = [s for s in self._segments if s.cells]
        return MemStoreScanner(segments, self.read_point, memstore._scanner_closed, memstore._lock, metrics)

    def release(self) -> None:
        """End the view (the memstore may then drop values kept for it)."""
        if not self._released:
            self._released = True
            self._segments = []
            self._memstore._scanner_closed()


def _merged_range(segments: list, start_row: bytes, stop_row: bytes | None) -> list[Cell]:
    """Cells of rows ``[start_row, stop_row)`` across the segments (oldest
    first; a newer segment's cell replaces an older one's with the same key)."""
    parts = [_range_cells(s, start_row, stop_row) for s in segments]
    if len(parts) == 2:
        merged = dict(parts[0])
        merged.update(parts[1])
        return [merged[k] for k in sorted(merged)]
    if parts:
        return [c for _, c in parts[0]]
    return []


def _range_cells(seg: _Segment, start_row: bytes, stop_row: bytes | None) -> list[tuple]:
    """(key, cell) pairs of ``seg`` in ``[start_row, stop_row)``; lock held."""
    if stop_row is None:
        keys = list(seg.cells.irange(minimum=(start_row,)))
    else:
        keys = list(seg.cells.irange(minimum=(start_row,), maximum=(stop_row,), inclusive=(True, False)))
    return list(zip(keys, map(seg.cells.__getitem__, keys)))


def _cells_to_table(cells: list) -> pa.Table:
    """Build a CELL_SCHEMA table column by column from cell tuples."""
    if not cells:
        return CELL_SCHEMA.empty_table()
    rows, families, qualifiers, timestamps, types, values = zip(*cells)
    arrays = [
        pa.array(rows, pa.binary()),
        pa.array(families, pa.binary()),
        pa.array(qualifiers, pa.binary()),
        pa.array(np.fromiter(timestamps, dtype=np.int64, count=len(cells))),
        pa.array(np.fromiter(types, dtype=np.uint8, count=len(cells))),
        pa.array(values, pa.binary()),
    ]
    return pa.Table.from_arrays(arrays, schema=CELL_SCHEMA)


class MemStoreSnapshot:
    """The immutable set of cells being flushed: what a flush writes out."""

    def __init__(self, segment: _Segment):
        self._segment = segment

    @property
    def cell_count(self) -> int:
        """Number of cells in the snapshot."""
        return len(self._segment.cells)

    @property
    def heap_size(self) -> int:
        """Approximate bytes held by the snapshot."""
        return self._segment.heap_size

    def is_empty(self) -> bool:
        """True when there is nothing to flush."""
        return not self._segment.cells

    def cells(self) -> Iterator[Cell]:
        """The cells in cell order."""
        return iter(self._segment.cells.values())

    def to_batch(self) -> pa.Table:
        """All cells as a :data:`storage.cells.CELL_SCHEMA` table in cell order."""
        return _cells_to_table(list(self._segment.cells.values()))


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
        segments: list[_Segment],
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
                raw = list(islice(seg.cells.irange(minimum=start), size))
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
                if bound is None:
                    it = seg.cells.irange(reverse=True)
                else:
                    it = seg.cells.irange(maximum=bound, inclusive=(True, False), reverse=True)
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
            self._metrics.bytes_read_from_memstore += _cell_bytes(cells)

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
