"""The vectorized scan path: a region's cells as Arrow batches.

Per region, the sources of each needed family (memstore, store files newest
first) are read one key-range chunk at a time and handed to the batch
kernels: merge, resolve versions / deletes / TTL / time range, select
columns, filter, then either cells or pivoted rows.  Python runs once per
chunk of blocks, never once per cell.

The hot case, a forward scan of a family with one store file and nothing in
the memstore, streams the file's blocks straight through: blocks are
gathered until ``batch_cells`` cells, the last (possibly incomplete) row is
carried into the next round, and the rest goes through the same kernels.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..storefile import dense_rows
from .. import kernels
from ..cells import CELL_SCHEMA, LATEST_TIMESTAMP
from .late_values import index_values, materialize
from ..region.region import RegionView, chunk_bounds
from ..columns import parse_column
from .row_scan import CELLS, RowMerge
from ..region.store import StoreView
from ..storefile._dense import empty_binary

__all__ = ["BatchScan", "scan_region_batches"]


@dataclass
class BatchScan:
    """A normalized scan for the batch path.

    ``low`` is inclusive and ``high`` exclusive (None: unbounded), whatever
    the direction; ``reverse`` only changes the order rows come out in.
    """

    low: bytes = b""
    high: bytes | None = None
    reverse: bool = False
    columns: Sequence[bytes] | None = None  # b"cf:q" or b"cf"
    min_timestamp: int = 0
    max_timestamp: int = LATEST_TIMESTAMP
    timestamps: Sequence[int] | None = None
    max_versions: int = 1
    filter: object | None = None  # a storage.filters Filter, already copied and reset
    limit: int | None = None
    batch_cells: int = 65536
    output: str = "cells"  # or "rows"
    include_timestamp: bool = False
    now_ms: int | None = None


def _families_needed(view: RegionView, scan: BatchScan) -> list[str]:
    kept = scan.filter.families_kept() if scan.filter is not None else None
    if kept is not None:  # no other family's cell can pass the filter
        return [name for name in view.stores if name.encode() in kept and _family_read(name.encode(), scan.columns)]
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


def _family_read(family: bytes, columns: Sequence[bytes] | None) -> bool:
    """Does a scan of ``columns`` (None: everything) read any of ``family``'s cells?"""
    return not columns or any(parse_column(spec).family == family for spec in columns)


def _column_mask(cells: pa.Table, columns: Sequence[bytes]) -> pa.ChunkedArray | None:
    """Boolean mask of the cells that belong to ``columns``; None selects all."""
    whole = set()
    exact = set()
    for spec in columns:
        family, qualifier = parse_column(spec)
        if qualifier is None:  # b"cf"; b"cf:" is the empty qualifier
            whole.add(family)
        else:
            exact.add(family + b":" + qualifier)
    mask = None
    if whole:
        mask = pc.is_in(cells.column("family"), value_set=pa.array(sorted(whole), pa.binary()))
    if exact:
        joined = pc.binary_join_element_wise(cells.column("family"), cells.column("qualifier"), b":")
        m = pc.is_in(joined, value_set=pa.array(sorted(exact), pa.binary()))
        mask = m if mask is None else pc.or_(mask, m)
    return mask


