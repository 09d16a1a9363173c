"""Bulk-load staging: row batches written as store files cut at region boundaries, outside the table.

This is the writing half of HBase's ``HFileOutputFormat2``; the commit
(``completebulkload``) is :mod:`storage.region.load_commit`.

One task attempt is one :class:`BulkLoadTask`: row batches (as a SerDe's
``serialize_batch`` makes them) are sorted by row key with Arrow kernels and
written as store files cut at region boundaries: one file per region and
family while the buffered runs arrive in key order, a new one where a run
goes back.  Batches of ``family:qualifier`` columns with
distinct keys are written column by column as dense blocks
(``StoreFileWriter.append_rows``), never becoming cells; batches with family
maps, repeated keys, or mixed with :meth:`BulkLoadTask.add_cells` in one run
become cells, sorted and deduplicated.  Files go under::

    <table>/.staging/<job id>/<task id>/<region id>/<family>/<run>.sf

Nothing there is visible to readers.  Abort deletes ``.staging/<job id>``
whole, so failed attempts leave nothing behind.  A job whose owner dies
before it can abort (a killed driver or engine worker) leaves its folder;
a job that holds its staging lock (:func:`~storage.region.load_journal.hold_staging`,
from its start to its commit or abort) has that folder deleted by the next
writer to open the table or the next commit once the lock is free
(:func:`~storage.region.load_journal.drop_stale_staging`).
"""

from __future__ import annotations

import bisect
from typing import Iterator, Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..cells import CELL_SCHEMA, CellType
from ..errors import InvalidArgument
from ..schema import FamilySettings
from ..vfs.fs import FileSystem
from .load_commit import RegionBounds, StagedFile, StagingWriter
from .load_journal import STAGING_DIR, aborted_marker

__all__ = ["BulkLoadTask", "row_batch_to_cells"]

_DEFAULT_RUN_CELLS = 1 << 20
# staged files a task keeps open at once for runs still to come (one per region and family)
_MAX_OPEN_FILES = 64



# -- rows -> cells --------------------------------------------------------------
def _cells_table(rows: pa.Array, family: str, qualifiers: pa.Array, stamps: pa.Array, values: pa.Array) -> pa.Table:
    n = len(rows)
    return pa.Table.from_arrays(
        [
            rows.cast(pa.binary()),
            pa.repeat(pa.scalar(family.encode(), pa.binary()), n),
            qualifiers.cast(pa.binary()),
            stamps.cast(pa.int64()),
            pa.repeat(pa.scalar(int(CellType.PUT), CELL_SCHEMA.field("type").type), n),
            values.cast(pa.binary()),
        ],
        schema=CELL_SCHEMA,
    )


def row_batch_to_cells(rows: pa.RecordBatch, timestamp: int) -> dict[str, pa.Table]:
    """Unpivot a row batch into put cells per family (unsorted), with Arrow kernels.

    ``"cf:q"`` columns give one cell per non-null value; ``"cf"`` map columns
    one cell per entry with a non-null value; a ``"cf:q@ts"`` column gives
    the cells' timestamps (null or absent: ``timestamp``).
    """
    if rows.schema.get_field_index("key") != 0:
        raise InvalidArgument(f"a row batch starts with a 'key' column; got {rows.schema.names}")
    keys = rows.column(0)
    if keys.null_count:
        raise InvalidArgument("a row batch has a null row key")
    names = rows.schema.names
    out: dict[str, list[pa.Table]] = {}
    for name in names[1:]:
        if name.endswith("@ts"):
            continue
        col = rows.column(name)
        if ":" in name:
            family, qualifier = name.split(":", 1)
            mask = col.is_valid()
            n = pc.sum(mask).as_py() or 0
            if not n:
                continue
            stamps = pa.repeat(pa.scalar(timestamp, pa.int64()), n)
            ts_index = rows.schema.get_field_index(f"{name}@ts")
            if ts_index >= 0:
                stamps = rows.column(ts_index).filter(mask).fill_null(timestamp)
            quals = pa.repeat(pa.scalar(qualifier.encode(), pa.binary()), n)
            table = _cells_table(keys.filter(mask), family, quals, stamps, col.filter(mask))
        else:
            if not pa.types.is_map(col.type):
                raise InvalidArgument(f"row batch column {name!r} is neither 'family:qualifier' nor a family map")
            family = name
            # entries of the (possibly sliced) maps: child rows offsets[0]..offsets[-1]
            offsets = col.offsets.to_numpy(zero_copy_only=False)
            first, last = int(offsets[0]), int(offsets[-1])
            parents = pa.array(np.repeat(np.arange(len(col), dtype=np.int64), np.diff(offsets)))
            quals, values = col.keys.slice(first, last - first), col.items.slice(first, last - first)
            keep = values.is_valid()
            count = pc.sum(keep).as_py() or 0
            if not count:
                continue
            stamps = pa.repeat(pa.scalar(timestamp, pa.int64()), count)
            table = _cells_table(keys.take(parents).filter(keep), family, quals.filter(keep), stamps, values.filter(keep))
        if table.num_rows:
            out.setdefault(family, []).append(table)
    return {fam: pa.concat_tables(parts) for fam, parts in out.items()}


