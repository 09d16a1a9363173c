"""The Arrow side of the memstore: a segment's cells as one sorted Arrow run kept
up to date incrementally, the read views built on them, and the flush snapshot."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Iterator

import numpy as np
import pyarrow as pa

from ..cells import CELL_SCHEMA, Cell, sort_key
from .scanner import MemStoreScanner
from .segment import _Segment

if TYPE_CHECKING:
    from .write_buffer import MemStore
    from ..scanner.metrics import ScanMetrics

__all__ = ["MemStoreView", "MemStoreSnapshot"]


_NOT_BUILT = object()


class _ArrowRun:
    """Cells as one sorted Arrow table with each cell's sequence id: a
    segment's cells (kept with the segment and brought up to date at its
    next read after writes), or what one reader sees of them."""

    # weak references: a chunk kept between scans names the runs it was built from (storage/read/chunk_memo.py)
    __slots__ = ("table", "seqs", "max_seq", "_clean", "_row_run", "_rows", "__weakref__")

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
        from ..kernels.merge import bisect_rows

        rows = self._rows
        if rows is None:
            rows = self._rows = self.table.column("row")
        lo = bisect_rows(rows, start_row, right=False) if start_row else 0
        hi = len(rows) if stop_row is None else bisect_rows(rows, stop_row, right=False)
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

    def anchors(self) -> tuple | None:
        """The objects holding what the view shows (its maps' runs), for a
        result kept between scans (:mod:`storage.read.chunk_memo`): a write
        replaces them, so the same objects mean the same cells.  None when
        the view sees a run filtered to its read point (a later write is in
        its map), which no other view shares."""
        live = self._live()
        if any(r.seqs is None for r in live):
            return None
        return tuple(live)

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
