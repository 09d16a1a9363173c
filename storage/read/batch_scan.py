"""The vectorized scan path: a region's cells as Arrow batches.

Per region, the sources of each needed family (memstore, store files newest
first) are read one key-range chunk at a time and handed to the batch
kernels: merge, resolve versions / deletes / TTL / time range, select
columns, filter, then either cells or pivoted rows.  Python runs once per
chunk of blocks, never once per cell.

The hot case, a forward scan of a family with one store file and nothing in
the memstore, streams the file's blocks straight through: blocks are
gathered until ``batch_size`` cells, the last (possibly incomplete) row is
carried into the next round, and the rest goes through the same kernels.
Several store files whose row ranges do not overlap are one sorted run and
stream the same way, one file after another (counted in the scan metrics'
``files_unmerged``; files a span merges are counted in ``files_merged``).
"""

from __future__ import annotations

from typing import Iterator

import numpy as np
import pyarrow as pa

from .. import kernels
from ..errors import InvalidArgument
from ..columns import parse_column
from ..region.view import RegionView, chunk_bounds
from ..storefile import dense_rows
from .batch_resolve import family_read, BatchProcessor
from .hidden_columns import hidden_names, without_hidden
from .batch_stream import block_columns_plan, dense_plan, run_cuts, spans_of, stream_run, streamable, values_discarded
from .late_values import index_values, materialize
from .family_join import FamilyJoin
from .region_plan import RegionReadPlan
from .reverse_stream import reversed_stream, reversible_view
from .row_scan import CELLS, RowMerge
from .stream_memo import memoized, stream_memo

__all__ = ["scan_region_batches"]


def _families_needed(view: RegionView, scan: RegionReadPlan) -> list[str]:
    kept = scan.filter.families_kept() if scan.filter is not None else None
    if kept is not None:  # no other family's cell can pass the filter
        return [name for name in view.stores if name.encode() in kept and family_read(name.encode(), scan.columns)]
    if not scan.columns:
        return list(view.stores)
    names = []
    specs = list(scan.columns)
    if scan.filter is not None:
        specs += list(scan.filter.columns_needed() or ())
    for spec in specs:
        family, _ = parse_column(spec)
        name = family.decode("ascii", "replace")
        if name in view.stores and name not in names:
            names.append(name)
    return names


_ROW_MERGE_BLOCKS = 64  # blocks of the largest file per chunk of a row-run merge
_KEYS_ONLY_CHUNK_BLOCKS = 256  # blocks of the largest file per chunk of a keys-only scan


def scan_region_batches(view: RegionView, scan: RegionReadPlan, metrics=None) -> Iterator[pa.RecordBatch]:
    """Yield the region's part of ``scan`` as Arrow batches (cells or rows) of at
    most ``scan.batch_size`` rows each (zero-copy slices of larger results)."""
    limit = scan.batch_size
    hidden = hidden_names(scan.hidden_columns) if scan.hidden_columns else None
    if hidden and scan.output != "rows":
        raise InvalidArgument("hidden_columns apply to a rows scan only")
    for batch in _region_batches(view, scan, metrics):
        if hidden:
            batch = without_hidden(batch, hidden)
        if batch.num_rows <= limit:
            yield batch
        elif scan.output == "rows" or batch.schema.names[0] == "key":  # a row_dicts scan's dense rows
            for offset in range(0, batch.num_rows, limit):
                yield batch.slice(offset, limit)
        else:
            yield from _slice_at_rows(batch, limit)


def _slice_at_rows(batch: pa.RecordBatch, limit: int) -> Iterator[pa.RecordBatch]:
    """Cut a cell batch into pieces of at most ``limit`` cells at row starts
    (a single row wider than ``limit`` stays whole)."""
    starts = kernels.row_boundaries(batch)
    ends = np.append(starts[1:], batch.num_rows)
    offset = 0
    while offset < batch.num_rows:
        # the last row that ends within offset + limit, at least one row
        i = int(np.searchsorted(ends, offset + limit, side="right")) - 1
        end = int(ends[i]) if i >= 0 and ends[i] > offset else int(ends[np.searchsorted(ends, offset, side="right")])
        yield batch.slice(offset, end - offset)
        offset = end


def _count_files(metrics, files, unmerged: bool) -> None:
    """Count a span's store files as read one after another in key order (``unmerged``) or
    merged, when there are several: once per span, never per row."""
    if metrics is not None and len(files) > 1:
        if unmerged:
            metrics.files_unmerged += len(files)
        else:
            metrics.files_merged += len(files)