class _Processor:
    """Runs resolve -> select -> filter -> limit -> output over chunks of one scan."""

    def __init__(self, scan: BatchScan, families: dict[str, StoreView], metrics):
        self.scan = scan
        self.families = families
        self.metrics = metrics
        now = scan.now_ms if scan.now_ms is not None else int(time.time() * 1000)
        self.ttl_cutoff = {}
        for name, view in families.items():
            ttl = view.settings.ttl
            self.ttl_cutoff[name] = None if ttl is None else now - ttl * 1000
        self.rows_left = scan.limit
        self.select = None
        if scan.columns:
            wanted = list(scan.columns)
            self.select = wanted
            self.select_with_needed = wanted + list(scan.filter.columns_needed() or ()) if scan.filter is not None else wanted
        self.output_columns = list(scan.columns) if scan.columns else [n.encode() for n in families]

    def trivial_resolution(self, name: str) -> bool:
        """True when resolving one already-clean source changes nothing: no TTL, no
        time range, no timestamp list (the source must also need no resolution)."""
        scan = self.scan
        return (
            self.ttl_cutoff[name] is None
            and scan.min_timestamp == 0
            and scan.max_timestamp == LATEST_TIMESTAMP
            and scan.timestamps is None
        )

    def resolve_sources(self, name: str, sources: list[pa.Table], clean: list[bool]) -> pa.Table:
        """One family's sources of a chunk, merged and resolved.

        Sources that each need no resolution, read without TTL or time
        range, are final as they are: one alone is returned as it is, and
        two that share no row are only merged.
        """
        if all(clean) and self.trivial_resolution(name):
            if len(sources) == 1:
                return sources[0]
            merged = kernels.merge_disjoint(sources)
            if merged is not None:
                return merged
        return self.resolve_family(name, sources)

    def resolve_family(self, name: str, sources: list[pa.Table]) -> pa.Table:
        view = self.families[name]
        merged = kernels.merge_sources(sources)
        return kernels.resolve(
            merged,
            max_versions=min(self.scan.max_versions, view.settings.max_versions),
            min_timestamp=self.scan.min_timestamp,
            max_timestamp=self.scan.max_timestamp,
            ttl_cutoff=self.ttl_cutoff[name],
            timestamps=self.scan.timestamps,
        )

    def finish(self, cells: pa.Table, filtered: bool = False) -> pa.RecordBatch | None:
        """Select, filter, limit and shape one chunk of resolved cells (forward order);
        ``filtered``: the cells are already what the filter leaves of them."""
        scan = self.scan
        if cells.num_rows == 0:
            return None
        if self.metrics is not None:
            self.metrics.add_cells(cells)
        if self.select is not None and (scan.output != "rows" or scan.filter is not None or self.rows_left is not None):
            # rows output without a filter needs no mask: the pivot picks its columns
            mask = _column_mask(cells, self.select_with_needed)
            if mask is not None:
                cells = cells.filter(mask)
        pivot_then_reverse = scan.reverse and scan.output == "rows" and scan.filter is None
        if scan.reverse and not pivot_then_reverse:
            cells = kernels.reverse_rows(cells)
        if scan.filter is not None and not filtered:
            before = _row_count(cells)
            cells = scan.filter.filter_batch(cells)
            if self.metrics is not None:
                self.metrics.rows_filtered += before - _row_count(cells)
            if self.select is not None and self.select_with_needed is not self.select:
                mask = _column_mask(cells, self.select)
                cells = cells.filter(mask)
        if cells.num_rows == 0:
            return None
        if pivot_then_reverse:
            # reversing whole rows after the pivot copies each value once, not twice
            rows = kernels.cells_to_rows(cells, self.output_columns, include_timestamp=scan.include_timestamp)
            rows = rows.take(pa.array(np.arange(rows.num_rows - 1, -1, -1)))
            if self.rows_left is not None:
                rows = rows.slice(0, min(rows.num_rows, self.rows_left))
                self.rows_left -= rows.num_rows
            return rows
        if self.rows_left is not None:
            starts = kernels.row_boundaries(cells)
            if len(starts) > self.rows_left:
                cells = cells.slice(0, int(starts[self.rows_left]))
                self.rows_left = 0
            else:
                self.rows_left -= len(starts)
        if scan.output == "rows":
            return kernels.cells_to_rows(cells, self.output_columns, include_timestamp=scan.include_timestamp)
        return cells.combine_chunks().to_batches()[0] if cells.num_rows else None

    @property
    def done(self) -> bool:
        return (self.rows_left is not None and self.rows_left <= 0) or (
            self.scan.filter is not None and self.scan.filter.filter_all_remaining()
        )


def _row_count(cells: pa.Table) -> int:
    return len(kernels.row_boundaries(cells)) if cells.num_rows else 0


def _streamable(views: dict[str, StoreView], low: bytes, high: bytes | None, scan: BatchScan) -> StoreView | None:
    if scan.reverse or len(views) != 1:
        return None
    (view,) = views.values()
    if len(view.files) != 1:
        return None
    if view.memstore_batch(low, high).num_rows:
        return None
    return view


_KEY_COLUMNS = [0, 1, 2, 3, 4]  # every cell column but the value


def values_discarded(flt) -> bool:
    """True when a filter's output has only empty values and nothing in it reads
    them: a plain KeyOnlyFilter, alone or ANDed with filters that look at keys only
    (the row-counting filters)."""
    from ..filters import (
        ColumnPrefixFilter,
        FilterList,
        FirstKeyOnlyFilter,
        KeyOnlyFilter,
        MultiRowRangeFilter,
        PageFilter,
        PrefixFilter,
        QualifierFilter,
        RowFilter,
        TimestampsFilter,
    )

    key_blind = (FirstKeyOnlyFilter, PrefixFilter, RowFilter, MultiRowRangeFilter, ColumnPrefixFilter,
                 QualifierFilter, TimestampsFilter, PageFilter)
    if isinstance(flt, KeyOnlyFilter):
        return not flt.len_as_value
    if isinstance(flt, FilterList) and flt.operator.name == "MUST_PASS_ALL" and flt.filters:
        strips = [f for f in flt.filters if values_discarded(f)]
        return bool(strips) and all(f in strips or isinstance(f, key_blind) for f in flt.filters)
    return False


