"""A reverse scan of a clean store file's rows for ``scan()``'s dicts.

A forward ``scan()`` of a clean file streams its dense blocks as row
batches (:func:`storage.read.batch_stream.stream_one_file`), which
``rows_to_dicts`` turns into dicts from whole columns.  A reverse scan went
through the cell path instead: every block turned into cells, and a dict
built cell by cell.  Here each chunk of the range, last chunk first, is
streamed forward the same way, and its rows come out in reverse order (row
batches reversed; cell batches reversed by whole rows, each row's cells in
their order).  The limit is applied after the reversal.

Used only where nothing depends on the direction the rows are read in: no
filter (a filter may stop or count as it goes: ``PageFilter``,
``WhileMatchFilter``), one family, one clean file (or a sorted run of files
whose row ranges do not overlap, cut into chunks by every file's blocks), no
memstore rows in the range.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Iterator

import pyarrow as pa

from .. import kernels
from ..kernels.gather import reversed_rows
from ..region.store import StoreView
from ..region.view import chunk_bounds
from .batch_resolve import BatchProcessor
from .batch_stream import SortedRun, stream_run, streamable

if TYPE_CHECKING:
    from .region_plan import RegionReadPlan

__all__ = ["reversible_view", "reversed_stream", "reverse_rows"]

_CHUNK_BLOCKS = 64  # blocks streamed, then reversed, at a time: what a reverse scan holds


def reversible_view(families: dict[str, StoreView], low: bytes, high: bytes | None,
                    scan: "RegionReadPlan") -> SortedRun | None:
    """The sorted run a reverse ``scan()`` may stream forward, chunk by chunk; None otherwise."""
    if not (scan.reverse and scan.row_dicts and scan.filter is None):
        return None
    return streamable(families, low, high, dataclasses.replace(scan, reverse=False))


def reversed_stream(run: SortedRun, low: bytes, high: bytes | None, proc: BatchProcessor) -> Iterator[pa.RecordBatch]:
    """The rows of ``run`` in ``[low, high)``, highest first, for ``proc``'s reverse scan."""
    scan = proc.scan
    forward = BatchProcessor(dataclasses.replace(scan, reverse=False, limit=None), proc.families, proc.metrics)
    # every file's cuts: a chunk holds about _CHUNK_BLOCKS blocks of whichever file it is in
    cuts = sorted({cut for f in run.files
                   for cut in chunk_bounds([dataclasses.replace(run.view, files=(f,))], low, high, _CHUNK_BLOCKS)})
    bounds = [low] + cuts + [high]
    for lo, hi in reversed(list(zip(bounds, bounds[1:]))):
        for batch in reversed(list(stream_run(run, lo, hi, forward))):
            out = reverse_rows(batch)
            if proc.rows_left is not None:
                rows = out.num_rows if out.schema.names[0] == "key" else len(kernels.row_boundaries(out))
                if rows > proc.rows_left:
                    out = _first_rows(out, proc.rows_left)
                    rows = proc.rows_left
                proc.rows_left -= rows
            if out.num_rows:
                yield out
            if proc.done:
                return


def reverse_rows(batch: pa.RecordBatch) -> pa.RecordBatch:
    """A batch's rows in reverse order: a row batch's entries, or a cell
    batch's rows with each row's cells kept in their order."""
    n = batch.num_rows
    if batch.schema.names[0] == "key":
        return reversed_rows(batch)
    return batch.take(pa.array(kernels.order.reverse_rows_order(kernels.row_boundaries(batch), n)))


def _first_rows(batch: pa.RecordBatch, rows: int) -> pa.RecordBatch:
    if batch.schema.names[0] == "key":
        return batch.slice(0, rows)
    starts = kernels.row_boundaries(batch)
    return batch.slice(0, int(starts[rows])) if rows < len(starts) else batch
