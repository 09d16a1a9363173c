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
with no gather; otherwise the families' sorted keys are joined
(:func:`storage.kernels.row_merge.join_keys`: one walk of their key codes, compiled) and
each family's columns are gathered into the union's rows (a family holding every row of the
union keeps its own).

Hidden columns (the Spark source's pruned reads: :mod:`storage.read.hidden_columns`) are
read and joined as the others are, so a row held by them alone exists; the scan drops them
from its batches. The row limit applies to the joined rows; a reverse scan joins a chunk
forward and then reverses it. A filter tests a whole row, and one family's columns do not
say whether the row passes, so a filtered scan's row merges run unfiltered, each reading its
family's columns the filter tests as well, and the filter's dense plan
(:func:`storage.storefile.dense_rows.dense_filter` with no family: columns named
``family:qualifier`` in full) is applied to the joined rows as to one dense block: a row
test over a column of one family, a value or column test per cell, a row-key test per row. A
whole family's map column under a filter is built after it: the family's columns are joined
and filtered as ``scan()``'s dicts have them, then made its map. Filters the dense plans do
not take keep the cell path.
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .. import kernels
from ..cells import EMPTY_CELLS
from ..columns import parse_column
from ..kernels.cell_columns import one_array
from ..kernels.gather import gather_binary, reversed_rows
from ..kernels.row_merge import join_keys
from ..region.store import StoreView
from ..storefile import dense_rows
from ..storefile.dense import DenseBlock
from .batch_stream import block_columns_plan, dense_plan
from .row_scan import CELLS, RowMerge, value_blind

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

    def __init__(self, parts: list[tuple[RowMerge, _FamilyProc]], proc, plan: tuple | None = None,
                 maps: bool = False):
        self.parts = parts  # in family order (the families' names as bytes): the cells' order
        self.proc = proc
        self.plan = plan  # the filter's plan over the joined rows (None: no filter)
        self.maps = maps  # whole families filtered as columns, then made map columns (_as_maps)
        scan = proc.scan
        # rows output: the cell path's columns, in the scan's order; scan()'s dicts: each
        # chunk's columns, family after family (names only: a dict holds what the row has)
        self.schema = None if scan.row_dicts else kernels.cells_to_rows(
            EMPTY_CELLS, proc.output_columns, include_timestamp=scan.include_timestamp).schema

    @classmethod
    def for_scan(cls, families: dict[str, StoreView], proc) -> "FamilyJoin | None":
        """The join when the scan is a rows scan (or ``scan()``'s dicts), its filter (if any)
        has a dense plan and every family's sources can give rows, else None (the cell path)."""
        scan = proc.scan
        if scan.dictionary_values:
            return None
        if scan.output != "rows" and not scan.row_dicts:
            return None
        if proc.select is not None and len(set(proc.output_columns)) != len(proc.output_columns):
            return None  # a column named twice: the cell path's pivot decides its shape
        plan = None
        if scan.filter is not None:
            plan = dense_rows.dense_filter(scan.filter, None)
            if plan is None or plan[0] == "none":
                return None  # a filter the rows cannot apply (or an empty list: the cells decide)
        # rows output of a whole family under a filter: the family's columns as scan()'s dicts
        # have them, filtered, then its map column
        maps = plan is not None and not scan.row_dicts and \
            any(parse_column(c).qualifier is None for c in proc.output_columns)
        parts = []
        for name in sorted(families, key=lambda n: n.encode()):
            view = families[name]
            fproc = _FamilyProc(proc, name)
            if maps:
                fproc.scan = dataclasses.replace(scan, row_dicts=True)
            if plan is None:
                direct = dense_plan(view, fproc, True) or block_columns_plan(view, fproc)
            else:
                direct = _unfiltered_columns(view, fproc, plan)
            merge = RowMerge.for_scan(view, direct, fproc)
            if merge is None:
                return None
            if plan is not None and not value_blind(plan) and \
                    min(scan.max_versions, view.settings.max_versions) > 1:
                return None  # the filter tests values of each version: the cells hold them
            parts.append((merge, fproc))
        return cls(parts, proc, plan, maps)

    def chunk(self, lo: bytes, hi: bytes | None, reverse: bool) -> "list[pa.RecordBatch] | object":
        """The joined rows of ``[lo, hi)`` (descending when ``reverse``), limited by the
        scan's row limit, as batches; :data:`CELLS` when a family's chunk needs the cell path."""
        tables = []
        for merge, _ in self.parts:
            out = merge.chunk(lo, hi, False)
            if out is CELLS:  # the cell path scans the chunk, and counts it
                for _, fproc in self.parts:
                    _reset(fproc.metrics)
                return CELLS
            tables.append(pa.Table.from_batches(out) if out else None)
        joined = self._join(tables)
        metrics = self.proc.metrics
        for _, fproc in self.parts:
            if metrics is not None and joined is not CELLS:
                metrics.cells_scanned += fproc.metrics.cells_scanned
                metrics.rows_filtered += fproc.metrics.rows_filtered
            _reset(fproc.metrics)
        if joined is CELLS:
            return CELLS
        if joined is not None and self.plan is not None:
            joined = self._filtered(joined, tables)
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
        # the families with rows hold the same keys (one family alone, or loaded together):
        # side by side, the others' columns null
        placed = False if all(k.equals(keys[0]) for k in keys[1:]) else join_keys(keys)
        if placed is None:
            return CELLS  # keys too wide to encode
        if placed is False:
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
        if self.schema is None or self.plan is not None:
            # scan()'s dicts, or rows the filter is still to test: the columns the families' rows have
            names = ["key", *columns]
            return pa.Table.from_arrays([key, *columns.values()], names=names)
        arrays = [key] + [columns[f.name] if f.name in columns else pa.nulls(rows, f.type) for f in self.schema][1:]
        return pa.Table.from_arrays(arrays, schema=self.schema)

    def _filtered(self, joined: pa.Table, tables: list) -> pa.Table | None:
        """The joined rows the filter's plan keeps, with the cells it keeps, in the scan's
        columns (those read only for the filter left out); a row left with no cell goes."""
        scan = self.proc.scan
        step = 2 if scan.include_timestamp else 1
        full = {}  # each value column's field name -> its family:qualifier bytes
        for (merge, _), table in zip(self.parts, tables):
            family = merge.view.family.encode()
            if merge.whole_family:  # Latin-1 names of the chunk's columns
                names = table.schema.names[1::step] if table is not None else ()
                full.update((n, n.encode("latin-1")) for n in names)
            else:
                full.update((n, family + b":" + q) for n, q in zip(merge.names, merge.qualifiers))
        held = joined.schema.names[1::step]
        rows = one_array(joined.column(0))
        values = [one_array(joined.column(1 + step * j)) for j in range(len(held))]
        if scan.include_timestamp:
            stamps = [one_array(joined.column(2 + 2 * j)) for j in range(len(held))]
        else:  # presence alone: a timestamp where the row has the cell, null where not
            zeros = pa.array(np.zeros(len(rows), dtype=np.int64))
            stamps = [zeros if v.null_count == 0 else pc.if_else(pc.is_valid(v), zeros, None) for v in values]
        dense = DenseBlock(rows, tuple(full[n] for n in held), stamps, values)
        if self.schema is not None and not self.maps:  # rows output: the scan's columns, in its order
            specs = self.proc.output_columns
            names, wanted = [parse_column(c).name for c in specs], [bytes(c) for c in specs]
        else:
            # scan()'s dicts (and whole families' columns): every column the families' rows hold,
            # but those read for the filter alone
            names, wanted = [], []
            for (merge, fproc), table in zip(self.parts, tables):
                family = merge.view.family.encode()
                if merge.whole_family:
                    picked = [n for n in held if full[n].split(b":", 1)[0] == family]
                else:
                    output = set(fproc.output_columns)
                    picked = [n for n in merge.names if full[n] in output]
                    picked.sort(key=lambda n: full[n])
                names += [full[n].decode("latin-1") for n in picked]
                wanted += [full[n] for n in picked]
        mask, value_masks = dense_rows.filter_masks(self.plan, dense, wanted)
        out = dense_rows.dense_rows(dense, names, wanted, scan.include_timestamp, mask, value_masks)
        metrics = self.proc.metrics
        if metrics is not None:
            metrics.rows_filtered += dense.num_rows - (out.num_rows if out is not None else 0)
        if out is None:
            return None
        if self.maps:
            return self._as_maps(out)
        table = pa.Table.from_batches([out])
        if self.schema is not None and not table.schema.equals(self.schema):
            table = table.cast(self.schema)
        return table

    def _as_maps(self, out: pa.RecordBatch) -> pa.Table:
        """Filtered rows of every column held (named by their ``family:qualifier`` bytes in
        Latin-1) in the scan's columns: each named one as it is, each whole family as its map
        column (null where the row has none of its cells)."""
        include_ts = self.proc.scan.include_timestamp
        step = 2 if include_ts else 1
        fulls = [n.encode("latin-1") for n in out.schema.names[1::step]]
        arrays = [out.column(0)]
        for spec in self.proc.output_columns:
            family, qualifier = parse_column(spec)
            if qualifier is not None:
                j = fulls.index(family + b":" + qualifier)
                arrays += [out.column(1 + step * j)] + ([out.column(2 + 2 * j)] if include_ts else [])
                continue
            mine = [j for j, f in enumerate(fulls) if f.split(b":", 1)[0] == family]
            if not mine:
                arrays.append(pa.nulls(out.num_rows, kernels.FAMILY_MAP_TYPE))
                continue
            picked = [k for j in mine for k in ((1 + step * j, 2 + 2 * j) if include_ts else (1 + step * j,))]
            columns = pa.RecordBatch.from_arrays([out.column(0)] + [out.column(k) for k in picked],
                                                 names=["key"] + [out.schema.names[k] for k in picked])
            qualifiers = [fulls[j].split(b":", 1)[1] for j in mine]
            mapped = kernels.columns_to_family_map(columns, family.decode("latin-1"), qualifiers, include_ts)
            arrays.append(mapped.column(1))
        return pa.Table.from_arrays(arrays, schema=self.schema)


def _unfiltered_columns(view: StoreView, fproc: _FamilyProc, plan: tuple) -> tuple | None:
    """The ``direct`` plan of one family's row merge under a filter applied after the join:
    no filter, the family's columns of the scan and those the filter tests (or, for
    ``scan()``'s dicts of the whole family, every column); None when the rows cannot hold them."""
    family = view.family.encode()
    tested = [c.split(b":", 1)[1] for c in dense_rows.plan_qualifiers(plan) if c.split(b":", 1)[0] == family]
    if fproc.scan.row_dicts and (fproc.select is None or fproc.output_columns == [family]):
        return None, family, ("none",), []
    picked = dense_rows.dense_columns(family, fproc.output_columns)
    if picked is None:
        return None
    names, qualifiers = picked
    for q in tested:
        if q not in qualifiers:
            names.append(parse_column(family + b":" + q).name)
            qualifiers.append(q)
    return names, qualifiers, ("none",), []


def _reset(counts: _FamilyCounts | None) -> None:
    if counts is not None:
        counts.cells_scanned = counts.rows_filtered = 0


def _gathered(column: pa.ChunkedArray, at: np.ndarray) -> pa.Array:
    """``column``'s values at ``at`` (-1: null)."""
    if pa.types.is_binary(column.type):
        return gather_binary(column, at)
    return one_array(column).take(pa.array(at, mask=at < 0))