def _region_batches(view: RegionView, scan: RegionReadPlan, metrics=None) -> Iterator[pa.RecordBatch]:
    low = max(scan.low, view.start)
    high = scan.high
    if view.end is not None and (high is None or view.end < high):
        high = view.end
    if high is not None and low >= high:
        return
    families = {name: view.stores[name] for name in _families_needed(view, scan)}
    if not families:
        return
    proc = BatchProcessor(scan, families, metrics)
    # a family with a TTL and min_versions: its files' sources are cut as HBase's flush
    # cuts them (StoreView.sources_checked), which only the cell chunks below do
    flushed = {name: proc.flushed_cutoff(name) for name in families}
    cells_only = any(cutoff is not None for cutoff in flushed.values())
    cuts = [] if cells_only or len(families) != 1 else run_cuts(next(iter(families.values())), low, high)
    if not cuts:
        yield from _span_batches(families, low, high, scan, proc, flushed, cells_only, metrics)
        return
    # groups of overlapping files with rows of their own between them: each piece alone
    bounds = [low] + cuts + [high]
    pieces = list(zip(bounds, bounds[1:]))
    if scan.reverse:
        pieces.reverse()
    for lo, hi in pieces:
        yield from _span_batches(families, lo, hi, scan, proc, flushed, cells_only, metrics)
        if proc.done:
            return


def _span_batches(families: dict, low: bytes, high: bytes | None, scan: RegionReadPlan, proc: BatchProcessor,
                  flushed: dict, cells_only: bool, metrics) -> Iterator[pa.RecordBatch]:
    """The batches of ``[low, high)`` of a region's ``families``: streamed, or chunked and merged."""
    run = None if cells_only else streamable(families, low, high, scan)
    if run is not None:
        _count_files(metrics, run.files, True)
        # a clean file scanned again as before: the batches an earlier scan built (stream_memo.py)
        memo = stream_memo(run, low, high, proc)
        yield from memoized(memo, stream_run(run, low, high, proc), metrics)
        return
    reverse_run = None if cells_only else reversible_view(families, low, high, scan)
    if reverse_run is not None:
        _count_files(metrics, reverse_run.files, True)
        # scan()'s reverse rows of a clean file: streamed forward by chunks, then reversed
        yield from reversed_stream(reverse_run, low, high, proc)
        return
    _count_files(metrics, [f for fview in families.values() for *_, f in spans_of(fview, low, high)], False)
    row_merge = None
    if len(families) == 1 and not cells_only:
        # a rows scan of one family merges (and resolves) rows, not cells (storage/read/row_scan.py)
        ((_, fview),) = families.items()
        row_merge = RowMerge.for_scan(fview, dense_plan(fview, proc, True) or block_columns_plan(fview, proc), proc)
    elif not cells_only:
        # a rows scan of several families: each family's row merge, joined on the key (family_join.py)
        row_merge = FamilyJoin.for_scan(families, proc)
    keys_only = values_discarded(scan.filter)  # read key sections only: values come out empty
    if keys_only:
        # chunks without values: many more blocks per chunk for the same memory, fewer kernel calls
        cuts = chunk_bounds(families.values(), low, high, _KEYS_ONLY_CHUNK_BLOCKS)
    elif row_merge is not None:
        # row runs cost little per row but a fixed amount per chunk: larger chunks
        cuts = chunk_bounds(families.values(), low, high, _ROW_MERGE_BLOCKS)
    else:
        cuts = chunk_bounds(families.values(), low, high)
    bounds = [low] + cuts + [high]
    ranges = list(zip(bounds, bounds[1:]))
    if scan.reverse:
        ranges.reverse()
    # the row-counting filter: each clean source can be cut to its rows' first cells before merging
    firsts = {name: keys_only and proc.select is None and dense_rows.first_cell_only(scan.filter)
              and proc.trivial_resolution(name) for name in families}
    for lo, hi in ranges:
        if row_merge is not None:
            rows = row_merge.chunk(lo, hi, scan.reverse)
            if rows is not CELLS:
                yield from rows
                if proc.done:
                    return
                continue
        chunk = {name: fview.sources_checked(lo, hi, keys_only, firsts[name], flushed[name])
                 for name, fview in families.items()}
        # values only come back at the output when sources are merged and no filter reads them
        pool: list | None = [] if scan.filter is None and any(len(s) > 1 for s, _ in chunk.values()) else None
        resolved = []
        for name, (sources, clean) in chunk.items():
            if not sources:
                continue
            if pool is not None:
                sources = index_values(sources, pool)
            resolved.append(proc.resolve_sources(name, sources, clean))
        resolved = [t for t in resolved if t.num_rows]
        if not resolved:
            continue
        cells = resolved[0] if len(resolved) == 1 else kernels.merge_sources(resolved)
        out = proc.finish(cells)
        if out is not None and out.num_rows:
            yield out if pool is None else materialize(out, pool, scan.output)
        if proc.done:
            return
