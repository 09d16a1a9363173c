"""Bulk load: write store files outside the table, then add them to the regions atomically.

This is HBase's ``HFileOutputFormat2`` + ``LoadIncrementalHFiles``
(``completebulkload``) for regionscan tables.

Staging (one task attempt, :class:`BulkLoadTask`): row batches (as the
SerDe's ``serialize_batch`` makes them) are sorted by row key with Arrow
kernels and written as store files cut at region boundaries, one file per
region and family per buffered run.  Batches of ``family:qualifier`` columns
with distinct keys are written column by column as dense blocks
(``StoreFileWriter.append_rows``), never becoming cells; batches with family
maps, repeated keys, or mixed with :meth:`BulkLoadTask.add_cells` in one run
become cells, sorted and deduplicated.  Files go under::

    <table>/.staging/<job id>/<task id>/<region id>/<family>/<run>.sf

Nothing there is visible to readers.  Abort deletes ``.staging/<job id>``
whole, so failed attempts leave nothing behind.

Commit (:func:`commit_load`, on the driver, holding the table's writer
lock, so no writer process may have the table open):

1. roll forward any earlier committed journal (:func:`recover`);
2. re-cut staged files whose region was split since staging;
3. write the journal naming, per region, each staged file and its final
   name (``<table>/bulkload/<job id>.commit``): the commit point;
4. move each staged file to ``regions/<region>/<family>/<name>`` and save
   each region manifest with the new files (overwrite: only them, and the
   flushed sequence id raised past the WAL so older unflushed edits go too);
5. delete the journal, then the staging directory; release the lock.

A crash after step 3 leaves a journal that :func:`recover` (run by the
next commit, or by hand) completes; readers that pin the table apply it
too, so they see all of the load or none of it.
"""

from __future__ import annotations

import bisect
import time
from dataclasses import dataclass, field
from typing import Iterable, Iterator, Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from storage.cells import CELL_SCHEMA, CellType
from storage.errors import InvalidArgument, TableLocked
from storage.vfs.fs import FileSystem
from storage.region.manifest import TableManifest
from storage.schema import FamilySettings
from storage.storefile import StoreFileReader, StoreFileWriter
from storage.wal.reader import WalReader

from storage.region.load_journal import (
    JOURNAL_DIR,
    STAGING_DIR,
    Journal,
    RegionEntry,
    load_region_manifest,
    recover,
    roll_forward,
    write_journal,
)

__all__ = [
    "STAGING_DIR",
    "RegionBounds",
    "StagedFile",
    "BulkLoadTask",
    "row_batch_to_cells",
    "commit_load",
    "prepare_commit",
    "roll_forward",
    "lock_table",
    "write_store_file",
    "abort_load",
    "aborted_marker",
    "recover",
    "LoadReport",
    "table_regions",
]

_LOCK_FILE = ".lock"
_DEFAULT_RUN_CELLS = 1 << 20


@dataclass(frozen=True)
class RegionBounds:
    """A region's id and key range as the load saw it."""

    region_id: str
    start: bytes
    end: bytes | None


@dataclass(frozen=True)
class StagedFile:
    """One staged store file (path relative to the table directory)."""

    region_id: str
    family: str
    path: str
    cells: int
    size: int
    first_row: bytes
    last_row: bytes


@dataclass
class LoadReport:
    """What a commit did."""

    job_id: str
    mode: str
    files: int = 0
    cells: int = 0
    bytes: int = 0
    regions: list[str] = field(default_factory=list)
    recut: int = 0