def _sort_dedup(cells: pa.Table) -> pa.Table:
    """Cells in store order; of cells with equal keys the one written last wins.

    The key is the cell's whole key, its type included: a delete marker and
    the put it hides at the same timestamp are two cells (a marker sorts
    before the put, as in every store file)."""
    n = cells.num_rows
    cells = cells.append_column("_pos", pa.array(np.arange(n, dtype=np.int64)))
    cells = cells.sort_by([("row", "ascending"), ("qualifier", "ascending"), ("timestamp", "descending"),
                           ("type", "descending"), ("_pos", "descending")])
    cells = cells.drop_columns(["_pos"]).combine_chunks()
    if n > 1:
        same = np.ones(n - 1, dtype=bool)
        for name in ("row", "qualifier", "timestamp", "type"):
            col = cells.column(name)
            same &= pc.equal(col.slice(1), col.slice(0, n - 1)).to_numpy(zero_copy_only=False)
        keep = np.concatenate([[True], ~same])
        if not keep.all():
            cells = cells.filter(pa.array(keep))
    return cells


def _column_batch(rows: pa.RecordBatch) -> bool:
    """True for a row batch of ``key`` then ``family:qualifier`` columns (with
    optional ``@ts`` columns), no family maps: the shape written column by column."""
    names = rows.schema.names
    if not names or names[0] != "key":
        return False
    return all(":" in n and not pa.types.is_map(rows.schema.field(n).type) for n in names[1:])


def _sorted_distinct_rows(batches: list[pa.RecordBatch]) -> pa.Table | None:
    """The batches as one table sorted by key (no sort when already in order),
    or None when their columns differ or a key repeats (the cell path then
    merges the repeated rows column by column)."""
    schema = batches[0].schema
    if any(b.schema != schema for b in batches[1:]):
        return None
    table = pa.Table.from_batches(batches)  # chunks stay where they are: no copy
    keys = table.column(0).cast(pa.binary())
    n = len(keys)
    if n > 1:
        ordered = pc.all(pc.less_equal(keys.slice(0, n - 1), keys.slice(1))).as_py()
        if not ordered:
            table = table.take(pc.sort_indices(keys)).combine_chunks()
            keys = table.column(0).cast(pa.binary())
        if pc.any(pc.equal(keys.slice(0, n - 1), keys.slice(1))).as_py():
            return None
    return table


def _family_columns(table: pa.Table, timestamp: int) -> dict[str, tuple]:
    """Per family, ``(keys, qualifiers, values, timestamps)`` of the rows holding
    a value of the family, qualifiers ascending (``StoreFileWriter.append_rows``'s
    arguments, as chunked arrays: :meth:`StagingWriter.append_columns` writes them chunk by chunk)."""
    keys = table.column(0).cast(pa.binary())
    by_family: dict[str, list[tuple[bytes, str]]] = {}
    for name in table.schema.names[1:]:
        if name.endswith("@ts"):
            continue
        family, qualifier = name.split(":", 1)
        by_family.setdefault(family, []).append((qualifier.encode(), name))
    out = {}
    for family, cols in sorted(by_family.items()):
        cols.sort()
        values = [table.column(name).cast(pa.binary()) for _, name in cols]
        stamps = []
        for (_, name), v in zip(cols, values):
            ts_index = table.schema.get_field_index(f"{name}@ts")
            if ts_index >= 0:
                ts = table.column(ts_index).cast(pa.int64()).fill_null(timestamp)
                stamps.append(pc.if_else(v.is_valid(), ts, pa.scalar(None, pa.int64())))
            elif v.null_count:
                stamps.append(pc.if_else(v.is_valid(), pa.scalar(timestamp, pa.int64()), pa.scalar(None, pa.int64())))
            else:
                stamps.append(pa.chunked_array([pa.repeat(pa.scalar(timestamp, pa.int64()), len(c)) for c in v.chunks],
                                               pa.int64()))
        present = values[0].is_valid()
        for v in values[1:]:
            present = pc.or_(present, v.is_valid())
        if not pc.any(present).as_py():
            continue
        if not pc.all(present).as_py():
            keep = present
            keys_f = keys.filter(keep)
            values = [v.filter(keep) for v in values]
            stamps = [t.filter(keep) for t in stamps]
        else:
            keys_f = keys
        out[family] = (keys_f, [q for q, _ in cols], values, stamps)
    return out