def _dense_plan(view: StoreView, proc: _Processor, skip_resolve: bool):
    """``(field names, qualifiers, filter plan)`` when this scan takes dense
    blocks straight to rows (see :mod:`storage.storefile.dense_rows`), else None."""
    scan = proc.scan
    if scan.output != "rows" or not skip_resolve:
        return None
    family = view.family.encode()
    columns = dense_rows.dense_columns(family, proc.output_columns)
    plan = dense_rows.dense_filter(scan.filter, family)
    if columns is None or plan is None:
        return None
    names, qualifiers = columns
    return names, qualifiers, plan


def _dense_to_rows(dense, direct, proc: _Processor) -> pa.RecordBatch | None:
    """One dense block part as rows: column slices, a filter as one comparison."""
    names, qualifiers, plan = direct
    mask, value_masks = dense_rows.filter_masks(plan, dense, qualifiers)
    out = dense_rows.dense_rows(dense, names, qualifiers, proc.scan.include_timestamp, mask, value_masks)
    if proc.metrics is not None:
        proc.metrics.cells_scanned += dense.cell_count()
        if plan[0] != "none":
            proc.metrics.rows_filtered += dense.num_rows - (out.num_rows if out is not None else 0)
    if out is not None and proc.rows_left is not None:
        out = out.slice(0, min(out.num_rows, proc.rows_left))
        proc.rows_left -= out.num_rows
    return out if out is not None and out.num_rows else None