def table_regions(table_fs: FileSystem) -> tuple[list[RegionBounds], dict[str, FamilySettings]]:
    """The table's regions and family settings from its manifest."""
    manifest = TableManifest.load(table_fs)
    regions = [RegionBounds(r.region_id, r.start, r.end) for r in manifest.regions]
    families = {name: FamilySettings(**opts) for name, opts in manifest.families.items()}
    return regions, families


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
    """Cells in store order; of cells with equal keys the one written last wins."""
    n = cells.num_rows
    cells = cells.append_column("_pos", pa.array(np.arange(n, dtype=np.int64)))
    cells = cells.sort_by([("row", "ascending"), ("qualifier", "ascending"), ("timestamp", "descending"),
                           ("_pos", "descending")])
    cells = cells.drop_columns(["_pos"]).combine_chunks()
    if n > 1:
        same = np.ones(n - 1, dtype=bool)
        for name in ("row", "qualifier", "timestamp"):
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
    arguments, as chunked arrays: :func:`write_store_file` writes them chunk by chunk)."""
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
    each full buffer is sorted and written as its own set of files.
    """

    def __init__(self, table_fs: FileSystem, job_id: str, task_id: str, regions: Sequence[RegionBounds],
                 families: Mapping[str, FamilySettings], timestamp: int, run_cells: int = _DEFAULT_RUN_CELLS):
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
        self.staged: list[StagedFile] = []
        self._state = "open"

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
        """Add put cells in :data:`storage.cells.CELL_SCHEMA` with their own timestamps
        (any order, any of the table's families); sorted and written like ``add``'s rows."""
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
                    self.staged.extend(self._write_dense_regions(family, columns, run))
                return
            for rows in row_batches:  # repeated keys, or cells in the same run: the cell path
                for family, cells in row_batch_to_cells(rows, self.timestamp).items():
                    self._buffer(family, cells)
        pending, self._pending, self._pending_cells = self._pending, {}, 0
        for family, parts in sorted(pending.items()):
            cells = _sort_dedup(pa.concat_tables(parts))
            self.staged.extend(self._write_regions(family, cells, run))

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

    def _write_regions(self, family: str, cells: pa.Table, run: int) -> list[StagedFile]:
        out = []
        for region, lo, hi in self._region_slices(cells.column("row")):
            path = f"{self.dir}/{region.region_id}/{family}/{run:06d}.sf"
            out.append(write_store_file(self.fs, path, region.region_id, family, self.families[family], cells.slice(lo, hi - lo)))
        return out

    def _write_dense_regions(self, family: str, columns: tuple, run: int) -> list[StagedFile]:
        keys, qualifiers, values, stamps = columns
        out = []
        for region, lo, hi in self._region_slices(keys):
            path = f"{self.dir}/{region.region_id}/{family}/{run:06d}.sf"
            size = hi - lo
            part = (keys.slice(lo, size), qualifiers, [v.slice(lo, size) for v in values], [t.slice(lo, size) for t in stamps])
            out.append(write_store_file(self.fs, path, region.region_id, family, self.families[family], None, part))
        return out

    def finish(self) -> list[StagedFile]:
        """Write what is buffered; returns every staged file of this attempt."""
        if self._state != "open":
            raise InvalidArgument(f"bulk-load task {self.task_id} is already {self._state}")
        try:
            if self._pending_cells or self._pending_rows:
                self._write_run()
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
        """Delete this attempt's staged files."""
        self._state = "abandoned"
        self._pending = {}
        self._pending_rows = []
        self.fs.delete_dir(self.dir)


def write_store_file(table_fs: FileSystem, path: str, region_id: str, family: str,
                     settings: FamilySettings, cells: pa.Table | None, columns: tuple | None = None) -> StagedFile:
    """Write sorted cells of one family, or its sorted rows as ``columns``
    (``(keys, qualifiers, values, timestamps)``, see ``StoreFileWriter.append_rows``),
    into a store file at ``path`` with the family's settings."""
    parent = path.rsplit("/", 1)[0]
    table_fs.makedirs(parent)
    writer = StoreFileWriter(table_fs, path, family=family.encode(), block_size=settings.block_size,
                             compression=settings.compression, bloom=settings.bloom_filter)
    try:
        if columns is not None:
            keys, qualifiers, values, stamps = columns
            # aligned zero-copy pieces of the chunked columns, one append_rows each
            pieces = pa.Table.from_arrays([keys, *values, *stamps], names=[str(i) for i in range(1 + 2 * len(values))])
            q = len(values)
            for piece in pieces.to_batches():
                if piece.num_rows:
                    cols = piece.columns
                    writer.append_rows(cols[0], qualifiers, cols[1 : 1 + q], cols[1 + q :])
        else:
            writer.append_batch(cells)
        info = writer.finish(max_seq_id=0)
    except BaseException:
        writer.abandon()
        raise
    return StagedFile(region_id, family, path, info.cell_count, info.file_size, info.first_cell[0], info.last_cell[0])


# -- commit -----------------------------------------------------------------------
def _wal_max_seq(rfs: FileSystem) -> int:
    top = 0
    for name in rfs.listdir("wal"):
        if name.endswith(".wal"):
            for record in WalReader(rfs, f"wal/{name}", decode=False):
                top = max(top, record.seq_id)
    return top


def _recut(table_fs: FileSystem, staged: StagedFile, regions: Sequence[RegionBounds], settings: FamilySettings,
           job_id: str) -> list[StagedFile]:
    """Rewrite a staged file whose region was split into files of the current regions."""
    out = []
    reader = StoreFileReader(table_fs, staged.path)
    try:
        for region in regions:
            if region.end is not None and region.end <= staged.first_row:
                continue
            if region.start > staged.last_row:
                break
            batches = list(reader.scan_batches(region.start or None, region.end))
            if not batches:
                continue
            cells = pa.Table.from_batches(batches, schema=CELL_SCHEMA)
            if not cells.num_rows:
                continue
            stem = staged.path.rsplit(".", 1)[0]
            path = f"{STAGING_DIR}/{job_id}/recut/{region.region_id}/{staged.family}/{stem.replace('/', '_')}.sf"
            out.append(write_store_file(table_fs, path, region.region_id, staged.family, settings, cells))
    finally:
        reader.close()
    return out