class _Rows:
    """A sorted row column as a sequence of bytes, for bisect (O(log n) scalar reads)."""

    def __init__(self, rows: pa.ChunkedArray | pa.Array):
        self.rows = rows

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, i: int) -> bytes:
        return self.rows[i].as_py()


class BulkLoadTask:
    """Stages the rows of one task attempt as store files cut at region boundaries.

    Contract: call :meth:`add` with row batches (any order), then
    :meth:`finish` (returns the staged files) or :meth:`abandon` (deletes
    this attempt's directory).  Up to ``run_cells`` cells are buffered;
    each full buffer is sorted and written into each region's staged file
    of the family: the open one while the runs arrive in key order (a run
    starting past the file's last row continues it), else a new one.  At
    most ``max_open_files`` files stay open; the least recently used one
    is closed first.
    """

    def __init__(self, table_fs: FileSystem, job_id: str, task_id: str, regions: Sequence[RegionBounds],
                 families: Mapping[str, FamilySettings], timestamp: int, run_cells: int = _DEFAULT_RUN_CELLS,
                 max_open_files: int = _MAX_OPEN_FILES):
        if not regions:
            raise InvalidArgument("a bulk load needs the table's regions")
        self.fs = table_fs
        self.job_id = job_id
        self.task_id = task_id
        self.regions = list(regions)
        self._starts = [r.start for r in self.regions]
        self.families = dict(families)
        self.timestamp = timestamp
        self.run_cells = run_cells
        self.dir = f"{STAGING_DIR}/{job_id}/{task_id}"
        self._pending: dict[str, list[pa.Table]] = {}
        self._pending_rows: list[pa.RecordBatch] = []  # batches of family:qualifier columns only
        self._pending_cells = 0
        self._runs = 0
        self.max_open_files = max_open_files
        # the staged file each (region id, family) is writing, with its kind ("cells", or
        # ("dense", qualifiers)): a run continues a file of its own kind only
        self._open: dict[tuple[str, str], tuple[object, StagingWriter]] = {}
        self.staged: list[StagedFile] = []
        self._state = "open"
        if table_fs.exists(aborted_marker(job_id)):
            # a task attempt that starts after its job's abort stages nothing at all
            self._state = "abandoned"
            raise InvalidArgument(f"bulk-load job {job_id} was aborted; task {task_id} staged nothing")

    def add(self, rows: pa.RecordBatch) -> None:
        """Add a row batch (``key`` + cell/family columns, as ``SerDe.serialize_batch`` returns)."""
        self._check_open()
        if _column_batch(rows):
            for name in rows.schema.names[1:]:
                family = name.split(":", 1)[0]
                if family not in self.families:
                    raise InvalidArgument(
                        f"the table has no column family {family!r} (families: {sorted(self.families)})"
                    )
            if rows.column(0).null_count:
                raise InvalidArgument("a row batch has a null row key")
            self._pending_rows.append(rows)
            self._pending_cells += sum(
                len(c) - c.null_count for n, c in zip(rows.schema.names[1:], rows.columns[1:]) if not n.endswith("@ts")
            )
        else:
            for family, cells in row_batch_to_cells(rows, self.timestamp).items():
                self._buffer(family, cells)
        if self._pending_cells >= self.run_cells:
            self._write_run()

    def add_cells(self, cells: pa.Table | pa.RecordBatch) -> None:
        """Add cells in :data:`storage.cells.CELL_SCHEMA` with their own timestamps and
        types (puts and delete markers; any order, any of the table's families);
        sorted and written like ``add``'s rows."""
        self._check_open()
        if isinstance(cells, pa.RecordBatch):
            cells = pa.Table.from_batches([cells])
        if not cells.num_rows:
            return
        if cells.schema != CELL_SCHEMA:
            cells = cells.select(CELL_SCHEMA.names).cast(CELL_SCHEMA)
        families = cells.column("family")
        for family in pc.unique(families).to_pylist():
            part = cells.filter(pc.equal(families, pa.scalar(family, pa.binary())))
            self._buffer(family.decode("utf-8", "replace"), part)
        if self._pending_cells >= self.run_cells:
            self._write_run()

    def _check_open(self) -> None:
        if self._state != "open":
            raise InvalidArgument(f"bulk-load task {self.task_id} is already {self._state}")

    def _buffer(self, family: str, cells: pa.Table) -> None:
        if family not in self.families:
            raise InvalidArgument(f"the table has no column family {family!r} (families: {sorted(self.families)})")
        self._pending.setdefault(family, []).append(cells)
        self._pending_cells += cells.num_rows

    def _write_run(self) -> None:
        row_batches, self._pending_rows = self._pending_rows, []
        run = self._runs
        self._runs += 1
        if row_batches:
            table = _sorted_distinct_rows(row_batches) if not self._pending else None
            if table is not None:
                self._pending_cells = 0
                for family, columns in _family_columns(table, self.timestamp).items():
                    self._write_dense_regions(family, columns, run)
                return
            for rows in row_batches:  # repeated keys, or cells in the same run: the cell path
                for family, cells in row_batch_to_cells(rows, self.timestamp).items():
                    self._buffer(family, cells)
        pending, self._pending, self._pending_cells = self._pending, {}, 0
        for family, parts in sorted(pending.items()):
            cells = _sort_dedup(pa.concat_tables(parts))
            self._write_regions(family, cells, run)

    def _region_slices(self, keys) -> Iterator[tuple[RegionBounds, int, int]]:
        """``(region, lo, hi)``: the regions the sorted ``keys`` fall in, with
        the range of keys in each (by bisection, no pass over the keys)."""
        rows = _Rows(keys)
        n = len(keys)
        first = bisect.bisect_right(self._starts, rows[0]) - 1
        for i in range(max(first, 0), len(self.regions)):
            region = self.regions[i]
            lo = bisect.bisect_left(rows, region.start)
            hi = n if region.end is None else bisect.bisect_left(rows, region.end)
            if lo >= hi:
                if lo >= n:
                    return
                continue
            yield region, lo, hi
            if hi >= n:
                return

    def _file_for(self, region: RegionBounds, family: str, kind: object, first_row: bytes, run: int) -> StagingWriter:
        """The open staged file of ``region`` and ``family`` that a piece starting at ``first_row``
        continues (one of the same kind whose last row sorts before it), or a new one.

        Runs of rows that arrive in key order (a sorted DataFrame, a table copied in order) so
        make one file per region and family, however many runs the buffer cut them into."""
        slot = (region.region_id, family)
        current = self._open.pop(slot, None)
        if current is not None:
            if current[0] == kind and current[1].last_row is not None and current[1].last_row < first_row:
                self._open[slot] = current  # most recently used last
                return current[1]
            self.staged.append(current[1].finish())
        if len(self._open) >= self.max_open_files:  # bound the open files: close the least recently used
            oldest = next(iter(self._open))
            self.staged.append(self._open.pop(oldest)[1].finish())
        path = f"{self.dir}/{region.region_id}/{family}/{run:06d}.sf"
        writer = StagingWriter(self.fs, path, region.region_id, family, self.families[family])
        self._open[slot] = (kind, writer)
        return writer

    def _write_regions(self, family: str, cells: pa.Table, run: int) -> None:
        rows = cells.column("row")
        for region, lo, hi in self._region_slices(rows):
            self._file_for(region, family, "cells", rows[lo].as_py(), run).append_cells(cells.slice(lo, hi - lo))

    def _write_dense_regions(self, family: str, columns: tuple, run: int) -> None:
        keys, qualifiers, values, stamps = columns
        for region, lo, hi in self._region_slices(keys):
            size = hi - lo
            part = (keys.slice(lo, size), qualifiers, [v.slice(lo, size) for v in values], [t.slice(lo, size) for t in stamps])
            # a file of dense rows goes on only with the same qualifiers
            self._file_for(region, family, ("dense", tuple(qualifiers)), keys[lo].as_py(), run).append_columns(part)

    def _close_files(self) -> None:
        while self._open:  # one at a time: on a failure the rest are still here for abandon()
            _slot, (_kind, writer) = self._open.popitem()
            self.staged.append(writer.finish())

    def finish(self) -> list[StagedFile]:
        """Write what is buffered; returns every staged file of this attempt."""
        if self._state != "open":
            raise InvalidArgument(f"bulk-load task {self.task_id} is already {self._state}")
        try:
            if self._pending_cells or self._pending_rows:
                self._write_run()
            self._close_files()
        except BaseException:
            self.abandon()
            raise
        if self.fs.exists(aborted_marker(self.job_id)):
            # The job was aborted while this attempt still ran (Spark aborts on
            # the first failed task): its files must not outlive the abort.
            # Checked after writing, and the abort writes the marker before
            # deleting, so no interleaving leaves files behind.
            self.abandon()
            raise InvalidArgument(f"bulk-load job {self.job_id} was aborted; task {self.task_id} discarded its files")
        self._state = "finished"
        return list(self.staged)

    def abandon(self) -> None:
        """Delete this attempt's staged files; in a job already aborted, its whole staging folder
        (an attempt that outlived the abort may have made it again, and no attempt of an aborted
        job keeps anything there)."""
        self._state = "abandoned"
        self._pending = {}
        self._pending_rows = []
        open_files, self._open = self._open, {}
        for _kind, writer in open_files.values():
            writer.abandon()
        self.fs.delete_dir(self.dir)
        if self.fs.exists(aborted_marker(self.job_id)):
            self.fs.delete_dir(f"{STAGING_DIR}/{self.job_id}")
