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
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable

import pyarrow as pa
import pyarrow.compute as pc

from ..storefile.dense import dense_from_cells

if TYPE_CHECKING:
    from ..storefile.writer import StoreFileWriter

__all__ = ["write_snapshot", "FLUSH_PART_CELLS"]

FLUSH_PART_CELLS = 65536
"""Cells of the snapshot laid out as rows at a time (the writer gathers the
rows of several parts into one row group; a part bounds the transient copy)."""


def write_snapshot(writer: "StoreFileWriter", parts: Iterable[pa.Table]) -> None:
    """Append a memstore snapshot's sorted cells of one family (``parts``: cell
    tables in cell order) to ``writer``: clean runs of rows as rows, the rest
    as cells."""
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
            _append(writer, part)
            break
        rows = part.column("row")
        # the first cell of the part's last row (rows are sorted: equal keys are adjacent)
        cut = int(pc.index(rows, rows[n - 1]).as_py())
        held = part.slice(cut)
        if cut:
            _append(writer, part.slice(0, cut))
    if held is not None and held.num_rows:
        _append(writer, held)


def _append(writer: "StoreFileWriter", cells: pa.Table) -> None:
    """Whole rows of cells: as rows when they are clean enough for a dense block, else as cells."""
    batch = cells.combine_chunks().to_batches()[0] if cells.num_rows else None
    # cells of another family go the cell way, whose checks refuse them with their own message
    ours = batch is not None and pc.all(pc.equal(batch.column("family"), pa.scalar(writer.family, pa.binary()))).as_py()
    dense = dense_from_cells(batch) if ours else None
    if dense is None:
        writer.append_batch(cells)
        return
    values = [dense.value(j) for j in range(len(dense.qualifiers))]
    writer.append_rows(dense.rows, list(dense.qualifiers), values, dense.plain_timestamps())