def _stream_one_file(view: StoreView, low: bytes, high: bytes | None, proc: _Processor) -> Iterator[pa.RecordBatch]:
    """Stream one store file's blocks through the kernels, a group of blocks at a time.

    A block is processed as it is (no copy) once the next block shows that
    its last row is complete; the writer cuts blocks at row boundaries, so
    only a row wider than a block makes a carry-over and a concatenation.
    Blocks smaller than ``_MIN_GROUP_CELLS`` are grouped first, because the
    kernels' fixed cost per call dominates for small batches.

    Dense blocks (format version 2) of whole rows skip the cell kernels: a
    rows scan slices their columns (:func:`_dense_to_rows`), and the
    row-counting filter takes the first cell of each row from their keys
    (:func:`storage.storefile.dense_rows.first_cells`), many blocks per call.
    """
    reader = view.files[0].reader
    # a file with one version per column and no markers needs no resolution
    skip_resolve = not reader.info.needs_resolution and proc.trivial_resolution(view.family)
    group: list[pa.RecordBatch] = []
    group_cells = 0
    held: pa.RecordBatch | None = None  # complete rows, except maybe the last

    drop_values = values_discarded(proc.scan.filter)
    direct = _dense_plan(view, proc, skip_resolve)
    first_only = (
        drop_values and skip_resolve and proc.select is None and dense_rows.first_cell_only(proc.scan.filter)
    )
    firsts: list = []  # dense parts waiting to become first cells
    firsts_rows = 0
    dense_out: list[pa.RecordBatch] = []  # rows sliced from dense blocks, joined up to a group
    dense_out_cells = 0  # as the cell path counts a group: cells, here rows x columns
    group_limit = min(_MIN_GROUP_CELLS, proc.scan.batch_cells)

    def emit_dense_out() -> Iterator[pa.RecordBatch]:
        # one batch per group, not per block: consumers pay per batch (and
        # batch_size asks for batches that size); joining is a copy, no gather
        yield dense_out[0] if len(dense_out) == 1 else pa.concat_batches(dense_out)

    def emit(batches: list[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        if drop_values:
            # the filter empties every value anyway: never copy them
            keys = [b.select(_KEY_COLUMNS) for b in batches]
            batch = keys[0] if len(keys) == 1 else pa.concat_batches(keys)
            batch = batch.append_column(CELL_SCHEMA.field(5), empty_binary(batch.num_rows))
        else:
            batch = batches[0] if len(batches) == 1 else pa.concat_batches(batches)
        cells = pa.Table.from_batches([batch])
        out = proc.finish(cells if skip_resolve else proc.resolve_family(view.family, [cells]))
        if out is not None and out.num_rows:
            yield out

    def emit_firsts() -> Iterator[pa.RecordBatch]:
        if proc.metrics is not None:
            proc.metrics.cells_scanned += sum(d.cell_count() for d in firsts) - firsts_rows  # finish adds the rest
        # first cells with empty values are what the row-counting filter leaves
        out = proc.finish(pa.Table.from_batches([dense_rows.first_cells(firsts, reader.info.family)]), filtered=True)
        if out is not None and out.num_rows:
            yield out

    # keys-only runs of dense blocks: large for a count, a little past the limit for a limited scan
    run_rows = max(proc.scan.batch_cells, _MIN_GROUP_CELLS)
    if proc.rows_left is not None:
        run_rows = min(run_rows, max(proc.rows_left, 1024))
    for part in reader.scan_parts(low, high, keys_only=drop_values, run_rows=run_rows):
        dense = part.dense
        if dense is not None and (direct is not None or first_only) and not part.continued and not part.open:
            # the part starts a row, so the held rows are complete
            if held is not None:
                group.append(held)
                group_cells += held.num_rows
                held = None
            if group:
                yield from emit(group)
                group, group_cells = [], 0
            if first_only:
                firsts.append(dense)
                firsts_rows += dense.num_rows
                if firsts_rows >= group_limit:
                    yield from emit_firsts()
                    firsts, firsts_rows = [], 0
                    if proc.done:
                        return
                continue
            out = _dense_to_rows(dense, direct, proc)
            if out is not None:
                dense_out.append(out)
                dense_out_cells += out.num_rows * len(direct[0])
                if dense_out_cells >= group_limit:
                    yield from emit_dense_out()
                    dense_out, dense_out_cells = [], 0
            if proc.done:
                break
            continue
        if dense_out:
            yield from emit_dense_out()
            dense_out, dense_out_cells = [], 0
        if firsts:
            yield from emit_firsts()
            firsts, firsts_rows = [], 0
            if proc.done:
                return
        batch = part.batch()
        if held is None:
            held = batch
            continue
        if batch.column(0)[0].as_py() == held.column(0)[-1].as_py():
            starts = kernels.row_boundaries(pa.Table.from_batches([held]))
            cut = int(starts[-1])
            if cut:
                group.append(held.slice(0, cut))
                group_cells += cut
            held = pa.concat_batches([held.slice(cut), batch])
        else:
            group.append(held)
            group_cells += held.num_rows
            held = batch
        if group_cells >= group_limit:
            yield from emit(group)
            group, group_cells = [], 0
            if proc.done:
                return
    if dense_out:
        yield from emit_dense_out()
    if firsts:
        yield from emit_firsts()
    if held is not None:
        group.append(held)
    if group:
        yield from emit(group)


_MIN_GROUP_CELLS = 16384
_ROW_MERGE_BLOCKS = 64  # blocks of the largest file per chunk of a row-run merge
_KEYS_ONLY_CHUNK_BLOCKS = 256  # blocks of the largest file per chunk of a keys-only scan


def scan_region_batches(view: RegionView, scan: BatchScan, metrics=None) -> Iterator[pa.RecordBatch]:
    """Yield the region's part of ``scan`` as Arrow batches (cells or rows) of at
    most ``scan.batch_cells`` rows each (zero-copy slices of larger results)."""
    limit = scan.batch_cells
    for batch in _region_batches(view, scan, metrics):
        if batch.num_rows <= limit:
            yield batch
        elif scan.output == "rows":
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


def _region_batches(view: RegionView, scan: BatchScan, metrics=None) -> Iterator[pa.RecordBatch]:
    low = max(scan.low, view.start)
    high = scan.high
    if view.end is not None and (high is None or view.end < high):
        high = view.end
    if high is not None and low >= high:
        return
    families = {name: view.stores[name] for name in _families_needed(view, scan)}
    if not families:
        return
    proc = _Processor(scan, families, metrics)
    stream_view = _streamable(families, low, high, scan)
    if stream_view is not None:
        yield from _stream_one_file(stream_view, low, high, proc)
        return
    row_merge = None
    if len(families) == 1:
        # a rows scan of clean sources merges rows, not cells (storage/read/row_scan.py)
        ((name, fview),) = families.items()
        row_merge = RowMerge.for_scan(fview, _dense_plan(fview, proc, proc.trivial_resolution(name)), proc)
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
        chunk = {name: fview.sources_checked(lo, hi, keys_only, firsts[name]) for name, fview in families.items()}
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