def prepare_commit(table_fs: FileSystem, job_id: str, staged: Iterable[StagedFile], mode: str = "append") -> tuple[Journal, LoadReport]:
    """Steps 2-3 of a commit: re-cut what a split moved, name the files, write the journal.

    The caller holds the table's writer lock.  Once this returns the load
    is committed; :func:`roll_forward` makes the manifests show it.
    """
    if mode not in ("append", "overwrite"):
        raise InvalidArgument(f"bulk-load mode must be 'append' or 'overwrite', got {mode!r}")
    regions, families = table_regions(table_fs)
    by_id = {r.region_id: r for r in regions}
    report = LoadReport(job_id, mode)
    placed: list[StagedFile] = []
    for sf in staged:
        if sf.family not in families:
            raise InvalidArgument(f"staged file {sf.path} is for family {sf.family!r}, which the table lacks")
        current = by_id.get(sf.region_id)
        inside = current is not None and current.start <= sf.first_row and (
            current.end is None or sf.last_row < current.end)
        if inside:
            placed.append(sf)
        else:
            placed.extend(_recut(table_fs, sf, regions, families[sf.family], job_id))
            report.recut += 1
    targets = [r.region_id for r in regions] if mode == "overwrite" else sorted({sf.region_id for sf in placed})
    manifests = {rid: load_region_manifest(table_fs, rid) for rid in targets}
    next_ids = {rid: m.next_file_id for rid, m in manifests.items()}
    entries: dict[str, dict[str, list[str]]] = {rid: {} for rid in targets}
    moves: dict[str, list[tuple[str, str, str]]] = {}
    for sf in sorted(placed, key=lambda s: (s.region_id, s.family, s.path)):
        name = f"{next_ids[sf.region_id]:012d}.sf"
        next_ids[sf.region_id] += 1
        entries[sf.region_id].setdefault(sf.family, []).append(name)
        moves.setdefault(sf.region_id, []).append((sf.family, name, sf.path))
        report.files += 1
        report.cells += sf.cells
        report.bytes += sf.size
    region_entries = {}
    for rid in targets:
        flushed = 0
        if mode == "overwrite":
            # past every WAL record, so unflushed edits from before the load are dropped too
            flushed = max(manifests[rid].flushed_seq_id, _wal_max_seq(table_fs.sub(f"regions/{rid}")))
        region_entries[rid] = RegionEntry(
            {f: tuple(n) for f, n in entries[rid].items()}, flushed, tuple(moves.get(rid, ())))
    journal = Journal(job_id, mode, region_entries, int(time.time() * 1000))
    write_journal(table_fs, journal)  # the commit point
    report.regions = targets
    return journal, report


def lock_table(table_fs: FileSystem, job_id: str):
    """Take the table's writer lock for a bulk-load commit, with an error that says why it is needed."""
    try:
        return table_fs.lock(_LOCK_FILE).acquire()
    except TableLocked as exc:
        raise TableLocked(f"bulk load {job_id} cannot commit: {exc}; a bulk load needs the table's writer "
                          "lock, so close the writer processes of this table first") from None


def commit_load(table_fs: FileSystem, job_id: str, staged: Iterable[StagedFile], mode: str = "append") -> LoadReport:
    """Make every staged file of a job part of the table, atomically (see the module docstring).

    Raises :class:`TableLocked` if a writer process has the table open:
    a bulk load requires that no other writer runs during its commit.
    """
    staged = list(staged)
    lock = lock_table(table_fs, job_id)
    try:
        recover(table_fs)
        drop_old_abort_markers(table_fs)
        journal, report = prepare_commit(table_fs, job_id, staged, mode)
        roll_forward(table_fs, journal)
        table_fs.delete_dir(f"{STAGING_DIR}/{job_id}")
        return report
    finally:
        lock.release()


def abort_load(table_fs: FileSystem, job_id: str) -> bool:
    """Delete everything a job staged (every task attempt, finished or not); True if it did.

    A job whose journal was written is committed: its staged files are what
    :func:`recover` moves into place, so they are kept and False returned.
    """
    if table_fs.exists(f"{JOURNAL_DIR}/{job_id}.commit"):
        return False
    # the marker first: a task attempt still running sees it once its files are written
    table_fs.makedirs(STAGING_DIR)
    table_fs.write_bytes(aborted_marker(job_id), str(int(time.time() * 1000)).encode())
    table_fs.delete_dir(f"{STAGING_DIR}/{job_id}")
    return True


def drop_old_abort_markers(table_fs: FileSystem, older_than_s: float = 3600.0) -> int:
    """Delete abort markers older than any task attempt can run; returns how many."""
    cutoff = (time.time() - older_than_s) * 1000
    dropped = 0
    for name in table_fs.listdir(STAGING_DIR):
        if not name.endswith(".aborted"):
            continue
        path = f"{STAGING_DIR}/{name}"
        try:
            stamp = int(table_fs.read_bytes(path) or b"0")
        except (OSError, ValueError):
            stamp = 0  # unreadable: treat as old
        if stamp < cutoff:
            table_fs.delete(path, missing_ok=True)
            dropped += 1
    return dropped


def aborted_marker(job_id: str) -> str:
    """The file (beside the job's staging folder) that says the job was aborted."""
    return f"{STAGING_DIR}/{job_id}.aborted"
