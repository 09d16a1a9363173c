"""Rows scans of a chunk by merging ROW runs: memstore rows into dense file rows.

A chunk of a rows scan whose sources (the memstore and each store file) are
clean -- puts only, one version per column, no TTL or time range to apply --
and hold different rows needs no cell merge, resolution or pivot: each
source's rows are already the result's rows.  So the memstore's rows (its
:class:`storage.memstore.row_runs.RowRun` at the scan's read point, pivoted once per
view, or once per memstore run while no write follows) and each
file's dense blocks are sliced to the chunk and turned into row batches as the
streaming path does (:func:`storage.storefile.dense_rows.dense_rows`, a value filter as
one comparison per column), then interleaved by key
(:func:`storage.kernels.row_merge.merge_row_runs`: one sort of the encoded
keys, one gather of each column).

A chunk whose sources need resolution -- a row in two sources (re-put in
the memstore or a newer file), delete markers, versions, a block in the
cell layout or a row cut across blocks, a TTL or time range to apply -- is
resolved as rows (:mod:`storage.region.row_resolve`: per row and column the newest
visible cell, markers masking what they cover) and then filtered and shaped
as above.  What the row form cannot hold (keys wider than the key
encoding, many versions of a column that may be uncovered) and scans whose
answer depends on older versions (a value filter with several versions
asked for) come back as :data:`CELLS`, and the cell path scans the chunk.
Writes newer than the read point do not matter: the memstore's part is
what the read point shows.

A scan of a whole family (``scan()``'s dicts naming no column, a rows scan
of ``b"family"``: :func:`storage.read.batch_stream.block_columns_plan`) has
no column list of its own: each chunk takes the qualifiers its sources hold,
ascending, merges or resolves those, and a rows scan turns the chunk's
columns into the family's map column
(:func:`storage.kernels.columns_to_family_map`).
"""

from __future__ import annotations

from typing import NamedTuple, Sequence

import pyarrow as pa

from ..kernels.gather import reversed_rows
from ..kernels.resolve_rows import ResolvedRows, merges_natively
from ..kernels.row_merge import merge_row_runs, row_order
from ..memstore.row_runs import RowRun
from ..region.row_resolve import (
    as_dense, memstore_items, part_items, qualifiers_of, resolve_items, rows_batch, ts_array,
)
from ..region.store import StoreView
from ..storefile.dense import MAX_DENSE_QUALIFIERS, DenseBlock
from ..storefile.dense_rows import (
    dense_rows, filter_masks, plan_columns, plan_qualifiers, read_qualifiers, row_schema, tests_every_column,
)
from ..storefile.cache_memo import CacheMemo
from .batch_stream import family_map_rows
from .chunk_memo import chunk_memo

__all__ = ["RowMerge", "CELLS"]

CELLS = object()
"""Returned by :meth:`RowMerge.chunk` for a chunk the cell path must scan."""


