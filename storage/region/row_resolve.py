"""A chunk's sources resolved as rows: what scans and compactions hand to resolve_rows.

A rows scan of one family, or a major compaction to one version, whose
sources hold the same rows (a row re-put in the memstore or a newer file)
or delete markers needs their cells resolved.  Here that happens on rows:
each source's part of the chunk becomes row pieces and markers
(:mod:`storage.region.row_pieces`: a dense block as it is, cells split into
markers and version ranks), :func:`storage.kernels.resolve_rows.resolve_rows`
picks each row and column's newest visible cell, and the result is a row
batch (:func:`rows_batch`), a dense block a filter can run on
(:func:`as_dense`), or the columns a store file writer takes
(:func:`write_resolved`).

A source the row form cannot hold (keys wider than the key encoding, more
than :data:`storage.region.row_pieces.MAX_RANKS` versions of a column that could
be uncovered) makes these return None, and the caller resolves cells.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pyarrow as pa

from ..cells import LATEST_TIMESTAMP
from ..kernels.cell_columns import one_array
from ..kernels.merge import rows_in
from ..kernels.resolve_rows import ABSENT, ResolvedRows, resolve_rows
from .row_pieces import CellSource, dense_piece, join_markers
from ..storefile.dense import MAX_DENSE_QUALIFIERS, MAX_FILL, DenseBlock

__all__ = [
    "part_items", "memstore_items", "qualifiers_of", "resolve_items", "as_dense", "rows_batch",
    "compaction_rows", "write_resolved", "ts_array",
]


def part_items(parts) -> list:
    """One file's :class:`BlockPart` pieces of a chunk as resolution items:
    dense blocks as they are, and its cell blocks together as one
    :class:`CellSource` (they are in cell order: a dense block never sits
    inside a row, so a column's versions are never split by one)."""
    dense = [p.dense for p in parts if p.dense is not None]
    cells = [p.cells for p in parts if p.dense is None]
    if cells:
        dense.append(CellSource(pa.Table.from_batches(cells) if len(cells) > 1 else cells[0]))
    return dense


def memstore_items(memstore, lo: bytes, hi: bytes | None) -> list:
    """A memstore view's (or decoded WAL's) part of rows ``[lo, hi)`` as
    resolution items: its row form when it has one (with the DeleteFamily markers
    a log held among its puts beside it, as markers alone), else its cells."""
    if memstore.is_empty():
        return []
    rows_and_markers = getattr(memstore, "rows_and_markers", None)
    both = rows_and_markers() if rows_and_markers is not None else None
    if both is not None:
        run, markers = both
        block = run.slice(lo, hi)
        part = rows_in(markers, lo, hi)
        return ([] if block is None else [block]) + ([CellSource(part)] if part.num_rows else [])
    row_run = getattr(memstore, "row_run", None)
    run = row_run() if row_run is not None else None
    if run is not None:
        block = run.slice(lo, hi)
        return [] if block is None else [block]
    cells = memstore.to_batch(lo, hi)
    return [CellSource(cells)] if cells.num_rows else []


def qualifiers_of(sources: Sequence[Sequence]) -> list[bytes]:
    """Every qualifier the sources' items hold (dense blocks, cell sources), ascending."""
    found: set = set()
    for items in sources:
        for item in items:
            found.update(item.qualifiers if isinstance(item, DenseBlock) else item.qualifiers())
    return sorted(found)


def resolve_items(
    sources: Sequence[Sequence],
    qualifiers: Sequence[bytes],
    *,
    min_timestamp: int = 0,
    max_timestamp: int = LATEST_TIMESTAMP,
    ttl_cutoff: int | None = None,
    timestamps: Sequence[int] | None = None,
    keep_deleted_cells: str = "FALSE",
) -> ResolvedRows | None:
    """The newest visible cell of each row and column of ``qualifiers`` over
    ``sources`` (newest first, each a list of items of
    :func:`part_items` / :func:`memstore_items`); None when the row form
    cannot hold a source.  ``keep_deleted_cells``: the family's setting (a
    read of the past in a family keeping deleted cells skips later markers)."""
    markers = join_markers([item.markers for items in sources for item in items if isinstance(item, CellSource)])
    bounded = min_timestamp > 0 or max_timestamp != LATEST_TIMESTAMP or ttl_cutoff is not None or timestamps is not None
    # older versions matter only where something may hide the newest
    all_ranks = markers is not None or bounded
    pieces = []
    for items in sources:
        run: list = []  # consecutive dense blocks of the source: one piece
        for item in items:
            if isinstance(item, DenseBlock):
                run.append(item)
                continue
            if run:
                pieces.append(dense_piece(run, qualifiers))
                run = []
            laid = item.pieces(qualifiers, all_ranks)
            if laid is None:
                return None
            pieces.extend(laid)
        if run:
            pieces.append(dense_piece(run, qualifiers))
    return resolve_rows(
        pieces, len(qualifiers), markers, qualifiers=list(qualifiers), min_timestamp=min_timestamp,
        max_timestamp=max_timestamp, ttl_cutoff=ttl_cutoff, timestamps=timestamps,
        keep_deleted_cells=keep_deleted_cells,
    )


def ts_array(ts: np.ndarray) -> pa.Array:
    """A resolved column's timestamps as int64, null where the row has no visible cell."""
    missing = ts == ABSENT
    return pa.array(ts, pa.int64(), mask=missing) if missing.any() else pa.array(ts, pa.int64())


def as_dense(resolved: ResolvedRows, qualifiers: Sequence[bytes]) -> DenseBlock:
    """The resolved rows as a dense block (for the dense filters and :func:`dense_rows`)."""
    return DenseBlock(resolved.keys, tuple(qualifiers), [ts_array(t) for t in resolved.ts], list(resolved.values))


def rows_batch(resolved: ResolvedRows, schema: pa.Schema, include_timestamp: bool) -> pa.RecordBatch:
    """The resolved rows as a scan's row batch (``schema``: ``key``, then per
    column its value and, with ``include_timestamp``, its timestamp), every
    resolved column requested in order."""
    arrays = [resolved.keys]
    if not include_timestamp:
        arrays.extend(resolved.values)  # the timestamps are gathered only when asked for
        return pa.RecordBatch.from_arrays(arrays, schema=schema)
    for ts, values in zip(resolved.ts, resolved.values):
        arrays.append(values)
        arrays.append(ts_array(ts))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def compaction_rows(parts: Sequence[Sequence], ttl_cutoff: int | None) -> tuple[list[bytes], ResolvedRows] | None:
    """The files' parts of one chunk (newest file first) resolved to one
    version per column, as a major compaction of a family keeping one
    version writes them; with the qualifiers in order.  None when the chunk
    needs the cell path: a source the row form cannot hold, or qualifiers too
    many or too sparse for dense blocks."""
    sources = [part_items(file_parts) for file_parts in parts]
    qualifiers = qualifiers_of(sources)
    if not qualifiers or len(qualifiers) > MAX_DENSE_QUALIFIERS:
        return None
    resolved = resolve_items(sources, qualifiers, ttl_cutoff=ttl_cutoff)
    if resolved is None:
        return None
    cells = sum(int((t != ABSENT).sum()) for t in resolved.ts)
    if resolved.num_rows * len(qualifiers) > MAX_FILL * cells:
        return None  # too sparse for dense blocks: the writer would keep cells
    return qualifiers, resolved


def write_resolved(writer, qualifiers: list[bytes], resolved: ResolvedRows) -> None:
    """Append resolved rows to a version 2 store file writer as dense blocks."""
    if resolved.num_rows == 0:
        return
    values = [one_array(v) for v in resolved.values]
    writer.append_rows(resolved.keys, list(qualifiers), values, [ts_array(t) for t in resolved.ts])

