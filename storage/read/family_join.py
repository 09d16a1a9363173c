"""Rows scans of several families: each family's row merge, joined on the row key.

A row of an HBase table may hold cells in any of its families, and the families are
separate stores (their own memstore part, their own files), so a scan naming columns of
two families -- Hive's ``hbase.columns.mapping`` of ``:key,a:x,b:z``, a Spark catalog
over two families, happybase's ``scan()`` of a table with two families -- reads two sets
of sources.  The row merge (:mod:`storage.read.row_scan`) builds one family's rows from
its dense blocks; :class:`FamilyJoin` runs one per family over the same chunk of keys and
joins their rows on the key: a row is in the answer when any family has one of its
columns, and a family without the row gives it nulls (no cell), as the cell path's pivot
does.  Families loaded together hold the same keys, so their rows are put side by side
with no gather; otherwise one stable sort of the families' encoded keys (each family's
keys are already sorted, so the sort merges runs) places every row and each family's
columns are gathered into it.

The row limit applies to the joined rows; a reverse scan joins a chunk forward and then
reverses it.  A scan with a filter keeps the cell path: a filter tests a whole row, and
a row's columns of one family do not say whether the row passes.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pyarrow as pa

from .. import kernels
from ..cells import EMPTY_CELLS
from ..columns import parse_column
from ..kernels.cell_columns import one_array
from ..kernels.gather import gather_binary, reversed_rows
from ..kernels.row_merge import order_keys
from ..region.store import StoreView
from .batch_stream import block_columns_plan, dense_plan
from .row_scan import CELLS, RowMerge

__all__ = ["FamilyJoin"]


class _FamilyCounts:
    """One family's counters for one chunk, added to the scan's once the chunk is joined (a
    chunk that goes to the cell path after all is counted there)."""

    __slots__ = ("cells_scanned", "rows_filtered")

    def __init__(self) -> None:
        self.cells_scanned = self.rows_filtered = 0


class _FamilyProc:
    """The scan's processor as one family's row merge sees it: the family's columns alone
    (``output_columns``, ``select``), no row limit (the join applies it) and counters of its
    own."""

    def __init__(self, proc, family: str):
        self._proc = proc
        self.scan = proc.scan
        self.ttl_cutoff = proc.ttl_cutoff
        name = family.encode()
        if proc.select is None:
            self.select = None
            self.output_columns = [name]
        else:
            self.output_columns = [c for c in proc.output_columns if parse_column(c).family == name]
            self.select = self.output_columns
        self.rows_left = None
        self.metrics = _FamilyCounts() if proc.metrics is not None else None

    def trivial_resolution(self, name: str) -> bool:
        return self._proc.trivial_resolution(name)


class FamilyJoin:
    """The row merges of one rows scan of several families (see the module docstring)."""

    def __init__(self, parts: list[tuple[RowMerge, _FamilyProc]], proc):
        self.parts = parts  # in family order (the families' names as bytes): the cells' order
        self.proc = proc
        scan = proc.scan
        # rows output: the cell path's columns, in the scan's order; scan()'s dicts: each
        # chunk's columns, family after family (names only: a dict holds what the row has)
        self.schema = None if scan.row_dicts else kernels.cells_to_rows(
            EMPTY_CELLS, proc.output_columns, include_timestamp=scan.include_timestamp).schema

    @classmethod
    def for_scan(cls, families: dict[str, StoreView], proc) -> "FamilyJoin | None":
        """The join when the scan is a rows scan (or ``scan()``'s dicts) without a filter
        and every family's sources can give rows, else None (the cell path)."""
        scan = proc.scan
        if scan.filter is not None or scan.hidden_columns or scan.dictionary_values:
            return None
        if scan.output != "rows" and not scan.row_dicts:
            return None
        if proc.select is not None and len(set(proc.output_columns)) != len(proc.output_columns):
            return None  # a column named twice: the cell path's pivot decides its shape
        parts = []
        for name in sorted(families, key=lambda n: n.encode()):
            view = families[name]
            fproc = _FamilyProc(proc, name)
            merge = RowMerge.for_scan(view, dense_plan(view, fproc, True) or block_columns_plan(view, fproc), fproc)
            if merge is None:
                return None
            parts.append((merge, fproc))
        return cls(parts, proc)

    def chunk(self, lo: bytes, hi: bytes | None, reverse: bool) -> "list[pa.RecordBatch] | object":
        """The joined rows of ``[lo, hi)`` (descending when ``reverse``), limited by the
        scan's row limit, as batches; :data:`CELLS` when a family's chunk needs the cell path."""
        tables = []
        for merge, _ in self.parts:
            out = merge.chunk(lo, hi, False)
            if out is CELLS:
                for _, fproc in self.parts:
                    _reset(fproc.metrics)
                return CELLS
            tables.append(pa.Table.from_batches(out) if out else None)
        metrics = self.proc.metrics
        if metrics is not None:
            for _, fproc in self.parts:
                metrics.cells_scanned += fproc.metrics.cells_scanned
                metrics.rows_filtered += fproc.metrics.rows_filtered
                _reset(fproc.metrics)
        joined = self._join(tables)
        if joined is CELLS:
            return CELLS
        if joined is None or joined.num_rows == 0:
            return []
        if reverse:
            joined = reversed_rows(joined)
        proc = self.proc
        if proc.rows_left is not None:
            joined = joined.slice(0, min(joined.num_rows, proc.rows_left))
            proc.rows_left -= joined.num_rows
        return [b for b in joined.to_batches() if b.num_rows]

    def _join(self, tables: list) -> "pa.Table | None | object":
        """The families' row tables (None: no row) joined on the key, in key order."""
        held = [t for t in tables if t is not None and t.num_rows]
        if not held:
            return None
        keys = [t.column(0) for t in held]
        placed = None if len(held) == len(tables) and all(k.equals(keys[0]) for k in keys[1:]) \
            else _placement(keys)
        if placed is CELLS:
            return CELLS
        if placed is None:  # every family holds the same rows: side by side
            key = keys[0]
            columns = {name: t.column(j) for t in held for j, name in enumerate(t.schema.names) if j}
        else:
            picks, index = placed
            # a family holding every row of the union (the others' rows a subset of its own):
            # its keys and columns as they are
            whole = [t for t in held if t.num_rows == len(picks)]
            key = whole[0].column(0) if whole else \
                gather_binary(pa.chunked_array([c for k in keys for c in k.chunks], pa.binary()), picks)
            columns = {name: t.column(j) if t.num_rows == len(picks) else _gathered(t.column(j), at)
                       for t, at in zip(held, index) for j, name in enumerate(t.schema.names) if j}
        rows = len(key)
        if self.schema is None:  # scan()'s dicts: the columns the families' rows have
            names = ["key", *columns]
            return pa.Table.from_arrays([key, *columns.values()], names=names)
        arrays = [key] + [columns[f.name] if f.name in columns else pa.nulls(rows, f.type) for f in self.schema][1:]
        return pa.Table.from_arrays(arrays, schema=self.schema)


def _reset(counts: _FamilyCounts | None) -> None:
    if counts is not None:
        counts.cells_scanned = counts.rows_filtered = 0


def _placement(keys: Sequence[pa.ChunkedArray]) -> "tuple[np.ndarray, list[np.ndarray]] | object":
    """Where the rows of sorted, distinct key columns go in their union: ``(picks, index)``,
    ``picks`` the union's keys as positions in the columns laid end to end, ``index[t]``
    each union row's row of column ``t`` (-1: none).  :data:`CELLS` for keys too wide to
    encode."""
    codes = order_keys([one_array(k) for k in keys])
    if codes is None:
        return CELLS
    joined = np.concatenate(codes)
    # each column's codes are ascending: a stable sort merges the runs
    order = np.argsort(joined, kind="stable")
    ordered = joined[order]
    first = np.empty(len(order), dtype=bool)  # where a key differs from the one before: a new row
    first[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=first[1:])
    row_of = np.cumsum(first, dtype=np.int64)
    row_of -= 1
    rows = int(row_of[-1]) + 1
    placed = np.empty(len(order), dtype=np.int64)  # each key's row, in the columns' order
    placed[order] = row_of
    index, start = [], 0
    for c in codes:
        at = np.full(rows, -1, dtype=np.int64)
        at[placed[start:start + len(c)]] = np.arange(len(c), dtype=np.int64)
        index.append(at)
        start += len(c)
    return order[first].astype(np.int64, copy=False), index


def _gathered(column: pa.ChunkedArray, at: np.ndarray) -> pa.Array:
    """``column``'s values at ``at`` (-1: null)."""
    if pa.types.is_binary(column.type):
        return gather_binary(column, at)
    return one_array(column).take(pa.array(at, mask=at < 0))