class RowMerge:
    """The row-run plan of one scan of one family (see the module docstring).

    ``direct`` is the dense plan of the scan: ``(field names, qualifiers,
    filter plan, hidden (name, qualifier) pairs)`` as
    :func:`storage.read.batch_stream.dense_plan` gives it.
    """

    def __init__(self, view: StoreView, mem: RowRun | None, direct: tuple, proc, resolvable: bool = True):
        self.view = view
        self.mem = mem  # None: no memstore rows, or memstore cells that need resolution
        names, qualifiers, self.plan, hidden_pairs = direct
        self.proc = proc
        self.resolvable = resolvable
        self.shared = False  # a chunk of this scan had a row in two sources
        # resolution applies a TTL or time range: every chunk is resolved
        self.bounded = not proc.trivial_resolution(view.family)
        # names None: every column of the family (batch_stream.block_columns_plan), each chunk's
        # columns those its sources hold (chunk())
        self.whole_family = names is None
        if self.whole_family:
            # the columns a column filter can keep (or the filter tests): the only ones read
            self.family_columns = plan_columns(self.plan)
            self._use_columns([])
            return
        # merged rows carry the hidden columns too (a row may live by them alone); the scan drops them
        self.names = list(names) + [n for n, _ in hidden_pairs]
        self.qualifiers = list(qualifiers) + [q for _, q in hidden_pairs]
        self.schema = row_schema(self.names, proc.scan.include_timestamp)
        self.resolved_qualifiers = read_qualifiers(self.qualifiers, self.plan)

    def _use_columns(self, qualifiers: list) -> None:
        """A whole-family merge's columns for the chunk at hand: ``qualifiers`` (ascending),
        named ``family:qualifier`` in Latin-1 text as the streamed blocks name theirs."""
        family = self.view.family.encode()
        self.qualifiers = self.resolved_qualifiers = qualifiers
        self.names = [(family + b":" + q).decode("latin-1") for q in qualifiers]
        self.schema = row_schema(self.names, self.proc.scan.include_timestamp)

    def _items(self, lo: bytes, hi: bytes | None, file_parts: list) -> list:
        """The chunk's sources as resolution items, newest first: the memstore's, then each file's."""
        if self.mem is not None:
            block = self.mem.slice(lo, hi)
            mem = [block] if block is not None else []
        else:
            mem = memstore_items(self.view.memstore, lo, hi)
        return [mem] + [part_items(parts) for parts in file_parts]

    @classmethod
    def for_scan(cls, view: StoreView, direct: tuple | None, proc) -> "RowMerge | None":
        """The plan when every source of ``view`` can give rows, else None.

        ``direct`` is None when the scan itself needs cells (whole-family
        columns, a filter other than a single-column or value filter, cells
        output, a time range or TTL to apply).
        """
        if direct is None:
            return None
        if any(f.reader.format_version < 2 for f in view.files):
            return None  # version 1 files have no dense blocks
        # rows keep one version per column: several versions change the
        # answer only through a filter that tests values
        versions = min(proc.scan.max_versions, view.settings.max_versions)
        resolvable = versions == 1 or value_blind(direct[2])
        mem = None
        if not view.memstore.is_empty():
            row_run = getattr(view.memstore, "row_run", None)
            mem = row_run() if row_run is not None else None
            if mem is None and not resolvable:
                return None
        if not resolvable and not proc.trivial_resolution(view.family):
            return None
        return cls(view, mem, direct, proc, resolvable)

    def chunk(self, lo: bytes, hi: bytes | None, reverse: bool) -> "Sequence[pa.RecordBatch] | object":
        """The rows of ``[lo, hi)`` (descending when ``reverse``), limited by the
        scan's row limit, as batches; :data:`CELLS` when the chunk needs the cell path."""
        memo = self._memo(lo, hi, reverse)
        kept = memo.get() if memo is not None else None
        if kept is not None:
            # an earlier scan built this chunk from the same sources (storage/read/chunk_memo.py)
            if isinstance(kept, ResolvedRows):
                return self._shaped(kept, reverse)
            if isinstance(kept, _FamilyRows):
                self._use_columns(kept.qualifiers)
                return self._shaped(kept.rows, reverse)
            merged, counts = kept
            self._count(counts)
            return self._limited(merged)
        sources: list[list] = []  # each source's dense blocks in the chunk, newest first
        file_parts: list[list] = []
        resolve = self.bounded
        if self.mem is not None:
            block = self.mem.slice(lo, hi)
            if block is not None:
                sources.append([block])
        elif not self.view.memstore.is_empty():
            resolve = True  # memstore cells that need resolution
        # a whole-family merge reads every column chunk of its files (that a column filter can keep)
        wanted = self.family_columns if self.whole_family else self.resolved_qualifiers
        for f in self.view.files:
            parts = list(f.reader.scan_parts(lo, hi, columns=wanted))  # their chunks only
            if not parts:
                continue
            file_parts.append(parts)
            if not resolve and any(p.dense is None or p.continued or p.open for p in parts):
                resolve = True  # a cell-layout block, or a row cut across blocks
            elif not resolve:
                sources.append([p.dense for p in parts])
        items = None
        if self.whole_family:
            # the chunk's columns: those of every source it resolves, or of the dense blocks it merges
            items = self._items(lo, hi, file_parts) if resolve else None
            qualifiers = qualifiers_of(items if resolve else sources)
            if self.family_columns is not None:
                # the files read these columns' chunks alone; the others' cells could not come out
                qualifiers = [q for q in qualifiers if q in self.family_columns]
            if not qualifiers:
                return []  # no put in the chunk (markers alone): no row
            if len(qualifiers) > MAX_DENSE_QUALIFIERS:
                return CELLS  # wider than a dense row
            self._use_columns(qualifiers)
        if resolve:
            return self._resolved(lo, hi, reverse, file_parts, memo, items)
        if not sources:
            return []
        order = None
        if len(sources) > 1:
            if self.resolvable and merges_natively(len(sources)) and not _ranges_apart(sources):
                # the sources' rows interleave: the compiled merge places them and finds a row
                # held twice in one pass, cheaper than placing their keys first to look for one
                # (storage/kernels/resolve_rows.py); sources of key ranges apart are laid end
                # to end below, as slices
                self.shared = True
                return self._resolved(lo, hi, reverse, file_parts, memo)
            if self.shared and self.resolvable:
                # the sources shared rows in earlier chunks (a table being
                # updated): resolve at once rather than sort the keys twice
                return self._resolved(lo, hi, reverse, file_parts, memo)
            # a row in two sources needs resolving (found from the keys alone,
            # before any value column is touched)
            keys = [b[0].rows if len(b) == 1 else pa.concat_arrays([d.rows for d in b]) for b in sources]
            order = row_order(keys)
            if order is None:
                self.shared = True
                return self._resolved(lo, hi, reverse, file_parts, memo)
        counts = [0, 0]  # cells scanned, rows filtered: counted once the chunk is done here
        runs = [r for r in (self._rows(blocks, counts) for blocks in sources) if r is not None]
        if order is not None and sum(r.num_rows for r in runs) != len(order):
            order = None  # rows were left out: the merge places the rest itself
        merged = merge_row_runs(runs, descending=reverse, order=order) if runs else None
        self._count(counts)
        if merged is None:
            return []
        if memo is not None and len(sources) > 1 and self.plan[0] == "none":
            # merged rows are this chunk's answer for any scan of these columns without a filter
            memo.put((merged, counts), merged.nbytes)
        return self._limited(merged)

    def _memo(self, lo: bytes, hi: bytes | None, reverse: bool) -> CacheMemo | None:
        """Where this chunk's rows are kept between scans; None when they
        cannot be (a TTL makes the answer depend on the clock)."""
        proc = self.proc
        if proc.ttl_cutoff[self.view.family] is not None:
            return None
        if self.whole_family and self.family_columns is not None:
            return None  # rows of the columns this filter keeps: no other scan's answer
        scan = proc.scan
        stamps = None if scan.timestamps is None else tuple(scan.timestamps)
        # a whole-family merge's columns are each chunk's own: the key says "every column"
        columns = ("family",) if self.whole_family else (tuple(self.resolved_qualifiers), tuple(self.names))
        what = (columns, scan.include_timestamp, reverse,
                self.plan[0] == "none", scan.min_timestamp, scan.max_timestamp, stamps, self.view.settings)
        return chunk_memo(self.view, lo, hi, what, scan.cache_results)

    def _count(self, counts: list) -> None:
        metrics = self.proc.metrics
        if metrics is not None:
            metrics.cells_scanned += counts[0]
            metrics.rows_filtered += counts[1]

    def _limited(self, merged: pa.Table) -> list:
        proc = self.proc
        if proc.rows_left is not None:
            merged = merged.slice(0, min(merged.num_rows, proc.rows_left))
            proc.rows_left -= merged.num_rows
        batches = [b for b in merged.to_batches() if b.num_rows]
        if self.whole_family and not proc.scan.row_dicts:
            # a rows scan of the whole family: the chunk's columns (named by its schema: a kept
            # chunk's may not be the last chunk's) become the family's map column
            family = self.view.family.encode()
            step = 2 if proc.scan.include_timestamp else 1
            qualifiers = [n.encode("latin-1")[len(family) + 1:] for n in merged.schema.names[1::step]]
            batches = [family_map_rows(b, family, qualifiers, proc) for b in batches]
        return batches

    def _resolved(self, lo: bytes, hi: bytes | None, reverse: bool, file_parts: list,
                  memo: CacheMemo | None, sources: list | None = None) -> "list | object":
        """The chunk's sources (``sources``: its :meth:`_items`, when already made) resolved
        as rows (:mod:`storage.region.row_resolve`), then filtered and shaped; :data:`CELLS`
        when they cannot be."""
        if not self.resolvable:
            return CELLS
        proc = self.proc
        scan = proc.scan
        if sources is None:
            sources = self._items(lo, hi, file_parts)
        qualifiers = self.resolved_qualifiers
        resolved = resolve_items(
            sources, qualifiers, min_timestamp=scan.min_timestamp, max_timestamp=scan.max_timestamp,
            # a row batch holds one version: with min_versions it outlives the TTL
            ttl_cutoff=None if self.view.settings.min_versions else proc.ttl_cutoff[self.view.family],
            timestamps=scan.timestamps, keep_deleted_cells=self.view.settings.keep_deleted_cells,
        )
        if resolved is None:
            return CELLS
        if memo is not None:
            kept = _FamilyRows(tuple(qualifiers), resolved) if self.whole_family else resolved
            memo.put(kept, resolved.nbytes)
        return self._shaped(resolved, reverse)

    def _shaped(self, resolved: ResolvedRows, reverse: bool) -> list:
        """Resolved rows filtered and shaped as the scan asks, limited."""
        proc = self.proc
        scan = proc.scan
        qualifiers = self.resolved_qualifiers
        counts = [0, 0]
        if resolved.num_rows == 0:
            self._count(counts)
            return []
        whole = resolved
        if self.plan[0] == "none" and qualifiers == self.qualifiers:
            # every resolved row holds a requested column: the row batch as it is
            rows = rows_batch(resolved, self.schema, scan.include_timestamp)
        else:
            resolved = self._rows_passing(resolved, qualifiers)
            dense = as_dense(resolved, qualifiers)
            mask, value_masks = filter_masks(self.plan, dense, self.qualifiers)
            rows = dense_rows(dense, self.names, self.qualifiers, scan.include_timestamp, mask, value_masks)
            if self.plan[0] != "none":
                counts[1] = dense.num_rows - (rows.num_rows if rows is not None else 0)
        if proc.metrics is not None:
            # counted once the columns are gathered: a gathered column's cells are its non-nulls
            # (a count of every row's winner before the gather cost 0.25 ms a connector read)
            counts[0] = whole.cell_count()
        self._count(counts)
        if rows is None or rows.num_rows == 0:
            return []
        table = pa.Table.from_batches([rows])
        if reverse:
            table = reversed_rows(table)
        return self._limited(table)

    def _rows_passing(self, resolved: ResolvedRows, qualifiers: list) -> ResolvedRows:
        """``resolved`` without the rows the filter's row test drops, found from the columns it
        tests alone, before the other columns are gathered (their values are then gathered for
        the rows left only).  As it is when the filter has no row test, or tests every column."""
        if self.plan[0] == "none" or tests_every_column(self.plan):
            return resolved
        tested = set(plan_qualifiers(self.plan))
        # the tested columns' values and timestamps (their presence) alone: the row test reads no other
        values = [resolved.value(j) if q in tested else None for j, q in enumerate(qualifiers)]
        ts = [ts_array(resolved.column_ts(j)) if q in tested else None for j, q in enumerate(qualifiers)]
        row, _ = filter_masks(self.plan, DenseBlock(resolved.keys, tuple(qualifiers), ts, values), qualifiers)
        if row is None or row.all():
            return resolved
        return resolved.select(row)

    def _rows(self, blocks: list, counts: list) -> pa.Table | None:
        """One source's dense blocks as one row table (rows without a requested
        column, or filtered out, left out); None when none is left.  Adds the
        cells scanned and rows filtered to ``counts`` when metrics are kept."""
        proc = self.proc
        include_ts = proc.scan.include_timestamp
        if proc.metrics is not None:
            counts[0] += sum(dense.cell_count() for dense in blocks)
        if self.plan[0] == "none":
            whole = self._whole_rows(blocks, include_ts)
            if whole is not None:
                return whole
        out = []
        for dense in blocks:
            mask, value_masks = filter_masks(self.plan, dense, self.qualifiers)
            rows = dense_rows(dense, self.names, self.qualifiers, include_ts, mask, value_masks)
            if proc.metrics is not None and self.plan[0] != "none":
                counts[1] += dense.num_rows - (rows.num_rows if rows is not None else 0)
            if rows is not None:
                out.append(rows)
        return pa.Table.from_batches(out) if out else None

    def _whole_rows(self, blocks: list, include_ts: bool) -> pa.Table | None:
        """The rows of blocks in which every row has every requested column
        (a bulk-loaded or compacted table, appended rows), without a filter:
        the blocks' columns chained as they are, with none of the per-block
        batch building of :func:`dense_rows` (which gives the same rows);
        None when some row lacks a column."""
        schema = self.schema
        columns: list[list] = [[] for _ in schema]
        for dense in blocks:
            columns[0].append(dense.rows)
            k = 1
            for qualifier in self.qualifiers:
                if qualifier not in dense.qualifiers:
                    return None
                j = dense.qualifiers.index(qualifier)
                if dense.presence(j) is not None:
                    return None
                columns[k].append(dense.value(j))
                k += 1
                if include_ts:
                    columns[k].append(dense.plain_timestamps()[j])
                    k += 1
        return pa.Table.from_arrays(
            [pa.chunked_array(parts, field.type) for parts, field in zip(columns, schema)], schema=schema
        )



class _FamilyRows(NamedTuple):
    """A whole-family chunk's resolved rows as a scan keeps them, with the chunk's columns."""

    qualifiers: tuple
    rows: ResolvedRows


def value_blind(plan: tuple) -> bool:
    """True when a dense filter plan never tests a value (no filter, row-key filters)."""
    kind = plan[0]
    if kind in ("none", "key"):
        return True
    if kind in ("all", "one"):
        return all(value_blind(p) for p in plan[1])
    return False


def _ranges_apart(sources: list[list]) -> bool:
    """Do the sources' key ranges (each source's dense blocks, in key order) not
    overlap, so that their rows are the sources laid end to end in some order?"""
    spans = []
    for blocks in sources:
        rows = [b.rows for b in blocks if len(b.rows)]
        if rows:
            spans.append((rows[0][0].as_py(), rows[-1][-1].as_py()))
    spans.sort()
    return all(prev[1] < nxt[0] for prev, nxt in zip(spans, spans[1:]))
