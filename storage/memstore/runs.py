"""The Arrow side of the memstore: a segment's Arrow run kept up to date
incrementally (:class:`~storage.memstore.segment.ArrowRun`), the read views built
on them, and the flush snapshot."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Callable, Iterator

import numpy as np
import pyarrow as pa

from ..cells import EMPTY_CELLS, Cell
from .scanner import MemStoreScanner
from .segment import ArrowRun, Segment, cells_to_table

if TYPE_CHECKING:
    from ..scanner.metrics import ScanMetrics

__all__ = ["MemStoreView", "MemStoreSnapshot"]


REBUILD_SHARE = 4  # a segment is rebuilt whole once its unmerged writes reach 1/4 of its cells


def _full_run(seg: Segment) -> ArrowRun:
    """The segment's cells built into a run from the sorted map; lock held."""
    ordered = seg.ordered()
    keys = list(ordered.keys())
    cells = list(ordered.values())
    seqs = np.fromiter(map(seg.seqs.__getitem__, keys), dtype=np.int64, count=len(keys))
    return ArrowRun(cells_to_table(cells), seqs, int(seqs.max()) if len(seqs) else 0)


def _merged_run(run: ArrowRun, cells: list, seqs: np.ndarray) -> ArrowRun | None:
    """``run`` with sorted new ``cells`` (sequence ids ``seqs``) merged in, a
    new cell replacing the run's cell of the same key; None when the keys are
    too wide to encode (the caller rebuilds)."""
    from ..kernels.merge import cell_keys, merge_order

    new = cells_to_table(cells)
    keys = cell_keys([new, run.table])
    if keys is None:
        return None
    order = merge_order(keys[0], keys[1])
    table = pa.concat_tables([new, run.table]).take(pa.array(order))
    merged_seqs = np.concatenate([seqs, run.seqs])[order]
    return ArrowRun(table, merged_seqs, max(run.max_seq, int(seqs.max())))


def _arrow_run(seg: Segment, lock: threading.Lock) -> ArrowRun:
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
        if run is None or len(pending) * REBUILD_SHARE >= len(seg.cells):
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

    def __init__(self, lock: threading.Lock, opened: Callable[[], None], closed: Callable[[], None],
                 segments: list[Segment], read_point: int, registered: bool = True):
        # the memstore's lock over its maps, and its count of open readers
        # (replaced cells are kept while it is above zero)
        self._lock, self._opened, self._closed = lock, opened, closed
        self._segments = segments  # newest first
        self._runs: list = [None] * len(segments)  # each map's cells visible at the read point
        self.read_point = read_point
        self._released = not registered  # an unregistered view has nothing to give back

    def _visible(self, i: int) -> ArrowRun:
        """Map ``i``'s cells visible at the read point, built on first use."""
        run = self._runs[i]
        if run is None:
            seg, lock = self._segments[i], self._lock
            run = _arrow_run(seg, lock).at(seg, self.read_point, lock)
            self._runs[i] = run
        return run

    def _live(self) -> list[ArrowRun]:
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
        return live[0].row_run(self._lock)

    def to_batch(self, start_row: bytes = b"", stop_row: bytes | None = None) -> pa.Table:
        """Visible cells of rows ``[start_row, stop_row)`` as a CELL_SCHEMA table in cell order."""
        parts = [p for p in (r.slice(start_row, stop_row) for r in self._live()) if p.num_rows]
        if not parts:
            return EMPTY_CELLS
        if len(parts) == 1:
            return parts[0]
        from ..kernels import merge_sources

        return merge_sources(parts)

    def row_cells(self, row: bytes) -> list[Cell]:
        """The visible cells of one row, in cell order (the point-read path)."""
        parts = []
        lock = self._lock
        with lock:
            for seg in reversed(self._segments):  # oldest first: newer maps override
                if seg.cells:
                    keys = list(seg.ordered().irange(minimum=(row,), maximum=(row + b"\x00",), inclusive=(True, False)))
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
        self._opened()
        segments = [s for s in self._segments if s.cells]
        return MemStoreScanner(segments, self.read_point, self._closed, self._lock, metrics)

    def release(self) -> None:
        """End the view (the memstore may then drop values kept for it)."""
        if not self._released:
            self._released = True
            self._segments = []
            self._closed()


def merged_range(segments: list, start_row: bytes, stop_row: bytes | None) -> list[Cell]:
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


def _range_cells(seg: Segment, start_row: bytes, stop_row: bytes | None) -> list[tuple]:
    """(key, cell) pairs of ``seg`` in ``[start_row, stop_row)``; lock held."""
    cells = seg.ordered()
    if stop_row is None:
        keys = list(cells.irange(minimum=(start_row,)))
    else:
        keys = list(cells.irange(minimum=(start_row,), maximum=(stop_row,), inclusive=(True, False)))
    return list(zip(keys, map(seg.cells.__getitem__, keys)))


class MemStoreSnapshot:
    """The immutable set of cells being flushed: what a flush writes out."""

    def __init__(self, segment: Segment):
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
        return iter(self._segment.cells.values())  # a snapshot's keys were ordered when it was taken

    def to_batch(self) -> pa.Table:
        """All cells as a :data:`storage.cells.CELL_SCHEMA` table in cell order."""
        return cells_to_table(list(self._segment.cells.values()))
