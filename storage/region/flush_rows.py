"""A flush that writes a memstore snapshot's clean rows as row groups.

A memstore of puts with one version per column (re-puts of rows the files
hold, new rows) is what a compaction's output looks like: rows.  Handed to
the writer as cells (:meth:`StoreFileWriter.append_batch`), it becomes dense
blocks cut at the writer's cell-block size (1 MiB in a compressed file), so
a flush of 16K rows of 100 bytes gave three or four blocks where a
compaction writes one row group; every scan of the file then decodes each
block on its own (about 0.4 ms more a region of 16K rows than one group,
measured in docs/decisions/2026-12-06-live-resolution.md).

:func:`write_snapshot` lays each part of the snapshot out as rows
(:func:`storage.storefile.dense.dense_from_cells`, the writer's own test of
a block) and appends them with :meth:`append_rows`, which gathers rows into
row groups of ``row_group_size`` as a compaction's writes are.  A part that
is not clean (delete markers, versions, too sparse for rows) is appended as
cells, as before.  The last row of each part waits for the next one, so a
row's cells are never split between the two forms.  A family whose blocks are
smaller than the default (its row groups then no larger than its cell blocks)
is flushed as cells, as before.

Versions past the family's ``max_versions`` are dropped first, in the rows that
hold no delete marker, while no file of the store holds one (HBase's flush keeps
``max_versions`` too): a row written again by a later write (random-key writes
put a third of their rows twice in 100K writes over 100K keys) is then a clean
row, not a reason to write the whole part as cells.  Reads at the moment of the
flush see the same rows; a time-range read or a later delete of one version no
longer finds the dropped versions, as after a major compaction
(docs/decisions/2026-12-07-flush-keeps-max-versions.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..cells import CellType
from ..kernels.cell_columns import CellColumns
from ..storefile.dense import dense_from_cells

if TYPE_CHECKING:
    from ..storefile.writer import StoreFileWriter

__all__ = ["write_snapshot", "FLUSH_PART_CELLS"]

FLUSH_PART_CELLS = 65536
"""Cells of the snapshot laid out as rows at a time (the writer gathers the
rows of several parts into one row group; a part bounds the transient copy)."""


def write_snapshot(writer: "StoreFileWriter", parts: Iterable[pa.Table], max_versions: int | None = None) -> None:
    """Append a memstore snapshot's sorted cells of one family (``parts``: cell
    tables in cell order) to ``writer``: clean runs of rows as rows, the rest
    as cells.

    ``max_versions``: the family's.  A row that holds no delete marker keeps the
    newest ``max_versions`` of each column, as HBase's flush keeps them, so that a
    row put again by a later write is a clean row again (a row group).  None
    (the store's files hold a delete marker, which could delete a newer version
    and uncover an older one: see :meth:`Store.flush_max_versions`) keeps every
    version."""
    if writer.row_group_size <= writer.cell_block_size:
        # a family asking for small blocks: its row groups are cut where its cell blocks are, and
        # blocks of a few rows stay cells (fewer than a dense block's least rows); nothing to gain
        for part in parts:
            writer.append_batch(part)
        return
    held: pa.Table | None = None  # the previous part's last row: it may go on in this part
    parts = iter(parts)
    ahead = next(parts, None)
    while ahead is not None:
        part, ahead = ahead, next(parts, None)
        if held is not None:
            part = pa.concat_tables([held, part])
            held = None
        n = part.num_rows
        if n == 0:
            continue
        if ahead is None:  # the last part: its last row is whole
            _append(writer, part, max_versions)
            break
        rows = part.column("row")
        # the first cell of the part's last row (rows are sorted: equal keys are adjacent)
        cut = int(pc.index(rows, rows[n - 1]).as_py())
        held = part.slice(cut)
        if cut:
            _append(writer, part.slice(0, cut), max_versions)
    if held is not None and held.num_rows:
        _append(writer, held, max_versions)


def _newest_versions(cells: pa.Table, max_versions: int) -> pa.Table:
    """``cells`` (whole rows, in cell order) without the versions of a column past its
    newest ``max_versions``, in the rows that hold no delete marker.  A row's markers
    stay with every version: a marker of one version (before the version it deletes, or
    at the row's head) uncovers an older one, which the reads resolve; the rows are
    whole, so a row's marker is never in the part before."""
    n = cells.num_rows
    if n < 2:
        return cells
    columns = CellColumns(cells)
    # a cell starts a column when its row, family or qualifier differs from the previous cell's
    new_row = columns.adjacent_ne("row")
    starts = new_row | columns.adjacent_ne("qualifier") | columns.adjacent_ne("family")
    if starts.all():
        return cells  # one version of every column
    first = np.flatnonzero(starts)
    # each cell's place among its column's versions (newest first: cell order)
    place = np.arange(n) - np.repeat(first, np.diff(np.append(first, n)))
    keep = place < max_versions
    markers = columns.numpy("type") != CellType.PUT
    if markers.any():
        row_id = np.cumsum(new_row) - 1
        marked = np.zeros(int(row_id[-1]) + 1, dtype=bool)
        marked[row_id[markers]] = True
        keep |= marked[row_id]
    return cells if keep.all() else cells.filter(pa.array(keep))


def _append(writer: "StoreFileWriter", cells: pa.Table, max_versions: int | None) -> None:
    """Whole rows of cells: as rows when they are clean enough for a dense block, else as cells."""
    if max_versions is not None:
        cells = _newest_versions(cells, max_versions)
    batch = cells.combine_chunks().to_batches()[0] if cells.num_rows else None
    # cells of another family go the cell way, whose checks refuse them with their own message
    ours = batch is not None and pc.all(pc.equal(batch.column("family"), pa.scalar(writer.family, pa.binary()))).as_py()
    dense = dense_from_cells(batch) if ours else None
    if dense is None:
        writer.append_batch(cells)
        return
    values = [dense.value(j) for j in range(len(dense.qualifiers))]
    writer.append_rows(dense.rows, list(dense.qualifiers), values, dense.plain_timestamps())
