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

Whatever this cannot prove equal to the cell path goes to the cell path: a
chunk with a row in two sources, a block in the cell layout or a row cut
across blocks comes back as :data:`CELLS`; memstore cells visible at the
scan's read point that need resolution (or that sit in two maps during a
flush) keep the whole scan on the cell path (:meth:`RowMerge.for_scan`
gives None).  Writes newer than the read point do not: the row form is
built from the cells the read point shows.
"""

from __future__ import annotations

from typing import Sequence

import pyarrow as pa

from ..storefile.dense_rows import dense_rows, filter_masks, row_schema
from ..kernels.row_merge import keys_disjoint, merge_row_runs
from ..memstore.row_runs import RowRun
from ..region.store import StoreView

__all__ = ["RowMerge", "CELLS"]

CELLS = object()
"""Returned by :meth:`RowMerge.chunk` for a chunk the cell path must scan."""


class RowMerge:
    """The row-run plan of one scan of one family (see the module docstring).

    ``direct`` is the dense plan of the scan: ``(field names, qualifiers,
    filter plan)`` as :func:`storage.storefile.dense_rows.dense_columns` and
    :func:`storage.storefile.dense_rows.dense_filter` give them.
    """

    def __init__(self, view: StoreView, mem: RowRun | None, direct: tuple, proc):
        self.view = view
        self.mem = mem
        self.names, self.qualifiers, self.plan = direct
        self.proc = proc
        self.schema = row_schema(self.names, proc.scan.include_timestamp)

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
        # A file that needs resolution still has chunks of dense blocks only:
        # markers and versions belong to their row, whose blocks are cells.
        mem = None
        if not view.memstore.is_empty():
            row_run = getattr(view.memstore, "row_run", None)
            mem = row_run() if row_run is not None else None
            if mem is None:
                return None
        return cls(view, mem, direct, proc)

    def chunk(self, lo: bytes, hi: bytes | None, reverse: bool) -> "Sequence[pa.RecordBatch] | object":
        """The rows of ``[lo, hi)`` (descending when ``reverse``), limited by the
        scan's row limit, as batches; :data:`CELLS` when the chunk needs the cell path."""
        sources: list[list] = []  # each source's dense blocks in the chunk, newest first
        if self.mem is not None:
            block = self.mem.slice(lo, hi)
            if block is not None:
                sources.append([block])
        for f in self.view.files:
            blocks = []
            for part in f.reader.scan_parts(lo, hi):
                if part.dense is None or part.continued or part.open:
                    return CELLS  # cell-layout block, or a row cut across blocks
                blocks.append(part.dense)
            if blocks:
                sources.append(blocks)
        if not sources:
            return []
        if len(sources) > 1 and self.plan[0] != "none":
            # a filter decides on whole rows: a row must not be split over sources
            keys = [b[0].rows if len(b) == 1 else pa.concat_arrays([d.rows for d in b]) for b in sources]
            if not keys_disjoint(keys):
                return CELLS
        counts = [0, 0]  # cells scanned, rows filtered: counted once the chunk is done here
        runs = [r for r in (self._rows(blocks, counts) for blocks in sources) if r is not None]
        merged = merge_row_runs(runs, descending=reverse) if runs else None
        if runs and merged is None:
            return CELLS  # a row in two sources: its cells need merging
        proc = self.proc
        if proc.metrics is not None:
            proc.metrics.cells_scanned += counts[0]
            proc.metrics.rows_filtered += counts[1]
        if merged is None:
            return []
        if proc.rows_left is not None:
            merged = merged.slice(0, min(merged.num_rows, proc.rows_left))
            proc.rows_left -= merged.num_rows
        return [b for b in merged.to_batches() if b.num_rows]

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
                columns[k].append(dense.values[j])
                k += 1
                if include_ts:
                    columns[k].append(dense.plain_timestamps()[j])
                    k += 1
        return pa.Table.from_arrays(
            [pa.chunked_array(parts, field.type) for parts, field in zip(columns, schema)], schema=schema
        )

