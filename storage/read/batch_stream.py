"""Streaming store files straight to output batches: the fast path of a batch
scan whose region's files in the range hold rows of their own (one file, or
several whose row ranges do not overlap) and nothing in memory there, dense
blocks going to rows without a cell-level merge.  Only here are blocks whose
value bounds rule out the filter skipped (:mod:`storage.read.block_pruning`).

Files whose ``[first row, last row]`` ranges are disjoint are one sorted run:
read one after another in key order they give the rows in order, and every
row, with its delete markers and versions, lies in one file, so each file
resolves alone.  A bulk load of several disjoint key ranges, or a Spark write
that left a file per task in a region, then reads as a compacted file does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterator

import pyarrow as pa

from .. import kernels
from ..cells import CELL_SCHEMA
from ..region.store import StoreFile, StoreView
from ..storefile import dense_rows
from ..storefile.dense import empty_binary
from .batch_resolve import BatchProcessor
from .block_pruning import kept_ranges
from .hidden_columns import hidden_names

if TYPE_CHECKING:
    from .region_plan import RegionReadPlan

__all__ = ["SortedRun", "streamable", "sorted_run", "spans_of", "run_cuts", "dense_plan", "block_columns_plan",
           "family_map_rows", "stream_run", "values_discarded"]


@dataclass(frozen=True)
class SortedRun:
    """What a streamed scan of one family reads: ``view`` and the ``files`` of it that
    hold rows of the range, in key order, no two holding the same row."""

    view: StoreView
    files: tuple[StoreFile, ...]


def spans_of(view: StoreView, low: bytes, high: bytes | None) -> list[tuple[bytes, bytes, StoreFile]]:
    """``(first row, last row, file)`` of ``view``'s files that hold rows of ``[low, high)``
    (the first and last cells of each file's info), by first row."""
    spans = []
    for f in view.files:
        info = f.reader.info
        if info.first_cell is None:
            continue  # an empty file holds no row
        first, last = info.first_cell[0], info.last_cell[0]
        if last < low or (high is not None and first >= high):
            continue  # no row of the range
        spans.append((first, last, f))
    spans.sort(key=lambda span: span[0])
    return spans


def sorted_run(view: StoreView, low: bytes, high: bytes | None) -> SortedRun | None:
    """``view``'s files that hold rows of ``[low, high)``, in key order, when their row
    ranges (the first and last cells of each file's info) do not overlap; None when two
    of them may hold the same row, which must then be merged.  The memstore is not looked at."""
    files = view.files
    if len(files) == 1:
        return SortedRun(view, files)
    spans = spans_of(view, low, high)
    for (_, last, _), (first, _, _) in zip(spans, spans[1:]):
        if first <= last:
            return None
    return SortedRun(view, tuple(f for _, _, f in spans))


def run_cuts(view: StoreView, low: bytes, high: bytes | None) -> list[bytes]:
    """Row keys that cut ``[low, high)`` between groups of ``view``'s files whose row ranges
    overlap, when some group has several files and there are several groups (else none):
    each piece then holds the rows of one group only, so a piece of one file streams while
    a piece of overlapping files is merged, instead of the whole range being merged."""
    spans = spans_of(view, low, high)
    starts: list[bytes] = []  # each group's first row, but the first group's
    shared = False  # a group of several files
    reach = None
    for first, last, _ in spans:
        if reach is not None and first <= reach:
            shared = True
            reach = max(reach, last)
            continue
        if reach is not None:
            starts.append(first)
        reach = last
    return [cut for cut in starts if cut > low] if shared and starts else []


def streamable(views: dict[str, StoreView], low: bytes, high: bytes | None, scan: RegionReadPlan) -> SortedRun | None:
    """The one family's sorted run when ``[low, high)`` of the scan can stream it (forward,
    one family, files that do not overlap there, nothing in the memstore there), else None."""
    if scan.reverse or len(views) != 1:
        return None
    (view,) = views.values()
    if not view.files:
        return None
    run = sorted_run(view, low, high)
    if run is None or view.memstore_holds(low, high):
        return None
    return run


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


def dense_plan(view: StoreView, proc: BatchProcessor, skip_resolve: bool):
    """``(field names, qualifiers, filter plan, hidden (name, qualifier) pairs)`` when this scan
    takes dense blocks straight to rows (see :mod:`storage.storefile.dense_rows`), else None."""
    scan = proc.scan
    if scan.output != "rows" or not skip_resolve:
        return None
    family = view.family.encode()
    columns = dense_rows.dense_columns(family, proc.output_columns)
    plan = dense_rows.dense_filter(scan.filter, family)
    if columns is None or plan is None:
        return None
    names, qualifiers = columns
    hidden_pairs: list[tuple[str, bytes]] = []  # (name, qualifier) of hidden columns: rows, no slices
    if scan.hidden_columns:
        hidden = hidden_names(scan.hidden_columns)
        hidden_pairs = [(n, q) for n, q in zip(names, qualifiers) if n in hidden]
        names, qualifiers = [n for n in names if n not in hidden], [q for n, q in zip(names, qualifiers) if n not in hidden]
    return names, qualifiers, plan, hidden_pairs


def block_columns_plan(view: StoreView, proc: BatchProcessor):
    """The ``direct`` plan of a scan that takes each dense block's own columns (names None:
    every column of the block, named as Latin-1 text so they turn back into the exact bytes)
    -- ``scan()``'s dicts (:attr:`RegionReadPlan.row_dicts`) with no column named or the
    family named whole, and a rows scan of the family named whole (its map column,
    :func:`family_map_rows`) -- or, for ``scan()``'s dicts, the named columns of ``view``'s
    family; with the scan's filter as a :func:`storage.storefile.dense_rows.dense_filter`
    plan, in either direction.  None otherwise (the cell path): hidden columns, a filter
    the rows cannot apply (a stateful one, or one that needs cells)."""
    scan = proc.scan
    if scan.hidden_columns:
        return None
    family = view.family.encode()
    # the filters a dense plan takes decide each row alone (a row-key filter knows the scan's
    # direction), so reverse scans take them as forward ones do
    plan = dense_rows.dense_filter(scan.filter, family)
    if plan is None:
        return None
    if scan.row_dicts:
        if proc.select is None or proc.output_columns == [family]:
            return None, family, plan, []
        picked = dense_rows.dense_columns(family, proc.output_columns)
        return None if picked is None else (*picked, plan, [])
    if scan.output == "rows" and proc.output_columns == [family] and not scan.dictionary_values:
        return None, family, plan, []
    return None


def family_map_rows(rows: pa.RecordBatch, family: bytes, qualifiers, proc: BatchProcessor) -> pa.RecordBatch:
    """A row batch of a :func:`block_columns_plan` plan without names (the columns ``qualifiers`` of
    ``family``) as the scan gives it: as it is for ``scan()``'s dicts, else with the columns as one
    map column."""
    if proc.scan.row_dicts:
        return rows
    return kernels.columns_to_family_map(rows, family.decode("latin-1"), qualifiers, proc.scan.include_timestamp)


def _dense_to_rows(dense, direct, proc: BatchProcessor) -> pa.RecordBatch | None:
    """One dense block part as rows: column slices, a filter as one comparison."""
    names, qualifiers, plan, hidden_pairs = direct
    also = [q for _, q in hidden_pairs]
    if names is None:  # every column of the family: the block's own (those read, under a column filter)
        family = qualifiers
        qualifiers = dense_rows.held_qualifiers(dense)
        names = [(family + b":" + q).decode("latin-1") for q in qualifiers]
    if plan[0] == "none":  # no filter: nothing to test, per block
        mask = value_masks = None
    else:
        mask, value_masks = dense_rows.filter_masks(plan, dense, qualifiers + also if also else qualifiers)
    out = dense_rows.dense_rows(dense, names, qualifiers, proc.scan.include_timestamp, mask, value_masks, also,
                                proc.scan.dictionary_values)
    if out is not None and direct[0] is None:
        out = family_map_rows(out, direct[1], qualifiers, proc)
    if proc.metrics is not None:
        proc.metrics.cells_scanned += dense.cell_count()
        if plan[0] != "none":
            proc.metrics.rows_filtered += dense.num_rows - (out.num_rows if out is not None else 0)
    if out is not None and proc.rows_left is not None:
        out = out.slice(0, min(out.num_rows, proc.rows_left))
        proc.rows_left -= out.num_rows
    return out if out is not None and out.num_rows else None


def stream_run(run: SortedRun, low: bytes, high: bytes | None, proc: BatchProcessor) -> Iterator[pa.RecordBatch]:
    """Stream a sorted run's files over ``[low, high)``, one after another in key order
    (:func:`stream_one_file` each: a file that needs resolution resolves alone, as its
    rows are in no other file), until the scan is done."""
    for f in run.files:
        info = f.reader.info
        if info.first_cell is None or info.last_cell[0] < low or (high is not None and info.first_cell[0] >= high):
            continue  # a file of the run with no row here (a reverse scan's chunk of another file)
        pruned = None
        if proc.scan.filter is not None or proc.scan.prune is not None:
            pruned = kept_ranges(f.reader, run.view.family.encode(), low, high, (proc.scan.filter, proc.scan.prune))
        if pruned is None:
            yield from stream_one_file(run.view, f.reader, low, high, proc)
        else:
            ranges, skipped = pruned
            if proc.metrics is not None:
                proc.metrics.row_groups_pruned += skipped
            for lo, hi in ranges:
                yield from stream_one_file(run.view, f.reader, lo, hi, proc)
                if proc.done:
                    return
        if proc.done:
            return


def stream_one_file(view: StoreView, reader, low: bytes, high: bytes | None,
                    proc: BatchProcessor) -> Iterator[pa.RecordBatch]:
    """Stream one store file's blocks (``reader``, a file of ``view``) through the kernels,
    a group of blocks at a time.

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
    # a file with one version per column and no markers needs no resolution
    skip_resolve = not reader.info.needs_resolution and proc.trivial_resolution(view.family)
    group: list[pa.RecordBatch] = []
    group_cells = 0
    held: pa.RecordBatch | None = None  # complete rows, except maybe the last

    drop_values = values_discarded(proc.scan.filter)
    direct = dense_plan(view, proc, skip_resolve)
    scan = proc.scan
    if direct is None and skip_resolve:
        direct = block_columns_plan(view, proc)
    first_only = (
        drop_values and skip_resolve and proc.select is None and dense_rows.first_cell_only(proc.scan.filter)
    )
    firsts: list = []  # dense parts waiting to become first cells
    firsts_rows = 0
    dense_out: list[pa.RecordBatch] = []  # rows sliced from dense blocks, joined up to a group
    dense_out_cells = 0  # as the cell path counts a group: cells, here rows x columns
    group_limit = min(_MIN_GROUP_CELLS, proc.scan.batch_size)

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
    run_rows = max(proc.scan.batch_size, _MIN_GROUP_CELLS)
    if proc.rows_left is not None:
        run_rows = min(run_rows, max(proc.rows_left, 1024))
    # a dense plan reads the value chunks of its columns and its filter's alone (version 3 files)
    wanted = None
    if direct is not None and direct[0] is not None and not drop_values:
        # hidden columns lend only their presence, which the key chunk's timestamps carry: their
        # values are read only for a filter that tests every column's values (ValueFilter)
        hidden = [q for _, q in direct[3]] if dense_rows.tests_every_column(direct[2]) else []
        wanted = dense_rows.read_qualifiers(list(direct[1]) + hidden, direct[2])
    elif direct is not None and not drop_values:
        wanted = dense_rows.plan_columns(direct[2])  # every column a column filter can keep
    for part in reader.scan_parts(low, high, keys_only=drop_values, run_rows=run_rows, columns=wanted):
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
            if out is not None and dense_rows.has_dictionaries(out):
                # codes of another block's dictionary: joining them would merge the dictionaries
                if dense_out:
                    yield from emit_dense_out()
                    dense_out, dense_out_cells = [], 0
                yield out
            elif out is not None:
                if dense_out and out.schema != dense_out[-1].schema:  # a row_dicts scan: blocks' columns differ
                    yield from emit_dense_out()
                    dense_out, dense_out_cells = [], 0
                dense_out.append(out)
                # as cells: a whole family's map column holds every column of the block
                as_map = direct[0] is None and not proc.scan.row_dicts
                dense_out_cells += out.num_rows * (len(dense.qualifiers) if as_map else out.num_columns - 1)
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
